//! Availability in Redis: what is left to sell per (hotel, room type, night), and the
//! catalog needed to answer an availability search without touching PostgreSQL.
//!
//! The cache filters, the database decides: a hold is never granted from here. Values
//! may be a little stale; every night is stamped with the stream sequence and log
//! position it reflects, and the generation's `meta` says up to when every commit is
//! reflected (`as_of`).
//!
//! Keys of generation `g`:
//! - `avail:current` — the generation readers use;
//! - `avail:g{g}:meta` — `ready` (1 once caught up), `as_of`, `position`;
//! - `avail:g{g}:hotel:{hotel}` — `details` and `rt:{room type}` (JSON);
//! - `avail:g{g}:rt:{hotel}:{room type}` — one field per night:
//!   `total,allowance,rate,confirmed,held,sequence,position`.
//!
//! Each night's counters are updated from its events in stream order; an event whose
//! sequence is not above the stored one was already applied and is skipped, so a batch
//! replayed after a crash changes nothing. Held rooms include lapsed holds until their
//! `HoldLapsed` event: the cache errs towards "fewer rooms", the cheap direction.
//! If Redis loses its data, `storage_intact` notices the missing `meta` and the runner
//! rebuilds the generation from position zero; readers fall back to PostgreSQL
//! meanwhile (`ready` is 0).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use aggregates::{HotelEvent, RoomNightEvent};
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

    /// The prefix for the deployment whose PostgreSQL database is `database`.
    pub fn for_database(database: &str) -> Self {
        Self::new(format!("rsv:{database}:avail"))
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

    fn room_type(&self, generation: i32, hotel: i64, room_type: i64) -> String {
        format!("{}:g{generation}:rt:{hotel}:{room_type}", self.prefix)
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
        (self.total_rooms + self.overbooking_allowance - self.confirmed - self.held).max(0)
    }

    fn encode(&self) -> String {
        format!(
            "{},{},{},{},{},{},{}",
            self.total_rooms,
            self.overbooking_allowance,
            self.rate_cents,
            self.confirmed,
            self.held,
            self.sequence,
            self.position
        )
    }

    fn decode(value: &str) -> Option<Self> {
        let mut parts = value.split(',').map(|p| p.parse::<i64>().ok());
        let mut next = || parts.next().flatten();
        Some(Self {
            total_rooms: next()?,
            overbooking_allowance: next()?,
            rate_cents: next()?,
            confirmed: next()?,
            held: next()?,
            sequence: next()?,
            position: next()?,
        })
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
                self.rate_cents = *rate_cents;
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
        }
    }
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

/// A night's key: (hotel, room type, night).
type NightKey = (i64, i64, NaiveDate);

/// `{hotel}:{room type}:{YYYY-MM-DD}`
fn parse_night_stream(id: &str) -> Option<NightKey> {
    let mut parts = id.splitn(3, ':');
    let hotel = parts.next()?.parse().ok()?;
    let room_type = parts.next()?.parse().ok()?;
    let night = NaiveDate::parse_from_str(parts.next()?, "%Y-%m-%d").ok()?;
    Some((hotel, room_type, night))
}

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
        // The nights this batch touches, with their events in order.
        let mut nights: BTreeMap<NightKey, Vec<(&StoredEvent, RoomNightEvent)>> = BTreeMap::new();
        let mut catalog: Vec<(String, String, String)> = Vec::new();
        for stored in batch {
            match stored.aggregate_type.as_str() {
                "room_night" => {
                    let key = parse_night_stream(&stored.aggregate_id).ok_or_else(|| {
                        anyhow::anyhow!("unexpected room night stream {}", stored.aggregate_id)
                    })?;
                    let event: RoomNightEvent = serde_json::from_value(stored.payload.clone())?;
                    nights.entry(key).or_default().push((stored, event));
                }
                "hotel" => {
                    let hotel: i64 = stored.aggregate_id.parse()?;
                    let event: HotelEvent = serde_json::from_value(stored.payload.clone())?;
                    let key = self.keys.hotel(generation, hotel);
                    match event {
                        HotelEvent::HotelDetailsSet { details, .. } => catalog.push((
                            key,
                            "details".into(),
                            serde_json::to_string(&CachedHotel {
                                name: details.name().to_owned(),
                                city: details.city().to_owned(),
                                timezone: details.timezone().to_owned(),
                            })?,
                        )),
                        HotelEvent::RoomTypeSet {
                            room_type_id,
                            details,
                        } => catalog.push((
                            key,
                            format!("rt:{room_type_id}"),
                            serde_json::to_string(&CachedRoomType {
                                name: details.name().to_owned(),
                                max_occupancy: details.max_occupancy(),
                            })?,
                        )),
                    }
                }
                _ => {}
            }
        }

        // Current values of the touched nights.
        let keys: Vec<(String, String)> = nights
            .keys()
            .map(|(h, t, n)| {
                (
                    self.keys.room_type(generation, *h, *t),
                    n.format("%Y-%m-%d").to_string(),
                )
            })
            .collect();
        let mut read = redis::pipe();
        for (key, field) in &keys {
            read.hget(key, field);
        }
        let current: Vec<Option<String>> = if keys.is_empty() {
            Vec::new()
        } else {
            read.query_async(&mut self.redis).await?
        };

        let mut write = redis::pipe();
        write.atomic();
        for (((key, field), stored), events) in keys.iter().zip(current).zip(nights.values()) {
            let mut night = stored
                .as_deref()
                .and_then(CachedNight::decode)
                .unwrap_or_default();
            let mut broken = false;
            for (meta, event) in events {
                if meta.sequence <= night.sequence {
                    continue; // applied before (a batch replayed after a crash)
                }
                if meta.sequence != night.sequence + 1 {
                    broken = true;
                    break;
                }
                night.apply(event);
                night.sequence = meta.sequence;
                night.position = meta.position;
            }
            if broken {
                // A gap: never guess. Readers fall back to PostgreSQL for this night
                // until a rebuild refills it.
                metrics::counter!("availability_gaps_total").increment(1);
                tracing::error!(%key, %field, "availability: stream gap; night dropped from cache");
                write.hdel(key, field);
            } else {
                write.hset(key, field, night.encode());
            }
        }
        for (key, field, value) in &catalog {
            write.hset(key, field, value);
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
        let exists: bool = self.redis.exists(self.keys.meta(generation)).await?;
        Ok(exists)
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

/// The first round trip of a read: the current generation, the assumed generation's
/// `ready` and `as_of`, and the hotel's catalog in it.
type FirstRoundTrip = (
    Option<i32>,
    (Option<String>, Option<String>),
    HashMap<String, String>,
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
    // 0 is never a generation (they count from 1): the first read learns the pointer.
    let mut generation = hint.0.load(Ordering::Relaxed);
    let mut found = None;
    // Twice is enough unless rebuilds switch faster than reads; then PostgreSQL answers.
    for _ in 0..2 {
        let (current, meta, catalog): FirstRoundTrip = redis::pipe()
            .get(keys.current())
            .hmget(keys.meta(generation), &["ready", "as_of"])
            .hgetall(keys.hotel(generation, hotel))
            .query_async(redis)
            .await?;
        let Some(current) = current else {
            return Ok(None);
        };
        if current == generation {
            found = Some((meta, catalog));
            break;
        }
        hint.0.store(current, Ordering::Relaxed);
        generation = current;
    }
    let Some(((ready, as_of), catalog)) = found else {
        return Ok(None);
    };
    if ready.as_deref() != Some("1") {
        return Ok(None);
    }
    let Some(as_of) = as_of
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s).ok())
        .map(|t| t.with_timezone(&Utc))
    else {
        return Ok(None);
    };
    let Some(hotel_details) = catalog
        .get("details")
        .and_then(|d| serde_json::from_str::<CachedHotel>(d).ok())
    else {
        return Ok(None);
    };
    let mut room_types: BTreeMap<i64, CachedRoomType> = BTreeMap::new();
    for (field, value) in &catalog {
        if let Some(id) = field.strip_prefix("rt:").and_then(|id| id.parse().ok()) {
            if let Ok(room_type) = serde_json::from_str(value) {
                room_types.insert(id, room_type);
            }
        }
    }
    let fields: Vec<String> = nights
        .iter()
        .map(|n| n.format("%Y-%m-%d").to_string())
        .collect();
    let mut pipe = redis::pipe();
    for id in room_types.keys() {
        pipe.cmd("HMGET")
            .arg(keys.room_type(generation, hotel, *id))
            .arg(&fields);
    }
    let values: Vec<Vec<Option<String>>> = if room_types.is_empty() {
        Vec::new()
    } else {
        pipe.query_async(redis).await?
    };
    let room_types = room_types
        .into_iter()
        .zip(values)
        .map(|((room_type_id, room_type), values)| CachedRoomTypeNights {
            room_type_id,
            room_type,
            nights: nights
                .iter()
                .copied()
                .zip(
                    values
                        .into_iter()
                        .map(|v| v.as_deref().and_then(CachedNight::decode)),
                )
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
        assert_eq!(CachedNight::decode(&night.encode()), Some(night));
        assert_eq!(night.remaining(), 5);
        assert_eq!(CachedNight::decode("1,2,3"), None);
    }

    #[test]
    fn night_stream_ids_parse() {
        assert_eq!(
            parse_night_stream("812:3:2027-06-01"),
            Some((812, 3, NaiveDate::from_ymd_opt(2027, 6, 1).expect("date")))
        );
        assert_eq!(parse_night_stream("812:3"), None);
    }
}
