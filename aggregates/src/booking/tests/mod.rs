//! The given/when/then tests of the booking decisions, one file per group of
//! decisions; the fixtures they share are here.

use std::collections::BTreeSet;

use super::*;
use crate::cancellation::CancellationPolicy;
use crate::cancellation::CancelledBy;
use crate::hotel::{HotelCommand, HotelDetails, RatePlan, RoomTypeDetails};
use crate::rate_plan::Pricing;
use crate::reservation::{Payment, ReservationEvent};
use crate::restrictions::{Restriction, RestrictionsPatch};
use crate::room_night::{RoomNight, RoomNightCommand, RoomNightEvent, RoomNightKey};
use crate::types::{
    BookingLimits, Cents, Guest, GuestCount, HotelId, RatePlanId, ReservationId, RoomCount,
    RoomTypeId, StayDates, TimeZone,
};
use chrono::{DateTime, NaiveDate, TimeZone as _, Utc};
use uuid::Uuid;

const HOTEL: i64 = 7;
const KING: i64 = 3;

fn hotel_id() -> HotelId {
    HotelId::parse(HOTEL).expect("valid id")
}

fn king() -> RoomTypeId {
    RoomTypeId::parse(KING).expect("valid id")
}

fn zone(name: &str) -> TimeZone {
    TimeZone::parse(name).expect("valid time zone")
}

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, d).expect("valid date")
}

fn key(d: u32) -> RoomNightKey {
    RoomNightKey::new(hotel_id(), king(), day(d))
}

fn stay(start: u32, end: u32) -> StayDates {
    StayDates::parse(day(start), day(end)).expect("valid stay")
}

/// Minutes after 2027-06-01 12:00 UTC (13:00 in Lisbon, so "today" is the 1st).
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
    RoomCount::parse(n).expect("valid count")
}

fn guest() -> Guest {
    Guest::parse("Ana Lima", "ana@example.com").expect("valid guest")
}

/// Hotel 7 in Lisbon with room type 3.
fn hotel() -> Hotel {
    let mut hotel = Hotel::default();
    let commands = [
        HotelCommand::SetDetails {
            hotel_id: hotel_id(),
            details: HotelDetails::parse("Casa do Rio", "Lisbon", "Europe/Lisbon")
                .expect("valid details"),
        },
        HotelCommand::SetRoomType {
            room_type_id: king(),
            details: RoomTypeDetails::parse("King", 2).expect("valid room type"),
        },
    ];
    for command in commands {
        for event in hotel.decide(command).expect("catalog accepts") {
            hotel.apply_event(&event);
        }
    }
    hotel
}

/// Nights of room type 3, each `(day, total_rooms, allowance, rate_cents)`.
fn nights(spec: &[(u32, u32, u32, i64)]) -> Nights {
    spec.iter()
        .map(|&(d, total, allowance, rate)| {
            let mut night = RoomNight::default();
            night.apply_event(&RoomNightEvent::InventorySet {
                key: key(d),
                total_rooms: total,
                overbooking_allowance: allowance,
                rate_cents: Cents::new(rate),
            });
            (day(d), night)
        })
        .collect()
}

/// Nights 10..=13 with `total` rooms each at 100, 120, 140, 160 euros.
fn four_nights(total: u32) -> Nights {
    nights(&[
        (10, total, 0, 10_000),
        (11, total, 0, 12_000),
        (12, total, 0, 14_000),
        (13, total, 0, 16_000),
    ])
}

fn hold_cmd(id: u128, start: u32, end: u32, n: i64) -> HoldStay {
    HoldStay {
        request: HoldRequest {
            more_lines: Vec::new(),
            hotel_id: hotel_id(),
            room_type_id: king(),
            stay: stay(start, end),
            rooms: rooms(n),
            guest: guest(),
            expected_total_cents: None,
            rate_plan_id: None,
            guests: GuestCount::ONE,
            block_code: None,
        },
        reservation_id: res(id),
        channel: "direct".to_owned(),
        now: at(0),
        hold_expires_at: at(15),
    }
}

fn apply(decision: &Decision, reservation: &mut Reservation, nights: &mut Nights) {
    for event in &decision.reservation {
        reservation.apply_event(event);
    }
    for (key, events) in &decision.nights {
        let night = nights.entry(key.night).or_default();
        for event in events {
            night.apply_event(event);
        }
    }
}

/// Holds a stay for `id` and applies it, returning the reservation.
fn held(cmd: HoldStay, nights: &mut Nights) -> Reservation {
    held_at(&hotel(), cmd, nights)
}

/// Holds a stay at `hotel` and applies it, returning the reservation.
fn held_at(hotel: &Hotel, cmd: HoldStay, nights: &mut Nights) -> Reservation {
    let mut reservation = Reservation::default();
    let decision = hold_stay(
        hotel,
        &reservation,
        &of_king(nights),
        &BookingLimits::default(),
        cmd,
    )
    .expect("the stay can be held");
    apply(&decision, &mut reservation, nights);
    reservation
}

fn confirmed(cmd: HoldStay, nights: &mut Nights) -> Reservation {
    let mut reservation = held(cmd, nights);
    let decision = confirm(&reservation, &of_king(nights), at(1)).expect("the hold is live");
    apply(&decision, &mut reservation, nights);
    reservation
}

fn invalid_field(result: Result<Decision, Rejection>) -> String {
    match result {
        Err(Rejection::Invalid(InvalidInputRejection { field, .. })) => field,
        other => panic!("expected an invalid input rejection, got {other:?}"),
    }
}

fn rooms_held(id: u128, n: u32) -> RoomNightEvent {
    RoomNightEvent::RoomsHeld {
        reservation_id: res(id),
        rooms: n,
        expires_at: at(15),
    }
}

fn rooms_released(id: u128, n: u32, was_confirmed: bool) -> RoomNightEvent {
    RoomNightEvent::RoomsReleased {
        reservation_id: res(id),
        rooms: n,
        was_confirmed,
    }
}

// --- Rate plans and restrictions ------------------------------------------------------

/// Priced on its own, refundable in full at 48 hours, 30% at 12.
const FLEX: i64 = 1;
/// Derived from `FLEX` at -10%, non-refundable.
const NONREF: i64 = 2;
/// Derived from `NONREF` at -5%, under the house policy.
const MEMBER: i64 = 3;

const FLEX_POLICY: CancellationPolicy = CancellationPolicy::Refundable {
    full_refund_hours: 48,
    partial_refund_hours: 12,
    partial_refund_percent: 30,
};

fn plan_id(n: i64) -> RatePlanId {
    RatePlanId::parse(n).expect("valid id")
}

/// A plan selling `room_types`.
fn rate_plan(
    name: &str,
    room_types: &[i64],
    policy: CancellationPolicy,
    pricing: Pricing,
) -> RatePlan {
    let ids: BTreeSet<RoomTypeId> = room_types
        .iter()
        .map(|n| RoomTypeId::parse(*n).expect("valid id"))
        .collect();
    RatePlan::parse(name, ids, policy, pricing).expect("valid plan")
}

fn derived(parent: i64, adjust_percent: i32) -> Pricing {
    Pricing::Derived {
        parent: plan_id(parent),
        adjust_percent,
    }
}

/// `hotel` after the catalog accepts `command`.
fn with(mut hotel: Hotel, command: HotelCommand) -> Hotel {
    for event in hotel.decide(command).expect("catalog accepts") {
        hotel.apply_event(&event);
    }
    hotel
}

fn with_plan(hotel: Hotel, id: i64, plan: RatePlan) -> Hotel {
    with(
        hotel,
        HotelCommand::SetRatePlan {
            rate_plan_id: plan_id(id),
            plan,
        },
    )
}

/// [`hotel`] with the plans `FLEX`, `NONREF` (from `FLEX`) and `MEMBER` (from
/// `NONREF`), all selling room type 3.
fn hotel_with_plans() -> Hotel {
    let hotel = with_plan(
        hotel(),
        FLEX,
        rate_plan("Flexible", &[KING], FLEX_POLICY, Pricing::Own),
    );
    let hotel = with_plan(
        hotel,
        NONREF,
        rate_plan(
            "Non-refundable",
            &[KING],
            CancellationPolicy::NonRefundable,
            derived(FLEX, -10),
        ),
    );
    with_plan(
        hotel,
        MEMBER,
        rate_plan(
            "Member",
            &[KING],
            CancellationPolicy::HOUSE,
            derived(NONREF, -5),
        ),
    )
}

/// [`hold_cmd`] under `plan` (`None`: the base rate).
fn plan_hold_cmd(id: u128, start: u32, end: u32, n: i64, plan: Option<i64>) -> HoldStay {
    let mut cmd = hold_cmd(id, start, end, n);
    cmd.request.rate_plan_id = plan.map(plan_id);
    cmd
}

/// Changes the restrictions of night `d` (for every plan, or for `plan`) as the night
/// decides it.
fn restrict(nights: &mut Nights, d: u32, plan: Option<i64>, patch: RestrictionsPatch) {
    let night = nights.get_mut(&day(d)).expect("a night with inventory");
    let events = night
        .decide(RoomNightCommand::SetRestrictions {
            rate_plan_id: plan.map(plan_id),
            patch,
        })
        .expect("the night has inventory");
    for event in &events {
        night.apply_event(event);
    }
}

/// Sets a plan's own rate on night `d` as the night decides it.
fn plan_rate(nights: &mut Nights, d: u32, plan: i64, rate: i64) {
    let night = nights.get_mut(&day(d)).expect("a night with inventory");
    let events = night
        .decide(RoomNightCommand::SetPlanRate {
            rate_plan_id: plan_id(plan),
            rate_cents: Some(Cents::new(rate)),
        })
        .expect("the night has inventory");
    for event in &events {
        night.apply_event(event);
    }
}

/// The refusal naming `restriction` on night `d`.
fn restricted(restriction: Restriction, d: u32) -> Rejection {
    Rejection::Restricted {
        restriction,
        night: day(d),
    }
}

mod ari;
mod blocks;
mod cancel;
mod change_dates;
mod check_in;
mod confirm;
mod expire;
mod hold;
mod inventory;
mod lines;
mod payments;
mod plans;
mod rejection;
mod restrictions;

/// The nights of room type 3, as a decision takes them.
pub(super) fn of_king(nights: &Nights) -> StayNights<'_> {
    StayNights::one(king(), nights)
}
