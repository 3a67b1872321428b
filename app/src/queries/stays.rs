//! Stays at a hotel, night by night: arrivals, departures, guests in house and no-shows,
//! and from the no-shows a suggested overbooking allowance.
//!
//! Read from the reservations view (each stay's room type, dates, rooms, status and,
//! for one that ended early, the first night it gave back), as of its `as_of`:
//!
//! - **arrivals** on a date: rooms of stays arriving that day whose guests checked in
//!   (checked in or out since);
//! - **no-shows** on a date: rooms of stays arriving that day recorded `no_show`;
//! - **departures** on a date: rooms of checked-out stays whose guests left that day
//!   (the first night they gave back, or the departure date);
//! - **in house** on a night: rooms of checked-in (or since checked-out) stays occupying
//!   that night;
//! - the **no-show rate**: no-shows over the stays due that day (arrivals + no-shows;
//!   cancellations are not due).
//!
//! The suggestion itself is arithmetic ([`overbooking`]), kept apart so it is tested
//! on its own and shared by the API and the `report no-shows` command.

pub mod overbooking;

use aggregates::{HotelId, StayDates};
use chrono::{DateTime, NaiveDate, Utc};
use projections::analytics::{served_state, OCCUPANCY, RESERVATIONS_VIEW};

use super::{Queries, QueryError};

/// One room type on one date.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StayNight {
    pub room_type_id: i64,
    pub night: NaiveDate,
    pub arrivals: i64,
    pub departures: i64,
    pub in_house: i64,
    pub no_shows: i64,
}

impl StayNight {
    /// No-shows over the stays due on this date; `None` when none was due.
    pub fn no_show_rate(&self) -> Option<f64> {
        rate(self.no_shows, self.arrivals + self.no_shows)
    }
}

/// `part / whole`, `None` for an empty whole.
pub fn rate(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// A hotel's stays over a range of dates.
#[derive(Debug, Clone)]
pub struct StaysRead {
    /// Every room type of the hotel, by id, with its name.
    pub room_types: Vec<(i64, String)>,
    /// Only the dates with something to count.
    pub nights: Vec<StayNight>,
    /// Per room type, the most rooms it had on sale on a night of the range, and the
    /// largest overbooking allowance it was sold with (from the occupancy projection).
    pub capacity: Vec<(i64, i64, i64)>,
    /// When the reservations view last applied events; `None` if it has never run.
    pub as_of: Option<DateTime<Utc>>,
}

impl Queries {
    /// The stays of `range`, night by night; `None` if there is no such hotel.
    pub async fn stays(
        &self,
        hotel: HotelId,
        range: &StayDates,
    ) -> Result<Option<StaysRead>, QueryError> {
        let mut tx = self.snapshot().await?;
        let Some(room_types) = super::room_types_of(&mut tx, hotel).await? else {
            return Ok(None);
        };
        let (generation, as_of) = served_state(&mut tx, RESERVATIONS_VIEW).await?;
        // The stays that arrived, or were due, by the end of the range and had not left
        // before its start: through the (generation, hotel_id, start_date) index. A
        // stay of several room types counts each line's rooms under its room type.
        let nights: Vec<StayNight> = sqlx::query_as(
            "WITH found AS (
                 SELECT room_type_id, start_date, rooms, status, more_lines,
                        least(end_date, coalesce(released_from, end_date)) AS left_on
                   FROM reservations_view
                  WHERE generation = $1 AND hotel_id = $2 AND start_date < $4
                    AND end_date >= $3
                    AND status IN ('checked_in', 'checked_out', 'no_show')),
             stays AS (
                 SELECT f.room_type_id, f.start_date, f.status, f.left_on,
                        (f.rooms - coalesce((SELECT sum((l->>'rooms')::int)
                                               FROM jsonb_array_elements(f.more_lines) l),
                                             0))::int AS rooms
                   FROM found f
                 UNION ALL
                 SELECT (l->>'room_type_id')::bigint, f.start_date, f.status, f.left_on,
                        (l->>'rooms')::int
                   FROM found f CROSS JOIN jsonb_array_elements(f.more_lines) l),
             nights AS (
                 SELECT s.*, d::date AS night
                   FROM stays s
                  CROSS JOIN generate_series(greatest(s.start_date, $3),
                                             least(s.left_on, $4 - 1), interval '1 day') d)
             SELECT room_type_id, night,
                    coalesce(sum(rooms) FILTER (WHERE status <> 'no_show'
                                                  AND night = start_date), 0) AS arrivals,
                    coalesce(sum(rooms) FILTER (WHERE status = 'checked_out'
                                                  AND night = left_on), 0) AS departures,
                    coalesce(sum(rooms) FILTER (WHERE status <> 'no_show'
                                                  AND night < left_on), 0) AS in_house,
                    coalesce(sum(rooms) FILTER (WHERE status = 'no_show'
                                                  AND night = start_date), 0) AS no_shows
               FROM nights
              GROUP BY room_type_id, night
              ORDER BY room_type_id, night",
        )
        .bind(generation)
        .bind(hotel.get())
        .bind(range.start())
        .bind(range.end())
        .fetch_all(&mut *tx)
        .await?;
        let (occupancy, _) = served_state(&mut tx, OCCUPANCY).await?;
        let capacity: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT room_type_id, max(total_rooms)::bigint, max(overbooking_allowance)::bigint
               FROM occupancy_daily
              WHERE generation = $1 AND hotel_id = $2 AND night >= $3 AND night < $4
              GROUP BY room_type_id ORDER BY room_type_id",
        )
        .bind(occupancy)
        .bind(hotel.get())
        .bind(range.start())
        .bind(range.end())
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(StaysRead {
            room_types,
            nights,
            capacity,
            as_of,
        }))
    }
}

/// One room type's no-shows over a range, and the allowance they suggest.
#[derive(Debug, Clone, PartialEq)]
pub struct NoShowReport {
    pub room_type_id: i64,
    pub name: String,
    /// Rooms of stays due to arrive in the range (arrived + no-shows).
    pub due: i64,
    pub no_shows: i64,
    /// `no_shows / due`; `None` when nothing was due.
    pub no_show_rate: Option<f64>,
    /// The most rooms on sale on a night of the range, and the largest allowance sold.
    pub capacity: i64,
    pub current_allowance: i64,
    pub suggestion: overbooking::Suggestion,
}

impl StaysRead {
    /// Each room type's no-shows and the allowance whose walk probability stays at or
    /// under `risk` (see [`overbooking`]).
    pub fn no_show_report(&self, risk: f64) -> Vec<NoShowReport> {
        self.room_types
            .iter()
            .map(|(room_type_id, name)| {
                let (due, no_shows) = self
                    .nights
                    .iter()
                    .filter(|n| n.room_type_id == *room_type_id)
                    .fold((0, 0), |(due, missed), n| {
                        (due + n.arrivals + n.no_shows, missed + n.no_shows)
                    });
                let (capacity, current_allowance) = self
                    .capacity
                    .iter()
                    .find(|(id, _, _)| id == room_type_id)
                    .map_or((0, 0), |(_, rooms, allowance)| (*rooms, *allowance));
                NoShowReport {
                    room_type_id: *room_type_id,
                    name: name.clone(),
                    due,
                    no_shows,
                    no_show_rate: rate(no_shows, due),
                    capacity,
                    current_allowance,
                    suggestion: overbooking::suggest(capacity, no_shows, due, risk),
                }
            })
            .collect()
    }
}
