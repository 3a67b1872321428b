//! Cancelling a stay, and the refund policy it follows.

use chrono::{DateTime, NaiveDate, Utc};

use super::nights::release_every_night;
use super::{existing, Decision, Rejection, StayNights};
use crate::cancellation::CancellationPolicy;
use crate::cancellation::CancelledBy;
use crate::reservation::{Reservation, ReservationCommand};
use crate::types::{local_date, Cents, TimeZone};

/// The hour guests check in, local time at the hotel; the refund policy counts hours
/// before it.
pub const CHECK_IN_HOUR: u32 = 15;

/// How much of `paid` a cancellation gives back, by the house policy
/// ([`CancellationPolicy::HOUSE`]): all of it when the hotel cancels; when the guest
/// does, 100% at 72 hours or more before check-in (15:00 on the first night, in the
/// hotel's timezone), 50% (rounded down) at 24 hours or more, nothing after.
pub fn refund_cents(
    paid: Cents,
    check_in: NaiveDate,
    timezone: TimeZone,
    now: DateTime<Utc>,
    by: CancelledBy,
) -> Cents {
    let lead = check_in_instant(check_in, timezone) - now;
    CancellationPolicy::HOUSE.refund(paid, lead, by)
}

/// Check-in as an instant: [`CHECK_IN_HOUR`] on `date` in the hotel's timezone. In a
/// daylight-saving fold the earlier reading counts, in a gap the hour after.
pub fn check_in_instant(date: NaiveDate, timezone: TimeZone) -> DateTime<Utc> {
    use chrono::TimeZone as _;
    let local =
        date.and_time(chrono::NaiveTime::MIN) + chrono::Duration::hours(CHECK_IN_HOUR.into());
    let tz = timezone.tz();
    match tz.from_local_datetime(&local) {
        chrono::LocalResult::Single(t) => t.with_timezone(&Utc),
        chrono::LocalResult::Ambiguous(early, _) => early.with_timezone(&Utc),
        // In a gap the wall-clock hour does not exist: read it an hour later.
        chrono::LocalResult::None => tz
            .from_local_datetime(&(local + chrono::Duration::hours(1)))
            .earliest()
            .map_or_else(|| local.and_utc(), |t| t.with_timezone(&Utc)),
    }
}

/// Cancel a held or confirmed reservation whose arrival date has not ended at the hotel
/// (in its timezone) and give every night back; the refund follows
/// the cancellation policy the stay was sold under (the house policy, as
/// [`refund_cents`] states it, for a stay sold at the base rate), from what the guest is
/// charged (nothing for a hold): an authorization not yet captured is voided, or
/// captured for the share the hotel keeps; a captured one is refunded the policy's
/// share. After a date change a guest's share is capped (see `Reservation`).
/// The status guards the release: cancelling twice is refused and releases nothing.
pub fn cancel(
    reservation: &Reservation,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
    reason: String,
    by: CancelledBy,
    timezone: TimeZone,
) -> Result<Decision, Rejection> {
    let details = existing(reservation)?;
    let lead = check_in_instant(details.stay.start(), timezone) - now;
    // Each line by the policy it was sold under.
    let refund_percents = details
        .lines()
        .iter()
        .map(|line| line.cancellation_policy.refund_percent(lead, by))
        .collect();
    let mut decision = Decision {
        reservation: reservation.decide(ReservationCommand::Cancel {
            now,
            today: local_date(now, timezone),
            reason,
            by,
            refund_percents,
        })?,
        nights: Vec::new(),
    };
    release_every_night(&mut decision, details, nights)?;
    Ok(decision)
}
