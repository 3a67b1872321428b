//! The pure domain of the reservation platform: commands, events and aggregates.
//!
//! Nothing here does IO or reads a clock: the current time, prices and ids arrive in the
//! commands, so every rule is a synchronous function that can be tested without a
//! database. The aggregates implement cqrs-es's `Aggregate` (its `handle` is a thin async
//! wrapper around the synchronous `decide`), so cqrs-es's `TestFramework` drives the
//! given/when/then tests and any cqrs-es tooling can replay the streams.
//!
//! - [`room_night::RoomNight`]: one (hotel, room type, night); enforces
//!   `confirmed + held + blocked <= total_rooms + overbooking_allowance`.
//! - [`block::Block`]: a group block's terms; the rooms it sets aside are its nights'.
//! - [`reservation::Reservation`]: one guest's stay and its lifecycle.
//! - [`hotel::Hotel`]: the catalog: hotels, room types and rate plans.
//! - [`personal`]: a guest's personal data, in the clear, sealed or erased: the domain
//!   carries it and never reads it (docs/privacy.md).
//! - [`restrictions`], [`rate_plan`]: the rules of restrictions and of plans' prices and
//!   cancellation policies, which the decisions in [`booking`] apply.
//! - [`contract`]: what crosses crates — aggregate type names ([`names`]), stream ids
//!   ([`streams`]), event type names and versions, command names — and the one path that
//!   decodes a stored event back into a typed one (through cqrs-es's upcasters).
//! - [`taxes`]: a hotel's taxes and fees and what they come to on a stay (not yet sold
//!   with: the next step puts them on offers and reservations).
//! - [`booking`]: decisions that span a reservation and its nights (hold, confirm,
//!   cancel, change dates, expire, set inventory, restrictions and plan rates over
//!   ranges), and the terms a stay is sold on ([`booking::SaleTerms`]).
//!
//! cqrs-es itself depends on tokio (its `EventSink` holds a `tokio::sync::Mutex`), so
//! tokio's synchronisation types are in this crate's dependency tree through cqrs-es
//! alone; no code here uses them, and no IO crate (sqlx, axum, redis) is a dependency.

pub mod block;
pub mod booking;
pub mod cancellation;
pub mod contract;
pub mod hotel;
pub mod names;
pub mod personal;
pub mod rate_plan;
pub mod reservation;
pub mod restrictions;
pub mod room_night;
pub mod streams;
pub mod taxes;
pub mod types;
pub mod what_if;

pub use block::{Block, BlockCommand, BlockEvent, BlockTerms, ReleaseReason};
pub use booking::{Decision, Nights, Rejection, StayNights};
pub use cancellation::{CancellationPolicy, CancelledBy};
pub use contract::{
    AggregateType, CommandName, DecodeError, EventDecoder, StreamIdError, StreamKey, TypedEvent,
};
pub use hotel::{Hotel, HotelCommand, HotelDetails, HotelEvent, RatePlan, RoomTypeDetails};
pub use personal::{GuestId, Personal, Sealed};
pub use reservation::{
    Increment, Ledger, Payment, PaymentStatus, Reservation, ReservationCommand, ReservationDetails,
    ReservationEvent, ReservationStatus,
};
pub use room_night::{Hold, RoomNight, RoomNightCommand, RoomNightEvent, RoomNightKey};
pub use types::{
    BlockCode, BookingLimits, Cents, Currency, Guest, GuestCount, HotelId, InvalidInput,
    InventoryLevels, RatePlanId, Reference, ReservationId, RoomCount, RoomTypeId, StayDates,
    TimeZone, Weekdays,
};
