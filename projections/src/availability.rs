//! Availability in Redis: what is left to sell per (hotel, room type, night), and the
//! catalog needed to answer an availability search without touching PostgreSQL.
//!
//! The cache filters, the database decides: a hold is never granted from here. Values
//! may be a little stale; every night is stamped with the stream sequence and log
//! position it reflects, and the generation's `meta` says up to when every commit is
//! reflected (`as_of`).
//!
//! Keys of generation `g` (under a prefix naming the database and the layout's version):
//! - `current` — the generation readers use;
//! - `g{g}:meta` — `ready` (1 once caught up), `as_of`, `position`;
//! - `g{g}:hotel:{hotel}` — everything a search of that hotel reads, so that one
//!   `HMGET` answers it: `details` (JSON), `room_types` (JSON, by id) and one field per
//!   night, `n:{YYYY-MM-DD}`, holding every room type's counters on that night:
//!   `{room type}={total},{allowance},{rate},{confirmed},{held},{sequence},{position};...`.
//!
//! A search is then one round trip of three commands (the current generation, its
//! `meta`, the hotel's fields), where a layout with a hash per room type took two round
//! trips and a reply per room type and night (see docs/benchmarks.md, finding 22).
//! The layout's version is in the prefix: a binary with a new layout finds no `meta`
//! under its prefix, and the runner rebuilds the model from position zero.
//!
//! Each night's counters are updated from its events in stream order; an event whose
//! sequence is not above the stored one was already applied and is skipped, so a batch
//! replayed after a crash changes nothing. Held rooms include lapsed holds until their
//! `HoldLapsed` event: the cache errs towards "fewer rooms", the cheap direction.
//! If Redis loses its data, `storage_intact` notices the missing `meta` (or a `meta`
//! behind the checkpoint, as after a restore from an older snapshot) and the runner
//! rebuilds the generation from position zero; readers fall back to PostgreSQL
//! meanwhile (`ready` is 0).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use aggregates::{HotelEvent, RoomNightEvent, TypedEvent};
use chrono::{NaiveDate, Utc};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use crate::log::{Checkpoint, StoredEvent};
use crate::runner::Projection;

pub const NAME: &str = "availability";

/// A Redis connection that connects lazily and fails fast, so a Redis outage costs
/// readers a fallback, not a hang.
pub fn connect(url: &str) -> anyhow::Result<ConnectionManager> {
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

    /// The prefix for the deployment whose PostgreSQL database is `database`. `avail2`
    /// is the second layout (one hash per hotel); keys of the first are left unread.
    pub fn for_database(database: &str) -> Self {
        Self::new(format!("rsv:{database}:avail2"))
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

    fn generation_pattern(&self, generation: i32) -> String {
        format!("{}:g{generation}:*", self.prefix)
    }
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

/// The field of a hotel's hash with its details.
const DETAILS: &str = "details";
/// The field of a hotel's hash with its room types.
const ROOM_TYPES: &str = "room_types";

/// The field of a hotel's hash with one night of every room type.
fn night_field(night: NaiveDate) -> String {
    format!("n:{}", night.format("%Y-%m-%d"))
}

/// One night of a hotel, every room type that has inventory on it, in id order.
fn encode_night(room_types: &BTreeMap<i64, CachedNight>) -> String {
    use std::fmt::Write;
    let mut field = String::with_capacity(room_types.len() * 48);
    for (id, night) in room_types {
        let separator = if field.is_empty() { "" } else { ";" };
        // Writing into a String cannot fail.
        let _ = write!(
            field,
            "{separator}{id}={},{},{},{},{},{},{}",
            night.total_rooms,
            night.overbooking_allowance,
            night.rate_cents,
            night.confirmed,
            night.held,
            night.sequence,
            night.position
        );
    }
    field
}

/// The room types of a night field, in id order; `None` if the field is malformed.
/// Every search decodes three of these, so this walks the bytes once, without
/// splitting strings or building maps (see docs/benchmarks.md, finding 25).
fn decode_night(value: &str) -> Option<Vec<(i64, CachedNight)>> {
    let mut entries = Vec::with_capacity(8);
    let mut rest = value.as_bytes();
    while !rest.is_empty() {
        let id = take_int(&mut rest, b'=')?;
        let night = CachedNight {
            total_rooms: take_int(&mut rest, b',')?,
            overbooking_allowance: take_int(&mut rest, b',')?,
            rate_cents: take_int(&mut rest, b',')?,
            confirmed: take_int(&mut rest, b',')?,
            held: take_int(&mut rest, b',')?,
            sequence: take_int(&mut rest, b',')?,
            position: take_int(&mut rest, b';')?,
        };
        entries.push((id, night));
    }
    Some(entries)
}

/// The integer at the start of `rest`, which ends at `end` (consumed) or at the end of
/// the input; `None` unless it is an optional `-` and at least one digit.
fn take_int(rest: &mut &[u8], end: u8) -> Option<i64> {
    let negative = rest.first() == Some(&b'-');
    let start = usize::from(negative);
    let mut value: i64 = 0;
    let mut i = start;
    while let Some(&byte) = rest.get(i) {
        if byte == end {
            break;
        }
        let digit = byte.checked_sub(b'0').filter(|d| *d <= 9)?;
        value = value.checked_mul(10)?.checked_add(i64::from(digit))?;
        i += 1;
    }
    if i == start {
        return None;
    }
    *rest = rest.get(i + 1..).unwrap_or_default();
    Some(if negative { -value } else { value })
}

/// Applies a night's events in stream order. An event whose sequence is not above the
/// night's was applied before (a batch replayed after a crash) and is skipped; `false`
/// when the events skip a sequence number, which is never guessed over.
fn apply_in_order(night: &mut CachedNight, events: &[(&StoredEvent, &RoomNightEvent)]) -> bool {
    for (meta, event) in events {
        if meta.sequence <= night.sequence {
            continue;
        }
        if meta.sequence != night.sequence + 1 {
            return false;
        }
        night.apply(event);
        night.sequence = meta.sequence;
        night.position = meta.position;
    }
    true
}

/// Catalog entries as cached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedHotel {
    pub name: String,
    pub city: String,
    pub timezone: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedRoomType {
    pub name: String,
    pub max_occupancy: u32,
}

/// A batch's events on room nights: per (hotel, night), per room type, in stream order.
type TouchedNights<'a> =
    BTreeMap<(i64, NaiveDate), BTreeMap<i64, Vec<(&'a StoredEvent, &'a RoomNightEvent)>>>;

/// The projection that keeps availability in Redis.
pub struct AvailabilityProjection {
    redis: ConnectionManager,
    keys: Keys,
}

impl AvailabilityProjection {
    pub fn new(redis: ConnectionManager, keys: Keys) -> Self {
        Self { redis, keys }
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
        // Never write into storage that lost its data (Redis restarted empty): fail,
        // and the runner rebuilds the generation from position zero.
        let intact: bool = self.redis.exists(self.keys.meta(generation)).await?;
        if !intact {
            anyhow::bail!("availability storage of generation {generation} lost its data");
        }
        let mut nights: TouchedNights = BTreeMap::new();
        // The catalog's changes per hotel: the last details, and room types in order.
        let mut details: BTreeMap<i64, CachedHotel> = BTreeMap::new();
        let mut room_types: BTreeMap<i64, Vec<(i64, CachedRoomType)>> = BTreeMap::new();
        for stored in batch {
            match stored.typed_for(NAME)? {
                TypedEvent::RoomNight { key, event } => nights
                    .entry((key.hotel_id.get(), key.night))
                    .or_default()
                    .entry(key.room_type_id.get())
                    .or_default()
                    .push((stored, event)),
                TypedEvent::Hotel { hotel_id, event } => match event {
                    HotelEvent::HotelDetailsSet { details: d, .. } => {
                        details.insert(
                            hotel_id.get(),
                            CachedHotel {
                                name: d.name().to_owned(),
                                city: d.city().to_owned(),
                                timezone: d.timezone().name().to_owned(),
                            },
                        );
                    }
                    HotelEvent::RoomTypeSet {
                        room_type_id,
                        details: d,
                    } => room_types.entry(hotel_id.get()).or_default().push((
                        room_type_id.get(),
                        CachedRoomType {
                            name: d.name().to_owned(),
                            max_occupancy: d.max_occupancy(),
                        },
                    )),
                    HotelEvent::RatePlanSet { .. } => {}
                },
                // What is left to sell is the nights' business; a reservation's own
                // events say nothing the nights do not.
                TypedEvent::Reservation { .. } => {}
            }
        }

        // The current values of the touched fields: nights, then room type lists.
        let mut read = redis::pipe();
        for (hotel, night) in nights.keys() {
            read.hget(self.keys.hotel(generation, *hotel), night_field(*night));
        }
        for hotel in room_types.keys() {
            read.hget(self.keys.hotel(generation, *hotel), ROOM_TYPES);
        }
        let expected = nights.len() + room_types.len();
        let current: Vec<Option<String>> = if expected == 0 {
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
        let (stored_nights, stored_room_types) = current.split_at(nights.len());

        let mut write = redis::pipe();
        write.atomic();
        for (((hotel, date), by_type), stored) in nights.iter().zip(stored_nights) {
            let key = self.keys.hotel(generation, *hotel);
            let field = night_field(*date);
            let mut night_map: BTreeMap<i64, CachedNight> = stored
                .as_deref()
                .and_then(decode_night)
                .map(|entries| entries.into_iter().collect())
                .unwrap_or_default();
            for (room_type, events) in by_type {
                let mut night = night_map.get(room_type).copied().unwrap_or_default();
                if apply_in_order(&mut night, events) {
                    night_map.insert(*room_type, night);
                } else {
                    // A gap: never guess. The night drops out of the cache (searches
                    // show it with nothing left) until a rebuild refills it.
                    metrics::counter!("availability_gaps_total").increment(1);
                    tracing::error!(%key, %field, room_type, "availability: stream gap; night dropped from cache");
                    night_map.remove(room_type);
                }
            }
            if night_map.is_empty() {
                write.hdel(&key, &field);
            } else {
                write.hset(&key, &field, encode_night(&night_map));
            }
        }
        for (hotel, hotel_details) in &details {
            write.hset(
                self.keys.hotel(generation, *hotel),
                DETAILS,
                serde_json::to_string(hotel_details)?,
            );
        }
        for ((hotel, changes), stored) in room_types.iter().zip(stored_room_types) {
            let mut all: BTreeMap<i64, CachedRoomType> = match stored {
                Some(json) => serde_json::from_str(json)?,
                None => BTreeMap::new(),
            };
            all.extend(changes.iter().cloned());
            write.hset(
                self.keys.hotel(generation, *hotel),
                ROOM_TYPES,
                serde_json::to_string(&all)?,
            );
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

/// What the cache says about one room type over a stay.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedRoomTypeNights {
    pub room_type_id: i64,
    pub room_type: CachedRoomType,
    /// One per night of the stay; `None` where the night has no inventory.
    pub nights: Vec<(NaiveDate, Option<CachedNight>)>,
}

/// An availability answer from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedAvailability {
    pub hotel: CachedHotel,
    pub as_of: chrono::DateTime<Utc>,
    pub room_types: Vec<CachedRoomTypeNights>,
}

/// The generation the last read found current, which the next read assumes and checks
/// in the same round trip (`GET current` rides in the pipeline that reads that
/// generation's `meta` and catalog). Generations change only when the model is rebuilt,
/// so a read costs two round trips instead of three; a read that finds the pointer
/// moved reads again under the new generation, so it never answers from a stale one.
#[derive(Debug, Default)]
pub struct GenerationHint(AtomicI32);

/// A read's one round trip: the current generation, the assumed generation's `ready`
/// and `as_of`, and the hotel's `details`, `room_types` and nights in it.
type RoundTrip = (
    Option<i32>,
    (Option<String>, Option<String>),
    Vec<Option<String>>,
);

/// Reads availability for `hotel` over `nights` from the generation readers use.
/// `Ok(None)` when the cache cannot answer (not built, not caught up, unknown hotel):
/// the caller then asks PostgreSQL. Errors mean Redis is unreachable.
pub async fn read(
    redis: &mut ConnectionManager,
    keys: &Keys,
    hint: &GenerationHint,
    hotel: i64,
    nights: &[NaiveDate],
) -> anyhow::Result<Option<CachedAvailability>> {
    let mut fields: Vec<String> = Vec::with_capacity(nights.len() + 2);
    fields.push(DETAILS.to_owned());
    fields.push(ROOM_TYPES.to_owned());
    fields.extend(nights.iter().map(|n| night_field(*n)));
    // 0 is never a generation (they count from 1): the first read learns the pointer.
    let mut generation = hint.0.load(Ordering::Relaxed);
    let mut found = None;
    // Twice is enough unless rebuilds switch faster than reads; then PostgreSQL answers.
    for _ in 0..2 {
        let (current, meta, values): RoundTrip = redis::pipe()
            .get(keys.current())
            .hmget(keys.meta(generation), &["ready", "as_of"])
            .hmget(keys.hotel(generation, hotel), &fields)
            .query_async(redis)
            .await?;
        let Some(current) = current else {
            return Ok(None);
        };
        if current == generation {
            found = Some((meta, values));
            break;
        }
        hint.0.store(current, Ordering::Relaxed);
        generation = current;
    }
    let Some(((ready, as_of), values)) = found else {
        return Ok(None);
    };
    if ready.as_deref() != Some("1") || values.len() != fields.len() {
        return Ok(None);
    }
    let Some(as_of) = as_of
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s).ok())
        .map(|t| t.with_timezone(&Utc))
    else {
        return Ok(None);
    };
    let mut values = values.into_iter();
    let Some(hotel_details) = values
        .next()
        .flatten()
        .and_then(|d| serde_json::from_str::<CachedHotel>(&d).ok())
    else {
        return Ok(None);
    };
    let room_types: BTreeMap<i64, CachedRoomType> = match values.next().flatten() {
        None => BTreeMap::new(),
        Some(json) => match serde_json::from_str(&json) {
            Ok(room_types) => room_types,
            Err(_) => return Ok(None),
        },
    };
    let by_night: Vec<Vec<(i64, CachedNight)>> = values
        .map(|v| v.as_deref().and_then(decode_night).unwrap_or_default())
        .collect();
    let room_types = room_types
        .into_iter()
        .map(|(room_type_id, room_type)| CachedRoomTypeNights {
            room_type_id,
            room_type,
            nights: nights
                .iter()
                .zip(&by_night)
                .map(|(date, night)| {
                    let cached = night.iter().find(|(id, _)| *id == room_type_id);
                    (*date, cached.map(|(_, n)| *n))
                })
                .collect(),
        })
        .collect();
    Ok(Some(CachedAvailability {
        hotel: hotel_details,
        as_of,
        room_types,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_night_round_trips_through_its_encoding() {
        let night = CachedNight {
            total_rooms: 10,
            overbooking_allowance: 2,
            rate_cents: 18_000,
            confirmed: 3,
            held: 4,
            sequence: 9,
            position: 1234,
        };
        let field = encode_night(&BTreeMap::from([(3, night)]));
        assert_eq!(field, "3=10,2,18000,3,4,9,1234");
        assert_eq!(decode_night(&field), Some(vec![(3, night)]));
        assert_eq!(night.remaining(), 5);
    }

    #[test]
    fn a_night_of_every_room_type_round_trips_through_its_field() {
        let night = |total_rooms, held| CachedNight {
            total_rooms,
            held,
            rate_cents: 9_900,
            sequence: 3,
            position: 77,
            ..CachedNight::default()
        };
        let room_types = BTreeMap::from([(1, night(10, 2)), (12, night(4, 0))]);
        let field = encode_night(&room_types);
        assert_eq!(field, "1=10,0,9900,0,2,3,77;12=4,0,9900,0,0,3,77");
        assert_eq!(decode_night(&field), Some(room_types.into_iter().collect()));
        assert_eq!(decode_night(""), Some(Vec::new()));
        for malformed in [
            "1=10,0,9900",
            "x=10,0,9900,0,2,3,77",
            "1=10,0,9900,0,2,3,",
            "1=10,0,9900,0,2,3,77,8",
            "1=10,,9900,0,2,3,77",
            "1=10,0,9900,0,2,3,99999999999999999999",
            "1=10,0,99 00,0,2,3,77",
        ] {
            assert_eq!(decode_night(malformed), None, "{malformed}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_night_field_decodes_to_what_was_encoded(
            entries in proptest::collection::btree_map(
                proptest::num::i64::ANY,
                proptest::array::uniform7(i64::MIN + 1..=i64::MAX),
                0..8,
            )
        ) {
            let room_types: BTreeMap<i64, CachedNight> = entries
                .into_iter()
                .filter(|(id, _)| *id != i64::MIN)
                .map(|(id, [a, b, c, d, e, f, g])| {
                    (id, CachedNight {
                        total_rooms: a,
                        overbooking_allowance: b,
                        rate_cents: c,
                        confirmed: d,
                        held: e,
                        sequence: f,
                        position: g,
                    })
                })
                .collect();
            let field = encode_night(&room_types);
            proptest::prop_assert_eq!(decode_night(&field), Some(room_types.into_iter().collect()));
        }
    }

    #[test]
    fn night_fields_name_the_date() {
        let night = NaiveDate::from_ymd_opt(2027, 6, 1).expect("date");
        assert_eq!(night_field(night), "n:2027-06-01");
    }
}
