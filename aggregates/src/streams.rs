//! Stream ids (the `aggregate_id` column): how each aggregate names its stream, and the
//! one parser of each format.
//!
//! Every stream id starts with the hotel id, so every write stays derivable to one
//! hotel (the shard key, should one ever be needed). Room nights also end with the
//! night, so sorting their stream ids sorts nights in date order; the audit verify
//! merges `room_nights` rows with replayed streams in that byte order.
//!
//! | aggregate     | stream id                              | example                |
//! |---------------|----------------------------------------|------------------------|
//! | `hotel`       | `{hotel}`                              | `812`                  |
//! | `room_night`  | `{hotel}:{room type}:{YYYY-MM-DD}`     | `812:3:2027-06-01`     |
//! | `reservation` | `{hotel}:{reservation uuid}`           | `812:0193f3c6-...`     |
//! | `block`       | `{hotel}:{block code}`                 | `812:ACME`             |

use std::fmt;

use chrono::NaiveDate;

use serde::{Deserialize, Serialize};

use crate::names::AggregateType;
use crate::types::{BlockCode, HotelId, ReservationId, RoomTypeId};

/// Identifies one room-night stream: `{hotel}:{room type}:{night}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RoomNightKey {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub night: NaiveDate,
}

impl RoomNightKey {
    pub fn new(hotel_id: HotelId, room_type_id: RoomTypeId, night: NaiveDate) -> Self {
        Self {
            hotel_id,
            room_type_id,
            night,
        }
    }

    /// The stream id (see this module): it starts with the hotel id,
    /// and sorting stream ids sorts nights in date order.
    pub fn stream_id(&self) -> String {
        room_night_stream_id(self)
    }

    /// The night a stream id names; the inverse of [`Self::stream_id`].
    pub fn parse_stream_id(stream_id: &str) -> Result<Self, StreamIdError> {
        parse_room_night_stream_id(stream_id)
    }
}

/// How a room night's date is written in its stream id.
const NIGHT_FORMAT: &str = "%Y-%m-%d";

/// A stream id that is not in its aggregate's format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{aggregate_type} stream id {stream_id:?} is not {expected}")]
pub struct StreamIdError {
    pub aggregate_type: AggregateType,
    pub stream_id: String,
    pub expected: &'static str,
}

impl StreamIdError {
    fn new(aggregate_type: AggregateType, stream_id: &str) -> Self {
        let expected = match aggregate_type {
            AggregateType::Hotel => "{hotel}",
            AggregateType::RoomNight => "{hotel}:{room type}:{YYYY-MM-DD}",
            AggregateType::Reservation => "{hotel}:{reservation uuid}",
            AggregateType::Block => "{hotel}:{block code}",
        };
        Self {
            aggregate_type,
            stream_id: stream_id.to_owned(),
            expected,
        }
    }
}

/// The stream id of a hotel: `{hotel}`.
pub fn hotel_stream_id(hotel_id: HotelId) -> String {
    hotel_id.to_string()
}

/// The hotel of a hotel stream id.
pub fn parse_hotel_stream_id(stream_id: &str) -> Result<HotelId, StreamIdError> {
    let bad = || StreamIdError::new(AggregateType::Hotel, stream_id);
    let id: i64 = stream_id.parse().map_err(|_| bad())?;
    HotelId::parse(id).map_err(|_| bad())
}

/// The stream id of a room night: `{hotel}:{room type}:{YYYY-MM-DD}`.
pub fn room_night_stream_id(key: &RoomNightKey) -> String {
    night_stream_id_of(key.hotel_id.get(), key.room_type_id.get(), key.night)
}

/// [`room_night_stream_id`] from the ids as stored, valid or not: for a reader that
/// compares a table's rows with their streams rather than trusting the rows.
pub fn night_stream_id_of(hotel_id: i64, room_type_id: i64, night: NaiveDate) -> String {
    let mut id = String::with_capacity(32);
    let mut ints = itoa::Buffer::new();
    id.push_str(ints.format(hotel_id));
    id.push(':');
    id.push_str(ints.format(room_type_id));
    id.push(':');
    push_night(&mut id, night);
    id
}

/// A night as its stream id writes it (`NIGHT_FORMAT`). Years 0 to 9999 (every night a
/// hotel sells) are written digit by digit, not through chrono's `format`, which reads
/// its format string again on every call: the audit verify writes an id for every night
/// row and every `InventorySet`, millions of them. Other years go through
/// `NIGHT_FORMAT`, which signs and widens them.
fn push_night(out: &mut String, night: NaiveDate) {
    use chrono::Datelike;
    use fmt::Write;
    let year = night.year();
    if !(0..=9999).contains(&year) {
        // Writing to a String cannot fail.
        let _ = write!(out, "{}", night.format(NIGHT_FORMAT));
        return;
    }
    let digits = |out: &mut String, value: u32, width: u32| {
        for place in (0..width).rev() {
            let digit = (value / 10_u32.pow(place)) % 10;
            out.push(char::from(b'0' + u8::try_from(digit).unwrap_or(0)));
        }
    };
    digits(out, year.unsigned_abs(), 4);
    out.push('-');
    digits(out, night.month(), 2);
    out.push('-');
    digits(out, night.day(), 2);
}

/// The night of a stream id's last part, as `NIGHT_FORMAT` reads it. The form every id
/// is written in (`YYYY-MM-DD`, ten characters) is read digit by digit; anything else
/// goes to chrono's parser, which also takes it, so both accept the same texts.
fn parse_night(text: &str) -> Option<NaiveDate> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = bytes.get(range)?;
        part.iter().try_fold(0_u32, |n, b| {
            b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
        })
    };
    if bytes.len() == 10 && bytes.get(4) == Some(&b'-') && bytes.get(7) == Some(&b'-') {
        if let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) {
            return NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day);
        }
    }
    NaiveDate::parse_from_str(text, NIGHT_FORMAT).ok()
}

/// The night a room-night stream id names.
pub fn parse_room_night_stream_id(stream_id: &str) -> Result<RoomNightKey, StreamIdError> {
    let bad = || StreamIdError::new(AggregateType::RoomNight, stream_id);
    let mut parts = stream_id.splitn(3, ':');
    let mut id = || {
        parts
            .next()
            .and_then(|p| p.parse::<i64>().ok())
            .ok_or_else(bad)
    };
    let hotel_id = HotelId::parse(id()?).map_err(|_| bad())?;
    let room_type_id = RoomTypeId::parse(id()?).map_err(|_| bad())?;
    let night = parts.next().and_then(parse_night).ok_or_else(bad)?;
    Ok(RoomNightKey::new(hotel_id, room_type_id, night))
}

/// The stream id of a reservation: `{hotel}:{uuid}`.
pub fn reservation_stream_id(hotel_id: HotelId, reservation_id: ReservationId) -> String {
    format!("{hotel_id}:{reservation_id}")
}

/// The hotel and reservation a reservation stream id names.
pub fn parse_reservation_stream_id(
    stream_id: &str,
) -> Result<(HotelId, ReservationId), StreamIdError> {
    let bad = || StreamIdError::new(AggregateType::Reservation, stream_id);
    let (hotel, reservation) = stream_id.split_once(':').ok_or_else(bad)?;
    let hotel_id = hotel
        .parse::<i64>()
        .ok()
        .and_then(|id| HotelId::parse(id).ok())
        .ok_or_else(bad)?;
    let reservation_id = ReservationId::parse(reservation).map_err(|_| bad())?;
    Ok((hotel_id, reservation_id))
}

/// The stream id of a group block: `{hotel}:{code}`.
pub fn block_stream_id(hotel_id: HotelId, code: BlockCode) -> String {
    format!("{hotel_id}:{code}")
}

/// The hotel and code a block stream id names.
pub fn parse_block_stream_id(stream_id: &str) -> Result<(HotelId, BlockCode), StreamIdError> {
    let bad = || StreamIdError::new(AggregateType::Block, stream_id);
    let (hotel, code) = stream_id.split_once(':').ok_or_else(bad)?;
    let hotel_id = hotel
        .parse::<i64>()
        .ok()
        .and_then(|id| HotelId::parse(id).ok())
        .ok_or_else(bad)?;
    let code = BlockCode::parse(code).map_err(|_| bad())?;
    Ok((hotel_id, code))
}

/// A parsed stream id: which stream of which aggregate an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamKey {
    Hotel(HotelId),
    RoomNight(RoomNightKey),
    Reservation {
        hotel_id: HotelId,
        reservation_id: ReservationId,
    },
    Block {
        hotel_id: HotelId,
        code: BlockCode,
    },
}

impl StreamKey {
    /// Parses `stream_id` in the format of `aggregate_type`.
    pub fn parse(aggregate_type: AggregateType, stream_id: &str) -> Result<Self, StreamIdError> {
        Ok(match aggregate_type {
            AggregateType::Hotel => Self::Hotel(parse_hotel_stream_id(stream_id)?),
            AggregateType::RoomNight => Self::RoomNight(parse_room_night_stream_id(stream_id)?),
            AggregateType::Reservation => {
                let (hotel_id, reservation_id) = parse_reservation_stream_id(stream_id)?;
                Self::Reservation {
                    hotel_id,
                    reservation_id,
                }
            }
            AggregateType::Block => {
                let (hotel_id, code) = parse_block_stream_id(stream_id)?;
                Self::Block { hotel_id, code }
            }
        })
    }

    pub fn aggregate_type(&self) -> AggregateType {
        match self {
            Self::Hotel(_) => AggregateType::Hotel,
            Self::RoomNight(_) => AggregateType::RoomNight,
            Self::Reservation { .. } => AggregateType::Reservation,
            Self::Block { .. } => AggregateType::Block,
        }
    }

    /// The hotel every stream id starts with.
    pub fn hotel_id(&self) -> HotelId {
        match self {
            Self::Hotel(hotel_id)
            | Self::Reservation { hotel_id, .. }
            | Self::Block { hotel_id, .. } => *hotel_id,
            Self::RoomNight(key) => key.hotel_id,
        }
    }
}

impl fmt::Display for StreamKey {
    /// The stream id, as stored.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hotel(hotel_id) => f.write_str(&hotel_stream_id(*hotel_id)),
            Self::RoomNight(key) => f.write_str(&room_night_stream_id(key)),
            Self::Reservation {
                hotel_id,
                reservation_id,
            } => f.write_str(&reservation_stream_id(*hotel_id, *reservation_id)),
            Self::Block { hotel_id, code } => f.write_str(&block_stream_id(*hotel_id, *code)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn night() -> RoomNightKey {
        RoomNightKey::new(
            HotelId::parse(812).expect("id"),
            RoomTypeId::parse(3).expect("id"),
            NaiveDate::from_ymd_opt(2027, 6, 1).expect("date"),
        )
    }

    proptest::proptest! {
        /// Texts shaped like a night or nearly (digits, signs, dashes, any length) are
        /// read as chrono reads them with `NIGHT_FORMAT`.
        #[test]
        fn a_night_is_read_as_chrono_reads_it(
            text in "([0-9]{4}-[0-9]{2}-[0-9]{2})|([0-9+-]{0,6}-?[0-9]{0,3}-?[0-9]{0,3})",
        ) {
            proptest::prop_assert_eq!(
                parse_night(&text),
                NaiveDate::parse_from_str(&text, NIGHT_FORMAT).ok(),
                "{}", text
            );
        }

        /// Every night written in the ten-character form is read back.
        #[test]
        fn a_written_night_is_read_back(days in 0_i32..3_652_000) {
            let night = NaiveDate::from_num_days_from_ce_opt(days).expect("in chrono's range");
            let mut text = String::new();
            push_night(&mut text, night);
            proptest::prop_assert_eq!(parse_night(&text), Some(night));
        }

        #[test]
        fn a_night_stream_id_is_written_as_chrono_formats_its_date(
            hotel in proptest::prelude::any::<i64>(),
            room_type in proptest::prelude::any::<i64>(),
            days in -4_000_000_i32..4_000_000,
        ) {
            let night = NaiveDate::from_num_days_from_ce_opt(days).expect("in chrono's range");
            proptest::prop_assert_eq!(
                night_stream_id_of(hotel, room_type, night),
                format!("{hotel}:{room_type}:{}", night.format(NIGHT_FORMAT))
            );
        }
    }

    #[test]
    fn a_room_night_stream_id_names_hotel_room_type_and_night_and_parses_back() {
        assert_eq!(room_night_stream_id(&night()), "812:3:2027-06-01");
        assert_eq!(parse_room_night_stream_id("812:3:2027-06-01"), Ok(night()));
        for malformed in [
            "812:3",
            "812:x:2027-06-01",
            "812:3:2027-13-01",
            "0:3:2027-06-01",
            "812:3:2027-06-01:9",
            "",
        ] {
            let error = parse_room_night_stream_id(malformed).expect_err(malformed);
            assert_eq!(error.aggregate_type, AggregateType::RoomNight);
            assert!(error.to_string().contains(malformed), "{error}");
        }
    }

    #[test]
    fn a_reservation_stream_id_names_its_hotel_and_parses_back() {
        let id = ReservationId::from_uuid(Uuid::from_u128(1));
        let hotel = HotelId::parse(7).expect("id");
        let stream = reservation_stream_id(hotel, id);
        assert_eq!(stream, "7:00000000-0000-0000-0000-000000000001");
        assert_eq!(parse_reservation_stream_id(&stream), Ok((hotel, id)));
        assert!(parse_reservation_stream_id("7:not-a-uuid").is_err());
        assert!(parse_reservation_stream_id("no-colon").is_err());
        assert!(parse_reservation_stream_id("x:00000000-0000-0000-0000-000000000001").is_err());
    }

    #[test]
    fn a_hotel_stream_id_is_the_hotel_id() {
        let hotel = HotelId::parse(812).expect("id");
        assert_eq!(hotel_stream_id(hotel), "812");
        assert_eq!(parse_hotel_stream_id("812"), Ok(hotel));
        assert!(parse_hotel_stream_id("812:3").is_err());
        assert!(parse_hotel_stream_id("-1").is_err());
    }

    #[test]
    fn a_stream_key_writes_the_stream_id_it_was_parsed_from() {
        let reservation = format!("812:{}", Uuid::from_u128(9));
        for (aggregate_type, stream_id) in [
            (AggregateType::Hotel, "812"),
            (AggregateType::RoomNight, "812:3:2027-06-01"),
            (AggregateType::Reservation, reservation.as_str()),
        ] {
            let key = StreamKey::parse(aggregate_type, stream_id).expect(stream_id);
            assert_eq!(key.to_string(), stream_id);
            assert_eq!(key.aggregate_type(), aggregate_type);
            assert_eq!(key.hotel_id().get(), 812);
        }
        assert!(StreamKey::parse(AggregateType::Hotel, "812:3:2027-06-01").is_err());
    }
}
