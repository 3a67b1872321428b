//! Decisions that span aggregates: a stay touches one `Reservation` and one `RoomNight`
//! per night, and must change all of them or none.
//!
//! Each function here is pure: it takes the loaded aggregates and a command (time, ids and
//! limits included) and returns the events for every stream, or one rejection. The write
//! side only loads state before and appends the result after, in one transaction, so every
//! business rule can be tested without a database.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::hotel::Hotel;
use crate::reservation::{
    CancelledBy, Reservation, ReservationCommand, ReservationDetails, ReservationError,
    ReservationEvent, ReservationStatus,
};
use crate::room_night::{RoomNight, RoomNightCommand, RoomNightError, RoomNightEvent, RoomNightKey};
use crate::types::{
    local_date, BookingLimits, Guest, HotelId, InvalidInput, InventoryLevels, ReservationId,
    RoomCount, RoomTypeId, StayDates,
};

/// The loaded nights of one hotel and room type, by date. A night that is absent has no
/// inventory (nothing for sale).
pub type Nights = BTreeMap<NaiveDate, RoomNight>;

/// What a command decided: the events for the reservation stream and for each night
/// stream that changes (in night order; nights with no event are left out).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub reservation: Vec<ReservationEvent>,
    pub nights: Vec<(RoomNightKey, Vec<RoomNightEvent>)>,
}

impl Decision {
    pub fn is_empty(&self) -> bool {
        self.reservation.is_empty() && self.nights.is_empty()
    }
}

/// Why a command was refused. Nothing is written for any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Rejection {
    #[error("sold out on {night}")]
    SoldOut { night: NaiveDate },
    #[error("the price of the stay is now {total_cents} cents")]
    PriceChanged { total_cents: i64 },
    #[error("unknown hotel")]
    UnknownHotel,
    #[error("unknown room type")]
    UnknownRoomType,
    #[error("no such reservation")]
    ReservationNotFound,
    #[error("a reservation with this id already exists")]
    ReservationExists,
    #[error("the reservation is {status:?}")]
    InvalidState { status: ReservationStatus },
    #[error("the hold lapsed at {expired_at}")]
    HoldExpired { expired_at: DateTime<Utc> },
    #[error("the hold has not lapsed yet")]
    HoldStillLive,
    #[error("inventory on {night} cannot go below the {reserved} room(s) already sold")]
    InventoryBelowReserved { night: NaiveDate, reserved: u32 },
    #[error("{0}")]
    Invalid(InvalidInputRejection),
}

/// `InvalidInput` in a serializable form, so rejections can be stored as the outcome of
/// an idempotent request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{field}: {message}")]
pub struct InvalidInputRejection {
    pub field: String,
    pub message: String,
}

impl From<InvalidInput> for Rejection {
    fn from(e: InvalidInput) -> Self {
        Rejection::Invalid(InvalidInputRejection {
            field: e.field.to_owned(),
            message: e.message,
        })
    }
}

impl From<ReservationError> for Rejection {
    fn from(e: ReservationError) -> Self {
        match e {
            ReservationError::NotFound => Rejection::ReservationNotFound,
            ReservationError::AlreadyExists => Rejection::ReservationExists,
            ReservationError::InvalidState { status } => Rejection::InvalidState { status },
            ReservationError::HoldExpired { expired_at } => Rejection::HoldExpired { expired_at },
            ReservationError::HoldStillLive => Rejection::HoldStillLive,
            ReservationError::SameDates => InvalidInput::new(
                "end_date",
                "the new dates are the reservation's current dates",
            )
            .into(),
        }
    }
}

/// Hold a stay: every night of `[start, end)` or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldStay {
    pub reservation_id: ReservationId,
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guest: Guest,
    pub channel: String,
    pub expected_total_cents: Option<i64>,
    pub now: DateTime<Utc>,
    pub hold_expires_at: DateTime<Utc>,
}

fn check_room_type(
    hotel: &Hotel,
    hotel_id: HotelId,
    room_type_id: RoomTypeId,
) -> Result<&str, Rejection> {
    let details = match (hotel.hotel_id(), hotel.details()) {
        (Some(id), Some(details)) if id == hotel_id => details,
        _ => return Err(Rejection::UnknownHotel),
    };
    if hotel.room_type(room_type_id).is_none() {
        return Err(Rejection::UnknownRoomType);
    }
    Ok(details.timezone())
}

fn night_of<'a>(nights: &'a Nights, night: NaiveDate, empty: &'a RoomNight) -> &'a RoomNight {
    nights.get(&night).unwrap_or(empty)
}

/// Runs one night's command, mapping "no room" to `sold_out` naming that night.
fn decide_night(
    night: &RoomNight,
    date: NaiveDate,
    command: RoomNightCommand,
) -> Result<Vec<RoomNightEvent>, Rejection> {
    night.decide(command).map_err(|e| match e {
        RoomNightError::NotForSale | RoomNightError::SoldOut { .. } => {
            Rejection::SoldOut { night: date }
        }
        RoomNightError::AllocationMismatch { .. } => Rejection::ReservationExists,
        RoomNightError::HoldExpired { expired_at } => Rejection::HoldExpired { expired_at },
        RoomNightError::NoHold => Rejection::HoldExpired {
            expired_at: DateTime::<Utc>::MIN_UTC,
        },
        RoomNightError::HoldStillLive => Rejection::HoldStillLive,
        RoomNightError::BelowReserved { reserved } => Rejection::InventoryBelowReserved {
            night: date,
            reserved,
        },
        RoomNightError::WrongNight => Rejection::SoldOut { night: date },
    })
}

/// Price of a stay at the current per-night rates; `None` if a night has no inventory.
pub fn price_of(nights: &Nights, stay: &StayDates) -> Option<i64> {
    stay.nights().try_fold(0_i64, |total, night| {
        let rate = nights.get(&night)?.levels()?.rate_cents();
        total.checked_add(rate)
    })
}

fn push_night(
    decision: &mut Decision,
    hotel_id: HotelId,
    room_type_id: RoomTypeId,
    night: NaiveDate,
    events: Vec<RoomNightEvent>,
) {
    if !events.is_empty() {
        decision
            .nights
            .push((RoomNightKey::new(hotel_id, room_type_id, night), events));
    }
}

pub fn hold_stay(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &Nights,
    limits: &BookingLimits,
    cmd: HoldStay,
) -> Result<Decision, Rejection> {
    let timezone = check_room_type(hotel, cmd.hotel_id, cmd.room_type_id)?;
    limits.check(&cmd.stay, cmd.rooms, local_date(cmd.now, timezone))?;
    if reservation.details().is_some() {
        return Err(Rejection::ReservationExists);
    }
    let empty = RoomNight::default();
    let mut decision = Decision::default();
    for date in cmd.stay.nights() {
        let events = decide_night(
            night_of(nights, date, &empty),
            date,
            RoomNightCommand::Hold {
                reservation_id: cmd.reservation_id,
                rooms: cmd.rooms,
                expires_at: cmd.hold_expires_at,
                now: cmd.now,
            },
        )?;
        push_night(&mut decision, cmd.hotel_id, cmd.room_type_id, date, events);
    }
    let nightly = price_of(nights, &cmd.stay).ok_or(Rejection::SoldOut {
        night: cmd.stay.start(),
    })?;
    let total_cents = nightly.saturating_mul(i64::from(cmd.rooms.get()));
    if cmd
        .expected_total_cents
        .is_some_and(|expected| expected != total_cents)
    {
        return Err(Rejection::PriceChanged { total_cents });
    }
    decision.reservation = reservation.decide(ReservationCommand::Place {
        details: ReservationDetails {
            reservation_id: cmd.reservation_id,
            hotel_id: cmd.hotel_id,
            room_type_id: cmd.room_type_id,
            stay: cmd.stay,
            rooms: cmd.rooms,
            guest: cmd.guest,
            channel: cmd.channel,
            total_cents,
            hold_expires_at: cmd.hold_expires_at,
            created_at: cmd.now,
        },
    })?;
    Ok(decision)
}

fn existing(reservation: &Reservation) -> Result<&ReservationDetails, Rejection> {
    reservation.details().ok_or(Rejection::ReservationNotFound)
}

/// Cancel a held or confirmed reservation and give every night back. The status guards
/// the release: cancelling twice is refused and releases nothing.
pub fn cancel(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
    reason: String,
    by: CancelledBy,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::Cancel { now, reason, by })?,
        nights: Vec::new(),
    };
    let empty = RoomNight::default();
    for date in details.stay.nights() {
        let events = decide_night(
            night_of(nights, date, &empty),
            date,
            RoomNightCommand::Release {
                reservation_id: details.reservation_id,
            },
        )?;
        push_night(&mut decision, details.hotel_id, details.room_type_id, date, events);
    }
    Ok(decision)
}

/// Confirm a live hold on every night.
pub fn confirm(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::Confirm { now })?,
        nights: Vec::new(),
    };
    if decision.reservation.is_empty() {
        return Ok(decision);
    }
    let empty = RoomNight::default();
    for date in details.stay.nights() {
        let events = decide_night(
            night_of(nights, date, &empty),
            date,
            RoomNightCommand::Confirm {
                reservation_id: details.reservation_id,
                now,
            },
        )
        .map_err(|e| match e {
            Rejection::HoldExpired { .. } => Rejection::HoldExpired {
                expired_at: details.hold_expires_at,
            },
            other => other,
        })?;
        push_night(&mut decision, details.hotel_id, details.room_type_id, date, events);
    }
    Ok(decision)
}

/// Record that a hold lapsed and drop it from every night that still carries it.
pub fn expire_hold(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::Expire { now })?,
        nights: Vec::new(),
    };
    let empty = RoomNight::default();
    for date in details.stay.nights() {
        let events = decide_night(
            night_of(nights, date, &empty),
            date,
            RoomNightCommand::ExpireHold {
                reservation_id: details.reservation_id,
                now,
            },
        )?;
        push_night(&mut decision, details.hotel_id, details.room_type_id, date, events);
    }
    Ok(decision)
}

/// Move a held or confirmed stay to new dates: release the nights it leaves and take the
/// nights it enters, all in one decision, or refuse and change nothing. Nights in both
/// stays are untouched. The new price is the sum of the current rates of the new stay.
#[allow(clippy::too_many_arguments)]
pub fn change_dates(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &Nights,
    limits: &BookingLimits,
    new_stay: StayDates,
    expected_total_cents: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let timezone = check_room_type(hotel, details.hotel_id, details.room_type_id)?;
    limits.check(&new_stay, details.rooms, local_date(now, timezone))?;
    let nightly = price_of(nights, &new_stay);
    let total_cents = nightly
        .unwrap_or(0)
        .saturating_mul(i64::from(details.rooms.get()));
    let reservation_events = reservation.decide(ReservationCommand::ChangeDates {
        stay: new_stay,
        total_cents,
        now,
    })?;
    let held = reservation.recorded_status() == Some(ReservationStatus::Held);
    let old = details.stay;
    let empty = RoomNight::default();
    let mut decision = Decision::default();
    let mut all_nights: Vec<NaiveDate> = old.nights().chain(new_stay.nights()).collect();
    all_nights.sort_unstable();
    all_nights.dedup();
    for date in all_nights {
        let night = night_of(nights, date, &empty);
        let command = match (old.contains(date), new_stay.contains(date)) {
            (true, false) => RoomNightCommand::Release {
                reservation_id: details.reservation_id,
            },
            (false, true) if held => RoomNightCommand::Hold {
                reservation_id: details.reservation_id,
                rooms: details.rooms,
                expires_at: details.hold_expires_at,
                now,
            },
            (false, true) => RoomNightCommand::Book {
                reservation_id: details.reservation_id,
                rooms: details.rooms,
                now,
            },
            _ => continue,
        };
        let events = decide_night(night, date, command)?;
        push_night(&mut decision, details.hotel_id, details.room_type_id, date, events);
    }
    if nightly.is_none() {
        return Err(Rejection::SoldOut {
            night: new_stay.start(),
        });
    }
    if expected_total_cents.is_some_and(|expected| expected != total_cents) {
        return Err(Rejection::PriceChanged { total_cents });
    }
    decision.reservation = reservation_events;
    Ok(decision)
}

/// What to set on each night of a range. Omitted allowance and rate keep the night's
/// current values; a night without inventory yet needs a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InventoryUpdate {
    pub total_rooms: i64,
    pub overbooking_allowance: Option<i64>,
    pub rate_cents: Option<i64>,
}

/// Set inventory on every night of `range` for one room type, or on none: lowering any
/// night below what is already sold refuses the whole update.
pub fn set_inventory(
    hotel: &Hotel,
    nights: &Nights,
    hotel_id: HotelId,
    room_type_id: RoomTypeId,
    range: StayDates,
    update: InventoryUpdate,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    check_room_type(hotel, hotel_id, room_type_id)?;
    let empty = RoomNight::default();
    let mut decision = Decision::default();
    for date in range.nights() {
        let night = night_of(nights, date, &empty);
        let current = night.levels();
        let allowance = update
            .overbooking_allowance
            .or(current.map(|l| i64::from(l.overbooking_allowance())))
            .unwrap_or(0);
        let rate = match update.rate_cents.or(current.map(|l| l.rate_cents())) {
            Some(rate) => rate,
            None => {
                return Err(InvalidInput::new(
                    "rate_cents",
                    format!("{date} has no rate yet: rate_cents is required"),
                )
                .into())
            }
        };
        let levels = InventoryLevels::parse(update.total_rooms, allowance, rate)?;
        let events = decide_night(
            night,
            date,
            RoomNightCommand::SetInventory {
                key: RoomNightKey::new(hotel_id, room_type_id, date),
                levels,
                now,
            },
        )?;
        push_night(&mut decision, hotel_id, room_type_id, date, events);
    }
    Ok(decision)
}
