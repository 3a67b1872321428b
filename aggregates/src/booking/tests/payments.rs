//! Payments and refunds: the refund policy, `apply_authorization`, `decline_payment`.

use super::*;
use crate::personal::Personal;

fn lisbon() -> TimeZone {
    zone("Europe/Lisbon")
}

fn card(txn: &str, amount_cents: i64) -> Payment {
    Payment {
        provider_txn_id: txn.to_owned(),
        amount_cents: Cents::new(amount_cents),
    }
}

/// Held for nights 10..12 (2 rooms: 2 x (100 + 120) euros) and paid with `txn_1`.
fn paid(nights: &mut Nights) -> Reservation {
    let mut reservation = held(hold_cmd(1, 10, 12, 2), nights);
    let decision = apply_authorization(
        &reservation,
        &of_king(nights),
        at(5),
        card("txn_1", 44_000),
        lisbon(),
    )
    .expect("a live hold takes the payment");
    apply(&decision, &mut reservation, nights);
    reservation
}

/// 2027-06-10 15:00 in Lisbon (summer time, UTC+1) is 14:00 UTC.
fn hours_before_check_in(hours: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, 10, 14, 0, 0)
        .single()
        .expect("valid time")
        - chrono::Duration::hours(hours)
}

#[test]
fn check_in_is_three_in_the_afternoon_at_the_hotel() {
    assert_eq!(
        check_in_instant(day(10), zone("Europe/Lisbon")),
        hours_before_check_in(0)
    );
    assert_eq!(
        check_in_instant(day(10), zone("Asia/Tokyo")),
        Utc.with_ymd_and_hms(2027, 6, 10, 6, 0, 0)
            .single()
            .expect("valid")
    );
}

#[test]
fn a_guest_cancelling_72_hours_or_more_before_check_in_gets_everything_back() {
    let by = CancelledBy::Guest;
    let tz = zone("Europe/Lisbon");
    assert_eq!(
        refund_cents(
            Cents::new(44_000),
            day(10),
            tz,
            hours_before_check_in(72),
            by
        ),
        Cents::new(44_000)
    );
    assert_eq!(
        refund_cents(
            Cents::new(44_000),
            day(10),
            tz,
            hours_before_check_in(500),
            by
        ),
        Cents::new(44_000)
    );
}

#[test]
fn a_guest_cancelling_between_24_and_72_hours_before_gets_half_rounded_down() {
    let by = CancelledBy::Guest;
    let tz = zone("Europe/Lisbon");
    let just_under_72 = hours_before_check_in(72) + chrono::Duration::seconds(1);
    assert_eq!(
        refund_cents(Cents::new(44_001), day(10), tz, just_under_72, by),
        Cents::new(22_000)
    );
    assert_eq!(
        refund_cents(
            Cents::new(44_000),
            day(10),
            tz,
            hours_before_check_in(24),
            by
        ),
        Cents::new(22_000)
    );
}

#[test]
fn a_guest_cancelling_less_than_24_hours_before_gets_nothing_back() {
    let by = CancelledBy::Guest;
    let tz = zone("Europe/Lisbon");
    let just_under_24 = hours_before_check_in(24) + chrono::Duration::seconds(1);
    assert_eq!(
        refund_cents(Cents::new(44_000), day(10), tz, just_under_24, by),
        Cents::new(0)
    );
    assert_eq!(
        refund_cents(
            Cents::new(44_000),
            day(10),
            tz,
            hours_before_check_in(-5),
            by
        ),
        Cents::new(0)
    );
}

#[test]
fn the_policy_counts_hours_in_the_hotels_timezone() {
    // 73 hours before 15:00 in Lisbon is only 64 hours before 15:00 in Tokyo.
    let now = hours_before_check_in(73);
    assert_eq!(
        refund_cents(
            Cents::new(100),
            day(10),
            zone("Europe/Lisbon"),
            now,
            CancelledBy::Guest
        ),
        Cents::new(100)
    );
    assert_eq!(
        refund_cents(
            Cents::new(100),
            day(10),
            zone("Asia/Tokyo"),
            now,
            CancelledBy::Guest
        ),
        Cents::new(50)
    );
}

#[test]
fn a_hotel_cancelling_gives_everything_back_even_at_the_last_minute() {
    let now = hours_before_check_in(1);
    assert_eq!(
        refund_cents(
            Cents::new(44_000),
            day(10),
            zone("UTC"),
            now,
            CancelledBy::Hotel
        ),
        Cents::new(44_000)
    );
    assert_eq!(
        refund_cents(Cents::new(0), day(10), zone("UTC"), now, CancelledBy::Hotel),
        Cents::new(0)
    );
}

#[test]
fn cancelling_a_paid_stay_refunds_by_the_policy_and_releases_its_nights() {
    let mut nights = four_nights(3);
    let reservation = paid(&mut nights);
    let decision = cancel(
        &reservation,
        &of_king(&nights),
        hours_before_check_in(30),
        "plans".into(),
        CancelledBy::Guest,
        zone("Europe/Lisbon"),
    )
    .expect("cancellable");
    // Past the capture deadline but not captured yet: the half the hotel keeps is
    // captured, the rest of the authorization released (nothing to refund).
    assert_eq!(
        decision.reservation,
        vec![
            ReservationEvent::ReservationCancelled {
                cancelled_at: hours_before_check_in(30),
                reason: Personal::Clear("plans".into()),
                by: CancelledBy::Guest,
                refund_cents: Cents::ZERO,
            },
            ReservationEvent::PaymentCaptured {
                amount_cents: Cents::new(22_000),
                gateway_key: format!("{}:capture", res(1).as_uuid()),
                captured_at: hours_before_check_in(30),
            },
        ]
    );
    assert_eq!(decision.nights.len(), 2);
}

#[test]
fn cancelling_an_unpaid_hold_refunds_nothing() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = cancel(
        &reservation,
        &of_king(&nights),
        at(1),
        "plans".into(),
        CancelledBy::Hotel,
        zone("Europe/Lisbon"),
    )
    .expect("cancellable");
    assert!(matches!(
        decision.reservation.as_slice(),
        [ReservationEvent::ReservationCancelled {
            refund_cents: Cents::ZERO,
            ..
        }]
    ));
}

#[test]
fn an_authorization_for_a_live_hold_confirms_every_night() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = apply_authorization(
        &reservation,
        &of_king(&nights),
        at(5),
        card("txn_1", 44_000),
        lisbon(),
    )
    .expect("a live hold takes the payment");
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::ReservationConfirmed {
            confirmed_at: at(5),
            payment: Some(card("txn_1", 44_000)),
            capture_due_at: Some(hours_before_check_in(72)),
        }]
    );
    let hold_confirmed = RoomNightEvent::HoldConfirmed {
        reservation_id: res(1),
        rooms: 2,
    };
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![hold_confirmed.clone()]),
            (key(11), vec![hold_confirmed]),
        ]
    );
}

#[test]
fn an_authorization_after_the_hold_lapsed_releases_the_nights_and_is_refunded() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = apply_authorization(
        &reservation,
        &of_king(&nights),
        at(16),
        card("txn_1", 44_000),
        lisbon(),
    )
    .expect("decided");
    assert_eq!(
        decision.reservation,
        vec![
            ReservationEvent::HoldExpired { expired_at: at(15) },
            ReservationEvent::LatePaymentRefunded {
                provider_txn_id: "txn_1".into(),
                amount_cents: Cents::new(44_000),
                refunded_at: at(16),
            },
        ]
    );
    let lapsed = RoomNightEvent::HoldLapsed {
        reservation_id: res(1),
        rooms: 2,
        expired_at: at(15),
    };
    assert_eq!(
        decision.nights,
        vec![(key(10), vec![lapsed.clone()]), (key(11), vec![lapsed])]
    );
}

#[test]
fn an_authorization_after_a_cancellation_touches_no_night() {
    let mut nights = four_nights(3);
    let mut reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let cancelled = cancel(
        &reservation,
        &of_king(&nights),
        at(2),
        "x".into(),
        CancelledBy::Guest,
        zone("UTC"),
    )
    .expect("cancellable");
    apply(&cancelled, &mut reservation, &mut nights);
    let decision = apply_authorization(
        &reservation,
        &of_king(&nights),
        at(3),
        card("txn_1", 44_000),
        lisbon(),
    )
    .expect("decided");
    assert!(decision.nights.is_empty());
    assert!(matches!(
        decision.reservation.as_slice(),
        [ReservationEvent::LatePaymentRefunded { .. }]
    ));
}

#[test]
fn the_same_authorization_again_decides_nothing() {
    let mut nights = four_nights(3);
    let reservation = paid(&mut nights);
    let decision = apply_authorization(
        &reservation,
        &of_king(&nights),
        at(6),
        card("txn_1", 44_000),
        lisbon(),
    )
    .expect("decided");
    assert!(decision.is_empty());
}

#[test]
fn a_declined_card_releases_every_held_night() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = decline_payment(&reservation, &of_king(&nights), at(5), Some("txn_1".into()))
        .expect("decided");
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::PaymentDeclined {
            declined_at: at(5),
            provider_txn_id: Some("txn_1".into()),
        }]
    );
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_released(1, 2, false)]),
            (key(11), vec![rooms_released(1, 2, false)]),
        ]
    );
}

#[test]
fn a_decline_after_payment_decides_nothing() {
    let mut nights = four_nights(3);
    let reservation = paid(&mut nights);
    let decision = decline_payment(&reservation, &of_king(&nights), at(6), Some("txn_1".into()))
        .expect("decided");
    assert!(decision.is_empty());
}
