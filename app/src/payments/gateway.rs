//! The port to a card payment provider: what the saga needs from one, shaped as real
//! providers are — every call carries an idempotency key the provider deduplicates by,
//! so a retried or doubled call never charges, captures or refunds twice.
//!
//! Keys are derived per side effect, never per attempt, by the reservation's ledger
//! (`aggregates::reservation::ledger`): `{reservation}:auth` for the authorization and
//! `:auth:2`... for its increments, `{reservation}:capture` (`:capture:2`...),
//! `{reservation}:refund:N`, and `{reservation}:void:{provider_txn_id}`. Whoever retries
//! (the request, the recovery worker, the outbox) asks for the same effect again and
//! gets the first answer.
//!
//! An authorization can be increased (a stay moved to dearer nights) and captured in
//! parts up to its amount; capturing less than it releases the rest.

use aggregates::Currency;
use std::fmt;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// A payment token from the client (a card tokenized by the provider's front end):
/// `tok_` followed by 1 to 100 ASCII letters, digits or `_`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentToken(String);

impl PaymentToken {
    pub fn parse(value: &str) -> Result<Self, aggregates::InvalidInput> {
        let valid = value.strip_prefix("tok_").is_some_and(|rest| {
            (1..=100).contains(&rest.len())
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        if valid {
            Ok(Self(value.to_owned()))
        } else {
            Err(aggregates::InvalidInput::new(
                "payment_token",
                "must be tok_ followed by 1 to 100 letters, digits or underscores",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PaymentToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Authorize `amount_cents` on the card behind `token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizeRequest {
    pub idempotency_key: String,
    pub token: PaymentToken,
    pub amount_cents: i64,
    /// The currency of `amount_cents` (the reservation's); later captures and refunds
    /// of the transaction are in it too.
    pub currency: Currency,
    /// Our reference for the provider's records and its webhooks: the reservation id.
    pub reference: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorizationStatus {
    Authorized,
    Declined,
    /// The provider has not decided yet (3-D Secure, a slow bank); the result arrives
    /// through the webhook.
    Pending,
}

/// The provider's answer about one authorization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authorization {
    pub provider_txn_id: String,
    pub status: AuthorizationStatus,
    pub amount_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// No answer in time: the provider may or may not have acted. Ask again with the
    /// same key, or look the key up.
    #[error("the payment provider did not answer in time")]
    Timeout,
    /// The provider could not be reached or failed; it did not act. Retry later.
    #[error("the payment provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the call for good (unknown transaction, amount too large);
    /// retrying will not help.
    #[error("the payment provider refused the call: {0}")]
    Refused(String),
}

/// A card payment provider. Every method is idempotent under its key.
pub trait PaymentGateway: Send + Sync {
    fn authorize(
        &self,
        request: AuthorizeRequest,
    ) -> BoxFuture<'_, Result<Authorization, GatewayError>>;

    /// Raise an authorization by `amount_cents`: `Ok(true)` granted, `Ok(false)`
    /// declined (the authorization stays as it was).
    fn increment<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
        amount_cents: i64,
    ) -> BoxFuture<'a, Result<bool, GatewayError>>;

    /// Take `amount_cents` of an authorization (at most what is left of it).
    fn capture<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
        amount_cents: i64,
    ) -> BoxFuture<'a, Result<(), GatewayError>>;

    /// Release an authorization that was never captured.
    fn void<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
    ) -> BoxFuture<'a, Result<(), GatewayError>>;

    /// Give back `amount_cents` of what was captured.
    fn refund<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_txn_id: &'a str,
        amount_cents: i64,
    ) -> BoxFuture<'a, Result<(), GatewayError>>;

    /// What became of the authorization requested under `idempotency_key`; `None` if
    /// the provider never received it.
    fn lookup<'a>(
        &'a self,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Authorization>, GatewayError>>;
}

/// The gateway key of a reservation's (first) authorization.
pub fn authorization_key(reservation_id: uuid::Uuid) -> String {
    aggregates::reservation::ledger::authorization_key(
        aggregates::ReservationId::from_uuid(reservation_id),
        1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payment_tokens_start_with_tok_and_stay_plain() {
        assert!(PaymentToken::parse("tok_ok").is_ok());
        assert!(PaymentToken::parse("tok_visa_4242").is_ok());
        for bad in [
            "",
            "tok_",
            "ok",
            "tok_a b",
            "tok_é",
            "tok_\0",
            &format!("tok_{}", "a".repeat(101)),
        ] {
            assert!(PaymentToken::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
