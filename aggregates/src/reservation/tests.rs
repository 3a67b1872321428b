//! The given/when/then tests of `Reservation`.

use super::*;
use crate::personal::Personal;
use chrono::{NaiveDate, TimeZone};
use cqrs_es::test::TestFramework;
use uuid::Uuid;

type Fixture = TestFramework<Reservation>;

/// Minutes after 2027-06-01 12:00 UTC.
fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
        .single()
        .expect("valid time")
        + chrono::Duration::minutes(minutes)
}

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, d).expect("valid date")
}

fn stay(start_day: u32, end_day: u32) -> StayDates {
    StayDates::parse(
        NaiveDate::from_ymd_opt(2027, 6, start_day).expect("valid date"),
        NaiveDate::from_ymd_opt(2027, 6, end_day).expect("valid date"),
    )
    .expect("valid stay")
}

/// A stay of 2027-06-10..12, two rooms, held until minute 15.
fn details() -> ReservationDetails {
    ReservationDetails {
        more_lines: Vec::new(),
        reservation_id: ReservationId::from_uuid(Uuid::from_u128(1)),
        hotel_id: HotelId::parse(7).expect("valid id"),
        room_type_id: RoomTypeId::parse(3).expect("valid id"),
        stay: stay(10, 12),
        rooms: RoomCount::parse(2).expect("valid count"),
        guest: Personal::Clear(Guest::parse("Ana Lima", "ana@example.com").expect("valid guest")),
        channel: "direct".to_owned(),
        total_cents: Cents::new(48_000),
        hold_expires_at: at(15),
        created_at: at(0),
        rate_plan_id: None,
        cancellation_policy: crate::cancellation::CancellationPolicy::HOUSE,
        guests: crate::types::GuestCount::ONE,
        first_night_cents: None,
        currency: crate::types::Currency::EUR,
        taxes: crate::taxes::Taxes::default(),
        block_code: None,
    }
}

fn placed() -> ReservationEvent {
    ReservationEvent::ReservationHeld(details())
}

fn confirmed_at(minutes: i64) -> ReservationEvent {
    ReservationEvent::ReservationConfirmed {
        confirmed_at: at(minutes),
        payment: None,
        capture_due_at: None,
    }
}

fn cancelled_at(minutes: i64) -> ReservationEvent {
    ReservationEvent::ReservationCancelled {
        cancelled_at: at(minutes),
        reason: Personal::Clear("plans changed".to_owned()),
        by: CancelledBy::Guest,
        refund_cents: Cents::new(0),
    }
}

fn expired() -> ReservationEvent {
    ReservationEvent::HoldExpired { expired_at: at(15) }
}

fn cancel(minutes: i64) -> ReservationCommand {
    ReservationCommand::Cancel {
        now: at(minutes),
        today: day(1),
        reason: "plans changed".to_owned(),
        by: CancelledBy::Guest,
        refund_percents: vec![0],
    }
}

fn change_to(start_day: u32, end_day: u32, minutes: i64) -> ReservationCommand {
    ReservationCommand::ChangeDates {
        more_refund_percents_now: Vec::new(),
        more_line_prices: Vec::new(),
        stay: stay(start_day, end_day),
        total_cents: Cents::new(72_000),
        first_night_cents: Cents::new(24_000),
        now: at(minutes),
        refund_percent_now: 100,
        capture_due_at: at(5_000),
        increment: None,
    }
}

/// A stay moved to 11..14 at 72,000 (first night 24,000), at `minutes`.
fn moved(minutes: i64, refund_cap_percent: Option<u8>) -> ReservationEvent {
    ReservationEvent::DatesChanged {
        more_refund_caps: Vec::new(),
        more_line_prices: Vec::new(),
        stay: stay(11, 14),
        total_cents: Cents::new(72_000),
        changed_at: at(minutes),
        first_night_cents: Some(Cents::new(24_000)),
        refund_cap_percent,
        capture_due_at: None,
    }
}

fn state(events: &[ReservationEvent]) -> Reservation {
    let mut reservation = Reservation::default();
    for event in events {
        reservation.apply_event(event);
    }
    reservation
}

// --- Place --------------------------------------------------------------------------

#[test]
fn placing_a_new_reservation_records_it_as_held() {
    Fixture::with(())
        .given_no_previous_events()
        .when(ReservationCommand::Place { details: details() })
        .then_expect_events(vec![placed()]);
}

#[test]
fn placing_the_same_reservation_again_changes_nothing() {
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::Place { details: details() })
        .then_expect_events(vec![]);
}

#[test]
fn placing_a_reservation_id_again_with_other_details_already_exists() {
    let mut other = details();
    other.rooms = RoomCount::parse(1).expect("valid count");
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::Place { details: other })
        .then_expect_error(ReservationError::AlreadyExists);
}

// --- Confirm ------------------------------------------------------------------------

#[test]
fn confirming_a_live_hold_confirms_the_reservation() {
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::Confirm { now: at(14) })
        .then_expect_events(vec![confirmed_at(14)]);
}

#[test]
fn confirming_twice_changes_nothing() {
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(ReservationCommand::Confirm { now: at(30) })
        .then_expect_events(vec![]);
}

#[test]
fn confirming_a_lapsed_hold_is_hold_expired() {
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::Confirm { now: at(15) })
        .then_expect_error(ReservationError::HoldExpired { expired_at: at(15) });
}

#[test]
fn confirming_an_unknown_reservation_is_not_found() {
    Fixture::with(())
        .given_no_previous_events()
        .when(ReservationCommand::Confirm { now: at(0) })
        .then_expect_error(ReservationError::NotFound);
}

#[test]
fn confirming_a_cancelled_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), cancelled_at(5)])
        .when(ReservationCommand::Confirm { now: at(6) })
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Cancelled,
        });
}

#[test]
fn confirming_an_expired_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), expired()])
        .when(ReservationCommand::Confirm { now: at(20) })
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Expired,
        });
}

// --- Cancel -------------------------------------------------------------------------

#[test]
fn cancelling_a_live_hold_cancels_it() {
    Fixture::with(())
        .given(vec![placed()])
        .when(cancel(5))
        .then_expect_events(vec![cancelled_at(5)]);
}

#[test]
fn cancelling_a_confirmed_reservation_cancels_it_even_after_the_hold_time() {
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(ReservationCommand::Cancel {
            now: at(600),
            today: day(1),
            reason: "overbooked".to_owned(),
            by: CancelledBy::Hotel,
            refund_percents: vec![100],
        })
        .then_expect_events(vec![ReservationEvent::ReservationCancelled {
            cancelled_at: at(600),
            reason: Personal::Clear("overbooked".to_owned()),
            by: CancelledBy::Hotel,
            refund_cents: Cents::new(0),
        }]);
}

#[test]
fn cancelling_twice_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), cancelled_at(5)])
        .when(cancel(6))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Cancelled,
        });
}

#[test]
fn cancelling_a_lapsed_hold_is_invalid_state_expired() {
    Fixture::with(())
        .given(vec![placed()])
        .when(cancel(15))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Expired,
        });
}

#[test]
fn cancelling_an_expired_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), expired()])
        .when(cancel(20))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Expired,
        });
}

#[test]
fn cancelling_an_unknown_reservation_is_not_found() {
    Fixture::with(())
        .given_no_previous_events()
        .when(cancel(0))
        .then_expect_error(ReservationError::NotFound);
}

// --- Expire -------------------------------------------------------------------------

#[test]
fn expiring_a_lapsed_hold_records_when_it_lapsed() {
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::Expire { now: at(40) })
        .then_expect_events(vec![expired()]);
}

#[test]
fn expiring_a_live_hold_is_hold_still_live() {
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::Expire { now: at(14) })
        .then_expect_error(ReservationError::HoldStillLive);
}

#[test]
fn expiring_twice_changes_nothing() {
    Fixture::with(())
        .given(vec![placed(), expired()])
        .when(ReservationCommand::Expire { now: at(40) })
        .then_expect_events(vec![]);
}

#[test]
fn expiring_a_confirmed_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(ReservationCommand::Expire { now: at(40) })
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Confirmed,
        });
}

#[test]
fn expiring_a_cancelled_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), cancelled_at(5)])
        .when(ReservationCommand::Expire { now: at(40) })
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Cancelled,
        });
}

#[test]
fn expiring_an_unknown_reservation_is_not_found() {
    Fixture::with(())
        .given_no_previous_events()
        .when(ReservationCommand::Expire { now: at(40) })
        .then_expect_error(ReservationError::NotFound);
}

// --- ChangeDates --------------------------------------------------------------------

#[test]
fn changing_the_dates_of_a_live_hold_records_the_new_stay_and_price() {
    Fixture::with(())
        .given(vec![placed()])
        .when(change_to(11, 14, 5))
        .then_expect_events(vec![moved(5, None)]);
}

#[test]
fn changing_the_dates_of_a_confirmed_reservation_records_the_new_stay() {
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(change_to(11, 14, 600))
        .then_expect_events(vec![moved(600, Some(100))]);
}

#[test]
fn changing_to_the_current_dates_is_same_dates() {
    Fixture::with(())
        .given(vec![placed()])
        .when(change_to(10, 12, 5))
        .then_expect_error(ReservationError::SameDates);
}

#[test]
fn changing_the_dates_of_a_lapsed_hold_is_hold_expired() {
    Fixture::with(())
        .given(vec![placed()])
        .when(change_to(11, 14, 15))
        .then_expect_error(ReservationError::HoldExpired { expired_at: at(15) });
}

#[test]
fn changing_the_dates_of_a_cancelled_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5), cancelled_at(6)])
        .when(change_to(11, 14, 7))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Cancelled,
        });
}

#[test]
fn changing_the_dates_of_an_expired_reservation_is_invalid_state() {
    Fixture::with(())
        .given(vec![placed(), expired()])
        .when(change_to(11, 14, 40))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::Expired,
        });
}

#[test]
fn changing_the_dates_of_an_unknown_reservation_is_not_found() {
    Fixture::with(())
        .given_no_previous_events()
        .when(change_to(11, 14, 0))
        .then_expect_error(ReservationError::NotFound);
}

// --- State --------------------------------------------------------------------------

#[test]
fn the_state_follows_the_events() {
    let reservation = state(&[placed()]);
    assert_eq!(reservation.details(), Some(&details()));
    assert_eq!(reservation.recorded_status(), Some(ReservationStatus::Held));
    assert_eq!(reservation.updated_at(), Some(at(0)));

    let reservation = state(&[placed(), moved(3, None), confirmed_at(5)]);
    let details = reservation.details().expect("placed");
    assert_eq!(details.stay, stay(11, 14));
    assert_eq!(details.total_cents, Cents::new(72_000));
    assert_eq!(details.hold_expires_at, at(15));
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::Confirmed)
    );
    assert_eq!(reservation.updated_at(), Some(at(5)));

    let reservation = state(&[placed(), cancelled_at(7)]);
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::Cancelled)
    );
    assert_eq!(reservation.updated_at(), Some(at(7)));

    let reservation = state(&[placed(), expired()]);
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::Expired)
    );
    assert_eq!(reservation.updated_at(), Some(at(15)));
}

#[test]
fn a_held_reservation_reads_as_expired_once_its_hold_lapses() {
    let held = state(&[placed()]);
    assert_eq!(held.status_at(at(14)), Some(ReservationStatus::Held));
    assert_eq!(held.status_at(at(15)), Some(ReservationStatus::Expired));
    assert_eq!(held.recorded_status(), Some(ReservationStatus::Held));
    let confirmed = state(&[placed(), confirmed_at(5)]);
    assert_eq!(
        confirmed.status_at(at(60)),
        Some(ReservationStatus::Confirmed)
    );
    assert_eq!(Reservation::default().status_at(at(0)), None);
}

#[test]
fn only_held_and_confirmed_reservations_occupy_nights() {
    assert!(ReservationStatus::Held.occupies_nights());
    assert!(ReservationStatus::Confirmed.occupies_nights());
    assert!(!ReservationStatus::Cancelled.occupies_nights());
    assert!(!ReservationStatus::Expired.occupies_nights());
    assert!(!ReservationStatus::Declined.occupies_nights());
    assert_eq!(ReservationStatus::Declined.as_str(), "declined");
}

// --- Payments -----------------------------------------------------------------------

fn card(txn: &str, amount_cents: i64) -> Payment {
    Payment {
        provider_txn_id: txn.to_owned(),
        amount_cents: Cents::new(amount_cents),
    }
}

fn authorize(txn: &str, amount_cents: i64, minutes: i64) -> ReservationCommand {
    ReservationCommand::ApplyAuthorization {
        now: at(minutes),
        payment: card(txn, amount_cents),
        capture_due_at: at(2_000),
    }
}

fn given_back(txn: &str, amount_cents: i64, minutes: i64) -> ReservationEvent {
    ReservationEvent::LatePaymentRefunded {
        provider_txn_id: txn.to_owned(),
        amount_cents: Cents::new(amount_cents),
        refunded_at: at(minutes),
    }
}

fn paid_at(txn: &str, minutes: i64) -> ReservationEvent {
    ReservationEvent::ReservationConfirmed {
        confirmed_at: at(minutes),
        payment: Some(card(txn, 48_000)),
        capture_due_at: Some(at(2_000)),
    }
}

#[test]
fn an_authorization_for_a_live_hold_confirms_it_with_the_payment() {
    Fixture::with(())
        .given(vec![placed()])
        .when(authorize("txn_1", 48_000, 5))
        .then_expect_events(vec![paid_at("txn_1", 5)]);
}

#[test]
fn the_same_authorization_twice_changes_nothing() {
    Fixture::with(())
        .given(vec![placed(), paid_at("txn_1", 5)])
        .when(authorize("txn_1", 48_000, 6))
        .then_expect_events(vec![]);
}

#[test]
fn an_authorization_after_the_hold_lapsed_records_the_lapse_and_is_given_back() {
    Fixture::with(())
        .given(vec![placed()])
        .when(authorize("txn_1", 48_000, 15))
        .then_expect_events(vec![expired(), given_back("txn_1", 48_000, 15)]);
}

#[test]
fn an_authorization_for_an_expired_reservation_is_given_back_not_resurrected() {
    Fixture::with(())
        .given(vec![placed(), expired()])
        .when(authorize("txn_1", 48_000, 20))
        .then_expect_events(vec![given_back("txn_1", 48_000, 20)]);
}

#[test]
fn an_authorization_after_a_cancellation_is_given_back() {
    Fixture::with(())
        .given(vec![placed(), cancelled_at(3)])
        .when(authorize("txn_1", 48_000, 5))
        .then_expect_events(vec![given_back("txn_1", 48_000, 5)]);
}

#[test]
fn a_second_authorization_of_a_paid_reservation_is_given_back_once() {
    let given = vec![
        placed(),
        paid_at("txn_1", 5),
        given_back("txn_2", 48_000, 6),
    ];
    Fixture::with(())
        .given(vec![placed(), paid_at("txn_1", 5)])
        .when(authorize("txn_2", 48_000, 6))
        .then_expect_events(vec![given_back("txn_2", 48_000, 6)]);
    Fixture::with(())
        .given(given)
        .when(authorize("txn_2", 48_000, 7))
        .then_expect_events(vec![]);
}

#[test]
fn an_authorization_of_the_wrong_amount_is_given_back_and_the_hold_stays() {
    let after = state(&[placed(), given_back("txn_1", 100, 5)]);
    Fixture::with(())
        .given(vec![placed()])
        .when(authorize("txn_1", 100, 5))
        .then_expect_events(vec![given_back("txn_1", 100, 5)]);
    assert_eq!(after.recorded_status(), Some(ReservationStatus::Held));
    assert!(after.knows_payment("txn_1"));
}

#[test]
fn a_declined_card_ends_the_hold_as_declined() {
    let declined = ReservationEvent::PaymentDeclined {
        declined_at: at(5),
        provider_txn_id: Some("txn_1".into()),
    };
    Fixture::with(())
        .given(vec![placed()])
        .when(ReservationCommand::DeclinePayment {
            now: at(5),
            provider_txn_id: Some("txn_1".into()),
        })
        .then_expect_events(vec![declined.clone()]);
    assert_eq!(
        state(&[placed(), declined]).recorded_status(),
        Some(ReservationStatus::Declined)
    );
}

#[test]
fn a_decline_cannot_undo_a_confirmation() {
    Fixture::with(())
        .given(vec![placed(), paid_at("txn_1", 5)])
        .when(ReservationCommand::DeclinePayment {
            now: at(6),
            provider_txn_id: Some("txn_1".into()),
        })
        .then_expect_events(vec![]);
}

#[test]
fn cancelling_before_the_capture_voids_the_authorization() {
    let cancelled = ReservationEvent::ReservationCancelled {
        cancelled_at: at(30),
        reason: Personal::Clear("plans changed".into()),
        by: CancelledBy::Hotel,
        // A refund is money returned: nothing was taken.
        refund_cents: Cents::ZERO,
    };
    let voided = ReservationEvent::PaymentVoided {
        gateway_key: format!("{}:void:txn_1", Uuid::from_u128(1)),
        voided_at: at(30),
    };
    Fixture::with(())
        .given(vec![placed(), paid_at("txn_1", 5)])
        .when(ReservationCommand::Cancel {
            now: at(30),
            today: day(1),
            reason: "plans changed".into(),
            by: CancelledBy::Hotel,
            refund_percents: vec![100],
        })
        .then_expect_events(vec![cancelled.clone(), voided.clone()]);
    let after = state(&[placed(), paid_at("txn_1", 5), cancelled, voided]);
    assert_eq!(after.refund_cents(), Cents::ZERO);
    assert_eq!(after.payment(), Some(&card("txn_1", 48_000)));
    assert_eq!(after.payment_status(), PaymentStatus::Voided);
    assert_eq!(after.capture_due_at(), None);
}

#[test]
fn a_cancellation_recorded_with_the_policys_share_before_the_capture_reads_as_no_refund() {
    // Given a void recorded when a cancellation's refund_cents still carried the
    // policy's share, then the reservation says nothing was refunded.
    let history = [
        placed(),
        paid_at("txn_1", 5),
        ReservationEvent::ReservationCancelled {
            cancelled_at: at(30),
            reason: Personal::Clear("plans changed".into()),
            by: CancelledBy::Guest,
            refund_cents: Cents::new(48_000),
        },
        ReservationEvent::PaymentVoided {
            gateway_key: format!("{}:void:txn_1", Uuid::from_u128(1)),
            voided_at: at(30),
        },
    ];

    let after = state(&history);

    assert_eq!(after.refund_cents(), Cents::ZERO);
    assert_eq!(after.payment_status(), PaymentStatus::Voided);
}

#[test]
fn a_payment_confirmed_before_the_ledger_reads_as_captured_at_once() {
    // Given a confirmation recorded without a capture deadline (the outbox of the time
    // captured it at once), when the hotel cancels, then all of it is refunded under
    // the ledger's first refund key.
    let legacy = ReservationEvent::ReservationConfirmed {
        confirmed_at: at(5),
        payment: Some(card("txn_1", 48_000)),
        capture_due_at: None,
    };
    assert_eq!(
        state(&[placed(), legacy.clone()]).payment_status(),
        PaymentStatus::Captured
    );
    Fixture::with(())
        .given(vec![placed(), legacy])
        .when(ReservationCommand::Cancel {
            now: at(30),
            today: day(1),
            reason: "overbooked".into(),
            by: CancelledBy::Hotel,
            refund_percents: vec![100],
        })
        .then_expect_events(vec![
            ReservationEvent::ReservationCancelled {
                cancelled_at: at(30),
                reason: Personal::Clear("overbooked".into()),
                by: CancelledBy::Hotel,
                refund_cents: Cents::new(48_000),
            },
            ReservationEvent::PaymentRefunded {
                amount_cents: Cents::new(48_000),
                gateway_key: format!("{}:refund:1", Uuid::from_u128(1)),
                refunded_at: at(30),
            },
        ]);
}

#[test]
fn the_stream_id_starts_with_the_hotel() {
    let id = ReservationId::from_uuid(Uuid::from_u128(1));
    assert_eq!(
        reservation_stream_id(HotelId::parse(7).expect("valid id"), id),
        "7:00000000-0000-0000-0000-000000000001"
    );
    assert_eq!(expired().event_type(), "HoldExpired");
}

#[test]
fn a_stay_can_be_cancelled_until_its_arrival_date_has_ended_at_the_hotel() {
    // Given a confirmed stay arriving on 2027-06-10; when it is cancelled on that day
    let on_arrival = ReservationCommand::Cancel {
        now: at(600),
        today: day(10),
        reason: "plans changed".to_owned(),
        by: CancelledBy::Guest,
        refund_percents: vec![0],
    };
    // Then it is cancelled
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(on_arrival)
        .then_expect_events(vec![ReservationEvent::ReservationCancelled {
            cancelled_at: at(600),
            reason: Personal::Clear("plans changed".to_owned()),
            by: CancelledBy::Guest,
            refund_cents: Cents::new(0),
        }]);
}

#[test]
fn cancelling_once_the_arrival_date_has_ended_is_refused_whoever_asks() {
    for by in [CancelledBy::Guest, CancelledBy::Hotel] {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5)])
            .when(ReservationCommand::Cancel {
                now: at(600),
                today: day(11),
                reason: "plans changed".to_owned(),
                by,
                refund_percents: vec![0],
            })
            .then_expect_error(ReservationError::ArrivalEnded { arrival: day(10) });
    }
}

fn check_in_on(d: u32) -> ReservationCommand {
    ReservationCommand::CheckIn {
        now: at(600),
        today: day(d),
    }
}

#[test]
fn a_confirmed_stay_is_checked_in_from_its_arrival_date_to_the_day_before_it_ends() {
    // Given a confirmed stay of the 10th and 11th (departure the 12th)
    for d in [10, 11] {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5)])
            .when(check_in_on(d))
            .then_expect_events(vec![ReservationEvent::GuestCheckedIn {
                checked_in_at: at(600),
            }]);
    }
    let checked_in = state(&[
        placed(),
        confirmed_at(5),
        ReservationEvent::GuestCheckedIn {
            checked_in_at: at(600),
        },
    ]);
    assert_eq!(
        checked_in.recorded_status(),
        Some(ReservationStatus::CheckedIn)
    );
    assert!(ReservationStatus::CheckedIn.occupies_nights());
}

#[test]
fn checking_in_before_the_arrival_date_is_too_early_and_on_the_departure_date_too_late() {
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(check_in_on(9))
        .then_expect_error(ReservationError::TooEarly { arrival: day(10) });
    Fixture::with(())
        .given(vec![placed(), confirmed_at(5)])
        .when(check_in_on(12))
        .then_expect_error(ReservationError::StayEnded { departure: day(12) });
}

#[test]
fn only_a_confirmed_stay_can_be_checked_in() {
    let checked_in = ReservationEvent::GuestCheckedIn {
        checked_in_at: at(600),
    };
    for (given, status) in [
        (vec![placed()], ReservationStatus::Held),
        (
            vec![placed(), confirmed_at(5), checked_in.clone()],
            ReservationStatus::CheckedIn,
        ),
        (
            vec![placed(), cancelled_at(5)],
            ReservationStatus::Cancelled,
        ),
        (vec![placed(), expired()], ReservationStatus::Expired),
    ] {
        Fixture::with(())
            .given(given)
            .when(check_in_on(10))
            .then_expect_error(ReservationError::InvalidState { status });
    }
}

#[test]
fn a_checked_in_stay_can_no_longer_be_cancelled_or_moved() {
    let given = vec![
        placed(),
        confirmed_at(5),
        ReservationEvent::GuestCheckedIn {
            checked_in_at: at(600),
        },
    ];
    Fixture::with(())
        .given(given.clone())
        .when(cancel(700))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::CheckedIn,
        });
    Fixture::with(())
        .given(given)
        .when(change_to(11, 13, 700))
        .then_expect_error(ReservationError::InvalidState {
            status: ReservationStatus::CheckedIn,
        });
}

// --- Taxes: what the guest owes, pays and gets back ---------------------------------

/// The stay of [`details`] in a Lisbon hotel: VAT 6% in the price, a city tax of 2.00
/// per guest and night, and a cleaning fee of 25.00 per stay.
fn taxed() -> ReservationDetails {
    use crate::taxes::{BasisPoints, Tax, TaxKind, Taxes};
    let taxes = Taxes::parse(vec![
        Tax::parse(
            "VAT",
            TaxKind::Percent {
                rate: BasisPoints::from_percent(6.0).expect("rate"),
                included: true,
            },
        )
        .expect("tax"),
        Tax::parse(
            "CITY",
            TaxKind::PerPersonNight {
                amount: Cents::new(200),
                max_nights: Some(7),
            },
        )
        .expect("tax"),
        Tax::parse(
            "CLEAN",
            TaxKind::PerStay {
                amount: Cents::new(2_500),
            },
        )
        .expect("tax"),
    ])
    .expect("taxes");
    ReservationDetails { taxes, ..details() }
}

fn taxed_placed() -> ReservationEvent {
    ReservationEvent::ReservationHeld(taxed())
}

#[test]
fn a_taxed_stay_owes_its_price_and_every_tax_not_included() {
    let taxed = taxed().taxed();
    // VAT: the 6% share of 480.00 that holds it; city: 2 rooms x 1 guest x 2 nights.
    let lines: Vec<(&str, i64, bool)> = taxed
        .lines
        .iter()
        .map(|l| (l.code.as_str(), l.amount.get(), l.included))
        .collect();
    assert_eq!(
        lines,
        [
            ("VAT", 2_717, true),
            ("CITY", 800, false),
            ("CLEAN", 2_500, false)
        ]
    );
    assert_eq!(taxed.total_due, Cents::new(51_300));
    assert_eq!(details().total_due(), Cents::new(48_000));
}

#[test]
fn a_taxed_stay_is_confirmed_by_an_authorization_of_the_total_due_only() {
    let wrong = state(&[taxed_placed()])
        .decide(authorize("txn_1", 48_000, 5))
        .expect("decided");
    assert!(matches!(
        wrong.as_slice(),
        [ReservationEvent::LatePaymentRefunded { .. }]
    ));
    let right = state(&[taxed_placed()])
        .decide(authorize("txn_1", 51_300, 5))
        .expect("decided");
    assert!(matches!(
        right.as_slice(),
        [ReservationEvent::ReservationConfirmed { .. }]
    ));
}

/// A taxed stay paid in full (51,300) and captured.
fn taxed_and_captured() -> Vec<ReservationEvent> {
    vec![
        taxed_placed(),
        ReservationEvent::ReservationConfirmed {
            confirmed_at: at(5),
            payment: Some(card("txn_1", 51_300)),
            capture_due_at: Some(at(6)),
        },
        ReservationEvent::PaymentCaptured {
            amount_cents: Cents::new(51_300),
            gateway_key: ledger::capture_key(ReservationId::from_uuid(Uuid::from_u128(1)), 1),
            captured_at: at(6),
        },
    ]
}

#[test]
fn a_cancellation_gives_back_the_policys_share_of_the_room_and_every_tax_of_nights_not_stayed() {
    let events = state(&taxed_and_captured())
        .decide(ReservationCommand::Cancel {
            now: at(30),
            today: day(1),
            reason: "plans changed".into(),
            by: CancelledBy::Guest,
            refund_percents: vec![50],
        })
        .expect("cancelled");
    // Kept: half the room price (VAT is inside it); given back: the other half, the
    // city tax and the cleaning fee.
    let refunded: Vec<i64> = events
        .iter()
        .filter_map(|e| match e {
            ReservationEvent::PaymentRefunded { amount_cents, .. } => Some(amount_cents.get()),
            _ => None,
        })
        .collect();
    assert_eq!(refunded, [27_300]);
    assert!(matches!(
        events.first(),
        Some(ReservationEvent::ReservationCancelled { refund_cents, .. })
            if *refund_cents == Cents::new(27_300)
    ));
}

#[test]
fn a_tax_added_to_the_price_follows_the_share_a_cancellation_keeps() {
    use crate::taxes::{BasisPoints, Tax, TaxKind, Taxes};
    let added = Taxes::parse(vec![Tax::parse(
        "VAT",
        TaxKind::Percent {
            rate: BasisPoints::from_percent(10.0).expect("rate"),
            included: false,
        },
    )
    .expect("tax")])
    .expect("taxes");
    let stay = ReservationDetails {
        taxes: added,
        ..details()
    };
    assert_eq!(stay.total_due(), Cents::new(52_800));
    // Keeping 240.00 of the room keeps its 24.00 of tax.
    assert_eq!(stay.due_keeping(Cents::new(24_000)), Cents::new(26_400));
}

#[test]
fn a_no_show_of_a_taxed_stay_keeps_the_first_night_without_the_taxes_of_nights_not_stayed() {
    let events = state(&taxed_and_captured())
        .decide(ReservationCommand::RecordNoShow {
            now: at(60 * 24 * 10),
            today: day(10),
        })
        .expect("recorded");
    let refunded: Vec<i64> = events
        .iter()
        .filter_map(|e| match e {
            ReservationEvent::PaymentRefunded { amount_cents, .. } => Some(amount_cents.get()),
            _ => None,
        })
        .collect();
    // The first night is half the 480.00 (no first-night price kept: the average).
    assert_eq!(refunded, [51_300 - 24_000]);
}

// --- Several room types --------------------------------------------------------------

/// `details()` as two lines: the first non-refundable at 300.00, a second room type
/// under the house policy at 180.00 (480.00 in all).
fn two_lines() -> ReservationDetails {
    ReservationDetails {
        cancellation_policy: CancellationPolicy::NonRefundable,
        more_lines: vec![Line {
            room_type_id: RoomTypeId::parse(4).expect("valid id"),
            rooms: RoomCount::parse(1).expect("valid count"),
            guests: GuestCount::ONE,
            rate_plan_id: None,
            cancellation_policy: CancellationPolicy::HOUSE,
            total_cents: Cents::new(18_000),
            first_night_cents: Cents::new(9_000),
        }],
        ..details()
    }
}

#[test]
fn a_date_change_caps_each_lines_refund_by_its_own_policy() {
    let mut reservation = state(&[
        ReservationEvent::ReservationHeld(two_lines()),
        paid_at("txn_1", 5),
    ]);
    let move_out = ReservationCommand::ChangeDates {
        stay: stay(20, 22),
        total_cents: Cents::new(48_000),
        first_night_cents: Cents::new(24_000),
        more_line_prices: vec![LinePrice {
            total_cents: Cents::new(18_000),
            first_night_cents: Cents::new(9_000),
        }],
        now: at(10),
        refund_percent_now: 0,
        more_refund_percents_now: vec![100],
        capture_due_at: at(5_000),
        increment: None,
    };

    let moved = reservation.decide(move_out).expect("the stay moves");
    for event in &moved {
        reservation.apply_event(event);
    }
    let cancelled = reservation
        .decide(ReservationCommand::Cancel {
            now: at(20),
            today: day(1),
            reason: "plans changed".to_owned(),
            by: CancelledBy::Guest,
            refund_percents: vec![0, 100],
        })
        .expect("cancellable");

    // A line not refundable any more: the whole stay is captured at once.
    assert!(moved
        .iter()
        .any(|e| matches!(e, ReservationEvent::PaymentCaptured { .. })));
    assert!(moved.iter().any(|e| matches!(
        e,
        ReservationEvent::DatesChanged { refund_cap_percent: Some(0), more_refund_caps, .. }
            if more_refund_caps == &vec![100]
    )));
    // The refundable line is given back in full; the other is kept.
    assert!(
        cancelled.iter().any(|e| matches!(
            e,
            ReservationEvent::ReservationCancelled { refund_cents, .. }
                if *refund_cents == Cents::new(18_000)
        )),
        "{cancelled:?}"
    );
}
