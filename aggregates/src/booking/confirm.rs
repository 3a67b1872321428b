//! Confirming a held stay — by staff without a payment, or by the gateway's
//! authorization — and declining one whose card was refused.

use chrono::{DateTime, Utc};

use super::cancel::check_in_instant;
use super::nights::{every_night, expire_every_night, release_every_night};
use super::{existing, Decision, Rejection, StayNights};
use crate::reservation::{
    Payment, Reservation, ReservationCommand, ReservationDetails, ReservationEvent,
};
use crate::room_night::RoomNightCommand;
use crate::types::TimeZone;

/// When the authorization of a stay arriving on `arrival` is to be captured: the last
/// moment its policy refunds in full, or `now` if that has passed or never was.
pub(super) fn capture_due_at(
    details: &ReservationDetails,
    arrival: chrono::NaiveDate,
    timezone: TimeZone,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    // Over several lines, the first deadline of any of them.
    let check_in = check_in_instant(arrival, timezone);
    details
        .lines()
        .iter()
        .map(|line| line.cancellation_policy.full_refund_until(check_in))
        .try_fold(DateTime::<Utc>::MAX_UTC, |earliest, until| {
            until.map(|until| earliest.min(until))
        })
        .map_or(now, |until| until.max(now))
}

/// Capture a paid stay's authorization once its capture is due (the capture worker);
/// nothing if it is not due, already captured, or voided.
pub fn capture_payment(
    reservation: &Reservation,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    Ok(Decision {
        reservation: reservation.decide(ReservationCommand::CapturePayment { now })?,
        nights: Vec::new(),
    })
}

/// Record an increment of the authorization the gateway granted for a date change that
/// then could not be made.
pub fn record_increment(
    reservation: &Reservation,
    now: DateTime<Utc>,
    increment: crate::reservation::Increment,
) -> Result<Decision, Rejection> {
    Ok(Decision {
        reservation: reservation.decide(ReservationCommand::RecordIncrement { now, increment })?,
        nights: Vec::new(),
    })
}

/// Confirm a live hold on every night, without a payment (staff, or tests of the write
/// side); guests confirm through the payment saga, which calls
/// [`apply_authorization`].
pub fn confirm(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let events = reservation.decide(ReservationCommand::Confirm { now })?;
    confirm_nights(reservation, nights, now, events)
}

/// The gateway reported an authorization: confirm a live hold with it, or give it back
/// (the hold lapsed — then the lapse is recorded and the nights released in the same
/// step —, the reservation was cancelled or declined, or another payment already
/// confirmed it). A transaction seen before changes nothing.
///
/// The authorization is captured when a guest's cancellation would stop giving
/// everything back (the policy's `full_refund_hours` before check-in, in the hotel's
/// `timezone`), at once if that moment has passed or the plan is non-refundable.
pub fn apply_authorization(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
    payment: Payment,
    timezone: TimeZone,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let events = reservation.decide(ReservationCommand::ApplyAuthorization {
        now,
        payment,
        capture_due_at: capture_due_at(details, details.stay.start(), timezone, now),
    })?;
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
    nights: &StayNights<'_>,
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
    nights: &StayNights<'_>,
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
    let confirm = RoomNightCommand::Confirm {
        reservation_id: details.reservation_id,
        now,
    };
    every_night(&mut decision, details, nights, confirm).map_err(|e| match e {
        // A night without the hold lapsed with the reservation's hold.
        Rejection::HoldExpired { .. } => Rejection::HoldExpired {
            expired_at: details.hold_expires_at,
        },
        other => other,
    })?;
    Ok(decision)
}
