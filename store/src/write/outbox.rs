//! The payment outbox's rows, written in the transaction of the events that decide
//! them: a crash cannot keep an event without its gateway call, nor a call without its
//! event. Delivering them (after the commit, outside any transaction) is the payment
//! saga's work; see `payments::outbox`.
//!
//! Each of the ledger's movements (`PaymentCaptured`, `PaymentVoided`,
//! `PaymentRefunded`) and each late authorization given back becomes one row under the
//! gateway key its event carries. The same transaction keeps the capture queue
//! (`payment_captures_due`): a row while the reservation owes a capture, at its
//! deadline, none once it is captured or voided.

use std::fmt;

use aggregates::{Cents, Reservation, ReservationEvent};
use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::attempt::AttemptError;

/// A call to the payment gateway that a committed event decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutboxOperation {
    /// Take part or all of the authorization.
    Capture,
    /// Give back part or all of a captured amount.
    Refund,
    /// Release an authorization that will not be used (a cancellation before the
    /// capture, a late or second authorization).
    Void,
}

impl OutboxOperation {
    pub const ALL: [OutboxOperation; 3] = [Self::Capture, Self::Refund, Self::Void];

    /// The name stored in `payment_outbox.operation` (and the metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Capture => "capture",
            Self::Refund => "refund",
            Self::Void => "void",
        }
    }

    /// The operation a stored name stands for.
    pub fn parse(stored: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.as_str() == stored)
    }
}

impl fmt::Display for OutboxOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One gateway call to make.
struct Call {
    operation: OutboxOperation,
    provider_txn_id: String,
    amount_cents: i64,
    /// The gateway's idempotency key: one call per (reservation, operation[, txn]).
    gateway_key: String,
}

/// The gateway calls `events` decide for reservation `id` (`reservation` is its state
/// after them).
fn calls(id: Uuid, reservation: &Reservation, events: &[ReservationEvent]) -> Vec<Call> {
    let txn = reservation.ledger().map(|l| l.provider_txn_id.clone());
    let on_the_card = |operation, amount_cents: Cents, gateway_key: &String| {
        txn.as_ref().map(|txn| Call {
            operation,
            provider_txn_id: txn.clone(),
            amount_cents: amount_cents.get(),
            gateway_key: gateway_key.clone(),
        })
    };
    events
        .iter()
        .filter_map(|event| match event {
            ReservationEvent::PaymentCaptured {
                amount_cents,
                gateway_key,
                ..
            } => on_the_card(OutboxOperation::Capture, *amount_cents, gateway_key),
            ReservationEvent::PaymentRefunded {
                amount_cents,
                gateway_key,
                ..
            } => on_the_card(OutboxOperation::Refund, *amount_cents, gateway_key),
            ReservationEvent::PaymentVoided { gateway_key, .. } => {
                on_the_card(OutboxOperation::Void, Cents::ZERO, gateway_key)
            }
            ReservationEvent::LatePaymentRefunded {
                provider_txn_id,
                amount_cents,
                ..
            } => Some(Call {
                operation: OutboxOperation::Void,
                provider_txn_id: provider_txn_id.clone(),
                amount_cents: amount_cents.get(),
                gateway_key: format!("{id}:void:{provider_txn_id}"),
            }),
            _ => None,
        })
        .collect()
}

/// Records the gateway calls `events` decide for `reservation` (its state after them).
/// Called inside the transaction that appends the events.
pub async fn enqueue(
    conn: &mut PgConnection,
    reservation: &Reservation,
    events: &[ReservationEvent],
    now: DateTime<Utc>,
) -> Result<(), AttemptError> {
    let Some(details) = reservation.details() else {
        return Ok(());
    };
    let id = details.reservation_id.as_uuid();
    for call in calls(id, reservation, events) {
        sqlx::query(
            "INSERT INTO payment_outbox
                (reservation_id, operation, provider_txn_id, amount_cents, gateway_key,
                 created_at, next_attempt_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6)
             ON CONFLICT (gateway_key) DO NOTHING",
        )
        .bind(id)
        .bind(call.operation.as_str())
        .bind(&call.provider_txn_id)
        .bind(call.amount_cents)
        .bind(&call.gateway_key)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    if events.iter().any(moves_capture) {
        match reservation.capture_due_at() {
            Some(due) => {
                sqlx::query(
                    "INSERT INTO payment_captures_due (reservation_id, due_at) VALUES ($1, $2)
                     ON CONFLICT (reservation_id) DO UPDATE SET due_at = EXCLUDED.due_at",
                )
                .bind(id)
                .bind(due)
                .execute(&mut *conn)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM payment_captures_due WHERE reservation_id = $1")
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// Can `event` set, move or end a capture deadline?
fn moves_capture(event: &ReservationEvent) -> bool {
    matches!(
        event,
        ReservationEvent::ReservationConfirmed { .. }
            | ReservationEvent::DatesChanged { .. }
            | ReservationEvent::PaymentCaptured { .. }
            | ReservationEvent::PaymentVoided { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_reads_back_from_its_stored_name() {
        for op in OutboxOperation::ALL {
            assert_eq!(OutboxOperation::parse(op.as_str()), Some(op));
        }
        assert_eq!(OutboxOperation::parse("charge"), None);
    }
}
