//! A hotel's inventory calendar: every room type's nights over a range (a month, as
//! staff page through them), each with its rooms, what is held and sold, the rates per
//! plan and the restrictions.
//!
//! It reads like availability (`availability.rs`): the Redis read model when it can
//! answer, else the write side's rows, exact as of now; the answer says which and as of
//! when, so a console polling it can show how fresh it is. As there, a night or room
//! type the model (or the replica) does not hold is not shown as "no inventory": the
//! question goes on to PostgreSQL (the primary), which alone tells a night not yet
//! projected from one never put on sale. Unlike availability it does not fall back on
//! a last room: nothing is sold from it, and staff watching a busy night would
//! otherwise turn every poll into a database read.

use aggregates::booking::NightView;
use aggregates::restrictions::RestrictionSet;
use aggregates::{GuestCount, Hotel, HotelId, RoomTypeId, StayDates};
use chrono::Utc;
use chrono::{DateTime, NaiveDate};
use sqlx::Row;

use super::availability::{
    holds_every_night, plan_prices, sale_terms, to_u32, PlanPrice, StoredNight,
};
use super::{Lsn, Queries, QueryError, Source};

/// Most nights one calendar read covers: the console's longest view (90 nights) and a
/// little more.
pub const MAX_CALENDAR_NIGHTS: u32 = 92;

/// One room type on one night, as staff see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarNight {
    pub date: NaiveDate,
    /// `None`: the night has no inventory.
    pub rooms: Option<NightRooms>,
    pub restrictions: RestrictionSet,
    /// One room for one guest under each plan selling the room type (or the base rate
    /// when none does); empty without inventory.
    pub prices: Vec<PlanPrice>,
}

/// A night's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NightRooms {
    pub total_rooms: i64,
    pub overbooking_allowance: i64,
    pub held: i64,
    pub confirmed: i64,
    /// Rooms set aside for group blocks.
    pub blocked: i64,
    pub remaining: u32,
    pub rate_cents: i64,
}

/// A group block with nights in a calendar's range: its terms and its pickup on each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarBlock {
    pub code: String,
    pub name: String,
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub release_date: NaiveDate,
    pub released: bool,
    pub rate_cents: i64,
    /// `(date, rooms, picked up)` of its nights within the range.
    pub nights: Vec<(NaiveDate, u32, u32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarRow {
    pub room_type_id: i64,
    pub name: String,
    pub nights: Vec<CalendarNight>,
}

#[derive(Debug, Clone)]
pub struct Calendar {
    pub hotel: Hotel,
    pub source: Source,
    pub as_of: DateTime<Utc>,
    pub room_types: Vec<CalendarRow>,
    pub blocks: Vec<CalendarBlock>,
}

/// The rows of `hotel` over `range`, given each night's counters and view.
fn rows<'v>(
    hotel: &Hotel,
    range: &StayDates,
    night: impl Fn(RoomTypeId, NaiveDate) -> Option<(NightRooms, NightView<'v>)>,
) -> Vec<CalendarRow> {
    hotel
        .room_types()
        .iter()
        .map(|(id, details)| {
            let terms = sale_terms(hotel, *id, GuestCount::ONE);
            CalendarRow {
                room_type_id: id.get(),
                name: details.name().to_owned(),
                nights: range
                    .nights()
                    .map(|date| match night(*id, date) {
                        None => CalendarNight {
                            date,
                            rooms: None,
                            restrictions: RestrictionSet::default(),
                            prices: Vec::new(),
                        },
                        Some((rooms, view)) => CalendarNight {
                            date,
                            rooms: Some(rooms),
                            restrictions: view.restrictions.clone(),
                            prices: plan_prices(&terms, &view),
                        },
                    })
                    .collect(),
            }
        })
        .collect()
}

impl StoredNight {
    fn rooms(&self) -> NightRooms {
        NightRooms {
            total_rooms: self.total_rooms,
            overbooking_allowance: self.overbooking_allowance,
            held: self.held,
            confirmed: self.confirmed,
            blocked: self.blocked,
            remaining: self.remaining,
            rate_cents: self.rate_cents.get(),
        }
    }
}

impl Queries {
    /// The calendar of `hotel` over `range` (at most [`MAX_CALENDAR_NIGHTS`], which the
    /// caller checks); `None` if there is no such hotel.
    pub async fn calendar(
        &self,
        hotel: HotelId,
        range: &StayDates,
        token: Option<Lsn>,
    ) -> Result<Option<Calendar>, QueryError> {
        let calendar = match self.cached_calendar(hotel, range).await {
            Some(calendar) => Some(calendar),
            None => {
                self.on_replica(
                    token,
                    |q| async move { q.database_calendar(hotel, range).await },
                )
                .await?
            }
        };
        let Some(mut calendar) = calendar else {
            return Ok(None);
        };
        calendar.blocks = self.blocks_in(hotel, range).await?;
        Ok(Some(calendar))
    }

    /// The hotel's group blocks with a night in `range`, each with its pickup per night,
    /// as the write side holds them (a hotel without blocks costs one index probe).
    async fn blocks_in(
        &self,
        hotel: HotelId,
        range: &StayDates,
    ) -> Result<Vec<CalendarBlock>, QueryError> {
        let rows = sqlx::query(
            "SELECT b.code, b.state, n.night, n.blocks -> b.code AS block
               FROM blocks b
               LEFT JOIN room_nights n
                 ON n.hotel_id = b.hotel_id AND n.room_type_id = b.room_type_id
                AND n.night >= greatest(b.start_date, $2) AND n.night < least(b.end_date, $3)
              WHERE b.hotel_id = $1 AND b.start_date < $3 AND b.end_date > $2
              ORDER BY b.room_type_id, b.start_date, b.code, n.night",
        )
        .bind(hotel.get())
        .bind(range.start())
        .bind(range.end())
        .fetch_all(&self.pool)
        .await?;
        let mut blocks: Vec<CalendarBlock> = Vec::new();
        for row in rows {
            let code: String = row.try_get("code")?;
            if blocks.last().is_none_or(|b| b.code != code) {
                let state: serde_json::Value = row.try_get("state")?;
                let block: aggregates::Block = serde_json::from_value(state)
                    .map_err(|e| QueryError::Corrupt(format!("block: {e}")))?;
                let Some(terms) = block.terms() else {
                    continue;
                };
                blocks.push(CalendarBlock {
                    code: code.clone(),
                    name: terms.name().to_owned(),
                    room_type_id: terms.room_type_id().get(),
                    start_date: terms.stay().start(),
                    end_date: terms.stay().end(),
                    release_date: terms.release_date(),
                    released: block.released().is_some(),
                    rate_cents: terms.rate_cents().get(),
                    nights: Vec::new(),
                });
            }
            let (Some(date), Some(json)) = (
                row.try_get::<Option<NaiveDate>, _>("night")?,
                row.try_get::<Option<serde_json::Value>, _>("block")?,
            ) else {
                continue;
            };
            let night: aggregates::room_night::BlockNight = serde_json::from_value(json)
                .map_err(|e| QueryError::Corrupt(format!("block night: {e}")))?;
            if let Some(block) = blocks.last_mut() {
                block
                    .nights
                    .push((date, night.total_rooms(), night.picked_up));
            }
        }
        Ok(blocks)
    }

    async fn cached_calendar(&self, hotel: HotelId, range: &StayDates) -> Option<Calendar> {
        let cache = self.availability.as_ref()?;
        let dates: Vec<NaiveDate> = range.nights().collect();
        let mut redis = cache.read_connection();
        let cached = cache
            .within_timeout(cache.reader.read(&mut redis, hotel.get(), &dates))
            .await?;
        let days = &cached.hotel.days;
        let catalog = &cached.hotel.hotel;
        if !holds_every_night(catalog, range, |room_type, date| {
            cached.hotel.view(room_type, date)
        }) {
            metrics::counter!("availability_cache_unknown_total").increment(1);
            return None;
        }
        let room_types = rows(catalog, range, |room_type, date| {
            let day = days.iter().find(|d| d.date == date)?;
            let counters = day.night(room_type.get())?;
            let rooms = NightRooms {
                total_rooms: counters.total_rooms,
                overbooking_allowance: counters.overbooking_allowance,
                held: counters.held,
                confirmed: counters.confirmed,
                blocked: counters.blocked,
                remaining: to_u32(counters.remaining()),
                rate_cents: counters.rate_cents,
            };
            Some((rooms, day.view(room_type.get())?))
        });
        Some(Calendar {
            hotel: (**catalog).clone(),
            source: Source::Cache,
            as_of: cached.as_of,
            room_types,
            blocks: Vec::new(),
        })
    }

    async fn database_calendar(
        &self,
        id: HotelId,
        range: &StayDates,
    ) -> Result<Option<Calendar>, QueryError> {
        let on_replica = self.replica_as_of.is_some();
        let Some(hotel) = self.hotel(id).await? else {
            return if on_replica {
                Err(QueryError::NotReplayed)
            } else {
                Ok(None)
            };
        };
        let now = self.clock.now();
        let nights = self.stored_nights(&[id.get()], range, now).await?;
        if on_replica
            && !holds_every_night(&hotel, range, |room_type, date| {
                nights
                    .get(&(id.get(), room_type.get(), date))
                    .map(StoredNight::view)
            })
        {
            return Err(QueryError::NotReplayed);
        }
        let room_types = rows(&hotel, range, |room_type, date| {
            let night = nights.get(&(id.get(), room_type.get(), date))?;
            Some((night.rooms(), night.view()))
        });
        let (source, as_of) = self.database_as_of(now);
        Ok(Some(Calendar {
            hotel,
            source,
            as_of,
            room_types,
            blocks: Vec::new(),
        }))
    }
}
