//! What crosses crates: every name and format the write side stores and the read side
//! reads back, defined once.
//!
//! The event log is a contract between `store` (which appends), `projections/` (which
//! follows it) and the audit replay (which re-checks it). Each of them used to spell
//! the contract on its own — `"room_night"`, `"{hotel}:{room type}:{night}"` parsed by
//! hand three times, a list of event names per projection, the command name `"cancel"`
//! in two crates — so a change on one side compiled and drifted silently on the other.
//! Here each name is an enum with an explicit storage name and a parser, and each
//! format has its writer next to its reader:
//!
//! - [`AggregateType`]: the `aggregate_type` column;
//! - [`streams`](crate::streams): the `aggregate_id` column (stream ids) of each aggregate;
//! - [`events`]: the `event_type` and `event_version` columns of each event enum;
//! - [`CommandName`]: `metadata.command` of every event, and the command hashed into
//!   each idempotency record;
//! - [`decode`]: a stored event read back into a typed value, upcasters first.
//!
//! Enums rather than constants so that matches on them are exhaustive: a new aggregate,
//! event or command does not compile until every reader has said what it does with it.

pub mod decode;
pub mod events;

pub use crate::names::{AggregateType, CommandName};
pub use crate::streams::{
    block_stream_id, hotel_stream_id, parse_block_stream_id, parse_hotel_stream_id,
    parse_reservation_stream_id, parse_room_night_stream_id, reservation_stream_id,
    room_night_stream_id, StreamIdError, StreamKey,
};
pub use decode::{upcasters, DecodeError, EventDecoder, RawEvent, RawPayload, TypedEvent};
pub use events::{BlockEventType, HotelEventType, ReservationEventType, RoomNightEventType};
