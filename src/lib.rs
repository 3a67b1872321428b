//! The server process: configuration and the `Application` ([`startup`]: build on a
//! port, run until stopped) and the workers it runs beside the API ([`workers`]: the
//! read-side projections, payments, mail, webhooks, the sweeper and the relay).
//!
//! The layers below it are crates of their own, each depending only on those under it:
//! `aggregates` (the pure domain) → `projections` (the read side) and `store` (the unit
//! of work, the event log, privacy) → `app` (the use cases) → `api` (HTTP) → this
//! binary (`reservations`, its CLI in `main.rs`).

pub mod startup;
pub mod workers;

#[cfg(test)]
mod layering;
