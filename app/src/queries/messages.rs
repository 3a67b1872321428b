//! The guest's messages about a reservation, as the mail outbox records them (queued
//! with the events that decided them, so as of now, like the reservation itself).

use aggregates::ReservationId;
use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Queries, QueryError};

/// One message: what it is about, and where its sending has got to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    pub kind: String,
    /// `pending`, `sent`, `failed` or `dropped` (the guest was erased first).
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub attempts: i32,
    pub last_error: Option<String>,
}

impl Queries {
    /// The messages of a reservation, in the order they were decided.
    pub async fn reservation_messages(
        &self,
        id: ReservationId,
    ) -> Result<Vec<MessageRow>, QueryError> {
        let rows = sqlx::query(
            "SELECT kind, state, created_at, sent_at, attempts, last_error
               FROM mail_outbox WHERE reservation_id = $1 ORDER BY id",
        )
        .bind(id.as_uuid())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(MessageRow {
                    kind: row.try_get("kind")?,
                    state: row.try_get("state")?,
                    created_at: row.try_get("created_at")?,
                    sent_at: row.try_get("sent_at")?,
                    attempts: row.try_get("attempts")?,
                    last_error: row.try_get("last_error")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(QueryError::from)
    }
}
