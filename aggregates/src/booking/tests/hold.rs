//! `hold_stay`, and the price of a stay at the base rate.

use super::*;
use crate::personal::Personal;

#[test]
fn the_price_of_a_stay_at_the_base_rate_is_the_sum_of_its_nightly_rates() {
    let nights = four_nights(1);
    let terms = SaleTerms::resolve(&hotel(), king(), None, GuestCount::ONE).expect("terms");
    let price = |start, end| terms.stay_price(&nights, &stay(start, end), rooms(1));
    assert_eq!(price(10, 13), Some(Cents::new(36_000)));
    assert_eq!(price(13, 14), Some(Cents::new(16_000)));
    assert_eq!(price(12, 15), None);
}

#[test]
fn holding_a_stay_holds_every_night_at_the_sum_of_the_rates_times_the_rooms() {
    let nights = four_nights(3);
    let decision = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        hold_cmd(1, 10, 13, 2),
    )
    .expect("the stay can be held");
    assert_eq!(
        decision.nights,
        vec![
            (key(10), vec![rooms_held(1, 2)]),
            (key(11), vec![rooms_held(1, 2)]),
            (key(12), vec![rooms_held(1, 2)]),
        ]
    );
    assert_eq!(
        decision.reservation,
        vec![ReservationEvent::ReservationHeld(ReservationDetails {
            more_lines: Vec::new(),
            reservation_id: res(1),
            hotel_id: hotel_id(),
            room_type_id: king(),
            stay: stay(10, 13),
            rooms: rooms(2),
            guest: Personal::Clear(guest()),
            channel: "direct".to_owned(),
            total_cents: Cents::new(2 * (10_000 + 12_000 + 14_000)),
            hold_expires_at: at(15),
            created_at: at(0),
            rate_plan_id: None,
            cancellation_policy: CancellationPolicy::HOUSE,
            guests: GuestCount::ONE,
            first_night_cents: Some(Cents::new(2 * 10_000)),
            currency: crate::types::Currency::EUR,
            taxes: crate::taxes::Taxes::default(),
            block_code: None,
        })]
    );
}

#[test]
fn a_stay_whose_middle_night_is_sold_out_holds_no_night() {
    let mut nights = four_nights(1);
    held(hold_cmd(1, 11, 12, 1), &mut nights);
    let before = nights.clone();
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        hold_cmd(2, 10, 13, 1),
    );
    assert_eq!(result, Err(Rejection::SoldOut { night: day(11) }));
    assert_eq!(nights, before);
}

#[test]
fn a_stay_sold_out_on_several_nights_names_the_first_of_them() {
    let mut nights = four_nights(1);
    held(hold_cmd(1, 12, 14, 1), &mut nights);
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        hold_cmd(2, 10, 14, 1),
    );
    assert_eq!(result, Err(Rejection::SoldOut { night: day(12) }));
}

#[test]
fn a_stay_over_a_night_with_no_inventory_is_refused_as_no_inventory_on_that_night() {
    let nights = nights(&[(10, 5, 0, 10_000), (12, 5, 0, 10_000)]);
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        hold_cmd(1, 10, 13, 1),
    );
    assert_eq!(result, Err(Rejection::NoInventory { night: day(11) }));
}

#[test]
fn a_stay_needing_more_rooms_than_remain_is_sold_out() {
    let nights = four_nights(1);
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        hold_cmd(1, 10, 11, 2),
    );
    assert_eq!(result, Err(Rejection::SoldOut { night: day(10) }));
}

#[test]
fn a_stay_ending_on_a_day_and_one_starting_that_day_share_no_night() {
    let mut nights = four_nights(1);
    let first = held(hold_cmd(1, 10, 12, 1), &mut nights);
    let second = held(hold_cmd(2, 12, 14, 1), &mut nights);
    assert_eq!(first.recorded_status(), Some(ReservationStatus::Held));
    assert_eq!(second.recorded_status(), Some(ReservationStatus::Held));
    for night in nights.values() {
        assert_eq!((night.held(), night.remaining()), (1, 0));
        assert!(night.invariant_holds());
    }
    assert!(nights[&day(11)].hold_of(&res(1)).is_some());
    assert!(nights[&day(12)].hold_of(&res(2)).is_some());
}

#[test]
fn a_hold_quoting_the_wrong_total_is_price_changed_with_the_actual_total() {
    let nights = four_nights(3);
    let mut cmd = hold_cmd(1, 10, 12, 2);
    cmd.request.expected_total_cents = Some(Cents::new(40_000));
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        cmd.clone(),
    );
    assert_eq!(
        result,
        Err(Rejection::PriceChanged {
            total_cents: Cents::new(44_000)
        })
    );
    cmd.request.expected_total_cents = Some(Cents::new(44_000));
    assert!(hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        cmd,
    )
    .is_ok());
}

#[test]
fn holding_at_an_unknown_hotel_is_unknown_hotel() {
    let nights = four_nights(3);
    let limits = BookingLimits::default();
    let empty = Reservation::default();
    let result = hold_stay(
        &Hotel::default(),
        &empty,
        &of_king(&nights),
        &limits,
        hold_cmd(1, 10, 11, 1),
    );
    assert_eq!(result, Err(Rejection::UnknownHotel));
    let mut cmd = hold_cmd(1, 10, 11, 1);
    cmd.request.hotel_id = HotelId::parse(8).expect("valid id");
    assert_eq!(
        hold_stay(&hotel(), &empty, &of_king(&nights), &limits, cmd),
        Err(Rejection::UnknownHotel)
    );
}

#[test]
fn holding_an_unknown_room_type_is_unknown_room_type() {
    let mut cmd = hold_cmd(1, 10, 11, 1);
    cmd.request.room_type_id = RoomTypeId::parse(4).expect("valid id");
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&four_nights(3)),
        &BookingLimits::default(),
        cmd,
    );
    assert_eq!(result, Err(Rejection::UnknownRoomType));
}

#[test]
fn holding_outside_the_booking_limits_is_invalid() {
    let nights = four_nights(20);
    let limits = BookingLimits::default();
    let empty = Reservation::default();
    let attempt = |cmd: HoldStay| hold_stay(&hotel(), &empty, &of_king(&nights), &limits, cmd);

    let mut too_long = hold_cmd(1, 10, 11, 1);
    too_long.request.stay =
        StayDates::parse(day(10), day(10) + chrono::Days::new(31)).expect("valid");
    assert_eq!(invalid_field(attempt(too_long)), "end_date");

    assert_eq!(invalid_field(attempt(hold_cmd(1, 10, 11, 11))), "rooms");

    let mut far = hold_cmd(1, 10, 11, 1);
    far.now = Utc
        .with_ymd_and_hms(2025, 6, 1, 12, 0, 0)
        .single()
        .expect("valid");
    far.hold_expires_at = far.now + chrono::Duration::minutes(15);
    assert_eq!(invalid_field(attempt(far)), "start_date");

    let strict = BookingLimits {
        max_nights: 2,
        max_rooms: 1,
        max_days_ahead: 730,
    };
    let result = hold_stay(
        &hotel(),
        &empty,
        &of_king(&nights),
        &strict,
        hold_cmd(1, 10, 13, 1),
    );
    assert_eq!(invalid_field(result), "end_date");
}

#[test]
fn the_start_may_not_be_in_the_past_at_the_hotel_even_if_it_is_not_in_utc() {
    // 23:30 UTC on the 9th is already 00:30 on the 10th in Lisbon (UTC+1 in June).
    let late = Utc
        .with_ymd_and_hms(2027, 6, 9, 23, 30, 0)
        .single()
        .expect("valid");
    let nights = four_nights(3);
    let limits = BookingLimits::default();
    let empty = Reservation::default();
    let mut cmd = hold_cmd(1, 9, 11, 1);
    cmd.now = late;
    cmd.hold_expires_at = late + chrono::Duration::minutes(15);
    let mut extended = nights.clone();
    extended.extend(self::nights(&[(9, 3, 0, 10_000)]));
    assert_eq!(
        invalid_field(hold_stay(
            &hotel(),
            &empty,
            &of_king(&extended),
            &limits,
            cmd.clone()
        )),
        "start_date"
    );
    cmd.request.stay = stay(10, 11);
    assert!(hold_stay(&hotel(), &empty, &of_king(&nights), &limits, cmd).is_ok());
}

#[test]
fn holding_with_the_id_of_an_existing_reservation_is_reservation_exists() {
    let mut nights = four_nights(3);
    let existing = held(hold_cmd(1, 10, 11, 1), &mut nights);
    let result = hold_stay(
        &hotel(),
        &existing,
        &of_king(&nights),
        &BookingLimits::default(),
        hold_cmd(1, 12, 13, 1),
    );
    assert_eq!(result, Err(Rejection::ReservationExists));
}

#[test]
fn holding_drops_lapsed_holds_of_other_reservations_on_its_nights() {
    let mut nights = four_nights(1);
    held(hold_cmd(1, 10, 12, 1), &mut nights);
    let mut cmd = hold_cmd(2, 11, 13, 1);
    cmd.now = at(20);
    cmd.hold_expires_at = at(35);
    let decision = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        cmd,
    )
    .expect("the lapsed hold makes room");
    let new_hold = RoomNightEvent::RoomsHeld {
        reservation_id: res(2),
        rooms: 1,
        expires_at: at(35),
    };
    assert_eq!(
        decision.nights,
        vec![
            (
                key(11),
                vec![
                    RoomNightEvent::HoldLapsed {
                        reservation_id: res(1),
                        rooms: 1,
                        expired_at: at(15),
                    },
                    new_hold.clone(),
                ]
            ),
            (key(12), vec![new_hold]),
        ]
    );
}

#[test]
fn a_hold_keeps_the_currency_and_the_taxes_in_force_when_it_was_sold() {
    use crate::taxes::{Tax, TaxKind, Taxes};
    let mut zurich = hotel();
    let details = HotelDetails::parse("Casa do Rio", "Lisbon", "Europe/Lisbon")
        .expect("valid details")
        .with_currency(crate::types::Currency::parse("CHF").expect("a currency"));
    let city = Taxes::parse(vec![Tax::parse(
        "CITY",
        TaxKind::PerPersonNight {
            amount: Cents::new(250),
            max_nights: None,
        },
    )
    .expect("tax")])
    .expect("taxes");
    for command in [
        HotelCommand::SetDetails {
            hotel_id: hotel_id(),
            details,
        },
        HotelCommand::SetTaxes {
            taxes: city.clone(),
        },
    ] {
        for event in zurich.decide(command).expect("catalog") {
            zurich.apply_event(&event);
        }
    }
    let decision = hold_stay(
        &zurich,
        &Reservation::default(),
        &of_king(&four_nights(3)),
        &BookingLimits::default(),
        hold_cmd(1, 10, 13, 2),
    )
    .expect("held");
    let Some(ReservationEvent::ReservationHeld(held)) = decision.reservation.first() else {
        panic!("no reservation held: {decision:?}");
    };
    assert_eq!(held.currency.code(), "CHF");
    assert_eq!(held.taxes, city);
    // Two rooms, one guest each, three nights.
    assert_eq!(
        held.total_due(),
        Cents::new(held.total_cents.get() + 2 * 3 * 250)
    );
}
