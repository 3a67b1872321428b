//! Moving a stay to new dates: priced under the stay's plan as it is now, for its
//! guests, and judged against the restrictions in force on the new dates (a stop-sell
//! on a night the stay keeps does not stop it; see [`SaleTerms::check_stay`]).

use chrono::{DateTime, NaiveDate, Utc};

use super::cancel::check_in_instant;
use super::confirm::capture_due_at;
use super::nights::{decide_lines, each_line};
use super::{check_room_type, existing, Decision, Rejection, SaleTerms, StayNights};
use crate::cancellation::CancelledBy;
use crate::hotel::Hotel;
use crate::reservation::{
    Increment, Line, LinePrice, Reservation, ReservationCommand, ReservationDetails,
    ReservationError, ReservationStatus,
};
use crate::room_night::RoomNightCommand;
use crate::types::{local_date, BookingLimits, Cents, RoomCount, StayDates, TimeZone};

/// Move a reservation to `new_stay`; with `expected_total_cents`, refuse unless the new
/// price is exactly that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeDates {
    pub new_stay: StayDates,
    pub expected_total_cents: Option<Cents>,
    pub now: DateTime<Utc>,
}

/// The hotel's timezone and the terms each line moves under (in line order): its own
/// plan, as the plan is now, for its guests.
fn sale_terms_of(
    hotel: &Hotel,
    details: &ReservationDetails,
) -> Result<(TimeZone, Vec<(Line, SaleTerms)>), Rejection> {
    let lines = details.lines();
    let count = lines.len();
    let mut timezone = TimeZone::UTC;
    let mut terms = Vec::with_capacity(count);
    for (i, line) in lines.into_iter().enumerate() {
        let named = |e: Rejection| e.in_line(i, line.room_type_id, count);
        timezone = check_room_type(hotel, details.hotel_id, line.room_type_id).map_err(named)?;
        let line_terms =
            SaleTerms::resolve(hotel, line.room_type_id, line.rate_plan_id, line.guests)
                .map_err(named)?;
        terms.push((line, line_terms));
    }
    Ok((timezone, terms))
}

/// The stay's restrictions on `new_stay` for every line (nights in `kept` are not
/// judged by stop-sells: see [`SaleTerms::check_stay`]).
fn check_lines(
    terms: &[(Line, SaleTerms)],
    nights: &StayNights<'_>,
    new_stay: &StayDates,
    today: NaiveDate,
    kept: impl Fn(NaiveDate) -> bool + Copy,
) -> Result<(), Rejection> {
    let count = terms.len();
    for (i, (line, line_terms)) in terms.iter().enumerate() {
        line_terms
            .check_stay(nights.of(line.room_type_id), new_stay, today, kept)
            .map_err(|e| Rejection::from(e).in_line(i, line.room_type_id, count))?;
    }
    Ok(())
}

/// What the gateway granted toward a dearer move (see [`change_dates`]).
pub type GrantedIncrement = Option<Increment>;

/// Move a held or confirmed stay to new dates: release the nights it leaves and take the
/// nights it enters, all in one decision, or refuse and change nothing. Nights in both
/// stays are untouched. The new price is the sum of the current rates of the new stay.
///
/// A paid stay's money follows (see `Reservation`): a price above what the card covers
/// is refused with [`Rejection::PaymentRequired`] unless `increment` (granted by the
/// gateway under the ledger's next authorization key) covers it; the caller asks the
/// gateway for the shortfall and decides again.
pub fn change_dates(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &StayNights<'_>,
    limits: &BookingLimits,
    cmd: ChangeDates,
    increment: GrantedIncrement,
) -> Result<Decision, Rejection> {
    let ChangeDates {
        new_stay,
        expected_total_cents,
        now,
    } = cmd;
    let details = existing(reservation)?;
    if details.block_code.is_some() {
        return Err(Rejection::BlockDatesFixed);
    }
    let (timezone, terms) = sale_terms_of(hotel, details)?;
    let today = local_date(now, timezone);
    limits.check(
        &new_stay,
        widest_line(&terms).unwrap_or(details.rooms),
        today,
    )?;
    // Each line's new price; `None` if a night of one has no price (sold out).
    let line_prices: Option<Vec<Cents>> = terms
        .iter()
        .map(|(line, t)| t.stay_price(nights.of(line.room_type_id), &new_stay, line.rooms))
        .collect();
    let nightly = line_prices
        .as_ref()
        .map(|prices| Cents::new(prices.iter().map(|c| c.get()).sum()));
    let total_cents = nightly.unwrap_or(Cents::ZERO);
    let first_nights: Vec<Cents> = terms
        .iter()
        .map(|(line, t)| {
            t.first_night_price(nights.of(line.room_type_id), &new_stay, line.rooms)
                .unwrap_or(Cents::ZERO)
        })
        .collect();
    let first_night_cents = Cents::new(first_nights.iter().map(|c| c.get()).sum());
    let line_prices = line_prices.unwrap_or_else(|| vec![Cents::ZERO; terms.len()]);
    let more_line_prices = line_prices
        .into_iter()
        .zip(first_nights)
        .skip(1)
        .map(|(total_cents, first_night_cents)| LinePrice {
            total_cents,
            first_night_cents,
        })
        .collect();
    let lead = check_in_instant(details.stay.start(), timezone) - now;
    let reservation_events = reservation.decide(ReservationCommand::ChangeDates {
        stay: new_stay,
        total_cents,
        first_night_cents,
        more_line_prices,
        now,
        refund_percent_now: details
            .cancellation_policy
            .refund_percent(lead, CancelledBy::Guest),
        // Each line by its own policy.
        more_refund_percents_now: details
            .more_lines
            .iter()
            .map(|line| {
                line.cancellation_policy
                    .refund_percent(lead, CancelledBy::Guest)
            })
            .collect(),
        capture_due_at: capture_due_at(details, new_stay.start(), timezone, now),
        increment,
    });
    // A state that cannot move is refused first; a shortfall only once the nights are
    // known to be there (no card is asked for nights that cannot be had).
    if let Err(e) = &reservation_events {
        if !matches!(e, ReservationError::PaymentRequired { .. }) {
            return Err(e.clone().into());
        }
    }
    let held = reservation.recorded_status() == Some(ReservationStatus::Held);
    let old = details.stay;
    check_lines(&terms, nights, &new_stay, today, |date| old.contains(date))?;
    let mut decision = Decision::default();
    let mut all_nights: Vec<NaiveDate> = old.nights().chain(new_stay.nights()).collect();
    all_nights.sort_unstable();
    all_nights.dedup();
    let reservation_id = details.reservation_id;
    decide_lines(
        &mut decision,
        details.hotel_id,
        terms.iter().map(|(line, _)| line),
        nights,
        all_nights.iter().copied(),
        |line, date, night| {
            Ok(match (old.contains(date), new_stay.contains(date)) {
                (true, false) => Some(RoomNightCommand::Release { reservation_id }),
                (false, true) if held => Some(RoomNightCommand::Hold {
                    reservation_id,
                    rooms: line.rooms,
                    expires_at: details.hold_expires_at,
                    now,
                }),
                // Held for this move while the card was asked (`hold_date_change`):
                // the hold becomes the sale.
                (false, true)
                    if night
                        .hold_of(&reservation_id)
                        .is_some_and(|h| h.expires_at > now) =>
                {
                    Some(RoomNightCommand::Confirm {
                        reservation_id,
                        now,
                    })
                }
                (false, true) => Some(RoomNightCommand::Book {
                    reservation_id,
                    rooms: line.rooms,
                    now,
                }),
                // In both stays (untouched) or in neither.
                _ => None,
            })
        },
    )?;
    if nightly.is_none() {
        return Err(Rejection::SoldOut {
            night: new_stay.start(),
        });
    }
    if expected_total_cents.is_some_and(|expected| expected != total_cents) {
        return Err(Rejection::PriceChanged { total_cents });
    }
    decision.reservation = reservation_events?;
    Ok(decision)
}

/// A dearer move of a confirmed stay is being paid for: hold the nights it enters until
/// `hold_expires_at`, judged as the move itself would be (booking limits, restrictions,
/// rooms left), so the card is asked only for a move that can be made and its nights
/// cannot go meanwhile. A retry while they are held holds nothing more.
pub fn hold_date_change(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &StayNights<'_>,
    limits: &BookingLimits,
    new_stay: StayDates,
    hold_expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    if details.block_code.is_some() {
        return Err(Rejection::BlockDatesFixed);
    }
    let (timezone, terms) = sale_terms_of(hotel, details)?;
    let today = local_date(now, timezone);
    limits.check(
        &new_stay,
        widest_line(&terms).unwrap_or(details.rooms),
        today,
    )?;
    let events = reservation.decide(ReservationCommand::HoldDateChange {
        stay: new_stay,
        hold_expires_at,
        now,
    })?;
    if events.is_empty() {
        return Ok(Decision::default());
    }
    let old = details.stay;
    check_lines(&terms, nights, &new_stay, today, |date| old.contains(date))?;
    let mut decision = Decision {
        reservation: events,
        nights: Vec::new(),
    };
    decide_lines(
        &mut decision,
        details.hotel_id,
        terms.iter().map(|(line, _)| line),
        nights,
        new_stay.nights().filter(|date| !old.contains(*date)),
        |line, _, _| {
            Ok(Some(RoomNightCommand::Hold {
                reservation_id: details.reservation_id,
                rooms: line.rooms,
                expires_at: hold_expires_at,
                now,
            }))
        },
    )?;
    Ok(decision)
}

/// The move being paid for will not happen (the card refused, or the change failed):
/// the nights held for it go back to sale.
pub fn release_date_change(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let pending = reservation.recorded_pending_move();
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::ReleaseDateChange { now })?,
        nights: Vec::new(),
    };
    if let Some(pending) = pending.filter(|_| !decision.reservation.is_empty()) {
        let reservation_id = details.reservation_id;
        each_line(
            &mut decision,
            details,
            nights,
            pending
                .stay
                .nights()
                .filter(|date| !details.stay.contains(*date)),
            |_, night| {
                Ok(night
                    .hold_of(&reservation_id)
                    .map(|_| RoomNightCommand::Release { reservation_id }))
            },
        )?;
    }
    Ok(decision)
}

/// The most rooms of one line: the booking limit on rooms is each line's.
fn widest_line(terms: &[(Line, SaleTerms)]) -> Option<RoomCount> {
    terms
        .iter()
        .map(|(line, _)| line.rooms)
        .max_by_key(|rooms| rooms.get())
}
