//! The HTTP API (v1) end to end: a real server on a free port per test, on its own fresh
//! PostgreSQL database, driven with reqwest exactly as a client would, against the
//! contract in `API.md`. Every test is Arrange / Act / Assert and drops its database.
//!
//! The modules live in `tests/api/`; this crate root sits in `tests/`, so each is named
//! by path (a bare `mod x;` here would look for `tests/x.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: an unwrap is an assertion

mod common;

#[path = "api/support.rs"]
mod support;

#[path = "api/auth.rs"]
mod auth;
#[path = "api/catalog.rs"]
mod catalog;
#[path = "api/events.rs"]
mod events;
#[path = "api/idempotency.rs"]
mod idempotency;
#[path = "api/lifecycle.rs"]
mod lifecycle;
#[path = "api/malformed.rs"]
mod malformed;
#[path = "api/ops.rs"]
mod ops;
#[path = "api/payments.rs"]
mod payments;
#[path = "api/races.rs"]
mod races;
#[path = "api/rate_limit.rs"]
mod rate_limit;
