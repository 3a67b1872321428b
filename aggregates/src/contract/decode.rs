//! A stored event read back into a typed value: the one decode path of the read side.
//!
//! The log stores each event as (aggregate type, stream id, event type, version, JSON
//! payload). [`EventDecoder::decode`] turns those columns into a [`TypedEvent`] — the
//! parsed stream and the event enum of its aggregate — or a [`DecodeError`] naming what
//! this build does not know. Readers match on the typed value, exhaustively, instead of
//! comparing names and deserializing payloads each on its own.
//!
//! **Upcasting.** Before a payload is deserialized, every [`EventUpcaster`] that says it
//! can upcast the event's (type, version) rewrites it, in order, as cqrs-es's own event
//! stores do: an event whose shape changed is read through the upcaster from its old
//! version into the current enum ([`upcasters`]: the reservation events of 1.x, whose
//! personal data was stored in the clear).
//!
//! **Cost.** Most events need no upcaster: their payload is deserialized from the
//! borrowed value (`T::deserialize(&Value)`), without copying its maps (see
//! docs/benchmarks.md, `one-read-for-all-runners`, for what decoding weighs). Only an event an upcaster
//! claims is copied into the owned `SerializedEvent` the upcaster takes.

use std::borrow::Cow;

use cqrs_es::persist::{
    EventUpcaster, SemanticVersionEventUpcaster, SemanticVersionEventUpcasterFunc, SerializedEvent,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::events::{BlockEventType, HotelEventType, ReservationEventType, RoomNightEventType};
use super::AggregateType;
use crate::block::BlockEvent;
use crate::hotel::HotelEvent;
use crate::reservation::ReservationEvent;
use crate::room_night::{RoomNightEvent, RoomNightKey};
use crate::streams::{StreamIdError, StreamKey};
use crate::types::{BlockCode, HotelId, ReservationId};

/// The upcasters production reads the log through. A change of an event's shape bumps
/// its enum's `VERSION` and adds one here (a `SemanticVersionEventUpcaster` for the event
/// type and the new version), so that the events already stored read as the new shape.
///
/// Reservation events 2.0: personal data became [`Personal`](crate::personal::Personal)
/// (docs/privacy.md). A 1.x `ReservationHeld`'s guest and a 1.x `ReservationCancelled`'s
/// reason were stored in the clear and read as `{"clear": ...}`; every other reservation
/// event type kept its shape and is read as it is, at 2.0 (verify compares the version a
/// payload was read as with the build's).
pub fn upcasters() -> Vec<Box<dyn EventUpcaster>> {
    ReservationEventType::ALL
        .iter()
        .map(|kind| {
            let upcast: Box<SemanticVersionEventUpcasterFunc> = match kind {
                ReservationEventType::ReservationHeld => {
                    Box::new(|payload| clear_field(payload, "ReservationHeld", "guest"))
                }
                ReservationEventType::ReservationCancelled => {
                    Box::new(|payload| clear_field(payload, "ReservationCancelled", "reason"))
                }
                _ => Box::new(|payload| payload),
            };
            Box::new(SemanticVersionEventUpcaster::new(
                kind.as_str(),
                ReservationEvent::VERSION,
                upcast,
            )) as Box<dyn EventUpcaster>
        })
        .collect()
}

/// `payload[tag][field]`, stored in the clear before personal data was typed, as the
/// `{"clear": ...}` it reads as now.
fn clear_field(mut payload: Value, tag: &str, field: &str) -> Value {
    if let Some(slot) = payload.get_mut(tag).and_then(|event| event.get_mut(field)) {
        let clear = slot.take();
        *slot = serde_json::json!({ "clear": clear });
    }
    payload
}

/// A stored event, decoded: its stream, parsed, and its event, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypedEvent {
    Hotel {
        hotel_id: HotelId,
        event: HotelEvent,
    },
    RoomNight {
        key: RoomNightKey,
        event: RoomNightEvent,
    },
    Reservation {
        hotel_id: HotelId,
        reservation_id: ReservationId,
        event: ReservationEvent,
    },
    Block {
        hotel_id: HotelId,
        code: BlockCode,
        event: BlockEvent,
    },
}

impl TypedEvent {
    pub fn aggregate_type(&self) -> AggregateType {
        match self {
            Self::Hotel { .. } => AggregateType::Hotel,
            Self::RoomNight { .. } => AggregateType::RoomNight,
            Self::Reservation { .. } => AggregateType::Reservation,
            Self::Block { .. } => AggregateType::Block,
        }
    }

    /// The name of the event (the `event_type` it is stored under).
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::Hotel { event, .. } => event.kind().as_str(),
            Self::RoomNight { event, .. } => event.kind().as_str(),
            Self::Reservation { event, .. } => event.kind().as_str(),
            Self::Block { event, .. } => event.kind().as_str(),
        }
    }
}

/// Why a stored event could not be read as a typed event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown aggregate type {aggregate_type:?}")]
    UnknownAggregateType { aggregate_type: String },
    #[error("unknown {aggregate_type} event type {event_type:?} (version {event_version:?})")]
    UnknownEventType {
        aggregate_type: AggregateType,
        event_type: String,
        event_version: String,
    },
    #[error(transparent)]
    StreamId(#[from] StreamIdError),
    #[error("{aggregate_type} event {event_type} (version {event_version:?}) does not decode: {message}")]
    Payload {
        aggregate_type: AggregateType,
        event_type: String,
        event_version: String,
        message: String,
    },
}

impl DecodeError {
    /// Whether the event is of an aggregate or an event type this build does not know
    /// (as opposed to a known one whose stream id or payload is malformed).
    pub fn is_unknown(&self) -> bool {
        matches!(
            self,
            Self::UnknownAggregateType { .. } | Self::UnknownEventType { .. }
        )
    }
}

/// A stored event's payload, as its reader has it: parsed (the projections' log reads)
/// or as JSON text (the audit replay streams raw rows).
#[derive(Debug, Clone, Copy)]
pub enum RawPayload<'a> {
    Value(&'a Value),
    Text(&'a str),
}

/// The columns of a stored event that decoding reads.
#[derive(Debug, Clone, Copy)]
pub struct RawEvent<'a> {
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub sequence: i64,
    pub event_type: &'a str,
    pub event_version: &'a str,
    pub payload: RawPayload<'a>,
}

/// Decodes stored events through a list of upcasters.
pub struct EventDecoder {
    upcasters: Vec<Box<dyn EventUpcaster>>,
}

impl Default for EventDecoder {
    /// The production decoder: through [`upcasters`].
    fn default() -> Self {
        Self::new(upcasters())
    }
}

impl std::fmt::Debug for EventDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventDecoder")
            .field("upcasters", &self.upcasters.len())
            .finish()
    }
}

impl EventDecoder {
    pub fn new(upcasters: Vec<Box<dyn EventUpcaster>>) -> Self {
        Self { upcasters }
    }

    /// The typed event `raw` stores, after any upcaster that claims it.
    pub fn decode(&self, raw: RawEvent<'_>) -> Result<TypedEvent, DecodeError> {
        let aggregate_type = AggregateType::parse(raw.aggregate_type).ok_or_else(|| {
            DecodeError::UnknownAggregateType {
                aggregate_type: raw.aggregate_type.to_owned(),
            }
        })?;
        let stream = StreamKey::parse(aggregate_type, raw.aggregate_id)?;
        let upcast = self.upcast(aggregate_type, &raw)?;
        let (event_type, event_version, payload) = match &upcast {
            Some(event) => (
                event.event_type.as_str(),
                event.event_version.as_str(),
                RawPayload::Value(&event.payload),
            ),
            None => (raw.event_type, raw.event_version, raw.payload),
        };
        let unknown = || DecodeError::UnknownEventType {
            aggregate_type,
            event_type: event_type.to_owned(),
            event_version: event_version.to_owned(),
        };
        let read = Payload {
            aggregate_type,
            event_type,
            event_version,
            payload,
        };
        Ok(match stream {
            StreamKey::Hotel(hotel_id) => {
                HotelEventType::parse(event_type).ok_or_else(unknown)?;
                TypedEvent::Hotel {
                    hotel_id,
                    event: read.deserialize()?,
                }
            }
            StreamKey::RoomNight(key) => {
                RoomNightEventType::parse(event_type).ok_or_else(unknown)?;
                TypedEvent::RoomNight {
                    key,
                    event: read.deserialize()?,
                }
            }
            StreamKey::Reservation {
                hotel_id,
                reservation_id,
            } => {
                ReservationEventType::parse(event_type).ok_or_else(unknown)?;
                TypedEvent::Reservation {
                    hotel_id,
                    reservation_id,
                    event: read.deserialize()?,
                }
            }
            StreamKey::Block { hotel_id, code } => {
                BlockEventType::parse(event_type).ok_or_else(unknown)?;
                TypedEvent::Block {
                    hotel_id,
                    code,
                    event: read.deserialize()?,
                }
            }
        })
    }

    /// The payload of `raw`, after every upcaster that claims it, deserialized as `E`
    /// (which the caller chose from the aggregate type), and the version it was read
    /// as: its stored version, or the one the upcasters made it. Unlike
    /// [`Self::decode`] it checks neither the stream id nor the event type's name, for
    /// a reader that reports those itself (the audit replay).
    pub fn payload<'a, E: DeserializeOwned>(
        &self,
        aggregate_type: AggregateType,
        raw: RawEvent<'a>,
    ) -> Result<(E, Cow<'a, str>), DecodeError> {
        let upcast = self.upcast(aggregate_type, &raw)?;
        let (event_type, event_version, payload) = match &upcast {
            Some(event) => (
                event.event_type.as_str(),
                event.event_version.as_str(),
                RawPayload::Value(&event.payload),
            ),
            None => (raw.event_type, raw.event_version, raw.payload),
        };
        let event = Payload {
            aggregate_type,
            event_type,
            event_version,
            payload,
        }
        .deserialize()?;
        let version = match upcast {
            Some(upcast) => Cow::Owned(upcast.event_version),
            None => Cow::Borrowed(raw.event_version),
        };
        Ok((event, version))
    }

    /// The event after every upcaster that claims it, in order; `None` (and nothing
    /// copied) when none does.
    fn upcast(
        &self,
        aggregate_type: AggregateType,
        raw: &RawEvent<'_>,
    ) -> Result<Option<SerializedEvent>, DecodeError> {
        if !self
            .upcasters
            .iter()
            .any(|u| u.can_upcast(raw.event_type, raw.event_version))
        {
            return Ok(None);
        }
        let payload = match raw.payload {
            RawPayload::Value(value) => value.clone(),
            RawPayload::Text(text) => {
                serde_json::from_str(text).map_err(|e| DecodeError::Payload {
                    aggregate_type,
                    event_type: raw.event_type.to_owned(),
                    event_version: raw.event_version.to_owned(),
                    message: e.to_string(),
                })?
            }
        };
        let event = SerializedEvent::new(
            raw.aggregate_id.to_owned(),
            usize::try_from(raw.sequence).unwrap_or(0),
            aggregate_type.as_str().to_owned(),
            raw.event_type.to_owned(),
            raw.event_version.to_owned(),
            payload,
            Value::Null,
        );
        Ok(Some(self.upcasters.iter().fold(
            event,
            |event, upcaster| {
                if upcaster.can_upcast(&event.event_type, &event.event_version) {
                    upcaster.upcast(event)
                } else {
                    event
                }
            },
        )))
    }
}

/// A payload to deserialize, with what to name it by if it does not.
struct Payload<'a> {
    aggregate_type: AggregateType,
    event_type: &'a str,
    event_version: &'a str,
    payload: RawPayload<'a>,
}

impl Payload<'_> {
    fn deserialize<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        // From the borrowed value: cloning it first would copy every map in it.
        let read = match self.payload {
            RawPayload::Value(value) => T::deserialize(value),
            RawPayload::Text(text) => serde_json::from_str(text),
        };
        read.map_err(|e| DecodeError::Payload {
            aggregate_type: self.aggregate_type,
            event_type: self.event_type.to_owned(),
            event_version: self.event_version.to_owned(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone, Utc};
    use cqrs_es::persist::SemanticVersionEventUpcaster;
    use serde_json::json;
    use uuid::Uuid;

    const NIGHT: &str = "7:3:2027-06-10";

    fn raw<'a>(
        aggregate_type: &'a str,
        aggregate_id: &'a str,
        event_type: &'a str,
        payload: &'a Value,
    ) -> RawEvent<'a> {
        RawEvent {
            aggregate_type,
            aggregate_id,
            sequence: 1,
            event_type,
            event_version: "1.0",
            payload: RawPayload::Value(payload),
        }
    }

    fn held() -> RoomNightEvent {
        RoomNightEvent::RoomsHeld {
            reservation_id: ReservationId::from_uuid(Uuid::from_u128(1)),
            rooms: 2,
            expires_at: Utc
                .with_ymd_and_hms(2027, 6, 1, 12, 15, 0)
                .single()
                .expect("time"),
        }
    }

    fn key() -> RoomNightKey {
        RoomNightKey::new(
            HotelId::parse(7).expect("id"),
            crate::types::RoomTypeId::parse(3).expect("id"),
            NaiveDate::from_ymd_opt(2027, 6, 10).expect("date"),
        )
    }

    #[test]
    fn a_stored_event_decodes_to_its_stream_and_typed_event_from_a_value_or_text() {
        let payload = serde_json::to_value(held()).expect("serializable");
        let text = payload.to_string();
        let decoder = EventDecoder::default();
        let expected = TypedEvent::RoomNight {
            key: key(),
            event: held(),
        };
        assert_eq!(
            decoder.decode(raw("room_night", NIGHT, "RoomsHeld", &payload)),
            Ok(expected.clone())
        );
        let from_text = RawEvent {
            payload: RawPayload::Text(&text),
            ..raw("room_night", NIGHT, "RoomsHeld", &payload)
        };
        assert_eq!(decoder.decode(from_text), Ok(expected.clone()));
        assert_eq!(expected.event_type(), "RoomsHeld");
        assert_eq!(expected.aggregate_type(), AggregateType::RoomNight);
    }

    #[test]
    fn an_event_type_or_aggregate_this_build_does_not_know_is_an_unknown_event() {
        let decoder = EventDecoder::default();
        let payload = json!({"RoomsTeleported": {"rooms": 1}});
        let error = decoder
            .decode(raw("room_night", NIGHT, "RoomsTeleported", &payload))
            .expect_err("unknown");
        assert!(error.is_unknown());
        assert_eq!(
            error,
            DecodeError::UnknownEventType {
                aggregate_type: AggregateType::RoomNight,
                event_type: "RoomsTeleported".to_owned(),
                event_version: "1.0".to_owned(),
            }
        );
        assert!(error.to_string().contains("RoomsTeleported"), "{error}");
        // A reservation event in a night stream is no night event either.
        let cancelled = json!({"HoldExpired": {"expired_at": "2027-06-01T12:00:00Z"}});
        let error = decoder
            .decode(raw("room_night", NIGHT, "HoldExpired", &cancelled))
            .expect_err("not a night event");
        assert!(error.is_unknown(), "{error}");
        let error = decoder
            .decode(raw("spaceship", "1", "Launched", &payload))
            .expect_err("unknown aggregate");
        assert!(error.is_unknown());
        assert!(error.to_string().contains("spaceship"), "{error}");
    }

    #[test]
    fn a_known_event_with_a_malformed_payload_or_stream_id_is_not_unknown() {
        let decoder = EventDecoder::default();
        let payload = json!({"RoomsHeld": {"rooms": "two"}});
        let error = decoder
            .decode(raw("room_night", NIGHT, "RoomsHeld", &payload))
            .expect_err("malformed");
        assert!(!error.is_unknown());
        assert!(error.to_string().contains("does not decode"), "{error}");
        let good = serde_json::to_value(held()).expect("serializable");
        let error = decoder
            .decode(raw("room_night", "7:3", "RoomsHeld", &good))
            .expect_err("stream id");
        assert!(matches!(error, DecodeError::StreamId(_)), "{error}");
    }

    /// A test-only change of shape: `RoomsHeld` version "1.0" named its room count
    /// `count`; the current shape ("1.1" here) calls it `rooms`.
    fn count_renamed_to_rooms() -> Box<dyn EventUpcaster> {
        Box::new(SemanticVersionEventUpcaster::new(
            "RoomsHeld",
            "1.1",
            Box::new(|mut payload: Value| {
                if let Some(held) = payload.get_mut("RoomsHeld").and_then(Value::as_object_mut) {
                    if let Some(count) = held.remove("count") {
                        held.insert("rooms".to_owned(), count);
                    }
                }
                payload
            }),
        ))
    }

    #[test]
    fn a_version_1_0_payload_is_read_into_the_changed_event_through_its_upcaster() {
        let old = json!({"RoomsHeld": {
            "reservation_id": Uuid::from_u128(1),
            "count": 2,
            "expires_at": "2027-06-01T12:15:00Z",
        }});
        let text = old.to_string();
        // Without the upcaster the old shape does not read.
        let error = EventDecoder::default()
            .decode(raw("room_night", NIGHT, "RoomsHeld", &old))
            .expect_err("old shape");
        assert!(error.to_string().contains("rooms"), "{error}");

        let decoder = EventDecoder::new(vec![count_renamed_to_rooms()]);
        let expected = TypedEvent::RoomNight {
            key: key(),
            event: held(),
        };
        assert_eq!(
            decoder.decode(raw("room_night", NIGHT, "RoomsHeld", &old)),
            Ok(expected.clone())
        );
        let from_text = RawEvent {
            payload: RawPayload::Text(&text),
            ..raw("room_night", NIGHT, "RoomsHeld", &old)
        };
        assert_eq!(decoder.decode(from_text), Ok(expected));
        // An event the upcaster does not claim (already current) reads as it is.
        let current = serde_json::to_value(held()).expect("serializable");
        let newer = RawEvent {
            event_version: "1.1",
            ..raw("room_night", NIGHT, "RoomsHeld", &current)
        };
        assert!(decoder.decode(newer).is_ok());
    }

    #[test]
    fn a_payload_read_on_its_own_goes_through_the_upcasters_and_says_its_version() {
        let old = json!({"RoomsHeld": {
            "reservation_id": Uuid::from_u128(1),
            "count": 2,
            "expires_at": "2027-06-01T12:15:00Z",
        }});
        let decoder = EventDecoder::new(vec![count_renamed_to_rooms()]);
        let (event, version): (RoomNightEvent, _) = decoder
            .payload(
                AggregateType::RoomNight,
                raw("room_night", "not a stream id", "RoomsHeld", &old),
            )
            .expect("upcast");
        // cqrs-es writes the upcaster's version in full: a bumped `VERSION` is best
        // written the same way ("1.1.0"), so that events read and events written agree.
        assert_eq!((event, version.as_ref()), (held(), "1.1.0"));
        let current = serde_json::to_value(held()).expect("serializable");
        let (_, version): (RoomNightEvent, _) = EventDecoder::default()
            .payload(
                AggregateType::RoomNight,
                raw("room_night", NIGHT, "RoomsHeld", &current),
            )
            .expect("current");
        assert_eq!(version, "1.0");
    }

    #[test]
    fn a_reservation_held_before_sealing_reads_its_guest_and_reason_in_the_clear() {
        use crate::personal::Personal;
        use crate::reservation::ReservationEvent;
        let stream = "812:0193f3c6-5b0e-7a51-9a0e-2c1c1f8b4a10";
        // As a 1.0 build stored them: the guest and the reason untagged.
        let cancelled = serde_json::json!({"ReservationCancelled": {
            "cancelled_at": "2027-05-01T10:00:00Z", "reason": "changed plans",
            "by": "guest", "refund_cents": 0}});
        let (event, version): (ReservationEvent, _) = EventDecoder::default()
            .payload(
                AggregateType::Reservation,
                raw("reservation", stream, "ReservationCancelled", &cancelled),
            )
            .expect("a 1.0 cancellation reads");
        assert_eq!(version, ReservationEvent::VERSION);
        let ReservationEvent::ReservationCancelled { reason, .. } = event else {
            panic!("not a cancellation: {event:?}");
        };
        assert_eq!(reason, Personal::Clear("changed plans".to_owned()));
        // Unchanged types are read as they are, at the current version.
        let expired = serde_json::json!({"HoldExpired": {"expired_at": "2027-05-01T10:00:00Z"}});
        let (_, version): (ReservationEvent, _) = EventDecoder::default()
            .payload(
                AggregateType::Reservation,
                raw("reservation", stream, "HoldExpired", &expired),
            )
            .expect("a 1.0 expiry reads");
        assert_eq!(version, ReservationEvent::VERSION);
    }
}
