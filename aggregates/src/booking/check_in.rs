//! Checking a guest in (the stay goes on, its nights stay taken) and out (the nights
//! after the day they leave go back to sale), and a guest who never came (every night
//! after the first goes back to sale).

use chrono::{DateTime, Utc};

use super::nights::each_line;
use super::{existing, Decision, Rejection, StayNights};
use crate::reservation::{Reservation, ReservationCommand, ReservationEvent, ReservationStatus};
use crate::room_night::RoomNightCommand;
use crate::types::{local_date, TimeZone};

/// Check in a confirmed stay on a day from its arrival to the day before its departure,
/// as dated at the hotel (`timezone`). Nothing changes on its nights: they were sold
/// and stay sold.
pub fn check_in(
    reservation: &Reservation,
    now: DateTime<Utc>,
    timezone: TimeZone,
) -> Result<Decision, Rejection> {
    Ok(Decision {
        reservation: reservation.decide(ReservationCommand::CheckIn {
            now,
            today: local_date(now, timezone),
        })?,
        nights: Vec::new(),
    })
}

/// Check out a checked-in stay on the day the guest leaves, as dated at the hotel: the
/// stay's nights after that day go back to sale (none on the last night or later).
pub fn check_out(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
    timezone: TimeZone,
) -> Result<Decision, Rejection> {
    let events = reservation.decide(ReservationCommand::CheckOut {
        now,
        today: local_date(now, timezone),
    })?;
    release_from(reservation, nights, events)
}

/// Record that the guest of a confirmed stay never came, on or after its arrival date
/// at the hotel: the first night stays sold (its price is the fee), every night after
/// it goes back to sale.
pub fn record_no_show(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
    timezone: TimeZone,
) -> Result<Decision, Rejection> {
    let events = reservation.decide(ReservationCommand::RecordNoShow {
        now,
        today: local_date(now, timezone),
    })?;
    release_from(reservation, nights, events)
}

/// The no-show worker: a confirmed stay whose guest was not checked in once its arrival
/// date has ended at the hotel, `grace` after midnight there, is recorded a no-show (as
/// [`record_no_show`]); anything else is left as it is (an empty decision).
pub fn record_lapsed_no_show(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
    timezone: TimeZone,
    grace: chrono::Duration,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let lapsed = reservation.recorded_status() == Some(ReservationStatus::Confirmed)
        && local_date(now - grace, timezone) > details.stay.start();
    if !lapsed {
        return Ok(Decision::default());
    }
    record_no_show(reservation, nights, now, timezone)
}

/// The decision of `events`, with the stay's nights from the first their check-out or
/// no-show releases given back.
fn release_from(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    events: Vec<ReservationEvent>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let released_from = events.iter().find_map(|e| match e {
        ReservationEvent::GuestCheckedOut { released_from, .. }
        | ReservationEvent::NoShowRecorded { released_from, .. } => Some(*released_from),
        _ => None,
    });
    let mut decision = Decision {
        reservation: events,
        nights: Vec::new(),
    };
    if let Some(from) = released_from {
        let reservation_id = details.reservation_id;
        each_line(
            &mut decision,
            details,
            nights,
            details.stay.nights().filter(|night| *night >= from),
            |_, _| Ok(Some(RoomNightCommand::Release { reservation_id })),
        )?;
    }
    Ok(decision)
}
