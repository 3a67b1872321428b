//! Replaying one stream of the audit log through the aggregates, checking that every
//! event was legal in the state the events before it left.
//!
//! The write side decides with `decide` and records what it decided; an event written
//! any other way (by hand, by a bug, by an attacker) need not be something `decide` could
//! have produced. These checks restate, per event, what `decide` guarantees — a hold is
//! confirmed only if it exists, a reservation is confirmed only while held, and so on —
//! and `RoomNight::invariant_holds` after every event. They use only the stream's own
//! state, so a replay holds one stream in memory at a time.
//!
//! Payloads are read through the same upcasters as the projections' (aggregates'
//! `EventDecoder`), so an event stored in an older shape replays as the current one,
//! and its version is checked as the upcasters left it. The stream id and the event
//! type are checked here, not by the decoder, because a replay reports them as
//! problems of the history and goes on.
//!
//! What a stream cannot tell by itself — whether a sale kept to the restrictions of its
//! nights and to its hotel's plans and occupancy, which live in other streams — is
//! judged by [`TermsReplay`], which reads the log in commit order.
//!
//! Pure: no IO, so every rule has a unit test below.

mod terms;

pub use terms::TermsReplay;

use std::borrow::Cow;
use std::sync::LazyLock;

use aggregates::contract::{hotel_stream_id, reservation_stream_id, RawEvent, RawPayload};
use aggregates::{
    AggregateType, DecodeError, EventDecoder, Hotel, HotelEvent, InventoryLevels, Reservation,
    ReservationEvent, ReservationStatus, RoomNight, RoomNightEvent,
};
use chrono::{DateTime, Utc};
use cqrs_es::DomainEvent;
use serde::de::DeserializeOwned;

/// The decoder the replay reads payloads through: production's upcasters.
static DECODER: LazyLock<EventDecoder> = LazyLock::new(EventDecoder::default);

/// The aggregate a stream replays into, by `aggregate_type`.
#[derive(Debug, Clone)]
pub enum StreamState {
    Hotel(Hotel),
    Reservation(Box<Reservation>),
    Night(RoomNight),
    Block(Box<aggregates::Block>),
    /// An aggregate type this build does not know: reported once, not replayed.
    Unknown,
}

impl StreamState {
    /// The state before a stream's first event.
    fn new(aggregate_type: &str) -> Self {
        match AggregateType::parse(aggregate_type) {
            Some(AggregateType::Hotel) => Self::Hotel(Hotel::default()),
            Some(AggregateType::Reservation) => Self::Reservation(Box::default()),
            Some(AggregateType::RoomNight) => Self::Night(RoomNight::default()),
            Some(AggregateType::Block) => Self::Block(Box::default()),
            None => Self::Unknown,
        }
    }
}

/// One stream being replayed.
#[derive(Debug, Clone)]
pub struct StreamReplay {
    pub aggregate_type: String,
    pub aggregate_id: String,
    /// Sequence of the last event applied (0 before the first).
    pub last_sequence: i64,
    pub state: StreamState,
}

impl StreamReplay {
    pub fn new(aggregate_type: &str, aggregate_id: &str) -> Self {
        Self {
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: aggregate_id.to_owned(),
            last_sequence: 0,
            state: StreamState::new(aggregate_type),
        }
    }

    /// Starts the replay of another stream, as [`Self::new`] would, keeping the
    /// buffers of the ids: a verify starts millions of streams, most of one event.
    pub fn restart(&mut self, aggregate_type: &str, aggregate_id: &str) {
        self.aggregate_type.clear();
        self.aggregate_type.push_str(aggregate_type);
        self.aggregate_id.clear();
        self.aggregate_id.push_str(aggregate_id);
        self.last_sequence = 0;
        self.state = StreamState::new(aggregate_type);
    }

    pub fn night(&self) -> Option<&RoomNight> {
        match &self.state {
            StreamState::Night(night) => Some(night),
            _ => None,
        }
    }

    /// Applies the next stored event of the stream. Returns why it was not legal, if it
    /// was not. A decodable event is applied even when a check fails: the state then
    /// follows the history as recorded, which is what the inline tables were written
    /// from, so comparing them afterwards stays meaningful.
    pub fn apply(
        &mut self,
        sequence: i64,
        event_type: &str,
        event_version: &str,
        payload: &str,
    ) -> Result<(), String> {
        let expected = self.last_sequence + 1;
        self.last_sequence = sequence;
        let gap = (sequence != expected).then(|| {
            format!("sequence {sequence} where {expected} was expected (events are missing or repeated)")
        });
        let raw = RawEvent {
            aggregate_type: &self.aggregate_type,
            aggregate_id: &self.aggregate_id,
            sequence,
            event_type,
            event_version,
            payload: RawPayload::Text(payload),
        };
        let problem = match &mut self.state {
            StreamState::Night(night) => {
                let (event, event_version): (RoomNightEvent, _) =
                    decode(raw, AggregateType::RoomNight, "room-night")?;
                let problem = check_type(&event, event_type, &event_version)
                    .err()
                    .or_else(|| check_night_event(night, &event, &self.aggregate_id).err());
                night.apply_event(&event);
                problem.or_else(|| {
                    (!night.invariant_holds()).then(|| {
                        format!(
                            "oversold after {event_type}: confirmed {} + held {} + blocked {} > capacity {}",
                            night.confirmed(),
                            night.held(),
                            night.blocked(),
                            night.capacity()
                        )
                    })
                })
            }
            StreamState::Reservation(reservation) => {
                let (event, event_version): (ReservationEvent, _) =
                    decode(raw, AggregateType::Reservation, "reservation")?;
                let problem = check_type(&event, event_type, &event_version)
                    .err()
                    .or_else(|| {
                        check_reservation_event(reservation, &event, &self.aggregate_id).err()
                    });
                reservation.apply_event(&event);
                problem
            }
            StreamState::Hotel(hotel) => {
                let (event, event_version): (HotelEvent, _) =
                    decode(raw, AggregateType::Hotel, "hotel")?;
                let problem = check_type(&event, event_type, &event_version)
                    .err()
                    .or_else(|| check_hotel_event(hotel, &event, &self.aggregate_id).err());
                hotel.apply_event(&event);
                problem
            }
            StreamState::Block(block) => {
                let (event, event_version): (aggregates::BlockEvent, _) =
                    decode(raw, AggregateType::Block, "block")?;
                let problem = check_type(&event, event_type, &event_version)
                    .err()
                    .or_else(|| check_block_event(block, &event).err());
                block.apply_event(&event);
                problem
            }
            StreamState::Unknown => {
                Some(format!("unknown aggregate type {:?}", self.aggregate_type))
            }
        };
        match gap.or(problem) {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }
}

/// The payload, through the upcasters, and the version it was read as (borrowed from
/// the row unless an upcaster changed it).
fn decode<'a, T: DeserializeOwned>(
    raw: RawEvent<'a>,
    aggregate_type: AggregateType,
    what: &str,
) -> Result<(T, Cow<'a, str>), String> {
    DECODER.payload(aggregate_type, raw).map_err(|e| match e {
        DecodeError::Payload { message, .. } => {
            format!("payload is not a {what} event: {message}")
        }
        other => format!("payload is not a {what} event: {other}"),
    })
}

/// The `event_type` and `event_version` columns (the version as the upcasters left
/// it) must say what the payload is.
fn check_type<E: DomainEvent>(
    event: &E,
    event_type: &str,
    event_version: &str,
) -> Result<(), String> {
    if event.event_type() != event_type {
        return Err(format!(
            "event_type {event_type:?} but the payload is a {}",
            event.event_type()
        ));
    }
    if event.event_version() != event_version {
        return Err(format!(
            "event_version {event_version:?} but this build reads version {}",
            event.event_version()
        ));
    }
    Ok(())
}

/// Whether `event` could have been decided on `night` as it stood before it.
pub fn check_night_event(
    night: &RoomNight,
    event: &RoomNightEvent,
    stream_id: &str,
) -> Result<(), String> {
    let allocated = |id| night.hold_of(id).is_some() || night.confirmed_for(id).is_some();
    // A booking taken from a block gives its rooms back through the block's events.
    let from_block = |id: &aggregates::ReservationId, what: &str| match night.block_of(id) {
        Some(code) => Err(format!(
            "reservation {id} took its rooms from block {code} but {what} them as general sale's"
        )),
        None => Ok(()),
    };
    match event {
        RoomNightEvent::InventorySet {
            key,
            total_rooms,
            overbooking_allowance,
            rate_cents,
        } => {
            if key.stream_id() != stream_id {
                return Err(format!(
                    "InventorySet for night {} in this stream",
                    key.stream_id()
                ));
            }
            InventoryLevels::parse(
                i64::from(*total_rooms),
                i64::from(*overbooking_allowance),
                *rate_cents,
            )
            .map_err(|e| format!("InventorySet with invalid levels: {e}"))?;
            // Lowering below what is sold shows up as the invariant failing afterwards.
            Ok(())
        }
        RoomNightEvent::RoomsHeld {
            reservation_id,
            rooms,
            ..
        }
        | RoomNightEvent::RoomsBooked {
            reservation_id,
            rooms,
        } => {
            if night.levels().is_none() {
                return Err("rooms taken on a night that has no inventory".to_owned());
            }
            if *rooms == 0 {
                return Err(format!("reservation {reservation_id} takes 0 rooms"));
            }
            if allocated(reservation_id) {
                return Err(format!(
                    "reservation {reservation_id} takes rooms it already holds or has booked"
                ));
            }
            Ok(())
        }
        RoomNightEvent::HoldConfirmed {
            reservation_id,
            rooms,
        } => match night.hold_of(reservation_id) {
            Some(hold) if hold.rooms == *rooms => Ok(()),
            Some(hold) => Err(format!(
                "reservation {reservation_id} confirms {rooms} room(s) but holds {}",
                hold.rooms
            )),
            None => Err(format!(
                "reservation {reservation_id} confirms a hold it does not have"
            )),
        },
        RoomNightEvent::HoldLapsed {
            reservation_id,
            rooms,
            expired_at,
        } => {
            from_block(reservation_id, "lets lapse")?;
            match night.hold_of(reservation_id) {
            // Microseconds: the write side decides on holds loaded from
            // room_night_allocations (PostgreSQL keeps microseconds), so a lapse can
            // carry the hold's expiry without the nanoseconds its RoomsHeld had.
            Some(hold)
                if hold.rooms == *rooms
                    && hold.expires_at.timestamp_micros() == expired_at.timestamp_micros() =>
            {
                Ok(())
            }
            Some(hold) => Err(format!(
                "hold of reservation {reservation_id} lapses as {rooms} room(s) at {} but is {} room(s) until {}",
                rfc3339(expired_at), hold.rooms, rfc3339(&hold.expires_at)
            )),
            None => Err(format!(
                "reservation {reservation_id} lets lapse a hold it does not have"
            )),
            }
        }
        RoomNightEvent::RoomsReleased {
            reservation_id,
            rooms,
            was_confirmed,
        } => {
            from_block(reservation_id, "releases")?;
            let has = if *was_confirmed {
                night.confirmed_for(reservation_id)
            } else {
                night.hold_of(reservation_id).map(|h| h.rooms)
            };
            let what = if *was_confirmed { "confirmed" } else { "held" };
            match has {
                Some(n) if n == *rooms => Ok(()),
                Some(n) => Err(format!(
                    "reservation {reservation_id} releases {rooms} {what} room(s) but has {n}"
                )),
                None => Err(format!(
                    "reservation {reservation_id} releases {what} rooms it does not have"
                )),
            }
        }
        RoomNightEvent::RestrictionsSet { .. } | RoomNightEvent::PlanRateSet { .. } => {
            if night.levels().is_none() {
                return Err(
                    "restrictions or a plan rate set on a night without inventory".to_owned(),
                );
            }
            Ok(())
        }
        RoomNightEvent::BlockSet {
            code,
            rooms,
            change,
            ..
        } => {
            if night.levels().is_none() {
                return Err(format!("block {code} set on a night without inventory"));
            }
            let before = night.block(code).copied().unwrap_or_default();
            if before.released {
                return Err(format!("block {code} set again after its release"));
            }
            if i64::from(*rooms) - i64::from(before.rooms) != *change {
                return Err(format!(
                    "block {code} sets aside {rooms} room(s), a change of {change}, but had {}",
                    before.rooms
                ));
            }
            Ok(())
        }
        RoomNightEvent::BlockRemoved { code, .. }
            if night.block(code).is_some_and(|b| b.picked_up > 0) =>
        {
            Err(format!(
                "block {code} leaves a night its bookings have rooms on"
            ))
        }
        RoomNightEvent::BlockRemoved { code, rooms }
        | RoomNightEvent::BlockReleased { code, rooms } => match night.block(code) {
            Some(block) if block.rooms == *rooms && !block.released => Ok(()),
            Some(block) => Err(format!(
                "block {code} gives back {rooms} room(s) but sets aside {}{}",
                block.rooms,
                if block.released { " (released)" } else { "" }
            )),
            None => Err(format!(
                "block {code} gives back rooms on a night it is not on"
            )),
        },
        RoomNightEvent::BlockRoomsHeld {
            reservation_id,
            code,
            rooms,
            ..
        } => {
            if allocated(reservation_id) {
                return Err(format!(
                    "reservation {reservation_id} takes rooms it already holds or has booked"
                ));
            }
            match night.block(code) {
                Some(block) if block.released => Err(format!(
                    "reservation {reservation_id} books from block {code} after its release"
                )),
                Some(block) if block.rooms >= *rooms && *rooms > 0 => Ok(()),
                Some(block) => Err(format!(
                    "reservation {reservation_id} takes {rooms} room(s) of block {code}, which has {}",
                    block.rooms
                )),
                None => Err(format!(
                    "reservation {reservation_id} books from block {code}, not on this night"
                )),
            }
        }
        RoomNightEvent::BlockHoldLapsed {
            reservation_id,
            code,
            rooms,
            to_block,
            ..
        }
        | RoomNightEvent::BlockRoomsReleased {
            reservation_id,
            code,
            rooms,
            to_block,
            ..
        } => {
            let was_confirmed = matches!(
                event,
                RoomNightEvent::BlockRoomsReleased {
                    was_confirmed: true,
                    ..
                }
            );
            let has = if was_confirmed {
                night.confirmed_for(reservation_id)
            } else {
                night.hold_of(reservation_id).map(|h| h.rooms)
            };
            if has != Some(*rooms) {
                return Err(format!(
                    "reservation {reservation_id} gives back {rooms} room(s) of block {code} but has {has:?}"
                ));
            }
            if night.block_of(reservation_id) != Some(code) {
                return Err(format!(
                    "reservation {reservation_id} gives rooms back to block {code}, which it did not take them from"
                ));
            }
            let holds = night.block(code).is_some_and(|b| !b.released);
            if holds != *to_block {
                return Err(format!(
                    "reservation {reservation_id} gives its rooms back to {} while block {code} {}",
                    if *to_block {
                        "the block"
                    } else {
                        "general sale"
                    },
                    if holds { "holds" } else { "is released" }
                ));
            }
            Ok(())
        }
    }
}

/// A block's stream: set up first, changed while open, released once.
fn check_block_event(
    block: &aggregates::Block,
    event: &aggregates::BlockEvent,
) -> Result<(), String> {
    match event {
        aggregates::BlockEvent::BlockTermsSet { .. } if block.released().is_some() => {
            Err("a released block's terms set again".to_owned())
        }
        aggregates::BlockEvent::BlockTermsSet { .. } => Ok(()),
        aggregates::BlockEvent::BlockClosed { .. } if block.terms().is_none() => {
            Err("a block released before it was set up".to_owned())
        }
        aggregates::BlockEvent::BlockClosed { .. } if block.released().is_some() => {
            Err("a block released twice".to_owned())
        }
        aggregates::BlockEvent::BlockClosed { .. } => Ok(()),
    }
}

fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// The reservation lifecycle: held first; confirmed only from held; cancelled from held
/// or confirmed; expired from held; dates changed while held or confirmed; declined from
/// held; checked in from confirmed, out from checked in; a no-show from confirmed; a
/// late payment given back in any state after the first event; the ledger's movements
/// on a paid stay, within what its card allows (see `check_money`).
pub fn check_reservation_event(
    reservation: &Reservation,
    event: &ReservationEvent,
    stream_id: &str,
) -> Result<(), String> {
    use ReservationStatus::{
        Cancelled, CheckedIn, CheckedOut, Confirmed, Declined, Expired, Held, NoShow,
    };
    let status = reservation.recorded_status();
    let allowed: &[ReservationStatus] = match event {
        ReservationEvent::ReservationHeld(details) => {
            if let Some(status) = status {
                return Err(format!(
                    "ReservationHeld for a reservation already {}",
                    status.as_str()
                ));
            }
            let expected = reservation_stream_id(details.hotel_id, details.reservation_id);
            if expected != stream_id {
                return Err(format!(
                    "ReservationHeld for stream {expected} in this stream"
                ));
            }
            return Ok(());
        }
        ReservationEvent::ReservationConfirmed { .. } => &[Held],
        ReservationEvent::ReservationCancelled { .. } => &[Held, Confirmed],
        ReservationEvent::HoldExpired { .. } => &[Held],
        ReservationEvent::DatesChanged { .. } => &[Held, Confirmed],
        ReservationEvent::PaymentDeclined { .. } => &[Held],
        ReservationEvent::GuestCheckedIn { .. } => &[Confirmed],
        ReservationEvent::GuestCheckedOut { .. } => &[CheckedIn],
        ReservationEvent::NoShowRecorded { .. } => &[Confirmed],
        ReservationEvent::LatePaymentRefunded { .. } => &[
            Held, Confirmed, Cancelled, Expired, Declined, CheckedIn, CheckedOut, NoShow,
        ],
        ReservationEvent::DateChangeHeld { .. } => &[Confirmed],
        ReservationEvent::DateChangeReleased { .. } => {
            &[Confirmed, Cancelled, CheckedIn, CheckedOut, NoShow]
        }
        // In any state, once: a second would mean the erasure was recorded twice.
        ReservationEvent::GuestErased { .. } => {
            if reservation.details().is_some_and(|d| d.guest.is_erased()) {
                return Err("GuestErased for a guest already erased".to_owned());
            }
            &[
                Held, Confirmed, Cancelled, Expired, Declined, CheckedIn, CheckedOut, NoShow,
            ]
        }
        // Money moves only on a paid stay, within what the card allows.
        ReservationEvent::AuthorizationIncreased { .. } => {
            check_money(reservation, event)?;
            &[Confirmed, Cancelled, CheckedIn, CheckedOut, NoShow]
        }
        ReservationEvent::PaymentCaptured { .. } => {
            check_money(reservation, event)?;
            &[Confirmed, Cancelled, CheckedIn, CheckedOut, NoShow]
        }
        ReservationEvent::PaymentVoided { .. } => {
            check_money(reservation, event)?;
            &[Confirmed, Cancelled, NoShow]
        }
        ReservationEvent::PaymentRefunded { .. } => {
            check_money(reservation, event)?;
            &[Confirmed, Cancelled, CheckedIn, CheckedOut, NoShow]
        }
    };
    let name = event.event_type();
    match status {
        None => Err(format!("{name} before ReservationHeld")),
        Some(status) if allowed.contains(&status) => Ok(()),
        Some(status) => Err(format!(
            "{name} while the reservation is {}",
            status.as_str()
        )),
    }
}

/// A ledger event against the reservation's ledger: there is one, and the movement is
/// one the card allows (no capture above the authorization or after a void, no void
/// after a capture, no refund above what was captured).
fn check_money(reservation: &Reservation, event: &ReservationEvent) -> Result<(), String> {
    let name = event.event_type();
    let Some(ledger) = reservation.ledger() else {
        return Err(format!("{name} on a reservation that was never paid"));
    };
    match event {
        _ if ledger.voided => Err(format!("{name} after the payment was voided")),
        ReservationEvent::PaymentCaptured { amount_cents, .. }
            if ledger.captured.get().saturating_add(amount_cents.get())
                > ledger.authorized.get() =>
        {
            Err(format!(
                "PaymentCaptured of {amount_cents} with {} of {} authorized captured already",
                ledger.captured, ledger.authorized
            ))
        }
        ReservationEvent::PaymentVoided { .. } if ledger.is_captured() => {
            Err("PaymentVoided after a capture".to_owned())
        }
        ReservationEvent::PaymentRefunded { amount_cents, .. }
            if ledger.refunded.get().saturating_add(amount_cents.get()) > ledger.captured.get() =>
        {
            Err(format!(
                "PaymentRefunded of {amount_cents} with {} refunded of {} captured",
                ledger.refunded, ledger.captured
            ))
        }
        _ => Ok(()),
    }
}

/// The catalog: details first (for the stream's own hotel), then room types.
pub fn check_hotel_event(hotel: &Hotel, event: &HotelEvent, stream_id: &str) -> Result<(), String> {
    match event {
        HotelEvent::HotelDetailsSet { hotel_id, .. } => {
            if hotel_stream_id(*hotel_id) != stream_id {
                return Err(format!(
                    "HotelDetailsSet for hotel {hotel_id} in this stream"
                ));
            }
            if hotel.hotel_id().is_some_and(|id| id != *hotel_id) {
                return Err(format!(
                    "HotelDetailsSet changes the hotel id to {hotel_id}"
                ));
            }
            Ok(())
        }
        HotelEvent::RoomTypeSet { room_type_id, .. } => {
            if hotel.hotel_id().is_none() {
                return Err(format!("RoomTypeSet {room_type_id} before HotelDetailsSet"));
            }
            Ok(())
        }
        HotelEvent::TaxesSet { .. } => {
            if hotel.hotel_id().is_none() {
                return Err("TaxesSet before HotelDetailsSet".to_owned());
            }
            Ok(())
        }
        HotelEvent::RatePlanSet { rate_plan_id, plan } => {
            if hotel.hotel_id().is_none() {
                return Err(format!("RatePlanSet {rate_plan_id} before HotelDetailsSet"));
            }
            if let Some(missing) = plan
                .room_type_ids()
                .iter()
                .find(|id| hotel.room_type(**id).is_none())
            {
                return Err(format!(
                    "RatePlanSet {rate_plan_id} sells room type {missing}, which the hotel does not have"
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aggregates::{HotelId, ReservationId, RoomNightKey, RoomTypeId};
    use chrono::{NaiveDate, TimeZone};
    use uuid::Uuid;

    const NIGHT: &str = "7:3:2027-06-10";

    fn key() -> RoomNightKey {
        RoomNightKey::new(
            HotelId::parse(7).expect("id"),
            RoomTypeId::parse(3).expect("id"),
            NaiveDate::from_ymd_opt(2027, 6, 10).expect("date"),
        )
    }

    fn res(n: u128) -> ReservationId {
        ReservationId::from_uuid(Uuid::from_u128(n))
    }

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 6, 1, 12, minute, 0)
            .single()
            .expect("time")
    }

    fn json<E: serde::Serialize>(event: &E) -> String {
        serde_json::to_string(event).expect("serializable")
    }

    /// Feeds events to a fresh night stream; returns the result of each.
    fn replay_night(events: &[RoomNightEvent]) -> Vec<Result<(), String>> {
        let mut stream = StreamReplay::new("room_night", NIGHT);
        events
            .iter()
            .enumerate()
            .map(|(i, e)| stream.apply(i as i64 + 1, &e.event_type(), "1.0", &json(e)))
            .collect()
    }

    fn inventory(total: u32) -> RoomNightEvent {
        RoomNightEvent::InventorySet {
            key: key(),
            total_rooms: total,
            overbooking_allowance: 0,
            rate_cents: aggregates::Cents::new(18_000),
        }
    }

    fn held(id: u128, rooms: u32) -> RoomNightEvent {
        RoomNightEvent::RoomsHeld {
            reservation_id: res(id),
            rooms,
            expires_at: at(15),
        }
    }

    #[test]
    fn a_legal_night_history_replays_cleanly() {
        let results = replay_night(&[
            inventory(2),
            held(1, 1),
            held(2, 1),
            RoomNightEvent::HoldConfirmed {
                reservation_id: res(1),
                rooms: 1,
            },
            RoomNightEvent::HoldLapsed {
                reservation_id: res(2),
                rooms: 1,
                expired_at: at(15),
            },
            RoomNightEvent::RoomsBooked {
                reservation_id: res(3),
                rooms: 1,
            },
            RoomNightEvent::RoomsReleased {
                reservation_id: res(1),
                rooms: 1,
                was_confirmed: true,
            },
        ]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }

    #[test]
    fn holding_beyond_capacity_breaks_the_invariant() {
        let results = replay_night(&[inventory(1), held(1, 1), held(2, 1)]);
        let err = results[2].clone().expect_err("oversold");
        assert!(err.contains("oversold"), "{err}");
    }

    #[test]
    fn releasing_what_is_not_held_is_refused() {
        let results = replay_night(&[
            inventory(2),
            RoomNightEvent::RoomsReleased {
                reservation_id: res(9),
                rooms: 1,
                was_confirmed: false,
            },
        ]);
        let err = results[1].clone().expect_err("nothing to release");
        assert!(err.contains("does not have"), "{err}");
    }

    #[test]
    fn confirming_or_lapsing_needs_the_same_hold() {
        let results = replay_night(&[
            inventory(3),
            held(1, 2),
            RoomNightEvent::HoldConfirmed {
                reservation_id: res(1),
                rooms: 1,
            },
        ]);
        assert!(results[2].is_err());
        let results = replay_night(&[
            inventory(3),
            held(1, 1),
            RoomNightEvent::HoldLapsed {
                reservation_id: res(1),
                rooms: 1,
                expired_at: at(20),
            },
        ]);
        assert!(results[2].is_err(), "lapse at another time than the hold's");
        let results = replay_night(&[
            inventory(3),
            RoomNightEvent::HoldConfirmed {
                reservation_id: res(1),
                rooms: 1,
            },
        ]);
        assert!(results[1].is_err(), "confirm without a hold");
    }

    #[test]
    fn taking_rooms_twice_or_without_inventory_is_refused() {
        assert!(replay_night(&[held(1, 1)])[0].is_err());
        assert!(replay_night(&[inventory(3), held(1, 1), held(1, 1)])[2].is_err());
    }

    #[test]
    fn inventory_for_another_night_is_refused() {
        let other = RoomNightEvent::InventorySet {
            key: RoomNightKey::new(
                key().hotel_id,
                key().room_type_id,
                NaiveDate::from_ymd_opt(2027, 6, 11).expect("date"),
            ),
            total_rooms: 1,
            overbooking_allowance: 0,
            rate_cents: aggregates::Cents::new(1),
        };
        assert!(replay_night(&[other])[0].is_err());
    }

    #[test]
    fn a_sequence_gap_or_a_mislabelled_event_is_reported() {
        let mut stream = StreamReplay::new("room_night", NIGHT);
        assert!(stream
            .apply(1, "InventorySet", "1.0", &json(&inventory(1)))
            .is_ok());
        let err = stream
            .apply(3, "RoomsHeld", "1.0", &json(&held(1, 1)))
            .expect_err("gap");
        assert!(err.contains("sequence 3"), "{err}");
        let err = stream
            .apply(4, "RoomsBooked", "1.0", &json(&held(2, 1)))
            .expect_err("type");
        assert!(err.contains("event_type"), "{err}");
        let err = stream
            .apply(5, "RoomsHeld", "1.0", "{\"Nonsense\": {}}")
            .expect_err("payload");
        assert!(err.contains("payload"), "{err}");
    }

    fn details(id: u128) -> aggregates::ReservationDetails {
        aggregates::ReservationDetails {
            more_lines: Vec::new(),
            reservation_id: res(id),
            hotel_id: HotelId::parse(7).expect("id"),
            room_type_id: RoomTypeId::parse(3).expect("id"),
            stay: aggregates::StayDates::parse(
                NaiveDate::from_ymd_opt(2027, 6, 10).expect("date"),
                NaiveDate::from_ymd_opt(2027, 6, 12).expect("date"),
            )
            .expect("stay"),
            rooms: aggregates::RoomCount::parse(1).expect("rooms"),
            guest: aggregates::Personal::Clear(
                aggregates::Guest::parse("Ana", "ana@example.com").expect("guest"),
            ),
            channel: "web".to_owned(),
            total_cents: aggregates::Cents::new(36_000),
            hold_expires_at: at(15),
            created_at: at(0),
            rate_plan_id: None,
            cancellation_policy: aggregates::cancellation::CancellationPolicy::HOUSE,
            guests: aggregates::GuestCount::ONE,
            first_night_cents: None,
            currency: aggregates::Currency::EUR,
            taxes: aggregates::taxes::Taxes::default(),
            block_code: None,
        }
    }

    fn replay_reservation(events: &[ReservationEvent]) -> Vec<Result<(), String>> {
        let stream_id = reservation_stream_id(HotelId::parse(7).expect("id"), res(1));
        let mut stream = StreamReplay::new("reservation", &stream_id);
        events
            .iter()
            .enumerate()
            .map(|(i, e)| stream.apply(i as i64 + 1, &e.event_type(), &e.event_version(), &json(e)))
            .collect()
    }

    #[test]
    fn the_reservation_lifecycle_is_enforced() {
        let held = ReservationEvent::ReservationHeld(details(1));
        let confirmed = ReservationEvent::ReservationConfirmed {
            confirmed_at: at(5),
            payment: None,
            capture_due_at: None,
        };
        let cancelled = ReservationEvent::ReservationCancelled {
            cancelled_at: at(6),
            reason: aggregates::Personal::Clear("plans".to_owned()),
            by: aggregates::CancelledBy::Guest,
            refund_cents: aggregates::Cents::new(0),
        };
        let expired = ReservationEvent::HoldExpired { expired_at: at(15) };
        let ok = replay_reservation(&[held.clone(), confirmed.clone(), cancelled.clone()]);
        assert!(ok.iter().all(Result::is_ok), "{ok:?}");
        assert!(
            replay_reservation(std::slice::from_ref(&confirmed))[0].is_err(),
            "before held"
        );
        assert!(replay_reservation(&[held.clone(), held.clone()])[1].is_err());
        assert!(replay_reservation(&[held.clone(), cancelled.clone(), confirmed])[2].is_err());
        assert!(replay_reservation(&[held.clone(), expired.clone(), cancelled])[2].is_err());
        assert!(replay_reservation(&[held.clone(), expired])[1].is_ok());
    }

    #[test]
    fn money_moves_only_on_a_paid_stay_and_within_what_the_card_allows() {
        let cents = aggregates::Cents::new;
        let held = ReservationEvent::ReservationHeld(details(1));
        let paid = ReservationEvent::ReservationConfirmed {
            confirmed_at: at(5),
            payment: Some(aggregates::Payment {
                provider_txn_id: "txn_1".to_owned(),
                amount_cents: cents(36_000),
            }),
            capture_due_at: Some(at(40)),
        };
        let unpaid = ReservationEvent::ReservationConfirmed {
            confirmed_at: at(5),
            payment: None,
            capture_due_at: None,
        };
        let capture = |amount| ReservationEvent::PaymentCaptured {
            amount_cents: cents(amount),
            gateway_key: "k:capture".to_owned(),
            captured_at: at(40),
        };
        let refund = |amount| ReservationEvent::PaymentRefunded {
            amount_cents: cents(amount),
            gateway_key: "k:refund:1".to_owned(),
            refunded_at: at(45),
        };
        let void = ReservationEvent::PaymentVoided {
            gateway_key: "k:void:txn_1".to_owned(),
            voided_at: at(30),
        };
        let legal =
            replay_reservation(&[held.clone(), paid.clone(), capture(36_000), refund(18_000)]);
        assert!(legal.iter().all(Result::is_ok), "{legal:?}");
        let error = |events: &[ReservationEvent]| {
            replay_reservation(events)
                .pop()
                .and_then(Result::err)
                .unwrap_or_else(|| panic!("accepted {events:?}"))
        };
        assert!(error(&[held.clone(), unpaid, capture(1)]).contains("never paid"));
        assert!(error(&[held.clone(), paid.clone(), capture(36_001)])
            .contains("authorized captured already"));
        assert!(error(&[held.clone(), paid.clone(), refund(1)]).contains("refunded of 0 captured"));
        assert!(
            error(&[held.clone(), paid.clone(), void.clone(), capture(1)])
                .contains("after the payment was voided")
        );
        assert!(error(&[held.clone(), paid.clone(), capture(1), void]).contains("after a capture"));
        assert!(
            error(&[held, capture(1)]).contains("never paid"),
            "a hold has no payment"
        );
    }

    #[test]
    fn a_check_in_is_legal_only_after_a_confirmation_and_ends_cancelling() {
        let held = ReservationEvent::ReservationHeld(details(1));
        let confirmed = ReservationEvent::ReservationConfirmed {
            confirmed_at: at(5),
            payment: None,
            capture_due_at: None,
        };
        let checked_in = ReservationEvent::GuestCheckedIn {
            checked_in_at: at(50),
        };
        let cancelled = ReservationEvent::ReservationCancelled {
            cancelled_at: at(55),
            reason: aggregates::Personal::Clear("plans".to_owned()),
            by: aggregates::CancelledBy::Hotel,
            refund_cents: aggregates::Cents::new(0),
        };
        let ok = replay_reservation(&[held.clone(), confirmed.clone(), checked_in.clone()]);
        assert!(ok.iter().all(Result::is_ok), "{ok:?}");
        assert!(replay_reservation(&[held.clone(), checked_in.clone()])[1].is_err());
        let after = replay_reservation(&[
            held.clone(),
            confirmed.clone(),
            checked_in.clone(),
            cancelled,
        ]);
        assert!(after[3].is_err(), "{after:?}");
        let out = ReservationEvent::GuestCheckedOut {
            checked_out_at: at(58),
            released_from: NaiveDate::from_ymd_opt(2027, 6, 11).expect("date"),
        };
        let left = replay_reservation(&[held.clone(), confirmed.clone(), checked_in, out.clone()]);
        assert!(left.iter().all(Result::is_ok), "{left:?}");
        assert!(replay_reservation(&[held.clone(), confirmed.clone(), out])[2].is_err());
        let no_show = ReservationEvent::NoShowRecorded {
            recorded_at: at(59),
            released_from: NaiveDate::from_ymd_opt(2027, 6, 11).expect("date"),
        };
        let missed = replay_reservation(&[held.clone(), confirmed, no_show.clone()]);
        assert!(missed.iter().all(Result::is_ok), "{missed:?}");
        assert!(replay_reservation(&[held, no_show])[1].is_err());
    }

    #[test]
    fn a_reservation_held_in_another_stream_is_refused() {
        let results = replay_reservation(&[ReservationEvent::ReservationHeld(details(2))]);
        assert!(results[0].is_err());
    }

    #[test]
    fn unknown_aggregate_types_are_reported() {
        let mut stream = StreamReplay::new("spaceship", "1");
        assert!(stream.apply(1, "Launched", "1.0", "{}").is_err());
    }
}
