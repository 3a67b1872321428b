use super::*;
use cqrs_es::test::TestFramework;

type Fixture = TestFramework<Hotel>;

fn hotel_id(n: i64) -> HotelId {
    HotelId::parse(n).expect("valid id")
}

fn room_type_id(n: i64) -> RoomTypeId {
    RoomTypeId::parse(n).expect("valid id")
}

fn lisbon() -> HotelDetails {
    HotelDetails::parse("Casa do Rio", "Lisbon", "Europe/Lisbon").expect("valid details")
}

fn king() -> RoomTypeDetails {
    RoomTypeDetails::parse("King", 2).expect("valid room type")
}

fn details_set() -> HotelEvent {
    HotelEvent::HotelDetailsSet {
        hotel_id: hotel_id(7),
        details: lisbon(),
    }
}

#[test]
fn setting_details_of_a_new_hotel_creates_it() {
    Fixture::with(())
        .given_no_previous_events()
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: lisbon(),
        })
        .then_expect_events(vec![details_set()]);
}

#[test]
fn setting_the_same_details_again_changes_nothing() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: lisbon(),
        })
        .then_expect_events(vec![]);
}

#[test]
fn setting_new_details_records_them() {
    let renamed =
        HotelDetails::parse("Casa do Tejo", "Lisbon", "Europe/Lisbon").expect("valid details");
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: renamed.clone(),
        })
        .then_expect_events(vec![HotelEvent::HotelDetailsSet {
            hotel_id: hotel_id(7),
            details: renamed,
        }]);
}

#[test]
fn setting_details_under_another_hotel_id_is_wrong_hotel() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(8),
            details: lisbon(),
        })
        .then_expect_error(HotelError::WrongHotel);
}

#[test]
fn adding_a_room_type_to_an_unknown_hotel_is_unknown_hotel() {
    Fixture::with(())
        .given_no_previous_events()
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: king(),
        })
        .then_expect_error(HotelError::UnknownHotel);
}

#[test]
fn adding_a_room_type_records_it() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: king(),
        })
        .then_expect_events(vec![HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: king(),
        }]);
}

#[test]
fn setting_the_same_room_type_again_changes_nothing() {
    Fixture::with(())
        .given(vec![
            details_set(),
            HotelEvent::RoomTypeSet {
                room_type_id: room_type_id(3),
                details: king(),
            },
        ])
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: king(),
        })
        .then_expect_events(vec![]);
}

#[test]
fn changing_a_room_type_records_the_new_details() {
    let family = RoomTypeDetails::parse("King family", 4).expect("valid room type");
    Fixture::with(())
        .given(vec![
            details_set(),
            HotelEvent::RoomTypeSet {
                room_type_id: room_type_id(3),
                details: king(),
            },
        ])
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: family.clone(),
        })
        .then_expect_events(vec![HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: family,
        }]);
}

#[test]
fn the_catalog_follows_the_events() {
    let mut hotel = Hotel::default();
    assert_eq!(hotel.hotel_id(), None);
    for event in [
        details_set(),
        HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: king(),
        },
    ] {
        hotel.apply_event(&event);
    }
    assert_eq!(hotel.hotel_id(), Some(hotel_id(7)));
    assert_eq!(
        hotel.details().map(|d| d.timezone().name()),
        Some("Europe/Lisbon")
    );
    assert_eq!(hotel.room_type(room_type_id(3)), Some(&king()));
    assert_eq!(hotel.room_type(room_type_id(4)), None);
    assert_eq!(hotel.room_types().len(), 1);
    assert_eq!(details_set().event_type(), "HotelDetailsSet");
}

#[test]
fn hotel_details_are_validated_and_trimmed() {
    assert!(HotelDetails::parse("", "Lisbon", "Europe/Lisbon").is_err());
    assert!(HotelDetails::parse("Casa", "  ", "Europe/Lisbon").is_err());
    assert!(HotelDetails::parse("Casa\u{7}", "Lisbon", "Europe/Lisbon").is_err());
    assert!(HotelDetails::parse("Casa", "Lisbon", "Mars/Olympus").is_err());
    let details = HotelDetails::parse("  Casa  ", " Lisbon ", "Europe/Lisbon").expect("valid");
    assert_eq!((details.name(), details.city()), ("Casa", "Lisbon"));
}

#[test]
fn room_types_sleep_one_to_fifty_guests() {
    assert!(RoomTypeDetails::parse("King", 0).is_err());
    assert!(RoomTypeDetails::parse("King", 51).is_err());
    assert!(RoomTypeDetails::parse("", 2).is_err());
    let dorm = RoomTypeDetails::parse("Dorm", 50).expect("valid");
    assert_eq!((dorm.name(), dorm.max_occupancy()), ("Dorm", 50));
}

// --- Occupancy pricing --------------------------------------------------------------

#[test]
fn the_base_occupancy_is_one_to_the_rooms_maximum() {
    let family = || RoomTypeDetails::parse("Family", 4).expect("valid room type");
    let field = |r: Result<RoomTypeDetails, InvalidInput>| r.expect_err("refused").field;
    assert_eq!(
        field(family().with_occupancy_pricing(Some(0), None)),
        "base_occupancy"
    );
    assert_eq!(
        field(family().with_occupancy_pricing(Some(5), None)),
        "base_occupancy"
    );
    assert_eq!(
        field(family().with_occupancy_pricing(Some(-1), None)),
        "base_occupancy"
    );
    let one = family()
        .with_occupancy_pricing(Some(1), None)
        .expect("one is the least");
    assert_eq!(one.base_occupancy(), 1);
    let four = family()
        .with_occupancy_pricing(Some(4), None)
        .expect("the maximum is the most");
    assert_eq!(four.base_occupancy(), 4);
    // The maximum is the default: the same room type as one never priced by occupancy.
    assert_eq!(four, family());
    assert_eq!(family().base_occupancy(), 4);
}

#[test]
fn the_extra_guest_charge_is_zero_to_a_million_in_currency_units() {
    let family = || RoomTypeDetails::parse("Family", 4).expect("valid room type");
    let field = |r: Result<RoomTypeDetails, InvalidInput>| r.expect_err("refused").field;
    assert_eq!(
        field(family().with_occupancy_pricing(None, Some(-1))),
        "extra_guest_cents"
    );
    assert_eq!(
        field(family().with_occupancy_pricing(None, Some(100_000_001))),
        "extra_guest_cents"
    );
    let most = family()
        .with_occupancy_pricing(Some(2), Some(100_000_000))
        .expect("the most");
    assert_eq!(most.extra_guest_cents(), Cents::new(100_000_000));
    let free = family()
        .with_occupancy_pricing(Some(2), Some(0))
        .expect("free");
    assert_eq!(free.extra_guests_charge(4), Cents::ZERO);
}

#[test]
fn each_guest_beyond_the_base_occupancy_adds_the_extra_charge() {
    let family = RoomTypeDetails::parse("Family", 4)
        .and_then(|r| r.with_occupancy_pricing(Some(2), Some(2_500)))
        .expect("valid room type");
    assert_eq!(family.base_occupancy(), 2);
    assert_eq!(family.extra_guests_charge(1), Cents::ZERO);
    assert_eq!(family.extra_guests_charge(2), Cents::ZERO);
    assert_eq!(family.extra_guests_charge(3), Cents::new(2_500));
    assert_eq!(family.extra_guests_charge(4), Cents::new(5_000));
    // Omitted values keep what the room type has.
    let kept = family
        .clone()
        .with_occupancy_pricing(None, None)
        .expect("nothing changes");
    assert_eq!(kept, family);
}

// --- Rate plans ---------------------------------------------------------------------

fn plan_id(n: i64) -> RatePlanId {
    RatePlanId::parse(n).expect("valid id")
}

fn twin() -> RoomTypeDetails {
    RoomTypeDetails::parse("Twin", 2).expect("valid room type")
}

/// Hotel 7 with room types 3 (king) and 4 (twin).
fn catalog() -> Vec<HotelEvent> {
    vec![
        details_set(),
        HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: king(),
        },
        HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(4),
            details: twin(),
        },
    ]
}

fn plan(room_types: &[i64], pricing: Pricing) -> RatePlan {
    RatePlan::parse(
        "Plan",
        room_types.iter().map(|n| room_type_id(*n)).collect(),
        CancellationPolicy::HOUSE,
        pricing,
    )
    .expect("valid plan")
}

fn derived(parent: i64, adjust_percent: i32) -> Pricing {
    Pricing::Derived {
        parent: plan_id(parent),
        adjust_percent,
    }
}

fn plan_set(id: i64, plan: RatePlan) -> HotelEvent {
    HotelEvent::RatePlanSet {
        rate_plan_id: plan_id(id),
        plan,
    }
}

fn set_plan(id: i64, plan: RatePlan) -> HotelCommand {
    HotelCommand::SetRatePlan {
        rate_plan_id: plan_id(id),
        plan,
    }
}

fn given(extra: Vec<HotelEvent>) -> Vec<HotelEvent> {
    let mut events = catalog();
    events.extend(extra);
    events
}

#[test]
fn setting_a_rate_plan_records_it() {
    Fixture::with(())
        .given(catalog())
        .when(set_plan(1, plan(&[3, 4], Pricing::Own)))
        .then_expect_events(vec![plan_set(1, plan(&[3, 4], Pricing::Own))]);
}

#[test]
fn setting_a_derived_plan_over_an_existing_parent_records_it() {
    Fixture::with(())
        .given(given(vec![plan_set(1, plan(&[3, 4], Pricing::Own))]))
        .when(set_plan(2, plan(&[3], derived(1, -10))))
        .then_expect_events(vec![plan_set(2, plan(&[3], derived(1, -10)))]);
}

#[test]
fn setting_the_same_rate_plan_again_changes_nothing() {
    Fixture::with(())
        .given(given(vec![plan_set(1, plan(&[3], Pricing::Own))]))
        .when(set_plan(1, plan(&[3], Pricing::Own)))
        .then_expect_events(vec![]);
}

#[test]
fn changing_a_plans_policy_records_the_new_plan() {
    let non_refundable = RatePlan::parse(
        "Plan",
        [room_type_id(3)].into_iter().collect(),
        CancellationPolicy::NonRefundable,
        Pricing::Own,
    )
    .expect("valid plan");
    Fixture::with(())
        .given(given(vec![plan_set(1, plan(&[3], Pricing::Own))]))
        .when(set_plan(1, non_refundable.clone()))
        .then_expect_events(vec![plan_set(1, non_refundable)]);
}

#[test]
fn setting_a_plan_of_an_unknown_hotel_is_unknown_hotel() {
    Fixture::with(())
        .given_no_previous_events()
        .when(set_plan(1, plan(&[3], Pricing::Own)))
        .then_expect_error(HotelError::UnknownHotel);
}

#[test]
fn a_plan_selling_a_room_type_the_hotel_does_not_have_is_unknown_room_type() {
    Fixture::with(())
        .given(catalog())
        .when(set_plan(1, plan(&[3, 9], Pricing::Own)))
        .then_expect_error(HotelError::UnknownRoomType(room_type_id(9)));
}

#[test]
fn a_plan_derived_from_a_plan_that_does_not_exist_is_an_unknown_parent() {
    Fixture::with(())
        .given(given(vec![plan_set(1, plan(&[3], Pricing::Own))]))
        .when(set_plan(2, plan(&[3], derived(5, -10))))
        .then_expect_error(HotelError::Pricing(PricingError::UnknownParent(plan_id(2))));
}

#[test]
fn a_plan_derived_from_itself_is_a_cycle() {
    Fixture::with(())
        .given(catalog())
        .when(set_plan(1, plan(&[3], derived(1, -10))))
        .then_expect_error(HotelError::Pricing(PricingError::Cycle(plan_id(1))));
}

#[test]
fn deriving_a_parent_from_its_own_child_is_a_cycle() {
    // P1 derives from P2; P2 changed to derive from P1.
    Fixture::with(())
        .given(given(vec![
            plan_set(2, plan(&[3], Pricing::Own)),
            plan_set(1, plan(&[3], derived(2, -10))),
        ]))
        .when(set_plan(2, plan(&[3], derived(1, 5))))
        .then_expect_error(HotelError::Pricing(PricingError::Cycle(plan_id(1))));
}

#[test]
fn a_cycle_is_named_by_a_plan_in_it_not_by_a_plan_that_only_leads_to_it() {
    // P1 <- P2 <- P3 (own); P3 changed to derive from P2 closes a loop of P2 and P3 that
    // P1 only leads into: P1 does not derive from itself.
    let result = Fixture::with(())
        .given(given(vec![
            plan_set(3, plan(&[3], Pricing::Own)),
            plan_set(2, plan(&[3], derived(3, -10))),
            plan_set(1, plan(&[3], derived(2, -10))),
        ]))
        .when(set_plan(3, plan(&[3], derived(2, 5))))
        .inspect_result();
    match result {
        Err(HotelError::Pricing(PricingError::Cycle(id))) => {
            assert!([plan_id(2), plan_id(3)].contains(&id), "named {id}");
        }
        other => panic!("expected a cycle, got {other:?}"),
    }
}

#[test]
fn a_derived_plan_selling_a_room_type_its_parent_does_not_is_refused() {
    Fixture::with(())
        .given(given(vec![plan_set(1, plan(&[3], Pricing::Own))]))
        .when(set_plan(2, plan(&[3, 4], derived(1, -10))))
        .then_expect_error(HotelError::ParentMissingRoomType {
            plan: plan_id(2),
            parent: plan_id(1),
            room_type_id: room_type_id(4),
        });
}

#[test]
fn a_parent_may_not_stop_selling_a_room_type_its_child_sells() {
    Fixture::with(())
        .given(given(vec![
            plan_set(1, plan(&[3, 4], Pricing::Own)),
            plan_set(2, plan(&[3, 4], derived(1, -10))),
        ]))
        .when(set_plan(1, plan(&[3], Pricing::Own)))
        .then_expect_error(HotelError::ParentMissingRoomType {
            plan: plan_id(2),
            parent: plan_id(1),
            room_type_id: room_type_id(4),
        });
}

#[test]
fn a_derived_plan_may_sell_fewer_room_types_than_its_parent() {
    Fixture::with(())
        .given(given(vec![plan_set(1, plan(&[3, 4], Pricing::Own))]))
        .when(set_plan(2, plan(&[4], derived(1, 20))))
        .then_expect_events(vec![plan_set(2, plan(&[4], derived(1, 20)))]);
}

#[test]
fn the_catalog_answers_price_chains_and_the_plans_selling_a_room_type() {
    let mut hotel = Hotel::default();
    for event in given(vec![
        plan_set(1, plan(&[3, 4], Pricing::Own)),
        plan_set(2, plan(&[3], derived(1, -10))),
        plan_set(3, plan(&[3], derived(2, -5))),
    ]) {
        hotel.apply_event(&event);
    }
    assert_eq!(
        hotel.price_chain(plan_id(3)),
        Ok((plan_id(1), smallvec::smallvec![-10, -5]))
    );
    assert_eq!(
        hotel.price_chain(plan_id(1)),
        Ok((plan_id(1), smallvec::smallvec![]))
    );
    assert_eq!(
        hotel.price_chain(plan_id(9)),
        Err(PricingError::UnknownPlan(plan_id(9)))
    );
    let selling = |rt| {
        hotel
            .plans_selling(room_type_id(rt))
            .map(|(id, _)| id.get())
            .collect::<Vec<_>>()
    };
    assert_eq!(selling(3), vec![1, 2, 3]);
    assert_eq!(selling(4), vec![1]);
    assert!(hotel
        .rate_plan(plan_id(2))
        .is_some_and(RatePlan::is_derived));
    assert_eq!(hotel.rate_plans().len(), 3);
}

#[test]
fn a_rate_plan_lists_room_types_and_adjusts_within_bounds() {
    let field = |r: Result<RatePlan, InvalidInput>| r.expect_err("refused").field;
    let parse = |rts: &[i64], pricing| {
        RatePlan::parse(
            "Plan",
            rts.iter().map(|n| room_type_id(*n)).collect(),
            CancellationPolicy::HOUSE,
            pricing,
        )
    };
    assert_eq!(field(parse(&[], Pricing::Own)), "room_type_ids");
    assert_eq!(
        field(parse(&[3], derived(1, -101))),
        "derived_from.adjust_percent"
    );
    assert_eq!(
        field(parse(&[3], derived(1, 1001))),
        "derived_from.adjust_percent"
    );
    assert!(parse(&[3], derived(1, -100)).is_ok());
    assert!(parse(&[3], derived(1, 1000)).is_ok());
    assert_eq!(
        field(RatePlan::parse(
            " ",
            [room_type_id(3)].into_iter().collect(),
            CancellationPolicy::HOUSE,
            Pricing::Own
        )),
        "name"
    );
}

#[test]
fn changing_a_hotels_currency_records_its_details_again() {
    let francs = lisbon().with_currency(Currency::parse("CHF").expect("a currency"));
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: francs.clone(),
        })
        .then_expect_events(vec![HotelEvent::HotelDetailsSet {
            hotel_id: hotel_id(7),
            details: francs,
        }]);
}

#[test]
fn details_stored_before_hotels_had_a_currency_read_back_in_euros_and_euros_serialize_as_before() {
    let stored = r#"{"name":"Casa do Rio","city":"Lisbon","timezone":"Europe/Lisbon"}"#;
    let details: HotelDetails = serde_json::from_str(stored).expect("stored details");
    assert_eq!(details.currency(), Currency::EUR);
    assert_eq!(serde_json::to_string(&details).expect("json"), stored);
    let yen = details.with_currency(Currency::parse("JPY").expect("a currency"));
    let json = serde_json::to_string(&yen).expect("json");
    assert!(json.ends_with(r#","currency":"JPY"}"#), "{json}");
}

fn city_tax() -> crate::taxes::Taxes {
    use crate::taxes::{Tax, TaxKind, Taxes};
    Taxes::parse(vec![Tax::parse(
        "CITY",
        TaxKind::PerPersonNight {
            amount: crate::types::Cents::new(200),
            max_nights: Some(7),
        },
    )
    .expect("tax")])
    .expect("taxes")
}

#[test]
fn setting_taxes_records_the_whole_list() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetTaxes { taxes: city_tax() })
        .then_expect_events(vec![HotelEvent::TaxesSet { taxes: city_tax() }]);
}

#[test]
fn setting_the_same_taxes_again_changes_nothing() {
    Fixture::with(())
        .given(vec![
            details_set(),
            HotelEvent::TaxesSet { taxes: city_tax() },
        ])
        .when(HotelCommand::SetTaxes { taxes: city_tax() })
        .then_expect_events(vec![]);
}

#[test]
fn setting_taxes_of_an_unknown_hotel_is_unknown_hotel() {
    Fixture::with(())
        .given_no_previous_events()
        .when(HotelCommand::SetTaxes { taxes: city_tax() })
        .then_expect_error(HotelError::UnknownHotel);
}

#[test]
fn a_hotel_without_taxes_serializes_as_it_did_before_taxes_existed() {
    let mut hotel = Hotel::default();
    hotel.apply_event(&details_set());
    let json = serde_json::to_value(&hotel).expect("json");
    assert!(json.get("taxes").is_none(), "{json}");
    hotel.apply_event(&HotelEvent::TaxesSet { taxes: city_tax() });
    let back: Hotel =
        serde_json::from_value(serde_json::to_value(&hotel).expect("json")).expect("back");
    assert_eq!(back.taxes(), &city_tax());
}
