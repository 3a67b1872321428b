//! The payment saga: from "the guest decided" to "paid", with the gateway call outside
//! every transaction.
//!
//! Confirming a hold is three steps (see the payments migration for the step log):
//! T1 checks the hold is live and records that an authorization is about to be
//! attempted (the saga row, and the client's idempotency record as in flight); then the
//! gateway is called under the key `{reservation}:auth`; then T2 confirms the
//! reservation, or ends it `declined` and releases its nights. The same resolution is
//! reached from three places, whichever comes first — the request itself, the gateway's
//! webhook, or the recovery worker after a crash — and is idempotent: the reservation
//! keeps one authorization, and any other (late, after a cancellation, a second one) is
//! given back through the outbox, never used to resurrect a lapsed hold.

pub mod gateway;
pub mod outbox;
pub mod signature;
pub mod simulated;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aggregates::booking;
use aggregates::{
    CommandName, Payment, Rejection, ReservationEvent, ReservationId, ReservationStatus,
};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use crate::commands::{AfterDecision, Caller, CommandService, Outcome, ReservationView};
use crate::error::CommandError;
use crate::write::{
    idempotency, settle, with_retries, AttemptError, IdempotencyKey, Loader, RequestFingerprint,
};
use gateway::{
    authorization_key, Authorization, AuthorizationStatus, AuthorizeRequest, GatewayError,
    PaymentGateway, PaymentToken,
};

/// How a confirmation ended, as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentResult {
    /// Paid and confirmed (200).
    Confirmed,
    /// The gateway has not answered yet; the reservation is still held (202).
    Pending,
    /// The card was declined and the hold released (402).
    Declined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmReply {
    pub result: PaymentResult,
    pub reservation: ReservationView,
}

/// The stored outcome of a confirm request.
pub type ConfirmOutcome = Result<ConfirmReply, Rejection>;

impl ConfirmReply {
    /// What a client is told about a reservation in this state.
    pub fn of(outcome: Outcome) -> ConfirmOutcome {
        let view = outcome?;
        let result = match view.status {
            ReservationStatus::Confirmed => PaymentResult::Confirmed,
            ReservationStatus::Held => PaymentResult::Pending,
            ReservationStatus::Declined => PaymentResult::Declined,
            ReservationStatus::Expired => {
                return Err(Rejection::HoldExpired {
                    expired_at: view.hold_expires_at,
                })
            }
            status @ ReservationStatus::Cancelled => {
                return Err(Rejection::InvalidState { status })
            }
        };
        Ok(ConfirmReply {
            result,
            reservation: view,
        })
    }
}

/// What the gateway's webhook reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookNotice {
    pub provider_txn_id: String,
    pub reservation_id: ReservationId,
    pub status: WebhookStatus,
    pub amount_cents: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookStatus {
    Authorized,
    Declined,
}

/// What applying a webhook did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebhookResult {
    /// The authorization confirmed the reservation.
    Confirmed,
    /// The authorization could not be kept and is being given back.
    Refunded,
    /// The decline ended the hold.
    Declined,
    /// Already known (the request or the recovery got there first): nothing changed.
    Ignored,
    /// This provider transaction was delivered before: acknowledged, nothing changed.
    Duplicate,
}

#[derive(Debug, Clone, Copy)]
pub struct PaymentConfig {
    /// How long one gateway call may take before the request stops waiting.
    pub call_timeout: Duration,
    /// How long an unresolved saga is left to its request (and the webhook) before the
    /// recovery worker asks the gateway about it.
    pub recover_after: Duration,
}

impl Default for PaymentConfig {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(3),
            recover_after: Duration::from_secs(30),
        }
    }
}

/// What a recovery pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub resolved: usize,
    pub still_pending: usize,
    pub abandoned: usize,
    pub failed: usize,
}

#[derive(Clone)]
pub struct PaymentService {
    commands: CommandService,
    gateway: Arc<dyn PaymentGateway>,
    config: PaymentConfig,
    crash_after_authorize: Arc<AtomicBool>,
}

/// The saga row T1 leaves for the gateway call.
struct Started {
    gateway_key: String,
    amount_cents: i64,
}

enum Begun {
    /// The request was answered before (a replay), or there is nothing to pay for.
    Answered(ConfirmOutcome),
    Authorize(Started),
}

/// How a saga is being resolved.
#[derive(Debug, Clone)]
enum Resolution {
    Authorized(Payment),
    Declined(Option<String>),
}

impl PaymentService {
    pub fn new(
        commands: CommandService,
        gateway: Arc<dyn PaymentGateway>,
        config: PaymentConfig,
    ) -> Self {
        Self {
            commands,
            gateway,
            config,
            crash_after_authorize: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn gateway(&self) -> &Arc<dyn PaymentGateway> {
        &self.gateway
    }

    pub fn commands(&self) -> &CommandService {
        &self.commands
    }

    /// Fault injection for tests: after the gateway authorizes, stop as if the process
    /// died before T2 (nothing more is written; the saga is left to recovery).
    pub fn crash_after_authorize(&self, crash: bool) {
        self.crash_after_authorize.store(crash, Ordering::SeqCst);
    }

    fn chrono(d: Duration) -> chrono::Duration {
        chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
    }

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
            CommandName::Confirm.as_str(),
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
            Begun::Answered(outcome) => return Ok(outcome),
            Begun::Authorize(started) => started,
        };
        let request = AuthorizeRequest {
            idempotency_key: started.gateway_key,
            token,
            amount_cents: started.amount_cents,
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

    async fn call<T>(
        &self,
        call: BoxFuture<'_, Result<T, GatewayError>>,
    ) -> Result<T, GatewayError> {
        match tokio::time::timeout(self.config.call_timeout, call).await {
            Ok(answer) => answer,
            Err(_) => Err(GatewayError::Timeout),
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
            return Ok(Begun::Answered(stored));
        }
        // Locking the reservation row orders T1 with every command on the reservation.
        let loaded = Loader { conn: &mut *tx }
            .reservation(reservation_id, true)
            .await?;
        let Some(loaded) = loaded else {
            let outcome: ConfirmOutcome = Err(Rejection::ReservationNotFound);
            idempotency::complete(tx, fingerprint, &outcome).await?;
            return Ok(Begun::Answered(outcome));
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
            return Ok(Begun::Answered(outcome));
        }
        let gateway_key = authorization_key(view.reservation_id);
        let lease_until =
            now + Self::chrono(self.config.call_timeout) + Self::chrono(self.config.recover_after);
        sqlx::query(
            "INSERT INTO payment_sagas
                (reservation_id, hotel_id, gateway_key, payment_token, amount_cents, state,
                 client, client_key, request_hash, lease_until, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, 'authorizing', $6, $7, $8, $9, $10, $10)
             ON CONFLICT (reservation_id) DO UPDATE
                SET state = 'authorizing', client = EXCLUDED.client,
                    client_key = EXCLUDED.client_key, request_hash = EXCLUDED.request_hash,
                    lease_until = EXCLUDED.lease_until, updated_at = EXCLUDED.updated_at,
                    attempts = payment_sagas.attempts + 1",
        )
        .bind(view.reservation_id)
        .bind(view.hotel_id)
        .bind(&gateway_key)
        .bind(token.as_str())
        .bind(view.total_cents)
        .bind(&fingerprint.client)
        .bind(fingerprint.key.as_str())
        .bind(&fingerprint.request_hash)
        .bind(lease_until)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        idempotency::begin_in_flight(tx, fingerprint, now).await?;
        Ok(Begun::Authorize(Started {
            gateway_key,
            amount_cents: view.total_cents,
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
            sqlx::query(
                "UPDATE payment_sagas
                    SET client = NULL, client_key = NULL, request_hash = NULL,
                        lease_until = $2, updated_at = $3
                  WHERE reservation_id = $1 AND state = 'authorizing'",
            )
            .bind(reservation_id.as_uuid())
            .bind(now + Self::chrono(self.config.recover_after))
            .bind(now)
            .execute(&mut *tx)
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

    /// T2 (from the request, the webhook or recovery): apply the gateway's answer to
    /// the reservation, resolve the saga, and answer the waiting client.
    async fn resolve(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
        resolution: Resolution,
        own: Option<&RequestFingerprint>,
        webhook: Option<&WebhookNotice>,
    ) -> Result<(ConfirmOutcome, Vec<ReservationEvent>), CommandError> {
        let hook = Resolve {
            reservation_id: reservation_id.as_uuid(),
            declined: matches!(resolution, Resolution::Declined(_)),
            provider_txn_id: match &resolution {
                Resolution::Authorized(p) => Some(p.provider_txn_id.clone()),
                Resolution::Declined(txn) => txn.clone(),
            },
            own: own.cloned(),
            webhook: webhook.cloned(),
            now: self.commands.now(),
            seen: Mutex::new(Seen::default()),
        };
        let command = match &resolution {
            Resolution::Authorized(_) => CommandName::ApplyAuthorization.as_str(),
            Resolution::Declined(_) => CommandName::DeclinePayment.as_str(),
        };
        let outcome = self
            .commands
            .reservation_command_with(
                caller,
                "payments",
                None,
                command,
                &reservation_id,
                reservation_id,
                None,
                |l| match &resolution {
                    Resolution::Authorized(payment) => booking::apply_authorization(
                        l.reservation,
                        l.nights,
                        l.now,
                        payment.clone(),
                    ),
                    Resolution::Declined(txn) => {
                        booking::decline_payment(l.reservation, l.nights, l.now, txn.clone())
                    }
                },
                Some(&hook),
            )
            .await?;
        let seen = hook
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        let reply = match seen.stored {
            // Someone answered our client first; give the same answer.
            Some(stored) => stored,
            None => ConfirmReply::of(outcome),
        };
        Ok((reply, seen.events))
    }

    /// Applies a webhook delivery (already authenticated).
    #[tracing::instrument(skip_all, fields(reservation = %notice.reservation_id, txn = %notice.provider_txn_id))]
    pub async fn apply_webhook(
        &self,
        notice: WebhookNotice,
    ) -> Result<(WebhookResult, Option<ReservationView>), CommandError> {
        let mut conn = self.commands.pool().acquire().await?;
        let seen: Option<String> =
            sqlx::query_scalar("SELECT result FROM payment_webhooks WHERE provider_txn_id = $1")
                .bind(&notice.provider_txn_id)
                .fetch_optional(&mut *conn)
                .await?;
        drop(conn);
        if seen.is_some() {
            metrics::counter!("payment_webhooks_total", "result" => "duplicate").increment(1);
            let view = self.commands.reservation(notice.reservation_id).await?;
            return Ok((WebhookResult::Duplicate, view));
        }
        let resolution = match notice.status {
            WebhookStatus::Authorized => Resolution::Authorized(Payment {
                provider_txn_id: notice.provider_txn_id.clone(),
                amount_cents: notice.amount_cents,
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
        metrics::counter!("payment_webhooks_total", "result" => format!("{result:?}").to_lowercase())
            .increment(1);
        let view = self.commands.reservation(notice.reservation_id).await?;
        Ok((result, view))
    }

    /// Finishes sagas whose request died (or never heard back) once their lease ran
    /// out: asks the gateway what became of the authorization and applies it. Safe to
    /// run in several processes at once (leases are taken with SKIP LOCKED; the
    /// resolution is idempotent).
    pub async fn recover_due(&self, limit: i64) -> Result<Recovered, CommandError> {
        let now = self.commands.now();
        let lease_until = now + Self::chrono(self.config.recover_after);
        let rows = sqlx::query(
            "UPDATE payment_sagas SET lease_until = $2, attempts = attempts + 1, updated_at = $1
              WHERE reservation_id IN (
                    SELECT reservation_id FROM payment_sagas
                     WHERE state = 'authorizing' AND lease_until <= $1
                     ORDER BY lease_until
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED)
              RETURNING reservation_id, gateway_key, payment_token, amount_cents,
                        client, client_key",
        )
        .bind(now)
        .bind(lease_until)
        .bind(limit)
        .fetch_all(self.commands.pool())
        .await?;
        let mut recovered = Recovered::default();
        let caller = Caller::Staff("payment-recovery".into());
        for row in rows {
            let reservation_id: Uuid = row.try_get("reservation_id")?;
            let reservation_id = ReservationId::from_uuid(reservation_id);
            let gateway_key: String = row.try_get("gateway_key")?;
            let token: String = row.try_get("payment_token")?;
            let amount_cents: i64 = row.try_get("amount_cents")?;
            let mut answer = self.call(self.gateway.lookup(&gateway_key)).await;
            if let Ok(None) = answer {
                // The gateway never received the call. Make it now if the hold is still
                // live (same key: still at most one authorization); otherwise give up.
                let live = self
                    .commands
                    .reservation(reservation_id)
                    .await?
                    .is_some_and(|v| v.status == ReservationStatus::Held);
                let token = PaymentToken::parse(&token).ok();
                answer = match (live, token) {
                    (true, Some(token)) => self
                        .call(self.gateway.authorize(AuthorizeRequest {
                            idempotency_key: gateway_key.clone(),
                            token,
                            amount_cents,
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
                    let client: Option<String> = row.try_get("client")?;
                    let client_key: Option<String> = row.try_get("client_key")?;
                    let mut tx = self.commands.pool().begin().await?;
                    sqlx::query(
                        "UPDATE payment_sagas SET state = 'abandoned', updated_at = $2
                          WHERE reservation_id = $1 AND state = 'authorizing'",
                    )
                    .bind(reservation_id.as_uuid())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    if let (Some(client), Some(key)) = (client, client_key) {
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

    /// Delivers due outbox rows (captures, refunds, voids) to the gateway.
    pub async fn deliver_outbox(&self, limit: i64) -> Result<outbox::Delivered, CommandError> {
        Ok(outbox::deliver_due(
            self.commands.pool(),
            self.gateway.as_ref(),
            self.commands.now(),
            limit,
        )
        .await?)
    }
}

fn resolution_of(authorization: &Authorization) -> Option<Resolution> {
    match authorization.status {
        AuthorizationStatus::Authorized => Some(Resolution::Authorized(Payment {
            provider_txn_id: authorization.provider_txn_id.clone(),
            amount_cents: authorization.amount_cents,
        })),
        AuthorizationStatus::Declined => Some(Resolution::Declined(Some(
            authorization.provider_txn_id.clone(),
        ))),
        AuthorizationStatus::Pending => None,
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
struct Seen {
    events: Vec<ReservationEvent>,
    /// The outcome someone else stored for our own request first.
    stored: Option<ConfirmOutcome>,
}

/// The writes that go with a resolution, in its transaction: the saga's new state, the
/// waiting client's outcome, the webhook receipt.
struct Resolve {
    reservation_id: Uuid,
    declined: bool,
    provider_txn_id: Option<String>,
    own: Option<RequestFingerprint>,
    webhook: Option<WebhookNotice>,
    now: DateTime<Utc>,
    seen: Mutex<Seen>,
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
                "declined"
            } else if view.status == ReservationStatus::Confirmed
                && !events
                    .iter()
                    .any(|e| matches!(e, ReservationEvent::LatePaymentRefunded { .. }))
            {
                "confirmed"
            } else {
                "refunded"
            };
            let waiting = sqlx::query(
                "UPDATE payment_sagas
                    SET state = $2, provider_txn_id = COALESCE($3, provider_txn_id),
                        updated_at = $4
                  WHERE reservation_id = $1 AND state = 'authorizing'
              RETURNING client, client_key, request_hash",
            )
            .bind(self.reservation_id)
            .bind(state)
            .bind(&self.provider_txn_id)
            .bind(self.now)
            .fetch_optional(&mut *conn)
            .await?;
            if let Some(row) = waiting {
                let client: Option<String> = row.try_get("client")?;
                let key: Option<String> = row.try_get("client_key")?;
                let hash: Option<String> = row.try_get("request_hash")?;
                if let (Some(client), Some(key), Some(hash)) = (client, key, hash) {
                    idempotency::complete_in_flight(conn, &client, &key, &hash, &reply).await?;
                }
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
                let result = result_of(events);
                sqlx::query(
                    "INSERT INTO payment_webhooks
                        (provider_txn_id, reservation_id, status, amount_cents, result, received_at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (provider_txn_id) DO NOTHING",
                )
                .bind(&notice.provider_txn_id)
                .bind(notice.reservation_id.as_uuid())
                .bind(match notice.status {
                    WebhookStatus::Authorized => "authorized",
                    WebhookStatus::Declined => "declined",
                })
                .bind(notice.amount_cents)
                .bind(format!("{result:?}").to_lowercase())
                .bind(self.now)
                .execute(&mut *conn)
                .await?;
            }
            Ok(())
        })
    }
}
