//! Daily occupancy and revenue per room type of a hotel, from the occupancy
//! projection (as of its `as_of`).

use aggregates::{HotelId, StayDates};
use chrono::{DateTime, NaiveDate, Utc};
use projections::analytics::{served_state, OCCUPANCY};

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
        tx.commit().await?;
        Ok(Some(OccupancyRead {
            room_types,
            rows,
            as_of,
        }))
    }
}
