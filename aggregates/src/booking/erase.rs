//! Erasing a reservation's personal data: the reservation records it, and no night
//! changes (the stay, its status and its money are untouched).

use chrono::{DateTime, Utc};

use super::{Decision, Rejection};
use crate::reservation::{Reservation, ReservationCommand};

/// Record that the guest of `reservation` was erased (nothing when it already was).
pub fn erase_guest(reservation: &Reservation, now: DateTime<Utc>) -> Result<Decision, Rejection> {
    Ok(Decision {
        reservation: reservation.decide(ReservationCommand::EraseGuest { now })?,
        nights: Vec::new(),
    })
}
