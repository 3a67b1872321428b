//! Refunds by policy at the edges of their windows, by whoever cancels, and policies
//! refused when they make no sense.

use chrono::Duration;

use super::*;

fn cents(c: i64) -> Cents {
    Cents::new(c)
}

const FLEXIBLE: CancellationPolicy = CancellationPolicy::Refundable {
    full_refund_hours: 48,
    partial_refund_hours: 12,
    partial_refund_percent: 30,
};

#[test]
fn the_house_policy_gives_all_back_at_72_hours_half_at_24_and_nothing_after() {
    let house = CancellationPolicy::HOUSE;
    let paid = cents(54_001);
    let by = CancelledBy::Guest;
    assert_eq!(house.refund(paid, Duration::hours(72), by), paid);
    assert_eq!(
        house.refund(paid, Duration::hours(72) - Duration::seconds(1), by),
        cents(27_000)
    );
    assert_eq!(house.refund(paid, Duration::hours(24), by), cents(27_000));
    assert_eq!(
        house.refund(paid, Duration::hours(24) - Duration::seconds(1), by),
        Cents::ZERO
    );
}

#[test]
fn a_refundable_policy_refunds_by_its_own_windows_and_percent() {
    let by = CancelledBy::Guest;
    assert_eq!(
        FLEXIBLE.refund(cents(10_000), Duration::hours(48), by),
        cents(10_000)
    );
    assert_eq!(
        FLEXIBLE.refund(cents(10_000), Duration::hours(47), by),
        cents(3_000)
    );
    assert_eq!(
        FLEXIBLE.refund(cents(10_000), Duration::hours(12), by),
        cents(3_000)
    );
    assert_eq!(
        FLEXIBLE.refund(cents(10_000), Duration::hours(11), by),
        Cents::ZERO
    );
}

#[test]
fn a_non_refundable_stay_cancelled_by_the_guest_gives_nothing_back_even_weeks_ahead() {
    let refund = CancellationPolicy::NonRefundable.refund(
        cents(30_000),
        Duration::days(60),
        CancelledBy::Guest,
    );
    assert_eq!(refund, Cents::ZERO);
}

#[test]
fn a_stay_the_hotel_cancels_is_refunded_whole_whatever_its_policy() {
    for policy in [
        CancellationPolicy::HOUSE,
        FLEXIBLE,
        CancellationPolicy::NonRefundable,
    ] {
        assert_eq!(
            policy.refund(cents(30_000), Duration::hours(1), CancelledBy::Hotel),
            cents(30_000),
            "{policy:?}"
        );
    }
}

#[test]
fn nothing_paid_is_nothing_refunded() {
    assert_eq!(
        CancellationPolicy::HOUSE.refund(Cents::ZERO, Duration::days(10), CancelledBy::Hotel),
        Cents::ZERO
    );
}

#[test]
fn a_refundable_policy_is_refused_when_its_windows_or_percent_make_no_sense() {
    assert_eq!(
        CancellationPolicy::refundable(72, 24, 50),
        Ok(CancellationPolicy::HOUSE)
    );
    let field = |r: Result<CancellationPolicy, InvalidInput>| r.expect_err("refused").field;
    assert_eq!(
        field(CancellationPolicy::refundable(24, 72, 50)),
        "cancellation_policy.partial_refund_hours"
    );
    assert_eq!(
        field(CancellationPolicy::refundable(-1, 0, 50)),
        "cancellation_policy.full_refund_hours"
    );
    assert_eq!(
        field(CancellationPolicy::refundable(72, 24, 101)),
        "cancellation_policy.partial_refund_percent"
    );
}
