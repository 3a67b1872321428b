//! The write side's storage: what a command's transaction reads and writes, and nothing
//! of who calls it.
//!
//! - [`write`]: the unit of work that loads streams, lets the pure domain decide, and
//!   appends every change of a command (events, the nights' counters, the reservation
//!   rows, the outboxes) in one PostgreSQL transaction;
//! - [`privacy`]: guests' personal data sealed under a key per guest as it is stored,
//!   opened for whoever may read it, erased by destroying the key (docs/privacy.md);
//! - [`view`]: the reservation as the API shows it, built from stored rows;
//! - [`outbox`]: the one lease by which a worker takes outbox rows;
//! - [`db`]: connecting, creating and migrating the database (`migrations/`);
//! - [`error`]: what a command can end in besides success.
//!
//! It depends on the domain (`aggregates`) only: the use cases (`app`) and the HTTP
//! layer (`api`) sit above it, and Cargo refuses an import that runs the other way.

pub mod db;
pub mod error;
pub mod outbox;
pub mod privacy;
pub mod view;
pub mod write;
