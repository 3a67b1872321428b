//! `Block`: a group block — rooms of one room type a hotel sets aside for a group (a
//! company's offsite, a wedding) over a stay, at a contracted rate, until a release
//! date; the group's people book from it.
//!
//! The block's stream holds its terms and whether it was released. The rooms it sets
//! aside are not here: they are each night's, in the `RoomNight` stream beside what is
//! sold (see [`crate::room_night::BlockNight`]), so a booking from the block and a
//! booking from general sale of the same night are decided one after the other on the
//! same counters, and the invariant counts both. Setting a block's terms writes both
//! its stream and its nights in one decision ([`crate::booking::set_block`]); a booking
//! from it reads only the nights (their rate and rooms left are there).

use chrono::{DateTime, NaiveDate, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::names::AggregateType;
use crate::types::{BlockCode, Cents, HotelId, InvalidInput, RoomCount, RoomTypeId, StayDates};

/// What a block is sold as: validated once where the request enters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockTerms {
    name: String,
    room_type_id: RoomTypeId,
    stay: StayDates,
    rooms: RoomCount,
    rate_cents: Cents,
    release_date: NaiveDate,
}

impl BlockTerms {
    pub const MAX_NAME: usize = 100;

    pub fn parse(
        name: &str,
        room_type_id: RoomTypeId,
        stay: StayDates,
        rooms: RoomCount,
        rate_cents: Cents,
        release_date: NaiveDate,
    ) -> Result<Self, InvalidInput> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > Self::MAX_NAME {
            return Err(InvalidInput::new(
                "name",
                format!("must be 1 to {} characters", Self::MAX_NAME),
            ));
        }
        if rate_cents.get() < 0 {
            return Err(InvalidInput::new("rate_cents", "must not be negative"));
        }
        if release_date >= stay.end() {
            return Err(InvalidInput::new(
                "release_date",
                "must be before end_date (the block's last night is the day before it)",
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            room_type_id,
            stay,
            rooms,
            rate_cents,
            release_date,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn room_type_id(&self) -> RoomTypeId {
        self.room_type_id
    }

    pub fn stay(&self) -> StayDates {
        self.stay
    }

    pub fn rooms(&self) -> RoomCount {
        self.rooms
    }

    pub fn rate_cents(&self) -> Cents {
        self.rate_cents
    }

    pub fn release_date(&self) -> NaiveDate {
        self.release_date
    }
}

/// Why a block was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// Its release date ended at the hotel.
    ReleaseDate,
    /// Staff released it before.
    Staff,
}

impl ReleaseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReleaseDate => "release_date",
            Self::Staff => "staff",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Block {
    hotel_id: Option<HotelId>,
    code: Option<BlockCode>,
    terms: Option<BlockTerms>,
    /// When the release date ends at the hotel: the release worker's moment.
    release_at: Option<DateTime<Utc>>,
    created_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    released: Option<(DateTime<Utc>, ReleaseReason)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockCommand {
    /// Create the block, or change its terms (not its room type).
    Set {
        hotel_id: HotelId,
        code: BlockCode,
        terms: BlockTerms,
        release_at: DateTime<Utc>,
        now: DateTime<Utc>,
    },
    /// Give the unpicked rooms back to general sale.
    Release {
        reason: ReleaseReason,
        now: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockEvent {
    /// The block's terms, whole (created or changed): replay needs no earlier event.
    BlockTermsSet {
        hotel_id: HotelId,
        code: BlockCode,
        terms: BlockTerms,
        release_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    BlockClosed {
        at: DateTime<Utc>,
        reason: ReleaseReason,
    },
}

/// Names and version: see [`crate::contract::events`].
impl DomainEvent for BlockEvent {
    fn event_type(&self) -> String {
        self.kind().as_str().to_owned()
    }

    fn event_version(&self) -> String {
        Self::VERSION.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("no such block")]
    NotFound,
    #[error("the block was released")]
    Released,
    #[error("a block's room type cannot change")]
    RoomTypeFixed,
}

impl Block {
    pub fn hotel_id(&self) -> Option<HotelId> {
        self.hotel_id
    }

    pub fn code(&self) -> Option<BlockCode> {
        self.code
    }

    pub fn terms(&self) -> Option<&BlockTerms> {
        self.terms.as_ref()
    }

    pub fn release_at(&self) -> Option<DateTime<Utc>> {
        self.release_at
    }

    pub fn created_at(&self) -> Option<DateTime<Utc>> {
        self.created_at
    }

    pub fn released(&self) -> Option<(DateTime<Utc>, ReleaseReason)> {
        self.released
    }

    pub fn decide(&self, command: BlockCommand) -> Result<Vec<BlockEvent>, BlockError> {
        match command {
            BlockCommand::Set {
                hotel_id,
                code,
                terms,
                release_at,
                now,
            } => {
                if self.released.is_some() {
                    return Err(BlockError::Released);
                }
                if let Some(before) = &self.terms {
                    if before.room_type_id != terms.room_type_id {
                        return Err(BlockError::RoomTypeFixed);
                    }
                    if *before == terms {
                        return Ok(Vec::new());
                    }
                }
                Ok(vec![BlockEvent::BlockTermsSet {
                    hotel_id,
                    code,
                    terms,
                    release_at,
                    at: now,
                }])
            }
            BlockCommand::Release { reason, now } => {
                if self.terms.is_none() {
                    return Err(BlockError::NotFound);
                }
                if self.released.is_some() {
                    return Ok(Vec::new());
                }
                Ok(vec![BlockEvent::BlockClosed { at: now, reason }])
            }
        }
    }

    pub fn apply_event(&mut self, event: &BlockEvent) {
        match event {
            BlockEvent::BlockTermsSet {
                hotel_id,
                code,
                terms,
                release_at,
                at,
            } => {
                self.hotel_id = Some(*hotel_id);
                self.code = Some(*code);
                self.terms = Some(terms.clone());
                self.release_at = Some(*release_at);
                self.created_at.get_or_insert(*at);
            }
            BlockEvent::BlockClosed { at, reason } => self.released = Some((*at, *reason)),
        }
    }
}

impl Aggregate for Block {
    const TYPE: &'static str = AggregateType::Block.as_str();
    type Command = BlockCommand;
    type Event = BlockEvent;
    type Error = BlockError;
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
