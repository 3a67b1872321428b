//! `change_dates`.

use super::*;

fn change(
    reservation: &Reservation,
    nights: &Nights,
    new_stay: StayDates,
    expected: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    change_dates(
        &hotel(),
        reservation,
        &of_king(nights),
        &BookingLimits::default(),
        ChangeDates {
            new_stay,
            expected_total_cents: expected.map(Cents::new),
            now,
        },
        None,
    )
}

#[test]
fn changing_the_dates_of_a_hold_releases_old_nights_holds_new_ones_and_leaves_the_overlap() {
    let mut nights = four_nights(2);
    let reservation = held(hold_cmd(1, 10, 13, 2), &mut nights);
    let decision = change(&reservation, &nights, stay(11, 14), None, at(5)).expect("movable");
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_released(1, 2, false)]),
            (key(13), vec![rooms_held(1, 2)]),
        ]
    );
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::DatesChanged {
            more_refund_caps: Vec::new(),
            more_line_prices: Vec::new(),
            stay: stay(11, 14),
            total_cents: Cents::new(2 * (12_000 + 14_000 + 16_000)),
            changed_at: at(5),
            first_night_cents: Some(Cents::new(2 * 12_000)),
            refund_cap_percent: None,
            capture_due_at: None,
        }]
    );
}

#[test]
fn a_confirmed_reservation_moves_with_rooms_booked() {
    let mut nights = four_nights(1);
    let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    let decision = change(&reservation, &nights, stay(11, 13), None, at(60)).expect("movable");
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_released(1, 1, true)]),
            (
                key(12),
                vec![RoomNightEvent::RoomsBooked {
                    reservation_id: res(1),
                    rooms: 1,
                }]
            ),
        ]
    );
    apply(&decision, &mut reservation, &mut nights);
    assert_eq!(nights[&day(10)].remaining(), 1);
    assert_eq!(nights[&day(11)].confirmed_for(&res(1)), Some(1));
    assert_eq!(nights[&day(12)].confirmed_for(&res(1)), Some(1));
    assert_eq!(
        reservation.details().map(|d| (d.stay, d.total_cents)),
        Some((stay(11, 13), Cents::new(26_000)))
    );
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::Confirmed)
    );
}

#[test]
fn moving_onto_a_sold_out_night_is_refused_naming_it() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    held(hold_cmd(2, 13, 14, 1), &mut nights);
    assert_eq!(
        change(&reservation, &nights, stay(11, 14), None, at(5)),
        Err(Rejection::SoldOut { night: day(13) })
    );
}

#[test]
fn moving_onto_a_night_without_inventory_is_refused_naming_it() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 12, 14, 1), &mut nights);
    assert_eq!(
        change(&reservation, &nights, stay(13, 15), None, at(5)),
        Err(Rejection::NoInventory { night: day(14) })
    );
}

#[test]
fn moving_with_a_stale_expected_total_is_price_changed() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    assert_eq!(
        change(&reservation, &nights, stay(11, 13), Some(22_000), at(5)),
        Err(Rejection::PriceChanged {
            total_cents: Cents::new(26_000)
        })
    );
    assert!(change(&reservation, &nights, stay(11, 13), Some(26_000), at(5)).is_ok());
}

#[test]
fn moving_to_the_same_dates_is_invalid() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    assert_eq!(
        invalid_field(change(&reservation, &nights, stay(10, 12), None, at(5))),
        "end_date"
    );
}

#[test]
fn moving_a_lapsed_hold_is_hold_expired() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    assert_eq!(
        change(&reservation, &nights, stay(11, 13), None, at(15)),
        Err(Rejection::HoldExpired { expired_at: at(15) })
    );
}

#[test]
fn moving_a_cancelled_reservation_is_invalid_state() {
    let mut nights = four_nights(1);
    let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    let decision = cancel(
        &reservation,
        &of_king(&nights),
        at(2),
        "x".into(),
        CancelledBy::Hotel,
        TimeZone::UTC,
    )
    .expect("cancellable");
    apply(&decision, &mut reservation, &mut nights);
    assert_eq!(
        change(&reservation, &nights, stay(11, 13), None, at(3)),
        Err(Rejection::InvalidState {
            status: ReservationStatus::Cancelled
        })
    );
}

#[test]
fn moving_outside_the_booking_limits_is_invalid() {
    let mut nights = four_nights(1);
    let reservation = held(hold_cmd(1, 10, 12, 1), &mut nights);
    let long = StayDates::parse(day(10), day(10) + chrono::Days::new(31)).expect("valid");
    assert_eq!(
        invalid_field(change(&reservation, &nights, long, None, at(5))),
        "end_date"
    );
    let past = StayDates::parse(
        NaiveDate::from_ymd_opt(2027, 5, 31).expect("valid date"),
        day(11),
    )
    .expect("valid");
    assert_eq!(
        invalid_field(change(&reservation, &nights, past, None, at(5))),
        "start_date"
    );
}

#[test]
fn moving_an_unknown_reservation_is_not_found() {
    assert_eq!(
        change(
            &Reservation::default(),
            &four_nights(1),
            stay(10, 11),
            None,
            at(0)
        ),
        Err(Rejection::ReservationNotFound)
    );
}

// --- A dearer move being paid for ---------------------------------------------------

fn hold_move(
    reservation: &Reservation,
    nights: &Nights,
    new_stay: StayDates,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Decision, Rejection> {
    hold_date_change(
        &hotel(),
        reservation,
        &of_king(nights),
        &BookingLimits::default(),
        new_stay,
        until,
        now,
    )
}

#[test]
fn while_the_card_is_asked_the_nights_a_move_enters_are_held_then_sold_to_it() {
    // Given a confirmed stay of the 10th and 11th, and one room a night
    let mut nights = four_nights(1);
    let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);

    // When a move to the 10th..13th is being paid for
    let held = hold_move(&reservation, &nights, stay(10, 13), at(90), at(60)).expect("held");

    // Then the 12th is held for it, and the stay itself is unchanged
    assert_eq!(
        held.reservation,
        vec![ReservationEvent::DateChangeHeld {
            stay: stay(10, 13),
            hold_expires_at: at(90),
            held_at: at(60),
        }]
    );
    assert_eq!(
        held.nights,
        vec![(
            key(12),
            vec![RoomNightEvent::RoomsHeld {
                reservation_id: res(1),
                rooms: 1,
                expires_at: at(90),
            }]
        )]
    );
    apply(&held, &mut reservation, &mut nights);
    assert_eq!(nights[&day(12)].remaining(), 0, "nobody else can take it");
    assert_eq!(
        reservation.details().map(|d| d.stay),
        Some(stay(10, 12)),
        "not moved yet"
    );
    // A retry while it is held holds nothing more
    assert!(
        hold_move(&reservation, &nights, stay(10, 13), at(95), at(61))
            .expect("decided")
            .is_empty()
    );

    // When the move is then made, the hold becomes the sale
    let moved = change(&reservation, &nights, stay(10, 13), None, at(62)).expect("moved");
    assert_eq!(
        moved.nights,
        vec![(
            key(12),
            vec![RoomNightEvent::HoldConfirmed {
                reservation_id: res(1),
                rooms: 1,
            }]
        )]
    );
    apply(&moved, &mut reservation, &mut nights);
    assert_eq!(reservation.recorded_pending_move(), None);
    assert_eq!(nights[&day(12)].confirmed_for(&res(1)), Some(1));
}

#[test]
fn a_move_the_card_refused_gives_its_held_nights_back() {
    let mut nights = four_nights(1);
    let mut reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    let held = hold_move(&reservation, &nights, stay(10, 13), at(90), at(60)).expect("held");
    apply(&held, &mut reservation, &mut nights);

    let released = release_date_change(&reservation, &of_king(&nights), at(61)).expect("released");

    assert_eq!(
        released.reservation,
        vec![ReservationEvent::DateChangeReleased {
            released_at: at(61)
        }]
    );
    assert_eq!(
        released.nights,
        vec![(key(12), vec![rooms_released(1, 1, false)])]
    );
    apply(&released, &mut reservation, &mut nights);
    assert_eq!(nights[&day(12)].remaining(), 1);
    assert!(release_date_change(&reservation, &of_king(&nights), at(62))
        .expect("decided")
        .is_empty());
}

#[test]
fn a_move_onto_a_sold_out_night_is_not_held_and_the_card_is_not_asked() {
    let mut nights = four_nights(1);
    let reservation = confirmed(hold_cmd(1, 10, 12, 1), &mut nights);
    held(hold_cmd(2, 12, 13, 1), &mut nights);
    assert_eq!(
        hold_move(&reservation, &nights, stay(10, 13), at(90), at(5)),
        Err(Rejection::SoldOut { night: day(12) })
    );
}
