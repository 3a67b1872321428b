//! Restrictions as the sale meets them: through `hold_stay`, every restriction refusing
//! a stay (naming itself and the night that carries it) and allowing one exactly at its
//! boundary; the restrictions of one plan against those of every plan; and
//! `change_dates` judged on the new stay.
//!
//! "Today" is 2027-06-01 at the hotel (Lisbon), so a stay arriving on the 10th is
//! booked nine days ahead.

use super::*;

fn try_hold(hotel: &Hotel, nights: &Nights, cmd: HoldStay) -> Result<Decision, Rejection> {
    hold_stay(
        hotel,
        &Reservation::default(),
        &of_king(nights),
        &BookingLimits::default(),
        cmd,
    )
}

/// Holds `start..end` (one room, base rate) on [`hotel`].
fn hold(nights: &Nights, start: u32, end: u32) -> Result<Decision, Rejection> {
    try_hold(&hotel(), nights, hold_cmd(1, start, end, 1))
}

/// The hold was decided: one room held on every night of the stay, and the reservation.
fn assert_holds(result: Result<Decision, Rejection>, start: u32, end: u32) {
    let decision = result.expect("the stay is allowed");
    let held_nights: Vec<RoomNightKey> = decision.nights.iter().map(|(k, _)| *k).collect();
    assert_eq!(held_nights, (start..end).map(key).collect::<Vec<_>>());
    assert!(matches!(
        decision.reservation.as_slice(),
        [ReservationEvent::ReservationHeld(_)]
    ));
}

/// Nights 10..=14 with three rooms each.
fn five_nights() -> Nights {
    let mut nights = four_nights(3);
    nights.extend(self::nights(&[(14, 3, 0, 18_000)]));
    nights
}

/// [`five_nights`] with `patch` on night `d` for every plan.
fn given(d: u32, patch: RestrictionsPatch) -> Nights {
    let mut nights = five_nights();
    restrict(&mut nights, d, None, patch);
    nights
}

fn min_stay(n: u32) -> RestrictionsPatch {
    RestrictionsPatch {
        min_stay: Some(Some(n)),
        ..RestrictionsPatch::default()
    }
}

fn max_stay(n: u32) -> RestrictionsPatch {
    RestrictionsPatch {
        max_stay: Some(Some(n)),
        ..RestrictionsPatch::default()
    }
}

fn stop_sell() -> RestrictionsPatch {
    RestrictionsPatch {
        stop_sell: Some(true),
        ..RestrictionsPatch::default()
    }
}

fn closed_to_arrival() -> RestrictionsPatch {
    RestrictionsPatch {
        closed_to_arrival: Some(true),
        ..RestrictionsPatch::default()
    }
}

// --- Each restriction, through hold_stay ---------------------------------------------

#[test]
fn a_stay_shorter_than_its_arrivals_min_stay_is_restricted_on_the_arrival_night() {
    let nights = given(10, min_stay(3));
    assert_eq!(
        hold(&nights, 10, 12),
        Err(restricted(Restriction::MinStay, 10))
    );
}

#[test]
fn a_stay_exactly_as_long_as_the_min_stay_is_allowed() {
    let nights = given(10, min_stay(3));
    assert_holds(hold(&nights, 10, 13), 10, 13);
}

#[test]
fn a_stay_longer_than_its_arrivals_max_stay_is_restricted_on_the_arrival_night() {
    let nights = given(10, max_stay(2));
    assert_eq!(
        hold(&nights, 10, 13),
        Err(restricted(Restriction::MaxStay, 10))
    );
}

#[test]
fn a_stay_exactly_as_long_as_the_max_stay_is_allowed() {
    let nights = given(10, max_stay(2));
    assert_holds(hold(&nights, 10, 12), 10, 12);
}

#[test]
fn a_stay_through_a_night_shorter_than_its_min_stay_through_is_restricted_on_that_night() {
    let nights = given(
        12,
        RestrictionsPatch {
            min_stay_through: Some(Some(3)),
            ..RestrictionsPatch::default()
        },
    );
    // Arriving the night before: the rule binds every night of the stay, not only the
    // arrival.
    assert_eq!(
        hold(&nights, 11, 13),
        Err(restricted(Restriction::MinStayThrough, 12))
    );
}

#[test]
fn a_stay_through_a_night_exactly_as_long_as_its_min_stay_through_is_allowed() {
    let nights = given(
        12,
        RestrictionsPatch {
            min_stay_through: Some(Some(3)),
            ..RestrictionsPatch::default()
        },
    );
    assert_holds(hold(&nights, 10, 13), 10, 13);
    // A stay that ends on that date does not stay through it.
    assert_holds(hold(&nights, 11, 12), 11, 12);
}

#[test]
fn arriving_on_a_night_closed_to_arrival_is_restricted() {
    let nights = given(11, closed_to_arrival());
    assert_eq!(
        hold(&nights, 11, 13),
        Err(restricted(Restriction::ClosedToArrival, 11))
    );
}

#[test]
fn staying_through_a_night_closed_to_arrival_is_allowed() {
    let nights = given(11, closed_to_arrival());
    assert_holds(hold(&nights, 10, 12), 10, 12);
}

#[test]
fn leaving_on_a_day_closed_to_departure_is_restricted_on_that_day() {
    // The 13th is the check-out day, not a night of the stay; it is loaded all the same.
    let nights = given(
        13,
        RestrictionsPatch {
            closed_to_departure: Some(true),
            ..RestrictionsPatch::default()
        },
    );
    assert!(nights.contains_key(&day(13)));
    assert_eq!(
        hold(&nights, 11, 13),
        Err(restricted(Restriction::ClosedToDeparture, 13))
    );
}

#[test]
fn arriving_on_or_staying_through_a_day_closed_to_departure_is_allowed() {
    let nights = given(
        13,
        RestrictionsPatch {
            closed_to_departure: Some(true),
            ..RestrictionsPatch::default()
        },
    );
    assert_holds(hold(&nights, 13, 14), 13, 14);
    assert_holds(hold(&nights, 12, 15), 12, 15);
    // Leaving the day before is allowed too.
    assert_holds(hold(&nights, 11, 12), 11, 12);
}

#[test]
fn a_stay_over_a_stopped_night_is_restricted_on_that_night() {
    let nights = given(12, stop_sell());
    assert_eq!(
        hold(&nights, 10, 13),
        Err(restricted(Restriction::StopSell, 12))
    );
    assert_eq!(
        hold(&nights, 12, 13),
        Err(restricted(Restriction::StopSell, 12))
    );
}

#[test]
fn stays_ending_on_a_stopped_night_or_starting_after_it_are_allowed() {
    let nights = given(12, stop_sell());
    assert_holds(hold(&nights, 10, 12), 10, 12);
    assert_holds(hold(&nights, 13, 15), 13, 15);
}

#[test]
fn booking_fewer_days_ahead_than_the_min_advance_is_restricted_on_arrival() {
    // Nine days ahead of the 10th.
    let nights = given(
        10,
        RestrictionsPatch {
            min_advance_days: Some(Some(10)),
            ..RestrictionsPatch::default()
        },
    );
    assert_eq!(
        hold(&nights, 10, 12),
        Err(restricted(Restriction::MinAdvanceDays, 10))
    );
}

#[test]
fn booking_exactly_the_min_advance_ahead_is_allowed() {
    let nights = given(
        10,
        RestrictionsPatch {
            min_advance_days: Some(Some(9)),
            ..RestrictionsPatch::default()
        },
    );
    assert_holds(hold(&nights, 10, 12), 10, 12);
}

#[test]
fn booking_more_days_ahead_than_the_max_advance_is_restricted_on_arrival() {
    let nights = given(
        10,
        RestrictionsPatch {
            max_advance_days: Some(Some(8)),
            ..RestrictionsPatch::default()
        },
    );
    assert_eq!(
        hold(&nights, 10, 12),
        Err(restricted(Restriction::MaxAdvanceDays, 10))
    );
}

#[test]
fn booking_exactly_the_max_advance_ahead_is_allowed() {
    let nights = given(
        10,
        RestrictionsPatch {
            max_advance_days: Some(Some(9)),
            ..RestrictionsPatch::default()
        },
    );
    assert_holds(hold(&nights, 10, 12), 10, 12);
}

#[test]
fn days_ahead_are_counted_from_the_hotels_date() {
    // 23:30 UTC on the 1st is 00:30 on the 2nd in Lisbon: eight days before the 10th.
    let mut cmd = hold_cmd(1, 10, 12, 1);
    cmd.now = Utc
        .with_ymd_and_hms(2027, 6, 1, 23, 30, 0)
        .single()
        .expect("valid time");
    cmd.hold_expires_at = cmd.now + chrono::Duration::minutes(15);
    let nights = given(
        10,
        RestrictionsPatch {
            min_advance_days: Some(Some(9)),
            ..RestrictionsPatch::default()
        },
    );
    assert_eq!(
        try_hold(&hotel(), &nights, cmd.clone()),
        Err(restricted(Restriction::MinAdvanceDays, 10))
    );
    let nights = given(
        10,
        RestrictionsPatch {
            max_advance_days: Some(Some(8)),
            ..RestrictionsPatch::default()
        },
    );
    assert_holds(try_hold(&hotel(), &nights, cmd), 10, 12);
}

#[test]
fn restrictions_are_judged_before_rooms() {
    let mut nights = nights(&[(10, 1, 0, 10_000), (11, 1, 0, 12_000)]);
    held(hold_cmd(9, 10, 12, 1), &mut nights);
    restrict(&mut nights, 10, None, closed_to_arrival());
    assert_eq!(
        hold(&nights, 10, 12),
        Err(restricted(Restriction::ClosedToArrival, 10))
    );
    // Without the restriction the same stay is sold out.
    restrict(
        &mut nights,
        10,
        None,
        RestrictionsPatch {
            closed_to_arrival: Some(false),
            ..RestrictionsPatch::default()
        },
    );
    assert_eq!(
        hold(&nights, 10, 12),
        Err(Rejection::SoldOut { night: day(10) })
    );
}

#[test]
fn a_restriction_that_was_cleared_no_longer_refuses() {
    let mut nights = given(10, min_stay(3));
    restrict(
        &mut nights,
        10,
        None,
        RestrictionsPatch {
            min_stay: Some(None),
            ..RestrictionsPatch::default()
        },
    );
    assert_holds(hold(&nights, 10, 11), 10, 11);
}

// --- One plan's restrictions and every plan's -----------------------------------------

#[test]
fn a_plans_own_restriction_binds_a_stay_sold_under_that_plan() {
    let mut nights = five_nights();
    restrict(&mut nights, 10, Some(FLEX), min_stay(3));
    assert_eq!(
        try_hold(
            &hotel_with_plans(),
            &nights,
            plan_hold_cmd(1, 10, 12, 1, Some(FLEX))
        ),
        Err(restricted(Restriction::MinStay, 10))
    );
}

#[test]
fn a_plans_own_restriction_does_not_bind_the_base_rate() {
    let mut nights = five_nights();
    restrict(&mut nights, 10, Some(FLEX), min_stay(3));
    assert_holds(
        try_hold(
            &hotel_with_plans(),
            &nights,
            plan_hold_cmd(1, 10, 12, 1, None),
        ),
        10,
        12,
    );
}

#[test]
fn a_plans_own_restriction_does_not_bind_another_plan_even_one_derived_from_it() {
    let mut nights = five_nights();
    restrict(&mut nights, 10, Some(FLEX), stop_sell());
    let hotel = hotel_with_plans();
    assert_holds(
        try_hold(&hotel, &nights, plan_hold_cmd(1, 10, 12, 1, Some(NONREF))),
        10,
        12,
    );
    assert_eq!(
        try_hold(&hotel, &nights, plan_hold_cmd(1, 10, 12, 1, Some(FLEX))),
        Err(restricted(Restriction::StopSell, 10))
    );
}

#[test]
fn a_restriction_for_every_plan_binds_every_plan_and_the_base_rate() {
    let mut nights = five_nights();
    restrict(&mut nights, 11, None, stop_sell());
    let hotel = hotel_with_plans();
    for plan in [None, Some(FLEX), Some(NONREF), Some(MEMBER)] {
        assert_eq!(
            try_hold(&hotel, &nights, plan_hold_cmd(1, 10, 13, 1, plan)),
            Err(restricted(Restriction::StopSell, 11)),
            "{plan:?}"
        );
    }
}

#[test]
fn under_a_plan_the_larger_of_the_two_minimum_stays_binds() {
    let hotel = hotel_with_plans();
    let flex = |start, end| plan_hold_cmd(1, start, end, 1, Some(FLEX));

    // The plan's own minimum is the stricter.
    let mut nights = five_nights();
    restrict(&mut nights, 10, None, min_stay(2));
    restrict(&mut nights, 10, Some(FLEX), min_stay(3));
    assert_eq!(
        try_hold(&hotel, &nights, flex(10, 12)),
        Err(restricted(Restriction::MinStay, 10))
    );
    assert_holds(try_hold(&hotel, &nights, flex(10, 13)), 10, 13);
    assert_holds(hold(&nights, 10, 12), 10, 12);

    // Every plan's minimum is the stricter: the plan's smaller one does not loosen it.
    let mut nights = five_nights();
    restrict(&mut nights, 10, None, min_stay(3));
    restrict(&mut nights, 10, Some(FLEX), min_stay(2));
    assert_eq!(
        try_hold(&hotel, &nights, flex(10, 12)),
        Err(restricted(Restriction::MinStay, 10))
    );
    assert_holds(try_hold(&hotel, &nights, flex(10, 13)), 10, 13);
}

#[test]
fn under_a_plan_the_smaller_of_the_two_maximum_stays_binds() {
    let hotel = hotel_with_plans();
    let flex = |start, end| plan_hold_cmd(1, start, end, 1, Some(FLEX));

    let mut nights = five_nights();
    restrict(&mut nights, 10, None, max_stay(3));
    restrict(&mut nights, 10, Some(FLEX), max_stay(2));
    assert_eq!(
        try_hold(&hotel, &nights, flex(10, 13)),
        Err(restricted(Restriction::MaxStay, 10))
    );
    assert_holds(try_hold(&hotel, &nights, flex(10, 12)), 10, 12);
    assert_holds(hold(&nights, 10, 13), 10, 13);

    let mut nights = five_nights();
    restrict(&mut nights, 10, None, max_stay(2));
    restrict(&mut nights, 10, Some(FLEX), max_stay(3));
    assert_eq!(
        try_hold(&hotel, &nights, flex(10, 13)),
        Err(restricted(Restriction::MaxStay, 10))
    );
}

#[test]
fn a_closure_of_either_set_closes_the_night_to_the_plan() {
    let hotel = hotel_with_plans();
    let mut nights = five_nights();
    restrict(&mut nights, 10, None, min_stay(2));
    restrict(&mut nights, 10, Some(FLEX), closed_to_arrival());
    assert_eq!(
        try_hold(&hotel, &nights, plan_hold_cmd(1, 10, 12, 1, Some(FLEX))),
        Err(restricted(Restriction::ClosedToArrival, 10))
    );
    assert_holds(
        try_hold(&hotel, &nights, plan_hold_cmd(1, 10, 12, 1, Some(NONREF))),
        10,
        12,
    );
}

// --- change_dates -------------------------------------------------------------------

fn move_to(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &Nights,
    start: u32,
    end: u32,
) -> Result<Decision, Rejection> {
    change_dates(
        hotel,
        reservation,
        &of_king(nights),
        &BookingLimits::default(),
        ChangeDates {
            new_stay: stay(start, end),
            expected_total_cents: None,
            now: at(5),
        },
        None,
    )
}

#[test]
fn moving_to_arrive_on_a_night_closed_to_arrival_is_restricted() {
    let mut nights = five_nights();
    let reservation = held(hold_cmd(1, 10, 11, 1), &mut nights);
    restrict(&mut nights, 12, None, closed_to_arrival());
    assert_eq!(
        move_to(&hotel(), &reservation, &nights, 12, 14),
        Err(restricted(Restriction::ClosedToArrival, 12))
    );
}

#[test]
fn moving_to_a_stay_shorter_than_the_new_arrivals_min_stay_is_restricted() {
    let mut nights = five_nights();
    let reservation = held(hold_cmd(1, 10, 11, 1), &mut nights);
    restrict(&mut nights, 12, None, min_stay(2));
    assert_eq!(
        move_to(&hotel(), &reservation, &nights, 12, 13),
        Err(restricted(Restriction::MinStay, 12))
    );
    let decision = move_to(&hotel(), &reservation, &nights, 12, 14).expect("long enough");
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_released(1, 1, false)]),
            (key(12), vec![rooms_held(1, 1)]),
            (key(13), vec![rooms_held(1, 1)]),
        ]
    );
}

#[test]
fn moving_to_leave_on_a_day_closed_to_departure_is_restricted() {
    let mut nights = five_nights();
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    restrict(
        &mut nights,
        13,
        None,
        RestrictionsPatch {
            closed_to_departure: Some(true),
            ..RestrictionsPatch::default()
        },
    );
    assert_eq!(
        move_to(&hotel(), &reservation, &nights, 11, 13),
        Err(restricted(Restriction::ClosedToDeparture, 13))
    );
}

#[test]
fn moving_onto_a_stopped_night_the_stay_does_not_hold_is_restricted() {
    let mut nights = five_nights();
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    restrict(&mut nights, 12, None, stop_sell());
    assert_eq!(
        move_to(&hotel(), &reservation, &nights, 11, 13),
        Err(restricted(Restriction::StopSell, 12))
    );
}

#[test]
fn a_stay_keeping_a_stopped_night_it_already_holds_may_still_move() {
    let mut nights = five_nights();
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    restrict(&mut nights, 11, None, stop_sell());
    let decision = move_to(&hotel(), &reservation, &nights, 11, 13).expect("keeps the 11th");
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_released(1, 1, false)]),
            (key(12), vec![rooms_held(1, 1)]),
        ]
    );
    // The stop-sell still ends sales of that night to anyone else.
    assert_eq!(
        try_hold(&hotel(), &nights, hold_cmd(2, 11, 13, 1)),
        Err(restricted(Restriction::StopSell, 11))
    );
}

#[test]
fn a_confirmed_stay_keeping_a_stopped_night_may_still_move() {
    let mut nights = five_nights();
    let reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    restrict(&mut nights, 10, None, stop_sell());
    restrict(&mut nights, 11, None, stop_sell());
    let decision = move_to(&hotel(), &reservation, &nights, 10, 13).expect("keeps both");
    assert_eq!(
        decision.nights,
        vec![(
            key(12),
            vec![RoomNightEvent::RoomsBooked {
                reservation_id: res(1),
                rooms: 1,
            }]
        )]
    );
}

#[test]
fn moving_is_judged_by_the_restrictions_of_the_stays_own_plan() {
    let hotel = hotel_with_plans();
    let mut nights = five_nights();
    let under_flex = held_at(&hotel, plan_hold_cmd(1, 10, 11, 1, Some(FLEX)), &mut nights);
    let at_base = held_at(&hotel, plan_hold_cmd(2, 10, 11, 1, None), &mut nights);
    restrict(&mut nights, 12, Some(FLEX), closed_to_arrival());
    assert_eq!(
        move_to(&hotel, &under_flex, &nights, 12, 13),
        Err(restricted(Restriction::ClosedToArrival, 12))
    );
    assert!(move_to(&hotel, &at_base, &nights, 12, 13).is_ok());
}
