//! Stay restrictions: the rules a revenue manager sets on a night to shape demand
//! (minimum and maximum stay, closed to arrival or departure, stop-sell, how far ahead
//! a stay may be booked), and the one function that judges a stay against them.
//!
//! This module is the rule alone, pure and synchronous like the rest of the domain:
//! which restrictions a night carries, how two sets that both apply combine (the ones
//! for every plan and the ones for one plan), and whether a stay booked on a given day
//! breaks any, naming the first it breaks. Keeping the rule here, apart from where the
//! restrictions are stored, lets the write side decide with it inside the transaction
//! that takes the rooms and the audit replay judge the same way.
//!
//! A night keeps its restrictions as a [`RestrictionSet`]: one set for every plan and
//! one per plan that has its own; a stay sold under a plan meets both. Staff change
//! them with a [`RestrictionsPatch`] (a field left out keeps its value).

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};
use serde::{Deserialize, Serialize};

use crate::types::{InvalidInput, RatePlanId, StayDates};

/// The restrictions in force on one night (for one plan, or for every plan).
///
/// `min_stay`, `max_stay`, `closed_to_arrival`, `min_advance_days` and
/// `max_advance_days` bind stays that arrive on this night; `min_stay_through` and
/// `stop_sell` bind every stay that includes it; `closed_to_departure` binds stays
/// whose check-out day is this date.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NightRestrictions {
    pub min_stay: Option<u32>,
    pub max_stay: Option<u32>,
    pub min_stay_through: Option<u32>,
    pub closed_to_arrival: bool,
    pub closed_to_departure: bool,
    pub stop_sell: bool,
    pub min_advance_days: Option<u32>,
    pub max_advance_days: Option<u32>,
}

impl NightRestrictions {
    /// No restriction at all.
    pub fn is_none(&self) -> bool {
        *self == NightRestrictions::default()
    }

    /// Both sets apply: the stricter of each (the larger minimum, the smaller maximum,
    /// a closure if either closes).
    pub fn and(self, other: NightRestrictions) -> NightRestrictions {
        fn larger(a: Option<u32>, b: Option<u32>) -> Option<u32> {
            a.max(b)
        }
        fn smaller(a: Option<u32>, b: Option<u32>) -> Option<u32> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, None) => a,
                (None, b) => b,
            }
        }
        NightRestrictions {
            min_stay: larger(self.min_stay, other.min_stay),
            max_stay: smaller(self.max_stay, other.max_stay),
            min_stay_through: larger(self.min_stay_through, other.min_stay_through),
            closed_to_arrival: self.closed_to_arrival || other.closed_to_arrival,
            closed_to_departure: self.closed_to_departure || other.closed_to_departure,
            stop_sell: self.stop_sell || other.stop_sell,
            min_advance_days: larger(self.min_advance_days, other.min_advance_days),
            max_advance_days: smaller(self.max_advance_days, other.max_advance_days),
        }
    }
}

/// The restrictions a night carries: for every plan, and for single plans.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestrictionSet {
    #[serde(default, skip_serializing_if = "NightRestrictions::is_none")]
    pub all: NightRestrictions,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plans: BTreeMap<RatePlanId, NightRestrictions>,
}

impl RestrictionSet {
    /// What binds a stay sold under `plan` (`None`: the base rate, which only the
    /// restrictions for every plan bind).
    pub fn for_plan(&self, plan: Option<RatePlanId>) -> NightRestrictions {
        match plan.and_then(|p| self.plans.get(&p)) {
            Some(own) => self.all.and(*own),
            None => self.all,
        }
    }

    /// The set for every plan (`None`) or for one plan.
    pub fn of(&self, plan: Option<RatePlanId>) -> NightRestrictions {
        match plan {
            None => self.all,
            Some(p) => self.plans.get(&p).copied().unwrap_or_default(),
        }
    }

    /// Replaces the set for every plan or for one; a plan's empty set is dropped.
    pub fn set(&mut self, plan: Option<RatePlanId>, restrictions: NightRestrictions) {
        match plan {
            None => self.all = restrictions,
            Some(p) if restrictions.is_none() => {
                self.plans.remove(&p);
            }
            Some(p) => {
                self.plans.insert(p, restrictions);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_none() && self.plans.is_empty()
    }
}

/// A change to a night's restrictions as staff send it: `None` keeps a field,
/// `Some(None)` clears a number, `Some(Some(n))` sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestrictionsPatch {
    pub min_stay: Option<Option<u32>>,
    pub max_stay: Option<Option<u32>>,
    pub min_stay_through: Option<Option<u32>>,
    pub closed_to_arrival: Option<bool>,
    pub closed_to_departure: Option<bool>,
    pub stop_sell: Option<bool>,
    pub min_advance_days: Option<Option<u32>>,
    pub max_advance_days: Option<Option<u32>>,
}

/// The largest stay length or advance a restriction may name: the booking limits are far
/// below it, so a larger value could only be a mistake.
pub const MAX_RESTRICTION_DAYS: i64 = 1000;

impl RestrictionsPatch {
    /// The patch that sets exactly `restrictions`, whatever a night carried before.
    pub fn replacing(r: NightRestrictions) -> Self {
        Self {
            min_stay: Some(r.min_stay),
            max_stay: Some(r.max_stay),
            min_stay_through: Some(r.min_stay_through),
            closed_to_arrival: Some(r.closed_to_arrival),
            closed_to_departure: Some(r.closed_to_departure),
            stop_sell: Some(r.stop_sell),
            min_advance_days: Some(r.min_advance_days),
            max_advance_days: Some(r.max_advance_days),
        }
    }

    /// Checks one number of a patch: a count of nights or days, 1 (0 for advance days)
    /// to [`MAX_RESTRICTION_DAYS`].
    pub fn days(field: &'static str, value: i64, min: i64) -> Result<u32, InvalidInput> {
        if (min..=MAX_RESTRICTION_DAYS).contains(&value) {
            u32::try_from(value).map_err(|_| InvalidInput::new(field, "out of range"))
        } else {
            Err(InvalidInput::new(
                field,
                format!("must be between {min} and {MAX_RESTRICTION_DAYS}"),
            ))
        }
    }

    /// Refuses a patch whose own minimum stay is above its own maximum.
    pub fn check(&self) -> Result<(), InvalidInput> {
        if let (Some(Some(min)), Some(Some(max))) = (self.min_stay, self.max_stay) {
            if min > max {
                return Err(InvalidInput::new("min_stay", "may not be above max_stay"));
            }
        }
        if let (Some(Some(min)), Some(Some(max))) = (self.min_advance_days, self.max_advance_days) {
            if min > max {
                return Err(InvalidInput::new(
                    "min_advance_days",
                    "may not be above max_advance_days",
                ));
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        *self == RestrictionsPatch::default()
    }

    /// `current` with the patch's fields set.
    pub fn apply(&self, current: NightRestrictions) -> NightRestrictions {
        NightRestrictions {
            min_stay: self.min_stay.unwrap_or(current.min_stay),
            max_stay: self.max_stay.unwrap_or(current.max_stay),
            min_stay_through: self.min_stay_through.unwrap_or(current.min_stay_through),
            closed_to_arrival: self.closed_to_arrival.unwrap_or(current.closed_to_arrival),
            closed_to_departure: self
                .closed_to_departure
                .unwrap_or(current.closed_to_departure),
            stop_sell: self.stop_sell.unwrap_or(current.stop_sell),
            min_advance_days: self.min_advance_days.unwrap_or(current.min_advance_days),
            max_advance_days: self.max_advance_days.unwrap_or(current.max_advance_days),
        }
    }
}

/// One kind of restriction, named as the contract's fields are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restriction {
    StopSell,
    ClosedToArrival,
    MinStay,
    MaxStay,
    MinAdvanceDays,
    MaxAdvanceDays,
    MinStayThrough,
    ClosedToDeparture,
}

impl Restriction {
    /// The field name clients set it by (and a refusal names).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StopSell => "stop_sell",
            Self::ClosedToArrival => "closed_to_arrival",
            Self::MinStay => "min_stay",
            Self::MaxStay => "max_stay",
            Self::MinAdvanceDays => "min_advance_days",
            Self::MaxAdvanceDays => "max_advance_days",
            Self::MinStayThrough => "min_stay_through",
            Self::ClosedToDeparture => "closed_to_departure",
        }
    }
}

/// Why a stay may not be sold: the restriction it breaks, and the night that carries
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the stay breaks {} on {night}", .restriction.as_str())]
pub struct Restricted {
    pub restriction: Restriction,
    pub night: NaiveDate,
}

/// Judges a stay booked on `today` (the hotel's local date) against the restrictions
/// `night` gives for each date, and names the first one broken, in this order: a
/// stopped night of the stay (the earliest), then the arrival night's rules
/// (closed to arrival, minimum and maximum stay, minimum and maximum advance), then a
/// night of the stay whose minimum stay through it is not met (the earliest), then a
/// check-out day closed to departure.
pub fn check_stay(
    stay: &StayDates,
    today: NaiveDate,
    night: impl Fn(NaiveDate) -> NightRestrictions,
) -> Result<(), Restricted> {
    let refuse = |restriction, night| Err(Restricted { restriction, night });
    let length = stay.night_count();
    // One pass over the nights, each looked up once and nothing allocated (a search
    // judges every room type and plan of every hotel of a city); the refusals are
    // then named in the documented order.
    let arrival = stay.start();
    let mut on_arrival = None;
    let (mut stopped, mut too_short_through) = (None, None);
    for date in stay.nights() {
        let rules = night(date);
        on_arrival.get_or_insert(rules);
        if rules.stop_sell && stopped.is_none() {
            stopped = Some(date);
        }
        if too_short_through.is_none() && rules.min_stay_through.is_some_and(|min| length < min) {
            too_short_through = Some(date);
        }
    }
    if let Some(date) = stopped {
        return refuse(Restriction::StopSell, date);
    }
    let on_arrival = on_arrival.unwrap_or_else(|| night(arrival));
    if on_arrival.closed_to_arrival {
        return refuse(Restriction::ClosedToArrival, arrival);
    }
    if on_arrival.min_stay.is_some_and(|min| length < min) {
        return refuse(Restriction::MinStay, arrival);
    }
    if on_arrival.max_stay.is_some_and(|max| length > max) {
        return refuse(Restriction::MaxStay, arrival);
    }
    // Days ahead of arrival; a stay arriving before today (which the booking limits
    // refuse anyway) counts as zero days ahead.
    let ahead = (arrival.num_days_from_ce() - today.num_days_from_ce()).max(0);
    let ahead = u32::try_from(ahead).unwrap_or(u32::MAX);
    if on_arrival.min_advance_days.is_some_and(|min| ahead < min) {
        return refuse(Restriction::MinAdvanceDays, arrival);
    }
    if on_arrival.max_advance_days.is_some_and(|max| ahead > max) {
        return refuse(Restriction::MaxAdvanceDays, arrival);
    }
    if let Some(date) = too_short_through {
        return refuse(Restriction::MinStayThrough, date);
    }
    let departure = stay.end();
    if night(departure).closed_to_departure {
        return refuse(Restriction::ClosedToDeparture, departure);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
