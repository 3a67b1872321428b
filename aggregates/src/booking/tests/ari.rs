//! `update_ari`: bulk updates by days of the week, several updates in one command
//! decided on the state the earlier ones leave, and all of them or none.
//!
//! June 2027: the 10th is a Thursday, the 11th a Friday, the 12th a Saturday.

use std::collections::BTreeMap;

use chrono::Datelike as _;

use super::*;
use crate::restrictions::NightRestrictions;
use crate::types::Weekdays;

fn by_room_type(nights: Nights) -> BTreeMap<RoomTypeId, Nights> {
    [(king(), nights)].into_iter().collect()
}

fn ari(nights: &Nights, updates: Vec<AriUpdate>) -> Result<AriDecision, Rejection> {
    update_ari(
        &hotel_with_plans(),
        &by_room_type(nights.clone()),
        &UpdateAri {
            hotel_id: hotel_id(),
            updates,
            now: at(0),
        },
    )
}

fn days(names: &[&str]) -> Weekdays {
    Weekdays::parse(names).expect("valid days")
}

fn update(start: u32, end: u32, days: Weekdays, change: AriChange) -> AriUpdate {
    AriUpdate {
        room_type_id: king(),
        range: stay(start, end),
        days,
        change,
    }
}

fn restrictions(plan: Option<i64>, patch: RestrictionsPatch) -> AriChange {
    AriChange::Restrictions {
        rate_plan_id: plan.map(plan_id),
        patch,
    }
}

fn stop_sell() -> RestrictionsPatch {
    RestrictionsPatch {
        stop_sell: Some(true),
        ..RestrictionsPatch::default()
    }
}

fn open_rooms(total: i64, rate: i64) -> AriChange {
    AriChange::Inventory(InventoryUpdate {
        total_rooms: Some(total),
        overbooking_allowance: None,
        rate_cents: Some(Cents::new(rate)),
    })
}

fn rate_of(plan: i64, rate: i64) -> AriChange {
    AriChange::PlanRate {
        rate_plan_id: plan_id(plan),
        rate_cents: Cents::new(rate),
    }
}

/// The nights each decision writes to, in order.
fn nights_of(decision: &AriDecision) -> Vec<Vec<u32>> {
    decision
        .decisions
        .iter()
        .map(|(_, d)| d.nights.iter().map(|(k, _)| k.night.day()).collect())
        .collect()
}

/// `nights` after every decision of `decision`, in order.
fn after(decision: &AriDecision, mut nights: Nights) -> Nights {
    for (room_type, d) in &decision.decisions {
        assert_eq!(*room_type, king());
        let mut reservation = Reservation::default();
        apply(d, &mut reservation, &mut nights);
        assert!(d.reservation.is_empty());
    }
    nights
}

// --- Days of the week ---------------------------------------------------------------

#[test]
fn an_update_sets_only_the_nights_of_its_range_that_fall_on_its_days() {
    let nights = self::nights(&(10..17).map(|d| (d, 3, 0, 10_000)).collect::<Vec<_>>());
    let decision = ari(
        &nights,
        vec![update(
            10,
            17,
            days(&["fri", "sat"]),
            restrictions(None, stop_sell()),
        )],
    )
    .expect("every night has inventory");
    assert_eq!(nights_of(&decision), vec![vec![11, 12]]);
    assert_eq!(decision.nights_per_update, vec![2]);
    let after = after(&decision, nights);
    for d in 10..17 {
        assert_eq!(
            after[&day(d)].restrictions().all.stop_sell,
            d == 11 || d == 12,
            "the {d}th"
        );
    }
}

#[test]
fn inventory_and_plan_rates_follow_the_days_too() {
    let decision = ari(
        &Nights::new(),
        vec![
            update(10, 17, days(&["SUN", "thu"]), open_rooms(4, 9_000)),
            update(10, 17, days(&["sun"]), rate_of(FLEX, 11_000)),
        ],
    )
    .expect("valid updates");
    assert_eq!(nights_of(&decision), vec![vec![10, 13], vec![13]]);
    assert_eq!(decision.nights_per_update, vec![2, 1]);
    let after = after(&decision, Nights::new());
    assert_eq!(
        after.keys().copied().collect::<Vec<_>>(),
        vec![day(10), day(13)]
    );
    assert_eq!(
        after[&day(13)].plan_rate(plan_id(FLEX)),
        Some(Cents::new(11_000))
    );
    assert_eq!(after[&day(10)].plan_rate(plan_id(FLEX)), None);
}

#[test]
fn a_night_without_inventory_outside_the_chosen_days_does_not_refuse() {
    // Only Thursday the 10th has inventory; the update is for Thursdays.
    let nights = self::nights(&[(10, 3, 0, 10_000)]);
    let decision = ari(
        &nights,
        vec![update(
            10,
            17,
            days(&["thu"]),
            restrictions(None, stop_sell()),
        )],
    )
    .expect("the only Thursday has inventory");
    assert_eq!(nights_of(&decision), vec![vec![10]]);
}

// --- Several updates in one command -------------------------------------------------

#[test]
fn inventory_opened_and_restricted_in_one_command_stack_in_order() {
    let decision = ari(
        &Nights::new(),
        vec![
            update(20, 22, Weekdays::ALL, open_rooms(5, 9_000)),
            update(20, 22, Weekdays::ALL, restrictions(None, stop_sell())),
            update(21, 22, Weekdays::ALL, rate_of(FLEX, 12_000)),
        ],
    )
    .expect("each update meets the inventory the first opened");
    assert_eq!(
        nights_of(&decision),
        vec![vec![20, 21], vec![20, 21], vec![21]]
    );
    assert_eq!(decision.nights_per_update, vec![2, 2, 1]);
    assert_eq!(
        decision.decisions[1].1.nights[0].1,
        vec![RoomNightEvent::RestrictionsSet {
            rate_plan_id: None,
            restrictions: NightRestrictions {
                stop_sell: true,
                ..NightRestrictions::default()
            },
        }]
    );
    let after = after(&decision, Nights::new());
    assert!(after[&day(20)].restrictions().all.stop_sell);
    assert_eq!(after[&day(21)].levels().map(|l| l.total_rooms()), Some(5));
    assert_eq!(
        after[&day(21)].plan_rate(plan_id(FLEX)),
        Some(Cents::new(12_000))
    );
}

#[test]
fn the_same_restriction_alone_on_nights_without_inventory_is_no_inventory() {
    assert_eq!(
        ari(
            &Nights::new(),
            vec![update(
                20,
                22,
                Weekdays::ALL,
                restrictions(None, stop_sell())
            )]
        ),
        Err(Rejection::NoInventory { night: day(20) })
    );
}

#[test]
fn a_later_patch_keeps_what_an_earlier_one_set_and_records_the_whole_set() {
    let nights = four_nights(3);
    let decision = ari(
        &nights,
        vec![
            update(
                10,
                11,
                Weekdays::ALL,
                restrictions(
                    Some(FLEX),
                    RestrictionsPatch {
                        min_stay: Some(Some(2)),
                        ..RestrictionsPatch::default()
                    },
                ),
            ),
            update(
                10,
                11,
                Weekdays::ALL,
                restrictions(
                    Some(FLEX),
                    RestrictionsPatch {
                        closed_to_arrival: Some(true),
                        ..RestrictionsPatch::default()
                    },
                ),
            ),
        ],
    )
    .expect("valid updates");
    assert_eq!(
        decision.decisions[1].1.nights,
        vec![(
            key(10),
            vec![RoomNightEvent::RestrictionsSet {
                rate_plan_id: Some(plan_id(FLEX)),
                restrictions: NightRestrictions {
                    min_stay: Some(2),
                    closed_to_arrival: true,
                    ..NightRestrictions::default()
                },
            }]
        )]
    );
}

#[test]
fn an_update_that_changes_nothing_records_nothing_but_still_counts_its_nights() {
    let mut nights = four_nights(3);
    restrict(&mut nights, 10, None, stop_sell());
    restrict(&mut nights, 11, None, stop_sell());
    let decision = ari(
        &nights,
        vec![update(
            10,
            12,
            Weekdays::ALL,
            restrictions(None, stop_sell()),
        )],
    )
    .expect("valid update");
    assert!(decision.decisions[0].1.is_empty());
    assert_eq!(decision.nights_per_update, vec![2]);
}

// --- All or nothing -----------------------------------------------------------------

#[test]
fn a_later_update_on_a_night_without_inventory_refuses_the_whole_command() {
    let result = ari(
        &four_nights(3),
        vec![
            update(10, 12, Weekdays::ALL, restrictions(None, stop_sell())),
            update(12, 16, Weekdays::ALL, rate_of(FLEX, 9_000)),
        ],
    );
    assert_eq!(result, Err(Rejection::NoInventory { night: day(14) }));
}

#[test]
fn a_later_rate_for_a_derived_plan_refuses_the_whole_command() {
    let result = ari(
        &four_nights(3),
        vec![
            update(10, 12, Weekdays::ALL, open_rooms(5, 9_000)),
            update(10, 12, Weekdays::ALL, rate_of(NONREF, 8_000)),
        ],
    );
    assert_eq!(result, Err(Rejection::DerivedRatePlan));
}

#[test]
fn a_later_inventory_below_what_is_sold_refuses_the_whole_command() {
    let mut nights = four_nights(3);
    held(hold_cmd(1, 11, 12, 2), &mut nights);
    let result = ari(
        &nights,
        vec![
            update(10, 12, Weekdays::ALL, restrictions(None, stop_sell())),
            update(10, 12, Weekdays::ALL, open_rooms(1, 9_000)),
        ],
    );
    assert_eq!(
        result,
        Err(Rejection::InventoryBelowReserved {
            night: day(11),
            reserved: 2
        })
    );
}

// --- Refusals -----------------------------------------------------------------------

#[test]
fn restrictions_or_rates_on_a_night_without_inventory_are_no_inventory_naming_it() {
    let nights = self::nights(&[(10, 3, 0, 10_000), (11, 3, 0, 10_000), (13, 3, 0, 10_000)]);
    assert_eq!(
        ari(
            &nights,
            vec![update(
                10,
                14,
                Weekdays::ALL,
                restrictions(Some(FLEX), stop_sell())
            )]
        ),
        Err(Rejection::NoInventory { night: day(12) })
    );
    assert_eq!(
        ari(
            &nights,
            vec![update(10, 14, Weekdays::ALL, rate_of(FLEX, 9_000))]
        ),
        Err(Rejection::NoInventory { night: day(12) })
    );
}

#[test]
fn a_rate_for_a_derived_plan_is_derived_rate_plan() {
    for plan in [NONREF, MEMBER] {
        assert_eq!(
            ari(
                &four_nights(3),
                vec![update(10, 12, Weekdays::ALL, rate_of(plan, 9_000))]
            ),
            Err(Rejection::DerivedRatePlan),
            "plan {plan}"
        );
    }
}

#[test]
fn restrictions_may_be_set_for_a_derived_plan() {
    let decision = ari(
        &four_nights(3),
        vec![update(
            10,
            12,
            Weekdays::ALL,
            restrictions(Some(NONREF), stop_sell()),
        )],
    )
    .expect("restrictions bind any plan");
    assert_eq!(nights_of(&decision), vec![vec![10, 11]]);
}

#[test]
fn restrictions_or_rates_for_an_unknown_plan_name_the_plan_and_the_room_type() {
    assert_eq!(
        ari(
            &four_nights(3),
            vec![update(
                10,
                12,
                Weekdays::ALL,
                restrictions(Some(9), stop_sell())
            )]
        ),
        Err(Rejection::PlanDoesNotSell {
            rate_plan_id: plan_id(9),
            room_type_id: RoomTypeId::parse(3).expect("id"),
        })
    );
    assert_eq!(
        ari(
            &four_nights(3),
            vec![update(10, 12, Weekdays::ALL, rate_of(9, 9_000))]
        ),
        Err(Rejection::PlanDoesNotSell {
            rate_plan_id: plan_id(9),
            room_type_id: RoomTypeId::parse(3).expect("id"),
        })
    );
}

#[test]
fn an_update_for_an_unknown_room_type_is_unknown_room_type() {
    let mut twin = update(10, 12, Weekdays::ALL, restrictions(None, stop_sell()));
    twin.room_type_id = RoomTypeId::parse(4).expect("valid id");
    assert_eq!(
        ari(&four_nights(3), vec![twin]),
        Err(Rejection::UnknownRoomType)
    );
}
