//! Daily occupancy and revenue per room type of a hotel, from the occupancy
//! projection (as of its `as_of`).

use aggregates::{Currency, HotelEvent, HotelId, StayDates};
use chrono::{DateTime, NaiveDate, Utc};
use projections::analytics::{served_state, OCCUPANCY};
use sqlx::Row;

use super::{Queries, QueryError};

/// One room type on one night, as the projection keeps it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OccupancyRow {
    pub room_type_id: i64,
    pub night: NaiveDate,
    pub total_rooms: i32,
    pub overbooking_allowance: i32,
    pub rate_cents: i64,
    pub confirmed: i32,
    pub held: i32,
    pub revenue_cents: i64,
    pub holds_placed: i64,
    pub holds_lapsed: i64,
    pub cancellations: i64,
}

/// A hotel's room types and the nights of the range the projection has rows for.
#[derive(Debug, Clone)]
pub struct OccupancyRead {
    /// Every room type of the hotel, by id, with its name.
    pub room_types: Vec<(i64, String)>,
    pub rows: Vec<OccupancyRow>,
    /// When the projection last applied events; `None` if it has never run.
    pub as_of: Option<DateTime<Utc>>,
    pub currencies: Currencies,
}

/// The currencies a hotel has priced in, each from the day it was set (the hotel's
/// date): what a night's amounts are in.
///
/// A night's rate and revenue are in the currency in force on that night. A hotel's
/// currency changes only once none of its stays is live (see the catalog's
/// `currency_in_use`), so every amount recorded on a night was recorded under the
/// currency in force on it: a night before the change was sold in the old one, a night
/// after it is priced in the new one.
#[derive(Debug, Clone, Default)]
pub struct Currencies {
    /// `(first day, currency)`, in order; the first from the hotel's first day.
    from: Vec<(NaiveDate, Currency)>,
}

impl Currencies {
    /// The currency in force on `night`.
    pub fn on(&self, night: NaiveDate) -> Currency {
        self.from
            .iter()
            .rev()
            .find(|(first, _)| *first <= night)
            .or(self.from.first())
            .map_or(Currency::EUR, |(_, currency)| *currency)
    }

    /// The currency in force now (the last one set).
    pub fn current(&self) -> Currency {
        self.from.last().map_or(Currency::EUR, |(_, c)| *c)
    }
}

impl Queries {
    /// The occupancy rows of `range`; `None` if there is no such hotel.
    pub async fn occupancy(
        &self,
        hotel: HotelId,
        range: &StayDates,
    ) -> Result<Option<OccupancyRead>, QueryError> {
        let mut tx = self.snapshot().await?;
        let Some(room_types) = super::room_types_of(&mut tx, hotel).await? else {
            return Ok(None);
        };
        let (generation, as_of) = served_state(&mut tx, OCCUPANCY).await?;
        let rows: Vec<OccupancyRow> = sqlx::query_as(
            "SELECT room_type_id, night, total_rooms, overbooking_allowance, rate_cents,
                    confirmed, held, revenue_cents, holds_placed, holds_lapsed, cancellations
               FROM occupancy_daily
              WHERE generation = $1 AND hotel_id = $2 AND night >= $3 AND night < $4",
        )
        .bind(generation)
        .bind(hotel.get())
        .bind(range.start())
        .bind(range.end())
        .fetch_all(&mut *tx)
        .await?;
        let currencies = currencies(&mut tx, hotel).await?;
        tx.commit().await?;
        Ok(Some(OccupancyRead {
            room_types,
            rows,
            as_of,
            currencies,
        }))
    }
}

/// The hotel's currencies from its history: each `HotelDetailsSet` that changed it, from
/// the hotel's date when it was recorded (a change takes effect on that day's night).
async fn currencies(tx: &mut sqlx::PgConnection, hotel: HotelId) -> Result<Currencies, QueryError> {
    let rows = sqlx::query(
        "SELECT payload, recorded_at FROM events
          WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_type = $3
          ORDER BY sequence",
    )
    .bind(aggregates::AggregateType::Hotel.as_str())
    .bind(aggregates::contract::hotel_stream_id(hotel))
    .bind(aggregates::contract::HotelEventType::HotelDetailsSet.as_str())
    .fetch_all(&mut *tx)
    .await?;
    let mut currencies = Currencies::default();
    for row in rows {
        let payload: serde_json::Value = row.try_get("payload")?;
        let at: DateTime<Utc> = row.try_get("recorded_at")?;
        let event: HotelEvent = serde_json::from_value(payload)
            .map_err(|e| QueryError::Corrupt(format!("hotel event: {e}")))?;
        let HotelEvent::HotelDetailsSet { details, .. } = event else {
            continue;
        };
        let day = aggregates::types::local_date(at, details.timezone());
        if currencies.from.last().map(|(_, c)| *c) != Some(details.currency()) {
            currencies.from.push((day, details.currency()));
        }
    }
    Ok(currencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2027, 6, d).expect("date")
    }

    #[test]
    fn a_night_is_in_the_currency_in_force_on_it() {
        let chf = Currency::parse("CHF").expect("code");
        let currencies = Currencies {
            from: vec![(day(5), Currency::EUR), (day(20), chf)],
        };
        assert_eq!(
            currencies.on(day(1)),
            Currency::EUR,
            "before the hotel: its first"
        );
        assert_eq!(currencies.on(day(19)), Currency::EUR);
        assert_eq!(currencies.on(day(20)), chf);
        assert_eq!(currencies.current(), chf);
        assert_eq!(Currencies::default().on(day(1)), Currency::EUR);
    }
}
