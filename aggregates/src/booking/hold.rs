//! Holding a stay: every night of `[start, end)` or none, at the sum of the nights'
//! current prices under the chosen plan (see [`super::SaleTerms`]), if no restriction
//! in force on those nights forbids it.

use chrono::{DateTime, Utc};

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

/// Hold a stay: every night of `[start, end)` or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldStay {
    pub reservation_id: ReservationId,
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guest: Guest,
    pub channel: String,
    pub expected_total_cents: Option<Cents>,
    pub now: DateTime<Utc>,
    pub hold_expires_at: DateTime<Utc>,
    /// The plan to sell under; `None`: the base rate under the house policy.
    pub rate_plan_id: Option<RatePlanId>,
    pub guests: GuestCount,
}

pub fn hold_stay(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &Nights,
    limits: &BookingLimits,
    cmd: HoldStay,
) -> Result<Decision, Rejection> {
    let timezone = check_room_type(hotel, cmd.hotel_id, cmd.room_type_id)?;
    let terms = SaleTerms::resolve(hotel, cmd.room_type_id, cmd.rate_plan_id, cmd.guests)?;
    let today = local_date(cmd.now, timezone);
    limits.check(&cmd.stay, cmd.rooms, today)?;
    if reservation.details().is_some() {
        return Err(Rejection::ReservationExists);
    }
    terms.check_stay(nights, &cmd.stay, today, |_| false)?;
    let mut decision = Decision::default();
    let room_type = RoomType {
        hotel_id: cmd.hotel_id,
        room_type_id: cmd.room_type_id,
    };
    let hold = RoomNightCommand::Hold {
        reservation_id: cmd.reservation_id,
        rooms: cmd.rooms,
        expires_at: cmd.hold_expires_at,
        now: cmd.now,
    };
    decide_nights(
        &mut decision,
        room_type,
        nights,
        cmd.stay.nights(),
        |_, _| Ok(Some(hold.clone())),
    )?;
    let total_cents = terms
        .stay_price(nights, &cmd.stay, cmd.rooms)
        .ok_or(Rejection::SoldOut {
            night: cmd.stay.start(),
        })?;
    if cmd
        .expected_total_cents
        .is_some_and(|expected| expected != total_cents)
    {
        return Err(Rejection::PriceChanged { total_cents });
    }
    decision.reservation = reservation.decide(ReservationCommand::Place {
        details: ReservationDetails {
            reservation_id: cmd.reservation_id,
            hotel_id: cmd.hotel_id,
            room_type_id: cmd.room_type_id,
            stay: cmd.stay,
            rooms: cmd.rooms,
            guest: Personal::Clear(cmd.guest),
            channel: cmd.channel,
            total_cents,
            hold_expires_at: cmd.hold_expires_at,
            created_at: cmd.now,
            rate_plan_id: terms.rate_plan_id(),
            cancellation_policy: terms.cancellation_policy(),
            guests: terms.guests(),
            first_night_cents: terms.first_night_price(nights, &cmd.stay, cmd.rooms),
        },
    })?;
    Ok(decision)
}
