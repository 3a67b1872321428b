//! Bulk updates of availability, rates and inventory (ARI), as channel managers send
//! them: several updates in one command, each over a range of nights restricted to
//! chosen days of the week, decided one after the other on the state the previous
//! ones left (so one command may open a night's inventory and restrict it), and all
//! of them or none.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};

use super::inventory::{set_levels, InventoryUpdate};
use super::nights::{decide_nights, RoomType};
use super::{check_room_type, Decision, Nights, Rejection};
use crate::hotel::Hotel;
use crate::restrictions::RestrictionsPatch;
use crate::room_night::{RoomNight, RoomNightCommand};
use crate::types::{Cents, HotelId, RatePlanId, RoomTypeId, StayDates, Weekdays};

/// What one update sets on each of its nights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AriChange {
    /// Rooms, allowance and base rate (see [`super::set_inventory`]).
    Inventory(InventoryUpdate),
    /// Restrictions for every plan (`rate_plan_id: None`) or one plan.
    Restrictions {
        rate_plan_id: Option<RatePlanId>,
        patch: RestrictionsPatch,
    },
    /// A plan's own rate (a plan priced on its own, not a derived one).
    PlanRate {
        rate_plan_id: RatePlanId,
        rate_cents: Cents,
    },
}

/// One update: `change` on the nights of `range` that fall on `days`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AriUpdate {
    pub room_type_id: RoomTypeId,
    pub range: StayDates,
    pub days: Weekdays,
    pub change: AriChange,
}

impl AriUpdate {
    /// The nights this update sets, in date order.
    pub fn dates(&self) -> impl Iterator<Item = NaiveDate> + '_ {
        self.range.nights().filter(|date| self.days.contains(*date))
    }
}

/// The updates of one command, in the order they apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateAri {
    pub hotel_id: HotelId,
    pub updates: Vec<AriUpdate>,
    pub now: DateTime<Utc>,
}

/// What a bulk update decided: per update, its room type and decision (to be applied in
/// this order), and how many nights it set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AriDecision {
    pub decisions: Vec<(RoomTypeId, Decision)>,
    pub nights_per_update: Vec<u32>,
}

/// Decides every update of `cmd` on `nights` (the loaded nights of each room type the
/// updates name), each on the state the earlier ones leave, or refuses them all.
pub fn update_ari(
    hotel: &Hotel,
    nights: &BTreeMap<RoomTypeId, Nights>,
    cmd: &UpdateAri,
) -> Result<AriDecision, Rejection> {
    let mut working: BTreeMap<RoomTypeId, Nights> = BTreeMap::new();
    let mut result = AriDecision::default();
    for update in &cmd.updates {
        check_room_type(hotel, cmd.hotel_id, update.room_type_id)?;
        let current = working.entry(update.room_type_id).or_insert_with(|| {
            nights
                .get(&update.room_type_id)
                .cloned()
                .unwrap_or_default()
        });
        let room_type = RoomType {
            hotel_id: cmd.hotel_id,
            room_type_id: update.room_type_id,
        };
        let mut decision = Decision::default();
        match update.change {
            AriChange::Inventory(levels) => set_levels(
                &mut decision,
                room_type,
                current,
                update.dates(),
                levels,
                cmd.now,
            )?,
            AriChange::Restrictions {
                rate_plan_id,
                patch,
            } => {
                if let Some(plan) = rate_plan_id {
                    sold_plan(hotel, plan, update.room_type_id)?;
                }
                on_inventory(&mut decision, room_type, current, update.dates(), || {
                    RoomNightCommand::SetRestrictions {
                        rate_plan_id,
                        patch,
                    }
                })?
            }
            AriChange::PlanRate {
                rate_plan_id,
                rate_cents,
            } => {
                if sold_plan(hotel, rate_plan_id, update.room_type_id)?.is_derived() {
                    return Err(Rejection::DerivedRatePlan);
                }
                on_inventory(&mut decision, room_type, current, update.dates(), || {
                    RoomNightCommand::SetPlanRate {
                        rate_plan_id,
                        rate_cents: Some(rate_cents),
                    }
                })?
            }
        }
        for (key, events) in &decision.nights {
            let night = current.entry(key.night).or_default();
            for event in events {
                night.apply_event(event);
            }
        }
        let count = u32::try_from(update.dates().count()).unwrap_or(u32::MAX);
        result.nights_per_update.push(count);
        result.decisions.push((update.room_type_id, decision));
    }
    Ok(result)
}

/// The hotel's plan `id`, if it sells `room_type_id`.
fn sold_plan(
    hotel: &Hotel,
    id: RatePlanId,
    room_type_id: RoomTypeId,
) -> Result<&crate::hotel::RatePlan, Rejection> {
    hotel
        .rate_plan(id)
        .filter(|plan| plan.sells(room_type_id))
        .ok_or(Rejection::PlanDoesNotSell {
            rate_plan_id: id,
            room_type_id,
        })
}

/// Decides `command` on each of `dates`, every one of which must have inventory.
fn on_inventory(
    decision: &mut Decision,
    room_type: RoomType,
    nights: &Nights,
    dates: impl IntoIterator<Item = NaiveDate>,
    command: impl Fn() -> RoomNightCommand,
) -> Result<(), Rejection> {
    decide_nights(
        decision,
        room_type,
        nights,
        dates,
        |date, night: &RoomNight| {
            if night.levels().is_none() {
                return Err(Rejection::NoInventory { night: date });
            }
            Ok(Some(command()))
        },
    )
}
