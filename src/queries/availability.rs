//! Availability for a stay: from the Redis read model when it can answer with
//! confidence, else from the write side's rows, exact as of now.
//!
//! The read model is skipped (and PostgreSQL answers) when Redis is down or slow, the
//! projection has not caught up, the hotel is unknown to it, or a night is down to its
//! last room, where a stale "1 left" costs most. Either way the answer says where it
//! came from and as of when; a hold never relies on it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aggregates::room_night::rooms_left;
use aggregates::{HotelId, StayDates};
use chrono::{DateTime, NaiveDate, Utc};
use projections::availability::{GenerationHint, Keys};
use sqlx::Row;

use super::{Queries, QueryError};

/// How long a read waits for Redis before asking PostgreSQL instead.
const CACHE_TIMEOUT: Duration = Duration::from_millis(300);

/// A handle on the availability read model.
#[derive(Clone)]
pub struct AvailabilityCache {
    pub redis: redis::aio::ConnectionManager,
    pub keys: Keys,
    /// The generation readers last found current (shared by every request).
    pub generation: Arc<GenerationHint>,
}

/// Which source answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The Redis read model, as of its `as_of`.
    Cache,
    /// The write side's rows, as of now.
    Database,
}

impl Source {
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::Cache => "cache",
            Source::Database => "database",
        }
    }
}

/// One night of one room type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NightAvailability {
    pub date: NaiveDate,
    pub remaining: u32,
    /// `None` for a night without inventory.
    pub rate_cents: Option<i64>,
}

/// Every night of the stay for one room type, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomTypeNights {
    pub room_type_id: i64,
    pub name: String,
    pub nights: Vec<NightAvailability>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StayAvailability {
    pub source: Source,
    pub as_of: DateTime<Utc>,
    pub room_types: Vec<RoomTypeNights>,
}

fn to_u32(rooms: i64) -> u32 {
    u32::try_from(rooms.max(0)).unwrap_or(u32::MAX)
}

impl Queries {
    /// Remaining rooms and rates on every night of `stay`, per room type of the hotel;
    /// `None` if there is no such hotel.
    pub async fn availability(
        &self,
        hotel: HotelId,
        stay: &StayDates,
    ) -> Result<Option<StayAvailability>, QueryError> {
        let answer = match self.cached_availability(hotel, stay).await {
            Some(answer) => Some(answer),
            None => self.database_availability(hotel, stay).await?,
        };
        if let Some(answer) = &answer {
            metrics::counter!("availability_reads_total", "source" => answer.source.as_str())
                .increment(1);
        }
        Ok(answer)
    }

    async fn cached_availability(
        &self,
        hotel: HotelId,
        stay: &StayDates,
    ) -> Option<StayAvailability> {
        let cache = self.availability.as_ref()?;
        let nights: Vec<NaiveDate> = stay.nights().collect();
        let mut redis = cache.redis.clone();
        let read = projections::availability::read(
            &mut redis,
            &cache.keys,
            &cache.generation,
            hotel.get(),
            &nights,
        );
        let cached = match tokio::time::timeout(CACHE_TIMEOUT, read).await {
            Ok(Ok(Some(cached))) => cached,
            Ok(Ok(None)) => return None,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "availability cache unreachable; reading PostgreSQL");
                metrics::counter!("availability_cache_errors_total").increment(1);
                return None;
            }
            Err(_) => {
                metrics::counter!("availability_cache_errors_total").increment(1);
                return None;
            }
        };
        let last_room = cached.room_types.iter().any(|rt| {
            rt.nights
                .iter()
                .any(|(_, night)| night.is_some_and(|n| n.remaining() <= 1))
        });
        if last_room {
            return None;
        }
        Some(StayAvailability {
            source: Source::Cache,
            as_of: cached.as_of,
            room_types: cached
                .room_types
                .into_iter()
                .map(|rt| RoomTypeNights {
                    room_type_id: rt.room_type_id,
                    name: rt.room_type.name,
                    nights: rt
                        .nights
                        .into_iter()
                        .map(|(date, night)| NightAvailability {
                            date,
                            remaining: night.map_or(0, |n| to_u32(n.remaining())),
                            rate_cents: night.map(|n| n.rate_cents),
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    /// The write side's own rows: exact as of now. Lapsed holds do not count, whether
    /// or not anyone has dropped them yet.
    async fn database_availability(
        &self,
        id: HotelId,
        stay: &StayDates,
    ) -> Result<Option<StayAvailability>, QueryError> {
        let Some(hotel) = self.hotel(id).await? else {
            return Ok(None);
        };
        let now = self.clock.now();
        let rows = sqlx::query(
            "SELECT n.room_type_id, n.night, n.rate_cents, n.total_rooms,
                    n.overbooking_allowance, n.confirmed, n.held,
                    coalesce(l.lapsed, 0)::bigint AS lapsed
               FROM room_nights n
               LEFT JOIN LATERAL (
                    SELECT sum(a.rooms) AS lapsed FROM room_night_allocations a
                     WHERE a.hotel_id = n.hotel_id AND a.room_type_id = n.room_type_id
                       AND a.night = n.night AND a.expires_at <= $4) l ON true
              WHERE n.hotel_id = $1 AND n.night >= $2 AND n.night < $3
              ORDER BY n.room_type_id, n.night",
        )
        .bind(id.get())
        .bind(stay.start())
        .bind(stay.end())
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let mut by_type: BTreeMap<i64, BTreeMap<NaiveDate, NightAvailability>> = BTreeMap::new();
        for row in rows {
            let total: i32 = row.try_get("total_rooms")?;
            let allowance: i32 = row.try_get("overbooking_allowance")?;
            let confirmed: i32 = row.try_get("confirmed")?;
            let held: i32 = row.try_get("held")?;
            let lapsed: i64 = row.try_get("lapsed")?;
            let date: NaiveDate = row.try_get("night")?;
            let remaining = rooms_left(
                i64::from(total),
                i64::from(allowance),
                i64::from(confirmed),
                i64::from(held) - lapsed,
            );
            by_type
                .entry(row.try_get("room_type_id")?)
                .or_default()
                .insert(
                    date,
                    NightAvailability {
                        date,
                        remaining: to_u32(remaining),
                        rate_cents: Some(row.try_get("rate_cents")?),
                    },
                );
        }
        let room_types = hotel
            .room_types()
            .iter()
            .map(|(rt, details)| {
                let known = by_type.remove(&rt.get()).unwrap_or_default();
                RoomTypeNights {
                    room_type_id: rt.get(),
                    name: details.name().to_owned(),
                    nights: stay
                        .nights()
                        .map(|date| {
                            known.get(&date).copied().unwrap_or(NightAvailability {
                                date,
                                remaining: 0,
                                rate_cents: None,
                            })
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(Some(StayAvailability {
            source: Source::Database,
            as_of: now,
            room_types,
        }))
    }
}
