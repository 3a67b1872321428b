//! Confirming: T1 (open the saga, mark the request in flight), the authorization call
//! outside any transaction, then T2 (see `PaymentService::resolve`) or, when the
//! gateway has not decided yet, a 202 that leaves the saga to the webhook or recovery.

use aggregates::Currency;
use aggregates::{CommandName, Rejection, ReservationId, ReservationStatus};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use std::sync::atomic::Ordering;

use super::gateway::{
    authorization_key, Authorization, AuthorizationStatus, AuthorizeRequest, GatewayError,
    PaymentToken,
};
use super::{resolution_of, ConfirmOutcome, ConfirmReply, PaymentService, Resolution};
use crate::commands::{Caller, ReservationView};
use store::error::CommandError;
use store::write::saga::{self, OpenSaga};
use store::write::{
    idempotency, settle, with_retries, AttemptError, IdempotencyKey, Loader, RequestFingerprint,
};

/// The saga row T1 leaves for the gateway call.
struct Started {
    gateway_key: String,
    amount_cents: i64,
    currency: Currency,
}

enum Begun {
    /// The request was answered before (a replay), or there is nothing to pay for.
    Answered(Box<ConfirmOutcome>),
    Authorize(Started),
}

impl PaymentService {
    /// Confirm a held reservation by paying for it with `token`.
    #[tracing::instrument(skip_all, fields(reservation = %reservation_id))]
    pub async fn confirm(
        &self,
        caller: &Caller,
        scope: &str,
        key: IdempotencyKey,
        reservation_id: ReservationId,
        token: PaymentToken,
    ) -> Result<ConfirmOutcome, CommandError> {
        #[derive(Serialize)]
        struct ConfirmRequest<'a> {
            reservation_id: ReservationId,
            payment_token: &'a str,
        }
        let fingerprint = RequestFingerprint::new(
            scope,
            key,
            CommandName::Confirm,
            &ConfirmRequest {
                reservation_id,
                payment_token: token.as_str(),
            },
        )?;
        let now = self.commands.now();
        let pool = self.commands.pool().clone();
        let begun = with_retries(self.commands.config().retry, |_| async {
            let mut tx = pool.begin().await?;
            let result = self
                .begin(&mut tx, caller, &fingerprint, reservation_id, &token, now)
                .await;
            settle(tx, result).await
        })
        .await?;
        let started = match begun {
            Begun::Answered(outcome) => return Ok(*outcome),
            Begun::Authorize(started) => started,
        };
        let request = AuthorizeRequest {
            idempotency_key: started.gateway_key,
            token,
            amount_cents: started.amount_cents,
            currency: started.currency,
            reference: reservation_id.as_uuid().to_string(),
        };
        let answer = self.call(self.gateway.authorize(request)).await;
        if answer.is_ok() && self.crash_after_authorize.load(Ordering::SeqCst) {
            return Err(CommandError::Internal(
                "injected crash between authorize and confirm".into(),
            ));
        }
        match answer {
            Ok(Authorization {
                status: AuthorizationStatus::Pending,
                ..
            })
            | Err(GatewayError::Timeout) => self.pending(&fingerprint, reservation_id).await,
            Ok(authorization) => {
                let resolution =
                    resolution_of(&authorization).unwrap_or(Resolution::Declined(None));
                self.resolve(caller, reservation_id, resolution, Some(&fingerprint), None)
                    .await
                    .map(|(outcome, _)| outcome)
            }
            Err(GatewayError::Refused(reason)) => {
                tracing::info!(%reason, "the gateway refused the authorization; declined");
                self.resolve(
                    caller,
                    reservation_id,
                    Resolution::Declined(None),
                    Some(&fingerprint),
                    None,
                )
                .await
                .map(|(outcome, _)| outcome)
            }
            Err(GatewayError::Unavailable(reason)) => {
                // Nothing was charged; let the client's retry run the call again (the
                // saga stays open for recovery meanwhile).
                let mut conn = pool.acquire().await?;
                idempotency::abandon(&mut conn, &fingerprint.client, fingerprint.key.as_str())
                    .await?;
                Err(CommandError::PaymentUnavailable(reason))
            }
        }
    }

    /// T1: replay, refuse, or open the saga and mark the request in flight.
    async fn begin(
        &self,
        tx: &mut PgConnection,
        caller: &Caller,
        fingerprint: &RequestFingerprint,
        reservation_id: ReservationId,
        token: &PaymentToken,
        now: DateTime<Utc>,
    ) -> Result<Begun, AttemptError> {
        if let Some(stored) = idempotency::claim::<ConfirmOutcome>(tx, fingerprint).await? {
            return Ok(Begun::Answered(Box::new(stored)));
        }
        // Locking the reservation row orders T1 with every command on the reservation.
        let loaded = Loader { conn: &mut *tx }
            .reservation(reservation_id, true)
            .await?;
        let Some(loaded) = loaded else {
            let outcome: ConfirmOutcome = Err(Rejection::ReservationNotFound);
            idempotency::complete(tx, fingerprint, &outcome).await?;
            return Ok(Begun::Answered(Box::new(outcome)));
        };
        if !caller.may_act_on(&loaded.reservation) {
            return Err(AttemptError::Fatal(CommandError::Forbidden));
        }
        let view = ReservationView::of(&loaded.reservation, now).ok_or_else(|| {
            AttemptError::Fatal(CommandError::Internal(
                "stored reservation without details".into(),
            ))
        })?;
        if view.status != ReservationStatus::Held {
            // Confirmed already (a repeat under a new key), lapsed, cancelled, declined:
            // nothing to charge.
            let outcome = ConfirmReply::of(Ok(view));
            idempotency::complete(tx, fingerprint, &outcome).await?;
            return Ok(Begun::Answered(Box::new(outcome)));
        }
        let gateway_key = authorization_key(view.reservation_id);
        // The stay and its taxes not included in the price: what confirming asks for.
        let due = view.total_due_cents.unwrap_or(view.total_cents);
        let lease_until =
            now + Self::chrono(self.config.call_timeout) + Self::chrono(self.config.recover_after);
        saga::open(
            tx,
            OpenSaga {
                reservation_id: view.reservation_id,
                hotel_id: view.hotel_id,
                gateway_key: &gateway_key,
                payment_token: token.as_str(),
                amount_cents: due.get(),
                currency: view.currency.code(),
                client: &fingerprint.client,
                client_key: fingerprint.key.as_str(),
                request_hash: &fingerprint.request_hash,
                lease_until,
                now,
            },
        )
        .await?;
        idempotency::begin_in_flight(tx, fingerprint, now).await?;
        Ok(Begun::Authorize(Started {
            gateway_key,
            amount_cents: due.get(),
            currency: view.currency,
        }))
    }

    /// The gateway has not decided: answer 202 with the reservation still held, and
    /// leave the saga to the webhook (or, failing that, to recovery).
    async fn pending(
        &self,
        fingerprint: &RequestFingerprint,
        reservation_id: ReservationId,
    ) -> Result<ConfirmOutcome, CommandError> {
        let now = self.commands.now();
        let view = self
            .commands
            .reservation(reservation_id)
            .await?
            .ok_or(CommandError::Rejected(Rejection::ReservationNotFound))?;
        let outcome = ConfirmReply::of(Ok(view));
        let mut tx = self.commands.pool().begin().await?;
        let result: Result<Option<ConfirmOutcome>, AttemptError> = async {
            let written = idempotency::complete_in_flight(
                &mut tx,
                &fingerprint.client,
                fingerprint.key.as_str(),
                &fingerprint.request_hash,
                &outcome,
            )
            .await?;
            if !written {
                // The webhook resolved the saga meanwhile and answered for us.
                return idempotency::completed::<ConfirmOutcome>(&mut tx, fingerprint).await;
            }
            saga::park(
                &mut tx,
                reservation_id.as_uuid(),
                now + Self::chrono(self.config.recover_after),
                now,
            )
            .await?;
            Ok(None)
        }
        .await;
        match settle(tx, result).await {
            Ok(Some(stored)) => Ok(stored),
            Ok(None) => Ok(outcome),
            Err(AttemptError::Fatal(e)) => Err(e),
            Err(AttemptError::Conflict) => Err(CommandError::Contention { attempts: 1 }),
        }
    }
}
