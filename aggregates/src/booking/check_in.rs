//! Checking a guest in (the stay goes on, its nights stay taken) and out (the nights
//! after the day they leave go back to sale).

use chrono::{DateTime, Utc};

use super::nights::{decide_nights, RoomType};
use super::{existing, Decision, Nights, Rejection};
use crate::reservation::{Reservation, ReservationCommand, ReservationEvent};
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
    nights: &Nights,
    now: DateTime<Utc>,
    timezone: TimeZone,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let events = reservation.decide(ReservationCommand::CheckOut {
        now,
        today: local_date(now, timezone),
    })?;
    let released_from = events.iter().find_map(|e| match e {
        ReservationEvent::GuestCheckedOut { released_from, .. } => Some(*released_from),
        _ => None,
    });
    let mut decision = Decision {
        reservation: events,
        nights: Vec::new(),
    };
    if let Some(from) = released_from {
        let reservation_id = details.reservation_id;
        decide_nights(
            &mut decision,
            RoomType::of(details),
            nights,
            details.stay.nights().filter(|night| *night >= from),
            |_, _| Ok(Some(RoomNightCommand::Release { reservation_id })),
        )?;
    }
    Ok(decision)
}
