//! Setting inventory over a range of nights.

use chrono::{DateTime, Utc};

use super::nights::{decide_nights, RoomType};
use super::{check_room_type, Decision, Nights, Rejection};
use crate::hotel::Hotel;
use crate::room_night::{RoomNightCommand, RoomNightKey};
use crate::types::{Cents, HotelId, InvalidInput, InventoryLevels, RoomTypeId, StayDates};

/// What to set on each night of a range. Omitted rooms, allowance and rate keep the
/// night's current values (a rate-only change keeps each night's rooms); a night
/// without inventory yet needs its rooms and a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InventoryUpdate {
    pub total_rooms: Option<i64>,
    pub overbooking_allowance: Option<i64>,
    pub rate_cents: Option<Cents>,
}

/// Set `update` on every night of `range` of one hotel's room type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetInventory {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub range: StayDates,
    pub update: InventoryUpdate,
    pub now: DateTime<Utc>,
}

/// Set inventory on every night of `range` for one room type, or on none: lowering any
/// night below what is already sold refuses the whole update.
pub fn set_inventory(
    hotel: &Hotel,
    nights: &Nights,
    cmd: SetInventory,
) -> Result<Decision, Rejection> {
    let SetInventory {
        hotel_id,
        room_type_id,
        range,
        update,
        now,
    } = cmd;
    check_room_type(hotel, hotel_id, room_type_id)?;
    let mut decision = Decision::default();
    let room_type = RoomType {
        hotel_id,
        room_type_id,
    };
    set_levels(
        &mut decision,
        room_type,
        nights,
        range.nights(),
        update,
        now,
    )?;
    Ok(decision)
}

/// Sets `update` on each of `dates` (see [`set_inventory`]).
pub(super) fn set_levels(
    decision: &mut Decision,
    room_type: RoomType,
    nights: &Nights,
    dates: impl IntoIterator<Item = chrono::NaiveDate>,
    update: InventoryUpdate,
    now: DateTime<Utc>,
) -> Result<(), Rejection> {
    let RoomType {
        hotel_id,
        room_type_id,
    } = room_type;
    decide_nights(decision, room_type, nights, dates, |date, night| {
        let current = night.levels();
        let allowance = update
            .overbooking_allowance
            .or(current.map(|l| i64::from(l.overbooking_allowance())))
            .unwrap_or(0);
        let rate = match update.rate_cents.or(current.map(|l| l.rate_cents())) {
            Some(rate) => rate,
            None => {
                return Err(InvalidInput::new(
                    "rate_cents",
                    format!("{date} has no rate yet: rate_cents is required"),
                )
                .into())
            }
        };
        let Some(total_rooms) = update
            .total_rooms
            .or(current.map(|l| i64::from(l.total_rooms())))
        else {
            return Err(InvalidInput::new(
                "total_rooms",
                format!("{date} has no inventory yet: total_rooms is required"),
            )
            .into());
        };
        let levels = InventoryLevels::parse(total_rooms, allowance, rate)?;
        Ok(Some(RoomNightCommand::SetInventory {
            key: RoomNightKey::new(hotel_id, room_type_id, date),
            levels,
            now,
        }))
    })
}
