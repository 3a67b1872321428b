//! `RoomNight`: what is sold of one room type at one hotel on one night.
//!
//! This is where the one sentence of the platform is enforced: confirmed rooms plus held
//! rooms never exceed total rooms plus the overbooking allowance. Every allocation is keyed
//! by reservation id, so holding, confirming and releasing are idempotent by id and never
//! a blind counter change.
//!
//! A hold whose `expires_at` has passed does not count: a command that needs room first
//! drops every lapsed hold with its own `HoldLapsed` event, so the stored counters stay
//! exact and the invariant holds on them (not only on "live" holds).
//!
//! The counters `confirmed` and `held` are the state the invariant is checked against.
//! The allocation maps say who holds what; the write side may load only the allocations a
//! command can touch (the reservation's own and the lapsed holds), which is why no decision
//! here ever derives a count from the maps.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::contract::{self, AggregateType};
use crate::types::{HotelId, InventoryLevels, ReservationId, RoomCount, RoomTypeId};

/// Identifies one room-night stream: `{hotel}:{room type}:{night}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RoomNightKey {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub night: NaiveDate,
}

impl RoomNightKey {
    pub fn new(hotel_id: HotelId, room_type_id: RoomTypeId, night: NaiveDate) -> Self {
        Self {
            hotel_id,
            room_type_id,
            night,
        }
    }

    /// The stream id (see [`crate::contract::streams`]): it starts with the hotel id,
    /// and sorting stream ids sorts nights in date order.
    pub fn stream_id(&self) -> String {
        contract::room_night_stream_id(self)
    }

    /// The night a stream id names; the inverse of [`Self::stream_id`].
    pub fn parse_stream_id(stream_id: &str) -> Result<Self, contract::StreamIdError> {
        contract::parse_room_night_stream_id(stream_id)
    }
}

/// A hold on some rooms, until `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub rooms: u32,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RoomNight {
    key: Option<RoomNightKey>,
    levels: Option<InventoryLevels>,
    confirmed: u32,
    held: u32,
    holds: BTreeMap<ReservationId, Hold>,
    confirmations: BTreeMap<ReservationId, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoomNightCommand {
    /// Set what is for sale on this night. Refused if it would drop below what is sold.
    SetInventory {
        key: RoomNightKey,
        levels: InventoryLevels,
        now: DateTime<Utc>,
    },
    /// Hold `rooms` for a reservation until `expires_at`.
    Hold {
        reservation_id: ReservationId,
        rooms: RoomCount,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    },
    /// Take `rooms` as confirmed at once (a confirmed stay moving to new dates).
    Book {
        reservation_id: ReservationId,
        rooms: RoomCount,
        now: DateTime<Utc>,
    },
    /// Turn the reservation's live hold into a confirmed sale.
    Confirm {
        reservation_id: ReservationId,
        now: DateTime<Utc>,
    },
    /// Give back whatever the reservation holds or has confirmed on this night.
    Release { reservation_id: ReservationId },
    /// Drop the reservation's hold if it has lapsed.
    ExpireHold {
        reservation_id: ReservationId,
        now: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoomNightEvent {
    InventorySet {
        key: RoomNightKey,
        total_rooms: u32,
        overbooking_allowance: u32,
        rate_cents: i64,
    },
    RoomsHeld {
        reservation_id: ReservationId,
        rooms: u32,
        expires_at: DateTime<Utc>,
    },
    RoomsBooked {
        reservation_id: ReservationId,
        rooms: u32,
    },
    HoldConfirmed {
        reservation_id: ReservationId,
        rooms: u32,
    },
    HoldLapsed {
        reservation_id: ReservationId,
        rooms: u32,
        expired_at: DateTime<Utc>,
    },
    RoomsReleased {
        reservation_id: ReservationId,
        rooms: u32,
        was_confirmed: bool,
    },
}

/// Names and version: see [`crate::contract::events`].
impl DomainEvent for RoomNightEvent {
    fn event_type(&self) -> String {
        self.kind().as_str().to_owned()
    }

    fn event_version(&self) -> String {
        Self::VERSION.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum RoomNightError {
    #[error("this night has no inventory for sale")]
    NotForSale,
    #[error("sold out: {remaining} room(s) left")]
    SoldOut { remaining: u32 },
    #[error("inventory cannot go below the {reserved} room(s) already sold")]
    BelowReserved { reserved: u32 },
    #[error("the reservation already holds {rooms} room(s) here on different terms")]
    AllocationMismatch { rooms: u32 },
    #[error("the reservation has no hold on this night")]
    NoHold,
    #[error("the hold lapsed at {expired_at}")]
    HoldExpired { expired_at: DateTime<Utc> },
    #[error("the hold has not lapsed yet")]
    HoldStillLive,
    #[error("the inventory key does not match this night")]
    WrongNight,
}

impl RoomNight {
    pub fn key(&self) -> Option<RoomNightKey> {
        self.key
    }

    pub fn levels(&self) -> Option<InventoryLevels> {
        self.levels
    }

    pub fn confirmed(&self) -> u32 {
        self.confirmed
    }

    /// Rooms on hold, lapsed holds included until they are dropped.
    pub fn held(&self) -> u32 {
        self.held
    }

    pub fn capacity(&self) -> u32 {
        self.levels.map_or(0, |l| l.capacity())
    }

    /// Rooms still for sale, counting every recorded hold.
    pub fn remaining(&self) -> u32 {
        self.capacity()
            .saturating_sub(self.confirmed.saturating_add(self.held))
    }

    pub fn hold_of(&self, reservation_id: &ReservationId) -> Option<Hold> {
        self.holds.get(reservation_id).copied()
    }

    pub fn confirmed_for(&self, reservation_id: &ReservationId) -> Option<u32> {
        self.confirmations.get(reservation_id).copied()
    }

    /// Holds currently recorded (the loaded ones, when the state is a partial load).
    pub fn holds(&self) -> &BTreeMap<ReservationId, Hold> {
        &self.holds
    }

    pub fn confirmations(&self) -> &BTreeMap<ReservationId, u32> {
        &self.confirmations
    }

    /// Rebuilds a night from its stored snapshot: the counters and the allocations the
    /// caller chose to load. Used by the write side, which keeps this state inline.
    pub fn from_snapshot(
        key: RoomNightKey,
        levels: InventoryLevels,
        confirmed: u32,
        held: u32,
        holds: BTreeMap<ReservationId, Hold>,
        confirmations: BTreeMap<ReservationId, u32>,
    ) -> Self {
        Self {
            key: Some(key),
            levels: Some(levels),
            confirmed,
            held,
            holds,
            confirmations,
        }
    }

    /// The invariant, as the database's CHECK also states it.
    pub fn invariant_holds(&self) -> bool {
        u64::from(self.confirmed) + u64::from(self.held) <= u64::from(self.capacity())
    }

    /// Decides a command against the current state: the events to record, or why not.
    /// Pure: the time comes in the command.
    pub fn decide(&self, command: RoomNightCommand) -> Result<Vec<RoomNightEvent>, RoomNightError> {
        match command {
            RoomNightCommand::SetInventory { key, levels, now } => {
                if self.key.is_some_and(|k| k != key) {
                    return Err(RoomNightError::WrongNight);
                }
                let (mut events, state) = self.drop_lapsed(now);
                let reserved = state.confirmed + state.held;
                if reserved > levels.capacity() {
                    return Err(RoomNightError::BelowReserved { reserved });
                }
                if self.levels != Some(levels) {
                    events.push(RoomNightEvent::InventorySet {
                        key,
                        total_rooms: levels.total_rooms(),
                        overbooking_allowance: levels.overbooking_allowance(),
                        rate_cents: levels.rate_cents(),
                    });
                }
                Ok(events)
            }
            RoomNightCommand::Hold {
                reservation_id,
                rooms,
                expires_at,
                now,
            } => self.take(reservation_id, rooms, Some(expires_at), now),
            RoomNightCommand::Book {
                reservation_id,
                rooms,
                now,
            } => self.take(reservation_id, rooms, None, now),
            RoomNightCommand::Confirm {
                reservation_id,
                now,
            } => {
                if self.confirmations.contains_key(&reservation_id) {
                    return Ok(Vec::new());
                }
                let hold = self
                    .holds
                    .get(&reservation_id)
                    .ok_or(RoomNightError::NoHold)?;
                if hold.expires_at <= now {
                    return Err(RoomNightError::HoldExpired {
                        expired_at: hold.expires_at,
                    });
                }
                Ok(vec![RoomNightEvent::HoldConfirmed {
                    reservation_id,
                    rooms: hold.rooms,
                }])
            }
            RoomNightCommand::Release { reservation_id } => {
                if let Some(hold) = self.holds.get(&reservation_id) {
                    Ok(vec![RoomNightEvent::RoomsReleased {
                        reservation_id,
                        rooms: hold.rooms,
                        was_confirmed: false,
                    }])
                } else if let Some(rooms) = self.confirmations.get(&reservation_id) {
                    Ok(vec![RoomNightEvent::RoomsReleased {
                        reservation_id,
                        rooms: *rooms,
                        was_confirmed: true,
                    }])
                } else {
                    Ok(Vec::new())
                }
            }
            RoomNightCommand::ExpireHold {
                reservation_id,
                now,
            } => match self.holds.get(&reservation_id) {
                None => Ok(Vec::new()),
                Some(hold) if hold.expires_at <= now => Ok(vec![RoomNightEvent::HoldLapsed {
                    reservation_id,
                    rooms: hold.rooms,
                    expired_at: hold.expires_at,
                }]),
                Some(_) => Err(RoomNightError::HoldStillLive),
            },
        }
    }

    /// Hold (`hold_until` set) or book (`None`) rooms for a reservation, dropping lapsed
    /// holds first so they neither count nor linger.
    fn take(
        &self,
        reservation_id: ReservationId,
        rooms: RoomCount,
        hold_until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<Vec<RoomNightEvent>, RoomNightError> {
        if self.levels.is_none() {
            return Err(RoomNightError::NotForSale);
        }
        // Repeating the same hold or booking changes nothing.
        match (
            self.holds.get(&reservation_id),
            self.confirmations.get(&reservation_id),
        ) {
            (Some(hold), _) if hold.expires_at > now => {
                return if hold_until == Some(hold.expires_at) && hold.rooms == rooms.get() {
                    Ok(Vec::new())
                } else {
                    Err(RoomNightError::AllocationMismatch { rooms: hold.rooms })
                };
            }
            (_, Some(booked)) => {
                return if hold_until.is_none() && *booked == rooms.get() {
                    Ok(Vec::new())
                } else {
                    Err(RoomNightError::AllocationMismatch { rooms: *booked })
                };
            }
            _ => {}
        }
        let (mut events, state) = self.drop_lapsed(now);
        let remaining = state.remaining();
        if rooms.get() > remaining {
            return Err(RoomNightError::SoldOut { remaining });
        }
        events.push(match hold_until {
            Some(expires_at) => RoomNightEvent::RoomsHeld {
                reservation_id,
                rooms: rooms.get(),
                expires_at,
            },
            None => RoomNightEvent::RoomsBooked {
                reservation_id,
                rooms: rooms.get(),
            },
        });
        Ok(events)
    }

    /// The events that drop every lapsed hold, and the state after them.
    fn drop_lapsed(&self, now: DateTime<Utc>) -> (Vec<RoomNightEvent>, RoomNight) {
        let events: Vec<_> = self
            .holds
            .iter()
            .filter(|(_, hold)| hold.expires_at <= now)
            .map(|(id, hold)| RoomNightEvent::HoldLapsed {
                reservation_id: *id,
                rooms: hold.rooms,
                expired_at: hold.expires_at,
            })
            .collect();
        let mut state = self.clone();
        for event in &events {
            state.apply_event(event);
        }
        (events, state)
    }

    /// Applies an event. Counters saturate instead of wrapping so a corrupt history shows
    /// up as a broken invariant in the auditor's replay rather than as a panic.
    pub fn apply_event(&mut self, event: &RoomNightEvent) {
        match event {
            RoomNightEvent::InventorySet {
                key,
                total_rooms,
                overbooking_allowance,
                rate_cents,
            } => {
                self.key = Some(*key);
                self.levels = InventoryLevels::parse(
                    i64::from(*total_rooms),
                    i64::from(*overbooking_allowance),
                    *rate_cents,
                )
                .ok();
            }
            RoomNightEvent::RoomsHeld {
                reservation_id,
                rooms,
                expires_at,
            } => {
                self.held = self.held.saturating_add(*rooms);
                self.holds.insert(
                    *reservation_id,
                    Hold {
                        rooms: *rooms,
                        expires_at: *expires_at,
                    },
                );
            }
            RoomNightEvent::RoomsBooked {
                reservation_id,
                rooms,
            } => {
                self.confirmed = self.confirmed.saturating_add(*rooms);
                self.confirmations.insert(*reservation_id, *rooms);
            }
            RoomNightEvent::HoldConfirmed {
                reservation_id,
                rooms,
            } => {
                self.holds.remove(reservation_id);
                self.held = self.held.saturating_sub(*rooms);
                self.confirmed = self.confirmed.saturating_add(*rooms);
                self.confirmations.insert(*reservation_id, *rooms);
            }
            RoomNightEvent::HoldLapsed {
                reservation_id,
                rooms,
                ..
            } => {
                self.holds.remove(reservation_id);
                self.held = self.held.saturating_sub(*rooms);
            }
            RoomNightEvent::RoomsReleased {
                reservation_id,
                rooms,
                was_confirmed,
            } => {
                if *was_confirmed {
                    self.confirmations.remove(reservation_id);
                    self.confirmed = self.confirmed.saturating_sub(*rooms);
                } else {
                    self.holds.remove(reservation_id);
                    self.held = self.held.saturating_sub(*rooms);
                }
            }
        }
    }
}

impl Aggregate for RoomNight {
    const TYPE: &'static str = AggregateType::RoomNight.as_str();
    type Command = RoomNightCommand;
    type Event = RoomNightEvent;
    type Error = RoomNightError;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _service: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        for event in self.decide(command)? {
            sink.write(event, self).await;
        }
        Ok(())
    }

    fn apply(&mut self, event: Self::Event) {
        self.apply_event(&event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
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
        InventoryLevels::parse(total, allowance, rate).expect("valid levels")
    }

    fn inventory_set(total: u32, allowance: u32, rate: i64) -> RoomNightEvent {
        RoomNightEvent::InventorySet {
            key: key(),
            total_rooms: total,
            overbooking_allowance: allowance,
            rate_cents: rate,
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

    fn set_inventory(
        total: i64,
        allowance: i64,
        rate: i64,
        now: DateTime<Utc>,
    ) -> RoomNightCommand {
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
}
