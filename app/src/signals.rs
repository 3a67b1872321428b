//! Signals for work that could stall silently (docs/notifications.md, "Stalled work"):
//! holds past their expiry the sweeper has not expired, payment sagas left open, and
//! outbox rows (payment calls, guest e-mails, partner webhooks, events not yet relayed) waiting too long
//! or given up. Each is a gauge read from PostgreSQL when `/metrics` is scraped, so a
//! server whose workers have stopped still reports the work they left; and the failed
//! rows are listed, and retried, for the person an alert wakes.
//!
//! The figures are the database's, not this process's: every server reports the same
//! values (alert on `max`).

use std::fmt;

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};

/// An outbox: work a committed transaction decided, done after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutboxKind {
    /// Calls to the payment gateway (`payment_outbox`).
    Payment,
    /// The guest's e-mails (`mail_outbox`).
    Email,
    /// Partner webhook deliveries (`webhook_deliveries`).
    Webhook,
    /// Events not yet published to JetStream (the relay's checkpoint; no rows, so
    /// nothing to list or retry).
    Relay,
}

impl OutboxKind {
    pub const ALL: [OutboxKind; 4] = [Self::Payment, Self::Email, Self::Webhook, Self::Relay];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Payment => "payment",
            Self::Email => "email",
            Self::Webhook => "webhook",
            Self::Relay => "relay",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for OutboxKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one outbox stands.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OutboxState {
    pub pending: i64,
    /// Age of the oldest pending row (0 with none).
    pub oldest_seconds: f64,
    pub failed: i64,
}

/// Every signal at one instant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StalledWork {
    pub holds_overdue: i64,
    pub payment_sagas_open: i64,
    pub payment_saga_oldest_seconds: f64,
    /// Per outbox; the relay only where it has a checkpoint (it ran somewhere).
    pub outboxes: Vec<(OutboxKind, OutboxState)>,
    /// Partner webhook subscribers paused for failing.
    pub webhook_subscriptions_paused: i64,
}

fn age(now: DateTime<Utc>, oldest: Option<DateTime<Utc>>) -> f64 {
    oldest.map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0)
}

/// Where the outbox `table` stands: its rows matching `pending` (how many, the oldest's
/// age) and `failed` (how many). Each condition is a partial index's.
async fn outbox_state(
    pool: &PgPool,
    now: DateTime<Utc>,
    table: &'static str,
    pending: &'static str,
    failed: &'static str,
) -> Result<OutboxState, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT (SELECT count(*) FROM {table} WHERE {pending}) AS pending,
                (SELECT min(created_at) FROM {table} WHERE {pending}) AS oldest,
                (SELECT count(*) FROM {table} WHERE {failed}) AS failed"
    ))
    .fetch_one(pool)
    .await?;
    Ok(OutboxState {
        pending: row.try_get("pending")?,
        oldest_seconds: age(now, row.try_get("oldest")?),
        failed: row.try_get("failed")?,
    })
}

/// Reads every signal (a handful of counts, each on a partial index).
pub async fn read(pool: &PgPool, now: DateTime<Utc>) -> Result<StalledWork, sqlx::Error> {
    let holds_overdue: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM reservations WHERE status = 'held' AND hold_expires_at < $1",
    )
    .bind(now)
    .fetch_one(pool)
    .await?;
    let sagas = sqlx::query(
        "SELECT count(*) AS open, min(created_at) AS oldest
           FROM payment_sagas WHERE state = 'authorizing'",
    )
    .fetch_one(pool)
    .await?;
    let payment = outbox_state(
        pool,
        now,
        "payment_outbox",
        "done_at IS NULL AND NOT failed",
        "failed AND done_at IS NULL",
    )
    .await?;
    let email = outbox_state(
        pool,
        now,
        "mail_outbox",
        "state = 'pending'",
        "state = 'failed'",
    )
    .await?;
    let webhook = outbox_state(
        pool,
        now,
        "webhook_deliveries",
        "state = 'pending'",
        "state = 'failed'",
    )
    .await?;
    let mut outboxes = vec![
        (OutboxKind::Payment, payment),
        (OutboxKind::Email, email),
        (OutboxKind::Webhook, webhook),
    ];
    // The relay's backlog: the events after its checkpoint, in commit order, counted up
    // to the cap every projection's lag has. (A difference of positions would
    // miscount: transactions commit in another order than their positions.) No row:
    // this deployment does not relay.
    let relay = sqlx::query(
        "SELECT (SELECT count(*) FROM (
                   SELECT 1 FROM events e
                    WHERE (e.transaction_id, e.global_position) > (c.transaction_id, c.global_position)
                    ORDER BY e.transaction_id, e.global_position
                    LIMIT $2) b) AS pending,
                (SELECT e.recorded_at FROM events e
                  WHERE (e.transaction_id, e.global_position) > (c.transaction_id, c.global_position)
                  ORDER BY e.transaction_id, e.global_position LIMIT 1) AS oldest
           FROM projection_checkpoints c WHERE c.name = $1",
    )
    .bind(crate::relay::RELAY)
    .bind(projections::log::LAG_CAP)
    .fetch_optional(pool)
    .await?;
    if let Some(row) = relay {
        outboxes.push((
            OutboxKind::Relay,
            OutboxState {
                pending: row.try_get("pending")?,
                oldest_seconds: age(now, row.try_get("oldest")?),
                failed: 0,
            },
        ));
    }
    let webhook_subscriptions_paused: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_subscriptions WHERE paused_at IS NOT NULL",
    )
    .fetch_one(pool)
    .await?;
    Ok(StalledWork {
        webhook_subscriptions_paused,
        holds_overdue,
        payment_sagas_open: sagas.try_get("open")?,
        payment_saga_oldest_seconds: age(now, sagas.try_get("oldest")?),
        outboxes,
    })
}

/// Sets the gauges to `work`.
pub fn publish(work: &StalledWork) {
    metrics::gauge!("holds_overdue").set(work.holds_overdue as f64);
    metrics::gauge!("payment_sagas_open").set(work.payment_sagas_open as f64);
    metrics::gauge!("payment_saga_oldest_seconds").set(work.payment_saga_oldest_seconds);
    metrics::gauge!("webhook_subscriptions_paused").set(work.webhook_subscriptions_paused as f64);
    for (kind, state) in &work.outboxes {
        let kind = kind.as_str();
        metrics::gauge!("outbox_pending", "kind" => kind).set(state.pending as f64);
        metrics::gauge!("outbox_oldest_seconds", "kind" => kind).set(state.oldest_seconds);
        metrics::gauge!("outbox_failed", "kind" => kind).set(state.failed as f64);
    }
}

/// A row an outbox gave up on.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedRow {
    pub kind: OutboxKind,
    pub id: i64,
    /// The reservation it is about (none: a webhook delivery, which may be about a
    /// room type's inventory).
    pub reservation_id: Option<uuid::Uuid>,
    /// What it was: the payment operation, the e-mail's kind, the webhook's type.
    pub what: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl FailedRow {
    /// Its id across outboxes: `{kind}-{row id}` (each outbox numbers its own rows).
    pub fn public_id(&self) -> String {
        format!("{}-{}", self.kind, self.id)
    }
}

/// Parses a [`FailedRow::public_id`].
pub fn parse_public_id(id: &str) -> Option<(OutboxKind, i64)> {
    let (kind, n) = id.split_once('-')?;
    let kind = OutboxKind::parse(kind).filter(|k| *k != OutboxKind::Relay)?;
    let n: i64 = n.parse().ok().filter(|n| *n > 0)?;
    Some((kind, n))
}

/// The failed rows of every outbox, oldest first, at most `limit`.
pub async fn failed_rows(pool: &PgPool, limit: i64) -> Result<Vec<FailedRow>, sqlx::Error> {
    let rows = sqlx::query(
        "(SELECT 'payment' AS kind, id, reservation_id, operation AS what, attempts, last_error, created_at
            FROM payment_outbox WHERE failed AND done_at IS NULL ORDER BY id LIMIT $1)
         UNION ALL
         (SELECT 'email', id, reservation_id, kind, attempts, last_error, created_at
            FROM mail_outbox WHERE state = 'failed' ORDER BY id LIMIT $1)
         UNION ALL
         (SELECT 'webhook', id, NULL::uuid, event_type, attempts, last_error, created_at
            FROM webhook_deliveries WHERE state = 'failed' ORDER BY id LIMIT $1)
         ORDER BY created_at, kind, id LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let kind: String = row.try_get("kind")?;
        let Some(kind) = OutboxKind::parse(&kind) else {
            continue;
        };
        out.push(FailedRow {
            kind,
            id: row.try_get("id")?,
            reservation_id: row.try_get("reservation_id")?,
            what: row.try_get("what")?,
            attempts: row.try_get("attempts")?,
            last_error: row.try_get("last_error")?,
            created_at: row.try_get("created_at")?,
        });
    }
    Ok(out)
}

/// Puts a failed row back in its queue, due at `now` with its attempts reset; `false`
/// when there is no such failed row.
pub async fn retry(
    pool: &PgPool,
    kind: OutboxKind,
    id: i64,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let sql = match kind {
        OutboxKind::Payment => {
            "UPDATE payment_outbox SET failed = false, attempts = 0, next_attempt_at = $2
              WHERE id = $1 AND failed AND done_at IS NULL"
        }
        OutboxKind::Email => {
            "UPDATE mail_outbox SET state = 'pending', attempts = 0, next_attempt_at = $2
              WHERE id = $1 AND state = 'failed'"
        }
        OutboxKind::Webhook => {
            "UPDATE webhook_deliveries
                SET state = 'pending', next_attempt_at = $2,
                    give_up_at = GREATEST(give_up_at, $2 + interval '24 hours')
              WHERE id = $1 AND state = 'failed'"
        }
        OutboxKind::Relay => return Ok(false),
    };
    let done = sqlx::query(sql).bind(id).bind(now).execute(pool).await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_rows_public_id_reads_back() {
        assert_eq!(parse_public_id("email-12"), Some((OutboxKind::Email, 12)));
        assert_eq!(parse_public_id("payment-3"), Some((OutboxKind::Payment, 3)));
        assert_eq!(parse_public_id("relay-3"), None);
        assert_eq!(parse_public_id("email-0"), None);
        assert_eq!(parse_public_id("email-x"), None);
        assert_eq!(parse_public_id("12"), None);
    }
}
