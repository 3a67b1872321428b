//! Hotel pages and the city search, as of now (the hotel rows the write side keeps
//! with its events; a single hotel is read by the write side's own loader, so the
//! row is decoded in one place).

use aggregates::{Hotel, HotelId};
use sqlx::Row;

use super::{Queries, QueryError};
use store::write::Loader;

/// Most hotels one city search answers.
pub const MAX_CITY_HOTELS: i64 = 500;

fn decode(value: serde_json::Value) -> Result<Hotel, QueryError> {
    serde_json::from_value(value).map_err(|e| QueryError::Corrupt(format!("hotel: {e}")))
}

impl Queries {
    /// A hotel with its room types, or `None` if there is no such hotel.
    pub async fn hotel(&self, id: HotelId) -> Result<Option<Hotel>, QueryError> {
        let mut conn = self.pool.acquire().await?;
        // The loader answers an unknown hotel with an empty one at version 0.
        let (hotel, version) = Loader { conn: &mut conn }.hotel(id).await?;
        Ok((version > 0).then_some(hotel))
    }

    /// The hotels of a city (case-insensitive), by id, at most [`MAX_CITY_HOTELS`].
    /// A row that cannot be decoded is left out and logged, so one bad row does not
    /// hide a city.
    pub async fn hotels_in(&self, city: &str) -> Result<Vec<Hotel>, QueryError> {
        let rows = sqlx::query(
            "SELECT state FROM hotels WHERE lower(city) = lower($1) ORDER BY hotel_id LIMIT $2",
        )
        .bind(city)
        .bind(MAX_CITY_HOTELS)
        .fetch_all(&self.pool)
        .await?;
        decode_rows(rows)
    }

    /// Every hotel, by id, at most [`MAX_CITY_HOTELS`]: the staff console's list (a
    /// chain's hotels, not a marketplace's).
    pub async fn all_hotels(&self) -> Result<Vec<Hotel>, QueryError> {
        let rows = sqlx::query("SELECT state FROM hotels ORDER BY hotel_id LIMIT $1")
            .bind(MAX_CITY_HOTELS)
            .fetch_all(&self.pool)
            .await?;
        decode_rows(rows)
    }
}

/// The hotels of `rows`; a row that cannot be decoded is left out and logged.
fn decode_rows(rows: Vec<sqlx::postgres::PgRow>) -> Result<Vec<Hotel>, QueryError> {
    let mut hotels = Vec::with_capacity(rows.len());
    for row in rows {
        match decode(row.try_get("state")?) {
            Ok(hotel) => hotels.push(hotel),
            Err(e) => tracing::error!(error = %e, "a hotel row is unreadable; left out"),
        }
    }
    Ok(hotels)
}
