//! The terms a stay is sold on: under which rate plan (or at the base rate), for how
//! many guests per room, at what price per night and under which cancellation policy,
//! and which restrictions bind it.
//!
//! One statement of the sale's arithmetic, used wherever a price or a restriction is
//! judged: the hold and the date change on the write side, the availability read of the
//! write side's rows, the read model behind the search across hotels, and the audit
//! replay that judges every recorded sale again. The read side may be behind, but it
//! never prices or restricts differently.
//!
//! A night's price under a plan: the root plan of its chain of derivations costs its own
//! rate on that night when it has one, the base rate otherwise; each derivation down the
//! chain adjusts that by its percentage, rounded to the cent at every step; the guests
//! beyond the room type's base occupancy then add the room type's extra-guest charge,
//! which no plan adjusts (it is the hotel's price for a bed, not a rate).

use chrono::NaiveDate;

use super::{Nights, Rejection};
use crate::cancellation::CancellationPolicy;
use crate::hotel::Hotel;
use crate::rate_plan::{derived_price, Adjustments};
use crate::restrictions::{self, NightRestrictions, Restricted, RestrictionSet};
use crate::room_night::RoomNight;
use crate::types::{Cents, GuestCount, RatePlanId, RoomCount, RoomTypeId, StayDates};

/// What a stay of one room type is sold on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleTerms {
    rate_plan_id: Option<RatePlanId>,
    /// The plan priced on its own at the root of the chain (`None`: the base rate).
    root: Option<RatePlanId>,
    adjustments: Adjustments,
    policy: CancellationPolicy,
    extra_per_night: Cents,
    guests: GuestCount,
}

impl SaleTerms {
    /// The terms of `rate_plan_id` (or the base rate) for `guests` per room of
    /// `room_type_id`: refused if the hotel has no such room type, if the plan does not
    /// exist or does not sell it, or if the room does not sleep that many.
    pub fn resolve(
        hotel: &Hotel,
        room_type_id: RoomTypeId,
        rate_plan_id: Option<RatePlanId>,
        guests: GuestCount,
    ) -> Result<Self, Rejection> {
        let room_type = hotel
            .room_type(room_type_id)
            .ok_or(Rejection::UnknownRoomType)?;
        let (root, adjustments, policy) = match rate_plan_id {
            None => (None, Adjustments::new(), CancellationPolicy::HOUSE),
            Some(id) => {
                let plan = hotel
                    .rate_plan(id)
                    .filter(|plan| plan.sells(room_type_id))
                    .ok_or(Rejection::UnknownRatePlan)?;
                let (root, adjustments) = hotel
                    .price_chain(id)
                    .map_err(|_| Rejection::UnknownRatePlan)?;
                (Some(root), adjustments, plan.cancellation_policy())
            }
        };
        if guests.get() > room_type.max_occupancy() {
            return Err(Rejection::OccupancyExceeded {
                max_occupancy: room_type.max_occupancy(),
            });
        }
        Ok(Self {
            rate_plan_id,
            root,
            adjustments,
            policy,
            extra_per_night: room_type.extra_guests_charge(guests.get()),
            guests,
        })
    }

    pub fn rate_plan_id(&self) -> Option<RatePlanId> {
        self.rate_plan_id
    }

    pub fn cancellation_policy(&self) -> CancellationPolicy {
        self.policy
    }

    pub fn guests(&self) -> GuestCount {
        self.guests
    }

    /// One room's price for a night whose base rate is `base_rate` and whose plans' own
    /// rates `plan_rate` gives; `None` on overflow.
    pub fn price_from(
        &self,
        base_rate: Cents,
        plan_rate: impl Fn(RatePlanId) -> Option<Cents>,
    ) -> Option<Cents> {
        let root_price = self.root.and_then(plan_rate).unwrap_or(base_rate);
        derived_price(root_price, &self.adjustments)?.checked_add(self.extra_per_night)
    }

    /// One room's price for a loaded night; `None` if it has no inventory.
    pub fn night_price(&self, night: &RoomNight) -> Option<Cents> {
        let base = night.levels()?.rate_cents();
        self.price_from(base, |plan| night.plan_rate(plan))
    }

    /// The price of `rooms` rooms for the whole stay; `None` if a night has no inventory.
    pub fn stay_price(&self, nights: &Nights, stay: &StayDates, rooms: RoomCount) -> Option<Cents> {
        let per_room = stay.nights().try_fold(Cents::ZERO, |total, date| {
            total.checked_add(self.night_price(nights.get(&date)?)?)
        })?;
        per_room.checked_mul(rooms.get())
    }

    /// The price of a stay's first night for `rooms` rooms (a no-show's fee); `None`
    /// as for [`Self::stay_price`].
    pub fn first_night_price(
        &self,
        nights: &Nights,
        stay: &StayDates,
        rooms: RoomCount,
    ) -> Option<Cents> {
        self.night_price(nights.get(&stay.start())?)?
            .checked_mul(rooms.get())
    }

    /// The restrictions that bind this sale on a night that carries `set`.
    pub fn restrictions_of(&self, set: &RestrictionSet) -> NightRestrictions {
        set.for_plan(self.rate_plan_id)
    }

    /// Judges a stay booked on `today` (the hotel's date) against the loaded nights'
    /// restrictions (an absent night has none). `already_sold` nights (those a stay
    /// moving to new dates keeps) are not stopped for it: a stop-sell ends sales, not
    /// stays.
    pub fn check_stay(
        &self,
        nights: &Nights,
        stay: &StayDates,
        today: NaiveDate,
        already_sold: impl Fn(NaiveDate) -> bool,
    ) -> Result<(), Restricted> {
        self.check_stay_on(
            stay,
            today,
            |date| nights.get(&date).map(RoomNight::restrictions),
            already_sold,
        )
    }

    /// [`Self::check_stay`] for a reader that keeps each date's restrictions without
    /// its night (the audit replay, which follows them through the whole history):
    /// `restrictions` gives a date's set, `None` when it carries none.
    pub fn check_stay_on<'a>(
        &self,
        stay: &StayDates,
        today: NaiveDate,
        restrictions: impl Fn(NaiveDate) -> Option<&'a RestrictionSet>,
        already_sold: impl Fn(NaiveDate) -> bool,
    ) -> Result<(), Restricted> {
        restrictions::check_stay(stay, today, |date| {
            let mut rules = restrictions(date)
                .map(|set| self.restrictions_of(set))
                .unwrap_or_default();
            if already_sold(date) {
                rules.stop_sell = false;
            }
            rules
        })
    }
}
