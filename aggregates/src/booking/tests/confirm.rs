//! `confirm`.

use super::*;

#[test]
fn confirming_a_live_hold_confirms_every_night() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = confirm(&reservation, &of_king(&nights), at(14)).expect("the hold is live");
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::ReservationConfirmed {
            confirmed_at: at(14),
            payment: None,
            capture_due_at: None,
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
fn confirming_twice_decides_nothing() {
    let mut nights = four_nights(3);
    let reservation = confirmed(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = confirm(&reservation, &of_king(&nights), at(30)).expect("idempotent");
    assert!(decision.is_empty());
}

#[test]
fn confirming_a_lapsed_hold_is_hold_expired() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    assert_eq!(
        confirm(&reservation, &of_king(&nights), at(15)),
        Err(Rejection::HoldExpired { expired_at: at(15) })
    );
}

#[test]
fn confirming_when_a_night_has_lost_the_hold_refuses_the_whole_confirmation() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let mut broken = nights.clone();
    broken
        .get_mut(&day(11))
        .expect("night exists")
        .apply_event(&rooms_released(1, 2, false));
    assert_eq!(
        confirm(&reservation, &of_king(&broken), at(5)),
        Err(Rejection::HoldExpired { expired_at: at(15) })
    );
}

#[test]
fn confirming_a_cancelled_reservation_is_invalid_state() {
    let mut nights = four_nights(3);
    let mut reservation = held(hold_cmd(1, 10, 12, 2), &mut nights);
    let decision = cancel(
        &reservation,
        &of_king(&nights),
        at(1),
        "x".into(),
        CancelledBy::Guest,
        TimeZone::UTC,
    )
    .expect("cancellable");
    apply(&decision, &mut reservation, &mut nights);
    assert_eq!(
        confirm(&reservation, &of_king(&nights), at(2)),
        Err(Rejection::InvalidState {
            status: ReservationStatus::Cancelled
        })
    );
}

#[test]
fn confirming_an_unknown_reservation_is_not_found() {
    assert_eq!(
        confirm(&Reservation::default(), &of_king(&four_nights(1)), at(0)),
        Err(Rejection::ReservationNotFound)
    );
}
