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
    let decision = check_out(
        &reservation,
        &of_king(&nights),
        afternoon(11),
        TimeZone::UTC,
    )
    .expect("checked out");

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
        let decision = check_out(
            &reservation,
            &of_king(&nights),
            afternoon(leaves),
            TimeZone::UTC,
        )
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
        check_out(
            &confirmed_stay,
            &of_king(&nights),
            afternoon(11),
            TimeZone::UTC
        ),
        Err(Rejection::InvalidState {
            status: ReservationStatus::Confirmed
        })
    );
    let mut nights = four_nights(3);
    let mut reservation = checked_in_stay(&mut nights);
    let first = check_out(
        &reservation,
        &of_king(&nights),
        afternoon(11),
        TimeZone::UTC,
    )
    .expect("out");
    apply(&first, &mut reservation, &mut nights);
    assert_eq!(
        check_out(
            &reservation,
            &of_king(&nights),
            afternoon(11),
            TimeZone::UTC
        ),
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
        &of_king(&nights),
        night_of_the_11th,
        zone("America/Los_Angeles"),
    )
    .expect("checked out");
    assert_eq!(decision.nights.len(), 1);
}

#[test]
fn a_guest_who_never_came_keeps_the_first_night_and_gives_the_others_back() {
    // Given a confirmed stay of the 10th to the 12th (2 rooms), never checked in
    let mut nights = four_nights(3);
    let mut reservation = confirmed(hold_cmd(1, 10, 13, 2), &mut nights);

    // When staff record a no-show on the evening of the 10th
    let decision = record_no_show(
        &reservation,
        &of_king(&nights),
        afternoon(10),
        TimeZone::UTC,
    )
    .expect("no-show");

    // Then the 11th and 12th go back to sale, the 10th stays sold
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::NoShowRecorded {
            recorded_at: afternoon(10),
            released_from: day(11),
        }]
    );
    assert_eq!(
        decision.nights,
        vec![
            (key(11), vec![rooms_released(1, 2, true)]),
            (key(12), vec![rooms_released(1, 2, true)]),
        ]
    );
    apply(&decision, &mut reservation, &mut nights);
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::NoShow)
    );
    for (d, sold) in [(10, 2), (11, 0), (12, 0)] {
        assert_eq!(nights[&day(d)].confirmed(), sold, "night {d}");
        assert_eq!(reservation.occupies(day(d)), sold > 0, "night {d}");
    }
    // And the guest can no longer be checked in, nor the no-show recorded again
    assert_eq!(
        check_in(&reservation, afternoon(11), TimeZone::UTC),
        Err(Rejection::InvalidState {
            status: ReservationStatus::NoShow
        })
    );
    assert!(record_no_show(
        &reservation,
        &of_king(&nights),
        afternoon(11),
        TimeZone::UTC
    )
    .is_err());
}

#[test]
fn a_no_show_is_too_early_before_the_arrival_date_and_only_for_a_confirmed_stay() {
    let mut nights = four_nights(3);
    let reservation = confirmed(hold_cmd(1, 10, 13, 2), &mut nights);
    assert_eq!(
        record_no_show(&reservation, &of_king(&nights), afternoon(9), TimeZone::UTC),
        Err(Rejection::TooEarly { arrival: day(10) })
    );
    let mut nights = four_nights(3);
    let checked_in = checked_in_stay(&mut nights);
    assert_eq!(
        record_no_show(&checked_in, &of_king(&nights), afternoon(11), TimeZone::UTC),
        Err(Rejection::InvalidState {
            status: ReservationStatus::CheckedIn
        })
    );
    let mut nights = four_nights(3);
    let held_stay = held(hold_cmd(1, 10, 13, 2), &mut nights);
    assert!(record_no_show(&held_stay, &of_king(&nights), afternoon(10), TimeZone::UTC).is_err());
}

#[test]
fn a_one_night_no_show_gives_nothing_back() {
    let mut nights = four_nights(3);
    let reservation = confirmed(hold_cmd(1, 10, 11, 1), &mut nights);
    let decision = record_no_show(
        &reservation,
        &of_king(&nights),
        afternoon(11),
        TimeZone::UTC,
    )
    .expect("no-show");
    assert!(decision.nights.is_empty());
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::NoShowRecorded {
            recorded_at: afternoon(11),
            released_from: day(11),
        }]
    );
}

/// `hour`:`minute` UTC on day `d` of June 2027.
fn utc(d: u32, hour: u32, minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, d, hour, minute, 0)
        .single()
        .expect("valid time")
}

#[test]
fn the_no_show_worker_waits_for_the_arrival_date_to_end_at_the_hotel_and_its_grace() {
    // Given a stay arriving on the 10th at a hotel in Lisbon (UTC+1 in June) and a
    // grace of four hours
    let mut nights = four_nights(3);
    let reservation = confirmed(hold_cmd(1, 10, 13, 2), &mut nights);
    let grace = chrono::Duration::hours(4);
    let lisbon = zone("Europe/Lisbon");
    let lapsed = |now| {
        record_lapsed_no_show(&reservation, &of_king(&nights), now, lisbon, grace).expect("decided")
    };

    // When the worker looks at 02:59 on the 11th in Lisbon (01:59 UTC): nothing yet
    assert!(lapsed(utc(11, 2, 59)).is_empty());

    // When it looks at 04:00 on the 11th in Lisbon (03:00 UTC): a no-show, the first
    // night kept, the others given back
    let decision = lapsed(utc(11, 3, 0));
    assert_eq!(
        decision.reservation.first(),
        Some(&ReservationEvent::NoShowRecorded {
            recorded_at: utc(11, 3, 0),
            released_from: day(11),
        })
    );
    assert_eq!(decision.nights.len(), 2, "the 11th and the 12th");
}

#[test]
fn the_no_show_worker_leaves_a_guest_who_came_alone() {
    let mut nights = four_nights(3);
    let reservation = checked_in_stay(&mut nights);
    let decision = record_lapsed_no_show(
        &reservation,
        &of_king(&nights),
        utc(12, 12, 0),
        TimeZone::UTC,
        chrono::Duration::zero(),
    )
    .expect("decided");
    assert!(decision.is_empty());
}
