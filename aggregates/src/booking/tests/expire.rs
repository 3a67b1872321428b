//! `expire_hold`.

use super::*;

#[test]
fn expiring_a_lapsed_hold_drops_it_from_the_nights_that_still_carry_it() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    // Another stay on the 11th already dropped the lapsed hold there.
    let mut late = hold_cmd(2, 11, 12, 1);
    late.now = at(20);
    late.hold_expires_at = at(35);
    held(late, &mut nights);
    assert_eq!(nights[&day(11)].hold_of(&res(1)), None);

    let decision = expire_hold(&reservation, &of_king(&nights), at(30)).expect("lapsed");
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::HoldExpired { expired_at: at(15) }]
    );
    assert_eq!(
        decision.nights,
        vec![(
            key(10),
            vec![RoomNightEvent::HoldLapsed {
                reservation_id: res(1),
                rooms: 1,
                expired_at: at(15),
            }]
        )]
    );
}

#[test]
fn expiring_a_live_hold_is_hold_still_live() {
    let mut nights = four_nights(3);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    assert_eq!(
        expire_hold(&reservation, &of_king(&nights), at(14)),
        Err(Rejection::HoldStillLive)
    );
}

#[test]
fn expiring_twice_decides_nothing() {
    let mut nights = four_nights(3);
    let mut reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    let decision = expire_hold(&reservation, &of_king(&nights), at(20)).expect("lapsed");
    apply(&decision, &mut reservation, &mut nights);
    let again = expire_hold(&reservation, &of_king(&nights), at(25)).expect("idempotent");
    assert!(again.is_empty());
}

#[test]
fn expiring_a_confirmed_reservation_is_invalid_state() {
    let mut nights = four_nights(3);
    let reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    assert_eq!(
        expire_hold(&reservation, &of_king(&nights), at(60)),
        Err(Rejection::InvalidState {
            status: ReservationStatus::Confirmed
        })
    );
}

#[test]
fn expiring_an_unknown_reservation_is_not_found() {
    assert_eq!(
        expire_hold(&Reservation::default(), &of_king(&four_nights(1)), at(60)),
        Err(Rejection::ReservationNotFound)
    );
}
