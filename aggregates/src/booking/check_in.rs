//! Checking a guest in: the stay goes on, its nights stay taken.

use chrono::{DateTime, Utc};

use super::{Decision, Rejection};
use crate::reservation::{Reservation, ReservationCommand};
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
