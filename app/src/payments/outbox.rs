//! Delivering the payment outbox: calls to the gateway that a committed event decided,
//! made once, after the commit.
//!
//! The event and its outbox row are written in one transaction by the write side (see
//! `write::outbox`, so a crash cannot keep one without the other); delivery happens later, outside any transaction: a worker
//! leases due rows ([`store::outbox`]: several processes share the work, each row leased
//! once),
//! calls the gateway under the row's key, and marks the row done. A worker that dies
//! mid-call leaves the lease to run out; the next one repeats the call under the same
//! key, which the gateway answers without acting twice. Rows of one reservation go in
//! order: a refund waits for the capture it refunds.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::gateway::{GatewayError, PaymentGateway};
use store::write::outbox::OutboxOperation;

/// One leased outbox row.
#[derive(Debug)]
struct Due {
    id: i64,
    reservation_id: Uuid,
    operation: OutboxOperation,
    provider_txn_id: String,
    amount_cents: i64,
    gateway_key: String,
    attempts: i32,
}

/// What one delivery pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub done: usize,
    pub retrying: usize,
    pub failed: usize,
}

/// Gives up on a row after this many attempts (a person has to look at it).
const MAX_ATTEMPTS: i32 = 20;
/// How long a worker may take with a leased row before another may try it.
const LEASE: Duration = Duration::from_secs(60);

/// Due calls: the first undone row of each reservation (a failed one holds back the
/// rows after it), those due.
const DUE: store::outbox::Lease = store::outbox::Lease {
    heads: "SELECT id FROM (
                SELECT DISTINCT ON (reservation_id) id, next_attempt_at, failed
                  FROM payment_outbox WHERE done_at IS NULL
                 ORDER BY reservation_id, id) heads
             WHERE NOT failed AND next_attempt_at <= $1
             ORDER BY id
             LIMIT $2",
    lease: "UPDATE payment_outbox SET next_attempt_at = $3, attempts = attempts + 1
             WHERE id = ANY($1) AND done_at IS NULL AND NOT failed AND next_attempt_at <= $2
            RETURNING id, reservation_id, operation, provider_txn_id, amount_cents,
                      gateway_key, attempts",
};

/// Delivers up to `limit` due rows; safe to run in several processes at once.
pub async fn deliver_due(
    pool: &PgPool,
    gateway: &dyn PaymentGateway,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Delivered, sqlx::Error> {
    let rows = DUE.take(pool, now, LEASE, limit).await?;
    if rows.is_empty() {
        return Ok(Delivered::default());
    }
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let operation: String = row.try_get("operation")?;
        let operation = OutboxOperation::parse(&operation).ok_or_else(|| {
            sqlx::Error::Decode(format!("unknown payment outbox operation {operation:?}").into())
        })?;
        due.push(Due {
            id: row.try_get("id")?,
            reservation_id: row.try_get("reservation_id")?,
            operation,
            provider_txn_id: row.try_get("provider_txn_id")?,
            amount_cents: row.try_get("amount_cents")?,
            gateway_key: row.try_get("gateway_key")?,
            attempts: row.try_get("attempts")?,
        });
    }
    due.sort_by_key(|d| d.id);
    let mut delivered = Delivered::default();
    for row in due {
        let key = row.gateway_key.as_str();
        let txn = row.provider_txn_id.as_str();
        let result = match row.operation {
            OutboxOperation::Capture => gateway.capture(key, txn, row.amount_cents).await,
            OutboxOperation::Refund => gateway.refund(key, txn, row.amount_cents).await,
            OutboxOperation::Void => gateway.void(key, txn).await,
        };
        match result {
            Ok(()) => {
                sqlx::query(
                    "UPDATE payment_outbox SET done_at = $2, last_error = NULL WHERE id = $1",
                )
                .bind(row.id)
                .bind(now)
                .execute(pool)
                .await?;
                metrics::counter!("payment_outbox_delivered_total", "operation" => row.operation.as_str())
                    .increment(1);
                delivered.done += 1;
            }
            Err(e) => {
                let give_up = matches!(e, GatewayError::Refused(_)) || row.attempts >= MAX_ATTEMPTS;
                let backoff = chrono::Duration::seconds(1_i64 << row.attempts.clamp(0, 10));
                tracing::warn!(reservation = %row.reservation_id, operation = %row.operation,
                    attempts = row.attempts, give_up, error = %e, "payment outbox call failed");
                sqlx::query(
                    "UPDATE payment_outbox SET last_error = $2, failed = $3, next_attempt_at = $4
                      WHERE id = $1",
                )
                .bind(row.id)
                .bind(e.to_string())
                .bind(give_up)
                .bind(now + backoff)
                .execute(pool)
                .await?;
                if give_up {
                    metrics::counter!("payment_outbox_failed_total").increment(1);
                    delivered.failed += 1;
                } else {
                    delivered.retrying += 1;
                }
            }
        }
    }
    Ok(delivered)
}
