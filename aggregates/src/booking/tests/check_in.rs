//! `check_in` and `check_out`.

use super::*;

/// 16:00 on day `d` of June 2027 at a hotel on UTC.
fn afternoon(d: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, d, 16, 0, 0)
        .single()
        .expect("valid time")
}

/// A stay of the 10th, 11th and 12th (2 rooms), confirmed and checked in on the 10th.
fn checked_in_stay(nights: &mut Nights) -> Reservation {
    let mut reservation = confirmed(hold_cmd(1, 10, 13, 2), nights);
    let decision = check_in(&reservation, afternoon(10), TimeZone::UTC).expect("checked in");
    assert!(decision.nights.is_empty(), "a check-in changes no night");
    apply(&decision, &mut reservation, nights);
    reservation
}

#[test]
fn leaving_early_gives_the_nights_after_today_back_to_sale() {
    // Given a checked-in stay of the 10th to the 12th
    let mut nights = four_nights(3);
    let mut reservation = checked_in_stay(&mut nights);

    // When the guest leaves on the 11th
    let decision =
        check_out(&reservation, &nights, afternoon(11), TimeZone::UTC).expect("checked out");

    // Then the 12th goes back to sale, the 10th and 11th stay sold
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::GuestCheckedOut {
            checked_out_at: afternoon(11),
            released_from: day(12),
        }]
    );
    assert_eq!(
        decision.nights,
        vec![(key(12), vec![rooms_released(1, 2, true)])]
    );
    apply(&decision, &mut reservation, &mut nights);
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::CheckedOut)
    );
    for (d, sold) in [(10, 2), (11, 2), (12, 0)] {
        assert_eq!(nights[&day(d)].confirmed(), sold, "night {d}");
        assert_eq!(reservation.occupies(day(d)), sold > 0, "night {d}");
    }
}

#[test]
fn leaving_on_the_last_night_or_the_departure_day_gives_nothing_back() {
    for leaves in [12, 13, 14] {
        let mut nights = four_nights(3);
        let reservation = checked_in_stay(&mut nights);
        let decision = check_out(&reservation, &nights, afternoon(leaves), TimeZone::UTC)
            .expect("checked out");
        assert!(decision.nights.is_empty(), "left on the {leaves}th");
        assert_eq!(decision.reservation.len(), 1);
    }
}

#[test]
fn only_a_checked_in_stay_can_be_checked_out_and_only_once() {
    let mut nights = four_nights(3);
    let confirmed_stay = confirmed(hold_cmd(1, 10, 13, 2), &mut nights);
    assert_eq!(
        check_out(&confirmed_stay, &nights, afternoon(11), TimeZone::UTC),
        Err(Rejection::InvalidState {
            status: ReservationStatus::Confirmed
        })
    );
    let mut nights = four_nights(3);
    let mut reservation = checked_in_stay(&mut nights);
    let first = check_out(&reservation, &nights, afternoon(11), TimeZone::UTC).expect("out");
    apply(&first, &mut reservation, &mut nights);
    assert_eq!(
        check_out(&reservation, &nights, afternoon(11), TimeZone::UTC),
        Err(Rejection::InvalidState {
            status: ReservationStatus::CheckedOut
        })
    );
}

#[test]
fn the_day_the_guest_leaves_is_the_hotels() {
    // 02:00 UTC on the 12th is still the 11th in Los Angeles: the 12th goes back there
    let mut nights = four_nights(3);
    let reservation = checked_in_stay(&mut nights);
    let night_of_the_11th = Utc
        .with_ymd_and_hms(2027, 6, 12, 2, 0, 0)
        .single()
        .expect("valid time");
    let decision = check_out(
        &reservation,
        &nights,
        night_of_the_11th,
        zone("America/Los_Angeles"),
    )
    .expect("checked out");
    assert_eq!(decision.nights.len(), 1);
}
