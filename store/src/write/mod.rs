//! The write side's unit of work: load the streams a command touches, let the pure
//! domain decide, and append every event of every stream — with the inline state rows
//! and the idempotency record — in ONE PostgreSQL transaction.
//!
//! cqrs-es's framework commits one aggregate per transaction; a booking changes one
//! `Reservation` and N `RoomNight`s all-or-nothing, so this module owns the transaction.
//!
//! Two contention strategies, chosen by configuration:
//! - **optimistic**: read without locks, decide, then write each stream with its expected
//!   version (the events primary key and `version = expected` on the inline rows); a lost
//!   race rolls back and retries, bounded, with jittered backoff;
//! - **pessimistic**: lock the `room_nights` rows `FOR UPDATE` in night order (a fixed
//!   order, so no deadlocks) before deciding; concurrent bookings of one night queue
//!   instead of retrying.
//!
//! Either way, when retries run out the caller gets `Contention` (try again), never a
//! wrong answer; and the `room_nights` CHECK refuses an oversold night even if the code
//! above it were wrong.

pub mod announce;
mod append;
mod attempt;
pub mod idempotency;
mod load;
pub mod mail;
pub mod outbox;
mod reservation_row;
pub mod saga;
mod seal;

pub use append::{EventMetadata, RoomWork, Writer};
pub use attempt::{contention_totals, settle, with_retries, AttemptError, RetryPolicy, Strategy};
pub use idempotency::{IdempotencyKey, RequestFingerprint};
pub use load::{
    nights_sql, Claim, LoadedNights, LoadedReservation, Loader, Opened, Room, WantedNights,
};
