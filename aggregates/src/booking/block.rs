//! Setting up, changing and releasing a group block: its stream's terms and, in the
//! same decision, the rooms each of its nights sets aside (see [`crate::block`]).
//!
//! Every night or none: a night without enough rooms left in general sale refuses the
//! whole change (`sold_out` naming it), as a night whose bookings from the block took
//! more than the block would keep does (`below_pickup`).

use chrono::{DateTime, NaiveDate, Utc};

use super::nights::{decide_nights, RoomType};
use super::{check_room_type, Decision, Nights, Rejection};
use crate::block::{Block, BlockCommand, BlockError, BlockEvent, BlockTerms, ReleaseReason};
use crate::hotel::Hotel;
use crate::room_night::RoomNightCommand;
use crate::types::{local_date, BlockCode, HotelId, InvalidInput, TimeZone};

/// Create a block or change its terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetBlock {
    pub hotel_id: HotelId,
    pub code: BlockCode,
    pub terms: BlockTerms,
    /// How far ahead a block may start (the booking limit's `max_days_ahead`).
    pub max_days_ahead: u32,
    pub now: DateTime<Utc>,
}

/// What a block command decided: the block stream's events and its nights'.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockDecision {
    pub block: Vec<BlockEvent>,
    pub nights: Decision,
}

/// When a block's release date ends at the hotel (midnight after it, local time): the
/// moment the release worker gives its unpicked rooms back.
pub fn block_release_at(release_date: NaiveDate, timezone: TimeZone) -> DateTime<Utc> {
    use chrono::TimeZone as _;
    let midnight = release_date
        .succ_opt()
        .unwrap_or(release_date)
        .and_time(chrono::NaiveTime::MIN);
    let tz = timezone.tz();
    // Where midnight does not exist (a gap), the day starts at the first instant after.
    (0..=2)
        .find_map(|hours| {
            tz.from_local_datetime(&(midnight + chrono::Duration::hours(hours)))
                .earliest()
        })
        .map_or_else(|| midnight.and_utc(), |t| t.with_timezone(&Utc))
}

fn refusal(e: BlockError) -> Rejection {
    match e {
        BlockError::NotFound => Rejection::BlockNotFound,
        BlockError::Released => Rejection::BlockWasReleased,
        BlockError::RoomTypeFixed => InvalidInput::new(
            "room_type_id",
            "a block's room type cannot change: release it and set up another code",
        )
        .into(),
    }
}

/// Sets a block's terms on `block` (the default for a new one) and on `nights`, the
/// room type's nights of the block's old and new stays: each night of the new stay
/// sets aside the block's rooms less what its bookings took; a night the block leaves
/// gives its rooms back (refused if a booking from the block is on it).
pub fn set_block(
    hotel: &Hotel,
    block: &Block,
    nights: &Nights,
    cmd: SetBlock,
) -> Result<BlockDecision, Rejection> {
    let SetBlock {
        hotel_id,
        code,
        terms,
        max_days_ahead,
        now,
    } = cmd;
    let timezone = check_room_type(hotel, hotel_id, terms.room_type_id())?;
    let today = local_date(now, timezone);
    // A block under way keeps its first night: only a new one, or a new first night,
    // must not lie in the past.
    let same_start = block.terms().map(|t| t.stay().start()) == Some(terms.stay().start());
    if !same_start && terms.stay().start() < today {
        return Err(InvalidInput::new(
            "start_date",
            format!("must not be in the past (today is {today} at the hotel)"),
        )
        .into());
    }
    if today
        .checked_add_days(chrono::Days::new(u64::from(max_days_ahead)))
        .is_some_and(|last| terms.stay().start() > last)
    {
        return Err(InvalidInput::new(
            "start_date",
            format!("must be at most {max_days_ahead} days ahead"),
        )
        .into());
    }
    let release_at = block_release_at(terms.release_date(), timezone);
    if release_at <= now {
        return Err(InvalidInput::new(
            "release_date",
            format!("has ended at the hotel (today is {today} there)"),
        )
        .into());
    }
    let events = block
        .decide(BlockCommand::Set {
            hotel_id,
            code,
            terms: terms.clone(),
            release_at,
            now,
        })
        .map_err(refusal)?;
    let mut decision = BlockDecision {
        block: events,
        nights: Decision::default(),
    };
    if decision.block.is_empty() {
        return Ok(decision);
    }
    let room_type = RoomType {
        hotel_id,
        room_type_id: terms.room_type_id(),
    };
    let stay = terms.stay();
    if let Some(before) = block.terms() {
        let left = before.stay().nights().filter(|d| !stay.contains(*d));
        decide_nights(&mut decision.nights, room_type, nights, left, |_, _| {
            Ok(Some(RoomNightCommand::RemoveBlock { code, now }))
        })?;
    }
    let set = RoomNightCommand::SetBlock {
        code,
        rooms: terms.rooms().get(),
        rate_cents: terms.rate_cents(),
        now,
    };
    decide_nights(
        &mut decision.nights,
        room_type,
        nights,
        stay.nights(),
        |_, _| Ok(Some(set.clone())),
    )?;
    Ok(decision)
}

/// Releases a block: its unpicked rooms go back to general sale on every night, and it
/// takes no more bookings. Its bookings stay (a cancelled one then gives its rooms to
/// general sale).
pub fn release_block(
    block: &Block,
    nights: &Nights,
    reason: ReleaseReason,
    now: DateTime<Utc>,
) -> Result<BlockDecision, Rejection> {
    let events = block
        .decide(BlockCommand::Release { reason, now })
        .map_err(refusal)?;
    let mut decision = BlockDecision {
        block: events,
        nights: Decision::default(),
    };
    let (Some(hotel_id), Some(code), Some(terms)) = (block.hotel_id(), block.code(), block.terms())
    else {
        return Err(Rejection::BlockNotFound);
    };
    if decision.block.is_empty() {
        return Ok(decision);
    }
    let room_type = RoomType {
        hotel_id,
        room_type_id: terms.room_type_id(),
    };
    decide_nights(
        &mut decision.nights,
        room_type,
        nights,
        terms.stay().nights(),
        |_, _| Ok(Some(RoomNightCommand::ReleaseBlock { code })),
    )?;
    Ok(decision)
}
