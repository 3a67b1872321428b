//! The given/when/then tests of `RoomNight`.

use super::*;
use crate::types::{HotelId, RoomTypeId};
use chrono::{NaiveDate, TimeZone};
use cqrs_es::test::TestFramework;
use uuid::Uuid;

type Fixture = TestFramework<RoomNight>;

fn night() -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, 10).expect("valid date")
}

fn key() -> RoomNightKey {
    RoomNightKey::new(
        HotelId::parse(7).expect("valid id"),
        RoomTypeId::parse(3).expect("valid id"),
        night(),
    )
}

/// Minutes after 2027-06-01 12:00 UTC.
fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
        .single()
        .expect("valid time")
        + chrono::Duration::minutes(minutes)
}

fn res(n: u128) -> ReservationId {
    ReservationId::from_uuid(Uuid::from_u128(n))
}

fn rooms(n: i64) -> RoomCount {
    RoomCount::parse(n).expect("valid room count")
}

fn levels(total: i64, allowance: i64, rate: i64) -> InventoryLevels {
    InventoryLevels::parse(total, allowance, Cents::new(rate)).expect("valid levels")
}

fn inventory_set(total: u32, allowance: u32, rate: i64) -> RoomNightEvent {
    RoomNightEvent::InventorySet {
        key: key(),
        total_rooms: total,
        overbooking_allowance: allowance,
        rate_cents: Cents::new(rate),
    }
}

fn held(id: u128, n: u32, expires_at: DateTime<Utc>) -> RoomNightEvent {
    RoomNightEvent::RoomsHeld {
        reservation_id: res(id),
        rooms: n,
        expires_at,
    }
}

fn booked(id: u128, n: u32) -> RoomNightEvent {
    RoomNightEvent::RoomsBooked {
        reservation_id: res(id),
        rooms: n,
    }
}

fn confirmed(id: u128, n: u32) -> RoomNightEvent {
    RoomNightEvent::HoldConfirmed {
        reservation_id: res(id),
        rooms: n,
    }
}

fn lapsed(id: u128, n: u32, expired_at: DateTime<Utc>) -> RoomNightEvent {
    RoomNightEvent::HoldLapsed {
        reservation_id: res(id),
        rooms: n,
        expired_at,
    }
}

fn released(id: u128, n: u32, was_confirmed: bool) -> RoomNightEvent {
    RoomNightEvent::RoomsReleased {
        reservation_id: res(id),
        rooms: n,
        was_confirmed,
    }
}

fn hold(id: u128, n: i64, expires_at: DateTime<Utc>, now: DateTime<Utc>) -> RoomNightCommand {
    RoomNightCommand::Hold {
        reservation_id: res(id),
        rooms: rooms(n),
        expires_at,
        now,
    }
}

fn book(id: u128, n: i64, now: DateTime<Utc>) -> RoomNightCommand {
    RoomNightCommand::Book {
        reservation_id: res(id),
        rooms: rooms(n),
        now,
    }
}

fn set_inventory(total: i64, allowance: i64, rate: i64, now: DateTime<Utc>) -> RoomNightCommand {
    RoomNightCommand::SetInventory {
        key: key(),
        levels: levels(total, allowance, rate),
        now,
    }
}

fn state(events: &[RoomNightEvent]) -> RoomNight {
    let mut night = RoomNight::default();
    for event in events {
        night.apply_event(event);
    }
    night
}

// --- SetInventory -------------------------------------------------------------------

#[test]
fn setting_inventory_on_a_new_night_puts_it_on_sale() {
    Fixture::with(())
        .given_no_previous_events()
        .when(set_inventory(5, 1, 12_000, at(0)))
        .then_expect_events(vec![inventory_set(5, 1, 12_000)]);
}

#[test]
fn setting_the_same_inventory_again_changes_nothing() {
    Fixture::with(())
        .given(vec![inventory_set(5, 1, 12_000)])
        .when(set_inventory(5, 1, 12_000, at(0)))
        .then_expect_events(vec![]);
}

#[test]
fn changing_only_the_rate_is_recorded() {
    Fixture::with(())
        .given(vec![inventory_set(5, 1, 12_000)])
        .when(set_inventory(5, 1, 15_000, at(0)))
        .then_expect_events(vec![inventory_set(5, 1, 15_000)]);
}

#[test]
fn setting_inventory_with_another_nights_key_is_wrong_night() {
    let other = RoomNightKey::new(
        key().hotel_id,
        key().room_type_id,
        NaiveDate::from_ymd_opt(2027, 6, 11).expect("valid date"),
    );
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(RoomNightCommand::SetInventory {
            key: other,
            levels: levels(5, 0, 12_000),
            now: at(0),
        })
        .then_expect_error(RoomNightError::WrongNight);
}

#[test]
fn setting_inventory_below_what_is_sold_is_rejected() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            booked(2, 2),
        ])
        .when(set_inventory(2, 1, 12_000, at(0)))
        .then_expect_error(RoomNightError::BelowReserved { reserved: 4 });
}

#[test]
fn setting_inventory_down_to_exactly_what_is_sold_is_allowed() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            booked(2, 2),
        ])
        .when(set_inventory(3, 1, 12_000, at(0)))
        .then_expect_events(vec![inventory_set(3, 1, 12_000)]);
}

#[test]
fn lowering_inventory_drops_lapsed_holds_first_and_does_not_count_them() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 3, at(15)),
            booked(2, 2),
        ])
        .when(set_inventory(2, 0, 12_000, at(15)))
        .then_expect_events(vec![lapsed(1, 3, at(15)), inventory_set(2, 0, 12_000)]);
}

#[test]
fn setting_unchanged_inventory_still_drops_lapsed_holds() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 3, at(15))])
        .when(set_inventory(5, 0, 12_000, at(20)))
        .then_expect_events(vec![lapsed(1, 3, at(15))]);
}

// --- Hold ---------------------------------------------------------------------------

#[test]
fn holding_on_a_night_without_inventory_is_not_for_sale() {
    Fixture::with(())
        .given_no_previous_events()
        .when(hold(1, 1, at(15), at(0)))
        .then_expect_error(RoomNightError::NotForSale);
}

#[test]
fn holding_rooms_records_a_hold_until_its_expiry() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(hold(1, 2, at(15), at(0)))
        .then_expect_events(vec![held(1, 2, at(15))]);
}

#[test]
fn holding_the_last_room_twice_is_sold_out() {
    Fixture::with(())
        .given(vec![inventory_set(1, 0, 12_000), held(1, 1, at(15))])
        .when(hold(2, 1, at(16), at(1)))
        .then_expect_error(RoomNightError::SoldOut { remaining: 0 });
}

#[test]
fn holding_more_rooms_than_remain_is_sold_out_naming_what_remains() {
    Fixture::with(())
        .given(vec![
            inventory_set(4, 0, 12_000),
            held(1, 1, at(15)),
            booked(2, 1),
        ])
        .when(hold(3, 3, at(16), at(1)))
        .then_expect_error(RoomNightError::SoldOut { remaining: 2 });
}

#[test]
fn holding_exactly_what_remains_succeeds() {
    Fixture::with(())
        .given(vec![
            inventory_set(4, 0, 12_000),
            held(1, 1, at(15)),
            booked(2, 1),
        ])
        .when(hold(3, 2, at(16), at(1)))
        .then_expect_events(vec![held(3, 2, at(16))]);
}

#[test]
fn overbooking_allowance_adds_sellable_rooms() {
    Fixture::with(())
        .given(vec![inventory_set(1, 1, 12_000), booked(1, 1)])
        .when(hold(2, 1, at(15), at(0)))
        .then_expect_events(vec![held(2, 1, at(15))]);
    Fixture::with(())
        .given(vec![
            inventory_set(1, 1, 12_000),
            booked(1, 1),
            held(2, 1, at(15)),
        ])
        .when(hold(3, 1, at(15), at(0)))
        .then_expect_error(RoomNightError::SoldOut { remaining: 0 });
}

#[test]
fn repeating_a_hold_changes_nothing() {
    Fixture::with(())
        .given(vec![inventory_set(1, 0, 12_000), held(1, 1, at(15))])
        .when(hold(1, 1, at(15), at(5)))
        .then_expect_events(vec![]);
}

#[test]
fn holding_again_with_another_room_count_is_an_allocation_mismatch() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 1, at(15))])
        .when(hold(1, 2, at(15), at(5)))
        .then_expect_error(RoomNightError::AllocationMismatch { rooms: 1 });
}

#[test]
fn holding_again_with_another_expiry_is_an_allocation_mismatch() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 1, at(15))])
        .when(hold(1, 1, at(30), at(5)))
        .then_expect_error(RoomNightError::AllocationMismatch { rooms: 1 });
}

#[test]
fn holding_for_a_reservation_already_booked_here_is_an_allocation_mismatch() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), booked(1, 2)])
        .when(hold(1, 2, at(15), at(0)))
        .then_expect_error(RoomNightError::AllocationMismatch { rooms: 2 });
}

#[test]
fn a_lapsed_hold_does_not_count_and_is_dropped_with_its_own_event() {
    Fixture::with(())
        .given(vec![inventory_set(1, 0, 12_000), held(1, 1, at(15))])
        .when(hold(2, 1, at(31), at(16)))
        .then_expect_events(vec![lapsed(1, 1, at(15)), held(2, 1, at(31))]);
}

#[test]
fn a_hold_expiring_exactly_now_has_lapsed() {
    Fixture::with(())
        .given(vec![inventory_set(1, 0, 12_000), held(1, 1, at(15))])
        .when(hold(2, 1, at(30), at(15)))
        .then_expect_events(vec![lapsed(1, 1, at(15)), held(2, 1, at(30))]);
}

#[test]
fn every_lapsed_hold_is_dropped_even_when_not_needed_for_room() {
    Fixture::with(())
        .given(vec![
            inventory_set(10, 0, 12_000),
            held(1, 1, at(5)),
            held(2, 2, at(10)),
            held(3, 1, at(60)),
        ])
        .when(hold(4, 1, at(40), at(20)))
        .then_expect_events(vec![
            lapsed(1, 1, at(5)),
            lapsed(2, 2, at(10)),
            held(4, 1, at(40)),
        ]);
}

#[test]
fn a_reservation_whose_own_hold_lapsed_may_hold_again() {
    Fixture::with(())
        .given(vec![inventory_set(1, 0, 12_000), held(1, 1, at(15))])
        .when(hold(1, 1, at(35), at(20)))
        .then_expect_events(vec![lapsed(1, 1, at(15)), held(1, 1, at(35))]);
}

#[test]
fn a_sold_out_hold_records_nothing_not_even_the_lapsed_drops() {
    Fixture::with(())
        .given(vec![
            inventory_set(2, 0, 12_000),
            held(1, 1, at(15)),
            booked(2, 1),
        ])
        .when(hold(3, 2, at(40), at(20)))
        .then_expect_error(RoomNightError::SoldOut { remaining: 1 });
}

// --- Book ---------------------------------------------------------------------------

#[test]
fn booking_rooms_records_a_confirmed_sale() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(book(1, 2, at(0)))
        .then_expect_events(vec![booked(1, 2)]);
}

#[test]
fn booking_on_a_night_without_inventory_is_not_for_sale() {
    Fixture::with(())
        .given_no_previous_events()
        .when(book(1, 1, at(0)))
        .then_expect_error(RoomNightError::NotForSale);
}

#[test]
fn booking_more_than_remains_is_sold_out() {
    Fixture::with(())
        .given(vec![inventory_set(2, 0, 12_000), held(1, 1, at(15))])
        .when(book(2, 2, at(0)))
        .then_expect_error(RoomNightError::SoldOut { remaining: 1 });
}

#[test]
fn booking_drops_lapsed_holds_to_make_room() {
    Fixture::with(())
        .given(vec![inventory_set(2, 0, 12_000), held(1, 1, at(15))])
        .when(book(2, 2, at(15)))
        .then_expect_events(vec![lapsed(1, 1, at(15)), booked(2, 2)]);
}

#[test]
fn repeating_a_booking_changes_nothing() {
    Fixture::with(())
        .given(vec![inventory_set(2, 0, 12_000), booked(1, 2)])
        .when(book(1, 2, at(0)))
        .then_expect_events(vec![]);
}

#[test]
fn booking_again_with_another_room_count_is_an_allocation_mismatch() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), booked(1, 2)])
        .when(book(1, 1, at(0)))
        .then_expect_error(RoomNightError::AllocationMismatch { rooms: 2 });
}

#[test]
fn booking_while_holding_a_live_hold_is_an_allocation_mismatch() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 2, at(15))])
        .when(book(1, 2, at(0)))
        .then_expect_error(RoomNightError::AllocationMismatch { rooms: 2 });
}

// --- Confirm ------------------------------------------------------------------------

#[test]
fn confirming_a_live_hold_turns_it_into_a_sale() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 2, at(15))])
        .when(RoomNightCommand::Confirm {
            reservation_id: res(1),
            now: at(14),
        })
        .then_expect_events(vec![confirmed(1, 2)]);
}

#[test]
fn confirming_twice_changes_nothing() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            confirmed(1, 2),
        ])
        .when(RoomNightCommand::Confirm {
            reservation_id: res(1),
            now: at(20),
        })
        .then_expect_events(vec![]);
}

#[test]
fn confirming_without_a_hold_is_no_hold() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(2, 1, at(15))])
        .when(RoomNightCommand::Confirm {
            reservation_id: res(1),
            now: at(0),
        })
        .then_expect_error(RoomNightError::NoHold);
}

#[test]
fn confirming_a_lapsed_hold_is_hold_expired() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 2, at(15))])
        .when(RoomNightCommand::Confirm {
            reservation_id: res(1),
            now: at(15),
        })
        .then_expect_error(RoomNightError::HoldExpired { expired_at: at(15) });
}

#[test]
fn confirming_a_hold_that_was_dropped_as_lapsed_is_no_hold() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            lapsed(1, 2, at(15)),
        ])
        .when(RoomNightCommand::Confirm {
            reservation_id: res(1),
            now: at(20),
        })
        .then_expect_error(RoomNightError::NoHold);
}

// --- Release ------------------------------------------------------------------------

#[test]
fn releasing_a_hold_gives_its_rooms_back() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 2, at(15))])
        .when(RoomNightCommand::Release {
            reservation_id: res(1),
        })
        .then_expect_events(vec![released(1, 2, false)]);
}

#[test]
fn releasing_a_confirmed_sale_gives_its_rooms_back() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            confirmed(1, 2),
        ])
        .when(RoomNightCommand::Release {
            reservation_id: res(1),
        })
        .then_expect_events(vec![released(1, 2, true)]);
}

#[test]
fn releasing_twice_releases_once() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            booked(1, 2),
            released(1, 2, true),
        ])
        .when(RoomNightCommand::Release {
            reservation_id: res(1),
        })
        .then_expect_events(vec![]);
}

#[test]
fn releasing_what_was_never_allocated_changes_nothing() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), booked(2, 2)])
        .when(RoomNightCommand::Release {
            reservation_id: res(1),
        })
        .then_expect_events(vec![]);
}

// --- ExpireHold ---------------------------------------------------------------------

#[test]
fn expiring_a_lapsed_hold_drops_it() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 2, at(15))])
        .when(RoomNightCommand::ExpireHold {
            reservation_id: res(1),
            now: at(15),
        })
        .then_expect_events(vec![lapsed(1, 2, at(15))]);
}

#[test]
fn expiring_a_live_hold_is_hold_still_live() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000), held(1, 2, at(15))])
        .when(RoomNightCommand::ExpireHold {
            reservation_id: res(1),
            now: at(14),
        })
        .then_expect_error(RoomNightError::HoldStillLive);
}

#[test]
fn expiring_a_hold_already_dropped_changes_nothing() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            lapsed(1, 2, at(15)),
        ])
        .when(RoomNightCommand::ExpireHold {
            reservation_id: res(1),
            now: at(30),
        })
        .then_expect_events(vec![]);
}

#[test]
fn expiring_a_confirmed_sale_changes_nothing() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 2, at(15)),
            confirmed(1, 2),
        ])
        .when(RoomNightCommand::ExpireHold {
            reservation_id: res(1),
            now: at(30),
        })
        .then_expect_events(vec![]);
}

#[test]
fn expiring_drops_only_the_named_reservations_hold() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            held(1, 1, at(15)),
            held(2, 1, at(10)),
        ])
        .when(RoomNightCommand::ExpireHold {
            reservation_id: res(1),
            now: at(30),
        })
        .then_expect_events(vec![lapsed(1, 1, at(15))]);
}

// --- SetRestrictions ----------------------------------------------------------------

fn plan(n: i64) -> RatePlanId {
    RatePlanId::parse(n).expect("valid id")
}

fn set_restrictions(plan: Option<RatePlanId>, patch: RestrictionsPatch) -> RoomNightCommand {
    RoomNightCommand::SetRestrictions {
        rate_plan_id: plan,
        patch,
    }
}

fn restrictions_set(plan: Option<RatePlanId>, restrictions: NightRestrictions) -> RoomNightEvent {
    RoomNightEvent::RestrictionsSet {
        rate_plan_id: plan,
        restrictions,
    }
}

fn plan_rate_set(plan_id: RatePlanId, rate: Option<i64>) -> RoomNightEvent {
    RoomNightEvent::PlanRateSet {
        rate_plan_id: plan_id,
        rate_cents: rate.map(Cents::new),
    }
}

fn min_stay_2_stop_sell() -> NightRestrictions {
    NightRestrictions {
        min_stay: Some(2),
        stop_sell: true,
        ..NightRestrictions::default()
    }
}

#[test]
fn setting_restrictions_records_the_whole_set_after_the_change() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(set_restrictions(
            None,
            RestrictionsPatch {
                min_stay: Some(Some(2)),
                stop_sell: Some(true),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_events(vec![restrictions_set(None, min_stay_2_stop_sell())]);
}

#[test]
fn a_patch_keeps_every_field_it_leaves_out() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            restrictions_set(None, min_stay_2_stop_sell()),
        ])
        .when(set_restrictions(
            None,
            RestrictionsPatch {
                closed_to_arrival: Some(true),
                max_advance_days: Some(Some(90)),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_events(vec![restrictions_set(
            None,
            NightRestrictions {
                closed_to_arrival: true,
                max_advance_days: Some(90),
                ..min_stay_2_stop_sell()
            },
        )]);
}

#[test]
fn a_patch_clears_a_number_with_some_none_and_a_flag_with_false() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            restrictions_set(None, min_stay_2_stop_sell()),
        ])
        .when(set_restrictions(
            None,
            RestrictionsPatch {
                min_stay: Some(None),
                stop_sell: Some(false),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_events(vec![restrictions_set(None, NightRestrictions::default())]);
}

#[test]
fn a_plans_restrictions_start_from_its_own_set_not_from_every_plans() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            restrictions_set(None, min_stay_2_stop_sell()),
        ])
        .when(set_restrictions(
            Some(plan(1)),
            RestrictionsPatch {
                closed_to_departure: Some(true),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_events(vec![restrictions_set(
            Some(plan(1)),
            NightRestrictions {
                closed_to_departure: true,
                ..NightRestrictions::default()
            },
        )]);
}

#[test]
fn a_patch_that_changes_nothing_records_nothing() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            restrictions_set(None, min_stay_2_stop_sell()),
        ])
        .when(set_restrictions(
            None,
            RestrictionsPatch {
                min_stay: Some(Some(2)),
                closed_to_arrival: Some(false),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_events(vec![]);
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(set_restrictions(
            Some(plan(1)),
            RestrictionsPatch::default(),
        ))
        .then_expect_events(vec![]);
    // Clearing what a plan never had changes nothing either.
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(set_restrictions(
            Some(plan(1)),
            RestrictionsPatch {
                min_stay: Some(None),
                stop_sell: Some(false),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_events(vec![]);
}

#[test]
fn restricting_a_night_without_inventory_is_not_for_sale() {
    Fixture::with(())
        .given_no_previous_events()
        .when(set_restrictions(
            None,
            RestrictionsPatch {
                stop_sell: Some(true),
                ..RestrictionsPatch::default()
            },
        ))
        .then_expect_error(RoomNightError::NotForSale);
}

// --- SetPlanRate --------------------------------------------------------------------

fn set_plan_rate(plan_id: RatePlanId, rate: Option<i64>) -> RoomNightCommand {
    RoomNightCommand::SetPlanRate {
        rate_plan_id: plan_id,
        rate_cents: rate.map(Cents::new),
    }
}

#[test]
fn setting_a_plans_own_rate_records_it() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(set_plan_rate(plan(1), Some(15_000)))
        .then_expect_events(vec![plan_rate_set(plan(1), Some(15_000))]);
}

#[test]
fn setting_the_same_plan_rate_again_records_nothing() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            plan_rate_set(plan(1), Some(15_000)),
        ])
        .when(set_plan_rate(plan(1), Some(15_000)))
        .then_expect_events(vec![]);
}

#[test]
fn clearing_a_plan_rate_records_the_plan_back_on_the_base_rate() {
    Fixture::with(())
        .given(vec![
            inventory_set(5, 0, 12_000),
            plan_rate_set(plan(1), Some(15_000)),
        ])
        .when(set_plan_rate(plan(1), None))
        .then_expect_events(vec![plan_rate_set(plan(1), None)]);
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 12_000)])
        .when(set_plan_rate(plan(1), None))
        .then_expect_events(vec![]);
}

#[test]
fn a_plan_rate_on_a_night_without_inventory_is_not_for_sale() {
    Fixture::with(())
        .given_no_previous_events()
        .when(set_plan_rate(plan(1), Some(15_000)))
        .then_expect_error(RoomNightError::NotForSale);
}

#[test]
fn replaying_restrictions_and_plan_rates_rebuilds_them() {
    let for_plan = NightRestrictions {
        max_stay: Some(5),
        closed_to_arrival: true,
        ..NightRestrictions::default()
    };
    let events = vec![
        inventory_set(5, 0, 12_000),
        restrictions_set(None, min_stay_2_stop_sell()),
        restrictions_set(Some(plan(1)), for_plan),
        restrictions_set(Some(plan(2)), for_plan),
        plan_rate_set(plan(1), Some(15_000)),
        plan_rate_set(plan(2), Some(9_000)),
        held(1, 1, at(15)),
        // Inventory changes keep restrictions and plan rates.
        inventory_set(6, 1, 13_000),
        restrictions_set(Some(plan(2)), NightRestrictions::default()),
        plan_rate_set(plan(2), None),
    ];
    let night = state(&events);
    let restrictions = night.restrictions();
    assert_eq!(restrictions.all, min_stay_2_stop_sell());
    assert_eq!(restrictions.of(Some(plan(1))), for_plan);
    // A plan's set emptied is dropped, not kept empty.
    assert_eq!(
        restrictions.plans.keys().copied().collect::<Vec<_>>(),
        vec![plan(1)]
    );
    assert_eq!(
        restrictions.for_plan(Some(plan(1))),
        min_stay_2_stop_sell().and(for_plan)
    );
    assert_eq!(restrictions.for_plan(Some(plan(2))), min_stay_2_stop_sell());
    assert_eq!(night.plan_rate(plan(1)), Some(Cents::new(15_000)));
    assert_eq!(night.plan_rate(plan(2)), None);
    assert_eq!(night.plan_rates().len(), 1);
    assert_eq!(night.levels(), Some(levels(6, 1, 13_000)));
    assert_eq!(night.held(), 1);

    // What the night decides, applied, is what a replay of the same events rebuilds.
    let mut live = state(&events[..1]);
    let commands = vec![
        set_restrictions(
            None,
            RestrictionsPatch {
                min_stay: Some(Some(2)),
                stop_sell: Some(true),
                ..RestrictionsPatch::default()
            },
        ),
        set_restrictions(
            Some(plan(1)),
            RestrictionsPatch {
                max_stay: Some(Some(5)),
                closed_to_arrival: Some(true),
                ..RestrictionsPatch::default()
            },
        ),
        set_plan_rate(plan(1), Some(15_000)),
    ];
    let mut recorded = events[..1].to_vec();
    for command in commands {
        for event in live.decide(command).expect("the night has inventory") {
            live.apply_event(&event);
            recorded.push(event);
        }
    }
    assert_eq!(state(&recorded), live);
    assert_eq!(
        live.restrictions().for_plan(Some(plan(1))),
        restrictions.for_plan(Some(plan(1)))
    );
}

#[test]
fn restriction_and_plan_rate_events_are_named_after_the_variant() {
    assert_eq!(
        restrictions_set(None, NightRestrictions::default()).event_type(),
        "RestrictionsSet"
    );
    assert_eq!(plan_rate_set(plan(1), None).event_type(), "PlanRateSet");
}

// --- State --------------------------------------------------------------------------

#[test]
fn the_counters_and_allocations_follow_the_events() {
    let mut events = vec![
        inventory_set(4, 1, 12_000),
        held(1, 2, at(15)),
        booked(2, 1),
        held(3, 1, at(5)),
    ];
    let night = state(&events);
    assert_eq!(night.key(), Some(key()));
    assert_eq!(night.levels(), Some(levels(4, 1, 12_000)));
    assert_eq!(night.capacity(), 5);
    assert_eq!(
        (night.confirmed(), night.held(), night.remaining()),
        (1, 3, 1)
    );
    assert_eq!(
        night.hold_of(&res(1)),
        Some(Hold {
            rooms: 2,
            expires_at: at(15)
        })
    );
    assert_eq!(night.confirmed_for(&res(2)), Some(1));
    assert!(night.invariant_holds());

    events.extend([confirmed(1, 2), lapsed(3, 1, at(5)), released(2, 1, true)]);
    let night = state(&events);
    assert_eq!(
        (night.confirmed(), night.held(), night.remaining()),
        (2, 0, 3)
    );
    assert!(night.holds().is_empty());
    assert_eq!(
        night.confirmations().iter().collect::<Vec<_>>(),
        vec![(&res(1), &2)]
    );
}

#[test]
fn deciding_is_pure_and_applying_what_was_decided_keeps_the_invariant() {
    let night = state(&[
        inventory_set(2, 0, 12_000),
        held(1, 1, at(15)),
        booked(2, 1),
    ]);
    let before = night.clone();
    let events = night
        .decide(hold(3, 1, at(40), at(20)))
        .expect("the lapsed hold makes room");
    assert_eq!(night, before);
    let mut after = night;
    for event in &events {
        after.apply_event(event);
    }
    assert!(after.invariant_holds());
    assert_eq!(
        (after.confirmed(), after.held(), after.remaining()),
        (1, 1, 0)
    );
}

#[test]
fn a_corrupt_history_shows_as_a_broken_invariant_instead_of_a_panic() {
    let night = state(&[inventory_set(1, 0, 12_000), booked(1, 1), booked(2, 1)]);
    assert!(!night.invariant_holds());
    assert_eq!(night.remaining(), 0);
    let night = state(&[released(1, 5, true)]);
    assert_eq!(night.confirmed(), 0);
}

#[test]
fn a_snapshot_restores_the_counters_it_was_given() {
    let night = RoomNight::from_snapshot(
        key(),
        levels(3, 0, 9_000),
        1,
        2,
        BTreeMap::new(),
        BTreeMap::new(),
    );
    assert_eq!(
        (night.confirmed(), night.held(), night.remaining()),
        (1, 2, 0)
    );
    assert_eq!(
        night.decide(hold(9, 1, at(15), at(0))),
        Err(RoomNightError::SoldOut { remaining: 0 })
    );
}

#[test]
fn the_stream_id_starts_with_the_hotel_and_ends_with_the_night() {
    assert_eq!(key().stream_id(), "7:3:2027-06-10");
}

#[test]
fn event_types_are_named_after_the_variant() {
    assert_eq!(held(1, 1, at(0)).event_type(), "RoomsHeld");
    assert_eq!(lapsed(1, 1, at(0)).event_type(), "HoldLapsed");
    assert_eq!(inventory_set(1, 0, 1).event_version(), "1.0");
}

// --- Group blocks -------------------------------------------------------------------

fn acme() -> BlockCode {
    BlockCode::parse("ACME").expect("code")
}

fn set_block(n: u32, now: DateTime<Utc>) -> RoomNightCommand {
    RoomNightCommand::SetBlock {
        code: acme(),
        rooms: n,
        rate_cents: Cents::new(15_000),
        now,
    }
}

fn block_set(n: u32, change: i64) -> RoomNightEvent {
    RoomNightEvent::BlockSet {
        code: acme(),
        rooms: n,
        rate_cents: Cents::new(15_000),
        change,
    }
}

fn hold_from_block(id: u128, n: i64, expires_at: DateTime<Utc>) -> RoomNightCommand {
    RoomNightCommand::HoldFromBlock {
        reservation_id: res(id),
        code: acme(),
        rooms: rooms(n),
        expires_at,
        now: at(0),
    }
}

fn block_held(id: u128, n: u32, expires_at: DateTime<Utc>) -> RoomNightEvent {
    RoomNightEvent::BlockRoomsHeld {
        reservation_id: res(id),
        code: acme(),
        rooms: n,
        expires_at,
    }
}

fn released_block(n: u32) -> RoomNightEvent {
    RoomNightEvent::BlockReleased {
        code: acme(),
        rooms: n,
    }
}

#[test]
fn a_block_takes_its_rooms_out_of_general_sale() {
    let night = state(&[inventory_set(10, 0, 18_000), block_set(4, 4)]);
    assert_eq!((night.blocked(), night.remaining()), (4, 6));
    assert_eq!(
        night.decide(hold(1, 7, at(15), at(0))),
        Err(RoomNightError::SoldOut { remaining: 6 })
    );
}

#[test]
fn a_block_cannot_take_more_rooms_than_general_sale_has_left() {
    Fixture::with(())
        .given(vec![inventory_set(5, 0, 18_000), held(1, 2, at(15))])
        .when(set_block(4, at(0)))
        .then_expect_error(RoomNightError::SoldOut { remaining: 3 });
}

#[test]
fn a_block_is_set_again_by_the_difference_and_not_at_all_when_unchanged() {
    Fixture::with(())
        .given(vec![inventory_set(10, 0, 18_000), block_set(4, 4)])
        .when(set_block(6, at(0)))
        .then_expect_events(vec![block_set(6, 2)]);
    Fixture::with(())
        .given(vec![inventory_set(10, 0, 18_000), block_set(4, 4)])
        .when(set_block(4, at(0)))
        .then_expect_events(vec![]);
}

#[test]
fn a_booking_from_the_block_takes_its_rooms_and_not_general_sales() {
    let given = vec![inventory_set(10, 0, 18_000), block_set(4, 4)];
    Fixture::with(())
        .given(given.clone())
        .when(hold_from_block(1, 3, at(15)))
        .then_expect_events(vec![block_held(1, 3, at(15))]);
    let mut night = state(&given);
    night.apply_event(&block_held(1, 3, at(15)));
    assert_eq!(
        (night.held(), night.blocked(), night.remaining()),
        (3, 1, 6)
    );
    let block = night.block(&acme()).copied().expect("block");
    assert_eq!((block.rooms, block.picked_up), (1, 3));
}

#[test]
fn booking_more_than_the_block_has_left_is_block_exhausted() {
    Fixture::with(())
        .given(vec![
            inventory_set(10, 0, 18_000),
            block_set(4, 4),
            block_held(1, 3, at(15)),
        ])
        .when(hold_from_block(2, 2, at(15)))
        .then_expect_error(RoomNightError::BlockExhausted { remaining: 1 });
}

#[test]
fn a_block_shrinks_to_its_pickup_and_never_below() {
    let given = vec![
        inventory_set(10, 0, 18_000),
        block_set(4, 4),
        block_held(1, 3, at(15)),
    ];
    Fixture::with(())
        .given(given.clone())
        .when(set_block(3, at(0)))
        .then_expect_events(vec![block_set(0, -1)]);
    Fixture::with(())
        .given(given)
        .when(set_block(2, at(0)))
        .then_expect_error(RoomNightError::BelowPickup { picked_up: 3 });
}

#[test]
fn a_lapsed_booking_goes_back_to_the_block_while_it_holds_and_to_sale_after() {
    let given = vec![
        inventory_set(10, 0, 18_000),
        block_set(4, 4),
        block_held(1, 3, at(15)),
    ];
    let lapse = |to_block| {
        vec![RoomNightEvent::BlockHoldLapsed {
            reservation_id: res(1),
            code: acme(),
            rooms: 3,
            expired_at: at(15),
            to_block,
        }]
    };
    let expire = RoomNightCommand::ExpireHold {
        reservation_id: res(1),
        now: at(20),
    };
    Fixture::with(())
        .given(given.clone())
        .when(expire.clone())
        .then_expect_events(lapse(true));
    let mut released = given;
    released.push(released_block(1));
    Fixture::with(())
        .given(released.clone())
        .when(expire)
        .then_expect_events(lapse(false));
    let mut night = state(&released);
    for event in lapse(false) {
        night.apply_event(&event);
    }
    assert_eq!(
        (night.held(), night.blocked(), night.remaining()),
        (0, 0, 10)
    );
}

#[test]
fn a_released_block_gives_its_unpicked_rooms_back_and_takes_no_more_bookings() {
    let given = vec![
        inventory_set(10, 0, 18_000),
        block_set(4, 4),
        block_held(1, 1, at(15)),
    ];
    Fixture::with(())
        .given(given.clone())
        .when(RoomNightCommand::ReleaseBlock { code: acme() })
        .then_expect_events(vec![released_block(3)]);
    let mut released = given;
    released.push(released_block(3));
    Fixture::with(())
        .given(released.clone())
        .when(hold_from_block(2, 1, at(15)))
        .then_expect_error(RoomNightError::BlockReleased);
    Fixture::with(())
        .given(released)
        .when(RoomNightCommand::ReleaseBlock { code: acme() })
        .then_expect_events(vec![]);
}

#[test]
fn a_confirmed_booking_from_the_block_cancelled_refills_it() {
    Fixture::with(())
        .given(vec![
            inventory_set(10, 0, 18_000),
            block_set(4, 4),
            block_held(1, 2, at(15)),
            confirmed(1, 2),
        ])
        .when(RoomNightCommand::Release {
            reservation_id: res(1),
        })
        .then_expect_events(vec![RoomNightEvent::BlockRoomsReleased {
            reservation_id: res(1),
            code: acme(),
            rooms: 2,
            was_confirmed: true,
            to_block: true,
        }]);
}

#[test]
fn a_night_with_a_booking_from_the_block_cannot_leave_it() {
    Fixture::with(())
        .given(vec![
            inventory_set(10, 0, 18_000),
            block_set(4, 4),
            block_held(1, 1, at(15)),
        ])
        .when(RoomNightCommand::RemoveBlock {
            code: acme(),
            now: at(0),
        })
        .then_expect_error(RoomNightError::BelowPickup { picked_up: 1 });
}

#[test]
fn inventory_cannot_drop_below_what_the_blocks_and_sales_take() {
    Fixture::with(())
        .given(vec![
            inventory_set(10, 0, 18_000),
            block_set(4, 4),
            held(1, 3, at(15)),
        ])
        .when(set_inventory(6, 0, 18_000, at(0)))
        .then_expect_error(RoomNightError::BelowReserved { reserved: 7 });
}

#[test]
fn a_night_leaves_a_block_once_its_lapsed_pickups_are_dropped() {
    Fixture::with(())
        .given(vec![
            inventory_set(10, 0, 18_000),
            block_set(4, 4),
            block_held(1, 1, at(15)),
        ])
        .when(RoomNightCommand::RemoveBlock {
            code: acme(),
            now: at(20),
        })
        .then_expect_events(vec![
            RoomNightEvent::BlockHoldLapsed {
                reservation_id: res(1),
                code: acme(),
                rooms: 1,
                expired_at: at(15),
                to_block: true,
            },
            RoomNightEvent::BlockRemoved {
                code: acme(),
                rooms: 4,
            },
        ]);
}
