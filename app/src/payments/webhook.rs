//! Applying the gateway's webhook, and the writes every resolution of a saga adds to
//! the transaction of its events (the saga's new state, the waiting client's outcome,
//! the webhook's receipt).

use std::sync::Mutex;

use aggregates::{Cents, Payment, Rejection, ReservationEvent, ReservationStatus};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    ConfirmOutcome, ConfirmReply, PaymentService, Resolution, WebhookNotice, WebhookResult,
    WebhookStatus,
};
use crate::commands::{AfterDecision, Caller, Outcome, ReservationView};
use store::error::CommandError;
use store::write::saga::{self, SagaState, WebhookReceipt};
use store::write::{idempotency, AttemptError, RequestFingerprint};

impl PaymentService {
    /// Applies a webhook delivery (already authenticated).
    #[tracing::instrument(skip_all, fields(reservation = %notice.reservation_id, txn = %notice.provider_txn_id))]
    pub async fn apply_webhook(
        &self,
        notice: WebhookNotice,
    ) -> Result<(WebhookResult, Option<ReservationView>), CommandError> {
        if saga::webhook_seen(self.commands.pool(), &notice.provider_txn_id).await? {
            metrics::counter!("payment_webhooks_total", "result" => WebhookResult::Duplicate.as_str())
                .increment(1);
            let view = self.commands.reservation(notice.reservation_id).await?;
            return Ok((WebhookResult::Duplicate, view));
        }
        let resolution = match notice.status {
            WebhookStatus::Authorized => Resolution::Authorized(Payment {
                provider_txn_id: notice.provider_txn_id.clone(),
                amount_cents: Cents::new(notice.amount_cents),
            }),
            WebhookStatus::Declined => Resolution::Declined(Some(notice.provider_txn_id.clone())),
        };
        let caller = Caller::Staff("payment-gateway".into());
        let (outcome, events) = self
            .resolve(
                &caller,
                notice.reservation_id,
                resolution,
                None,
                Some(&notice),
            )
            .await?;
        if let Err(Rejection::ReservationNotFound) = outcome {
            return Err(CommandError::Rejected(Rejection::ReservationNotFound));
        }
        let result = result_of(&events);
        metrics::counter!("payment_webhooks_total", "result" => result.as_str()).increment(1);
        let view = self.commands.reservation(notice.reservation_id).await?;
        Ok((result, view))
    }
}

fn result_of(events: &[ReservationEvent]) -> WebhookResult {
    if events
        .iter()
        .any(|e| matches!(e, ReservationEvent::ReservationConfirmed { .. }))
    {
        WebhookResult::Confirmed
    } else if events
        .iter()
        .any(|e| matches!(e, ReservationEvent::LatePaymentRefunded { .. }))
    {
        WebhookResult::Refunded
    } else if events
        .iter()
        .any(|e| matches!(e, ReservationEvent::PaymentDeclined { .. }))
    {
        WebhookResult::Declined
    } else {
        WebhookResult::Ignored
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Seen {
    pub events: Vec<ReservationEvent>,
    /// The outcome someone else stored for our own request first.
    pub stored: Option<ConfirmOutcome>,
}

/// The writes that go with a resolution, in its transaction: the saga's new state, the
/// waiting client's outcome, the webhook receipt.
pub(super) struct Resolve {
    pub reservation_id: Uuid,
    pub declined: bool,
    pub provider_txn_id: Option<String>,
    pub own: Option<RequestFingerprint>,
    pub webhook: Option<WebhookNotice>,
    pub now: DateTime<Utc>,
    pub seen: Mutex<Seen>,
}

impl AfterDecision for Resolve {
    fn write<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        outcome: &'a Outcome,
        events: &'a [ReservationEvent],
    ) -> BoxFuture<'a, Result<(), AttemptError>> {
        Box::pin(async move {
            if let Ok(mut seen) = self.seen.lock() {
                *seen = Seen {
                    events: events.to_vec(),
                    stored: None,
                };
            }
            let Ok(view) = outcome else {
                return Ok(());
            };
            let reply = ConfirmReply::of(outcome.clone());
            let state = if self.declined {
                SagaState::Declined
            } else if view.status == ReservationStatus::Confirmed
                && !events
                    .iter()
                    .any(|e| matches!(e, ReservationEvent::LatePaymentRefunded { .. }))
            {
                SagaState::Confirmed
            } else {
                SagaState::Refunded
            };
            let waiting = saga::resolve(
                conn,
                self.reservation_id,
                state,
                self.provider_txn_id.as_deref(),
                self.now,
            )
            .await?;
            if let Some(waiting) = waiting {
                idempotency::complete_in_flight(
                    conn,
                    &waiting.client,
                    &waiting.client_key,
                    &waiting.request_hash,
                    &reply,
                )
                .await?;
            }
            if let Some(own) = &self.own {
                let written = idempotency::complete_in_flight(
                    conn,
                    &own.client,
                    own.key.as_str(),
                    &own.request_hash,
                    &reply,
                )
                .await?;
                if !written {
                    let stored = idempotency::completed::<ConfirmOutcome>(conn, own).await?;
                    if let Ok(mut seen) = self.seen.lock() {
                        seen.stored = stored;
                    }
                }
            }
            if let Some(notice) = &self.webhook {
                saga::record_webhook(
                    conn,
                    WebhookReceipt {
                        provider_txn_id: &notice.provider_txn_id,
                        reservation_id: notice.reservation_id.as_uuid(),
                        status: notice.status.as_str(),
                        amount_cents: notice.amount_cents,
                        result: result_of(events).as_str(),
                        received_at: self.now,
                    },
                )
                .await?;
            }
            Ok(())
        })
    }
}
