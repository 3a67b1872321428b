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
//! A night also carries what shapes its sale besides the rooms: its restrictions (for
//! every plan and per plan, see [`crate::restrictions`]) and the own rates of plans
//! priced on their own. They live here, in the night's stream, so a change to them and a
//! sale of the night are decided one after the other on the same state: a booking
//! decided before a restriction was recorded was decided without it, and one decided
//! after meets it.
//!
//! The counters `confirmed` and `held` are the state the invariant is checked against.
//! The allocation maps say who holds what; the write side may load only the allocations a
//! command can touch (the reservation's own and the lapsed holds), which is why no decision
//! here ever derives a count from the maps.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::names::AggregateType;
use crate::restrictions::{NightRestrictions, RestrictionSet, RestrictionsPatch};
pub use crate::streams::RoomNightKey;
use crate::types::{BlockCode, Cents, InventoryLevels, RatePlanId, ReservationId, RoomCount};

/// A hold on some rooms, until `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub rooms: u32,
    pub expires_at: DateTime<Utc>,
}

/// One group block's part of a night: the rooms still set aside for it, the rooms its
/// bookings have taken (held or confirmed), and its rate. A released block keeps its
/// entry (its bookings are still its pickup) with no rooms set aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BlockNight {
    pub rooms: u32,
    pub picked_up: u32,
    pub rate_cents: Cents,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
}

impl BlockNight {
    /// The block's rooms on the night: still set aside and picked up.
    pub fn total_rooms(&self) -> u32 {
        self.rooms.saturating_add(self.picked_up)
    }
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RoomNight {
    key: Option<RoomNightKey>,
    levels: Option<InventoryLevels>,
    confirmed: u32,
    held: u32,
    holds: BTreeMap<ReservationId, Hold>,
    confirmations: BTreeMap<ReservationId, u32>,
    #[serde(default, skip_serializing_if = "RestrictionSet::is_empty")]
    restrictions: RestrictionSet,
    /// Own rates of plans priced on their own, where they differ from the base rate.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    plan_rates: BTreeMap<RatePlanId, Cents>,
    /// Rooms set aside for group blocks, out of general sale: the sum of the blocks'
    /// `rooms`. Counted by the invariant beside `confirmed` and `held`.
    #[serde(default, skip_serializing_if = "is_zero")]
    blocked: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    blocks: BTreeMap<BlockCode, BlockNight>,
    /// The block each loaded allocation was taken from, if any (its rooms go back to the
    /// block, not to general sale, while the block holds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    picks: BTreeMap<ReservationId, BlockCode>,
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
    /// Change the night's restrictions for every plan (`rate_plan_id: None`) or one.
    SetRestrictions {
        rate_plan_id: Option<RatePlanId>,
        patch: RestrictionsPatch,
    },
    /// Set a plan's own rate on this night (`None`: back to the base rate).
    SetPlanRate {
        rate_plan_id: RatePlanId,
        rate_cents: Option<Cents>,
    },
    /// Drop the reservation's hold if it has lapsed.
    ExpireHold {
        reservation_id: ReservationId,
        now: DateTime<Utc>,
    },
    /// Hold `rooms` for a reservation from the rooms a block sets aside, not from
    /// general sale.
    HoldFromBlock {
        reservation_id: ReservationId,
        code: BlockCode,
        rooms: RoomCount,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    },
    /// Make a block's rooms on this night `rooms` (what it sets aside plus what its
    /// bookings took) at `rate_cents`: more are taken from general sale, fewer go back.
    SetBlock {
        code: BlockCode,
        rooms: u32,
        rate_cents: Cents,
        now: DateTime<Utc>,
    },
    /// Take the night out of a block (its dates changed): only with nothing picked up
    /// (lapsed pickups are dropped first).
    RemoveBlock { code: BlockCode, now: DateTime<Utc> },
    /// Give a block's unpicked rooms back to general sale; its bookings stay.
    ReleaseBlock { code: BlockCode },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoomNightEvent {
    InventorySet {
        key: RoomNightKey,
        total_rooms: u32,
        overbooking_allowance: u32,
        rate_cents: Cents,
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
    /// The restrictions now in force for every plan (`rate_plan_id` absent) or one plan:
    /// the whole set after the change, so replay needs no earlier event to know it.
    RestrictionsSet {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate_plan_id: Option<RatePlanId>,
        restrictions: NightRestrictions,
    },
    /// A plan's own rate on this night; absent: the plan costs the base rate again.
    PlanRateSet {
        rate_plan_id: RatePlanId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate_cents: Option<Cents>,
    },
    /// A block now sets aside `rooms` on this night (beside what its bookings took), at
    /// `rate_cents`; `change` is how many more (fewer, if negative) than before, taken
    /// from (given back to) general sale.
    BlockSet {
        code: BlockCode,
        rooms: u32,
        rate_cents: Cents,
        change: i64,
    },
    /// The night left the block (its dates changed); its `rooms` went back to sale.
    BlockRemoved { code: BlockCode, rooms: u32 },
    /// The block was released: its unpicked `rooms` went back to general sale.
    BlockReleased { code: BlockCode, rooms: u32 },
    /// Rooms held for a reservation out of a block's rooms.
    BlockRoomsHeld {
        reservation_id: ReservationId,
        code: BlockCode,
        rooms: u32,
        expires_at: DateTime<Utc>,
    },
    /// A hold taken from a block lapsed; `to_block`: its rooms went back to the block
    /// (still holding), else to general sale.
    BlockHoldLapsed {
        reservation_id: ReservationId,
        code: BlockCode,
        rooms: u32,
        expired_at: DateTime<Utc>,
        to_block: bool,
    },
    /// A reservation taken from a block gave its rooms back: to the block while it
    /// holds (`to_block`), else to general sale.
    BlockRoomsReleased {
        reservation_id: ReservationId,
        code: BlockCode,
        rooms: u32,
        was_confirmed: bool,
        to_block: bool,
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
    #[error("the block has no rooms on this night")]
    NotInBlock,
    #[error("the block has {remaining} room(s) left")]
    BlockExhausted { remaining: u32 },
    #[error("the block was released")]
    BlockReleased,
    #[error("the block's bookings have taken {picked_up} room(s)")]
    BelowPickup { picked_up: u32 },
}

/// Rooms still for sale on a night: its capacity (the rooms plus the overbooking
/// allowance) less the rooms confirmed and held, never below zero. The one statement
/// of it: the night's decision, the availability read model and the availability read
/// of the write side's rows all count with it.
pub fn rooms_left(total_rooms: i64, overbooking_allowance: i64, confirmed: i64, held: i64) -> i64 {
    total_rooms
        .saturating_add(overbooking_allowance)
        .saturating_sub(confirmed.saturating_add(held))
        .max(0)
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
        let left = rooms_left(
            i64::from(self.levels.map_or(0, |l| l.total_rooms())),
            i64::from(self.levels.map_or(0, |l| l.overbooking_allowance())),
            i64::from(self.confirmed),
            i64::from(self.held) + i64::from(self.blocked),
        );
        u32::try_from(left).unwrap_or(u32::MAX)
    }

    /// Rooms set aside for group blocks (out of general sale).
    pub fn blocked(&self) -> u32 {
        self.blocked
    }

    /// Every block's part of this night.
    pub fn blocks(&self) -> &BTreeMap<BlockCode, BlockNight> {
        &self.blocks
    }

    pub fn block(&self, code: &BlockCode) -> Option<&BlockNight> {
        self.blocks.get(code)
    }

    /// The block a loaded allocation was taken from.
    pub fn block_of(&self, reservation_id: &ReservationId) -> Option<&BlockCode> {
        self.picks.get(reservation_id)
    }

    /// The same night with the blocks a snapshot stores beside its counters, and the
    /// blocks its loaded allocations were taken from.
    pub fn with_blocks(
        mut self,
        blocked: u32,
        blocks: BTreeMap<BlockCode, BlockNight>,
        picks: BTreeMap<ReservationId, BlockCode>,
    ) -> Self {
        self.blocked = blocked;
        self.blocks = blocks;
        self.picks = picks;
        self
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

    pub fn restrictions(&self) -> &RestrictionSet {
        &self.restrictions
    }

    /// A plan's own rate on this night, if it has one.
    pub fn plan_rate(&self, rate_plan_id: RatePlanId) -> Option<Cents> {
        self.plan_rates.get(&rate_plan_id).copied()
    }

    pub fn plan_rates(&self) -> &BTreeMap<RatePlanId, Cents> {
        &self.plan_rates
    }

    /// The same night with the restrictions and plan rates a snapshot stores beside its
    /// counters.
    pub fn with_terms(
        mut self,
        restrictions: RestrictionSet,
        plan_rates: BTreeMap<RatePlanId, Cents>,
    ) -> Self {
        self.restrictions = restrictions;
        self.plan_rates = plan_rates;
        self
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
            restrictions: RestrictionSet::default(),
            plan_rates: BTreeMap::new(),
            blocked: 0,
            blocks: BTreeMap::new(),
            picks: BTreeMap::new(),
        }
    }

    /// The invariant, as the database's CHECK also states it.
    pub fn invariant_holds(&self) -> bool {
        u64::from(self.confirmed) + u64::from(self.held) + u64::from(self.blocked)
            <= u64::from(self.capacity())
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
                let reserved = state.confirmed + state.held + state.blocked;
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
            } => self.take(reservation_id, rooms, Some(expires_at), None, now),
            RoomNightCommand::HoldFromBlock {
                reservation_id,
                code,
                rooms,
                expires_at,
                now,
            } => self.take(reservation_id, rooms, Some(expires_at), Some(code), now),
            RoomNightCommand::Book {
                reservation_id,
                rooms,
                now,
            } => self.take(reservation_id, rooms, None, None, now),
            RoomNightCommand::SetBlock {
                code,
                rooms,
                rate_cents,
                now,
            } => {
                if self.levels.is_none() {
                    return Err(RoomNightError::NotForSale);
                }
                // Lapsed holds first: a lapsed pickup's rooms are the block's again.
                let (mut events, state) = self.drop_lapsed(now);
                let current = state.blocks.get(&code).copied().unwrap_or_default();
                if current.released {
                    return Err(RoomNightError::BlockReleased);
                }
                let Some(set_aside) = rooms.checked_sub(current.picked_up) else {
                    return Err(RoomNightError::BelowPickup {
                        picked_up: current.picked_up,
                    });
                };
                let change = i64::from(set_aside) - i64::from(current.rooms);
                if change > i64::from(state.remaining()) {
                    return Err(RoomNightError::SoldOut {
                        remaining: state.remaining(),
                    });
                }
                let known = state.blocks.contains_key(&code);
                if !known || change != 0 || current.rate_cents != rate_cents {
                    events.push(RoomNightEvent::BlockSet {
                        code,
                        rooms: set_aside,
                        rate_cents,
                        change,
                    });
                }
                Ok(events)
            }
            RoomNightCommand::RemoveBlock { code, now } => {
                let (mut events, state) = self.drop_lapsed(now);
                match state.blocks.get(&code) {
                    None => return Ok(Vec::new()),
                    Some(block) if block.picked_up > 0 => {
                        return Err(RoomNightError::BelowPickup {
                            picked_up: block.picked_up,
                        })
                    }
                    Some(block) => events.push(RoomNightEvent::BlockRemoved {
                        code,
                        rooms: block.rooms,
                    }),
                }
                Ok(events)
            }
            RoomNightCommand::ReleaseBlock { code } => match self.blocks.get(&code) {
                Some(block) if !block.released => Ok(vec![RoomNightEvent::BlockReleased {
                    code,
                    rooms: block.rooms,
                }]),
                _ => Ok(Vec::new()),
            },
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
                let was = self
                    .holds
                    .get(&reservation_id)
                    .map(|hold| (hold.rooms, false))
                    .or_else(|| {
                        self.confirmations
                            .get(&reservation_id)
                            .map(|rooms| (*rooms, true))
                    });
                if let (Some((rooms, was_confirmed)), Some(code)) =
                    (was, self.picks.get(&reservation_id))
                {
                    return Ok(vec![RoomNightEvent::BlockRoomsReleased {
                        reservation_id,
                        code: *code,
                        rooms,
                        was_confirmed,
                        to_block: self.block_holds(code),
                    }]);
                }
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
            RoomNightCommand::SetRestrictions {
                rate_plan_id,
                patch,
            } => {
                if self.levels.is_none() {
                    return Err(RoomNightError::NotForSale);
                }
                let current = self.restrictions.of(rate_plan_id);
                let restrictions = patch.apply(current);
                if restrictions == current {
                    return Ok(Vec::new());
                }
                Ok(vec![RoomNightEvent::RestrictionsSet {
                    rate_plan_id,
                    restrictions,
                }])
            }
            RoomNightCommand::SetPlanRate {
                rate_plan_id,
                rate_cents,
            } => {
                if self.levels.is_none() {
                    return Err(RoomNightError::NotForSale);
                }
                if self.plan_rate(rate_plan_id) == rate_cents {
                    return Ok(Vec::new());
                }
                Ok(vec![RoomNightEvent::PlanRateSet {
                    rate_plan_id,
                    rate_cents,
                }])
            }
            RoomNightCommand::ExpireHold {
                reservation_id,
                now,
            } => match self.holds.get(&reservation_id) {
                None => Ok(Vec::new()),
                Some(hold) if hold.expires_at <= now => Ok(vec![self.lapse(reservation_id, *hold)]),
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
        block: Option<BlockCode>,
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
        if let Some(code) = block {
            let Some(expires_at) = hold_until else {
                // A block's rooms are held first, like any sale; nothing books them
                // outright.
                return Err(RoomNightError::NotInBlock);
            };
            let set_aside = match state.blocks.get(&code) {
                None => return Err(RoomNightError::NotInBlock),
                Some(block) if block.released => return Err(RoomNightError::BlockReleased),
                Some(block) => block.rooms,
            };
            if rooms.get() > set_aside {
                return Err(RoomNightError::BlockExhausted {
                    remaining: set_aside,
                });
            }
            events.push(RoomNightEvent::BlockRoomsHeld {
                reservation_id,
                code,
                rooms: rooms.get(),
                expires_at,
            });
            return Ok(events);
        }
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
            .map(|(id, hold)| self.lapse(*id, *hold))
            .collect();
        let mut state = self.clone();
        for event in &events {
            state.apply_event(event);
        }
        (events, state)
    }

    /// The event that drops a lapsed hold: back to its block while the block holds.
    fn lapse(&self, reservation_id: ReservationId, hold: Hold) -> RoomNightEvent {
        match self.picks.get(&reservation_id) {
            Some(code) => RoomNightEvent::BlockHoldLapsed {
                reservation_id,
                code: *code,
                rooms: hold.rooms,
                expired_at: hold.expires_at,
                to_block: self.block_holds(code),
            },
            None => RoomNightEvent::HoldLapsed {
                reservation_id,
                rooms: hold.rooms,
                expired_at: hold.expires_at,
            },
        }
    }

    /// Whether a block still sets rooms aside on this night (not released).
    fn block_holds(&self, code: &BlockCode) -> bool {
        self.blocks.get(code).is_some_and(|b| !b.released)
    }

    /// A pickup's rooms leaving the reservation: the block's pickup shrinks, and the
    /// rooms are set aside for it again if `to_block`.
    fn unpick(
        &mut self,
        reservation_id: &ReservationId,
        code: &BlockCode,
        rooms: u32,
        to_block: bool,
    ) {
        self.picks.remove(reservation_id);
        if let Some(block) = self.blocks.get_mut(code) {
            block.picked_up = block.picked_up.saturating_sub(rooms);
            if to_block {
                block.rooms = block.rooms.saturating_add(rooms);
            }
        }
        if to_block {
            self.blocked = self.blocked.saturating_add(rooms);
        }
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
            RoomNightEvent::RestrictionsSet {
                rate_plan_id,
                restrictions,
            } => self.restrictions.set(*rate_plan_id, *restrictions),
            RoomNightEvent::PlanRateSet {
                rate_plan_id,
                rate_cents,
            } => match rate_cents {
                Some(rate) => {
                    self.plan_rates.insert(*rate_plan_id, *rate);
                }
                None => {
                    self.plan_rates.remove(rate_plan_id);
                }
            },
            RoomNightEvent::BlockSet {
                code,
                rooms,
                rate_cents,
                change,
            } => {
                let blocked = i64::from(self.blocked).saturating_add(*change).max(0);
                self.blocked = u32::try_from(blocked).unwrap_or(u32::MAX);
                let block = self.blocks.entry(*code).or_default();
                block.rooms = *rooms;
                block.rate_cents = *rate_cents;
            }
            RoomNightEvent::BlockRemoved { code, rooms } => {
                self.blocked = self.blocked.saturating_sub(*rooms);
                self.blocks.remove(code);
            }
            RoomNightEvent::BlockReleased { code, rooms } => {
                self.blocked = self.blocked.saturating_sub(*rooms);
                if let Some(block) = self.blocks.get_mut(code) {
                    block.rooms = 0;
                    block.released = true;
                }
            }
            RoomNightEvent::BlockRoomsHeld {
                reservation_id,
                code,
                rooms,
                expires_at,
            } => {
                self.held = self.held.saturating_add(*rooms);
                self.blocked = self.blocked.saturating_sub(*rooms);
                if let Some(block) = self.blocks.get_mut(code) {
                    block.rooms = block.rooms.saturating_sub(*rooms);
                    block.picked_up = block.picked_up.saturating_add(*rooms);
                }
                self.picks.insert(*reservation_id, *code);
                self.holds.insert(
                    *reservation_id,
                    Hold {
                        rooms: *rooms,
                        expires_at: *expires_at,
                    },
                );
            }
            RoomNightEvent::BlockHoldLapsed {
                reservation_id,
                code,
                rooms,
                to_block,
                ..
            } => {
                self.holds.remove(reservation_id);
                self.held = self.held.saturating_sub(*rooms);
                self.unpick(reservation_id, code, *rooms, *to_block);
            }
            RoomNightEvent::BlockRoomsReleased {
                reservation_id,
                code,
                rooms,
                was_confirmed,
                to_block,
            } => {
                if *was_confirmed {
                    self.confirmations.remove(reservation_id);
                    self.confirmed = self.confirmed.saturating_sub(*rooms);
                } else {
                    self.holds.remove(reservation_id);
                    self.held = self.held.saturating_sub(*rooms);
                }
                self.unpick(reservation_id, code, *rooms, *to_block);
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
mod tests;
