//! The walk over a stay's nights that every decision shares: each night, in night
//! order, is decided with the command the caller chooses for it, its events added to
//! the decision; the first night that refuses refuses the whole decision.

use chrono::{DateTime, NaiveDate, Utc};

use super::{Decision, Nights, Rejection, StayNights};
use crate::reservation::{Line, ReservationDetails};
use crate::room_night::{
    RoomNight, RoomNightCommand, RoomNightError, RoomNightEvent, RoomNightKey,
};
use crate::types::{HotelId, RoomTypeId};

/// The room type whose nights a decision walks.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoomType {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
}

impl RoomType {
    /// Every room type a reservation stays in (one per line), the first line's first.
    pub fn all_of(details: &ReservationDetails) -> impl Iterator<Item = Self> + '_ {
        details.room_types().map(|room_type_id| Self {
            hotel_id: details.hotel_id,
            room_type_id,
        })
    }
}

/// Decides each of `dates` (in night order) on its loaded night — an absent night has
/// no inventory — with the command `command_for` chooses for it (`None` leaves the
/// night alone), and adds the nights that change to `decision`.
pub(super) fn decide_nights(
    decision: &mut Decision,
    room_type: RoomType,
    nights: &Nights,
    dates: impl IntoIterator<Item = NaiveDate>,
    mut command_for: impl FnMut(NaiveDate, &RoomNight) -> Result<Option<RoomNightCommand>, Rejection>,
) -> Result<(), Rejection> {
    let empty = RoomNight::default();
    for date in dates {
        let night = nights.get(&date).unwrap_or(&empty);
        let Some(command) = command_for(date, night)? else {
            continue;
        };
        let events = decide_night(night, date, command)?;
        if !events.is_empty() {
            let key = RoomNightKey::new(room_type.hotel_id, room_type.room_type_id, date);
            decision.nights.push((key, events));
        }
    }
    Ok(())
}

/// Runs one night's command, mapping "no room left" to `sold_out` and "never put on
/// sale" to `no_inventory`, each naming that night: a night with no inventory was never
/// sold out, and a client told so would look for rooms that were never there.
fn decide_night(
    night: &RoomNight,
    date: NaiveDate,
    command: RoomNightCommand,
) -> Result<Vec<RoomNightEvent>, Rejection> {
    night.decide(command).map_err(|e| match e {
        RoomNightError::SoldOut { .. } => Rejection::SoldOut { night: date },
        RoomNightError::NotForSale => Rejection::NoInventory { night: date },
        RoomNightError::AllocationMismatch { .. } => Rejection::ReservationExists,
        RoomNightError::HoldExpired { expired_at } => Rejection::HoldExpired { expired_at },
        RoomNightError::NoHold => Rejection::HoldExpired {
            expired_at: DateTime::<Utc>::MIN_UTC,
        },
        RoomNightError::HoldStillLive => Rejection::HoldStillLive,
        RoomNightError::BelowReserved { reserved } => Rejection::InventoryBelowReserved {
            night: date,
            reserved,
        },
        RoomNightError::WrongNight => Rejection::SoldOut { night: date },
        RoomNightError::NotInBlock => crate::types::InvalidInput::new(
            "block_code",
            format!("the block sets no rooms of this room type aside on {date}"),
        )
        .into(),
        RoomNightError::BlockExhausted { remaining } => Rejection::BlockExhausted {
            night: date,
            remaining,
        },
        RoomNightError::BlockReleased => Rejection::BlockReleased { night: date },
        RoomNightError::BelowPickup { picked_up } => Rejection::BelowPickup {
            night: date,
            picked_up,
        },
    })
}

/// [`decide_nights`] over `dates` of each of `lines` (of a stay at `hotel_id`), on its own
/// room type's nights, with the command `command_for` chooses for the line and night; a
/// refusal names its line when there are several (see [`Rejection::in_line`]).
pub(super) fn decide_lines<'l, I>(
    decision: &mut Decision,
    hotel_id: HotelId,
    lines: impl ExactSizeIterator<Item = &'l Line>,
    nights: &StayNights<'_>,
    dates: I,
    mut command_for: impl FnMut(
        &Line,
        NaiveDate,
        &RoomNight,
    ) -> Result<Option<RoomNightCommand>, Rejection>,
) -> Result<(), Rejection>
where
    I: IntoIterator<Item = NaiveDate> + Clone,
{
    let count = lines.len();
    for (i, line) in lines.enumerate() {
        let room_type = RoomType {
            hotel_id,
            room_type_id: line.room_type_id,
        };
        decide_nights(
            decision,
            room_type,
            nights.of(line.room_type_id),
            dates.clone(),
            |date, night| command_for(line, date, night),
        )
        .map_err(|e| e.in_line(i, line.room_type_id, count))?;
    }
    Ok(())
}

/// Decides the same command on every night of the reservation's stay, in every line.
pub(super) fn every_night(
    decision: &mut Decision,
    details: &ReservationDetails,
    nights: &StayNights<'_>,
    command: RoomNightCommand,
) -> Result<(), Rejection> {
    each_line(decision, details, nights, details.stay.nights(), |_, _| {
        Ok(Some(command.clone()))
    })
}

/// [`decide_nights`] over `dates` of every line of a reservation, each on its own room
/// type's nights.
pub(super) fn each_line<I>(
    decision: &mut Decision,
    details: &ReservationDetails,
    nights: &StayNights<'_>,
    dates: I,
    mut command_for: impl FnMut(NaiveDate, &RoomNight) -> Result<Option<RoomNightCommand>, Rejection>,
) -> Result<(), Rejection>
where
    I: IntoIterator<Item = NaiveDate> + Clone,
{
    for room_type in RoomType::all_of(details) {
        decide_nights(
            decision,
            room_type,
            nights.of(room_type.room_type_id),
            dates.clone(),
            &mut command_for,
        )?;
    }
    Ok(())
}

/// Give back every night of the stay (held or confirmed).
pub(super) fn release_every_night(
    decision: &mut Decision,
    details: &ReservationDetails,
    nights: &StayNights<'_>,
) -> Result<(), Rejection> {
    let reservation_id = details.reservation_id;
    every_night(
        decision,
        details,
        nights,
        RoomNightCommand::Release { reservation_id },
    )
}

/// Drop the reservation's lapsed hold from every night that still carries it.
pub(super) fn expire_every_night(
    decision: &mut Decision,
    details: &ReservationDetails,
    nights: &StayNights<'_>,
    now: DateTime<Utc>,
) -> Result<(), Rejection> {
    let reservation_id = details.reservation_id;
    let command = RoomNightCommand::ExpireHold {
        reservation_id,
        now,
    };
    every_night(decision, details, nights, command)
}
