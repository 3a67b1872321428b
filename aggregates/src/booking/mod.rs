//! Decisions that span aggregates: a stay touches one `Reservation` and one `RoomNight`
//! per night, and must change all of them or none.
//!
//! Each function here is pure: it takes the loaded aggregates and a command (time, ids and
//! limits included) and returns the events for every stream, or one rejection. The write
//! side only loads state before and appends the result after, in one transaction, so every
//! business rule can be tested without a database.
//!
//! One file per group of decisions — `hold.rs` (hold a stay), `cancel.rs` (cancel it,
//! and the refund policy), `check_in.rs` (the guest arrives, and leaves), `confirm.rs` (confirm it with or without a payment, or
//! decline it), `expire.rs` (a lapsed hold), `change_dates.rs`, `inventory.rs` (over a
//! range), what a stay can be sold as (`offers.rs`, the offers a search lists) — and
//! one walk over a stay's nights that they all share (`nights.rs`): each
//! night decided in night order with the command the decision chooses for it, the first
//! refusal refusing the whole decision. Written once, so a rule of the walk (absent
//! nights have no inventory, nights without events are left out of the decision) holds
//! for every decision alike. The given/when/then tests are in `tests/`, one file per
//! group.

mod ari;
mod block;
mod cancel;
mod change_dates;
mod check_in;
mod confirm;
mod erase;
mod expire;
mod hold;
mod horizon;
mod inventory;
mod nights;
mod offers;
mod terms;

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::hotel::{Hotel, HotelError};
use crate::rate_plan::PricingError;
use crate::reservation::{
    Reservation, ReservationDetails, ReservationError, ReservationEvent, ReservationStatus,
};
use crate::restrictions::{Restricted, Restriction};
use crate::room_night::{RoomNight, RoomNightEvent, RoomNightKey};
use crate::types::{Cents, HotelId, InvalidInput, RatePlanId, RoomTypeId, TimeZone};

pub use ari::{update_ari, AriChange, AriDecision, AriUpdate, UpdateAri};
pub use block::{block_release_at, release_block, set_block, BlockDecision, SetBlock};
pub use cancel::{cancel, check_in_instant, refund_cents, CHECK_IN_HOUR};
pub use change_dates::{
    change_dates, hold_date_change, release_date_change, ChangeDates, GrantedIncrement,
};
pub use check_in::{check_in, check_out, record_lapsed_no_show, record_no_show};
pub use confirm::{
    apply_authorization, capture_payment, confirm, decline_payment, record_increment,
};
pub use erase::erase_guest;
pub use expire::expire_hold;
pub use hold::{hold_stay, HoldRequest, HoldStay, LineRequest};
pub use horizon::{missing_range, roll_forward, TEMPLATE_NIGHTS};
pub use inventory::{set_inventory, InventoryUpdate, SetInventory};
pub use offers::{offers, selling_plans, NightView, Offer, OfferRequest};
pub use terms::SaleTerms;

/// The loaded nights of one hotel and room type, by date. A night that is absent has no
/// inventory (nothing for sale).
pub type Nights = BTreeMap<NaiveDate, RoomNight>;

/// The loaded nights of each room type a decision touches: a reservation's lines, one
/// room type each (borrowed, so a batch deciding one hold after another lends its
/// working nights without copying them). A room type not given has no nights loaded,
/// which reads as no inventory.
#[derive(Debug, Clone, Default)]
pub struct StayNights<'a> {
    /// The first room type's, kept inline: a stay of one room type (nearly every hold)
    /// allocates nothing.
    first: Option<(RoomTypeId, &'a Nights)>,
    more: Vec<(RoomTypeId, &'a Nights)>,
}

impl<'a> StayNights<'a> {
    /// The nights of a stay of one room type.
    pub fn one(room_type_id: RoomTypeId, nights: &'a Nights) -> Self {
        Self {
            first: Some((room_type_id, nights)),
            more: Vec::new(),
        }
    }

    /// Adds (or replaces) a room type's nights.
    pub fn add(&mut self, room_type_id: RoomTypeId, nights: &'a Nights) {
        match self.first {
            None => self.first = Some((room_type_id, nights)),
            Some((id, _)) if id == room_type_id => self.first = Some((room_type_id, nights)),
            Some(_) => {
                self.more.retain(|(id, _)| *id != room_type_id);
                self.more.push((room_type_id, nights));
            }
        }
    }

    /// A room type's nights (none if they were not loaded).
    pub fn of(&self, room_type_id: RoomTypeId) -> &'a Nights {
        static NONE: Nights = BTreeMap::new();
        self.first
            .iter()
            .chain(self.more.iter())
            .find(|(id, _)| *id == room_type_id)
            .map_or(&NONE, |(_, nights)| *nights)
    }
}

/// What a command decided: the events for the reservation stream and for each night
/// stream that changes (line by line, each in night order; nights with no event are
/// left out).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub reservation: Vec<ReservationEvent>,
    pub nights: Vec<(RoomNightKey, Vec<RoomNightEvent>)>,
}

impl Decision {
    pub fn is_empty(&self) -> bool {
        self.reservation.is_empty() && self.nights.is_empty()
    }
}

/// Why a command was refused. Nothing is written for any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum Rejection {
    #[error("sold out on {night}")]
    SoldOut { night: NaiveDate },
    #[error("the price of the stay is now {total_cents} cents")]
    PriceChanged { total_cents: Cents },
    #[error("unknown hotel")]
    UnknownHotel,
    #[error("unknown room type")]
    UnknownRoomType,
    #[error("no such reservation")]
    ReservationNotFound,
    #[error("a reservation with this id already exists")]
    ReservationExists,
    #[error("the reservation is {}", status.as_str())]
    InvalidState { status: ReservationStatus },
    #[error("the hold lapsed at {expired_at}")]
    HoldExpired { expired_at: DateTime<Utc> },
    #[error("the hold has not lapsed yet")]
    HoldStillLive,
    #[error("the arrival date {arrival} has ended at the hotel")]
    ArrivalEnded { arrival: NaiveDate },
    #[error("the stay begins on {arrival}")]
    TooEarly { arrival: NaiveDate },
    #[error("the stay ended on {departure}")]
    StayEnded { departure: NaiveDate },
    /// The new price needs `shortfall_cents` more on the card. The date-change saga
    /// asks the gateway for it; a client sees it only as `payment_declined` when the
    /// gateway refuses.
    #[error("the new price needs {shortfall_cents} more cents authorized")]
    PaymentRequired { shortfall_cents: Cents },
    #[error("inventory on {night} cannot go below the {reserved} room(s) already held, sold or set aside for blocks")]
    InventoryBelowReserved { night: NaiveDate, reserved: u32 },
    #[error("the stay breaks {} on {night}", .restriction.as_str())]
    Restricted {
        restriction: Restriction,
        night: NaiveDate,
    },
    #[error("the hotel has no such rate plan for this room type")]
    UnknownRatePlan,
    /// An update of a plan's nights names a room type the plan does not sell (or a plan
    /// the hotel does not have): named, so staff setting a rate over several room types
    /// see which one refused it.
    #[error("rate plan {rate_plan_id} does not sell room type {room_type_id} (or does not exist)")]
    PlanDoesNotSell {
        rate_plan_id: RatePlanId,
        room_type_id: RoomTypeId,
    },
    #[error("the room sleeps at most {max_occupancy} guest(s)")]
    OccupancyExceeded { max_occupancy: u32 },
    #[error("a derived rate plan is priced from its parent and has no rates of its own")]
    DerivedRatePlan,
    #[error("{night} has no inventory: no rooms were ever put on sale that night")]
    NoInventory { night: NaiveDate },
    #[error("rate plan {rate_plan_id} would derive from itself through its parents")]
    RatePlanCycle {
        rate_plan_id: crate::types::RatePlanId,
    },
    /// A hotel's currency cannot change while a stay priced in the old one is live:
    /// its amounts would change meaning.
    #[error("the hotel has reservations in {currency} not yet checked out (such as {reservation_id}); its currency can change once they have ended")]
    CurrencyInUse {
        currency: crate::types::Currency,
        reservation_id: crate::types::ReservationId,
    },
    /// A booking from a group block asked for more rooms than the block has left.
    #[error("the block has {remaining} room(s) left on {night}")]
    BlockExhausted { night: NaiveDate, remaining: u32 },
    /// The block gave its unpicked rooms back to general sale (at its release date, or
    /// when staff released it): nothing more is booked from it.
    #[error("the block was released (its rooms went back to general sale) on {night}")]
    BlockReleased { night: NaiveDate },
    /// A block cannot shrink (or leave a night) below the rooms its bookings took.
    #[error("the block's bookings have taken {picked_up} room(s) on {night}")]
    BelowPickup { night: NaiveDate, picked_up: u32 },
    #[error("no such block")]
    BlockNotFound,
    /// A block's code names it for good: once released it cannot be set up again.
    #[error("the block was released; set up another code")]
    BlockWasReleased,
    /// A booking from a block is priced and counted on the block's nights.
    #[error("a booking from a block keeps its dates: cancel it and book again from the block")]
    BlockDatesFixed,
    /// An open group block's rate is in the hotel's currency: it changes once the block
    /// is released.
    #[error("the hotel's block {code} is priced in {currency}; its currency can change once the block is released")]
    BlockInCurrency {
        currency: crate::types::Currency,
        code: crate::types::BlockCode,
    },
    #[error("{0}")]
    Invalid(InvalidInputRejection),
    /// A reservation of several room types was refused by one of its lines (`line`
    /// counts from 0, in the request's order): the cause names the night or the rule.
    /// A reservation of one room type is refused with the cause alone.
    #[error("lines[{line}] (room type {room_type_id}): {cause}")]
    InLine {
        line: usize,
        room_type_id: RoomTypeId,
        cause: Box<Rejection>,
    },
}

impl Rejection {
    /// This rejection as line `line` of a reservation of `lines` lines refuses it:
    /// named by its line when there are several, as it is when there is one.
    pub fn in_line(self, line: usize, room_type_id: RoomTypeId, lines: usize) -> Self {
        if lines <= 1 {
            return self;
        }
        if let Rejection::Invalid(InvalidInputRejection { field, message }) = self {
            return Rejection::Invalid(InvalidInputRejection {
                field: format!("lines[{line}].{field}"),
                message,
            });
        }
        Rejection::InLine {
            line,
            room_type_id,
            cause: Box::new(self),
        }
    }
}

/// `InvalidInput` in a serializable form, so rejections can be stored as the outcome of
/// an idempotent request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{field}: {message}")]
pub struct InvalidInputRejection {
    pub field: String,
    pub message: String,
}

impl From<InvalidInput> for Rejection {
    fn from(e: InvalidInput) -> Self {
        Rejection::Invalid(InvalidInputRejection {
            field: e.field.to_owned(),
            message: e.message,
        })
    }
}

impl From<Restricted> for Rejection {
    fn from(e: Restricted) -> Self {
        Rejection::Restricted {
            restriction: e.restriction,
            night: e.night,
        }
    }
}

impl From<HotelError> for Rejection {
    fn from(e: HotelError) -> Self {
        match e {
            HotelError::UnknownHotel | HotelError::WrongHotel => Rejection::UnknownHotel,
            HotelError::UnknownRoomType(_) => Rejection::UnknownRoomType,
            HotelError::Pricing(PricingError::Cycle(rate_plan_id)) => {
                Rejection::RatePlanCycle { rate_plan_id }
            }
            HotelError::Pricing(PricingError::UnknownParent(_) | PricingError::UnknownPlan(_)) => {
                Rejection::UnknownRatePlan
            }
            HotelError::ParentMissingRoomType { .. } => {
                InvalidInput::new("derived_from.rate_plan_id", e.to_string()).into()
            }
        }
    }
}

impl From<ReservationError> for Rejection {
    fn from(e: ReservationError) -> Self {
        match e {
            ReservationError::NotFound => Rejection::ReservationNotFound,
            ReservationError::AlreadyExists => Rejection::ReservationExists,
            ReservationError::InvalidState { status } => Rejection::InvalidState { status },
            ReservationError::HoldExpired { expired_at } => Rejection::HoldExpired { expired_at },
            ReservationError::HoldStillLive => Rejection::HoldStillLive,
            ReservationError::ArrivalEnded { arrival } => Rejection::ArrivalEnded { arrival },
            ReservationError::TooEarly { arrival } => Rejection::TooEarly { arrival },
            ReservationError::StayEnded { departure } => Rejection::StayEnded { departure },
            ReservationError::PaymentRequired { shortfall } => Rejection::PaymentRequired {
                shortfall_cents: shortfall,
            },
            ReservationError::SameDates => InvalidInput::new(
                "end_date",
                "the new dates are the reservation's current dates",
            )
            .into(),
        }
    }
}

fn check_room_type(
    hotel: &Hotel,
    hotel_id: HotelId,
    room_type_id: RoomTypeId,
) -> Result<TimeZone, Rejection> {
    let details = match (hotel.hotel_id(), hotel.details()) {
        (Some(id), Some(details)) if id == hotel_id => details,
        _ => return Err(Rejection::UnknownHotel),
    };
    if hotel.room_type(room_type_id).is_none() {
        return Err(Rejection::UnknownRoomType);
    }
    Ok(details.timezone())
}

fn existing(reservation: &Reservation) -> Result<&ReservationDetails, Rejection> {
    reservation.details().ok_or(Rejection::ReservationNotFound)
}

#[cfg(test)]
mod tests;
