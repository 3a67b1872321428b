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
    CancelledBy, Payment, Reservation, ReservationCommand, ReservationDetails, ReservationError,
    ReservationEvent, ReservationStatus,
};
use crate::room_night::{
    RoomNight, RoomNightCommand, RoomNightError, RoomNightEvent, RoomNightKey,
};
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

/// The hour guests check in, local time at the hotel; the refund policy counts hours
/// before it.
pub const CHECK_IN_HOUR: u32 = 15;

/// How much of `paid` a cancellation gives back: all of it when the hotel cancels; when
/// the guest does, 100% at 72 hours or more before check-in (15:00 on the first night,
/// in the hotel's timezone), 50% (rounded down) at 24 hours or more, nothing after.
pub fn refund_cents(
    paid: i64,
    check_in: NaiveDate,
    timezone: &str,
    now: DateTime<Utc>,
    by: CancelledBy,
) -> i64 {
    if paid <= 0 {
        return 0;
    }
    if by == CancelledBy::Hotel {
        return paid;
    }
    let lead = check_in_instant(check_in, timezone) - now;
    if lead >= chrono::Duration::hours(72) {
        paid
    } else if lead >= chrono::Duration::hours(24) {
        paid / 2
    } else {
        0
    }
}

/// Check-in as an instant: [`CHECK_IN_HOUR`] on `date` in the hotel's timezone. In a
/// daylight-saving fold the earlier reading counts, in a gap the hour after; an
/// unknown timezone name reads as UTC.
pub fn check_in_instant(date: NaiveDate, timezone: &str) -> DateTime<Utc> {
    use chrono::TimeZone;
    let local =
        date.and_time(chrono::NaiveTime::MIN) + chrono::Duration::hours(CHECK_IN_HOUR.into());
    match timezone.parse::<chrono_tz::Tz>() {
        Ok(tz) => match tz.from_local_datetime(&local) {
            chrono::LocalResult::Single(t) => t.with_timezone(&Utc),
            chrono::LocalResult::Ambiguous(early, _) => early.with_timezone(&Utc),
            // In a gap the wall-clock hour does not exist: read it an hour later.
            chrono::LocalResult::None => tz
                .from_local_datetime(&(local + chrono::Duration::hours(1)))
                .earliest()
                .map_or_else(|| local.and_utc(), |t| t.with_timezone(&Utc)),
        },
        Err(_) => local.and_utc(),
    }
}

/// Cancel a held or confirmed reservation and give every night back; the refund follows
/// [`refund_cents`] from the payment that confirmed it (nothing was paid for a hold).
/// The status guards the release: cancelling twice is refused and releases nothing.
pub fn cancel(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
    reason: String,
    by: CancelledBy,
    timezone: &str,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let paid = match reservation.recorded_status() {
        Some(ReservationStatus::Confirmed) => reservation.payment().map_or(0, |p| p.amount_cents),
        _ => 0,
    };
    let refund_cents = refund_cents(paid, details.stay.start(), timezone, now, by);
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::Cancel {
            now,
            reason,
            by,
            refund_cents,
        })?,
        nights: Vec::new(),
    };
    release_every_night(&mut decision, details, nights)?;
    Ok(decision)
}

/// Give back every night of the stay (held or confirmed).
fn release_every_night(
    decision: &mut Decision,
    details: &ReservationDetails,
    nights: &Nights,
) -> Result<(), Rejection> {
    let empty = RoomNight::default();
    for date in details.stay.nights() {
        let events = decide_night(
            night_of(nights, date, &empty),
            date,
            RoomNightCommand::Release {
                reservation_id: details.reservation_id,
            },
        )?;
        push_night(
            decision,
            details.hotel_id,
            details.room_type_id,
            date,
            events,
        );
    }
    Ok(())
}

/// Confirm a live hold on every night, without a payment (staff, or tests of the write
/// side); guests confirm through the payment saga, which calls
/// [`apply_authorization`].
pub fn confirm(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let events = reservation.decide(ReservationCommand::Confirm { now, payment: None })?;
    confirm_nights(reservation, nights, now, events)
}

/// The gateway reported an authorization: confirm a live hold with it, or give it back
/// (the hold lapsed — then the lapse is recorded and the nights released in the same
/// step —, the reservation was cancelled or declined, or another payment already
/// confirmed it). A transaction seen before changes nothing.
pub fn apply_authorization(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
    payment: Payment,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let events = reservation.decide(ReservationCommand::ApplyAuthorization { now, payment })?;
    if events
        .iter()
        .any(|e| matches!(e, ReservationEvent::ReservationConfirmed { .. }))
    {
        return confirm_nights(reservation, nights, now, events);
    }
    let mut decision = Decision {
        reservation: events,
        nights: Vec::new(),
    };
    if decision
        .reservation
        .iter()
        .any(|e| matches!(e, ReservationEvent::HoldExpired { .. }))
    {
        expire_every_night(&mut decision, details, nights, now)?;
    }
    Ok(decision)
}

/// The gateway declined the card: a held reservation ends `declined` and every night
/// it held returns to sale. Anything else is left as it is.
pub fn decline_payment(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
    provider_txn_id: Option<String>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::DeclinePayment {
            now,
            provider_txn_id,
        })?,
        nights: Vec::new(),
    };
    if !decision.reservation.is_empty() {
        release_every_night(&mut decision, details, nights)?;
    }
    Ok(decision)
}

fn confirm_nights(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
    events: Vec<ReservationEvent>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let mut decision = Decision {
        reservation: events,
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
        push_night(
            &mut decision,
            details.hotel_id,
            details.room_type_id,
            date,
            events,
        );
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
    expire_every_night(&mut decision, details, nights, now)?;
    Ok(decision)
}

fn expire_every_night(
    decision: &mut Decision,
    details: &ReservationDetails,
    nights: &Nights,
    now: DateTime<Utc>,
) -> Result<(), Rejection> {
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
        push_night(
            decision,
            details.hotel_id,
            details.room_type_id,
            date,
            events,
        );
    }
    Ok(())
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
        push_night(
            &mut decision,
            details.hotel_id,
            details.room_type_id,
            date,
            events,
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotel::{HotelCommand, HotelDetails, RoomTypeDetails};
    use chrono::TimeZone;
    use uuid::Uuid;

    const HOTEL: i64 = 7;
    const KING: i64 = 3;

    fn hotel_id() -> HotelId {
        HotelId::parse(HOTEL).expect("valid id")
    }

    fn king() -> RoomTypeId {
        RoomTypeId::parse(KING).expect("valid id")
    }

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2027, 6, d).expect("valid date")
    }

    fn key(d: u32) -> RoomNightKey {
        RoomNightKey::new(hotel_id(), king(), day(d))
    }

    fn stay(start: u32, end: u32) -> StayDates {
        StayDates::parse(day(start), day(end)).expect("valid stay")
    }

    /// Minutes after 2027-06-01 12:00 UTC (13:00 in Lisbon, so "today" is the 1st).
    fn at(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
            .single()
            .expect("valid time")
            + chrono::Duration::minutes(minutes)
    }

    fn res(n: u128) -> ReservationId {
        ReservationId::from_uuid(Uuid::from_u128(n))
    }

    fn rooms(n: i64) -> RoomCount {
        RoomCount::parse(n).expect("valid count")
    }

    fn guest() -> Guest {
        Guest::parse("Ana Lima", "ana@example.com").expect("valid guest")
    }

    /// Hotel 7 in Lisbon with room type 3.
    fn hotel() -> Hotel {
        let mut hotel = Hotel::default();
        let commands = [
            HotelCommand::SetDetails {
                hotel_id: hotel_id(),
                details: HotelDetails::parse("Casa do Rio", "Lisbon", "Europe/Lisbon")
                    .expect("valid details"),
            },
            HotelCommand::SetRoomType {
                room_type_id: king(),
                details: RoomTypeDetails::parse("King", 2).expect("valid room type"),
            },
        ];
        for command in commands {
            for event in hotel.decide(command).expect("catalog accepts") {
                hotel.apply_event(&event);
            }
        }
        hotel
    }

    /// Nights of room type 3, each `(day, total_rooms, allowance, rate_cents)`.
    fn nights(spec: &[(u32, u32, u32, i64)]) -> Nights {
        spec.iter()
            .map(|&(d, total, allowance, rate)| {
                let mut night = RoomNight::default();
                night.apply_event(&RoomNightEvent::InventorySet {
                    key: key(d),
                    total_rooms: total,
                    overbooking_allowance: allowance,
                    rate_cents: rate,
                });
                (day(d), night)
            })
            .collect()
    }

    /// Nights 10..=13 with `total` rooms each at 100, 120, 140, 160 euros.
    fn four_nights(total: u32) -> Nights {
        nights(&[
            (10, total, 0, 10_000),
            (11, total, 0, 12_000),
            (12, total, 0, 14_000),
            (13, total, 0, 16_000),
        ])
    }

    fn hold_cmd(id: u128, start: u32, end: u32, n: i64) -> HoldStay {
        HoldStay {
            reservation_id: res(id),
            hotel_id: hotel_id(),
            room_type_id: king(),
            stay: stay(start, end),
            rooms: rooms(n),
            guest: guest(),
            channel: "direct".to_owned(),
            expected_total_cents: None,
            now: at(0),
            hold_expires_at: at(15),
        }
    }

    fn apply(decision: &Decision, reservation: &mut Reservation, nights: &mut Nights) {
        for event in &decision.reservation {
            reservation.apply_event(event);
        }
        for (key, events) in &decision.nights {
            let night = nights.entry(key.night).or_default();
            for event in events {
                night.apply_event(event);
            }
        }
    }

    /// Holds a stay for `id` and applies it, returning the reservation.
    fn held(cmd: HoldStay, nights: &mut Nights) -> Reservation {
        let mut reservation = Reservation::default();
        let decision = hold_stay(
            &hotel(),
            &reservation,
            nights,
            &BookingLimits::default(),
            cmd,
        )
        .expect("the stay can be held");
        apply(&decision, &mut reservation, nights);
        reservation
    }

    fn confirmed(cmd: HoldStay, nights: &mut Nights) -> Reservation {
        let mut reservation = held(cmd, nights);
        let decision = confirm(&reservation, nights, at(1)).expect("the hold is live");
        apply(&decision, &mut reservation, nights);
        reservation
    }

    fn invalid_field(result: Result<Decision, Rejection>) -> String {
        match result {
            Err(Rejection::Invalid(InvalidInputRejection { field, .. })) => field,
            other => panic!("expected an invalid input rejection, got {other:?}"),
        }
    }

    fn rooms_held(id: u128, n: u32) -> RoomNightEvent {
        RoomNightEvent::RoomsHeld {
            reservation_id: res(id),
            rooms: n,
            expires_at: at(15),
        }
    }

    fn rooms_released(id: u128, n: u32, was_confirmed: bool) -> RoomNightEvent {
        RoomNightEvent::RoomsReleased {
            reservation_id: res(id),
            rooms: n,
            was_confirmed,
        }
    }

    // --- price_of -----------------------------------------------------------------------

    #[test]
    fn the_price_of_a_stay_is_the_sum_of_its_nightly_rates() {
        let nights = four_nights(1);
        assert_eq!(price_of(&nights, &stay(10, 13)), Some(36_000));
        assert_eq!(price_of(&nights, &stay(13, 14)), Some(16_000));
        assert_eq!(price_of(&nights, &stay(12, 15)), None);
    }

    // --- hold_stay ----------------------------------------------------------------------

    #[test]
    fn holding_a_stay_holds_every_night_at_the_sum_of_the_rates_times_the_rooms() {
        let nights = four_nights(3);
        let decision = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            hold_cmd(1, 10, 13, 2),
        )
        .expect("the stay can be held");
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![rooms_held(1, 2)]),
                (key(11), vec![rooms_held(1, 2)]),
                (key(12), vec![rooms_held(1, 2)]),
            ]
        );
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::ReservationHeld(ReservationDetails {
                reservation_id: res(1),
                hotel_id: hotel_id(),
                room_type_id: king(),
                stay: stay(10, 13),
                rooms: rooms(2),
                guest: guest(),
                channel: "direct".to_owned(),
                total_cents: 2 * (10_000 + 12_000 + 14_000),
                hold_expires_at: at(15),
                created_at: at(0),
            })]
        );
    }

    #[test]
    fn a_stay_whose_middle_night_is_sold_out_holds_no_night() {
        let mut nights = four_nights(1);
        held(hold_cmd(1, 11, 12, 1), &mut nights);
        let before = nights.clone();
        let result = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            hold_cmd(2, 10, 13, 1),
        );
        assert_eq!(result, Err(Rejection::SoldOut { night: day(11) }));
        assert_eq!(nights, before);
    }

    #[test]
    fn a_stay_sold_out_on_several_nights_names_the_first_of_them() {
        let mut nights = four_nights(1);
        held(hold_cmd(1, 12, 14, 1), &mut nights);
        let result = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            hold_cmd(2, 10, 14, 1),
        );
        assert_eq!(result, Err(Rejection::SoldOut { night: day(12) }));
    }

    #[test]
    fn a_stay_over_a_night_with_no_inventory_is_sold_out_on_that_night() {
        let nights = nights(&[(10, 5, 0, 10_000), (12, 5, 0, 10_000)]);
        let result = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            hold_cmd(1, 10, 13, 1),
        );
        assert_eq!(result, Err(Rejection::SoldOut { night: day(11) }));
    }

    #[test]
    fn a_stay_needing_more_rooms_than_remain_is_sold_out() {
        let nights = four_nights(1);
        let result = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            hold_cmd(1, 10, 11, 2),
        );
        assert_eq!(result, Err(Rejection::SoldOut { night: day(10) }));
    }

    #[test]
    fn a_stay_ending_on_a_day_and_one_starting_that_day_share_no_night() {
        let mut nights = four_nights(1);
        let first = held(hold_cmd(1, 10, 12, 1), &mut nights);
        let second = held(hold_cmd(2, 12, 14, 1), &mut nights);
        assert_eq!(first.recorded_status(), Some(ReservationStatus::Held));
        assert_eq!(second.recorded_status(), Some(ReservationStatus::Held));
        for night in nights.values() {
            assert_eq!((night.held(), night.remaining()), (1, 0));
            assert!(night.invariant_holds());
        }
        assert!(nights[&day(11)].hold_of(&res(1)).is_some());
        assert!(nights[&day(12)].hold_of(&res(2)).is_some());
    }

    #[test]
    fn a_hold_quoting_the_wrong_total_is_price_changed_with_the_actual_total() {
        let nights = four_nights(3);
        let mut cmd = hold_cmd(1, 10, 12, 2);
        cmd.expected_total_cents = Some(40_000);
        let result = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            cmd.clone(),
        );
        assert_eq!(
            result,
            Err(Rejection::PriceChanged {
                total_cents: 44_000
            })
        );
        cmd.expected_total_cents = Some(44_000);
        assert!(hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            cmd,
        )
        .is_ok());
    }

    #[test]
    fn holding_at_an_unknown_hotel_is_unknown_hotel() {
        let nights = four_nights(3);
        let limits = BookingLimits::default();
        let empty = Reservation::default();
        let result = hold_stay(
            &Hotel::default(),
            &empty,
            &nights,
            &limits,
            hold_cmd(1, 10, 11, 1),
        );
        assert_eq!(result, Err(Rejection::UnknownHotel));
        let mut cmd = hold_cmd(1, 10, 11, 1);
        cmd.hotel_id = HotelId::parse(8).expect("valid id");
        assert_eq!(
            hold_stay(&hotel(), &empty, &nights, &limits, cmd),
            Err(Rejection::UnknownHotel)
        );
    }

    #[test]
    fn holding_an_unknown_room_type_is_unknown_room_type() {
        let mut cmd = hold_cmd(1, 10, 11, 1);
        cmd.room_type_id = RoomTypeId::parse(4).expect("valid id");
        let result = hold_stay(
            &hotel(),
            &Reservation::default(),
            &four_nights(3),
            &BookingLimits::default(),
            cmd,
        );
        assert_eq!(result, Err(Rejection::UnknownRoomType));
    }

    #[test]
    fn holding_outside_the_booking_limits_is_invalid() {
        let nights = four_nights(20);
        let limits = BookingLimits::default();
        let empty = Reservation::default();
        let attempt = |cmd: HoldStay| hold_stay(&hotel(), &empty, &nights, &limits, cmd);

        let mut too_long = hold_cmd(1, 10, 11, 1);
        too_long.stay = StayDates::parse(day(10), day(10) + chrono::Days::new(31)).expect("valid");
        assert_eq!(invalid_field(attempt(too_long)), "end_date");

        assert_eq!(invalid_field(attempt(hold_cmd(1, 10, 11, 11))), "rooms");

        let mut far = hold_cmd(1, 10, 11, 1);
        far.now = Utc
            .with_ymd_and_hms(2025, 6, 1, 12, 0, 0)
            .single()
            .expect("valid");
        far.hold_expires_at = far.now + chrono::Duration::minutes(15);
        assert_eq!(invalid_field(attempt(far)), "start_date");

        let strict = BookingLimits {
            max_nights: 2,
            max_rooms: 1,
            max_days_ahead: 730,
        };
        let result = hold_stay(&hotel(), &empty, &nights, &strict, hold_cmd(1, 10, 13, 1));
        assert_eq!(invalid_field(result), "end_date");
    }

    #[test]
    fn the_start_may_not_be_in_the_past_at_the_hotel_even_if_it_is_not_in_utc() {
        // 23:30 UTC on the 9th is already 00:30 on the 10th in Lisbon (UTC+1 in June).
        let late = Utc
            .with_ymd_and_hms(2027, 6, 9, 23, 30, 0)
            .single()
            .expect("valid");
        let nights = four_nights(3);
        let limits = BookingLimits::default();
        let empty = Reservation::default();
        let mut cmd = hold_cmd(1, 9, 11, 1);
        cmd.now = late;
        cmd.hold_expires_at = late + chrono::Duration::minutes(15);
        let mut extended = nights.clone();
        extended.extend(self::nights(&[(9, 3, 0, 10_000)]));
        assert_eq!(
            invalid_field(hold_stay(&hotel(), &empty, &extended, &limits, cmd.clone())),
            "start_date"
        );
        cmd.stay = stay(10, 11);
        assert!(hold_stay(&hotel(), &empty, &nights, &limits, cmd).is_ok());
    }

    #[test]
    fn holding_with_the_id_of_an_existing_reservation_is_reservation_exists() {
        let mut nights = four_nights(3);
        let existing = held(hold_cmd(1, 10, 11, 1), &mut nights);
        let result = hold_stay(
            &hotel(),
            &existing,
            &nights,
            &BookingLimits::default(),
            hold_cmd(1, 12, 13, 1),
        );
        assert_eq!(result, Err(Rejection::ReservationExists));
    }

    #[test]
    fn holding_drops_lapsed_holds_of_other_reservations_on_its_nights() {
        let mut nights = four_nights(1);
        held(hold_cmd(1, 10, 12, 1), &mut nights);
        let mut cmd = hold_cmd(2, 11, 13, 1);
        cmd.now = at(20);
        cmd.hold_expires_at = at(35);
        let decision = hold_stay(
            &hotel(),
            &Reservation::default(),
            &nights,
            &BookingLimits::default(),
            cmd,
        )
        .expect("the lapsed hold makes room");
        let new_hold = RoomNightEvent::RoomsHeld {
            reservation_id: res(2),
            rooms: 1,
            expires_at: at(35),
        };
        assert_eq!(
            decision.nights,
            vec![
                (
                    key(11),
                    vec![
                        RoomNightEvent::HoldLapsed {
                            reservation_id: res(1),
                            rooms: 1,
                            expired_at: at(15),
                        },
                        new_hold.clone(),
                    ]
                ),
                (key(12), vec![new_hold]),
            ]
        );
    }

    // --- cancel -------------------------------------------------------------------------

    #[test]
    fn cancelling_a_held_stay_releases_every_night() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 13, 2), &mut nights);
        let decision = cancel(
            &reservation,
            &nights,
            at(5),
            "plans".into(),
            CancelledBy::Guest,
            "UTC",
        )
        .expect("cancellable");
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::ReservationCancelled {
                cancelled_at: at(5),
                reason: "plans".into(),
                by: CancelledBy::Guest,
                refund_cents: 0,
            }]
        );
        assert_eq!(
            decision.nights,
            (10..13)
                .map(|d| (key(d), vec![rooms_released(1, 2, false)]))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn cancelling_a_confirmed_stay_releases_every_confirmed_night() {
        let mut nights = four_nights(3);
        let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
        let decision = cancel(
            &reservation,
            &nights,
            at(600),
            "closed".into(),
            CancelledBy::Hotel,
            "UTC",
        )
        .expect("cancellable");
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![rooms_released(1, 1, true)]),
                (key(11), vec![rooms_released(1, 1, true)]),
            ]
        );
        apply(&decision, &mut reservation, &mut nights);
        for night in nights.values() {
            assert_eq!(
                (night.confirmed(), night.held(), night.remaining()),
                (0, 0, 3)
            );
        }
    }

    #[test]
    fn cancelling_twice_is_invalid_state_and_releases_nothing() {
        let mut nights = four_nights(3);
        let mut reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        let first = cancel(
            &reservation,
            &nights,
            at(5),
            "plans".into(),
            CancelledBy::Guest,
            "UTC",
        )
        .expect("cancellable");
        apply(&first, &mut reservation, &mut nights);
        // Someone else takes the freed rooms; a second cancel must not free theirs.
        held(hold_cmd(2, 10, 12, 3), &mut nights);
        let second = cancel(
            &reservation,
            &nights,
            at(6),
            "plans".into(),
            CancelledBy::Guest,
            "UTC",
        );
        assert_eq!(
            second,
            Err(Rejection::InvalidState {
                status: ReservationStatus::Cancelled
            })
        );
    }

    #[test]
    fn cancelling_a_lapsed_hold_is_invalid_state_expired() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        assert_eq!(
            cancel(
                &reservation,
                &nights,
                at(15),
                "late".into(),
                CancelledBy::Guest,
                "UTC"
            ),
            Err(Rejection::InvalidState {
                status: ReservationStatus::Expired
            })
        );
    }

    #[test]
    fn cancelling_an_unknown_reservation_is_not_found() {
        assert_eq!(
            cancel(
                &Reservation::default(),
                &four_nights(1),
                at(0),
                "?".into(),
                CancelledBy::Guest,
                "UTC"
            ),
            Err(Rejection::ReservationNotFound)
        );
    }

    // --- confirm ------------------------------------------------------------------------

    #[test]
    fn confirming_a_live_hold_confirms_every_night() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision = confirm(&reservation, &nights, at(14)).expect("the hold is live");
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::ReservationConfirmed {
                confirmed_at: at(14),
                payment: None,
            }]
        );
        let hold_confirmed = RoomNightEvent::HoldConfirmed {
            reservation_id: res(1),
            rooms: 2,
        };
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![hold_confirmed.clone()]),
                (key(11), vec![hold_confirmed]),
            ]
        );
    }

    #[test]
    fn confirming_twice_decides_nothing() {
        let mut nights = four_nights(3);
        let reservation = confirmed(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision = confirm(&reservation, &nights, at(30)).expect("idempotent");
        assert!(decision.is_empty());
    }

    #[test]
    fn confirming_a_lapsed_hold_is_hold_expired() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        assert_eq!(
            confirm(&reservation, &nights, at(15)),
            Err(Rejection::HoldExpired { expired_at: at(15) })
        );
    }

    #[test]
    fn confirming_when_a_night_has_lost_the_hold_refuses_the_whole_confirmation() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let mut broken = nights.clone();
        broken
            .get_mut(&day(11))
            .expect("night exists")
            .apply_event(&rooms_released(1, 2, false));
        assert_eq!(
            confirm(&reservation, &broken, at(5)),
            Err(Rejection::HoldExpired { expired_at: at(15) })
        );
    }

    #[test]
    fn confirming_a_cancelled_reservation_is_invalid_state() {
        let mut nights = four_nights(3);
        let mut reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision = cancel(
            &reservation,
            &nights,
            at(1),
            "x".into(),
            CancelledBy::Guest,
            "UTC",
        )
        .expect("cancellable");
        apply(&decision, &mut reservation, &mut nights);
        assert_eq!(
            confirm(&reservation, &nights, at(2)),
            Err(Rejection::InvalidState {
                status: ReservationStatus::Cancelled
            })
        );
    }

    #[test]
    fn confirming_an_unknown_reservation_is_not_found() {
        assert_eq!(
            confirm(&Reservation::default(), &four_nights(1), at(0)),
            Err(Rejection::ReservationNotFound)
        );
    }

    // --- expire_hold --------------------------------------------------------------------

    #[test]
    fn expiring_a_lapsed_hold_drops_it_from_the_nights_that_still_carry_it() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        // Another stay on the 11th already dropped the lapsed hold there.
        let mut late = hold_cmd(2, 11, 12, 1);
        late.now = at(20);
        late.hold_expires_at = at(35);
        held(late, &mut nights);
        assert_eq!(nights[&day(11)].hold_of(&res(1)), None);

        let decision = expire_hold(&reservation, &nights, at(30)).expect("lapsed");
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::HoldExpired { expired_at: at(15) }]
        );
        assert_eq!(
            decision.nights,
            vec![(
                key(10),
                vec![RoomNightEvent::HoldLapsed {
                    reservation_id: res(1),
                    rooms: 1,
                    expired_at: at(15),
                }]
            )]
        );
    }

    #[test]
    fn expiring_a_live_hold_is_hold_still_live() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        assert_eq!(
            expire_hold(&reservation, &nights, at(14)),
            Err(Rejection::HoldStillLive)
        );
    }

    #[test]
    fn expiring_twice_decides_nothing() {
        let mut nights = four_nights(3);
        let mut reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        let decision = expire_hold(&reservation, &nights, at(20)).expect("lapsed");
        apply(&decision, &mut reservation, &mut nights);
        let again = expire_hold(&reservation, &nights, at(25)).expect("idempotent");
        assert!(again.is_empty());
    }

    #[test]
    fn expiring_a_confirmed_reservation_is_invalid_state() {
        let mut nights = four_nights(3);
        let reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
        assert_eq!(
            expire_hold(&reservation, &nights, at(60)),
            Err(Rejection::InvalidState {
                status: ReservationStatus::Confirmed
            })
        );
    }

    #[test]
    fn expiring_an_unknown_reservation_is_not_found() {
        assert_eq!(
            expire_hold(&Reservation::default(), &four_nights(1), at(60)),
            Err(Rejection::ReservationNotFound)
        );
    }

    // --- change_dates -------------------------------------------------------------------

    fn change(
        reservation: &Reservation,
        nights: &Nights,
        new_stay: StayDates,
        expected: Option<i64>,
        now: DateTime<Utc>,
    ) -> Result<Decision, Rejection> {
        change_dates(
            &hotel(),
            reservation,
            nights,
            &BookingLimits::default(),
            new_stay,
            expected,
            now,
        )
    }

    #[test]
    fn changing_the_dates_of_a_hold_releases_old_nights_holds_new_ones_and_leaves_the_overlap() {
        let mut nights = four_nights(2);
        let reservation = held(hold_cmd(1, 10, 13, 2), &mut nights);
        let decision = change(&reservation, &nights, stay(11, 14), None, at(5)).expect("movable");
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![rooms_released(1, 2, false)]),
                (key(13), vec![rooms_held(1, 2)]),
            ]
        );
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::DatesChanged {
                stay: stay(11, 14),
                total_cents: 2 * (12_000 + 14_000 + 16_000),
                changed_at: at(5),
            }]
        );
    }

    #[test]
    fn a_confirmed_reservation_moves_with_rooms_booked() {
        let mut nights = four_nights(1);
        let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
        let decision = change(&reservation, &nights, stay(11, 13), None, at(60)).expect("movable");
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![rooms_released(1, 1, true)]),
                (
                    key(12),
                    vec![RoomNightEvent::RoomsBooked {
                        reservation_id: res(1),
                        rooms: 1,
                    }]
                ),
            ]
        );
        apply(&decision, &mut reservation, &mut nights);
        assert_eq!(nights[&day(10)].remaining(), 1);
        assert_eq!(nights[&day(11)].confirmed_for(&res(1)), Some(1));
        assert_eq!(nights[&day(12)].confirmed_for(&res(1)), Some(1));
        assert_eq!(
            reservation.details().map(|d| (d.stay, d.total_cents)),
            Some((stay(11, 13), 26_000))
        );
        assert_eq!(
            reservation.recorded_status(),
            Some(ReservationStatus::Confirmed)
        );
    }

    #[test]
    fn moving_onto_a_sold_out_night_is_refused_naming_it() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        held(hold_cmd(2, 13, 14, 1), &mut nights);
        assert_eq!(
            change(&reservation, &nights, stay(11, 14), None, at(5)),
            Err(Rejection::SoldOut { night: day(13) })
        );
    }

    #[test]
    fn moving_onto_a_night_without_inventory_is_refused_naming_it() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 12, 14, 1), &mut nights);
        assert_eq!(
            change(&reservation, &nights, stay(13, 15), None, at(5)),
            Err(Rejection::SoldOut { night: day(14) })
        );
    }

    #[test]
    fn moving_with_a_stale_expected_total_is_price_changed() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        assert_eq!(
            change(&reservation, &nights, stay(11, 13), Some(22_000), at(5)),
            Err(Rejection::PriceChanged {
                total_cents: 26_000
            })
        );
        assert!(change(&reservation, &nights, stay(11, 13), Some(26_000), at(5)).is_ok());
    }

    #[test]
    fn moving_to_the_same_dates_is_invalid() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        assert_eq!(
            invalid_field(change(&reservation, &nights, stay(10, 12), None, at(5))),
            "end_date"
        );
    }

    #[test]
    fn moving_a_lapsed_hold_is_hold_expired() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        assert_eq!(
            change(&reservation, &nights, stay(11, 13), None, at(15)),
            Err(Rejection::HoldExpired { expired_at: at(15) })
        );
    }

    #[test]
    fn moving_a_cancelled_reservation_is_invalid_state() {
        let mut nights = four_nights(1);
        let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
        let decision = cancel(
            &reservation,
            &nights,
            at(2),
            "x".into(),
            CancelledBy::Hotel,
            "UTC",
        )
        .expect("cancellable");
        apply(&decision, &mut reservation, &mut nights);
        assert_eq!(
            change(&reservation, &nights, stay(11, 13), None, at(3)),
            Err(Rejection::InvalidState {
                status: ReservationStatus::Cancelled
            })
        );
    }

    #[test]
    fn moving_outside_the_booking_limits_is_invalid() {
        let mut nights = four_nights(1);
        let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
        let long = StayDates::parse(day(10), day(10) + chrono::Days::new(31)).expect("valid");
        assert_eq!(
            invalid_field(change(&reservation, &nights, long, None, at(5))),
            "end_date"
        );
        let past = StayDates::parse(
            NaiveDate::from_ymd_opt(2027, 5, 31).expect("valid date"),
            day(11),
        )
        .expect("valid");
        assert_eq!(
            invalid_field(change(&reservation, &nights, past, None, at(5))),
            "start_date"
        );
    }

    #[test]
    fn moving_an_unknown_reservation_is_not_found() {
        assert_eq!(
            change(
                &Reservation::default(),
                &four_nights(1),
                stay(10, 11),
                None,
                at(0)
            ),
            Err(Rejection::ReservationNotFound)
        );
    }

    // --- set_inventory ------------------------------------------------------------------

    fn update(total: i64, allowance: Option<i64>, rate: Option<i64>) -> InventoryUpdate {
        InventoryUpdate {
            total_rooms: total,
            overbooking_allowance: allowance,
            rate_cents: rate,
        }
    }

    fn set(
        nights: &Nights,
        range: StayDates,
        update: InventoryUpdate,
    ) -> Result<Decision, Rejection> {
        set_inventory(&hotel(), nights, hotel_id(), king(), range, update, at(0))
    }

    fn inventory_set(
        d: u32,
        total: u32,
        allowance: u32,
        rate: i64,
    ) -> (RoomNightKey, Vec<RoomNightEvent>) {
        (
            key(d),
            vec![RoomNightEvent::InventorySet {
                key: key(d),
                total_rooms: total,
                overbooking_allowance: allowance,
                rate_cents: rate,
            }],
        )
    }

    #[test]
    fn setting_inventory_on_new_nights_puts_every_night_of_the_range_on_sale() {
        let decision =
            set(&Nights::new(), stay(10, 12), update(5, None, Some(9_000))).expect("valid update");
        assert!(decision.reservation.is_empty());
        assert_eq!(
            decision.nights,
            vec![
                inventory_set(10, 5, 0, 9_000),
                inventory_set(11, 5, 0, 9_000)
            ]
        );
    }

    #[test]
    fn omitting_the_rate_for_a_night_without_inventory_is_invalid() {
        let nights = nights(&[(10, 5, 0, 9_000)]);
        match set(&nights, stay(10, 12), update(5, None, None)) {
            Err(Rejection::Invalid(InvalidInputRejection { field, message })) => {
                assert_eq!(field, "rate_cents");
                assert!(message.contains("2027-06-11"), "{message}");
            }
            other => panic!("expected invalid rate_cents, got {other:?}"),
        }
    }

    #[test]
    fn omitted_allowance_and_rate_keep_the_current_values() {
        let nights = nights(&[(10, 5, 2, 9_000), (11, 5, 1, 11_000)]);
        let decision = set(&nights, stay(10, 12), update(8, None, None)).expect("valid update");
        assert_eq!(
            decision.nights,
            vec![
                inventory_set(10, 8, 2, 9_000),
                inventory_set(11, 8, 1, 11_000)
            ]
        );
        let decision =
            set(&nights, stay(10, 12), update(8, Some(0), Some(10_000))).expect("valid update");
        assert_eq!(
            decision.nights,
            vec![
                inventory_set(10, 8, 0, 10_000),
                inventory_set(11, 8, 0, 10_000)
            ]
        );
    }

    #[test]
    fn setting_unchanged_inventory_decides_nothing() {
        let nights = nights(&[(10, 5, 2, 9_000)]);
        let decision = set(&nights, stay(10, 11), update(5, None, None)).expect("valid update");
        assert!(decision.is_empty());
    }

    #[test]
    fn setting_inventory_below_what_is_sold_names_the_night_and_changes_no_night() {
        let mut nights = four_nights(3);
        held(hold_cmd(1, 11, 12, 2), &mut nights);
        confirmed(hold_cmd(2, 12, 13, 1), &mut nights);
        assert_eq!(
            set(&nights, stay(10, 14), update(1, None, None)),
            Err(Rejection::InventoryBelowReserved {
                night: day(11),
                reserved: 2
            })
        );
        let decision = set(&nights, stay(10, 14), update(2, None, None)).expect("fits");
        assert_eq!(decision.nights.len(), 4);
    }

    #[test]
    fn lapsed_holds_do_not_count_as_sold_when_lowering_inventory() {
        let mut nights = four_nights(3);
        held(hold_cmd(1, 11, 12, 2), &mut nights);
        let decision = set_inventory(
            &hotel(),
            &nights,
            hotel_id(),
            king(),
            stay(11, 12),
            update(0, None, None),
            at(15),
        )
        .expect("the lapsed hold does not count");
        assert_eq!(
            decision.nights,
            vec![(
                key(11),
                vec![
                    RoomNightEvent::HoldLapsed {
                        reservation_id: res(1),
                        rooms: 2,
                        expired_at: at(15),
                    },
                    RoomNightEvent::InventorySet {
                        key: key(11),
                        total_rooms: 0,
                        overbooking_allowance: 0,
                        rate_cents: 12_000,
                    },
                ]
            )]
        );
    }

    #[test]
    fn out_of_range_inventory_values_are_invalid() {
        let nights = four_nights(3);
        assert_eq!(
            invalid_field(set(&nights, stay(10, 11), update(-1, None, None))),
            "total_rooms"
        );
        assert_eq!(
            invalid_field(set(&nights, stay(10, 11), update(1, Some(-1), None))),
            "overbooking_allowance"
        );
        assert_eq!(
            invalid_field(set(&nights, stay(10, 11), update(1, None, Some(-5)))),
            "rate_cents"
        );
    }

    #[test]
    fn setting_inventory_of_an_unknown_hotel_or_room_type_is_refused() {
        let range = stay(10, 11);
        let up = update(1, None, Some(1));
        assert_eq!(
            set_inventory(
                &Hotel::default(),
                &Nights::new(),
                hotel_id(),
                king(),
                range,
                up,
                at(0)
            ),
            Err(Rejection::UnknownHotel)
        );
        let other_type = RoomTypeId::parse(9).expect("valid id");
        assert_eq!(
            set_inventory(
                &hotel(),
                &Nights::new(),
                hotel_id(),
                other_type,
                range,
                up,
                at(0)
            ),
            Err(Rejection::UnknownRoomType)
        );
    }

    // --- Rejection ----------------------------------------------------------------------

    #[test]
    fn reservation_errors_map_to_rejections() {
        assert_eq!(
            Rejection::from(ReservationError::NotFound),
            Rejection::ReservationNotFound
        );
        assert_eq!(
            Rejection::from(ReservationError::AlreadyExists),
            Rejection::ReservationExists
        );
        assert_eq!(
            Rejection::from(ReservationError::HoldStillLive),
            Rejection::HoldStillLive
        );
        assert_eq!(
            invalid_field(Err(ReservationError::SameDates.into())),
            "end_date"
        );
    }

    #[test]
    fn rejections_survive_a_json_round_trip() {
        let rejections = [
            Rejection::SoldOut { night: day(11) },
            Rejection::PriceChanged { total_cents: 1 },
            Rejection::InvalidState {
                status: ReservationStatus::Cancelled,
            },
            InvalidInput::new("rooms", "too many").into(),
        ];
        for rejection in rejections {
            let json = serde_json::to_string(&rejection).expect("serializes");
            let back: Rejection = serde_json::from_str(&json).expect("deserializes");
            assert_eq!(back, rejection);
        }
        assert_eq!(
            serde_json::to_value(Rejection::SoldOut { night: day(11) }).expect("serializes"),
            serde_json::json!({"error": "sold_out", "night": "2027-06-11"})
        );
    }
    // --- payments and refunds -----------------------------------------------------------

    fn card(txn: &str, amount_cents: i64) -> Payment {
        Payment {
            provider_txn_id: txn.to_owned(),
            amount_cents,
        }
    }

    /// Held for nights 10..12 (2 rooms: 2 x (100 + 120) euros) and paid with `txn_1`.
    fn paid(nights: &mut Nights) -> Reservation {
        let mut reservation = held(hold_cmd(1, 10, 12, 2), nights);
        let decision = apply_authorization(&reservation, nights, at(5), card("txn_1", 44_000))
            .expect("a live hold takes the payment");
        apply(&decision, &mut reservation, nights);
        reservation
    }

    /// 2027-06-10 15:00 in Lisbon (summer time, UTC+1) is 14:00 UTC.
    fn hours_before_check_in(hours: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 6, 10, 14, 0, 0)
            .single()
            .expect("valid time")
            - chrono::Duration::hours(hours)
    }

    #[test]
    fn check_in_is_three_in_the_afternoon_at_the_hotel() {
        assert_eq!(
            check_in_instant(day(10), "Europe/Lisbon"),
            hours_before_check_in(0)
        );
        assert_eq!(
            check_in_instant(day(10), "Asia/Tokyo"),
            Utc.with_ymd_and_hms(2027, 6, 10, 6, 0, 0)
                .single()
                .expect("valid")
        );
    }

    #[test]
    fn a_guest_cancelling_72_hours_or_more_before_check_in_gets_everything_back() {
        let by = CancelledBy::Guest;
        let tz = "Europe/Lisbon";
        assert_eq!(
            refund_cents(44_000, day(10), tz, hours_before_check_in(72), by),
            44_000
        );
        assert_eq!(
            refund_cents(44_000, day(10), tz, hours_before_check_in(500), by),
            44_000
        );
    }

    #[test]
    fn a_guest_cancelling_between_24_and_72_hours_before_gets_half_rounded_down() {
        let by = CancelledBy::Guest;
        let tz = "Europe/Lisbon";
        let just_under_72 = hours_before_check_in(72) + chrono::Duration::seconds(1);
        assert_eq!(refund_cents(44_001, day(10), tz, just_under_72, by), 22_000);
        assert_eq!(
            refund_cents(44_000, day(10), tz, hours_before_check_in(24), by),
            22_000
        );
    }

    #[test]
    fn a_guest_cancelling_less_than_24_hours_before_gets_nothing_back() {
        let by = CancelledBy::Guest;
        let tz = "Europe/Lisbon";
        let just_under_24 = hours_before_check_in(24) + chrono::Duration::seconds(1);
        assert_eq!(refund_cents(44_000, day(10), tz, just_under_24, by), 0);
        assert_eq!(
            refund_cents(44_000, day(10), tz, hours_before_check_in(-5), by),
            0
        );
    }

    #[test]
    fn the_policy_counts_hours_in_the_hotels_timezone() {
        // 73 hours before 15:00 in Lisbon is only 64 hours before 15:00 in Tokyo.
        let now = hours_before_check_in(73);
        assert_eq!(
            refund_cents(100, day(10), "Europe/Lisbon", now, CancelledBy::Guest),
            100
        );
        assert_eq!(
            refund_cents(100, day(10), "Asia/Tokyo", now, CancelledBy::Guest),
            50
        );
    }

    #[test]
    fn a_hotel_cancelling_gives_everything_back_even_at_the_last_minute() {
        let now = hours_before_check_in(1);
        assert_eq!(
            refund_cents(44_000, day(10), "UTC", now, CancelledBy::Hotel),
            44_000
        );
        assert_eq!(refund_cents(0, day(10), "UTC", now, CancelledBy::Hotel), 0);
    }

    #[test]
    fn cancelling_a_paid_stay_refunds_by_the_policy_and_releases_its_nights() {
        let mut nights = four_nights(3);
        let reservation = paid(&mut nights);
        let decision = cancel(
            &reservation,
            &nights,
            hours_before_check_in(30),
            "plans".into(),
            CancelledBy::Guest,
            "Europe/Lisbon",
        )
        .expect("cancellable");
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::ReservationCancelled {
                cancelled_at: hours_before_check_in(30),
                reason: "plans".into(),
                by: CancelledBy::Guest,
                refund_cents: 22_000,
            }]
        );
        assert_eq!(decision.nights.len(), 2);
    }

    #[test]
    fn cancelling_an_unpaid_hold_refunds_nothing() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision = cancel(
            &reservation,
            &nights,
            at(1),
            "plans".into(),
            CancelledBy::Hotel,
            "Europe/Lisbon",
        )
        .expect("cancellable");
        assert!(matches!(
            decision.reservation.as_slice(),
            [ReservationEvent::ReservationCancelled {
                refund_cents: 0,
                ..
            }]
        ));
    }

    #[test]
    fn an_authorization_for_a_live_hold_confirms_every_night() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision = apply_authorization(&reservation, &nights, at(5), card("txn_1", 44_000))
            .expect("a live hold takes the payment");
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::ReservationConfirmed {
                confirmed_at: at(5),
                payment: Some(card("txn_1", 44_000)),
            }]
        );
        let hold_confirmed = RoomNightEvent::HoldConfirmed {
            reservation_id: res(1),
            rooms: 2,
        };
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![hold_confirmed.clone()]),
                (key(11), vec![hold_confirmed]),
            ]
        );
    }

    #[test]
    fn an_authorization_after_the_hold_lapsed_releases_the_nights_and_is_refunded() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision = apply_authorization(&reservation, &nights, at(16), card("txn_1", 44_000))
            .expect("decided");
        assert_eq!(
            decision.reservation,
            vec![
                ReservationEvent::HoldExpired { expired_at: at(15) },
                ReservationEvent::LatePaymentRefunded {
                    provider_txn_id: "txn_1".into(),
                    amount_cents: 44_000,
                    refunded_at: at(16),
                },
            ]
        );
        let lapsed = RoomNightEvent::HoldLapsed {
            reservation_id: res(1),
            rooms: 2,
            expired_at: at(15),
        };
        assert_eq!(
            decision.nights,
            vec![(key(10), vec![lapsed.clone()]), (key(11), vec![lapsed])]
        );
    }

    #[test]
    fn an_authorization_after_a_cancellation_touches_no_night() {
        let mut nights = four_nights(3);
        let mut reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let cancelled = cancel(
            &reservation,
            &nights,
            at(2),
            "x".into(),
            CancelledBy::Guest,
            "UTC",
        )
        .expect("cancellable");
        apply(&cancelled, &mut reservation, &mut nights);
        let decision = apply_authorization(&reservation, &nights, at(3), card("txn_1", 44_000))
            .expect("decided");
        assert!(decision.nights.is_empty());
        assert!(matches!(
            decision.reservation.as_slice(),
            [ReservationEvent::LatePaymentRefunded { .. }]
        ));
    }

    #[test]
    fn the_same_authorization_again_decides_nothing() {
        let mut nights = four_nights(3);
        let reservation = paid(&mut nights);
        let decision = apply_authorization(&reservation, &nights, at(6), card("txn_1", 44_000))
            .expect("decided");
        assert!(decision.is_empty());
    }

    #[test]
    fn a_declined_card_releases_every_held_night() {
        let mut nights = four_nights(3);
        let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
        let decision =
            decline_payment(&reservation, &nights, at(5), Some("txn_1".into())).expect("decided");
        assert_eq!(
            decision.reservation,
            vec![ReservationEvent::PaymentDeclined {
                declined_at: at(5),
                provider_txn_id: Some("txn_1".into()),
            }]
        );
        assert_eq!(
            decision.nights,
            vec![
                (key(10), vec![rooms_released(1, 2, false)]),
                (key(11), vec![rooms_released(1, 2, false)]),
            ]
        );
    }

    #[test]
    fn a_decline_after_payment_decides_nothing() {
        let mut nights = four_nights(3);
        let reservation = paid(&mut nights);
        let decision =
            decline_payment(&reservation, &nights, at(6), Some("txn_1".into())).expect("decided");
        assert!(decision.is_empty());
    }
}
