//! The reservation platform's server: the write side (event store and unit of work),
//! the command API, and the process around them.
//!
//! - [`write`]: the unit of work that loads streams, lets the pure domain decide, and
//!   appends every change of a command in one PostgreSQL transaction;
//! - [`commands`]: the command API (catalog, inventory, hold, cancel, change dates,
//!   confirm, expire) with idempotency;
//! - [`db`]: connecting, creating and migrating the database.

pub mod clock;
pub mod commands;
pub mod db;
pub mod error;
pub mod write;
