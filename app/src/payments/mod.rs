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

mod confirm;
pub mod gateway;
pub mod outbox;
mod recovery;
mod reprice;
pub mod signature;
pub mod simulated;
mod webhook;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aggregates::booking;
use aggregates::{
    Cents, CommandName, Payment, Rejection, ReservationEvent, ReservationId, ReservationStatus,
};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::commands::{
    Caller, CommandService, Loaded, Outcome, ReservationCommand, ReservationView,
};
use gateway::{Authorization, AuthorizationStatus, GatewayError, PaymentGateway};
use store::error::CommandError;
use store::write::RequestFingerprint;
use webhook::{Resolve, Seen};

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
            // Checked in or out: it was confirmed (and paid) before the guest arrived.
            ReservationStatus::Confirmed
            | ReservationStatus::CheckedIn
            | ReservationStatus::CheckedOut
            | ReservationStatus::NoShow => PaymentResult::Confirmed,
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

impl WebhookStatus {
    /// The name stored in `payment_webhooks.status` (the same as on the wire).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Authorized => "authorized",
            Self::Declined => "declined",
        }
    }
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

impl WebhookResult {
    /// The name stored in `payment_webhooks.result` and the metric label (the same as
    /// on the wire).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Refunded => "refunded",
            Self::Declined => "declined",
            Self::Ignored => "ignored",
            Self::Duplicate => "duplicate",
        }
    }
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

/// How a saga is being resolved.
#[derive(Debug, Clone)]
pub(crate) enum Resolution {
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

    pub(crate) fn chrono(d: Duration) -> chrono::Duration {
        chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
    }

    pub(crate) async fn call<T>(
        &self,
        call: BoxFuture<'_, Result<T, GatewayError>>,
    ) -> Result<T, GatewayError> {
        match tokio::time::timeout(self.config.call_timeout, call).await {
            Ok(answer) => answer,
            Err(_) => Err(GatewayError::Timeout),
        }
    }

    /// T2 (from the request, the webhook or recovery): apply the gateway's answer to
    /// the reservation, resolve the saga, and answer the waiting client.
    pub(crate) async fn resolve(
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
            Resolution::Authorized(_) => CommandName::ApplyAuthorization,
            Resolution::Declined(_) => CommandName::DeclinePayment,
        };
        let outcome = self
            .commands
            .run(
                ReservationCommand {
                    caller,
                    scope: "payments",
                    key: None,
                    command,
                    request: &reservation_id,
                    reservation_id,
                    extra_stay: None,
                    decide: |l: Loaded<'_>| match &resolution {
                        Resolution::Authorized(payment) => booking::apply_authorization(
                            l.reservation,
                            l.nights,
                            l.now,
                            payment.clone(),
                            l.hotel
                                .details()
                                .map_or(aggregates::TimeZone::UTC, |d| d.timezone()),
                        ),
                        Resolution::Declined(txn) => {
                            booking::decline_payment(l.reservation, l.nights, l.now, txn.clone())
                        }
                    },
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
            amount_cents: Cents::new(authorization.amount_cents),
        })),
        AuthorizationStatus::Declined => Some(Resolution::Declined(Some(
            authorization.provider_txn_id.clone(),
        ))),
        AuthorizationStatus::Pending => None,
    }
}
