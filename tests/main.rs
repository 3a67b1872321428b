//! The integration tests, in one binary: each test runs against the machine's real
//! PostgreSQL (and Redis where it needs one), through the command service in process or
//! through the HTTP API of a server it starts on a free port, and is Arrange / Act /
//! Assert.
//!
//! The modules are the platform's capabilities, one axis (what is tested, not through
//! which layer):
//!
//! - [`catalog`]: hotels and room types, look-ups and search;
//! - [`inventory`]: rooms by the night, availability, the overbooking allowance, and the
//!   invariant under races for the last rooms;
//! - [`holds`]: holds and the reservation lifecycle (lapse, expiry, confirm, cancel,
//!   change dates, a reservation's history);
//! - [`idempotency`]: replays, reused keys, concurrent duplicates;
//! - [`lines`]: reservations of several room types, all held or none, every later
//!   command acting on every line, and families racing single-room bookings;
//! - [`pricing`]: a hotel's currency and taxes, on every answer that carries money,
//!   authorized, captured and given back;
//! - [`payments`]: the payment saga against the simulated provider, refunds, webhooks,
//!   recovery and the sweeper;
//! - [`validation`]: malformed and invalid requests (the table in
//!   `tests/fixtures/malformed.json`);
//! - [`auth`]: tokens, roles and channels;
//! - [`mail`]: the guest's e-mails through a real SMTP server on loopback (once per
//!   fact, after the payment, through an outage and a crash, none to an erased guest);
//! - [`privacy`]: guests' personal data sealed at rest, opened for whoever may read
//!   it, exported, and erased by destroying its key (the history still verifies);
//! - [`rate_limit`]: the per-guest hold limit;
//! - [`rate_plans`]: rate plans, restrictions, occupancy and bulk ARI updates, and a
//!   restriction set while holds race;
//! - [`event_log`]: the event log as postgres-es reads it, and the global feed;
//! - [`read_side`]: projection runners, the shared tail and the Redis availability model;
//! - [`search`]: the search across a city's hotels, from the read model and from
//!   PostgreSQL, and what a hotel's availability shows of restrictions and plans;
//! - [`analytics`]: daily occupancy and the reservations view, their rebuilds and the CLI;
//! - [`audit`]: the hash-chained audit log and `verify`;
//! - [`ops`]: liveness, readiness, metrics, OpenAPI;
//! - [`front_office`]: the hotel's numbers per night, pickup, arrivals and departures, a
//!   night's history;
//! - [`console`]: the staff console's endpoints, the page as served, and the page in a
//!   real headless Chromium;
//! - [`contract`]: the served OpenAPI document against the server: its examples are
//!   taken, and requests generated from it are taken or refused as its schemas say;
//! - [`outage`]: PostgreSQL going away under a running server;
//! - [`servers`]: three server processes on one primary racing for the last rooms;
//! - [`cluster`]: the availability model and the hold limit on a Redis Cluster of the
//!   test's own, a master killed under load and a master that loses its data;
//! - [`deployment`]: the contract walked on two servers over a primary and its replica,
//!   a Redis Cluster and JetStream, every read on the server that did not write;
//! - [`replica`]: reads from a streaming replica, consistency tokens, a replica dying
//!   under load;
//! - [`relay`]: the JetStream relay (every event once, in commit order, through a crash)
//!   and occupancy rebuilt from the stream alone.
//!
//! - [`readme`]: the README's tour and docs/tour.md, run as written against a fresh server.
//!
//! - [`webhooks`]: partner webhooks against a real HTTP receiver (signatures, retries
//!   with one id and in order, pausing, a hotel filter, the subscription API).
//!
//! [`support`] is the shared harness, and `tests/fixtures/` holds the data tests read.
//!
//! The tests run in parallel in this one process. Each creates a database of its own
//! (and its Redis keys are named after it), and drops both when it passes. What the
//! process shares is read, not owned: the metrics recorder is process-wide, so a test
//! looks for what its own requests recorded rather than for exact totals; the one
//! verification of the audit log a process runs at a time is only asked for by
//! [`audit`]; a test that stops Redis stops a private `redis-server` of its own; no test
//! sets environment variables; and the CLI test runs the `reservations` binary as a child
//! process with its own environment.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: an unwrap is an assertion

mod support;

mod analytics;
mod audit;
mod auth;
mod blocks;
mod catalog;
mod cluster;
mod console;
mod contract;
mod deployment;
mod event_log;
mod front_office;
mod holds;
mod idempotency;
mod inventory;
mod lines;
mod mail;
mod ops;
mod outage;
mod payments;
mod pricing;
mod privacy;
mod rate_limit;
mod rate_plans;
mod read_side;
mod readme;
mod relay;
mod replica;
mod search;
mod servers;
mod staff;
mod time_machine;
mod validation;
mod webhooks;
