//! A payment provider simulated inside the server, so the whole guest journey runs on
//! one machine. It is written as a real adapter's counterpart would behave:
//!
//! - tokens decide the outcome: `tok_ok` (and any other `tok_…` not below) authorizes,
//!   `tok_decline` is declined, `tok_timeout` never answers the call in time — the
//!   result (authorized) arrives later through the webhook; `tok_no_increase`
//!   authorizes but declines every increment of it (a card at its limit);
//! - every call is idempotent under its key: the same key gets the first answer and no
//!   second effect; captures, voids and refunds are checked against what the
//!   transaction allows, as a provider would;
//! - it reports every authorization result to the webhook, signed, after a configurable
//!   delay, optionally more than once and out of order;
//! - it keeps a ledger of every effect, which tests read to prove a card was authorized,
//!   captured or refunded once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use rand::seq::SliceRandom;
use serde::Serialize;
use tokio::sync::OnceCell;

use super::gateway::{
    Authorization, AuthorizationStatus, AuthorizeRequest, GatewayError, PaymentGateway,
};
use super::signature;

/// How the simulated provider behaves.
#[derive(Debug, Clone)]
pub struct SimulatedConfig {
    /// How long each call takes.
    pub latency: Duration,
    /// How long after an authorization its webhook is sent; `None` holds webhooks until
    /// [`SimulatedGateway::release_webhooks`] (tests decide when they arrive).
    pub webhook_delay: Option<Duration>,
    /// How many times each webhook is delivered (at least once).
    pub webhook_copies: u32,
    /// Deliver released webhooks in random order.
    pub shuffle_webhooks: bool,
}

impl Default for SimulatedConfig {
    fn default() -> Self {
        Self {
            latency: Duration::from_millis(20),
            webhook_delay: Some(Duration::from_secs(5)),
            webhook_copies: 1,
            shuffle_webhooks: false,
        }
    }
}

/// One entry of the provider's ledger: an effect it performed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerEntry {
    pub operation: &'static str,
    pub reference: String,
    pub provider_txn_id: String,
    pub amount_cents: i64,
    /// ISO 4217 code: the authorization's currency.
    pub currency: String,
}

/// A reference's sums in the provider's ledger ([`SimulatedGateway::totals`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GatewayTotals {
    pub authorized_cents: i64,
    pub captured_cents: i64,
    pub refunded_cents: i64,
    pub voids: usize,
}

#[derive(Debug, Clone)]
struct Transaction {
    reference: String,
    amount_cents: i64,
    currency: String,
    status: AuthorizationStatus,
    /// What the webhook will report once a pending authorization settles.
    settles_as: AuthorizationStatus,
    captured_cents: i64,
    refunded_cents: i64,
    voided: bool,
    /// Increments of this authorization are declined (`tok_no_increase`).
    declines_increments: bool,
}

#[derive(Default)]
struct State {
    next_txn: u64,
    /// authorization key → provider transaction
    by_key: HashMap<String, String>,
    transactions: HashMap<String, Transaction>,
    /// keys of captures, voids and refunds already performed, with their answer
    operations: HashMap<String, Result<(), GatewayError>>,
    ledger: Vec<LedgerEntry>,
    held_webhooks: Vec<Vec<u8>>,
}

/// Where webhooks go: the server's own endpoint, signed with the shared secret.
struct WebhookTarget {
    url: String,
    secret: Vec<u8>,
    client: reqwest::Client,
}

#[derive(Clone)]
pub struct SimulatedGateway {
    config: SimulatedConfig,
    state: Arc<Mutex<State>>,
    target: Arc<OnceCell<WebhookTarget>>,
}

#[derive(Serialize)]
struct WebhookBody<'a> {
    provider_txn_id: &'a str,
    reservation_id: &'a str,
    status: AuthorizationStatus,
    amount_cents: i64,
}

impl SimulatedGateway {
    pub fn new(config: SimulatedConfig) -> Self {
        Self {
            config,
            state: Arc::new(Mutex::new(State::default())),
            target: Arc::new(OnceCell::new()),
        }
    }

    /// Sends webhooks to `url`, signed with `secret`. Set once, when the server knows
    /// its own address; without it, webhooks are not sent.
    pub fn deliver_webhooks_to(&self, url: String, secret: &[u8]) {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let _ = self.target.set(WebhookTarget {
            url,
            secret: secret.to_vec(),
            client,
        });
    }

    /// Every effect so far, in order.
    pub fn ledger(&self) -> Vec<LedgerEntry> {
        self.lock().ledger.clone()
    }

    /// What the provider's own records say of one reference (a reservation): summed
    /// over its entries, as a reconciliation would read a provider's report.
    pub fn totals(&self, reference: &str) -> GatewayTotals {
        let mut totals = GatewayTotals::default();
        for entry in self
            .lock()
            .ledger
            .iter()
            .filter(|e| e.reference == reference)
        {
            match entry.operation {
                "authorize" | "increment" => totals.authorized_cents += entry.amount_cents,
                "capture" => totals.captured_cents += entry.amount_cents,
                "refund" => totals.refunded_cents += entry.amount_cents,
                "void" => totals.voids += 1,
                _ => {}
            }
        }
        totals
    }

    /// The ledger entries of one reservation with the given operation.
    pub fn count(&self, reference: &str, operation: &str) -> usize {
        self.lock()
            .ledger
            .iter()
            .filter(|e| e.reference == reference && e.operation == operation)
            .count()
    }

    /// Settles every pending authorization and sends every held webhook now (in random
    /// order if so configured). Returns how many deliveries were attempted.
    pub async fn release_webhooks(&self) -> usize {
        let bodies = {
            let mut state = self.lock();
            let pending: Vec<String> = state
                .transactions
                .iter()
                .filter(|(_, t)| t.status == AuthorizationStatus::Pending)
                .map(|(id, _)| id.clone())
                .collect();
            for id in pending {
                if let Some(body) = Self::settle(&mut state, &id) {
                    state.held_webhooks.push(body);
                }
            }
            let mut bodies = std::mem::take(&mut state.held_webhooks);
            if self.config.shuffle_webhooks {
                bodies.shuffle(&mut rand::thread_rng());
            }
            bodies
        };
        let mut sent = 0;
        for body in bodies {
            sent += self.send(&body).await;
        }
        sent
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the ledger half-written (every
        // update is a few field assignments), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves a pending authorization to its final status; the webhook body to send.
    fn settle(state: &mut State, txn_id: &str) -> Option<Vec<u8>> {
        let txn = state.transactions.get_mut(txn_id)?;
        if txn.status == AuthorizationStatus::Pending {
            txn.status = txn.settles_as;
            if txn.status == AuthorizationStatus::Authorized {
                state.ledger.push(LedgerEntry {
                    operation: "authorize",
                    reference: txn.reference.clone(),
                    provider_txn_id: txn_id.to_owned(),
                    amount_cents: txn.amount_cents,
                    currency: txn.currency.clone(),
                });
            }
        }
        let txn = state.transactions.get(txn_id)?;
        serde_json::to_vec(&WebhookBody {
            provider_txn_id: txn_id,
            reservation_id: &txn.reference,
            status: txn.status,
            amount_cents: txn.amount_cents,
        })
        .ok()
    }

    /// Sends one webhook body (as many copies as configured); how many were sent.
    async fn send(&self, body: &[u8]) -> usize {
        let Some(target) = self.target.get() else {
            tracing::warn!("simulated gateway: no webhook target configured; webhook dropped");
            return 0;
        };
        let signature = signature::sign(&target.secret, body);
        let mut sent = 0;
        for _ in 0..self.config.webhook_copies.max(1) {
            let result = target
                .client
                .post(&target.url)
                .header("content-type", "application/json")
                .header("x-signature", &signature)
                .body(body.to_vec())
                .send()
                .await;
            match result {
                Ok(response) if response.status().is_success() => sent += 1,
                Ok(response) => {
                    tracing::warn!(status = %response.status(), "simulated gateway: webhook refused")
                }
                Err(e) => tracing::warn!(error = %e, "simulated gateway: webhook not delivered"),
            }
        }
        sent
    }

    /// Queue or schedule the webhook of `txn_id` (settling it first when it is due).
    fn report(&self, txn_id: String) {
        match self.config.webhook_delay {
            None => {
                let mut state = self.lock();
                let settled = state
                    .transactions
                    .get(&txn_id)
                    .is_some_and(|t| t.status != AuthorizationStatus::Pending);
                // Pending ones are settled (and queued) by `release_webhooks`.
                if settled {
                    if let Some(body) = Self::settle(&mut state, &txn_id) {
                        state.held_webhooks.push(body);
                    }
                }
            }
            Some(delay) => {
                let this = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let body = Self::settle(&mut this.lock(), &txn_id);
                    if let Some(body) = body {
                        this.send(&body).await;
                    }
                });
            }
        }
    }

    fn operation(
        &self,
        key: &str,
        txn_id: &str,
        operation: &'static str,
        amount_cents: i64,
    ) -> Result<(), GatewayError> {
        let mut state = self.lock();
        if let Some(answer) = state.operations.get(key) {
            return answer.clone();
        }
        let answer = match state.transactions.get_mut(txn_id) {
            None => Err(GatewayError::Refused(format!("no transaction {txn_id}"))),
            Some(txn) if txn.status != AuthorizationStatus::Authorized => Err(
                GatewayError::Refused(format!("transaction {txn_id} is not authorized")),
            ),
            Some(txn) => match operation {
                "increment" if txn.voided => Err(GatewayError::Refused("voided".into())),
                "increment" if txn.declines_increments => {
                    Err(GatewayError::Refused("increment declined".into()))
                }
                "increment" => {
                    txn.amount_cents += amount_cents;
                    Ok((txn.reference.clone(), txn.currency.clone()))
                }
                "capture" if txn.voided => Err(GatewayError::Refused("voided".into())),
                "capture" if txn.captured_cents + amount_cents > txn.amount_cents => Err(
                    GatewayError::Refused("capture exceeds the authorization".into()),
                ),
                "capture" => {
                    txn.captured_cents += amount_cents;
                    Ok((txn.reference.clone(), txn.currency.clone()))
                }
                "void" if txn.captured_cents > 0 => Err(GatewayError::Refused(
                    "already captured; refund instead".into(),
                )),
                "void" => {
                    txn.voided = true;
                    Ok((txn.reference.clone(), txn.currency.clone()))
                }
                _ if txn.refunded_cents + amount_cents > txn.captured_cents => {
                    Err(GatewayError::Refused("refund exceeds the capture".into()))
                }
                _ => {
                    txn.refunded_cents += amount_cents;
                    Ok((txn.reference.clone(), txn.currency.clone()))
                }
            },
        };
        let answer = answer.map(|(reference, currency)| {
            state.ledger.push(LedgerEntry {
                operation,
                reference,
                provider_txn_id: txn_id.to_owned(),
                amount_cents,
                currency,
            });
        });
        state.operations.insert(key.to_owned(), answer.clone());
        answer
    }

    async fn latency(&self) {
        if !self.config.latency.is_zero() {
            tokio::time::sleep(self.config.latency).await;
        }
    }
}

impl PaymentGateway for SimulatedGateway {
    fn authorize(
        &self,
        request: AuthorizeRequest,
    ) -> BoxFuture<'_, Result<Authorization, GatewayError>> {
        Box::pin(async move {
            self.latency().await;
            let (answer, new_txn) = {
                let mut state = self.lock();
                match state.by_key.get(&request.idempotency_key).cloned() {
                    Some(txn_id) => {
                        let txn = state.transactions.get(&txn_id).cloned();
                        (txn.map(|t| (txn_id, t)), None)
                    }
                    None => {
                        state.next_txn += 1;
                        let txn_id = format!("sim_{:08}", state.next_txn);
                        let (status, settles_as) = match request.token.as_str() {
                            "tok_decline" => {
                                (AuthorizationStatus::Declined, AuthorizationStatus::Declined)
                            }
                            "tok_timeout" => (
                                AuthorizationStatus::Pending,
                                AuthorizationStatus::Authorized,
                            ),
                            _ => (
                                AuthorizationStatus::Authorized,
                                AuthorizationStatus::Authorized,
                            ),
                        };
                        let txn = Transaction {
                            reference: request.reference.clone(),
                            amount_cents: request.amount_cents,
                            currency: request.currency.code().to_owned(),
                            status,
                            settles_as,
                            captured_cents: 0,
                            refunded_cents: 0,
                            voided: false,
                            declines_increments: request.token.as_str() == "tok_no_increase",
                        };
                        if status == AuthorizationStatus::Authorized {
                            state.ledger.push(LedgerEntry {
                                operation: "authorize",
                                reference: request.reference.clone(),
                                provider_txn_id: txn_id.clone(),
                                amount_cents: request.amount_cents,
                                currency: request.currency.code().to_owned(),
                            });
                        }
                        state
                            .by_key
                            .insert(request.idempotency_key.clone(), txn_id.clone());
                        state.transactions.insert(txn_id.clone(), txn.clone());
                        (Some((txn_id.clone(), txn)), Some(txn_id))
                    }
                }
            };
            if let Some(txn_id) = new_txn {
                self.report(txn_id);
            }
            let Some((txn_id, txn)) = answer else {
                return Err(GatewayError::Unavailable(
                    "ledger lost a transaction".into(),
                ));
            };
            if txn.status == AuthorizationStatus::Pending {
                // The bank is slow: the call does not come back before the caller gives
                // up. The result goes to the webhook.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return Err(GatewayError::Timeout);
            }
            Ok(Authorization {
                provider_txn_id: txn_id,
                status: txn.status,
                amount_cents: txn.amount_cents,
            })
        })
    }

    fn increment<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
        amount_cents: i64,
    ) -> BoxFuture<'a, Result<bool, GatewayError>> {
        Box::pin(async move {
            self.latency().await;
            match self.operation(idempotency_key, provider_txn_id, "increment", amount_cents) {
                Ok(()) => Ok(true),
                Err(GatewayError::Refused(reason)) if reason == "increment declined" => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn capture<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
        amount_cents: i64,
    ) -> BoxFuture<'a, Result<(), GatewayError>> {
        Box::pin(async move {
            self.latency().await;
            self.operation(idempotency_key, provider_txn_id, "capture", amount_cents)
        })
    }

    fn void<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
    ) -> BoxFuture<'a, Result<(), GatewayError>> {
        Box::pin(async move {
            self.latency().await;
            let amount = self
                .lock()
                .transactions
                .get(provider_txn_id)
                .map_or(0, |t| t.amount_cents);
            self.operation(idempotency_key, provider_txn_id, "void", amount)
        })
    }

    fn refund<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
        amount_cents: i64,
    ) -> BoxFuture<'a, Result<(), GatewayError>> {
        Box::pin(async move {
            self.latency().await;
            self.operation(idempotency_key, provider_txn_id, "refund", amount_cents)
        })
    }

    fn lookup<'a>(
        &'a self,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Authorization>, GatewayError>> {
        Box::pin(async move {
            self.latency().await;
            let state = self.lock();
            Ok(state.by_key.get(idempotency_key).and_then(|txn_id| {
                state.transactions.get(txn_id).map(|t| Authorization {
                    provider_txn_id: txn_id.clone(),
                    status: t.status,
                    amount_cents: t.amount_cents,
                })
            }))
        })
    }
}
