//! The given/when/then tests of a reservation's money: authorize at confirmation,
//! capture at the deadline (or at once, or at check-in), void before it, refund after
//! it, the no-show's fee, and date changes that reprice a paid stay.

use crate::personal::Personal;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use cqrs_es::test::TestFramework;
use uuid::Uuid;

use crate::cancellation::CancellationPolicy;
use crate::reservation::*;
use crate::types::{Guest, GuestCount, HotelId, RoomCount, RoomTypeId, StayDates};

type Fixture = TestFramework<Reservation>;

/// Hours after 2027-06-01 12:00 UTC.
fn at(hours: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
        .single()
        .expect("valid time")
        + chrono::Duration::hours(hours)
}

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, d).expect("valid date")
}

fn stay(start: u32, end: u32) -> StayDates {
    StayDates::parse(day(start), day(end)).expect("valid stay")
}

fn id() -> ReservationId {
    ReservationId::from_uuid(Uuid::from_u128(1))
}

fn key(what: &str) -> String {
    format!("{}:{what}", Uuid::from_u128(1))
}

fn cents(c: i64) -> Cents {
    Cents::new(c)
}

/// 2027-06-10..12 at 48,000 (first night 20,000), under `policy`, held until hour 1.
fn placed_under(policy: CancellationPolicy) -> ReservationEvent {
    ReservationEvent::ReservationHeld(ReservationDetails {
        more_lines: Vec::new(),
        reservation_id: id(),
        hotel_id: HotelId::parse(7).expect("valid id"),
        room_type_id: RoomTypeId::parse(3).expect("valid id"),
        stay: stay(10, 12),
        rooms: RoomCount::parse(1).expect("valid count"),
        guest: Personal::Clear(Guest::parse("Ana Lima", "ana@example.com").expect("valid guest")),
        channel: "direct".to_owned(),
        total_cents: cents(48_000),
        hold_expires_at: at(1),
        created_at: at(0),
        rate_plan_id: None,
        cancellation_policy: policy,
        guests: GuestCount::ONE,
        first_night_cents: Some(cents(20_000)),
        currency: crate::types::Currency::EUR,
        taxes: crate::taxes::Taxes::default(),
        block_code: None,
    })
}

fn placed() -> ReservationEvent {
    placed_under(CancellationPolicy::HOUSE)
}

/// Paid with `txn_1` at hour 0, to be captured at hour `due`.
fn paid(due: i64) -> ReservationEvent {
    ReservationEvent::ReservationConfirmed {
        confirmed_at: at(0),
        payment: Some(Payment {
            provider_txn_id: "txn_1".to_owned(),
            amount_cents: cents(48_000),
        }),
        capture_due_at: Some(at(due)),
    }
}

fn captured(amount: i64, key_name: &str, hours: i64) -> ReservationEvent {
    ReservationEvent::PaymentCaptured {
        amount_cents: cents(amount),
        gateway_key: key(key_name),
        captured_at: at(hours),
    }
}

fn refunded(amount: i64, n: u32, hours: i64) -> ReservationEvent {
    ReservationEvent::PaymentRefunded {
        amount_cents: cents(amount),
        gateway_key: key(&format!("refund:{n}")),
        refunded_at: at(hours),
    }
}

fn cancel(hours: i64, refund_percent: u8) -> ReservationCommand {
    ReservationCommand::Cancel {
        now: at(hours),
        today: day(2),
        reason: "plans changed".to_owned(),
        by: CancelledBy::Guest,
        refund_percents: vec![refund_percent],
    }
}

fn cancelled(hours: i64, refund: i64) -> ReservationEvent {
    ReservationEvent::ReservationCancelled {
        cancelled_at: at(hours),
        reason: Personal::Clear("plans changed".to_owned()),
        by: CancelledBy::Guest,
        refund_cents: cents(refund),
    }
}

/// Move to 2027-06-20..23 at `total` (first night 20,000), a guest's cancellation giving
/// back `refund_percent_now` at that moment, the new capture deadline at hour `due`.
fn move_to(
    hours: i64,
    total: i64,
    refund_percent_now: u8,
    due: i64,
    increment: Option<Increment>,
) -> ReservationCommand {
    ReservationCommand::ChangeDates {
        more_refund_percents_now: Vec::new(),
        more_line_prices: Vec::new(),
        stay: stay(20, 23),
        total_cents: cents(total),
        first_night_cents: cents(20_000),
        now: at(hours),
        refund_percent_now,
        capture_due_at: at(due),
        increment,
    }
}

fn moved(
    hours: i64,
    total: i64,
    refund_cap_percent: u8,
    capture_due_at: Option<i64>,
) -> ReservationEvent {
    ReservationEvent::DatesChanged {
        more_refund_caps: Vec::new(),
        more_line_prices: Vec::new(),
        stay: stay(20, 23),
        total_cents: cents(total),
        changed_at: at(hours),
        first_night_cents: Some(cents(20_000)),
        refund_cap_percent: Some(refund_cap_percent),
        capture_due_at: capture_due_at.map(at),
    }
}

fn second_authorization(amount: i64) -> Increment {
    Increment {
        amount_cents: cents(amount),
        gateway_key: key("auth:2"),
    }
}

/// The second authorization (12,000) recorded at hour `hours`.
fn increased(hours: i64) -> ReservationEvent {
    ReservationEvent::AuthorizationIncreased {
        amount_cents: cents(12_000),
        gateway_key: key("auth:2"),
        authorized_at: at(hours),
    }
}

fn state(events: &[ReservationEvent]) -> Reservation {
    let mut reservation = Reservation::default();
    for event in events {
        reservation.apply_event(event);
    }
    reservation
}

// --- Authorize, capture -------------------------------------------------------------

#[test]
fn a_confirmation_authorizes_and_waits_for_the_capture_deadline() {
    let reservation = state(&[placed(), paid(100)]);
    assert_eq!(reservation.payment_status(), PaymentStatus::Authorized);
    assert_eq!(reservation.capture_due_at(), Some(at(100)));
    let ledger = reservation.ledger().expect("paid");
    assert_eq!(
        (ledger.authorized, ledger.captured),
        (cents(48_000), Cents::ZERO)
    );
}

#[test]
fn an_authorization_past_its_deadline_is_captured_at_once() {
    // A non-refundable plan's deadline (or a deadline already past) is the moment of
    // confirmation.
    Fixture::with(())
        .given(vec![placed_under(CancellationPolicy::NonRefundable)])
        .when(ReservationCommand::ApplyAuthorization {
            now: at(0),
            payment: Payment {
                provider_txn_id: "txn_1".to_owned(),
                amount_cents: cents(48_000),
            },
            capture_due_at: at(0),
        })
        .then_expect_events(vec![paid(0), captured(48_000, "capture", 0)]);
}

#[test]
fn the_capture_waits_for_its_deadline_then_takes_the_stay_once() {
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(ReservationCommand::CapturePayment { now: at(99) })
        .then_expect_events(vec![]);
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(ReservationCommand::CapturePayment { now: at(100) })
        .then_expect_events(vec![captured(48_000, "capture", 100)]);
    Fixture::with(())
        .given(vec![placed(), paid(100), captured(48_000, "capture", 100)])
        .when(ReservationCommand::CapturePayment { now: at(101) })
        .then_expect_events(vec![]);
}

#[test]
fn checking_in_captures_an_authorization_not_yet_captured() {
    Fixture::with(())
        .given(vec![placed(), paid(200)])
        .when(ReservationCommand::CheckIn {
            now: at(10),
            today: day(10),
        })
        .then_expect_events(vec![
            ReservationEvent::GuestCheckedIn {
                checked_in_at: at(10),
            },
            captured(48_000, "capture", 10),
        ]);
}

// --- Cancel -------------------------------------------------------------------------

#[test]
fn a_guest_cancelling_before_the_capture_has_the_authorization_voided() {
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(cancel(50, 100))
        .then_expect_events(vec![
            // Nothing was taken, so nothing is refunded.
            cancelled(50, 0),
            ReservationEvent::PaymentVoided {
                gateway_key: key("void:txn_1"),
                voided_at: at(50),
            },
        ]);
}

#[test]
fn a_guest_cancelling_after_the_capture_is_refunded_the_policys_share() {
    Fixture::with(())
        .given(vec![placed(), paid(100), captured(48_000, "capture", 100)])
        .when(cancel(150, 50))
        .then_expect_events(vec![cancelled(150, 24_000), refunded(24_000, 1, 150)]);
}

#[test]
fn a_guest_cancelling_past_the_deadline_before_the_worker_captured_is_charged_the_kept_share() {
    // The worker has not run yet: the share the hotel keeps is captured, the rest of
    // the authorization released; nothing is refunded.
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(cancel(150, 50))
        .then_expect_events(vec![cancelled(150, 0), captured(24_000, "capture", 150)]);
}

// --- No-show ------------------------------------------------------------------------

fn no_show(hours: i64) -> ReservationCommand {
    ReservationCommand::RecordNoShow {
        now: at(hours),
        today: day(11),
    }
}

fn no_show_recorded(hours: i64) -> ReservationEvent {
    ReservationEvent::NoShowRecorded {
        recorded_at: at(hours),
        released_from: day(11),
    }
}

#[test]
fn a_no_show_keeps_the_first_night_and_refunds_the_rest() {
    Fixture::with(())
        .given(vec![placed(), paid(100), captured(48_000, "capture", 100)])
        .when(no_show(230))
        .then_expect_events(vec![no_show_recorded(230), refunded(28_000, 1, 230)]);
}

#[test]
fn a_no_show_not_yet_captured_is_charged_the_first_night_only() {
    Fixture::with(())
        .given(vec![placed(), paid(300)])
        .when(no_show(230))
        .then_expect_events(vec![
            no_show_recorded(230),
            captured(20_000, "capture", 230),
        ]);
}

#[test]
fn a_non_refundable_no_show_keeps_the_whole_stay() {
    Fixture::with(())
        .given(vec![
            placed_under(CancellationPolicy::NonRefundable),
            paid(0),
            captured(48_000, "capture", 0),
        ])
        .when(no_show(230))
        .then_expect_events(vec![no_show_recorded(230)]);
}

// --- Date changes -------------------------------------------------------------------

#[test]
fn a_dearer_move_needs_the_card_to_cover_the_difference_first() {
    Fixture::with(())
        .given(vec![placed(), paid(400)])
        .when(move_to(10, 60_000, 100, 400, None))
        .then_expect_error(ReservationError::PaymentRequired {
            shortfall: cents(12_000),
        });
}

#[test]
fn a_dearer_move_with_the_increment_granted_records_it_and_moves_the_deadline() {
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(move_to(
            10,
            60_000,
            100,
            400,
            Some(second_authorization(12_000)),
        ))
        .then_expect_events(vec![increased(10), moved(10, 60_000, 100, Some(400))]);
}

#[test]
fn a_dearer_move_of_a_captured_stay_takes_the_difference_in_a_second_capture() {
    Fixture::with(())
        .given(vec![placed(), paid(5), captured(48_000, "capture", 5)])
        .when(move_to(
            10,
            60_000,
            100,
            400,
            Some(second_authorization(12_000)),
        ))
        .then_expect_events(vec![
            increased(10),
            moved(10, 60_000, 100, None),
            captured(12_000, "capture:2", 10),
        ]);
}

#[test]
fn an_increment_under_another_key_is_not_counted() {
    // Granted for an earlier state of the ledger (a stale retry): the change still
    // needs what the card does not cover.
    let stale = Increment {
        amount_cents: cents(12_000),
        gateway_key: key("auth:7"),
    };
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(move_to(10, 60_000, 100, 400, Some(stale)))
        .then_expect_error(ReservationError::PaymentRequired {
            shortfall: cents(12_000),
        });
}

#[test]
fn a_cheaper_move_of_a_captured_stay_refunds_the_difference() {
    Fixture::with(())
        .given(vec![placed(), paid(5), captured(48_000, "capture", 5)])
        .when(move_to(10, 30_000, 100, 400, None))
        .then_expect_events(vec![moved(10, 30_000, 100, None), refunded(18_000, 1, 10)]);
}

#[test]
fn a_cheaper_move_before_the_capture_captures_only_the_new_price_later() {
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(move_to(10, 30_000, 100, 400, None))
        .then_expect_events(vec![moved(10, 30_000, 100, Some(400))]);
    let after = state(&[placed(), paid(100), moved(10, 30_000, 100, Some(400))]);
    Fixture::with(())
        .given(vec![placed(), paid(100), moved(10, 30_000, 100, Some(400))])
        .when(ReservationCommand::CapturePayment { now: at(400) })
        .then_expect_events(vec![captured(30_000, "capture", 400)]);
    assert_eq!(after.capture_due_at(), Some(at(400)));
}

#[test]
fn moving_out_of_the_no_refund_window_does_not_reopen_a_full_refund() {
    // Given a stay whose guest could get only half back now (50%), moved far out
    let events = vec![placed(), paid(5), captured(48_000, "capture", 5)];
    Fixture::with(())
        .given(events.clone())
        .when(move_to(150, 48_000, 50, 900, None))
        .then_expect_events(vec![moved(150, 48_000, 50, None)]);
    // When the guest cancels long before the new dates (the policy would give 100%),
    // then half is given back, as at the moment of the move.
    let mut later = events;
    later.push(moved(150, 48_000, 50, None));
    Fixture::with(())
        .given(later)
        .when(cancel(200, 100))
        .then_expect_events(vec![cancelled(200, 24_000), refunded(24_000, 1, 200)]);
}

#[test]
fn a_move_without_a_full_refund_left_captures_at_once() {
    // Not captured yet, but a cancellation can no longer give everything back: the
    // stay is owed now.
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(move_to(150, 48_000, 50, 900, None))
        .then_expect_events(vec![
            moved(150, 48_000, 50, None),
            captured(48_000, "capture", 150),
        ]);
}

#[test]
fn an_increment_left_over_from_a_failed_move_is_recorded_once() {
    let increment = second_authorization(12_000);
    let recorded = increased(10);
    Fixture::with(())
        .given(vec![placed(), paid(100)])
        .when(ReservationCommand::RecordIncrement {
            now: at(10),
            increment: increment.clone(),
        })
        .then_expect_events(vec![recorded.clone()]);
    Fixture::with(())
        .given(vec![placed(), paid(100), recorded])
        .when(ReservationCommand::RecordIncrement {
            now: at(11),
            increment,
        })
        .then_expect_events(vec![]);
}

#[test]
fn the_surplus_of_an_unused_increment_is_released_by_capturing_the_price_alone() {
    let increased = increased(10);
    Fixture::with(())
        .given(vec![placed(), paid(100), increased])
        .when(ReservationCommand::CapturePayment { now: at(100) })
        .then_expect_events(vec![captured(48_000, "capture", 100)]);
}
