//! The expiry sweeper: records the expiry of every lapsed hold (releasing its nights)
//! and gives up on idempotency records of requests that will never finish.
//!
//! The sweeper is housekeeping, not a gate: every decision already treats a lapsed hold
//! as gone (a sale never waits for the sweeper), and a reader sees a lapsed hold as
//! `expired` straight away. What the sweeper adds is the history (`HoldExpired`), the
//! counters in `room_nights` and the read models catching up, and the nights' holds
//! dropped. Several sweepers may run at once: expiring is idempotent and each
//! reservation's commands are serialized by its row lock, so a hold expires once.

use aggregates::ReservationId;
use chrono::Duration;
use uuid::Uuid;

use crate::commands::CommandService;
use crate::error::CommandError;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub expired: usize,
    pub abandoned_requests: u64,
}

/// Expires up to `limit` lapsed holds, and marks as abandoned the requests that have
/// been in flight longer than `abandon_after` (their process died: the retry runs again
/// instead of waiting forever on `request_in_flight`).
pub async fn sweep_once(
    commands: &CommandService,
    limit: i64,
    abandon_after: Duration,
) -> Result<Swept, CommandError> {
    let now = commands.now();
    let lapsed: Vec<Uuid> = sqlx::query_scalar(
        "SELECT reservation_id FROM reservations
          WHERE status = 'held' AND hold_expires_at <= $1
          ORDER BY hold_expires_at
          LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(commands.pool())
    .await?;
    let mut swept = Swept::default();
    for id in lapsed {
        // `false`: another sweeper, a payment or a cancellation got there first.
        if commands.expire_lapsed(ReservationId::from_uuid(id)).await? {
            swept.expired += 1;
        }
    }
    let abandoned = sqlx::query(
        "UPDATE idempotency_keys SET state = 'abandoned'
          WHERE state = 'in_flight' AND created_at <= $1",
    )
    .bind(now - abandon_after)
    .execute(commands.pool())
    .await?;
    swept.abandoned_requests = abandoned.rows_affected();
    if swept.expired > 0 {
        metrics::counter!("holds_expired_by_sweeper_total").increment(swept.expired as u64);
    }
    Ok(swept)
}
