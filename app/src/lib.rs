//! The use cases: every command and query the HTTP layer and the workers run, over the
//! storage of `store` and the read models of `projections`.
//!
//! - [`commands`]: the command API (catalog, inventory, hold, cancel, change dates,
//!   confirm, expire), one entry per use case, with idempotency;
//! - [`queries`]: every read (hotel pages, availability, reservations, the event feed,
//!   analytics), from the primary or a replica;
//! - [`payments`]: authorise at the hold, capture at the deadline, refunds, the
//!   gateway's webhooks and the payment outbox;
//! - [`mail`]: the guest's e-mails the write side queued, sent after their commit
//!   through an SMTP server (docs/notifications.md);
//! - [`webhooks`]: partner webhooks: subscriptions, deliveries made from the log, and
//!   their signed sending with retries;
//! - [`relay`]: the JetStream relay that publishes every committed event once, in
//!   commit order, and a consumer that rebuilds occupancy from the stream;
//! - [`signals`]: gauges of work that could stall and the failed outbox rows;
//! - [`sweeper`]: expiring lapsed holds;
//! - [`rate_limit`]: the per-guest hold limit in Redis (fails open when Redis is down);
//! - [`staff`]: staff accounts, their Argon2id passwords and the sign-in lock-out;
//! - [`demo`]: the demo catalog `reservations seed-demo` loads;
//! - [`clock`], [`backoff`]: time as a parameter, and the retry schedule.
//!
//! Nothing here knows HTTP. Inside the crate, commands and queries do not know each
//! other (checked by the workspace's layering test).

pub mod backoff;
pub mod clock;
pub mod commands;
pub mod demo;
pub mod mail;
pub mod payments;
pub mod queries;
pub mod rate_limit;
pub mod relay;
pub mod signals;
pub mod staff;
pub mod sweeper;
pub mod webhooks;
