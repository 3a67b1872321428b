//! Availability in Redis: what is left to sell per (hotel, room type, night), the terms
//! each night is sold on, and the catalog, so that a hotel's availability and a search
//! across a city's hotels are answered without touching PostgreSQL.
//!
//! The cache filters, the database decides: a hold is never granted from here. Values
//! may be a little stale; every night is stamped with the stream sequence and log
//! position it reflects, and the generation's `meta` says up to when every commit is
//! reflected (`as_of`). Readers judge offers with the domain's own rule
//! (`aggregates::booking::offers`) over what is stored here, as the PostgreSQL fallback
//! does over the write side's rows.
//!
//! Keys of generation `g` (under a prefix naming the database and the layout's version):
//! - `current` — the generation readers use;
//! - `g{g}:meta` — `ready` (1 once caught up), `as_of`, `position`;
//! - `g{g}:hotel:{hotel}` — everything a read of that hotel needs, so one `HMGET`
//!   answers it:
//!   - `catalog`: the `Hotel` aggregate as JSON (details, room types, rate plans: the
//!     same serialization as the write side's `hotels.state`), built by applying the
//!     hotel's events to the stored one, and `catalog_seq`, the hotel stream's sequence
//!     it reflects. Readers fetch `catalog_seq` and keep the decoded catalog in process
//!     while it is unchanged (see [`Reader`]), so a search neither moves nor parses a
//!     catalog per hotel;
//!   - `n:{YYYY-MM-DD}`: every room type's counters on that night and the terms it is
//!     sold on (restrictions for every plan and per plan, the plans' own rates), in a
//!     compact positional form that spells out only what is set (see [`field`]). One
//!     field a night: a search reads every night of the stay and its check-out day for
//!     every hotel of a city, so its bytes are what a search costs (see
//!     docs/benchmarks.md, `search-answer-size`).
//! - `g{g}:city:{city, lower-cased}` — the set of the ids of that city's hotels; a hotel
//!   that moves city leaves its old set.
//!
//! A hotel's availability is one round trip (the current generation, its `meta`, the
//! hotel's fields), plus one more when its catalog changed since this process last
//! decoded it. A city search is two: the current generation, `meta` and the city's set,
//! then one pipeline of an `HMGET` per hotel (plus one for the catalogs that changed).
//! The layout's version is in the prefix (`avail4`): a binary with a new layout finds no
//! `meta` under its prefix, and the runner rebuilds the model from position zero.
//!
//! Each night's counters and terms are updated from its events in stream order (the
//! field's sequence stamps both, as both come from the night's stream); an event whose
//! sequence is not above the stored one was already applied and is skipped, so a batch
//! replayed after a crash changes nothing. The catalog is applied the same way from
//! `catalog_seq`. Held rooms include lapsed holds until their `HoldLapsed` event: the
//! cache errs towards "fewer rooms", the cheap direction. If Redis loses its data,
//! `storage_intact` notices the missing `meta` (or a `meta` behind the checkpoint, as
//! after a restore from an older snapshot) and the runner rebuilds the generation from
//! position zero; readers fall back to PostgreSQL meanwhile (`ready` is 0).

mod field;
mod read;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aggregates::restrictions::RestrictionSet;
use aggregates::{Cents, Hotel, HotelEvent, RatePlanId, RoomNightEvent, TypedEvent};
use chrono::{NaiveDate, Utc};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::log::{Checkpoint, StoredEvent};
use crate::redis_conn::{Parts, RedisConn};
use crate::runner::Projection;

pub use field::CachedRoomNight;
pub use field::Interner;
use field::{decode_night, encode_night};
pub use read::{CachedAvailability, CachedDay, CachedHotelDays, CityFields, HotelFields, Reader};

pub const NAME: &str = "availability";

/// A connection to the model's Redis (a single server, or a cluster's nodes when
/// `url` names several); see [`crate::redis_conn`].
pub fn connect(url: &str) -> anyhow::Result<RedisConn> {
    crate::redis_conn::connect(url)
}

/// How many buckets a deployment's hotels fall into (see [`Keys`]).
pub const BUCKETS: i64 = 256;

/// The key names of one deployment: every key starts with its prefix, so several
/// deployments (or test databases) can share one Redis.
///
/// On a Redis Cluster, keys are placed by their hash tag (the part in braces):
/// - a generation's `current` and `meta` share the deployment's tag, so the script that
///   marks a generation ready, and a read's check of the generation, are one slot;
/// - a hotel's hash carries the tag of its bucket (`{b17}`: the hotel id modulo
///   [`BUCKETS`]), so everything a read of one hotel needs is one slot, and each bucket
///   has a marker key in that slot (`mark:{b17}`), written when a generation is
///   created. A node that comes back empty loses the markers of its buckets with their
///   hotels, which the runner notices (a batch touching them, or its idle check) and
///   answers by rebuilding, as it does for a single server that lost its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    tag: String,
}

impl Keys {
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        let tag = prefix.replace(['{', '}'], "");
        Self { prefix, tag }
    }

    /// The prefix for the deployment whose PostgreSQL database is `database`. `avail5`
    /// is the fifth layout (catalogs as aggregates, city sets, a night's terms in its
    /// counters' field, hash tags for a cluster); keys of the earlier ones are left
    /// unread.
    pub fn for_database(database: &str) -> Self {
        Self::new(format!("rsv:{database}:avail5"))
    }

    fn current(&self) -> String {
        format!("{}:{{{}}}:current", self.prefix, self.tag)
    }

    fn meta(&self, generation: i32) -> String {
        format!("{}:{{{}}}:g{generation}:meta", self.prefix, self.tag)
    }

    fn hotel(&self, generation: i32, hotel: i64) -> String {
        format!(
            "{}:g{generation}:hotel:{{b{}}}:{hotel}",
            self.prefix,
            bucket(hotel)
        )
    }

    /// The marker of a bucket's slot (see the type's doc).
    fn mark(&self, generation: i32, bucket: i64) -> String {
        format!("{}:g{generation}:mark:{{b{bucket}}}", self.prefix)
    }

    fn marks(&self, generation: i32) -> Vec<String> {
        (0..BUCKETS).map(|b| self.mark(generation, b)).collect()
    }

    /// The set of a city's hotels; cities match whatever their case.
    fn city(&self, generation: i32, city: &str) -> String {
        format!("{}:g{generation}:city:{}", self.prefix, city_key(city))
    }

    /// Every key of a generation but its `meta`.
    fn generation_pattern(&self, generation: i32) -> String {
        format!("{}:g{generation}:*", self.prefix)
    }
}

/// The bucket of a hotel: its keys' hash tag.
pub fn bucket(hotel: i64) -> i64 {
    hotel.rem_euclid(BUCKETS)
}

/// How a city is named in its set's key: trimmed and lower-cased, so "Lisbon" and
/// "lisbon " are one city (as the database's `lower(city)` compares them).
fn city_key(city: &str) -> String {
    city.trim().to_lowercase()
}

/// One night as cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CachedNight {
    pub total_rooms: i64,
    pub overbooking_allowance: i64,
    pub rate_cents: i64,
    pub confirmed: i64,
    pub held: i64,
    /// Rooms set aside for group blocks (not for general sale).
    pub blocked: i64,
    pub sequence: i64,
    pub position: i64,
}

impl CachedNight {
    pub fn remaining(&self) -> i64 {
        aggregates::room_night::rooms_left(
            self.total_rooms,
            self.overbooking_allowance,
            self.confirmed,
            self.held.saturating_add(self.blocked),
        )
    }

    /// Applies one event's effect on the counters.
    fn apply(&mut self, event: &RoomNightEvent) {
        match event {
            RoomNightEvent::InventorySet {
                total_rooms,
                overbooking_allowance,
                rate_cents,
                ..
            } => {
                self.total_rooms = i64::from(*total_rooms);
                self.overbooking_allowance = i64::from(*overbooking_allowance);
                self.rate_cents = rate_cents.get();
            }
            RoomNightEvent::RoomsHeld { rooms, .. } => self.held += i64::from(*rooms),
            RoomNightEvent::BlockRoomsHeld { rooms, .. } => {
                self.held += i64::from(*rooms);
                self.blocked -= i64::from(*rooms);
            }
            RoomNightEvent::BlockSet { change, .. } => self.blocked += *change,
            RoomNightEvent::BlockRemoved { rooms, .. }
            | RoomNightEvent::BlockReleased { rooms, .. } => self.blocked -= i64::from(*rooms),
            RoomNightEvent::BlockHoldLapsed {
                rooms, to_block, ..
            } => {
                self.held -= i64::from(*rooms);
                if *to_block {
                    self.blocked += i64::from(*rooms);
                }
            }
            RoomNightEvent::BlockRoomsReleased {
                rooms,
                was_confirmed,
                to_block,
                ..
            } => {
                if *was_confirmed {
                    self.confirmed -= i64::from(*rooms);
                } else {
                    self.held -= i64::from(*rooms);
                }
                if *to_block {
                    self.blocked += i64::from(*rooms);
                }
            }
            RoomNightEvent::RoomsBooked { rooms, .. } => self.confirmed += i64::from(*rooms),
            RoomNightEvent::HoldConfirmed { rooms, .. } => {
                self.held -= i64::from(*rooms);
                self.confirmed += i64::from(*rooms);
            }
            RoomNightEvent::HoldLapsed { rooms, .. } => self.held -= i64::from(*rooms),
            RoomNightEvent::RoomsReleased {
                rooms,
                was_confirmed,
                ..
            } => {
                if *was_confirmed {
                    self.confirmed -= i64::from(*rooms);
                } else {
                    self.held -= i64::from(*rooms);
                }
            }
            RoomNightEvent::RestrictionsSet { .. } | RoomNightEvent::PlanRateSet { .. } => {}
        }
    }
}

/// What shapes the sale of one room type on one night besides its rooms: the
/// restrictions (for every plan and per plan) and the plans' own rates, as the domain's
/// `RoomNight` keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NightTerms {
    #[serde(default, skip_serializing_if = "RestrictionSet::is_empty")]
    pub restrictions: RestrictionSet,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plan_rates: BTreeMap<RatePlanId, Cents>,
}

impl NightTerms {
    pub fn is_empty(&self) -> bool {
        self.restrictions.is_empty() && self.plan_rates.is_empty()
    }

    /// Applies one event's effect on the terms, as `RoomNight::apply_event` does.
    fn apply(&mut self, event: &RoomNightEvent) {
        match event {
            RoomNightEvent::RestrictionsSet {
                rate_plan_id,
                restrictions,
            } => self.restrictions.set(*rate_plan_id, *restrictions),
            RoomNightEvent::PlanRateSet {
                rate_plan_id,
                rate_cents: Some(rate),
            } => {
                self.plan_rates.insert(*rate_plan_id, *rate);
            }
            RoomNightEvent::PlanRateSet {
                rate_plan_id,
                rate_cents: None,
            } => {
                self.plan_rates.remove(rate_plan_id);
            }
            _ => {}
        }
    }
}

fn changes_terms(event: &RoomNightEvent) -> bool {
    matches!(
        event,
        RoomNightEvent::RestrictionsSet { .. } | RoomNightEvent::PlanRateSet { .. }
    )
}

/// The field of a hotel's hash with its catalog (the `Hotel` aggregate as JSON).
const CATALOG: &str = "catalog";
/// The field with the hotel stream's sequence the catalog reflects.
const CATALOG_SEQ: &str = "catalog_seq";

/// The field of a hotel's hash with one night of every room type (see [`field`]).
fn night_field(night: NaiveDate) -> String {
    format!("n:{}", night.format("%Y-%m-%d"))
}

/// Applies a night's events in stream order to its counters and terms. An event whose
/// sequence is not above the night's was applied before (a batch replayed after a
/// crash) and is skipped; `false` when the events skip a sequence number, which is never
/// guessed over.
fn apply_in_order(night: &mut CachedRoomNight, events: &[(&StoredEvent, &RoomNightEvent)]) -> bool {
    let counters = &mut night.counters;
    for (meta, event) in events {
        if meta.sequence <= counters.sequence {
            continue;
        }
        if meta.sequence != counters.sequence + 1 {
            return false;
        }
        counters.apply(event);
        if changes_terms(event) {
            Arc::make_mut(&mut night.terms).apply(event);
        }
        counters.sequence = meta.sequence;
        counters.position = meta.position;
    }
    true
}

/// Applies a hotel's events in stream order to its catalog, as the `Hotel` aggregate
/// applies them; the same rules as [`apply_in_order`] (`sequence` is the stream's
/// sequence the catalog reflects).
fn apply_catalog(
    hotel: &mut Hotel,
    sequence: &mut i64,
    events: &[(&StoredEvent, &HotelEvent)],
) -> bool {
    for (meta, event) in events {
        if meta.sequence <= *sequence {
            continue;
        }
        if meta.sequence != *sequence + 1 {
            return false;
        }
        hotel.apply_event(event);
        *sequence = meta.sequence;
    }
    true
}

/// A batch's events on room nights: per (hotel, night), per room type, in stream order.
type TouchedNights<'a> =
    BTreeMap<(i64, NaiveDate), BTreeMap<i64, Vec<(&'a StoredEvent, &'a RoomNightEvent)>>>;

/// A batch's events on hotels, per hotel, in stream order.
type TouchedHotels<'a> = BTreeMap<i64, Vec<(&'a StoredEvent, &'a HotelEvent)>>;

/// The field of a generation's `meta` naming the PostgreSQL timeline it was built on.
const TIMELINE: &str = "timeline";
/// `meta`'s field holding the transaction of the last event applied: with `position`,
/// where the model stands in commit order (a position alone does not say, since
/// transactions commit in another order than their positions).
const TRANSACTION: &str = "transaction_id";

/// The timeline the primary writes on (the first eight hex digits of its current WAL
/// file's name): it changes when a replica is promoted or a backup is restored into a
/// new primary, never otherwise.
async fn timeline(conn: &mut PgConnection) -> anyhow::Result<String> {
    Ok(
        sqlx::query_scalar("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)")
            .fetch_one(conn)
            .await?,
    )
}

/// How long a batch's writes may wait to be copied to a cluster's replicas.
const REPLICA_WAIT: Duration = Duration::from_millis(200);

/// A hash's fields as read.
type StoredFields = Vec<Option<String>>;

/// What a batch reads of one bucket before writing: its marker, then the touched
/// nights' fields and the touched hotels' catalogs.
#[derive(Default)]
struct BucketReads {
    nights: Vec<(i64, NaiveDate)>,
    hotels: Vec<i64>,
}

/// The projection that keeps availability in Redis.
pub struct AvailabilityProjection {
    redis: RedisConn,
    keys: Keys,
    /// On a cluster, how many replicas every batch's writes wait for (`WAIT`) before
    /// its checkpoint commits: a master that fails over to a replica must not take
    /// writes the checkpoint already counts with it. Learned from the cluster (at most
    /// one), again after a wait that fell short; `None` until then.
    replicas: Option<usize>,
}

impl AvailabilityProjection {
    pub fn new(redis: RedisConn, keys: Keys) -> Self {
        Self {
            redis,
            keys,
            replicas: None,
        }
    }

    /// Queues the write of one night of one hotel: `stored` is its field as read.
    fn write_night(
        &self,
        write: &mut redis::Pipeline,
        generation: i32,
        (hotel, date): (i64, NaiveDate),
        by_type: &BTreeMap<i64, Vec<(&StoredEvent, &RoomNightEvent)>>,
        stored: Option<&[u8]>,
    ) {
        let key = self.keys.hotel(generation, hotel);
        let field = night_field(date);
        let mut room_types: BTreeMap<i64, CachedRoomNight> = stored
            .and_then(|field| decode_night(field, &mut Interner::default()))
            .map(|entries| entries.into_iter().collect())
            .unwrap_or_default();
        for (room_type, events) in by_type {
            let mut night = room_types.remove(room_type).unwrap_or_default();
            if apply_in_order(&mut night, events) {
                room_types.insert(*room_type, night);
            } else {
                // A gap: never guess. The night drops out of the cache (searches show
                // it with nothing left) until a rebuild refills it.
                metrics::counter!("availability_gaps_total").increment(1);
                tracing::error!(%key, %field, room_type, "availability: stream gap; night dropped from cache");
            }
        }
        if room_types.is_empty() {
            write.hdel(&key, &field);
        } else {
            write.hset(&key, &field, encode_night(&room_types));
        }
    }

    /// Queues the writes of one hotel's catalog (into its bucket's `write`) and of its
    /// city sets (each a part of its own: a city's set has a slot of its own).
    fn write_catalog(
        &self,
        (write, cities): (&mut redis::Pipeline, &mut Parts),
        generation: i32,
        hotel_id: i64,
        events: &[(&StoredEvent, &HotelEvent)],
        (stored_seq, stored): (Option<i64>, Option<&str>),
    ) -> anyhow::Result<()> {
        let key = self.keys.hotel(generation, hotel_id);
        let mut hotel: Hotel = match stored {
            Some(json) => serde_json::from_str(json)?,
            None => Hotel::default(),
        };
        let old_city = hotel.details().map(|d| city_key(d.city()));
        let mut sequence = stored_seq.unwrap_or(0);
        let city_write = |cities: &mut Parts, add: bool, city: &str| {
            let mut part = redis::pipe();
            if add {
                part.sadd(self.keys.city(generation, city), hotel_id);
            } else {
                part.srem(self.keys.city(generation, city), hotel_id);
            }
            cities.push(part);
        };
        if !apply_catalog(&mut hotel, &mut sequence, events) {
            metrics::counter!("availability_gaps_total").increment(1);
            tracing::error!(%key, "availability: hotel stream gap; catalog dropped from cache");
            write.hdel(&key, &[CATALOG, CATALOG_SEQ]);
            if let Some(old) = old_city {
                city_write(cities, false, &old);
            }
            return Ok(());
        }
        let new_city = hotel.details().map(|d| city_key(d.city()));
        if let Some(old) = old_city
            .as_ref()
            .filter(|old| Some(*old) != new_city.as_ref())
        {
            city_write(cities, false, old);
        }
        if let Some(new) = new_city {
            city_write(cities, true, &new);
        }
        write.hset_multiple(
            &key,
            &[
                (CATALOG, serde_json::to_string(&hotel)?),
                (CATALOG_SEQ, sequence.to_string()),
            ],
        );
        Ok(())
    }

    /// On a cluster, waits until the writes sent so far are on the replicas; fails (and
    /// the batch is retried, its checkpoint not saved) when they are not.
    async fn wait_for_replicas(&mut self) -> anyhow::Result<()> {
        if !self.redis.is_cluster() {
            return Ok(());
        }
        let wanted = match self.replicas {
            Some(wanted) => wanted,
            None => {
                let wanted = self.redis.replicas_per_master(1).await?;
                self.replicas = Some(wanted);
                wanted
            }
        };
        if wanted == 0 {
            return Ok(());
        }
        // Without a key, `WAIT` goes to every master and answers the fewest replicas
        // that acknowledged this connection's writes there.
        let copied: i64 = redis::cmd("WAIT")
            .arg(wanted)
            .arg(REPLICA_WAIT.as_millis() as u64)
            .query_async(&mut self.redis)
            .await?;
        if copied < wanted as i64 {
            // A replica is gone (or the cluster is failing over): ask the cluster again
            // before the batch is retried.
            self.replicas = None;
            metrics::counter!("availability_replica_wait_short_total").increment(1);
            anyhow::bail!("availability: writes copied to {copied} of {wanted} replicas");
        }
        Ok(())
    }
}

impl Projection for AvailabilityProjection {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn apply(
        &mut self,
        _tx: &mut PgConnection,
        generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let mut nights: TouchedNights = BTreeMap::new();
        let mut hotels: TouchedHotels = BTreeMap::new();
        for stored in batch {
            match stored.typed_for(NAME)? {
                TypedEvent::RoomNight { key, event } => nights
                    .entry((key.hotel_id.get(), key.night))
                    .or_default()
                    .entry(key.room_type_id.get())
                    .or_default()
                    .push((stored, event)),
                TypedEvent::Hotel { hotel_id, event } => hotels
                    .entry(hotel_id.get())
                    .or_default()
                    .push((stored, event)),
                // What is left to sell is the nights' business; a reservation's own
                // events say nothing the nights do not.
                // A block's terms say nothing the nights do not (its rooms are theirs).
                TypedEvent::Reservation { .. } | TypedEvent::Block { .. } => {}
            }
        }
        let mut buckets: BTreeMap<i64, BucketReads> = BTreeMap::new();
        for night in nights.keys() {
            buckets
                .entry(bucket(night.0))
                .or_default()
                .nights
                .push(*night);
        }
        for hotel in hotels.keys() {
            buckets
                .entry(bucket(*hotel))
                .or_default()
                .hotels
                .push(*hotel);
        }

        // Never write into storage that lost its data (Redis restarted empty, or a
        // cluster's node did): fail, and the runner rebuilds the generation from
        // position zero. Read with it the current values of the touched fields.
        let mut read = Parts::new();
        let mut meta = redis::pipe();
        meta.exists(self.keys.meta(generation));
        read.push(meta);
        for (b, touched) in &buckets {
            let mut part = redis::pipe();
            part.exists(self.keys.mark(generation, *b));
            for (hotel, night) in &touched.nights {
                part.hmget(self.keys.hotel(generation, *hotel), &[night_field(*night)]);
            }
            for hotel in &touched.hotels {
                part.hmget(self.keys.hotel(generation, *hotel), &[CATALOG_SEQ, CATALOG]);
            }
            read.push(part);
        }
        let expected = read.len();
        let mut replies = self.redis.query_parts(read, false).await?.into_iter();
        if replies.len() != expected {
            anyhow::bail!(
                "availability: {} replies for {expected} reads",
                replies.len()
            );
        }
        let intact = |reply: Option<redis::Value>| -> anyhow::Result<()> {
            let exists: bool = redis::from_redis_value(reply.unwrap_or(redis::Value::Nil))?;
            if !exists {
                anyhow::bail!("availability storage of generation {generation} lost its data");
            }
            Ok(())
        };
        intact(replies.next())?;
        let mut stored_nights: BTreeMap<(i64, NaiveDate), Option<String>> = BTreeMap::new();
        let mut stored_hotels: BTreeMap<i64, StoredFields> = BTreeMap::new();
        for touched in buckets.values() {
            intact(replies.next())?;
            for night in &touched.nights {
                let fields: StoredFields =
                    redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil))?;
                stored_nights.insert(*night, fields.into_iter().next().flatten());
            }
            for hotel in &touched.hotels {
                let fields: StoredFields =
                    redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil))?;
                stored_hotels.insert(*hotel, fields);
            }
        }

        let mut writes: BTreeMap<i64, redis::Pipeline> = BTreeMap::new();
        let mut cities = Parts::new();
        for (night, by_type) in &nights {
            let field = stored_nights
                .get(night)
                .and_then(|v| v.as_deref())
                .map(str::as_bytes);
            let write = writes.entry(bucket(night.0)).or_insert_with(redis::pipe);
            self.write_night(write, generation, *night, by_type, field);
        }
        for (hotel, events) in &hotels {
            let stored = stored_hotels.get(hotel);
            let seq = stored
                .and_then(|s| s.first())
                .and_then(|v| v.as_deref())
                .map(str::parse::<i64>)
                .transpose()?;
            let catalog = stored.and_then(|s| s.get(1)).and_then(|v| v.as_deref());
            let write = writes.entry(bucket(*hotel)).or_insert_with(redis::pipe);
            self.write_catalog(
                (write, &mut cities),
                generation,
                *hotel,
                events,
                (seq, catalog),
            )?;
        }
        let mut write = Parts::new();
        for part in writes.into_values() {
            write.push(part);
        }
        let mut position = redis::pipe();
        if let Some(last) = batch.last() {
            position.hset_multiple(
                self.keys.meta(generation),
                &[
                    ("position", last.position),
                    (TRANSACTION, last.transaction_id),
                ],
            );
        }
        write.extend(cities);
        if self.redis.is_cluster() {
            // Each bucket's writes are a transaction of their own, and the position
            // moves only once they are all written; then all of it is copied to the
            // replicas before the checkpoint commits. A batch cut short is applied
            // again, and each night and catalog skips the events it has.
            let _ = self.redis.query_parts(write, true).await?;
            let mut last = Parts::new();
            last.push(position);
            let _ = self.redis.query_parts(last, false).await?;
            self.wait_for_replicas().await?;
        } else {
            write.push(position);
            let _ = self.redis.query_parts(write, true).await?;
        }
        Ok(())
    }

    async fn clear(&mut self, conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        let keys = self
            .redis
            .scan_keys(&self.keys.generation_pattern(generation))
            .await?;
        for chunk in keys.chunks(500) {
            let _: () = self.redis.unlink(chunk).await?;
        }
        let _: () = self.redis.del(self.keys.meta(generation)).await?;
        let mut fresh = Parts::new();
        let mut meta = redis::pipe();
        let line = timeline(conn).await?;
        meta.hset_multiple(
            self.keys.meta(generation),
            &[
                ("ready", "0"),
                ("position", "0"),
                (TRANSACTION, "0"),
                (TIMELINE, line.as_str()),
            ],
        );
        fresh.push(meta);
        for b in 0..BUCKETS {
            let mut mark = redis::pipe();
            mark.set(self.keys.mark(generation, b), 1);
            fresh.push(mark);
        }
        let _ = self.redis.query_parts(fresh, false).await?;
        self.wait_for_replicas().await?;
        Ok(())
    }

    async fn storage_intact(
        &mut self,
        conn: &mut PgConnection,
        generation: i32,
        checkpoint: Checkpoint,
    ) -> anyhow::Result<bool> {
        if checkpoint == Checkpoint::START {
            return Ok(true);
        }
        // Every batch moves `meta`'s position before its checkpoint commits, so a model
        // behind its checkpoint has lost writes: Redis restarted empty (no `meta`), was
        // restored from an older snapshot, or was left by an older binary while a newer
        // one moved the checkpoint on. Resuming would skip the events in between. On a
        // cluster, a node that came back empty took its buckets' markers with it.
        let (recorded, position, transaction): (Option<String>, Option<i64>, Option<i64>) = self
            .redis
            .hmget(
                self.keys.meta(generation),
                &[TIMELINE, "position", TRANSACTION],
            )
            .await?;
        let stands_at = match (transaction, position) {
            (Some(transaction_id), Some(position)) => Some(Checkpoint {
                transaction_id,
                position,
            }),
            // Written before the model kept its transaction: only the checkpoint's own
            // position says it is not behind.
            (None, Some(position)) if position == checkpoint.position => Some(checkpoint),
            _ => None,
        };
        if stands_at.is_none_or(|at| at < checkpoint) {
            return Ok(false);
        }
        // A model built from another line of the log's history: PostgreSQL failed over
        // to a replica (or was restored), which starts a new timeline and hands out
        // again the positions of whatever it had not replayed. The model may hold
        // events the log no longer has, and nothing about it looks behind: it is
        // rebuilt from the log as it now is (docs/scaling.md, the failover rule).
        if recorded.as_deref() != Some(timeline(conn).await?.as_str()) {
            tracing::warn!(
                generation,
                "availability: the model was built on another timeline of PostgreSQL; rebuilding"
            );
            return Ok(false);
        }
        let marks: i64 = self.redis.exists(self.keys.marks(generation)).await?;
        Ok(marks == BUCKETS)
    }

    async fn caught_up(
        &mut self,
        generation: i32,
        checkpoint: Checkpoint,
        as_of: chrono::DateTime<Utc>,
    ) -> anyhow::Result<()> {
        // Only mark ready a generation whose marker still exists: an empty Redis must
        // not be declared caught up. (`meta` and `current` share a slot.)
        let script = redis::Script::new(
            r"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
              redis.call('HSET', KEYS[1], 'ready', '1', 'as_of', ARGV[1], 'position', ARGV[2])
              redis.call('SETNX', KEYS[2], ARGV[3])
              return 1",
        );
        let marked: i32 = script
            .key(self.keys.meta(generation))
            .key(self.keys.current())
            .arg(as_of.to_rfc3339())
            .arg(checkpoint.position)
            .arg(generation)
            .invoke_async(&mut self.redis)
            .await?;
        if marked == 0 {
            anyhow::bail!("availability storage of generation {generation} lost its data");
        }
        Ok(())
    }

    async fn switched(&mut self, generation: i32) -> anyhow::Result<()> {
        let _: () = self.redis.set(self.keys.current(), generation).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aggregates::restrictions::NightRestrictions;

    #[test]
    fn night_fields_name_the_date() {
        let night = NaiveDate::from_ymd_opt(2027, 6, 1).expect("date");
        assert_eq!(night_field(night), "n:2027-06-01");
    }

    fn plan(id: i64) -> RatePlanId {
        RatePlanId::parse(id).expect("plan id")
    }

    #[test]
    fn the_cached_counters_follow_a_block_as_the_domain_does() {
        // Given a night of 10 rooms, a block of 4, a booking of 3 from it that lapses
        // back to the block, then the block released
        let code = aggregates::BlockCode::parse("ACME").expect("code");
        let id = aggregates::ReservationId::from_uuid(uuid::Uuid::from_u128(1));
        let at = chrono::Utc::now();
        let key = aggregates::RoomNightKey::new(
            aggregates::HotelId::parse(7).expect("id"),
            aggregates::RoomTypeId::parse(3).expect("id"),
            NaiveDate::from_ymd_opt(2027, 6, 1).expect("date"),
        );
        let events = [
            RoomNightEvent::InventorySet {
                key,
                total_rooms: 10,
                overbooking_allowance: 0,
                rate_cents: Cents::new(100),
            },
            RoomNightEvent::BlockSet {
                code,
                rooms: 4,
                rate_cents: Cents::new(90),
                change: 4,
            },
            RoomNightEvent::BlockRoomsHeld {
                reservation_id: id,
                code,
                rooms: 3,
                expires_at: at,
            },
            RoomNightEvent::BlockHoldLapsed {
                reservation_id: id,
                code,
                rooms: 3,
                expired_at: at,
                to_block: true,
            },
            RoomNightEvent::BlockReleased { code, rooms: 4 },
        ];
        let mut cached = CachedNight::default();
        let mut domain = aggregates::RoomNight::default();
        let mut remaining = Vec::new();
        for event in &events {
            // When each is applied to the cache and to the aggregate
            cached.apply(event);
            domain.apply_event(event);
            // Then both leave the same rooms for sale, and the cache's counters match
            assert_eq!(
                cached.remaining(),
                i64::from(domain.remaining()),
                "{event:?}"
            );
            assert_eq!(cached.blocked, i64::from(domain.blocked()));
            remaining.push(cached.remaining());
        }
        assert_eq!(remaining, [10, 6, 6, 6, 10]);
    }

    fn stop_sell() -> NightRestrictions {
        NightRestrictions {
            stop_sell: true,
            ..NightRestrictions::default()
        }
    }

    /// A stored event carrying only what the model reads of it: sequence and position.
    fn stored(sequence: i64, position: i64) -> StoredEvent {
        StoredEvent::decode(
            crate::log::EventColumns {
                position,
                transaction_id: 1,
                aggregate_type: "room_night".into(),
                aggregate_id: "7:3:2027-06-01".into(),
                sequence,
                event_type: "Test".into(),
                event_version: "1.0".into(),
                payload: serde_json::value::to_raw_value(&()).expect("json"),
                metadata: serde_json::value::to_raw_value(&()).expect("json"),
                recorded_at: Utc::now(),
            },
            &aggregates::EventDecoder::new(Vec::new()),
        )
    }

    #[test]
    fn restrictions_and_plan_rates_are_applied_in_stream_order_once() {
        // Given a night's inventory, a stop-sell for plan 2, a rate for plan 1, and that
        // rate taken back
        let events = [
            RoomNightEvent::InventorySet {
                key: aggregates::RoomNightKey::new(
                    aggregates::HotelId::parse(7).expect("id"),
                    aggregates::RoomTypeId::parse(3).expect("id"),
                    NaiveDate::from_ymd_opt(2027, 6, 1).expect("date"),
                ),
                total_rooms: 5,
                overbooking_allowance: 0,
                rate_cents: Cents::new(10_000),
            },
            RoomNightEvent::RestrictionsSet {
                rate_plan_id: Some(plan(2)),
                restrictions: stop_sell(),
            },
            RoomNightEvent::PlanRateSet {
                rate_plan_id: plan(1),
                rate_cents: Some(Cents::new(12_000)),
            },
            RoomNightEvent::PlanRateSet {
                rate_plan_id: plan(3),
                rate_cents: Some(Cents::new(9_000)),
            },
            RoomNightEvent::PlanRateSet {
                rate_plan_id: plan(3),
                rate_cents: None,
            },
        ];
        let metas: Vec<StoredEvent> = (1..=5).map(|n| stored(n, 100 + n)).collect();
        let batch: Vec<(&StoredEvent, &RoomNightEvent)> = metas.iter().zip(&events).collect();
        let mut night = CachedRoomNight::default();

        // When they are applied, then applied again (a batch replayed after a crash)
        assert!(apply_in_order(&mut night, &batch));
        let once = night.clone();
        assert!(apply_in_order(&mut night, &batch));

        // Then the terms are the night's as the domain keeps them, applied once
        let mut expected = aggregates::RoomNight::default();
        for event in &events {
            expected.apply_event(event);
        }
        assert_eq!(&night.terms.restrictions, expected.restrictions());
        assert_eq!(&night.terms.plan_rates, expected.plan_rates());
        assert_eq!(night, once);
        assert_eq!(night.counters.sequence, 5);
        assert_eq!(night.counters.position, 105);
        assert_eq!(night.counters.total_rooms, 5);

        // And a gap in the sequence is refused, not guessed over
        let later = stored(7, 200);
        let gap = [(&later, &events[2])];
        assert!(!apply_in_order(&mut night, &gap));
    }

    #[test]
    fn the_catalog_is_the_hotel_aggregate_built_from_its_events_once() {
        use aggregates::{HotelCommand, HotelDetails, RoomTypeDetails};
        let mut expected = Hotel::default();
        let mut events = Vec::new();
        for command in [
            HotelCommand::SetDetails {
                hotel_id: aggregates::HotelId::parse(7).expect("id"),
                details: HotelDetails::parse("Casa", "Lisbon", "Europe/Lisbon").expect("details"),
            },
            HotelCommand::SetRoomType {
                room_type_id: aggregates::RoomTypeId::parse(3).expect("id"),
                details: RoomTypeDetails::parse("king", 2).expect("room type"),
            },
            HotelCommand::SetRatePlan {
                rate_plan_id: plan(1),
                plan: aggregates::RatePlan::parse(
                    "flexible",
                    [aggregates::RoomTypeId::parse(3).expect("id")].into(),
                    aggregates::cancellation::CancellationPolicy::HOUSE,
                    aggregates::rate_plan::Pricing::Own,
                )
                .expect("plan"),
            },
        ] {
            for event in expected.decide(command).expect("accepted") {
                expected.apply_event(&event);
                events.push(event);
            }
        }
        let metas: Vec<StoredEvent> = (1..=3).map(|n| stored(n, n)).collect();
        let batch: Vec<(&StoredEvent, &HotelEvent)> = metas.iter().zip(&events).collect();
        let (mut hotel, mut sequence) = (Hotel::default(), 0);
        assert!(apply_catalog(&mut hotel, &mut sequence, &batch[..2]));
        assert!(apply_catalog(&mut hotel, &mut sequence, &batch));
        assert_eq!(hotel, expected);
        assert_eq!(sequence, 3);
        // Stored as the aggregate's own JSON, and read back the same
        let json = serde_json::to_string(&hotel).expect("json");
        assert_eq!(
            serde_json::from_str::<Hotel>(&json).expect("hotel"),
            expected
        );
        // A gap is refused
        let (mut fresh, mut none) = (Hotel::default(), 0);
        assert!(!apply_catalog(&mut fresh, &mut none, &batch[1..]));
    }

    #[test]
    fn cities_are_keyed_whatever_their_case_and_surrounding_spaces() {
        let keys = Keys::for_database("db");
        assert_eq!(keys.city(2, "Lisbon"), "rsv:db:avail5:g2:city:lisbon");
        assert_eq!(keys.city(2, " LISBON "), keys.city(2, "lisbon"));
        assert_eq!(keys.city(2, "São Paulo"), "rsv:db:avail5:g2:city:são paulo");
    }

    fn slot(key: &str) -> u16 {
        crate::redis_conn::slot(key.as_bytes())
    }

    #[test]
    fn what_one_read_or_one_script_needs_is_one_slot_of_a_cluster() {
        // The slot function agrees with the cluster specification's own example.
        assert_eq!(slot("123456789"), 0x31C3);
        let keys = Keys::for_database("rsv_test_1");

        // A generation's pointer and marker, which the ready script touches together
        assert_eq!(slot(&keys.current()), slot(&keys.meta(3)));
        assert_eq!(slot(&keys.meta(3)), slot(&keys.meta(4)));
        // A hotel's hash and its bucket's marker, in every generation
        for hotel in [1, 812, 813, 2_000_001] {
            let mark = keys.mark(3, bucket(hotel));
            assert_eq!(slot(&keys.hotel(3, hotel)), slot(&mark));
            assert_eq!(slot(&keys.hotel(4, hotel)), slot(&mark));
        }
        // Hotels of different buckets spread over the slots
        let slots: std::collections::BTreeSet<u16> = (0..BUCKETS)
            .map(|hotel| slot(&keys.hotel(3, hotel)))
            .collect();
        assert!(slots.len() > 200, "{} slots", slots.len());
        // A prefix with braces of its own does not break the deployment's tag
        let odd = Keys::new("rsv:{odd}:avail5");
        assert_eq!(slot(&odd.current()), slot(&odd.meta(1)));
    }

    #[test]
    fn a_cached_day_gives_the_offer_rule_its_counters_and_terms() {
        let night = CachedNight {
            total_rooms: 4,
            held: 1,
            rate_cents: 10_000,
            ..CachedNight::default()
        };
        let mut terms = NightTerms::default();
        terms.restrictions.set(Some(plan(2)), stop_sell());
        terms.plan_rates.insert(plan(1), Cents::new(11_000));
        let day = CachedDay {
            date: NaiveDate::from_ymd_opt(2027, 6, 1).expect("date"),
            room_types: vec![
                (
                    3,
                    CachedRoomNight {
                        counters: night,
                        terms: Arc::new(terms.clone()),
                    },
                ),
                (
                    4,
                    CachedRoomNight {
                        counters: night,
                        terms: Arc::default(),
                    },
                ),
            ],
        };
        let view = day.view(3).expect("inventory");
        assert_eq!(view.remaining, 3);
        assert_eq!(view.base_rate, Cents::new(10_000));
        assert_eq!(view.restrictions, &terms.restrictions);
        assert_eq!(view.plan_rates, &terms.plan_rates);
        let plain = day.view(4).expect("inventory");
        assert!(plain.restrictions.is_empty() && plain.plan_rates.is_empty());
        assert_eq!(day.view(5), None);
    }
}
