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
//!     docs/benchmarks.md, finding 32).
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
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::log::{Checkpoint, StoredEvent};
use crate::runner::Projection;

pub use field::CachedRoomNight;
pub use field::Interner;
use field::{decode_night, encode_night};
pub use read::{CachedAvailability, CachedDay, CachedHotelDays, CityFields, HotelFields, Reader};

pub const NAME: &str = "availability";

/// A Redis connection that connects lazily and fails fast, so a Redis outage costs
/// readers a fallback, not a hang.
pub fn connect(url: &str) -> anyhow::Result<ConnectionManager> {
    // Several comma-separated URLs name a Redis Cluster's nodes; the model's keys are
    // not laid out for a cluster yet (a cluster connection refuses a pipeline across
    // slots), so say so rather than fail on the URL's syntax.
    if url.contains(',') {
        anyhow::bail!(
            "REDIS_URL names several nodes (a Redis Cluster), which this version does not \
             support yet; give one node's URL"
        );
    }
    let client = redis::Client::open(url)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(250)))
        .set_response_timeout(Some(Duration::from_millis(250)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(100));
    Ok(ConnectionManager::new_lazy_with_config(client, config)?)
}

/// The key names of one deployment: every key starts with its prefix, so several
/// deployments (or test databases) can share one Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The prefix for the deployment whose PostgreSQL database is `database`. `avail4`
    /// is the fourth layout (catalogs as aggregates, city sets, a night's terms in its
    /// counters' field); keys of the earlier ones are left unread.
    pub fn for_database(database: &str) -> Self {
        Self::new(format!("rsv:{database}:avail4"))
    }

    fn current(&self) -> String {
        format!("{}:current", self.prefix)
    }

    fn meta(&self, generation: i32) -> String {
        format!("{}:g{generation}:meta", self.prefix)
    }

    fn hotel(&self, generation: i32, hotel: i64) -> String {
        format!("{}:g{generation}:hotel:{hotel}", self.prefix)
    }

    /// The set of a city's hotels; cities match whatever their case.
    fn city(&self, generation: i32, city: &str) -> String {
        format!("{}:g{generation}:city:{}", self.prefix, city_key(city))
    }

    fn generation_pattern(&self, generation: i32) -> String {
        format!("{}:g{generation}:*", self.prefix)
    }
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
    pub sequence: i64,
    pub position: i64,
}

impl CachedNight {
    pub fn remaining(&self) -> i64 {
        aggregates::room_night::rooms_left(
            self.total_rooms,
            self.overbooking_allowance,
            self.confirmed,
            self.held,
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

/// The projection that keeps availability in Redis.
pub struct AvailabilityProjection {
    redis: ConnectionManager,
    keys: Keys,
}

impl AvailabilityProjection {
    pub fn new(redis: ConnectionManager, keys: Keys) -> Self {
        Self { redis, keys }
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

    /// Queues the writes of one hotel's catalog and its city set.
    fn write_catalog(
        &self,
        write: &mut redis::Pipeline,
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
        if !apply_catalog(&mut hotel, &mut sequence, events) {
            metrics::counter!("availability_gaps_total").increment(1);
            tracing::error!(%key, "availability: hotel stream gap; catalog dropped from cache");
            write.hdel(&key, &[CATALOG, CATALOG_SEQ]);
            if let Some(old) = old_city {
                write.srem(self.keys.city(generation, &old), hotel_id);
            }
            return Ok(());
        }
        let new_city = hotel.details().map(|d| city_key(d.city()));
        if let Some(old) = old_city
            .as_ref()
            .filter(|old| Some(*old) != new_city.as_ref())
        {
            write.srem(self.keys.city(generation, old), hotel_id);
        }
        if let Some(new) = new_city {
            write.sadd(self.keys.city(generation, &new), hotel_id);
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
}

/// What the projection reads before writing: per touched night its field, per touched
/// hotel its catalog.
type StoredFields = Vec<Option<String>>;

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
        // Never write into storage that lost its data (Redis restarted empty): fail,
        // and the runner rebuilds the generation from position zero.
        let intact: bool = self.redis.exists(self.keys.meta(generation)).await?;
        if !intact {
            anyhow::bail!("availability storage of generation {generation} lost its data");
        }
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
                TypedEvent::Reservation { .. } => {}
            }
        }
        // The current values of the touched fields: nights, then catalogs.
        let mut read = redis::pipe();
        for (hotel, night) in nights.keys() {
            read.hmget(self.keys.hotel(generation, *hotel), &[night_field(*night)]);
        }
        for hotel in hotels.keys() {
            read.hmget(self.keys.hotel(generation, *hotel), &[CATALOG_SEQ, CATALOG]);
        }
        let expected = nights.len() + hotels.len();
        let current: Vec<StoredFields> = if expected == 0 {
            Vec::new()
        } else {
            read.query_async(&mut self.redis).await?
        };
        if current.len() != expected {
            anyhow::bail!(
                "availability: {} values for {expected} fields",
                current.len()
            );
        }
        let (stored_nights, stored_hotels) = current.split_at(nights.len());

        let mut write = redis::pipe();
        write.atomic();
        for ((night, by_type), stored) in nights.iter().zip(stored_nights) {
            let field = stored.first().and_then(|v| v.as_deref()).map(str::as_bytes);
            self.write_night(&mut write, generation, *night, by_type, field);
        }
        for ((hotel, events), stored) in hotels.iter().zip(stored_hotels) {
            let seq = stored
                .first()
                .and_then(|v| v.as_deref())
                .map(str::parse::<i64>)
                .transpose()?;
            let catalog = stored.get(1).and_then(|v| v.as_deref());
            self.write_catalog(&mut write, generation, *hotel, events, (seq, catalog))?;
        }
        if let Some(last) = batch.last() {
            write.hset(self.keys.meta(generation), "position", last.position);
        }
        let _: () = write.query_async(&mut self.redis).await?;
        Ok(())
    }

    async fn clear(&mut self, _conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        let pattern = self.keys.generation_pattern(generation);
        let mut keys: Vec<String> = Vec::new();
        {
            let mut iter: redis::AsyncIter<'_, String> = self.redis.scan_match(&pattern).await?;
            while let Some(key) = futures::StreamExt::next(&mut iter).await {
                keys.push(key?);
            }
        }
        for chunk in keys.chunks(500) {
            let _: () = self.redis.unlink(chunk).await?;
        }
        let _: () = self
            .redis
            .hset_multiple(
                self.keys.meta(generation),
                &[("ready", "0"), ("position", "0")],
            )
            .await?;
        Ok(())
    }

    async fn storage_intact(
        &mut self,
        generation: i32,
        checkpoint: Checkpoint,
    ) -> anyhow::Result<bool> {
        if checkpoint == Checkpoint::START {
            return Ok(true);
        }
        // Every batch moves `meta`'s position before its checkpoint commits, so a model
        // behind its checkpoint has lost writes: Redis restarted empty (no `meta`), was
        // restored from an older snapshot, or was left by an older binary while a newer
        // one moved the checkpoint on. Resuming would skip the events in between.
        let position: Option<i64> = self
            .redis
            .hget(self.keys.meta(generation), "position")
            .await?;
        Ok(position.is_some_and(|p| p >= checkpoint.position))
    }

    async fn caught_up(
        &mut self,
        generation: i32,
        checkpoint: Checkpoint,
        as_of: chrono::DateTime<Utc>,
    ) -> anyhow::Result<()> {
        // Only mark ready a generation whose marker still exists: an empty Redis must
        // not be declared caught up.
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
    fn a_cluster_url_is_refused_with_what_is_missing() {
        let error = connect("redis://127.0.0.1:7000,redis://127.0.0.1:7001")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();

        assert!(error.contains("Redis Cluster"), "{error}");
    }

    #[test]
    fn night_fields_name_the_date() {
        let night = NaiveDate::from_ymd_opt(2027, 6, 1).expect("date");
        assert_eq!(night_field(night), "n:2027-06-01");
    }

    fn plan(id: i64) -> RatePlanId {
        RatePlanId::parse(id).expect("plan id")
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
                    aggregates::rate_plan::CancellationPolicy::HOUSE,
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
        assert_eq!(keys.city(2, "Lisbon"), "rsv:db:avail4:g2:city:lisbon");
        assert_eq!(keys.city(2, " LISBON "), keys.city(2, "lisbon"));
        assert_eq!(keys.city(2, "São Paulo"), "rsv:db:avail4:g2:city:são paulo");
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
