//! The reservation platform's server: the write side (event store and unit of work),
//! the command API, the HTTP API, and the process around them.
//!
//! - [`write`]: the unit of work that loads streams, lets the pure domain decide, and
//!   appends every change of a command in one PostgreSQL transaction;
//! - [`commands`]: the command API (catalog, inventory, hold, cancel, change dates,
//!   confirm, expire) with idempotency;
//! - [`queries`]: every read the HTTP layer makes (hotel pages, availability,
//!   reservations, the event feed, analytics);
//! - [`api`]: the HTTP contract of `docs/api.md`, served by axum;
//! - [`startup`]: configuration and the `Application` (build on a port, run until
//!   stopped);
//! - [`db`]: connecting, creating and migrating the database;
//! - [`privacy`]: guests' personal data sealed under a key per guest, opened for whoever
//!   may read it, erased by destroying the key (docs/privacy.md);
//! - [`mail`]: the guest's e-mails the write side queued, sent after their commit
//!   through an SMTP server (docs/notifications.md);
//! - [`rate_limit`]: the per-guest hold limit in Redis (fails open when Redis is down);
//! - [`demo`]: the demo catalog `reservations seed-demo` loads;
//! - [`feed`]: the public shape of one recorded event (the event feed's item, the
//!   relay's message body);
//! - [`relay`]: the JetStream relay that publishes every committed event once, in
//!   commit order, and a consumer that rebuilds occupancy from the stream;
//! - [`signals`]: gauges of work that could stall (overdue holds, open sagas, outbox
//!   backlogs and failures) and the failed outbox rows, listed and retried;
//! - [`webhooks`]: partner webhooks: subscriptions, deliveries made from the log, and
//!   their signed sending with retries;
//! - [`workers`]: the registry of read-side projections (names, runners, rebuild,
//!   status) that `serve` runs beside the API, and the audit log runner.

pub mod api;
pub mod backoff;
pub mod clock;
pub mod commands;
pub mod db;
pub mod demo;
pub mod error;
pub mod feed;
pub mod mail;
pub mod outbox;
pub mod payments;
pub mod privacy;
pub mod queries;
pub mod rate_limit;
pub mod relay;
pub mod signals;
pub mod startup;
pub mod sweeper;
pub mod telemetry;
pub mod view;
pub mod webhooks;
pub mod workers;
pub mod write;

#[cfg(test)]
mod layering;
