//! Numbers for new reservations' references (see [`aggregates::Reference`]): unique
//! across every server without a unique index on the hold path. A server takes a block of
//! [`BLOCK`] numbers from a PostgreSQL sequence (one statement per thousand holds) and
//! hands them out in memory; two servers never share a block, and a restart takes a new
//! one. Numbers not used (a refused hold, a restart) are skipped, never reused.

use std::sync::Arc;

use aggregates::Reference;
use sqlx::PgPool;
use tokio::sync::Mutex;

/// Numbers per block taken from `reservation_reference_blocks`.
pub const BLOCK: u64 = 1_000;

/// The numbers of this server's current block.
#[derive(Clone, Default)]
pub struct ReferenceNumbers {
    next: Arc<Mutex<std::ops::Range<u64>>>,
}

impl ReferenceNumbers {
    /// The next unused reference; takes a new block when this one is spent.
    pub async fn next(&self, pool: &PgPool) -> Result<Reference, sqlx::Error> {
        let mut range = self.next.lock().await;
        if range.is_empty() {
            let block: i64 = sqlx::query_scalar("SELECT nextval('reservation_reference_blocks')")
                .fetch_one(pool)
                .await?;
            let start = u64::try_from(block).unwrap_or(0) * BLOCK;
            *range = start..start + BLOCK;
        }
        let number = range.start;
        range.start += 1;
        Ok(Reference::numbered(number))
    }
}
