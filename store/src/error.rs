//! What a command can end in besides success. Domain rejections (`Rejected`) are the
//! business saying no, and nothing was written; the others are about the request itself
//! (idempotency) or about the infrastructure. The HTTP layer maps each to a status code
//! in one place.

use aggregates::Rejection;

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The domain refused the command; nothing changed.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The idempotency key was first used for a different request.
    #[error("this idempotency key was already used for a different request")]
    KeyReused,
    /// Another request with the same idempotency key is running right now.
    #[error("a request with this idempotency key is still being processed")]
    InFlight,
    /// Every attempt lost a race with a concurrent writer; nothing changed. Safe to retry.
    #[error("the command kept colliding with concurrent writes ({attempts} attempts); try again")]
    Contention { attempts: u32 },
    /// The caller may not act on this reservation.
    #[error("this reservation belongs to another client")]
    Forbidden,
    /// The payment gateway could not be reached; nothing was charged. Safe to retry.
    #[error("the payment provider is unavailable: {0}")]
    PaymentUnavailable(String),
    /// The card refused the extra amount a change needs; nothing changed.
    #[error("the card was declined for the {shortfall_cents} more cents the change costs")]
    PaymentDeclined { shortfall_cents: i64 },
    /// The database refused a write the domain had decided (a CHECK constraint, such
    /// as the night's `confirmed + held <= capacity`): nothing was written, and the
    /// decision was wrong, which is a bug to look at (it is counted).
    #[error("the database refused a decided write ({constraint})")]
    OversoldRefused { constraint: String },
    /// PostgreSQL could not be reached or failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Stored state could not be decoded: a bug, never the client's fault.
    #[error("internal inconsistency: {0}")]
    Internal(String),
}
