//! Turnaways per night: the refused holds of the turnaway log
//! ([`crate::commands::turnaways`]) spread over the nights they asked for.

use aggregates::{HotelId, StayDates};
use chrono::NaiveDate;

use super::{Queries, QueryError};

/// One night's turned-away demand: requests (one per room type asked for), their rooms,
/// and the requests by reason.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TurnawayNight {
    pub night: NaiveDate,
    pub requests: i64,
    pub rooms: i64,
    pub sold_out: i64,
    pub restricted: i64,
    pub occupancy: i64,
    pub block_exhausted: i64,
}

impl Queries {
    /// The nights of `range` with turnaways at `hotel`, in order (nights with none left
    /// out); `None` if there is no such hotel.
    pub async fn turnaways(
        &self,
        hotel: HotelId,
        range: &StayDates,
    ) -> Result<Option<Vec<TurnawayNight>>, QueryError> {
        let mut tx = self.snapshot().await?;
        if super::room_types_of(&mut tx, hotel).await?.is_none() {
            return Ok(None);
        }
        let nights = sqlx::query_as(
            "SELECT d::date AS night, count(*) AS requests, sum(t.rooms)::bigint AS rooms,
                    count(*) FILTER (WHERE t.reason = 'sold_out') AS sold_out,
                    count(*) FILTER (WHERE t.reason = 'restricted') AS restricted,
                    count(*) FILTER (WHERE t.reason = 'occupancy') AS occupancy,
                    count(*) FILTER (WHERE t.reason = 'block_exhausted') AS block_exhausted
               FROM turnaways t
              CROSS JOIN generate_series(greatest(t.start_date, $2), least(t.end_date, $3) - 1,
                                         interval '1 day') d
              WHERE t.hotel_id = $1 AND t.start_date < $3 AND t.end_date > $2
              GROUP BY d
              ORDER BY d",
        )
        .bind(hotel.get())
        .bind(range.start())
        .bind(range.end())
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(nights))
    }
}
