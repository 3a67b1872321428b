//! What a hotel can sell for a stay: the offers a search lists, one per room type and
//! rate plan that could be booked for every night of the stay right now.
//!
//! The one statement of "bookable" outside a hold, so the search across hotels (from
//! the Redis read model, and from PostgreSQL when that cannot answer) and a hotel's own
//! availability list the same offers at the same prices. The cache filters and the
//! database decides: both call [`offers`] over their own view of the nights, and the
//! hold that follows still decides against the write side's rows. Everything priced or
//! judged here goes through [`SaleTerms`] and its restriction check, as the hold
//! does (`SaleTerms::check_stay_on`, the hold's own check over a reader's nights), so
//! no reader does its own arithmetic.
//!
//! An offer of a room type under a plan is listed when:
//! - the stay passes the booking limits (length, rooms, not in the past, not too far
//!   ahead), as on the hotel's `today`;
//! - the room type sleeps the guests ([`SaleTerms::resolve`]);
//! - every night of the stay has inventory with at least the rooms asked for;
//! - no restriction binding that plan (the ones for every plan and the plan's own)
//!   refuses the stay; the check-out day's closure to departure counts, so the night
//!   after the stay is looked up for its restrictions too;
//! - its price does not overflow.
//!
//! Which plans sell a room type: the hotel's plans that list it, each an offer of its
//! own. **A room type that no plan sells is offered at the base rate** (`rate_plan_id`
//! absent) under the house policy, which is refundable — the terms every stay had
//! before rate plans, and what a hold without a plan gets. A room type that some plan
//! sells is offered only under its plans: the hotel chose how to sell it.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};

use super::SaleTerms;
use crate::cancellation::CancellationPolicy;
use crate::hotel::Hotel;
use crate::restrictions::{NightRestrictions, RestrictionSet};
use crate::taxes::{StayFigures, TaxLine};
use crate::types::{
    BookingLimits, Cents, Currency, GuestCount, RatePlanId, RoomCount, RoomTypeId, StayDates,
};

/// One night of one room type, as a reader holds it: what is left, the base rate, and
/// the night's terms (its restrictions and the plans' own rates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NightView<'a> {
    pub remaining: u32,
    pub base_rate: Cents,
    pub restrictions: &'a RestrictionSet,
    pub plan_rates: &'a BTreeMap<RatePlanId, Cents>,
}

const NO_RESTRICTIONS: NightRestrictions = NightRestrictions {
    min_stay: None,
    max_stay: None,
    min_stay_through: None,
    closed_to_arrival: false,
    closed_to_departure: false,
    stop_sell: false,
    min_advance_days: None,
    max_advance_days: None,
};

/// The terms of a night that has none, for views to borrow.
static NO_TERMS: RestrictionSet = RestrictionSet {
    all: NO_RESTRICTIONS,
    plans: BTreeMap::new(),
};
static NO_PLAN_RATES: BTreeMap<RatePlanId, Cents> = BTreeMap::new();

impl NightView<'static> {
    /// A night with no restrictions and no plan rates of its own.
    pub fn plain(remaining: u32, base_rate: Cents) -> Self {
        Self {
            remaining,
            base_rate,
            restrictions: &NO_TERMS,
            plan_rates: &NO_PLAN_RATES,
        }
    }
}

impl NightView<'_> {
    /// The same night with its terms.
    pub fn with_terms<'b>(
        self,
        restrictions: &'b RestrictionSet,
        plan_rates: &'b BTreeMap<RatePlanId, Cents>,
    ) -> NightView<'b> {
        NightView {
            remaining: self.remaining,
            base_rate: self.base_rate,
            restrictions,
            plan_rates,
        }
    }

    /// One room's price on this night under `terms`; `None` on overflow.
    pub fn price(&self, terms: &SaleTerms) -> Option<Cents> {
        terms.price_from(self.base_rate, |plan| self.plan_rates.get(&plan).copied())
    }
}

/// A search: the stay, how many rooms and guests per room, and the hotel's own date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferRequest<'s> {
    pub stay: &'s StayDates,
    pub rooms: RoomCount,
    pub guests: GuestCount,
    /// Today at the hotel (its timezone): restrictions on advance, and the booking
    /// limits, count from it.
    pub today: NaiveDate,
    pub limits: BookingLimits,
}

/// A room type sold under a plan (or at the base rate) for the whole stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub room_type_id: RoomTypeId,
    /// `None`: the base rate, under the house policy.
    pub rate_plan_id: Option<RatePlanId>,
    /// The price of the rooms asked for, for every night.
    pub total_cents: Cents,
    /// The fewest rooms left on any night of the stay.
    pub remaining: u32,
    /// Whether a guest's cancellation may give anything back.
    pub refundable: bool,
    /// The hotel's currency: every amount of the offer is in its minor unit.
    pub currency: Currency,
    /// The hotel's taxes on the stay (none: empty, and nothing allocated).
    pub taxes: Vec<TaxLine>,
    /// What the guest would owe: `total_cents` and every tax not included.
    pub total_due_cents: Cents,
}

/// The plans a room type is sold under, in id order: every plan of the hotel that sells
/// it, or the base rate alone (`None`) when none does.
pub fn selling_plans(hotel: &Hotel, room_type_id: RoomTypeId) -> Vec<Option<RatePlanId>> {
    let plans: Vec<Option<RatePlanId>> = hotel
        .plans_selling(room_type_id)
        .map(|(id, _)| Some(id))
        .collect();
    if plans.is_empty() {
        vec![None]
    } else {
        plans
    }
}

/// The bookable offers of `hotel` for `request`, cheapest first (ties by room type,
/// then plan, the base rate first). `night` gives each (room type, date) as the reader
/// holds it, `None` where the night has no inventory.
pub fn offers<'v>(
    hotel: &Hotel,
    request: &OfferRequest<'_>,
    night: impl Fn(RoomTypeId, NaiveDate) -> Option<NightView<'v>>,
) -> Vec<Offer> {
    let mut offers = Vec::with_capacity(hotel.room_types().len() * hotel.rate_plans().len().max(1));
    if request
        .limits
        .check(request.stay, request.rooms, request.today)
        .is_err()
    {
        return offers;
    }
    // One buffer for every room type's nights: a search runs this for every hotel of a
    // city, so what it allocates per room type and plan shows (see the reader's docs).
    let mut nights = Vec::with_capacity(request.stay.night_count() as usize);
    for room_type_id in hotel.room_types().keys() {
        room_type_offers(
            hotel,
            *room_type_id,
            request,
            &night,
            &mut nights,
            &mut offers,
        );
    }
    offers.sort_by_key(|o| (o.total_cents, o.room_type_id, o.rate_plan_id));
    offers
}

/// Pushes the offers of one room type; `nights` is a buffer to fill.
fn room_type_offers<'v>(
    hotel: &Hotel,
    room_type_id: RoomTypeId,
    request: &OfferRequest<'_>,
    night: &impl Fn(RoomTypeId, NaiveDate) -> Option<NightView<'v>>,
    nights: &mut Vec<NightView<'v>>,
    offers: &mut Vec<Offer>,
) {
    let stay = request.stay;
    nights.clear();
    for date in stay.nights() {
        match night(room_type_id, date) {
            Some(view) => nights.push(view),
            None => return,
        }
    }
    let Some(remaining) = nights.iter().map(|n| n.remaining).min() else {
        return;
    };
    if remaining < request.rooms.get() {
        return;
    }
    // Where no night of the stay nor its check-out day carries any restriction, none
    // can refuse it: most nights carry none, and judging them costs more than pricing.
    let restricted_somewhere = nights.iter().any(|n| !n.restrictions.is_empty())
        || night(room_type_id, stay.end()).is_some_and(|n| !n.restrictions.is_empty());
    let mut plans = hotel
        .plans_selling(room_type_id)
        .map(|(id, _)| Some(id))
        .peekable();
    // No plan sells it: the base rate (see the module's docs).
    let base_rate = plans.peek().is_none().then_some(None);
    for plan in plans.chain(base_rate) {
        // Refused terms (the room does not sleep the guests) refuse every plan alike.
        let Ok(terms) = SaleTerms::resolve(hotel, room_type_id, plan, request.guests) else {
            continue;
        };
        if restricted_somewhere {
            // The stay's nights are at hand; only the check-out day is looked up.
            let restrictions_on = |date: NaiveDate| {
                let index =
                    usize::try_from(date.num_days_from_ce() - stay.start().num_days_from_ce()).ok();
                match index.and_then(|i| nights.get(i)) {
                    Some(view) => Some(view.restrictions),
                    None => night(room_type_id, date).map(|n| n.restrictions),
                }
            };
            let restricted = terms.check_stay_on(stay, request.today, restrictions_on, |_| false);
            if restricted.is_err() {
                continue;
            }
        }
        let Some(total_cents) = nights
            .iter()
            .try_fold(Cents::ZERO, |sum, n| sum.checked_add(n.price(&terms)?))
            .and_then(|per_room| per_room.checked_mul(request.rooms.get()))
        else {
            continue;
        };
        let taxed = hotel.taxes().due_on(StayFigures {
            room_total: total_cents,
            nights: stay.night_count(),
            rooms: request.rooms.get(),
            guests: request.guests.get(),
        });
        offers.push(Offer {
            room_type_id,
            rate_plan_id: plan,
            total_cents,
            remaining,
            refundable: terms.cancellation_policy() != CancellationPolicy::NonRefundable,
            currency: hotel.currency(),
            total_due_cents: taxed.total_due,
            taxes: taxed.lines,
        });
    }
}

#[cfg(test)]
mod tests;
