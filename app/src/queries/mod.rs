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

mod as_known;
mod availability;
mod calendar;
mod events;
mod hotels;
mod memo;
mod messages;
mod occupancy;
mod pickup;
pub mod replica;
mod reservations;
mod search;
pub mod stays;
mod turnaways;
mod what_if;

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Postgres};

use crate::clock::Clock;
use store::error::CommandError;
use store::write::AttemptError;

pub use availability::{
    AvailabilityCache, NightAvailability, PlanPrice, RoomTypeNights, Source, StayAvailability,
    StayQuery,
};
pub use calendar::{Calendar, CalendarNight, CalendarRow, NightRooms, MAX_CALENDAR_NIGHTS};
pub use events::{EventPage, FeedError};
pub use occupancy::{OccupancyRead, OccupancyRow};
pub use pickup::{PickupNight, PickupRead};
pub use replica::{Fallback, Lsn, Replica, ReplicaConfig};
pub use reservations::{BookingRate, MinuteCount, ReservationFilter, ReservationPage};
pub use search::{CitySearch, HotelOffers, SearchAnswer, MAX_SEARCH_LIMIT};
pub use stays::{StayNight, StaysRead};
pub use turnaways::TurnawayNight;
pub use what_if::{Policy, WhatIf, WhatIfQuery};

/// Why a read could not be answered (an absent row is `Ok(None)`, not an error).
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// PostgreSQL could not be reached or failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored row could not be decoded: a bug, never the client's fault.
    #[error("stored state unreadable: {0}")]
    Corrupt(String),
    /// The read replica lacks something the question names (a hotel, its room types,
    /// a night of a stay) that the primary may already hold: only a read of the replica
    /// answers this, and the primary is asked instead.
    #[error("the read replica has not replayed what the read needs")]
    NotReplayed,
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

/// What a read that failed on the replica means for where to read it next.
pub trait ReplicaFailure {
    /// `Some`: read it again from the primary, counted under this reason.
    fn on_replica(&self) -> Option<Fallback>;
}

impl ReplicaFailure for QueryError {
    fn on_replica(&self) -> Option<Fallback> {
        match self {
            QueryError::Database(_) => Some(Fallback::Failed),
            QueryError::Corrupt(_) => None,
            QueryError::NotReplayed => Some(Fallback::Unreplayed),
        }
    }
}

/// The handle read handlers share: the pool, the availability read model (if Redis is
/// usable), the read replica (if configured) and the clock.
#[derive(Clone)]
pub struct Queries {
    pool: PgPool,
    availability: Option<AvailabilityCache>,
    clock: Arc<dyn Clock>,
    replica: Option<Replica>,
    /// Set on the handle that reads the replica: its answers are as of this time.
    replica_as_of: Option<DateTime<Utc>>,
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
            replica: None,
            replica_as_of: None,
        }
    }

    /// Reads that may be as old as their `as_of` go to `replica` (see [`replica`]).
    pub fn with_replica(mut self, replica: Replica) -> Self {
        self.replica = Some(replica);
        self
    }

    pub fn replica(&self) -> Option<&Replica> {
        self.replica.as_ref()
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs `read` against the replica when it may answer (fresh enough, and past the
    /// caller's `token`), else against the primary; a read the replica fails is read
    /// again from the primary, so a replica never turns into an error.
    pub async fn on_replica<T, E, F, Fut>(&self, token: Option<Lsn>, read: F) -> Result<T, E>
    where
        F: Fn(Queries) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: ReplicaFailure,
    {
        if let Some(replica) = &self.replica {
            match replica.admit(token, self.clock.now()).await {
                Ok(as_of) => {
                    let on_replica = Queries {
                        pool: replica.pool().clone(),
                        availability: self.availability.clone(),
                        clock: Arc::clone(&self.clock),
                        replica: None,
                        replica_as_of: Some(as_of),
                    };
                    match read(on_replica).await {
                        Err(e) => match e.on_replica() {
                            Some(reason) => {
                                if reason == Fallback::Failed {
                                    replica.failed();
                                }
                                metrics::counter!("replica_fallbacks_total", "reason" => reason.as_str())
                                    .increment(1);
                            }
                            None => return Err(e),
                        },
                        answer => {
                            metrics::counter!("replica_reads_total").increment(1);
                            return answer;
                        }
                    }
                }
                Err(reason) => {
                    metrics::counter!("replica_fallbacks_total", "reason" => reason.as_str())
                        .increment(1);
                }
            }
        }
        read(self.clone()).await
    }

    /// The `as_of` and source of an answer read from PostgreSQL at `now`: the replica's
    /// `as_of` on the handle that reads it.
    fn database_as_of(&self, now: DateTime<Utc>) -> (Source, DateTime<Utc>) {
        match self.replica_as_of {
            Some(as_of) => (Source::Replica, as_of),
            None => (Source::Database, now),
        }
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
