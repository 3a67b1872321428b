//! Recording that a hold lapsed.

use chrono::{DateTime, Utc};

use super::nights::expire_every_night;
use super::{existing, Decision, Rejection, StayNights};
use crate::reservation::{Reservation, ReservationCommand};

/// Record that a hold lapsed and drop it from every night that still carries it.
pub fn expire_hold(
    reservation: &Reservation,
    nights: &StayNights<'_>,
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
