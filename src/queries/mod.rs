//! The query side every read handler calls: hotel pages, availability, the search
//! across a city's hotels, reservation look-ups and histories, the event feed,
//! occupancy and the reservation search.
//!
//! Reads come in two consistencies, and each function says which it gives:
//! - **as of now** (read-your-writes): a hotel page, a reservation, its history, and
//!   availability when the read model cannot answer. These read the rows the write
//!   side keeps inline with its events (hotels, room nights, reservations), because a
//!   client that has just written expects to see it, and no projection can promise
//!   that;
//! - **as of `as_of`**: the read models the projections keep (availability in Redis,
//!   occupancy and the reservations view in PostgreSQL), which may lag the log a
//!   little and say how far they have got.
//!
//! Nothing here writes, and nothing here decides: a hold is always decided by the
//! write side against its own rows, never against an answer from here. Rules that both
//! sides state (what "rooms left" means) come from the domain crate, once.

mod availability;
mod events;
mod hotels;
mod memo;
mod occupancy;
mod reservations;
mod search;
pub mod stays;

use std::sync::Arc;

use sqlx::{PgPool, Postgres};

use crate::clock::Clock;
use crate::error::CommandError;
use crate::write::AttemptError;

pub use availability::{
    AvailabilityCache, NightAvailability, PlanPrice, RoomTypeNights, Source, StayAvailability,
    StayQuery,
};
pub use events::{EventPage, FeedError};
pub use occupancy::{OccupancyRead, OccupancyRow};
pub use reservations::{ReservationFilter, ReservationPage};
pub use search::{CitySearch, HotelOffers, SearchAnswer, MAX_SEARCH_LIMIT};
pub use stays::{StayNight, StaysRead};

/// Why a read could not be answered (an absent row is `Ok(None)`, not an error).
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// PostgreSQL could not be reached or failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored row could not be decoded: a bug, never the client's fault.
    #[error("stored state unreadable: {0}")]
    Corrupt(String),
}

/// The write side's loader, read without locks for a look-up as of now.
impl From<AttemptError> for QueryError {
    fn from(e: AttemptError) -> Self {
        match e {
            AttemptError::Fatal(CommandError::Database(e)) => QueryError::Database(e),
            // A plain read takes no part in a race; anything else is unreadable state.
            AttemptError::Conflict => QueryError::Corrupt("a read lost a race".into()),
            AttemptError::Fatal(other) => QueryError::Corrupt(other.to_string()),
        }
    }
}

/// The handle read handlers share: the pool, the availability read model (if Redis is
/// usable) and the clock.
#[derive(Clone)]
pub struct Queries {
    pool: PgPool,
    availability: Option<AvailabilityCache>,
    clock: Arc<dyn Clock>,
}

impl Queries {
    pub fn new(
        pool: PgPool,
        availability: Option<AvailabilityCache>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            pool,
            availability,
            clock,
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Starts the read-only transaction a read-model request reads in: the generation
    /// it picks and that generation's rows come from one snapshot, so a rebuild that
    /// switches generations and deletes the old one meanwhile cannot hand a reader an
    /// emptied table.
    async fn snapshot(&self) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }
}

/// A hotel's room types, by id, with their names; `None` if there is no such hotel.
async fn room_types_of(
    tx: &mut sqlx::PgConnection,
    hotel: aggregates::HotelId,
) -> Result<Option<Vec<(i64, String)>>, sqlx::Error> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM hotels WHERE hotel_id = $1)")
            .bind(hotel.get())
            .fetch_one(&mut *tx)
            .await?;
    if !exists {
        return Ok(None);
    }
    let room_types = sqlx::query_as(
        "SELECT room_type_id, name FROM room_types WHERE hotel_id = $1 ORDER BY room_type_id",
    )
    .bind(hotel.get())
    .fetch_all(&mut *tx)
    .await?;
    Ok(Some(room_types))
}
