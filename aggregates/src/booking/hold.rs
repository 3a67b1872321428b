//! Holding a stay: every night of `[start, end)` or none, at the sum of the nights'
//! current prices under the chosen plan (see [`super::SaleTerms`]), if no restriction
//! in force on those nights forbids it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::nights::{decide_nights, RoomType};
use super::{check_room_type, Decision, Nights, Rejection, SaleTerms};
use crate::hotel::Hotel;
use crate::personal::Personal;
use crate::reservation::{Reservation, ReservationCommand, ReservationDetails};
use crate::room_night::RoomNightCommand;
use crate::types::{
    local_date, BookingLimits, Cents, Guest, GuestCount, HotelId, RatePlanId, ReservationId,
    RoomCount, RoomTypeId, StayDates,
};

/// What a client asks to hold, each field parsed once where the request enters (the
/// HTTP body's shape is the API's; this is the one shape from there to the decision).
/// The price is the server's: `expected_total_cents` only guards against the client
/// showing a stale one.
///
/// Serialized as the request's fingerprint in its idempotency record, so the
/// serialization is stored: a field that is absent or at its default is left out, and a
/// request that does not name plans or guests fingerprints as it did before they
/// existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HoldRequest {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guest: Guest,
    pub expected_total_cents: Option<Cents>,
    /// The plan to sell under; `None`: the base rate under the house policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_plan_id: Option<RatePlanId>,
    #[serde(skip_serializing_if = "GuestCount::is_one")]
    pub guests: GuestCount,
}

/// Hold a stay: every night of `[start, end)` or none. The request as the client made
/// it, and what the server adds: the reservation's id, the channel, the time and how
/// long the hold lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldStay {
    pub request: HoldRequest,
    pub reservation_id: ReservationId,
    pub channel: String,
    pub now: DateTime<Utc>,
    pub hold_expires_at: DateTime<Utc>,
}

pub fn hold_stay(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &Nights,
    limits: &BookingLimits,
    cmd: HoldStay,
) -> Result<Decision, Rejection> {
    let HoldStay {
        request,
        reservation_id,
        channel,
        now,
        hold_expires_at,
    } = cmd;
    let timezone = check_room_type(hotel, request.hotel_id, request.room_type_id)?;
    let terms = SaleTerms::resolve(
        hotel,
        request.room_type_id,
        request.rate_plan_id,
        request.guests,
    )?;
    let today = local_date(now, timezone);
    limits.check(&request.stay, request.rooms, today)?;
    if reservation.details().is_some() {
        return Err(Rejection::ReservationExists);
    }
    terms.check_stay(nights, &request.stay, today, |_| false)?;
    let mut decision = Decision::default();
    let room_type = RoomType {
        hotel_id: request.hotel_id,
        room_type_id: request.room_type_id,
    };
    let hold = RoomNightCommand::Hold {
        reservation_id,
        rooms: request.rooms,
        expires_at: hold_expires_at,
        now,
    };
    decide_nights(
        &mut decision,
        room_type,
        nights,
        request.stay.nights(),
        |_, _| Ok(Some(hold.clone())),
    )?;
    let total_cents = terms
        .stay_price(nights, &request.stay, request.rooms)
        .ok_or(Rejection::SoldOut {
            night: request.stay.start(),
        })?;
    if request
        .expected_total_cents
        .is_some_and(|expected| expected != total_cents)
    {
        return Err(Rejection::PriceChanged { total_cents });
    }
    decision.reservation = reservation.decide(ReservationCommand::Place {
        details: ReservationDetails {
            reservation_id,
            hotel_id: request.hotel_id,
            room_type_id: request.room_type_id,
            stay: request.stay,
            rooms: request.rooms,
            guest: Personal::Clear(request.guest),
            channel,
            total_cents,
            hold_expires_at,
            created_at: now,
            rate_plan_id: terms.rate_plan_id(),
            cancellation_policy: terms.cancellation_policy(),
            guests: terms.guests(),
            first_night_cents: terms.first_night_price(nights, &request.stay, request.rooms),
            currency: hotel.currency(),
            taxes: hotel.taxes().clone(),
        },
    })?;
    Ok(decision)
}
