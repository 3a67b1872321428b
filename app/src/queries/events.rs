//! The event feed for auditors and a reservation's history.
//!
//! The feed is the log in commit order as [`projections::log`] reads it for the
//! projections (the subtle part — never serving an event before one that commits
//! later — lives there, once); a client pages by the position of the last event it
//! read, which names its place in that order.

use projections::log::{self, Checkpoint, StoredEvent};

use super::{Fallback, Queries, QueryError, ReplicaFailure};

/// A page of the feed.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<StoredEvent>,
    /// The position to page from next (the last event's, or `after` if none).
    pub next: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// `after` is not the position of an event.
    #[error("no event has position {0}")]
    UnknownPosition(i64),
    #[error(transparent)]
    Query(#[from] QueryError),
}

/// A replica that has not replayed `after` yet is behind the caller, not wrong: the
/// primary answers.
impl ReplicaFailure for FeedError {
    fn on_replica(&self) -> Option<Fallback> {
        match self {
            FeedError::UnknownPosition(_) => Some(Fallback::BehindToken),
            FeedError::Query(e) => e.on_replica(),
        }
    }
}

impl From<sqlx::Error> for FeedError {
    fn from(e: sqlx::Error) -> Self {
        FeedError::Query(QueryError::Database(e))
    }
}

impl Queries {
    /// At most `limit` events after the one at position `after` (0: from the start), in
    /// commit order, only once nothing can commit before them.
    pub async fn feed(&self, after: i64, limit: i64) -> Result<EventPage, FeedError> {
        let mut conn = self.pool.acquire().await?;
        let from = if after == 0 {
            Checkpoint::START
        } else {
            log::checkpoint_of(&mut conn, after)
                .await?
                .ok_or(FeedError::UnknownPosition(after))?
        };
        let events = log::read_after(&mut conn, from, limit).await?;
        let next = events.last().map_or(after, |e| e.position);
        Ok(EventPage { events, next })
    }

    /// Every event of one stream, in its own order.
    pub async fn stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Result<Vec<StoredEvent>, QueryError> {
        let mut conn = self.pool.acquire().await?;
        Ok(log::read_stream(&mut conn, aggregate_type, aggregate_id).await?)
    }
}
