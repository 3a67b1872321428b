//! Given a catalog and nights as a reader holds them, when a stay is searched, then
//! exactly the bookable offers, priced as a hold would price them.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;

use super::*;
use crate::hotel::{HotelCommand, HotelDetails, RatePlan, RoomTypeDetails};
use crate::rate_plan::Pricing;
use crate::types::HotelId;

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, d).expect("valid date")
}

fn stay(start: u32, end: u32) -> StayDates {
    StayDates::parse(day(start), day(end)).expect("valid stay")
}

fn rt(id: i64) -> RoomTypeId {
    RoomTypeId::parse(id).expect("valid id")
}

fn plan(id: i64) -> RatePlanId {
    RatePlanId::parse(id).expect("valid id")
}

const KING: i64 = 3;
const TWIN: i64 = 4;
const SINGLE: i64 = 5;
const FLEX: i64 = 1;
const SAVER: i64 = 2;

/// A hotel whose catalog is built by `commands` after its details.
fn hotel_with(commands: Vec<HotelCommand>) -> Hotel {
    let mut hotel = Hotel::default();
    let details = HotelCommand::SetDetails {
        hotel_id: HotelId::parse(7).expect("id"),
        details: HotelDetails::parse("Casa do Rio", "Lisbon", "Europe/Lisbon").expect("details"),
    };
    for command in std::iter::once(details).chain(commands) {
        for event in hotel.decide(command).expect("catalog accepts") {
            hotel.apply_event(&event);
        }
    }
    hotel
}

fn room_type(id: i64, name: &str, max: i64) -> HotelCommand {
    HotelCommand::SetRoomType {
        room_type_id: rt(id),
        details: RoomTypeDetails::parse(name, max).expect("room type"),
    }
}

fn rate_plan(
    id: i64,
    room_types: &[i64],
    policy: CancellationPolicy,
    pricing: Pricing,
) -> HotelCommand {
    HotelCommand::SetRatePlan {
        rate_plan_id: plan(id),
        plan: RatePlan::parse(
            &format!("plan {id}"),
            room_types.iter().map(|r| rt(*r)).collect::<BTreeSet<_>>(),
            policy,
            pricing,
        )
        .expect("plan"),
    }
}

/// King (sleeps 2) sold under a flexible plan and a non-refundable one 10% under it;
/// twin (sleeps 3, the rate covers 2, 20.00 per extra guest) sold under the flexible
/// plan; single (sleeps 1) sold under no plan.
fn hotel() -> Hotel {
    hotel_with(vec![
        room_type(KING, "king", 2),
        HotelCommand::SetRoomType {
            room_type_id: rt(TWIN),
            details: RoomTypeDetails::parse("twin", 3)
                .and_then(|d| d.with_occupancy_pricing(Some(2), Some(2_000)))
                .expect("room type"),
        },
        room_type(SINGLE, "single", 1),
        rate_plan(FLEX, &[KING, TWIN], CancellationPolicy::HOUSE, Pricing::Own),
        rate_plan(
            SAVER,
            &[KING],
            CancellationPolicy::NonRefundable,
            Pricing::Derived {
                parent: plan(FLEX),
                adjust_percent: -10,
            },
        ),
    ])
}

/// What a reader holds of one night of one room type.
#[derive(Debug, Clone, Default)]
struct Night {
    remaining: u32,
    rate: i64,
    restrictions: RestrictionSet,
    plan_rates: BTreeMap<RatePlanId, Cents>,
}

#[derive(Debug, Default)]
struct Nights(BTreeMap<(RoomTypeId, NaiveDate), Night>);

impl Nights {
    /// `remaining` rooms at `rate` for `room_type` on days `from..to`.
    fn with(mut self, room_type: i64, from: u32, to: u32, remaining: u32, rate: i64) -> Self {
        for d in from..to {
            self.0.insert(
                (rt(room_type), day(d)),
                Night {
                    remaining,
                    rate,
                    ..Night::default()
                },
            );
        }
        self
    }

    fn night(&mut self, room_type: i64, d: u32) -> &mut Night {
        self.0.entry((rt(room_type), day(d))).or_default()
    }

    /// Restrictions on one night for every plan (`None`) or one plan.
    fn restrict(
        mut self,
        room_type: i64,
        d: u32,
        for_plan: Option<i64>,
        change: impl FnOnce(&mut NightRestrictions),
    ) -> Self {
        let set = &mut self.night(room_type, d).restrictions;
        let mut rules = set.of(for_plan.map(plan));
        change(&mut rules);
        set.set(for_plan.map(plan), rules);
        self
    }

    fn plan_rate(mut self, room_type: i64, d: u32, for_plan: i64, rate: i64) -> Self {
        self.night(room_type, d)
            .plan_rates
            .insert(plan(for_plan), Cents::new(rate));
        self
    }

    fn view(&self, room_type: RoomTypeId, date: NaiveDate) -> Option<NightView<'_>> {
        self.0.get(&(room_type, date)).map(|n| NightView {
            remaining: n.remaining,
            base_rate: Cents::new(n.rate),
            restrictions: &n.restrictions,
            plan_rates: &n.plan_rates,
        })
    }
}

fn request(stay: &StayDates, rooms: i64, guests: i64) -> OfferRequest<'_> {
    OfferRequest {
        stay,
        rooms: RoomCount::parse(rooms).expect("rooms"),
        guests: GuestCount::parse(guests).expect("guests"),
        today: day(1),
        limits: BookingLimits::default(),
    }
}

fn search(hotel: &Hotel, nights: &Nights, request: &OfferRequest<'_>) -> Vec<Offer> {
    offers(hotel, request, |room_type, date| {
        nights.view(room_type, date)
    })
}

/// The offers as (room type, plan, total, remaining, refundable).
fn listed(offers: &[Offer]) -> Vec<(i64, Option<i64>, i64, u32, bool)> {
    offers
        .iter()
        .map(|o| {
            (
                o.room_type_id.get(),
                o.rate_plan_id.map(RatePlanId::get),
                o.total_cents.get(),
                o.remaining,
                o.refundable,
            )
        })
        .collect()
}

/// Every room type with `remaining` rooms at these rates on the 10th to 12th.
fn three_nights(remaining: u32) -> Nights {
    Nights::default()
        .with(KING, 10, 13, remaining, 10_005)
        .with(TWIN, 10, 13, remaining, 12_000)
        .with(SINGLE, 10, 13, remaining, 8_000)
}

#[test]
fn every_plan_selling_a_room_type_is_an_offer_and_a_room_type_no_plan_sells_is_offered_at_the_base_rate(
) {
    // Given three nights of every room type; when one guest asks for one room
    let offers = search(&hotel(), &three_nights(4), &request(&stay(10, 13), 1, 1));
    // Then, cheapest first: single at its base rate (house policy, refundable), king
    // non-refundable at 10% under flexible, rounded halves up per night
    // (10,005 * 0.9 = 9,004.5 -> 9,005), king flexible, twin flexible.
    assert_eq!(
        listed(&offers),
        vec![
            (SINGLE, None, 24_000, 4, true),
            (KING, Some(SAVER), 27_015, 4, false),
            (KING, Some(FLEX), 30_015, 4, true),
            (TWIN, Some(FLEX), 36_000, 4, true),
        ]
    );
}

#[test]
fn the_total_is_for_every_room_asked_and_remaining_is_the_fewest_over_the_nights() {
    let mut nights = three_nights(5);
    nights.night(KING, 11).remaining = 2;
    let offers = search(&hotel(), &nights, &request(&stay(10, 13), 2, 1));
    let king: Vec<_> = listed(&offers)
        .into_iter()
        .filter(|o| o.0 == KING)
        .collect();
    assert_eq!(
        king,
        vec![
            (KING, Some(SAVER), 2 * 27_015, 2, false),
            (KING, Some(FLEX), 2 * 30_015, 2, true),
        ]
    );
}

#[test]
fn a_room_type_short_of_rooms_or_of_inventory_on_any_night_is_not_offered() {
    // Given king with one room left on the 11th and twin without inventory on the 12th
    let mut nights = three_nights(3);
    nights.night(KING, 11).remaining = 1;
    nights.0.remove(&(rt(TWIN), day(12)));
    // When two rooms are asked for
    let offers = search(&hotel(), &nights, &request(&stay(10, 13), 2, 1));
    // Then only single is offered
    assert_eq!(listed(&offers), vec![(SINGLE, None, 48_000, 3, true)]);
    // And a stay of one room still gets king, but never twin
    let one = search(&hotel(), &nights, &request(&stay(10, 13), 1, 1));
    assert!(one.iter().any(|o| o.room_type_id == rt(KING)));
    assert!(one.iter().all(|o| o.room_type_id != rt(TWIN)));
}

#[test]
fn a_plans_own_rate_prices_it_and_the_plans_derived_from_it() {
    // Given flexible king at 150.00 of its own on the 11th (base 100.05)
    let nights = three_nights(4).plan_rate(KING, 11, FLEX, 15_000);
    let offers = search(&hotel(), &nights, &request(&stay(10, 13), 1, 1));
    let king: Vec<_> = listed(&offers)
        .into_iter()
        .filter(|o| o.0 == KING)
        .collect();
    // Then flexible is 100.05 + 150.00 + 100.05, and saver 90.05 + 135.00 + 90.05
    assert_eq!(
        king,
        vec![
            (KING, Some(SAVER), 9_005 + 13_500 + 9_005, 4, false),
            (KING, Some(FLEX), 10_005 + 15_000 + 10_005, 4, true),
        ]
    );
}

#[test]
fn a_stop_sell_for_every_plan_ends_the_room_types_offers_and_one_for_a_plan_ends_that_plans() {
    let hotel = hotel();
    let all_stopped = three_nights(4).restrict(KING, 11, None, |r| r.stop_sell = true);
    let offers = search(&hotel, &all_stopped, &request(&stay(10, 13), 1, 1));
    assert!(
        offers.iter().all(|o| o.room_type_id != rt(KING)),
        "{offers:?}"
    );

    let saver_stopped = three_nights(4).restrict(KING, 11, Some(SAVER), |r| r.stop_sell = true);
    let offers = search(&hotel, &saver_stopped, &request(&stay(10, 13), 1, 1));
    let king: Vec<_> = offers
        .iter()
        .filter(|o| o.room_type_id == rt(KING))
        .map(|o| o.rate_plan_id)
        .collect();
    assert_eq!(king, vec![Some(plan(FLEX))]);
}

#[test]
fn the_base_rate_is_bound_only_by_the_restrictions_for_every_plan() {
    // Given single (sold at its base rate) with a stop-sell for plan 1 only, which does
    // not sell it, and a minimum stay of 4 for every plan on its arrival night
    let plan_only = three_nights(4).restrict(SINGLE, 10, Some(FLEX), |r| r.stop_sell = true);
    let offers = search(&hotel(), &plan_only, &request(&stay(10, 13), 1, 1));
    assert!(offers.iter().any(|o| o.room_type_id == rt(SINGLE)));

    let min_stay = three_nights(4).restrict(SINGLE, 10, None, |r| r.min_stay = Some(4));
    let offers = search(&hotel(), &min_stay, &request(&stay(10, 13), 1, 1));
    assert!(offers.iter().all(|o| o.room_type_id != rt(SINGLE)));
}

#[test]
fn arrival_rules_bind_the_first_night_only() {
    // Given king closed to arrival on the 11th
    let nights = three_nights(4).restrict(KING, 11, None, |r| r.closed_to_arrival = true);
    let hotel = hotel();
    // When a stay arrives on the 10th, then king is offered; arriving on the 11th, not
    let through = search(&hotel, &nights, &request(&stay(10, 13), 1, 1));
    assert!(through.iter().any(|o| o.room_type_id == rt(KING)));
    let arriving = search(&hotel, &nights, &request(&stay(11, 13), 1, 1));
    assert!(arriving.iter().all(|o| o.room_type_id != rt(KING)));
}

#[test]
fn a_check_out_day_closed_to_departure_is_read_from_the_night_after_the_stay() {
    // Given king closed to departure on the 13th (the check-out day of a stay 10-13)
    let nights = three_nights(4)
        .with(KING, 13, 14, 4, 10_005)
        .restrict(KING, 13, None, |r| r.closed_to_departure = true);
    let hotel = hotel();
    let leaving_13th = search(&hotel, &nights, &request(&stay(10, 13), 1, 1));
    assert!(leaving_13th.iter().all(|o| o.room_type_id != rt(KING)));
    // A stay leaving on the 12th is not bound by it
    let leaving_12th = search(&hotel, &nights, &request(&stay(10, 12), 1, 1));
    assert!(leaving_12th.iter().any(|o| o.room_type_id == rt(KING)));
}

#[test]
fn advance_restrictions_count_from_the_hotels_today() {
    // Given king bookable at most 5 days ahead on the 10th; today is the 1st
    let nights = three_nights(4).restrict(KING, 10, None, |r| r.max_advance_days = Some(5));
    let hotel = hotel();
    let early = search(&hotel, &nights, &request(&stay(10, 13), 1, 1));
    assert!(early.iter().all(|o| o.room_type_id != rt(KING)));
    // When today is the 6th, the 10th is 4 days ahead
    let ten_to_13 = stay(10, 13);
    let later = OfferRequest {
        today: day(6),
        ..request(&ten_to_13, 1, 1)
    };
    let offers = search(&hotel, &nights, &later);
    assert!(offers.iter().any(|o| o.room_type_id == rt(KING)));
}

#[test]
fn room_types_too_small_for_the_guests_are_left_out_and_extra_guests_are_charged() {
    // When three guests share a room: only twin sleeps them, at 20.00 a night for the
    // guest beyond its base occupancy of 2
    let offers = search(&hotel(), &three_nights(4), &request(&stay(10, 13), 1, 3));
    assert_eq!(
        listed(&offers),
        vec![(TWIN, Some(FLEX), 3 * (12_000 + 2_000), 4, true)]
    );
    // And two guests leave out single only
    let two = search(&hotel(), &three_nights(4), &request(&stay(10, 13), 1, 2));
    let room_types: BTreeSet<i64> = two.iter().map(|o| o.room_type_id.get()).collect();
    assert_eq!(room_types, BTreeSet::from([KING, TWIN]));
}

#[test]
fn a_stay_the_booking_limits_refuse_has_no_offers() {
    let hotel = hotel();
    let nights = three_nights(20);
    // Arriving before today at the hotel
    let ten_to_13 = stay(10, 13);
    let past = OfferRequest {
        today: day(11),
        ..request(&ten_to_13, 1, 1)
    };
    assert!(search(&hotel, &nights, &past).is_empty());
    // More rooms than one reservation may take
    assert!(search(&hotel, &nights, &request(&stay(10, 13), 11, 1)).is_empty());
    // The same stay within the limits has offers
    assert!(!search(&hotel, &nights, &request(&stay(10, 13), 10, 1)).is_empty());
}

#[test]
fn equal_totals_are_ordered_by_room_type_then_plan() {
    // Given king and twin at the same price, and single without inventory
    let nights = Nights::default()
        .with(KING, 10, 11, 4, 10_000)
        .with(TWIN, 10, 11, 4, 10_000)
        .plan_rate(KING, 10, FLEX, 9_000);
    let offers = search(&hotel(), &nights, &request(&stay(10, 11), 1, 1));
    // King flexible 90.00 and saver 81.00; twin flexible 100.00
    assert_eq!(
        listed(&offers),
        vec![
            (KING, Some(SAVER), 8_100, 4, false),
            (KING, Some(FLEX), 9_000, 4, true),
            (TWIN, Some(FLEX), 10_000, 4, true),
        ]
    );
    let tied = Nights::default()
        .with(KING, 10, 11, 4, 10_000)
        .with(SINGLE, 10, 11, 4, 10_000);
    let hotel = hotel_with(vec![
        room_type(KING, "king", 2),
        room_type(SINGLE, "single", 1),
    ]);
    let offers = search(&hotel, &tied, &request(&stay(10, 11), 1, 1));
    assert_eq!(
        listed(&offers),
        vec![
            (KING, None, 10_000, 4, true),
            (SINGLE, None, 10_000, 4, true)
        ]
    );
}

#[test]
fn a_room_type_sold_by_plans_is_not_also_offered_at_the_base_rate() {
    let offers = search(&hotel(), &three_nights(4), &request(&stay(10, 13), 1, 1));
    assert!(offers
        .iter()
        .all(|o| o.rate_plan_id.is_some() || o.room_type_id == rt(SINGLE)));
    assert_eq!(selling_plans(&hotel(), rt(SINGLE)), vec![None]);
    assert_eq!(
        selling_plans(&hotel(), rt(KING)),
        vec![Some(plan(FLEX)), Some(plan(SAVER))]
    );
}

#[test]
fn the_offer_rule_prices_as_the_hold_does() {
    // Given the same night as a reader's view and as a loaded RoomNight
    let hotel = hotel();
    let terms = SaleTerms::resolve(
        &hotel,
        rt(TWIN),
        Some(plan(FLEX)),
        GuestCount::parse(3).expect("3"),
    )
    .expect("terms");
    let plan_rates = BTreeMap::from([(plan(FLEX), Cents::new(13_333))]);
    let view = NightView::plain(2, Cents::new(12_000)).with_terms(&NO_TERMS, &plan_rates);
    // Then its price is the plan's own rate plus the extra guest
    assert_eq!(view.price(&terms), Some(Cents::new(13_333 + 2_000)));
}

#[test]
fn every_offer_listed_over_loaded_nights_is_one_a_hold_accepts_at_that_total() {
    use crate::booking::{hold_stay, HoldRequest, HoldStay, Nights as LoadedNights};
    use crate::reservation::Reservation;
    use crate::room_night::{RoomNight, RoomNightEvent, RoomNightKey};
    use crate::types::{Guest, ReservationId};
    use chrono::{TimeZone as _, Utc};

    // Given king's nights as the write side loads them: an own rate for flexible on
    // the 11th, a stop-sell for saver on the 12th of the second stay
    let hotel = hotel();
    let hotel_id = HotelId::parse(7).expect("id");
    let mut loaded = LoadedNights::new();
    for d in 10..15 {
        let mut night = RoomNight::default();
        let mut events = vec![RoomNightEvent::InventorySet {
            key: RoomNightKey::new(hotel_id, rt(KING), day(d)),
            total_rooms: 3,
            overbooking_allowance: 0,
            rate_cents: Cents::new(10_005 + i64::from(d)),
        }];
        if d == 11 {
            events.push(RoomNightEvent::PlanRateSet {
                rate_plan_id: plan(FLEX),
                rate_cents: Some(Cents::new(14_999)),
            });
        }
        if d == 13 {
            events.push(RoomNightEvent::RestrictionsSet {
                rate_plan_id: Some(plan(SAVER)),
                restrictions: NightRestrictions {
                    stop_sell: true,
                    ..NightRestrictions::default()
                },
            });
        }
        for event in &events {
            night.apply_event(event);
        }
        loaded.insert(day(d), night);
    }
    let view = |room_type: RoomTypeId, date: NaiveDate| {
        let night = loaded.get(&date).filter(|_| room_type == rt(KING))?;
        Some(NightView {
            remaining: night.remaining(),
            base_rate: night.levels()?.rate_cents(),
            restrictions: night.restrictions(),
            plan_rates: night.plan_rates(),
        })
    };
    let now = Utc
        .with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
        .single()
        .expect("time");
    for (start, end, expected_plans) in [(10, 13, 2), (11, 14, 1)] {
        let stay = stay(start, end);
        let request = request(&stay, 2, 2);
        // When the offers are listed
        let offers = offers(&hotel, &request, view);
        assert_eq!(offers.len(), expected_plans, "{offers:?}");
        // Then a hold under each plan, expecting the offer's total, is accepted
        for (n, offer) in offers.iter().enumerate() {
            let decision = hold_stay(
                &hotel,
                &Reservation::default(),
                &crate::booking::StayNights::one(offer.room_type_id, &loaded),
                &request.limits,
                HoldStay {
                    request: HoldRequest {
                        more_lines: Vec::new(),
                        hotel_id,
                        room_type_id: offer.room_type_id,
                        stay,
                        rooms: request.rooms,
                        guest: Guest::parse("Ana Lima", "ana@example.com").expect("guest"),
                        expected_total_cents: Some(offer.total_cents),
                        rate_plan_id: offer.rate_plan_id,
                        guests: request.guests,
                        block_code: None,
                    },
                    reservation_id: ReservationId::from_uuid(uuid::Uuid::from_u128(n as u128 + 1)),
                    channel: "web".to_owned(),
                    now,
                    hold_expires_at: now + chrono::Duration::minutes(15),
                },
            );
            assert!(decision.is_ok(), "{offer:?}: {decision:?}");
        }
    }
}
