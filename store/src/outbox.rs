//! The lease every outbox shares (payment calls, e-mail, partner webhooks): how a worker
//! takes due rows so that several processes share the work, each row is leased once,
//! and a worker that dies mid-attempt only leaves its lease to run out, after which
//! another tries the row again.
//!
//! Each outbox says which of its rows are due and what a worker needs of them; the
//! protocol is here, once. Two single-table statements, not one: first the heads (the
//! first undone row of each ordering key — a reservation, a subscriber's key — of those
//! due, oldest first), then the lease, an `UPDATE` that moves `next_attempt_at` to the
//! lease's end and counts the attempt, its conditions checked again on a row another
//! worker leased meanwhile (which then no longer passes `next_attempt_at <= now`). As
//! one statement, a join of the queue with itself, a prepared statement's generic plan
//! made while the table was small read the backlog once per row: seconds a pass at
//! 9,000 pending deliveries (docs/benchmarks.md, "Partner webhooks under load").

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::PgPool;

/// An outbox's two statements.
pub struct Lease {
    /// The heads: `$1` now, `$2` the most rows; returns their `id`s.
    pub heads: &'static str,
    /// The lease: `$1` the heads' ids, `$2` now, `$3` the lease's end. Sets
    /// `next_attempt_at = $3, attempts = attempts + 1` on those still undone and due,
    /// and returns what the worker needs of them.
    pub lease: &'static str,
}

impl Lease {
    /// Leases up to `limit` due rows for `lease`, in id order (nothing if none is due).
    pub async fn take(
        &self,
        pool: &PgPool,
        now: DateTime<Utc>,
        lease: Duration,
        limit: i64,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        let until = now + chrono::Duration::from_std(lease).unwrap_or_default();
        let heads: Vec<i64> = sqlx::query_scalar(self.heads)
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await?;
        if heads.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query(self.lease)
            .bind(&heads)
            .bind(now)
            .bind(until)
            .fetch_all(pool)
            .await
    }
}
