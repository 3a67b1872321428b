//! `cancel`.

use super::*;
use crate::personal::Personal;

#[test]
fn cancelling_a_held_stay_releases_every_night() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 13, 2), &mut nights);
    let decision = cancel(
        &reservation,
        &of_king(&nights),
        at(5),
        "plans".into(),
        CancelledBy::Guest,
        TimeZone::UTC,
    )
    .expect("cancellable");
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::ReservationCancelled {
            cancelled_at: at(5),
            reason: Personal::Clear("plans".into()),
            by: CancelledBy::Guest,
            refund_cents: Cents::new(0),
        }]
    );
    assert_eq!(
        decision.nights,
        (10..13)
            .map(|d| (key(d), vec![rooms_released(1, 2, false)]))
            .collect::<Vec<_>>()
    );
}

#[test]
fn cancelling_a_confirmed_stay_releases_every_confirmed_night() {
    let mut nights = four_nights(3);
    let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    let decision = cancel(
        &reservation,
        &of_king(&nights),
        at(600),
        "closed".into(),
        CancelledBy::Hotel,
        TimeZone::UTC,
    )
    .expect("cancellable");
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_released(1, 1, true)]),
            (key(11), vec![rooms_released(1, 1, true)]),
        ]
    );
    apply(&decision, &mut reservation, &mut nights);
    for night in nights.values() {
        assert_eq!(
            (night.confirmed(), night.held(), night.remaining()),
            (0, 0, 3)
        );
    }
}

#[test]
fn cancelling_twice_is_invalid_state_and_releases_nothing() {
    let mut nights = four_nights(3);
    let mut reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    let first = cancel(
        &reservation,
        &of_king(&nights),
        at(5),
        "plans".into(),
        CancelledBy::Guest,
        TimeZone::UTC,
    )
    .expect("cancellable");
    apply(&first, &mut reservation, &mut nights);
    // Someone else takes the freed rooms; a second cancel must not free theirs.
    held(hold_cmd(2, 10, 12, 3), &mut nights);
    let second = cancel(
        &reservation,
        &of_king(&nights),
        at(6),
        "plans".into(),
        CancelledBy::Guest,
        TimeZone::UTC,
    );
    assert_eq!(
        second,
        Err(Rejection::InvalidState {
            status: ReservationStatus::Cancelled
        })
    );
}

#[test]
fn cancelling_a_lapsed_hold_is_invalid_state_expired() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    assert_eq!(
        cancel(
            &reservation,
            &of_king(&nights),
            at(15),
            "late".into(),
            CancelledBy::Guest,
            TimeZone::UTC
        ),
        Err(Rejection::InvalidState {
            status: ReservationStatus::Expired
        })
    );
}

#[test]
fn cancelling_an_unknown_reservation_is_not_found() {
    assert_eq!(
        cancel(
            &Reservation::default(),
            &of_king(&four_nights(1)),
            at(0),
            "?".into(),
            CancelledBy::Guest,
            TimeZone::UTC
        ),
        Err(Rejection::ReservationNotFound)
    );
}

#[test]
fn a_stay_can_be_cancelled_until_its_arrival_date_ends_in_the_hotels_timezone() {
    // Given a confirmed stay arriving on the 10th
    let mut nights = four_nights(3);
    let reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    // 00:30 UTC on the 11th: still the 10th in Los Angeles, already the 11th in Auckland
    let now = Utc
        .with_ymd_and_hms(2027, 6, 11, 0, 30, 0)
        .single()
        .expect("valid time");
    let cancel_in = |timezone| {
        cancel(
            &reservation,
            &of_king(&nights),
            now,
            "late".into(),
            CancelledBy::Guest,
            timezone,
        )
    };
    // Then it is cancelled in the one, and refused (nothing released) in the other
    let cancelled = cancel_in(zone("America/Los_Angeles")).expect("cancellable");
    assert_eq!(cancelled.nights.len(), 2);
    assert_eq!(
        cancel_in(zone("Pacific/Auckland")),
        Err(Rejection::ArrivalEnded { arrival: day(10) })
    );
}
