//! `Hotel`: the catalog entry of one hotel, its room types and its rate plans.
//!
//! Catalog writes are PUTs: setting the same details again records nothing, so staff
//! tools can retry freely.
//!
//! A rate plan is checked here against the whole catalog as it would be after the
//! change: the room types it sells exist, a derived plan's parent sells every room type
//! the child does, and no chain of derivation loops back on itself. So every plan the
//! catalog holds can be priced, and a sale never meets a plan it cannot resolve.

use std::collections::{BTreeMap, BTreeSet};

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::cancellation::CancellationPolicy;
use crate::names::AggregateType;
use crate::rate_plan::{self, Adjustments, Pricing, PricingError};
use crate::taxes::Taxes;
use crate::types::{Cents, Currency, HotelId, InvalidInput, RatePlanId, RoomTypeId, TimeZone};

/// Name, city, IANA timezone and currency of a hotel, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotelDetails {
    name: String,
    city: String,
    timezone: TimeZone,
    /// Absent from what was stored before hotels had a currency, and from the euro's
    /// details still (so they serialize as they always did): the euro.
    #[serde(default, skip_serializing_if = "Currency::is_euro")]
    currency: Currency,
}

fn short_text(field: &'static str, value: &str, max: usize) -> Result<String, InvalidInput> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max || value.chars().any(char::is_control) {
        return Err(InvalidInput::new(
            field,
            format!("must be 1 to {max} printable characters"),
        ));
    }
    Ok(value.to_owned())
}

impl HotelDetails {
    pub fn parse(name: &str, city: &str, timezone: &str) -> Result<Self, InvalidInput> {
        let name = short_text("name", name, 200)?;
        let city = short_text("city", city, 100)?;
        let timezone = TimeZone::parse(timezone)?;
        Ok(Self {
            name,
            city,
            timezone,
            currency: Currency::EUR,
        })
    }

    /// The same details, priced in `currency`.
    pub fn with_currency(self, currency: Currency) -> Self {
        Self { currency, ..self }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn city(&self) -> &str {
        &self.city
    }

    pub fn timezone(&self) -> TimeZone {
        self.timezone
    }

    pub fn currency(&self) -> Currency {
        self.currency
    }
}

/// A room type's name, how many guests it sleeps, and how its price grows with them:
/// the rate covers `base_occupancy` guests, and each guest beyond adds
/// `extra_guest_cents` per night and room.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomTypeDetails {
    name: String,
    max_occupancy: u32,
    /// Absent: the rate covers every guest the room sleeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_occupancy: Option<u32>,
    #[serde(default, skip_serializing_if = "Cents::is_zero")]
    extra_guest_cents: Cents,
}

/// Most an extra guest may cost per night (a million in currency units).
const MAX_EXTRA_GUEST_CENTS: i64 = 100_000_000;

impl RoomTypeDetails {
    pub fn parse(name: &str, max_occupancy: i64) -> Result<Self, InvalidInput> {
        let name = short_text("name", name, 100)?;
        let max_occupancy = match u32::try_from(max_occupancy) {
            Ok(v) if (1..=50).contains(&v) => v,
            _ => {
                return Err(InvalidInput::new(
                    "max_occupancy",
                    "must be between 1 and 50",
                ))
            }
        };
        Ok(Self {
            name,
            max_occupancy,
            base_occupancy: None,
            extra_guest_cents: Cents::ZERO,
        })
    }

    /// The same room type priced by occupancy: `base_occupancy` (1 to `max_occupancy`;
    /// `None` keeps the default, `max_occupancy`) and the price of each guest beyond it.
    pub fn with_occupancy_pricing(
        mut self,
        base_occupancy: Option<i64>,
        extra_guest_cents: Option<i64>,
    ) -> Result<Self, InvalidInput> {
        if let Some(base) = base_occupancy {
            match u32::try_from(base) {
                Ok(v) if (1..=self.max_occupancy).contains(&v) => {
                    self.base_occupancy = (v != self.max_occupancy).then_some(v);
                }
                _ => {
                    return Err(InvalidInput::new(
                        "base_occupancy",
                        "must be between 1 and max_occupancy",
                    ))
                }
            }
        }
        if let Some(cents) = extra_guest_cents {
            if !(0..=MAX_EXTRA_GUEST_CENTS).contains(&cents) {
                return Err(InvalidInput::new(
                    "extra_guest_cents",
                    format!("must be between 0 and {MAX_EXTRA_GUEST_CENTS}"),
                ));
            }
            self.extra_guest_cents = Cents::new(cents);
        }
        Ok(self)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_occupancy(&self) -> u32 {
        self.max_occupancy
    }

    /// Guests the rate covers.
    pub fn base_occupancy(&self) -> u32 {
        self.base_occupancy.unwrap_or(self.max_occupancy)
    }

    pub fn extra_guest_cents(&self) -> Cents {
        self.extra_guest_cents
    }

    /// What `guests` per room add to each night's price of one room.
    pub fn extra_guests_charge(&self, guests: u32) -> Cents {
        let extra = guests.saturating_sub(self.base_occupancy());
        self.extra_guest_cents.saturating_mul(extra)
    }
}

/// A rate plan: what it is called, which room types it sells, the cancellation policy a
/// stay sold under it gets, and how it is priced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RatePlan {
    name: String,
    room_type_ids: BTreeSet<RoomTypeId>,
    cancellation_policy: CancellationPolicy,
    pricing: Pricing,
}

/// Most room types one plan may list.
const MAX_PLAN_ROOM_TYPES: usize = 200;

/// The range of `adjust_percent`: down to free, up to eleven times the parent's price.
pub const ADJUST_PERCENT_RANGE: std::ops::RangeInclusive<i64> = -100..=1000;

impl RatePlan {
    pub fn parse(
        name: &str,
        room_type_ids: BTreeSet<RoomTypeId>,
        cancellation_policy: CancellationPolicy,
        pricing: Pricing,
    ) -> Result<Self, InvalidInput> {
        let name = short_text("name", name, 100)?;
        if room_type_ids.is_empty() || room_type_ids.len() > MAX_PLAN_ROOM_TYPES {
            return Err(InvalidInput::new(
                "room_type_ids",
                format!("must list 1 to {MAX_PLAN_ROOM_TYPES} room types"),
            ));
        }
        if let Pricing::Derived { adjust_percent, .. } = pricing {
            if !ADJUST_PERCENT_RANGE.contains(&i64::from(adjust_percent)) {
                return Err(InvalidInput::new(
                    "derived_from.adjust_percent",
                    "must be between -100 and 1000",
                ));
            }
        }
        Ok(Self {
            name,
            room_type_ids,
            cancellation_policy,
            pricing,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn room_type_ids(&self) -> &BTreeSet<RoomTypeId> {
        &self.room_type_ids
    }

    pub fn sells(&self, room_type_id: RoomTypeId) -> bool {
        self.room_type_ids.contains(&room_type_id)
    }

    pub fn cancellation_policy(&self) -> CancellationPolicy {
        self.cancellation_policy
    }

    pub fn pricing(&self) -> Pricing {
        self.pricing
    }

    pub fn is_derived(&self) -> bool {
        matches!(self.pricing, Pricing::Derived { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Hotel {
    hotel_id: Option<HotelId>,
    details: Option<HotelDetails>,
    room_types: BTreeMap<RoomTypeId, RoomTypeDetails>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    rate_plans: BTreeMap<RatePlanId, RatePlan>,
    /// The taxes and fees a stay sold now is charged (none until they are set).
    #[serde(default, skip_serializing_if = "Taxes::is_empty")]
    taxes: Taxes,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HotelCommand {
    SetDetails {
        hotel_id: HotelId,
        details: HotelDetails,
    },
    SetRoomType {
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    },
    SetRatePlan {
        rate_plan_id: RatePlanId,
        plan: RatePlan,
    },
    /// Replaces the whole list of taxes (an empty list: none).
    SetTaxes { taxes: Taxes },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HotelEvent {
    HotelDetailsSet {
        hotel_id: HotelId,
        details: HotelDetails,
    },
    RoomTypeSet {
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    },
    RatePlanSet {
        rate_plan_id: RatePlanId,
        plan: RatePlan,
    },
    TaxesSet {
        taxes: Taxes,
    },
}

/// Names and version: see [`crate::contract::events`].
impl DomainEvent for HotelEvent {
    fn event_type(&self) -> String {
        self.kind().as_str().to_owned()
    }

    fn event_version(&self) -> String {
        Self::VERSION.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum HotelError {
    #[error("no such hotel")]
    UnknownHotel,
    #[error("the hotel id does not match this hotel")]
    WrongHotel,
    #[error("the hotel has no room type {0}")]
    UnknownRoomType(RoomTypeId),
    #[error("{0}")]
    Pricing(PricingError),
    #[error("rate plan {parent} does not sell room type {room_type_id}, which plan {plan} derived from it sells")]
    ParentMissingRoomType {
        plan: RatePlanId,
        parent: RatePlanId,
        room_type_id: RoomTypeId,
    },
}

impl Hotel {
    pub fn hotel_id(&self) -> Option<HotelId> {
        self.hotel_id
    }

    pub fn details(&self) -> Option<&HotelDetails> {
        self.details.as_ref()
    }

    pub fn room_type(&self, id: RoomTypeId) -> Option<&RoomTypeDetails> {
        self.room_types.get(&id)
    }

    pub fn room_types(&self) -> &BTreeMap<RoomTypeId, RoomTypeDetails> {
        &self.room_types
    }

    pub fn rate_plan(&self, id: RatePlanId) -> Option<&RatePlan> {
        self.rate_plans.get(&id)
    }

    pub fn rate_plans(&self) -> &BTreeMap<RatePlanId, RatePlan> {
        &self.rate_plans
    }

    /// The taxes a stay sold now is charged.
    pub fn taxes(&self) -> &Taxes {
        &self.taxes
    }

    /// The currency the hotel prices in (the euro until its details are set).
    pub fn currency(&self) -> crate::types::Currency {
        self.details
            .as_ref()
            .map(HotelDetails::currency)
            .unwrap_or_default()
    }

    /// The plans that sell a room type, in id order.
    pub fn plans_selling(
        &self,
        room_type_id: RoomTypeId,
    ) -> impl Iterator<Item = (RatePlanId, &RatePlan)> {
        self.rate_plans
            .iter()
            .filter(move |(_, plan)| plan.sells(room_type_id))
            .map(|(id, plan)| (*id, plan))
    }

    /// A plan's price chain: the plan priced on its own at the root, and the
    /// adjustments from it down to `plan`. The catalog refuses plans that cannot be
    /// resolved, so an error here means `plan` is not one of the hotel's.
    pub fn price_chain(&self, plan: RatePlanId) -> Result<(RatePlanId, Adjustments), PricingError> {
        rate_plan::resolve(plan, |id| self.rate_plans.get(&id).map(RatePlan::pricing))
    }

    /// Every plan after `rate_plan_id` is set to `plan` can be priced, and sells only
    /// room types the hotel has and its parent sells.
    fn check_plan(&self, rate_plan_id: RatePlanId, plan: &RatePlan) -> Result<(), HotelError> {
        if let Some(missing) = plan
            .room_type_ids
            .iter()
            .find(|id| !self.room_types.contains_key(id))
        {
            return Err(HotelError::UnknownRoomType(*missing));
        }
        let mut after = self.rate_plans.clone();
        after.insert(rate_plan_id, plan.clone());
        let pricing_of = |id| after.get(&id).map(RatePlan::pricing);
        for (id, each) in &after {
            rate_plan::resolve(*id, pricing_of).map_err(HotelError::Pricing)?;
            if let Pricing::Derived { parent, .. } = each.pricing {
                let parent_plan = after
                    .get(&parent)
                    .ok_or(HotelError::Pricing(PricingError::UnknownParent(*id)))?;
                if let Some(room_type_id) = each
                    .room_type_ids
                    .iter()
                    .find(|rt| !parent_plan.sells(**rt))
                {
                    return Err(HotelError::ParentMissingRoomType {
                        plan: *id,
                        parent,
                        room_type_id: *room_type_id,
                    });
                }
            }
        }
        Ok(())
    }

    pub fn decide(&self, command: HotelCommand) -> Result<Vec<HotelEvent>, HotelError> {
        match command {
            HotelCommand::SetDetails { hotel_id, details } => {
                if self.hotel_id.is_some_and(|id| id != hotel_id) {
                    return Err(HotelError::WrongHotel);
                }
                if self.details.as_ref() == Some(&details) {
                    return Ok(Vec::new());
                }
                Ok(vec![HotelEvent::HotelDetailsSet { hotel_id, details }])
            }
            HotelCommand::SetRoomType {
                room_type_id,
                details,
            } => {
                if self.hotel_id.is_none() {
                    return Err(HotelError::UnknownHotel);
                }
                if self.room_types.get(&room_type_id) == Some(&details) {
                    return Ok(Vec::new());
                }
                Ok(vec![HotelEvent::RoomTypeSet {
                    room_type_id,
                    details,
                }])
            }
            HotelCommand::SetRatePlan { rate_plan_id, plan } => {
                if self.hotel_id.is_none() {
                    return Err(HotelError::UnknownHotel);
                }
                if self.rate_plans.get(&rate_plan_id) == Some(&plan) {
                    return Ok(Vec::new());
                }
                self.check_plan(rate_plan_id, &plan)?;
                Ok(vec![HotelEvent::RatePlanSet { rate_plan_id, plan }])
            }
            HotelCommand::SetTaxes { taxes } => {
                if self.hotel_id.is_none() {
                    return Err(HotelError::UnknownHotel);
                }
                if self.taxes == taxes {
                    return Ok(Vec::new());
                }
                Ok(vec![HotelEvent::TaxesSet { taxes }])
            }
        }
    }

    pub fn apply_event(&mut self, event: &HotelEvent) {
        match event {
            HotelEvent::HotelDetailsSet { hotel_id, details } => {
                self.hotel_id = Some(*hotel_id);
                self.details = Some(details.clone());
            }
            HotelEvent::RoomTypeSet {
                room_type_id,
                details,
            } => {
                self.room_types.insert(*room_type_id, details.clone());
            }
            HotelEvent::RatePlanSet { rate_plan_id, plan } => {
                self.rate_plans.insert(*rate_plan_id, plan.clone());
            }
            HotelEvent::TaxesSet { taxes } => {
                self.taxes = taxes.clone();
            }
        }
    }
}

impl Aggregate for Hotel {
    const TYPE: &'static str = AggregateType::Hotel.as_str();
    type Command = HotelCommand;
    type Event = HotelEvent;
    type Error = HotelError;
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
