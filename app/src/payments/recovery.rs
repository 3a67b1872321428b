//! Recovery: sagas whose request died (or never heard back) are finished once their
//! lease runs out, by asking the gateway what became of the authorization under the
//! saga's own key.

use aggregates::Currency;
use aggregates::{ReservationId, ReservationStatus};

use super::gateway::{AuthorizeRequest, GatewayError, PaymentToken};
use super::{resolution_of, PaymentService, Recovered};
use crate::commands::Caller;
use store::error::CommandError;
use store::write::idempotency;
use store::write::saga;

impl PaymentService {
    /// Finishes sagas whose request died (or never heard back) once their lease ran
    /// out: asks the gateway what became of the authorization and applies it. Safe to
    /// run in several processes at once (leases are taken with SKIP LOCKED; the
    /// resolution is idempotent).
    pub async fn recover_due(&self, limit: i64) -> Result<Recovered, CommandError> {
        let now = self.commands.now();
        let lease_until = now + Self::chrono(self.config.recover_after);
        let due = saga::lease_due(self.commands.pool(), now, lease_until, limit).await?;
        let mut recovered = Recovered::default();
        let caller = Caller::Staff("payment-recovery".into());
        for row in due {
            let reservation_id = ReservationId::from_uuid(row.reservation_id);
            let gateway_key = row.gateway_key;
            let mut answer = self.call(self.gateway.lookup(&gateway_key)).await;
            if let Ok(None) = answer {
                // The gateway never received the call. Make it now if the hold is still
                // live (same key: still at most one authorization); otherwise give up.
                let live = self
                    .commands
                    .reservation(reservation_id)
                    .await?
                    .is_some_and(|v| v.status == ReservationStatus::Held);
                let token = PaymentToken::parse(&row.payment_token).ok();
                answer = match (live, token) {
                    (true, Some(token)) => self
                        .call(self.gateway.authorize(AuthorizeRequest {
                            idempotency_key: gateway_key.clone(),
                            token,
                            amount_cents: row.amount_cents,
                            // Written by the saga's opening from a parsed currency.
                            currency: Currency::parse(&row.currency).unwrap_or_default(),
                            reference: reservation_id.as_uuid().to_string(),
                        }))
                        .await
                        .map(Some),
                    _ => Ok(None),
                };
            }
            match answer {
                Ok(Some(authorization)) => match resolution_of(&authorization) {
                    Some(resolution) => {
                        let (outcome, _) = self
                            .resolve(&caller, reservation_id, resolution, None, None)
                            .await?;
                        tracing::info!(reservation = %reservation_id, ?outcome, "payment recovered");
                        recovered.resolved += 1;
                    }
                    None => recovered.still_pending += 1,
                },
                Ok(None) => {
                    let mut tx = self.commands.pool().begin().await?;
                    saga::abandon(&mut tx, row.reservation_id, now).await?;
                    if let (Some(client), Some(key)) = (row.client, row.client_key) {
                        idempotency::abandon(&mut tx, &client, &key).await?;
                    }
                    tx.commit().await?;
                    recovered.abandoned += 1;
                }
                Err(GatewayError::Timeout) => recovered.still_pending += 1,
                Err(e) => {
                    tracing::warn!(reservation = %reservation_id, error = %e, "payment recovery: gateway call failed; retrying later");
                    recovered.failed += 1;
                }
            }
        }
        Ok(recovered)
    }
}
