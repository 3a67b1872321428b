//! The bodies more than one resource speaks: the answers several handlers return (a
//! hotel with its room types and plans, a plan's cancellation policy, an offer, a
//! reservation and its money) and the request parts the OpenAPI schema describes by
//! hand (a bulk update's inventory and rates). Each is defined once, here, so handler
//! modules import it from below instead of from one another.

use aggregates::booking::Offer;
use aggregates::cancellation::CancellationPolicy;
use aggregates::hotel::Hotel;
use aggregates::rate_plan::Pricing;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;

#[derive(Debug, Serialize, ToSchema)]
pub struct RoomTypeOut {
    pub room_type_id: i64,
    pub name: String,
    pub max_occupancy: u32,
    /// Guests the rate covers.
    pub base_occupancy: u32,
    /// Added per night and room for each guest beyond `base_occupancy`.
    pub extra_guest_cents: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HotelOut {
    pub hotel_id: i64,
    pub name: String,
    pub city: String,
    pub timezone: String,
    /// ISO 4217 code; every amount of the hotel is an integer in its minor unit.
    #[schema(example = "EUR")]
    pub currency: String,
    pub room_types: Vec<RoomTypeOut>,
    pub rate_plans: Vec<RatePlanOut>,
}

impl HotelOut {
    pub(crate) fn of(hotel: &Hotel) -> Option<Self> {
        let details = hotel.details()?;
        Some(Self {
            hotel_id: hotel.hotel_id()?.get(),
            name: details.name().to_owned(),
            city: details.city().to_owned(),
            timezone: details.timezone().name().to_owned(),
            currency: details.currency().code().to_owned(),
            room_types: hotel
                .room_types()
                .iter()
                .map(|(id, rt)| RoomTypeOut {
                    room_type_id: id.get(),
                    name: rt.name().to_owned(),
                    max_occupancy: rt.max_occupancy(),
                    base_occupancy: rt.base_occupancy(),
                    extra_guest_cents: rt.extra_guest_cents().get(),
                })
                .collect(),
            rate_plans: hotel
                .rate_plans()
                .iter()
                .map(|(id, plan)| RatePlanOut::of(*id, plan))
                .collect(),
        })
    }
}

pub(crate) fn hotel_out(hotel: &Hotel) -> Result<Json<HotelOut>, ApiError> {
    HotelOut::of(hotel)
        .map(Json)
        .ok_or_else(|| ApiError::not_found("no such hotel"))
}

/// A cancellation policy as clients see it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyOut {
    /// `false`: a guest's cancellation refunds nothing.
    pub refundable: bool,
    /// All of the payment back at this many hours or more before check-in (15:00 local
    /// time on the arrival date).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_refund_hours: Option<u32>,
    /// `partial_refund_percent` back at this many hours or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_refund_hours: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_refund_percent: Option<u8>,
}

impl From<CancellationPolicy> for PolicyOut {
    fn from(policy: CancellationPolicy) -> Self {
        match policy {
            CancellationPolicy::NonRefundable => Self {
                refundable: false,
                full_refund_hours: None,
                partial_refund_hours: None,
                partial_refund_percent: None,
            },
            CancellationPolicy::Refundable {
                full_refund_hours,
                partial_refund_hours,
                partial_refund_percent,
            } => Self {
                refundable: true,
                full_refund_hours: Some(full_refund_hours),
                partial_refund_hours: Some(partial_refund_hours),
                partial_refund_percent: Some(partial_refund_percent),
            },
        }
    }
}

/// A rate plan as clients see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RatePlanOut {
    pub rate_plan_id: i64,
    pub name: String,
    pub room_type_ids: Vec<i64>,
    pub cancellation_policy: PolicyOut,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<DerivedFromOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DerivedFromOut {
    pub rate_plan_id: i64,
    pub adjust_percent: i32,
}

impl RatePlanOut {
    pub fn of(id: aggregates::RatePlanId, plan: &aggregates::RatePlan) -> Self {
        Self {
            rate_plan_id: id.get(),
            name: plan.name().to_owned(),
            room_type_ids: plan.room_type_ids().iter().map(|r| r.get()).collect(),
            cancellation_policy: plan.cancellation_policy().into(),
            derived_from: match plan.pricing() {
                Pricing::Own => None,
                Pricing::Derived {
                    parent,
                    adjust_percent,
                } => Some(DerivedFromOut {
                    rate_plan_id: parent.get(),
                    adjust_percent,
                }),
            },
        }
    }
}

/// Inventory in a bulk update: as `PUT .../inventory` takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AriInventory {
    /// Omitted: each night keeps its rooms (a rate-only change); a night without
    /// inventory yet needs them.
    #[schema(example = 100, minimum = 0, maximum = 1_000_000)]
    pub total_rooms: Option<i64>,
    #[schema(minimum = 0, maximum = 1_000_000)]
    pub overbooking_allowance: Option<i64>,
    #[schema(example = 18000, minimum = 0, maximum = 10_000_000_000_i64)]
    pub rate_cents: Option<i64>,
}

/// A plan's own rate in a bulk update.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AriRate {
    #[schema(minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub rate_plan_id: i64,
    #[schema(example = 15000, minimum = 0, maximum = 10_000_000_000_i64)]
    pub rate_cents: i64,
}

/// A room type that can be booked for the whole stay under a plan.
#[derive(Debug, Serialize, ToSchema)]
pub struct OfferOut {
    pub room_type_id: i64,
    /// `null`: the base rate, for a room type no plan sells (house policy).
    pub rate_plan_id: Option<i64>,
    /// The price of the stay for the rooms and guests asked.
    pub total_cents: i64,
    /// The fewest rooms left on any night of the stay.
    pub remaining: u32,
    /// `false`: a guest's cancellation refunds nothing.
    pub refundable: bool,
    /// ISO 4217 code of the hotel's prices: amounts are integers in its minor unit.
    #[schema(example = "EUR")]
    pub currency: String,
    /// The hotel's taxes and fees on this stay (empty: none).
    pub taxes: Vec<crate::taxes::TaxOut>,
    /// What the guest would owe: `total_cents` and every tax not `included`.
    pub total_due_cents: i64,
}

impl From<&Offer> for OfferOut {
    fn from(offer: &Offer) -> Self {
        Self {
            room_type_id: offer.room_type_id.get(),
            rate_plan_id: offer.rate_plan_id.map(|p| p.get()),
            total_cents: offer.total_cents.get(),
            remaining: offer.remaining,
            refundable: offer.refundable,
            currency: offer.currency.code().to_owned(),
            taxes: crate::taxes::tax_lines(&offer.taxes),
            total_due_cents: offer.total_due_cents.get(),
        }
    }
}

/// A reservation as of now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReservationOut {
    pub reservation_id: uuid::Uuid,
    /// The short reference a guest reads out: 8 characters of Crockford's base 32 (0-9
    /// and A-Z without I, L, O, U), unique, the same in every answer, e-mail and webhook;
    /// `GET /v1/reservations?reference=` finds the reservation by it.
    #[schema(example = "K7M29QXD", pattern = "^[0-9A-HJKMNP-TV-Z]{8}$")]
    pub reference: String,
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub nights: u32,
    pub rooms: u32,
    pub guest: GuestOut,
    pub channel: String,
    /// The room price of the stay, every room and night (taxes included in the price
    /// are in it; see `taxes`).
    pub total_cents: i64,
    /// ISO 4217 code: every amount of the reservation is an integer in its minor unit
    /// (whole yen for JPY). The hotel's currency when the stay was sold.
    #[schema(example = "EUR")]
    pub currency: String,
    /// The stay's taxes and fees as it was sold (later changes to the hotel's taxes do
    /// not reach it); empty when the hotel had none.
    pub taxes: Vec<crate::taxes::TaxOut>,
    /// What the guest owes: `total_cents` and every tax not `included`. Confirming
    /// authorizes it.
    pub total_due_cents: i64,
    /// The group block the stay was booked from (at its rate); absent: general sale.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "ACME")]
    pub block_code: Option<String>,
    /// `held`, `confirmed`, `cancelled`, `expired`, `declined`, `checked_in`,
    /// `checked_out` or `no_show`.
    #[schema(example = "held")]
    pub status: String,
    pub hold_expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What the guest has paid: taken from the card and not given back
    /// (`payment.captured_cents - payment.refunded_cents`); 0 while the card is only
    /// authorized. Not in the read-side look-up (`GET /v1/reservations?...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paid_cents: Option<i64>,
    /// Present on a cancelled reservation: the money the cancellation returned to the
    /// guest's card, out of what had been captured, by the `cancellation_policy` it was
    /// sold under (all of it when the hotel cancels). 0 when it came before the
    /// capture: the authorization was voided (or only the kept share captured), and
    /// nothing taken was given back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_cents: Option<i64>,
    /// The rate plan it was sold under; `null`: the base rate.
    pub rate_plan_id: Option<i64>,
    /// The policy as it was when the stay was sold; later changes to the plan do not
    /// change it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancellation_policy: Option<PolicyOut>,
    /// Guests per room.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guests: Option<u32>,
    /// Where the money stands: confirming authorizes the total, the capture comes at
    /// the policy's full-refund deadline (at once if past or non-refundable, or at
    /// check-in), a cancellation before it voids, after it refunds.
    pub payment: PaymentOut,
    /// The room types of the stay, a line each, with its rooms, guests per room, plan
    /// and price; `total_cents` is their sum. A stay of one room type has one line.
    pub lines: Vec<LineOut>,
}

/// One room type of a reservation.
#[derive(Debug, Serialize, ToSchema)]
pub struct LineOut {
    pub room_type_id: i64,
    pub rooms: u32,
    /// Guests per room.
    pub guests: u32,
    /// `null`: the base rate.
    pub rate_plan_id: Option<i64>,
    /// The line's policy as sold: a cancellation refunds each line by its own.
    pub cancellation_policy: PolicyOut,
    /// The line's price over the stay, every room and night.
    pub total_cents: i64,
}

impl From<&store::view::LineView> for LineOut {
    fn from(line: &store::view::LineView) -> Self {
        Self {
            room_type_id: line.room_type_id,
            rooms: line.rooms,
            guests: line.guests,
            rate_plan_id: line.rate_plan_id,
            cancellation_policy: line.cancellation_policy.into(),
            total_cents: line.total_cents.get(),
        }
    }
}

/// A reservation's money.
#[derive(Debug, Serialize, ToSchema)]
pub struct PaymentOut {
    /// `none`, `authorized`, `captured`, `voided`, `refunded` or `partially_refunded`.
    #[schema(example = "authorized")]
    pub status: String,
    /// Every authorization granted on the card, added up (the first and any increase a
    /// dearer move asked for). A cheaper move does not lower it: see `to_capture_cents`.
    pub authorized_cents: i64,
    /// What the capture still to come will take (the stay's current price, as far as
    /// the authorization covers it), while the card is authorized and nothing is
    /// captured; the rest of the authorization is released then. 0 otherwise.
    pub to_capture_cents: i64,
    /// Taken from the card, added up.
    pub captured_cents: i64,
    /// Given back of what was taken, added up.
    pub refunded_cents: i64,
}

impl From<store::view::PaymentView> for PaymentOut {
    fn from(p: store::view::PaymentView) -> Self {
        Self {
            status: p.status.as_str().to_owned(),
            authorized_cents: p.authorized_cents.get(),
            to_capture_cents: p.to_capture_cents.get(),
            captured_cents: p.captured_cents.get(),
            refunded_cents: p.refunded_cents.get(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GuestOut {
    pub name: String,
    pub email: String,
}
