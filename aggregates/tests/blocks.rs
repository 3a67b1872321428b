//! Property test: random sequences of group-block changes and releases, bookings from
//! the block and from general sale, confirmations, cancellations and lapses, over a few
//! nights with few rooms, never oversell a night (sold + held + set aside within its
//! rooms), keep each night's counters equal to what the bookings and the block hold, and
//! keep an open block's rooms (set aside plus picked up) at what its terms say.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: an unwrap is an assertion

use std::collections::BTreeMap;

use aggregates::block::ReleaseReason;
use aggregates::booking::{self, HoldRequest, HoldStay, SetBlock, StayNights};
use aggregates::{
    Block, BlockCode, BlockTerms, BookingLimits, CancelledBy, Cents, Decision, Guest, GuestCount,
    Hotel, HotelCommand, HotelDetails, HotelId, Nights, Reservation, ReservationId, RoomCount,
    RoomNight, RoomNightEvent, RoomNightKey, RoomTypeDetails, RoomTypeId, StayDates, TimeZone,
};
use chrono::{DateTime, Duration, NaiveDate, TimeZone as _, Utc};
use proptest::prelude::*;
use uuid::Uuid;

/// Nights on sale: 2027-06-10 ..= 2027-06-14.
const FIRST: u32 = 10;
const NIGHTS: u32 = 5;

fn hotel_id() -> HotelId {
    HotelId::parse(7).expect("id")
}

fn king() -> RoomTypeId {
    RoomTypeId::parse(3).expect("id")
}

fn acme() -> BlockCode {
    BlockCode::parse("ACME").expect("code")
}

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, d).expect("date")
}

fn stay(start: u32, length: u32) -> Option<StayDates> {
    StayDates::parse(day(start), day(start) + Duration::days(length.into())).ok()
}

fn hotel() -> Hotel {
    let mut hotel = Hotel::default();
    for command in [
        HotelCommand::SetDetails {
            hotel_id: hotel_id(),
            details: HotelDetails::parse("Casa", "Lisbon", "UTC").expect("details"),
        },
        HotelCommand::SetRoomType {
            room_type_id: king(),
            details: RoomTypeDetails::parse("king", 2).expect("room type"),
        },
    ] {
        for event in hotel.decide(command).expect("catalog") {
            hotel.apply_event(&event);
        }
    }
    hotel
}

fn nights(rooms: u32) -> Nights {
    (FIRST..FIRST + NIGHTS)
        .map(|d| {
            let mut night = RoomNight::default();
            night.apply_event(&RoomNightEvent::InventorySet {
                key: RoomNightKey::new(hotel_id(), king(), day(d)),
                total_rooms: rooms,
                overbooking_allowance: 0,
                rate_cents: Cents::new(10_000),
            });
            (day(d), night)
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Step {
    /// Set the block up, or change it: `rooms` on `[start, start + length)`.
    SetBlock {
        start: u32,
        length: u32,
        rooms: u8,
    },
    Release,
    /// Reservation `id` holds `rooms` on `[start, start + length)`, from the block or
    /// from general sale.
    Hold {
        id: u8,
        start: u32,
        length: u32,
        rooms: u8,
        from_block: bool,
    },
    Confirm(u8),
    Cancel(u8),
    Expire(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (FIRST..FIRST + NIGHTS, 1u32..4, 1u8..5)
            .prop_map(|(start, length, rooms)| Step::SetBlock { start, length, rooms }),
        1 => Just(Step::Release),
        5 => (0u8..8, FIRST..FIRST + NIGHTS, 1u32..3, 1u8..3, any::<bool>()).prop_map(
            |(id, start, length, rooms, from_block)| Step::Hold { id, start, length, rooms, from_block }
        ),
        2 => (0u8..8).prop_map(Step::Confirm),
        2 => (0u8..8).prop_map(Step::Cancel),
        2 => (0u8..8).prop_map(Step::Expire),
    ]
}

struct World {
    hotel: Hotel,
    block: Block,
    nights: Nights,
    reservations: BTreeMap<u8, Reservation>,
    now: DateTime<Utc>,
}

impl World {
    fn apply_nights(&mut self, decision: &Decision) {
        for (key, events) in &decision.nights {
            let night = self.nights.entry(key.night).or_default();
            for event in events {
                night.apply_event(event);
            }
        }
    }

    fn run(&mut self, step: Step) {
        self.now += Duration::minutes(4);
        let limits = BookingLimits::default();
        let nights = StayNights::one(king(), &self.nights);
        let (id, result) = match step {
            Step::SetBlock {
                start,
                length,
                rooms,
            } => {
                let Some(stay) = stay(start, length) else {
                    return;
                };
                let terms = BlockTerms::parse(
                    "Acme",
                    king(),
                    stay,
                    RoomCount::parse(i64::from(rooms)).expect("rooms"),
                    Cents::new(15_000),
                    day(1),
                )
                .expect("terms");
                let command = SetBlock {
                    hotel_id: hotel_id(),
                    code: acme(),
                    terms,
                    max_days_ahead: 730,
                    now: self.now,
                };
                if let Ok(decision) =
                    booking::set_block(&self.hotel, &self.block, &self.nights, command)
                {
                    self.block_decided(&decision);
                }
                return;
            }
            Step::Release => {
                if let Ok(decision) = booking::release_block(
                    &self.block,
                    &self.nights,
                    ReleaseReason::Staff,
                    self.now,
                ) {
                    self.block_decided(&decision);
                }
                return;
            }
            Step::Hold {
                id,
                start,
                length,
                rooms,
                from_block,
            } => {
                let Some(stay) = stay(start, length) else {
                    return;
                };
                let request = HoldRequest {
                    hotel_id: hotel_id(),
                    room_type_id: king(),
                    stay,
                    rooms: RoomCount::parse(i64::from(rooms)).expect("rooms"),
                    guest: Guest::parse("Ana Lima", "ana@example.com").expect("guest"),
                    expected_total_cents: None,
                    rate_plan_id: None,
                    guests: GuestCount::ONE,
                    more_lines: Vec::new(),
                    block_code: from_block.then(acme),
                };
                let reservation = self.reservations.get(&id).cloned().unwrap_or_default();
                let result = booking::hold_stay(
                    &self.hotel,
                    &reservation,
                    &nights,
                    &limits,
                    HoldStay {
                        request,
                        reservation_id: reservation_id(id),
                        channel: "web".into(),
                        now: self.now,
                        hold_expires_at: self.now + Duration::minutes(15),
                    },
                );
                (id, result)
            }
            Step::Confirm(id) => {
                let r = self.reservations.get(&id).cloned().unwrap_or_default();
                (id, booking::confirm(&r, &nights, self.now))
            }
            Step::Cancel(id) => {
                let r = self.reservations.get(&id).cloned().unwrap_or_default();
                let result = booking::cancel(
                    &r,
                    &nights,
                    self.now,
                    "plans".into(),
                    CancelledBy::Guest,
                    TimeZone::UTC,
                );
                (id, result)
            }
            Step::Expire(id) => {
                let r = self.reservations.get(&id).cloned().unwrap_or_default();
                (id, booking::expire_hold(&r, &nights, self.now))
            }
        };
        if let Ok(decision) = result {
            let reservation = self.reservations.entry(id).or_default();
            for event in &decision.reservation {
                reservation.apply_event(event);
            }
            self.apply_nights(&decision);
        }
    }

    fn block_decided(&mut self, decision: &booking::BlockDecision) {
        for event in &decision.block {
            self.block.apply_event(event);
        }
        self.apply_nights(&decision.nights);
    }

    fn check(&self) {
        let open = self
            .block
            .terms()
            .filter(|_| self.block.released().is_none());
        for (date, night) in &self.nights {
            assert!(night.invariant_holds(), "oversold on {date}: {night:?}");
            let (mut held, mut confirmed, mut picked) = (0, 0, 0);
            for r in self.reservations.values().filter_map(Reservation::details) {
                let id = r.reservation_id;
                let rooms = night.hold_of(&id).map_or(0, |h| h.rooms)
                    + night.confirmed_for(&id).unwrap_or(0);
                held += night.hold_of(&id).map_or(0, |h| h.rooms);
                confirmed += night.confirmed_for(&id).unwrap_or(0);
                if r.block_code == Some(acme()) {
                    picked += rooms;
                    if rooms > 0 {
                        assert_eq!(
                            night.block_of(&id),
                            Some(&acme()),
                            "a pickup names its block"
                        );
                    }
                }
            }
            assert_eq!(
                (night.held(), night.confirmed()),
                (held, confirmed),
                "{date}"
            );
            let block = night.block(&acme()).copied().unwrap_or_default();
            assert_eq!(
                block.picked_up, picked,
                "{date}: the block's pickup is its bookings'"
            );
            let set_aside = if block.released { 0 } else { block.rooms };
            assert_eq!(
                night.blocked(),
                set_aside,
                "{date}: blocked is what the block sets aside"
            );
            match open {
                Some(terms) if terms.stay().contains(*date) => assert_eq!(
                    block.rooms + block.picked_up,
                    terms.rooms().get(),
                    "{date}: an open block keeps its rooms, set aside or picked up"
                ),
                _ => assert_eq!(
                    set_aside, 0,
                    "{date}: nothing set aside off an open block's nights"
                ),
            }
        }
    }
}

fn reservation_id(id: u8) -> ReservationId {
    ReservationId::from_uuid(Uuid::from_u128(u128::from(id) + 1))
}

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 5, 1, 12, 0, 0)
        .single()
        .expect("time")
        + Duration::minutes(minutes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn blocks_and_general_sale_never_oversell_and_every_room_is_counted_once(
        steps in proptest::collection::vec(step(), 1..50),
        rooms in 2u32..7,
    ) {
        let mut world = World {
            hotel: hotel(),
            block: Block::default(),
            nights: nights(rooms),
            reservations: BTreeMap::new(),
            now: at(0),
        };
        for step in steps {
            world.run(step);
            world.check();
        }
    }
}
