//! Group blocks (staff): set one up or change it, release it, and the worker's release
//! of the blocks whose release date has ended at their hotel.
//!
//! Each is one unit of work over the block's stream and its room type's nights (the old
//! stay's and the new one's), under the room type's lock like an inventory change: the
//! holds of those nights queue behind it, so a booking from general sale and a block
//! taking rooms are decided one after the other on the same counters.

use std::collections::BTreeSet;

use aggregates::block::ReleaseReason;
use aggregates::booking::{self, BlockDecision};
use aggregates::{Block, BlockCode, BlockTerms, CommandName, HotelId, Rejection};
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::Row;

use super::lifecycle::attempt_to_command;
use super::{Caller, CommandService};
use store::error::CommandError;
use store::write::{
    settle, with_retries, AttemptError, EventMetadata, Loader, WantedNights, Writer,
};

/// A block as staff see it: its terms, whether it holds, and each night's pickup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockView {
    pub hotel_id: HotelId,
    pub code: BlockCode,
    pub terms: BlockTerms,
    pub release_at: DateTime<Utc>,
    pub released: Option<(DateTime<Utc>, ReleaseReason)>,
    pub currency: aggregates::Currency,
    pub nights: Vec<BlockNightView>,
}

/// One night of a block: its rooms (set aside and picked up), as the night records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockNightView {
    pub date: NaiveDate,
    /// Rooms of the block on the night: picked up plus still set aside.
    pub rooms: u32,
    pub picked_up: u32,
    /// Still set aside for the group (0 once released).
    pub remaining: u32,
}

impl CommandService {
    /// Sets up a block or changes its terms: every night of its stay sets aside its
    /// rooms less what its bookings took, out of general sale; nights it leaves give
    /// theirs back. All nights or none.
    pub async fn set_block(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        code: BlockCode,
        terms: BlockTerms,
    ) -> Result<BlockView, CommandError> {
        let now = self.now();
        let metadata = EventMetadata {
            command: CommandName::SetBlock,
            client: by.name().to_owned(),
            idempotency_key: None,
            staff_id: by.staff_id(),
        };
        self.block_command(
            hotel_id,
            code,
            &metadata,
            |hotel, block, nights| {
                booking::set_block(
                    hotel,
                    block,
                    nights,
                    booking::SetBlock {
                        hotel_id,
                        code,
                        terms: terms.clone(),
                        max_days_ahead: self.config.limits.max_days_ahead,
                        now,
                    },
                )
            },
            Some(&terms),
        )
        .await?;
        self.block(hotel_id, code)
            .await?
            .ok_or(CommandError::Rejected(Rejection::BlockNotFound))
    }

    /// Releases a block: its unpicked rooms go back to general sale now.
    pub async fn release_block(
        &self,
        by: &Caller,
        hotel_id: HotelId,
        code: BlockCode,
    ) -> Result<BlockView, CommandError> {
        let metadata = EventMetadata {
            command: CommandName::ReleaseBlock,
            client: by.name().to_owned(),
            idempotency_key: None,
            staff_id: by.staff_id(),
        };
        self.release(hotel_id, code, &metadata, ReleaseReason::Staff)
            .await?;
        self.block(hotel_id, code)
            .await?
            .ok_or(CommandError::Rejected(Rejection::BlockNotFound))
    }

    /// Releases every open block whose release date has ended at its hotel; returns how
    /// many. Run by the sweeper; a block released meanwhile by staff is left as it is,
    /// and one that cannot be released now (contention) is logged and tried again on
    /// the next pass, without holding back the others.
    pub async fn release_due_blocks(&self) -> Result<usize, CommandError> {
        let now = self.now();
        let due = sqlx::query(
            "SELECT hotel_id, code FROM blocks WHERE NOT released AND release_at <= $1
              ORDER BY release_at LIMIT 100",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| CommandError::Internal(e.to_string()))?;
        let metadata = EventMetadata {
            command: CommandName::ReleaseBlock,
            client: "release-worker".to_owned(),
            idempotency_key: None,
            staff_id: None,
        };
        let mut released = 0;
        for row in due {
            let (hotel, code): (i64, String) = (
                row.try_get("hotel_id").map_err(internal)?,
                row.try_get("code").map_err(internal)?,
            );
            let (Ok(hotel_id), Ok(code)) = (HotelId::parse(hotel), BlockCode::parse(&code)) else {
                tracing::warn!(hotel, code, "a stored block with an unreadable key");
                continue;
            };
            match self
                .release(hotel_id, code, &metadata, ReleaseReason::ReleaseDate)
                .await
            {
                Ok(()) => released += 1,
                Err(e) => tracing::warn!(hotel, %code, error = %e, "a due block was not released"),
            }
        }
        Ok(released)
    }

    async fn release(
        &self,
        hotel_id: HotelId,
        code: BlockCode,
        metadata: &EventMetadata,
        reason: ReleaseReason,
    ) -> Result<(), CommandError> {
        let now = self.now();
        self.block_command(
            hotel_id,
            code,
            metadata,
            |_, block, nights| booking::release_block(block, nights, reason, now),
            None,
        )
        .await
    }

    /// One block command: lock the room type, load the block and the nights of its old
    /// and new stays (`terms`: the new terms, if they change), decide, write.
    async fn block_command(
        &self,
        hotel_id: HotelId,
        code: BlockCode,
        metadata: &EventMetadata,
        decide: impl Fn(
            &aggregates::Hotel,
            &Block,
            &aggregates::Nights,
        ) -> Result<BlockDecision, Rejection>,
        terms: Option<&BlockTerms>,
    ) -> Result<(), CommandError> {
        let now = self.now();
        let locks = self.config.strategy.locks_nights();
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                let (block, version) = loader.block(hotel_id, code, false).await?;
                let room_type_id = match (block.terms(), terms) {
                    (Some(before), _) => before.room_type_id(),
                    (None, Some(terms)) => terms.room_type_id(),
                    (None, None) => return Err(Rejection::BlockNotFound.into()),
                };
                if locks {
                    loader.lock_room_type(hotel_id, room_type_id).await?;
                }
                // Read again under the room's lock: the block row is then as the last
                // writer of these nights left it.
                let (block, version) = if locks {
                    loader.block(hotel_id, code, true).await?
                } else {
                    (block, version)
                };
                let (hotel, _) = loader.hotel(hotel_id).await?;
                let mut dates: BTreeSet<NaiveDate> = BTreeSet::new();
                for stay in block
                    .terms()
                    .map(BlockTerms::stay)
                    .into_iter()
                    .chain(terms.map(BlockTerms::stay))
                {
                    dates.extend(stay.nights());
                }
                let nights = loader
                    .nights(
                        WantedNights {
                            hotel_id,
                            room_type_id,
                            dates: dates.into_iter().collect(),
                            peek: Vec::new(),
                        },
                        None,
                        now,
                        locks,
                    )
                    .await?;
                let decision = decide(&hotel, &block, &nights.nights)?;
                let mut writer = Writer::new(metadata)?;
                writer
                    .block(&mut tx, &block, version, &decision.block)
                    .await?;
                writer.queue_nights(&nights, &decision.nights)?;
                writer.flush(&mut tx, &self.privacy).await?;
                Ok(())
            }
            .await;
            settle(tx, result).await
        })
        .await
    }

    /// A block with each night's pickup, as last written; `None` if the hotel has no
    /// such block.
    pub async fn block(
        &self,
        hotel_id: HotelId,
        code: BlockCode,
    ) -> Result<Option<BlockView>, CommandError> {
        let mut conn = self.pool.acquire().await.map_err(internal)?;
        let mut loader = Loader { conn: &mut conn };
        let (block, version) = loader
            .block(hotel_id, code, false)
            .await
            .map_err(attempt_to_command)?;
        let (Some(terms), Some(release_at), true) =
            (block.terms(), block.release_at(), version > 0)
        else {
            return Ok(None);
        };
        let (hotel, _) = loader.hotel(hotel_id).await.map_err(attempt_to_command)?;
        let rows = sqlx::query(
            "SELECT night, blocks -> $3 AS block FROM room_nights
              WHERE hotel_id = $1 AND room_type_id = $2 AND night >= $4 AND night < $5
              ORDER BY night",
        )
        .bind(hotel_id.get())
        .bind(terms.room_type_id().get())
        .bind(code.as_str())
        .bind(terms.stay().start())
        .bind(terms.stay().end())
        .fetch_all(&self.pool)
        .await
        .map_err(internal)?;
        let mut nights = Vec::with_capacity(rows.len());
        for row in rows {
            let date: NaiveDate = row.try_get("night").map_err(internal)?;
            let Some(json) = row
                .try_get::<Option<serde_json::Value>, _>("block")
                .map_err(internal)?
            else {
                continue;
            };
            let night: aggregates::room_night::BlockNight =
                serde_json::from_value(json).map_err(internal)?;
            nights.push(BlockNightView {
                date,
                rooms: night.total_rooms(),
                picked_up: night.picked_up,
                remaining: night.rooms,
            });
        }
        Ok(Some(BlockView {
            hotel_id,
            code,
            terms: terms.clone(),
            release_at,
            released: block.released(),
            currency: hotel.currency(),
            nights,
        }))
    }
}

fn internal(e: impl std::fmt::Display) -> CommandError {
    CommandError::Internal(e.to_string())
}
