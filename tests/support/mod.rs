//! What every test shares, once: a fresh database per test on the machine's PostgreSQL
//! (`db`), the hotel most tests book and typed helpers to book it through the command
//! API (`domain`), the invariant checks every race ends with (`invariants`), the HTTP
//! harness — a server per test and a typed client for every endpoint (`http`) — and the
//! analytics runners for tests that read the read side (`runners`), and a PostgreSQL
//! primary with a streaming replica of a test's own (`replica`), and `reservations serve`
//! as a process of its own (`process`), and a Redis Cluster of a test's own (`cluster`),
//! and a real SMTP server on loopback (`smtp`), and a Redis of a test's own (`redis`).

mod cluster;
mod db;
mod domain;
mod http;
mod invariants;
mod process;
mod redis;
mod replica;
mod runners;
mod smtp;

pub use cluster::*;
pub use db::*;
pub use domain::*;
pub use http::*;
pub use invariants::*;
pub use process::*;
pub use redis::*;
pub use replica::*;
pub use runners::*;
pub use smtp::*;
