//! Selling under a rate plan: derived prices and their rounding, a root plan's own
//! rates, plans that do not exist or do not sell the room, guests and the extra-guest
//! charge, and the cancellation policy a stay keeps from the moment it was sold.

use super::*;
use crate::hotel::HotelEvent;

fn try_hold(hotel: &Hotel, nights: &Nights, cmd: HoldStay) -> Result<Decision, Rejection> {
    hold_stay(
        hotel,
        &Reservation::default(),
        &of_king(nights),
        &BookingLimits::default(),
        cmd,
    )
}

/// What the hold recorded for the reservation.
fn placed(result: Result<Decision, Rejection>) -> ReservationDetails {
    let decision = result.expect("the stay can be held");
    match decision.reservation.as_slice() {
        [ReservationEvent::ReservationHeld(details)] => details.clone(),
        other => panic!("expected one ReservationHeld, got {other:?}"),
    }
}

/// The total of holding `start..end` (`n` rooms) under `plan`.
fn total(hotel: &Hotel, nights: &Nights, start: u32, end: u32, n: i64, plan: Option<i64>) -> i64 {
    placed(try_hold(
        hotel,
        nights,
        plan_hold_cmd(1, start, end, n, plan),
    ))
    .total_cents
    .get()
}

// --- Prices -------------------------------------------------------------------------

#[test]
fn a_derived_plan_costs_its_parents_price_adjusted_and_rounded_half_up() {
    // 10% under 10,005 is 9,004.5: the half goes up.
    let nights = nights(&[(10, 3, 0, 10_005)]);
    let details = placed(try_hold(
        &hotel_with_plans(),
        &nights,
        plan_hold_cmd(1, 10, 11, 1, Some(NONREF)),
    ));
    assert_eq!(details.total_cents, Cents::new(9_005));
    assert_eq!(details.rate_plan_id, Some(plan_id(NONREF)));
    assert_eq!(
        details.cancellation_policy,
        CancellationPolicy::NonRefundable
    );
}

#[test]
fn a_chain_of_two_derivations_rounds_at_each_step() {
    // 10,004 -> 9,003.6 -> 9,004 -> 8,553.8 -> 8,554; rounding only once (10,004 x 0.855
    // = 8,553.42) would give 8,553.
    let nights = nights(&[(10, 3, 0, 10_004)]);
    let hotel = hotel_with_plans();
    assert_eq!(total(&hotel, &nights, 10, 11, 1, Some(NONREF)), 9_004);
    assert_eq!(total(&hotel, &nights, 10, 11, 1, Some(MEMBER)), 8_554);
}

#[test]
fn each_night_is_priced_and_rounded_on_its_own_then_times_the_rooms() {
    // 10% under 10,005 -> 9,005 and under 10,015 -> 9,014 (9,013.5 up), for 2 rooms.
    let nights = nights(&[(10, 3, 0, 10_005), (11, 3, 0, 10_015)]);
    assert_eq!(
        total(&hotel_with_plans(), &nights, 10, 12, 2, Some(NONREF)),
        2 * (9_005 + 9_014)
    );
}

#[test]
fn a_root_plan_costs_its_own_rate_where_it_has_one_and_the_base_rate_elsewhere() {
    // Base rates 10,000 and 12,000; the flexible plan's own rate on the 10th: 15,000.
    let mut nights = four_nights(3);
    plan_rate(&mut nights, 10, FLEX, 15_000);
    let hotel = hotel_with_plans();
    assert_eq!(
        total(&hotel, &nights, 10, 12, 1, Some(FLEX)),
        15_000 + 12_000
    );
    assert_eq!(
        total(&hotel, &nights, 10, 12, 2, Some(FLEX)),
        2 * (15_000 + 12_000)
    );
}

#[test]
fn a_plan_derived_from_a_root_with_its_own_rate_is_priced_from_that_rate() {
    let mut nights = four_nights(3);
    plan_rate(&mut nights, 10, FLEX, 15_000);
    // 10% under 15,000 and under the base 12,000.
    assert_eq!(
        total(&hotel_with_plans(), &nights, 10, 12, 1, Some(NONREF)),
        13_500 + 10_800
    );
}

#[test]
fn a_plans_own_rate_does_not_price_the_base_rate() {
    let mut nights = four_nights(3);
    plan_rate(&mut nights, 10, FLEX, 15_000);
    assert_eq!(
        total(&hotel_with_plans(), &nights, 10, 12, 1, None),
        10_000 + 12_000
    );
}

#[test]
fn a_quoted_total_is_compared_with_the_plans_price() {
    let nights = nights(&[(10, 3, 0, 10_005)]);
    let mut cmd = plan_hold_cmd(1, 10, 11, 1, Some(NONREF));
    cmd.request.expected_total_cents = Some(Cents::new(10_005));
    assert_eq!(
        try_hold(&hotel_with_plans(), &nights, cmd.clone()),
        Err(Rejection::PriceChanged {
            total_cents: Cents::new(9_005)
        })
    );
    cmd.request.expected_total_cents = Some(Cents::new(9_005));
    assert!(try_hold(&hotel_with_plans(), &nights, cmd).is_ok());
}

// --- Plans that cannot sell the stay ----------------------------------------------------

#[test]
fn holding_under_a_plan_the_hotel_does_not_have_is_unknown_rate_plan() {
    assert_eq!(
        try_hold(
            &hotel_with_plans(),
            &four_nights(3),
            plan_hold_cmd(1, 10, 12, 1, Some(9))
        ),
        Err(Rejection::UnknownRatePlan)
    );
}

#[test]
fn holding_under_a_plan_that_does_not_sell_the_room_type_is_unknown_rate_plan() {
    const TWIN: i64 = 4;
    let hotel = with(
        hotel_with_plans(),
        HotelCommand::SetRoomType {
            room_type_id: RoomTypeId::parse(TWIN).expect("valid id"),
            details: RoomTypeDetails::parse("Twin", 2).expect("valid room type"),
        },
    );
    let hotel = with_plan(
        hotel,
        5,
        rate_plan("Twin saver", &[TWIN], FLEX_POLICY, Pricing::Own),
    );
    assert_eq!(
        try_hold(
            &hotel,
            &four_nights(3),
            plan_hold_cmd(1, 10, 12, 1, Some(5))
        ),
        Err(Rejection::UnknownRatePlan)
    );
}

// --- Guests -------------------------------------------------------------------------

/// [`hotel_with_plans`] with room type 3 sleeping three, priced for two, and 25 euros a
/// night for the third guest.
fn hotel_with_extra_guests() -> Hotel {
    let king = RoomTypeDetails::parse("King", 3)
        .and_then(|k| k.with_occupancy_pricing(Some(2), Some(2_500)))
        .expect("valid room type");
    with(
        hotel_with_plans(),
        HotelCommand::SetRoomType {
            room_type_id: RoomTypeId::parse(KING).expect("valid id"),
            details: king,
        },
    )
}

fn guests(n: i64) -> GuestCount {
    GuestCount::parse(n).expect("valid guest count")
}

#[test]
fn more_guests_than_the_room_sleeps_is_occupancy_exceeded() {
    let mut cmd = plan_hold_cmd(1, 10, 12, 1, None);
    cmd.request.guests = guests(4);
    assert_eq!(
        try_hold(&hotel_with_extra_guests(), &four_nights(3), cmd.clone()),
        Err(Rejection::OccupancyExceeded { max_occupancy: 3 })
    );
    // The default room type sleeps two.
    cmd.request.guests = guests(3);
    assert_eq!(
        try_hold(&hotel(), &four_nights(3), cmd),
        Err(Rejection::OccupancyExceeded { max_occupancy: 2 })
    );
}

#[test]
fn guests_up_to_the_base_occupancy_cost_the_rate_alone() {
    let mut cmd = plan_hold_cmd(1, 10, 12, 1, None);
    cmd.request.guests = guests(2);
    let details = placed(try_hold(&hotel_with_extra_guests(), &four_nights(3), cmd));
    assert_eq!(details.total_cents, Cents::new(10_000 + 12_000));
    assert_eq!(details.guests, guests(2));
}

#[test]
fn each_guest_above_the_base_occupancy_adds_the_extra_charge_per_night_and_room() {
    let mut cmd = plan_hold_cmd(1, 10, 12, 2, None);
    cmd.request.guests = guests(3);
    let details = placed(try_hold(&hotel_with_extra_guests(), &four_nights(3), cmd));
    assert_eq!(
        details.total_cents,
        Cents::new(2 * ((10_000 + 2_500) + (12_000 + 2_500)))
    );
    assert_eq!(details.guests, guests(3));
}

#[test]
fn the_extra_guest_charge_is_added_after_the_plans_adjustment() {
    let mut cmd = plan_hold_cmd(1, 10, 12, 1, Some(NONREF));
    cmd.request.guests = guests(3);
    let details = placed(try_hold(&hotel_with_extra_guests(), &four_nights(3), cmd));
    // 10% under each rate, then the third guest at the full 2,500.
    assert_eq!(
        details.total_cents,
        Cents::new((9_000 + 2_500) + (10_800 + 2_500))
    );
}

// --- The cancellation policy a stay is sold under ---------------------------------------

/// 2027-06-10 15:00 in Lisbon (summer time, UTC+1) is 14:00 UTC.
fn before_check_in(hours: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, 10, 14, 0, 0)
        .single()
        .expect("valid time")
        - chrono::Duration::hours(hours)
}

/// Held at `hotel` for `cmd` and paid in full.
fn paid(hotel: &Hotel, cmd: HoldStay, nights: &mut Nights) -> Reservation {
    let mut reservation = held_at(hotel, cmd, nights);
    let total = reservation.details().expect("placed").total_cents;
    let decision = apply_authorization(
        &reservation,
        &of_king(nights),
        at(5),
        Payment {
            provider_txn_id: "txn_1".to_owned(),
            amount_cents: total,
        },
        zone("Europe/Lisbon"),
    )
    .expect("a live hold takes the payment");
    apply(&decision, &mut reservation, nights);
    assert_eq!(
        reservation.recorded_status(),
        Some(ReservationStatus::Confirmed)
    );
    reservation
}

/// What a cancellation at `now` gives the guest back of what they stood to pay: all
/// the hotel does not keep, released from the authorization before the capture or
/// refunded after it (the cancellation's `refund_cents` counts only the latter).
fn cancel_at(
    reservation: &Reservation,
    nights: &Nights,
    now: DateTime<Utc>,
    by: CancelledBy,
) -> Cents {
    let total = reservation.details().expect("placed").total_cents;
    let owed = |r: &Reservation| r.ledger().map_or(Cents::ZERO, |l| l.charge(total));
    let decision = cancel(
        reservation,
        &of_king(nights),
        now,
        "plans".into(),
        by,
        zone("Europe/Lisbon"),
    )
    .expect("cancellable");
    let mut after = reservation.clone();
    apply(&decision, &mut after, &mut nights.clone());
    Cents::new(owed(reservation).get() - owed(&after).get())
}

#[test]
fn a_stay_sold_non_refundable_refunds_nothing_to_the_guest_even_after_the_plan_turns_refundable() {
    let hotel = hotel_with_plans();
    let mut nights = four_nights(3);
    let reservation = paid(
        &hotel,
        plan_hold_cmd(1, 10, 12, 1, Some(NONREF)),
        &mut nights,
    );
    let paid_cents = reservation.details().expect("placed").total_cents;
    assert_eq!(paid_cents, Cents::new(9_000 + 10_800));

    // The plan becomes refundable after the sale.
    let mut hotel = hotel;
    let refundable = rate_plan(
        "Non-refundable (now refundable)",
        &[KING],
        CancellationPolicy::HOUSE,
        derived(FLEX, -10),
    );
    hotel.apply_event(&HotelEvent::RatePlanSet {
        rate_plan_id: plan_id(NONREF),
        plan: refundable,
    });
    assert_eq!(
        hotel
            .rate_plan(plan_id(NONREF))
            .map(|p| p.cancellation_policy()),
        Some(CancellationPolicy::HOUSE)
    );
    // A new sale gets the new policy; the earlier one keeps its own.
    let later = placed(try_hold(
        &hotel,
        &nights,
        plan_hold_cmd(2, 10, 12, 1, Some(NONREF)),
    ));
    assert_eq!(later.cancellation_policy, CancellationPolicy::HOUSE);
    assert_eq!(
        reservation.details().map(|d| d.cancellation_policy),
        Some(CancellationPolicy::NonRefundable)
    );

    // Over eight days ahead: inside every refundable window the house has.
    assert_eq!(
        cancel_at(
            &reservation,
            &nights,
            before_check_in(200),
            CancelledBy::Guest
        ),
        Cents::ZERO
    );
}

#[test]
fn a_stay_sold_non_refundable_is_refunded_whole_when_the_hotel_cancels() {
    let mut nights = four_nights(3);
    let reservation = paid(
        &hotel_with_plans(),
        plan_hold_cmd(1, 10, 12, 1, Some(NONREF)),
        &mut nights,
    );
    assert_eq!(
        cancel_at(
            &reservation,
            &nights,
            before_check_in(1),
            CancelledBy::Hotel
        ),
        Cents::new(9_000 + 10_800)
    );
}

#[test]
fn a_stay_sold_at_the_base_rate_is_refunded_by_the_house_policy() {
    let mut nights = four_nights(3);
    let reservation = paid(
        &hotel_with_plans(),
        plan_hold_cmd(1, 10, 12, 1, None),
        &mut nights,
    );
    assert_eq!(
        reservation.details().map(|d| d.cancellation_policy),
        Some(CancellationPolicy::HOUSE)
    );
    let by = CancelledBy::Guest;
    assert_eq!(
        cancel_at(&reservation, &nights, before_check_in(72), by),
        Cents::new(22_000)
    );
    assert_eq!(
        cancel_at(&reservation, &nights, before_check_in(30), by),
        Cents::new(11_000)
    );
    assert_eq!(
        cancel_at(&reservation, &nights, before_check_in(23), by),
        Cents::ZERO
    );
}

#[test]
fn a_stay_sold_under_a_refundable_plan_is_refunded_by_that_plans_windows() {
    // Flexible: all at 48 hours, 30% at 12.
    let mut nights = four_nights(3);
    let reservation = paid(
        &hotel_with_plans(),
        plan_hold_cmd(1, 10, 12, 1, Some(FLEX)),
        &mut nights,
    );
    let by = CancelledBy::Guest;
    assert_eq!(
        cancel_at(&reservation, &nights, before_check_in(48), by),
        Cents::new(22_000)
    );
    assert_eq!(
        cancel_at(&reservation, &nights, before_check_in(30), by),
        Cents::new(6_600)
    );
    assert_eq!(
        cancel_at(&reservation, &nights, before_check_in(11), by),
        Cents::ZERO
    );
}
