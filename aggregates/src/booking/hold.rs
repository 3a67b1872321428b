//! Holding a stay: every night of `[start, end)` or none, at the sum of the nights'
//! current prices under the chosen plan (see [`super::SaleTerms`]), if no restriction
//! in force on those nights forbids it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::nights::{decide_nights, RoomType};
use super::{check_room_type, Decision, Rejection, SaleTerms, StayNights};
use crate::hotel::Hotel;
use crate::personal::Personal;
use crate::reservation::{Line, Reservation, ReservationCommand, ReservationDetails};
use crate::room_night::RoomNightCommand;
use crate::types::{
    local_date, BlockCode, BookingLimits, Cents, Guest, GuestCount, HotelId, InvalidInput,
    RatePlanId, ReservationId, RoomCount, RoomTypeId, StayDates,
};

/// What a client asks to hold, each field parsed once where the request enters (the
/// HTTP body's shape is the API's; this is the one shape from there to the decision).
/// The price is the server's: `expected_total_cents` only guards against the client
/// showing a stale one.
///
/// The first line (room type, rooms, plan, guests) is in the request's own fields;
/// `more_lines` are the other room types of the same stay, each a different room type.
///
/// Serialized as the request's fingerprint in its idempotency record, so the
/// serialization is stored: a field that is absent or at its default is left out, and a
/// request that does not name plans, guests or more lines fingerprints as it did before
/// they existed.
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub more_lines: Vec<LineRequest>,
    /// The group block to book from (its rooms, at its rate), instead of general sale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_code: Option<BlockCode>,
}

/// One room type of a request for several: its rooms, guests per room and plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LineRequest {
    pub room_type_id: RoomTypeId,
    pub rooms: RoomCount,
    #[serde(skip_serializing_if = "GuestCount::is_one")]
    pub guests: GuestCount,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_plan_id: Option<RatePlanId>,
}

impl HoldRequest {
    /// Every line, the first one first.
    pub fn lines(&self) -> impl Iterator<Item = LineRequest> + '_ {
        std::iter::once(LineRequest {
            room_type_id: self.room_type_id,
            rooms: self.rooms,
            guests: self.guests,
            rate_plan_id: self.rate_plan_id,
        })
        .chain(self.more_lines.iter().copied())
    }
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

/// What one line of a hold was sold as.
struct SoldLine {
    line: LineRequest,
    terms: SaleTerms,
    total_cents: Cents,
    first_night_cents: Option<Cents>,
}

pub fn hold_stay(
    hotel: &Hotel,
    reservation: &Reservation,
    nights: &StayNights<'_>,
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
    let count = 1 + request.more_lines.len();
    // The hotel and the stay's dates are the whole request's; the rest is each line's.
    let timezone = match (hotel.hotel_id(), hotel.details()) {
        (Some(id), Some(details)) if id == request.hotel_id => details.timezone(),
        _ => return Err(Rejection::UnknownHotel),
    };
    let mut sold: Vec<SoldLine> = Vec::with_capacity(count);
    for (i, line) in request.lines().enumerate() {
        let named = |e: Rejection| e.in_line(i, line.room_type_id, count);
        // One line per room type: a night's allocation is one per reservation.
        if sold
            .iter()
            .any(|s| s.line.room_type_id == line.room_type_id)
        {
            let repeated = InvalidInput::new("room_type_id", "a room type appears in one line");
            return Err(named(repeated.into()));
        }
        check_room_type(hotel, request.hotel_id, line.room_type_id).map_err(named)?;
        if request.block_code.is_some() && line.rate_plan_id.is_some() {
            let priced = InvalidInput::new(
                "rate_plan_id",
                "a booking from a block is priced at the block's rate: leave the plan out",
            );
            return Err(named(priced.into()));
        }
        let terms = SaleTerms::resolve(hotel, line.room_type_id, line.rate_plan_id, line.guests)
            .map_err(named)?;
        sold.push(SoldLine {
            line,
            terms,
            total_cents: Cents::ZERO,
            first_night_cents: None,
        });
    }
    let today = local_date(now, timezone);
    // The limit on rooms is each line's (as it is a single room type's): checked with
    // the largest.
    let widest = request
        .lines()
        .map(|l| l.rooms)
        .max_by_key(|r| r.get())
        .unwrap_or(request.rooms);
    limits.check(&request.stay, widest, today)?;
    if reservation.details().is_some() {
        return Err(Rejection::ReservationExists);
    }
    let mut decision = Decision::default();
    for (i, sold) in sold.iter_mut().enumerate() {
        let line = sold.line;
        let named = |e: Rejection| e.in_line(i, line.room_type_id, count);
        let line_nights = nights.of(line.room_type_id);
        // A block's rooms are sold on the block's contract: the restrictions of general
        // sale (minimum stays, closed to arrival, stop-sell) do not bind them.
        if request.block_code.is_none() {
            sold.terms
                .check_stay(line_nights, &request.stay, today, |_| false)
                .map_err(|e| named(e.into()))?;
        }
        let room_type = RoomType {
            hotel_id: request.hotel_id,
            room_type_id: line.room_type_id,
        };
        let hold = match request.block_code {
            None => RoomNightCommand::Hold {
                reservation_id,
                rooms: line.rooms,
                expires_at: hold_expires_at,
                now,
            },
            Some(code) => RoomNightCommand::HoldFromBlock {
                reservation_id,
                code,
                rooms: line.rooms,
                expires_at: hold_expires_at,
                now,
            },
        };
        decide_nights(
            &mut decision,
            room_type,
            line_nights,
            request.stay.nights(),
            |_, _| Ok(Some(hold.clone())),
        )
        .map_err(named)?;
        let (total, first_night) = match request.block_code {
            None => (
                sold.terms
                    .stay_price(line_nights, &request.stay, line.rooms),
                sold.terms
                    .first_night_price(line_nights, &request.stay, line.rooms),
            ),
            Some(code) => block_price(line_nights, &request.stay, line.rooms, code),
        };
        sold.total_cents = total.ok_or_else(|| {
            named(Rejection::SoldOut {
                night: request.stay.start(),
            })
        })?;
        sold.first_night_cents = first_night;
    }
    let total_cents = Cents::new(sold.iter().map(|s| s.total_cents.get()).sum());
    if request
        .expected_total_cents
        .is_some_and(|expected| expected != total_cents)
    {
        return Err(Rejection::PriceChanged { total_cents });
    }
    let first_night_cents = sold
        .iter()
        .map(|s| s.first_night_cents.map(Cents::get))
        .sum::<Option<i64>>()
        .map(Cents::new);
    let Some((first, more)) = sold.split_first() else {
        return Err(Rejection::UnknownRoomType);
    };
    let more_lines = more
        .iter()
        .map(|s| Line {
            room_type_id: s.line.room_type_id,
            rooms: s.line.rooms,
            guests: s.terms.guests(),
            rate_plan_id: s.terms.rate_plan_id(),
            cancellation_policy: s.terms.cancellation_policy(),
            total_cents: s.total_cents,
            first_night_cents: s.first_night_cents.unwrap_or(Cents::ZERO),
        })
        .collect();
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
            rate_plan_id: first.terms.rate_plan_id(),
            cancellation_policy: first.terms.cancellation_policy(),
            guests: first.terms.guests(),
            first_night_cents,
            currency: hotel.currency(),
            taxes: hotel.taxes().clone(),
            more_lines,
            block_code: request.block_code,
        },
    })?;
    Ok(decision)
}

/// A stay's price from a block (every night at the block's rate on it, for `rooms`),
/// and its first night's; `None` where a night has no such block (which the nights'
/// decision refused already).
fn block_price(
    nights: &super::Nights,
    stay: &StayDates,
    rooms: RoomCount,
    code: BlockCode,
) -> (Option<Cents>, Option<Cents>) {
    let rate = |date| Some(nights.get(&date)?.block(&code)?.rate_cents);
    let per_room = stay
        .nights()
        .try_fold(Cents::ZERO, |total, date| total.checked_add(rate(date)?));
    let total = per_room.and_then(|p| p.checked_mul(rooms.get()));
    let first = rate(stay.start()).and_then(|r| r.checked_mul(rooms.get()));
    (total, first)
}
