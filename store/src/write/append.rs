//! Appending a decision: the events of every stream, with their expected versions, and
//! the inline state rows, inside the caller's transaction. A stream someone else moved
//! since it was loaded makes the attempt fail with `Conflict`; nothing is half-written
//! because the caller then rolls the whole transaction back.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use aggregates::{
    Block, BlockEvent, CommandName, Decision, Guest, Hotel, HotelEvent, Personal, Reservation,
    ReservationEvent, ReservationId, RoomNight, RoomNightEvent,
};
use chrono::{DateTime, NaiveDate, Utc};
use columns::{columns, Columns, Statement};
use cqrs_es::{Aggregate, DomainEvent};
use serde::Serialize;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::attempt::AttemptError;
use super::load::{LoadedNights, LoadedReservation};
use super::seal::{self, Owner, Slot};
use crate::error::CommandError;
use crate::privacy::{self, Binding, Field, Privacy};

/// Who caused the events and under which request; stored with every event of a
/// command (postgres-es's metadata is a map of strings).
#[derive(Debug, Clone, Serialize)]
pub struct EventMetadata {
    #[serde(serialize_with = "command_name")]
    pub command: CommandName,
    pub client: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The staff member who gave the command in the console (`client` is then their
    /// name); absent for tokens and the server's own workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staff_id: Option<uuid::Uuid>,
}

/// A command as `metadata.command` stores it: its storage name.
fn command_name<S: serde::Serializer>(command: &CommandName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(command.as_str())
}

/// One row to append to `events`.
struct EventRow {
    aggregate_type: &'static str,
    aggregate_id: String,
    sequence: i64,
    event_type: String,
    event_version: String,
    payload: serde_json::Value,
    metadata: serde_json::Value,
    /// A reservation event's reservation and its guest (after the events): what its
    /// personal data is sealed under.
    owner: Option<(ReservationId, Owner)>,
}

columns! {
    /// `events` rows to append, column by column.
    struct EventColumns {
        aggregate_type: &'static str = "text",
        aggregate_id: String = "text",
        sequence: i64 = "bigint",
        event_type: String = "text",
        event_version: String = "text",
        payload: serde_json::Value = "jsonb",
        metadata: serde_json::Value = "jsonb",
    }
}

#[derive(Default)]
struct EventBatch {
    rows: Vec<EventRow>,
}

impl EventBatch {
    fn push<E: DomainEvent>(
        &mut self,
        aggregate_type: &'static str,
        aggregate_id: &str,
        first_sequence: i64,
        events: &[E],
        metadata: &serde_json::Value,
        owner: Option<&(ReservationId, Owner)>,
    ) -> Result<(), AttemptError> {
        for (offset, event) in events.iter().enumerate() {
            self.rows.push(EventRow {
                aggregate_type,
                aggregate_id: aggregate_id.to_owned(),
                sequence: first_sequence + offset as i64,
                event_type: event.event_type(),
                event_version: event.event_version(),
                payload: serde_json::to_value(event).map_err(internal)?,
                metadata: metadata.clone(),
                owner: owner.cloned(),
            });
        }
        Ok(())
    }
}

fn internal(e: impl std::fmt::Display) -> AttemptError {
    AttemptError::Fatal(CommandError::Internal(e.to_string()))
}

fn to_i32(value: u32) -> Result<i32, AttemptError> {
    i32::try_from(value).map_err(internal)
}

fn reservation_of(event: &RoomNightEvent) -> Option<ReservationId> {
    match event {
        RoomNightEvent::InventorySet { .. }
        | RoomNightEvent::RestrictionsSet { .. }
        | RoomNightEvent::PlanRateSet { .. }
        | RoomNightEvent::BlockSet { .. }
        | RoomNightEvent::BlockRemoved { .. }
        | RoomNightEvent::BlockReleased { .. } => None,
        RoomNightEvent::BlockRoomsHeld { reservation_id, .. }
        | RoomNightEvent::BlockHoldLapsed { reservation_id, .. }
        | RoomNightEvent::BlockRoomsReleased { reservation_id, .. }
        | RoomNightEvent::RoomsHeld { reservation_id, .. }
        | RoomNightEvent::RoomsBooked { reservation_id, .. }
        | RoomNightEvent::HoldConfirmed { reservation_id, .. }
        | RoomNightEvent::HoldLapsed { reservation_id, .. }
        | RoomNightEvent::RoomsReleased { reservation_id, .. } => Some(*reservation_id),
    }
}

/// Whether an event changes a night's blocks (what they set aside or took).
fn changes_blocks(event: &RoomNightEvent) -> bool {
    matches!(
        event,
        RoomNightEvent::BlockSet { .. }
            | RoomNightEvent::BlockRemoved { .. }
            | RoomNightEvent::BlockReleased { .. }
            | RoomNightEvent::BlockRoomsHeld { .. }
            | RoomNightEvent::BlockHoldLapsed { .. }
            | RoomNightEvent::BlockRoomsReleased { .. }
    )
}

/// Collects everything a command (or a batch of commands) writes, then writes it all
/// in ONE statement (`flush`): every changed night, allocation, reservation, event and
/// idempotency record, as data-modifying CTEs over arrays. One round trip instead of
/// one per table is most of what a booking costs beyond the baseline's bare UPDATE.
pub struct Writer {
    metadata: serde_json::Value,
    events: EventBatch,
    night_updates: NightRows,
    night_inserts: NightRows,
    gone: GoneRows,
    kept: AllocationRows,
    new_reservations: ReservationRows,
    changed_reservations: ReservationRows,
    idempotency: IdempotencyRows,
    catalogs: CatalogRows,
}

/// One room's part of a batch of commands decided together (group commit's holds, the
/// sweeper's expiries): its nights as loaded, as the decisions so far leave them (each
/// is taken on the state the one before left), and those decisions with their
/// commands' metadata, for [`Writer::queue_nights_of`].
pub struct RoomWork {
    loaded: LoadedNights,
    nights: aggregates::Nights,
    decided: Vec<(serde_json::Value, Decision)>,
}

impl RoomWork {
    pub fn new(loaded: LoadedNights) -> Self {
        let nights = loaded.nights.clone();
        Self {
            loaded,
            nights,
            decided: Vec::new(),
        }
    }

    /// The nights the next decision is taken on.
    pub fn nights(&self) -> &aggregates::Nights {
        &self.nights
    }

    /// Records `decision`, taken on [`Self::nights`], stored with `metadata`: the next
    /// decision sees the nights as this one leaves them. Only this room's nights are
    /// taken from it (a reservation of several room types decides nights of each).
    pub fn decided(&mut self, metadata: serde_json::Value, decision: Decision) {
        let room = (self.loaded.hotel_id, self.loaded.room_type_id);
        for (key, events) in &decision.nights {
            if (key.hotel_id, key.room_type_id) != room {
                continue;
            }
            let night = self.nights.entry(key.night).or_default();
            for event in events {
                night.apply_event(event);
            }
        }
        self.decided.push((metadata, decision));
    }

    /// Queues the nights its decisions changed, each written once (nothing if none).
    pub fn queue(&self, writer: &mut Writer) -> Result<(), AttemptError> {
        if self.decided.is_empty() {
            return Ok(());
        }
        let refs: Vec<(&serde_json::Value, &Decision)> =
            self.decided.iter().map(|(m, d)| (m, d)).collect();
        writer.queue_nights_of(&self.loaded, &refs)
    }
}

impl Writer {
    pub fn new(metadata: &EventMetadata) -> Result<Self, AttemptError> {
        Ok(Self {
            metadata: serde_json::to_value(metadata).map_err(internal)?,
            events: EventBatch::default(),
            night_updates: NightRows::default(),
            night_inserts: NightRows::default(),
            gone: GoneRows::default(),
            kept: AllocationRows::default(),
            new_reservations: ReservationRows::default(),
            changed_reservations: ReservationRows::default(),
            idempotency: IdempotencyRows::default(),
            catalogs: CatalogRows::default(),
        })
    }

    /// The metadata stored with the events queued from now on (a batch of commands has
    /// one per command); returns it as stored.
    pub fn set_metadata(
        &mut self,
        metadata: &EventMetadata,
    ) -> Result<&serde_json::Value, AttemptError> {
        self.metadata = serde_json::to_value(metadata).map_err(internal)?;
        Ok(&self.metadata)
    }

    /// Queues the changed nights of `decision` (counters with a version check, and the
    /// allocations its events touched) and their events; nothing is written before
    /// `flush`.
    pub fn queue_nights(
        &mut self,
        loaded: &LoadedNights,
        decision: &Decision,
    ) -> Result<(), AttemptError> {
        let metadata = self.metadata.clone();
        self.queue_nights_of(loaded, &[(&metadata, decision)])
    }

    /// Queues the nights changed by several decisions taken one after the other on
    /// `loaded` (a batch of commands): each decision's events follow the previous one's
    /// in each stream, each with its own command's metadata, and every night is written
    /// once, in its final state. Only `loaded`'s room is queued: a decision over several
    /// room types is queued once per room it loaded.
    pub fn queue_nights_of(
        &mut self,
        loaded: &LoadedNights,
        decisions: &[(&serde_json::Value, &Decision)],
    ) -> Result<(), AttemptError> {
        let (hotel, room_type) = (loaded.hotel_id.get(), loaded.room_type_id.get());
        let mut keys: BTreeSet<aggregates::RoomNightKey> = BTreeSet::new();
        for (_, decision) in decisions {
            keys.extend(decision.nights.iter().map(|(key, _)| *key).filter(|key| {
                (key.hotel_id, key.room_type_id) == (loaded.hotel_id, loaded.room_type_id)
            }));
        }
        for key in keys {
            let version = loaded.versions.get(&key.night).copied().unwrap_or(0);
            let mut after = loaded.nights.get(&key.night).cloned().unwrap_or_default();
            let mut sequence = version;
            let mut touched: BTreeSet<ReservationId> = BTreeSet::new();
            let mut terms_changed = false;
            let mut blocks_changed = false;
            for (metadata, decision) in decisions {
                for (k, events) in &decision.nights {
                    if *k != key {
                        continue;
                    }
                    self.events.push(
                        RoomNight::TYPE,
                        &key.stream_id(),
                        sequence + 1,
                        events,
                        metadata,
                        None,
                    )?;
                    sequence += events.len() as i64;
                    for event in events {
                        after.apply_event(event);
                    }
                    touched.extend(events.iter().filter_map(reservation_of));
                    terms_changed |= events.iter().any(|e| {
                        matches!(
                            e,
                            RoomNightEvent::RestrictionsSet { .. }
                                | RoomNightEvent::PlanRateSet { .. }
                        )
                    });
                    blocks_changed |= events.iter().any(changes_blocks);
                }
            }
            let rows = if version == 0 {
                &mut self.night_inserts
            } else {
                &mut self.night_updates
            };
            rows.push(
                (hotel, room_type, key.night),
                &after,
                version,
                sequence,
                (terms_changed, blocks_changed),
            )?;
            let before = loaded.nights.get(&key.night);
            for id in touched {
                // Loaded with the night: the allocation is in the table (a command loads
                // the allocations of its own reservation; a new reservation has none).
                let stored = before
                    .is_some_and(|b| b.hold_of(&id).is_some() || b.confirmed_for(&id).is_some());
                let block = after.block_of(&id).copied();
                if let Some(hold) = after.hold_of(&id) {
                    self.kept.push(
                        (hotel, room_type, key.night, id),
                        hold.rooms,
                        Some(hold.expires_at),
                        block,
                        stored,
                    )?;
                } else if let Some(rooms) = after.confirmed_for(&id) {
                    self.kept.push(
                        (hotel, room_type, key.night, id),
                        rooms,
                        None,
                        block,
                        stored,
                    )?;
                } else {
                    self.gone.push(hotel, room_type, key.night, id);
                }
            }
        }
        Ok(())
    }

    /// Queues a reservation's new state (insert when new, compare-and-set otherwise) and
    /// its events. Returns the state after the events.
    pub fn queue_reservation(
        &mut self,
        before: Option<&LoadedReservation>,
        events: &[ReservationEvent],
    ) -> Result<Option<Reservation>, AttemptError> {
        let (mut after, version) = match before {
            Some(loaded) => (loaded.reservation.clone(), loaded.version),
            None => (Reservation::default(), 0),
        };
        if events.is_empty() {
            return Ok(before.map(|_| after));
        }
        for event in events {
            after.apply_event(event);
        }
        let Some(details) = after.details() else {
            return Err(internal("a reservation event without the reservation"));
        };
        let stream_id = aggregates::reservation::reservation_stream_id(
            details.hotel_id,
            details.reservation_id,
        );
        let owner = (details.reservation_id, Owner::of(&details.guest));
        self.events.push(
            Reservation::TYPE,
            &stream_id,
            version + 1,
            events,
            &self.metadata,
            Some(&owner),
        )?;
        let new_version = version + events.len() as i64;
        let guest = if version == 0 {
            Some(&details.guest)
        } else {
            // A row's guest changes only when it is erased.
            events
                .iter()
                .any(|e| matches!(e, ReservationEvent::GuestErased { .. }))
                .then_some(&details.guest)
        };
        let rows = if version == 0 {
            &mut self.new_reservations
        } else {
            &mut self.changed_reservations
        };
        rows.push(&after, stream_id, version, new_version, guest)?;
        Ok(Some(after))
    }

    /// Makes the write conditional on the hotel's catalog being at `version` still: a
    /// sale priced from the catalog (a hold) must not commit after a change to it that
    /// it did not see. Under the locking strategies a hold waits for the room-type locks
    /// a currency change holds, but reads the hotel on its first statement's snapshot,
    /// taken before that wait; this check, on the writing statement's later snapshot,
    /// sends it round again (`Conflict`) to read the catalog as changed.
    pub fn expect_catalog(&mut self, hotel_id: aggregates::HotelId, version: i64) {
        if !self.catalogs.hotel.contains(&hotel_id.get()) {
            self.catalogs.hotel.push(hotel_id.get());
            self.catalogs.expected.push(version);
        }
    }

    /// Queues the outcome of an idempotent request, stored with the writes.
    pub fn queue_idempotency<T: Serialize>(
        &mut self,
        fingerprint: &super::idempotency::RequestFingerprint,
        outcome: &T,
    ) -> Result<(), AttemptError> {
        let outcome = serde_json::to_value(outcome).map_err(internal)?;
        self.idempotency.client.push(fingerprint.client.clone());
        self.idempotency
            .key
            .push(fingerprint.key.as_str().to_owned());
        self.idempotency
            .request_hash
            .push(fingerprint.request_hash.clone());
        self.idempotency.outcome.push(outcome);
        Ok(())
    }

    /// Writes a hotel's new state and its room types, and queues its events.
    pub async fn hotel(
        &mut self,
        conn: &mut PgConnection,
        before: &Hotel,
        version: i64,
        events: &[HotelEvent],
    ) -> Result<Hotel, AttemptError> {
        let mut after = before.clone();
        if events.is_empty() {
            return Ok(after);
        }
        for event in events {
            after.apply_event(event);
        }
        let (Some(hotel_id), Some(details)) = (after.hotel_id(), after.details()) else {
            return Err(internal("a hotel event without the hotel"));
        };
        self.events.push(
            Hotel::TYPE,
            &aggregates::contract::hotel_stream_id(hotel_id),
            version + 1,
            events,
            &self.metadata,
            None,
        )?;
        let new_version = version + events.len() as i64;
        let state = serde_json::to_value(&after).map_err(internal)?;
        let written = if version == 0 {
            sqlx::query(
                "INSERT INTO hotels (hotel_id, name, city, timezone, state, version)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(hotel_id.get())
            .bind(details.name())
            .bind(details.city())
            .bind(details.timezone().name())
            .bind(&state)
            .bind(new_version)
            .execute(&mut *conn)
            .await?
        } else {
            sqlx::query(
                "UPDATE hotels SET name = $2, city = $3, timezone = $4, state = $5,
                        version = $6, updated_at = now()
                  WHERE hotel_id = $1 AND version = $7",
            )
            .bind(hotel_id.get())
            .bind(details.name())
            .bind(details.city())
            .bind(details.timezone().name())
            .bind(&state)
            .bind(new_version)
            .bind(version)
            .execute(&mut *conn)
            .await?
        };
        if written.rows_affected() != 1 {
            return Err(AttemptError::Conflict);
        }
        for event in events {
            if let HotelEvent::RoomTypeSet {
                room_type_id,
                details,
            } = event
            {
                sqlx::query(
                    "INSERT INTO room_types (hotel_id, room_type_id, name, max_occupancy)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (hotel_id, room_type_id)
                     DO UPDATE SET name = EXCLUDED.name, max_occupancy = EXCLUDED.max_occupancy",
                )
                .bind(hotel_id.get())
                .bind(room_type_id.get())
                .bind(details.name())
                .bind(to_i32(details.max_occupancy())?)
                .execute(&mut *conn)
                .await?;
            }
        }
        Ok(after)
    }

    /// Writes a block's new state and queues its events (nothing if none). The row is
    /// inserted for a new block and compared-and-set on its version otherwise.
    pub async fn block(
        &mut self,
        conn: &mut PgConnection,
        before: &Block,
        version: i64,
        events: &[BlockEvent],
    ) -> Result<Block, AttemptError> {
        let mut after = before.clone();
        if events.is_empty() {
            return Ok(after);
        }
        for event in events {
            after.apply_event(event);
        }
        let (Some(hotel_id), Some(code), Some(terms), Some(release_at)) = (
            after.hotel_id(),
            after.code(),
            after.terms(),
            after.release_at(),
        ) else {
            return Err(internal("a block event without the block"));
        };
        self.events.push(
            Block::TYPE,
            &aggregates::contract::block_stream_id(hotel_id, code),
            version + 1,
            events,
            &self.metadata,
            None,
        )?;
        let new_version = version + events.len() as i64;
        let state = serde_json::to_value(&after).map_err(internal)?;
        let written = sqlx::query(
            "INSERT INTO blocks AS b (hotel_id, code, room_type_id, start_date, end_date,
                    release_at, released, state, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (hotel_id, code) DO UPDATE
                SET start_date = EXCLUDED.start_date, end_date = EXCLUDED.end_date,
                    release_at = EXCLUDED.release_at, released = EXCLUDED.released,
                    state = EXCLUDED.state, version = EXCLUDED.version
              WHERE b.version = $10",
        )
        .bind(hotel_id.get())
        .bind(code.as_str())
        .bind(terms.room_type_id().get())
        .bind(terms.stay().start())
        .bind(terms.stay().end())
        .bind(release_at)
        .bind(after.released().is_some())
        .bind(&state)
        .bind(new_version)
        .bind(version)
        .execute(&mut *conn)
        .await?;
        // A new block that someone else created meanwhile updates nothing (its version
        // is not 0): a conflict, as is a block that moved since it was loaded.
        if written.rows_affected() != 1 {
            return Err(AttemptError::Conflict);
        }
        Ok(after)
    }

    /// Writes everything queued in ONE statement: nights (compare-and-set on their
    /// versions), allocations, reservations (insert, or compare-and-set), events (the
    /// primary key rejects a stream version someone appended first) and idempotency
    /// records (refused if the key was completed meanwhile). Any lost race rolls the
    /// whole transaction back as `Conflict`.
    /// Writes everything queued, its personal data sealed first (see [`super::seal`]).
    pub async fn flush(
        mut self,
        conn: &mut PgConnection,
        privacy: &Privacy,
    ) -> Result<(), AttemptError> {
        let mut rows = std::mem::take(&mut self.events.rows);
        // A fixed order (sorted stream ids) so concurrent writers meet in the same order.
        rows.sort_by(|a, b| {
            (a.aggregate_type, &a.aggregate_id, a.sequence).cmp(&(
                b.aggregate_type,
                &b.aggregate_id,
                b.sequence,
            ))
        });
        let nothing = rows.is_empty()
            && self.night_updates.is_empty()
            && self.night_inserts.is_empty()
            && self.gone.is_empty()
            && self.kept.is_empty()
            && self.new_reservations.is_empty()
            && self.changed_reservations.is_empty()
            && self.idempotency.is_empty();
        if nothing {
            return Ok(());
        }
        let slots = personal_slots(&mut rows, &mut self.new_reservations)?;
        seal::seal(&mut *conn, privacy, slots).await?;
        let mut events = EventColumns::default();
        for row in rows {
            events.aggregate_type.push(row.aggregate_type);
            events.aggregate_id.push(row.aggregate_id);
            events.sequence.push(row.sequence);
            events.event_type.push(row.event_type);
            events.event_version.push(row.event_version);
            events.payload.push(row.payload);
            events.metadata.push(row.metadata);
        }
        let (u, k, cr, idem) = (
            &self.night_updates,
            &self.kept,
            &self.changed_reservations,
            &self.idempotency,
        );
        // The statement's row sets, by the names its SQL gives them: the parameters are
        // numbered and bound in this order (see the `columns` crate).
        let sets: [(&str, &dyn Columns); 9] = [
            ("updates", u),
            ("inserts", &self.night_inserts),
            ("gone", &self.gone),
            ("kept", k),
            ("new_rows", &self.new_reservations),
            ("changed", cr),
            ("appended", &events),
            ("records", idem),
            ("catalogs", &self.catalogs),
        ];
        static SQL: OnceLock<String> = OnceLock::new();
        let sql = SQL.get_or_init(|| WRITE_ALL.render(&sets));
        let counts = Statement::bind(sqlx::query(sql), &sets)
            .fetch_one(&mut *conn)
            .await?;
        let updated: i64 = counts.try_get("nights_updated")?;
        let changed: i64 = counts.try_get("reservations_changed")?;
        let completed: i64 = counts.try_get("idempotency_written")?;
        let kept: i64 = counts.try_get("allocations_kept")?;
        let catalogs: i64 = counts.try_get("catalogs_unchanged")?;
        if updated != u.len() as i64
            || catalogs != self.catalogs.hotel.len() as i64
            || kept != k.stored.iter().filter(|s| **s).count() as i64
            || changed != cr.len() as i64
            || completed != idem.len() as i64
        {
            // A night, an allocation, a reservation or a catalog sold from moved since it
            // was loaded, or a request with the same key finished first: start over (a replay then finds
            // its outcome).
            return Err(AttemptError::Conflict);
        }
        Ok(())
    }
}

/// Everything a command writes, in one statement. The sub-statements run on one
/// snapshot and never touch the same row twice (a night is updated or inserted, an
/// allocation inserted, updated or gone, a reservation inserted or changed), so their order does not
/// matter; CHECKs, keys and foreign keys are checked as for separate statements.
const WRITE_ALL: Statement = Statement::new(
    "
WITH nights_updated AS (
    UPDATE room_nights AS rn
       SET total_rooms = updates.total_rooms,
           overbooking_allowance = updates.allowance,
           rate_cents = updates.rate_cents,
           confirmed = updates.confirmed,
           held = updates.held,
           blocked = updates.blocked,
           version = updates.new_version,
           blocks = CASE WHEN updates.blocks_changed THEN updates.blocks ELSE rn.blocks END,
           -- A booking leaves the terms as they are (and sends none); only a change to
           -- them writes them.
           restrictions = CASE WHEN updates.terms_changed THEN updates.restrictions
                               ELSE rn.restrictions END,
           plan_rates = CASE WHEN updates.terms_changed THEN updates.plan_rates
                             ELSE rn.plan_rates END
      FROM {updates}
     WHERE rn.hotel_id = updates.hotel AND rn.room_type_id = updates.room_type
       AND rn.night = updates.night AND rn.version = updates.expected
    RETURNING 1
), nights_inserted AS (
    INSERT INTO room_nights (hotel_id, room_type_id, night, total_rooms,
           overbooking_allowance, rate_cents, confirmed, held, version, restrictions,
           plan_rates, blocked, blocks)
    SELECT inserts.hotel, inserts.room_type, inserts.night, inserts.total_rooms,
           inserts.allowance, inserts.rate_cents, inserts.confirmed, inserts.held,
           inserts.new_version, inserts.restrictions, inserts.plan_rates,
           inserts.blocked, inserts.blocks
      FROM {inserts}
    RETURNING 1
), allocations_gone AS (
    DELETE FROM room_night_allocations AS a
     USING {gone}
     WHERE a.hotel_id = gone.hotel AND a.room_type_id = gone.room_type
       AND a.night = gone.night AND a.reservation_id = gone.reservation_id
    RETURNING 1
), allocations_new AS (
    INSERT INTO room_night_allocations
           (hotel_id, room_type_id, night, reservation_id, rooms, expires_at, block_code)
    SELECT kept.hotel, kept.room_type, kept.night, kept.reservation_id, kept.rooms,
           kept.expires_at, kept.block_code
      FROM {kept}
     WHERE NOT kept.stored
    RETURNING 1
), allocations_kept AS (
    UPDATE room_night_allocations AS a
       SET rooms = kept.rooms, expires_at = kept.expires_at
      FROM {kept}
     WHERE kept.stored AND a.hotel_id = kept.hotel AND a.room_type_id = kept.room_type
       AND a.night = kept.night AND a.reservation_id = kept.reservation_id
    RETURNING 1
), reservations_inserted AS (
    INSERT INTO reservations (reservation_id, stream_id, hotel_id, room_type_id,
           start_date, end_date, rooms, status, guest, channel,
           total_cents, hold_expires_at, created_at, updated_at, state, version)
    SELECT new_rows.id, new_rows.stream_id, new_rows.hotel, new_rows.room_type,
           new_rows.start_date, new_rows.end_date, new_rows.rooms, new_rows.status,
           new_rows.guest, new_rows.channel, new_rows.total_cents,
           new_rows.hold_expires_at, new_rows.created_at, new_rows.updated_at,
           new_rows.state, new_rows.new_version
      FROM {new_rows}
    RETURNING 1
), reservations_changed AS (
    UPDATE reservations AS r
       SET start_date = changed.start_date,
           end_date = changed.end_date,
           status = changed.status,
           total_cents = changed.total_cents,
           updated_at = changed.updated_at,
           state = changed.state,
           version = changed.new_version,
           -- An erased guest: the row keeps nothing of them, sealed or in the clear.
           guest = coalesce(changed.guest, r.guest),
           guest_name = CASE WHEN changed.guest IS NULL THEN r.guest_name END,
           guest_email = CASE WHEN changed.guest IS NULL THEN r.guest_email END
      FROM {changed}
     WHERE r.reservation_id = changed.id AND r.version = changed.expected
    RETURNING 1
), events_appended AS (
    INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type,
           event_version, payload, metadata)
    SELECT appended.aggregate_type, appended.aggregate_id, appended.sequence,
           appended.event_type, appended.event_version, appended.payload,
           appended.metadata
      FROM {appended}
    RETURNING 1
), idempotency_written AS (
    INSERT INTO idempotency_keys (client, key, request_hash, state, outcome)
    SELECT records.client, records.key, records.request_hash, 'completed', records.outcome
      FROM {records}
    ON CONFLICT (client, key) DO UPDATE
       SET request_hash = EXCLUDED.request_hash, state = 'completed',
           outcome = EXCLUDED.outcome, created_at = now()
     WHERE idempotency_keys.state = 'abandoned'
        OR idempotency_keys.created_at <= now() - interval '24 hours'
    RETURNING 1
)
SELECT (SELECT count(*) FROM nights_updated) AS nights_updated,
       (SELECT count(*) FROM nights_inserted) AS nights_inserted,
       (SELECT count(*) FROM allocations_gone) AS allocations_gone,
       (SELECT count(*) FROM allocations_new) AS allocations_new,
       (SELECT count(*) FROM allocations_kept) AS allocations_kept,
       (SELECT count(*) FROM reservations_inserted) AS reservations_inserted,
       (SELECT count(*) FROM reservations_changed) AS reservations_changed,
       (SELECT count(*) FROM events_appended) AS events_appended,
       (SELECT count(*) FROM idempotency_written) AS idempotency_written,
       (SELECT count(*) FROM hotels h JOIN {catalogs}
                ON h.hotel_id = catalogs.hotel AND h.version = catalogs.expected)
           AS catalogs_unchanged",
);

/// Every personal value in the clear that the queued writes hold: the guest and the
/// reason in reservation events, a new row's guest. (A stored answer refers to the
/// reservation and holds none; see `commands::answers`.)
fn personal_slots<'a>(
    events: &'a mut [EventRow],
    new_reservations: &'a mut ReservationRows,
) -> Result<Vec<Slot<'a>>, AttemptError> {
    let mut slots = Vec::new();
    for row in events.iter_mut() {
        let EventRow {
            owner,
            event_type,
            payload,
            ..
        } = row;
        let Some((reservation, owner)) = owner else {
            continue;
        };
        let Some((field, value)) =
            privacy::event_slot(event_type, payload).filter(|(_, value)| seal::is_clear(value))
        else {
            continue;
        };
        slots.push(Slot {
            value,
            binding: Binding {
                reservation: *reservation,
                field,
            },
            owner: owner.clone(),
        });
    }
    for (id, guest) in new_reservations.id.iter().zip(&mut new_reservations.guest) {
        if let Some(value) = guest.as_mut().filter(|value| seal::is_clear(value)) {
            let owner = clear_email(value)?;
            slots.push(Slot {
                value,
                binding: Binding {
                    reservation: ReservationId::from_uuid(*id),
                    field: Field::Guest,
                },
                owner,
            });
        }
    }
    Ok(slots)
}

/// The owner of a guest in the clear: the guest's e-mail.
fn clear_email(value: &serde_json::Value) -> Result<Owner, AttemptError> {
    value
        .get("clear")
        .and_then(|guest| guest.get("email"))
        .and_then(serde_json::Value::as_str)
        .map(|email| Owner::Email(email.to_owned()))
        .ok_or_else(|| internal("a guest in the clear without an e-mail"))
}

columns! {
    /// `room_nights` rows to write, column by column.
    struct NightRows {
        hotel: i64 = "bigint",
        room_type: i64 = "bigint",
        night: NaiveDate = "date",
        total_rooms: i32 = "int",
        allowance: i32 = "int",
        rate_cents: i64 = "bigint",
        confirmed: i32 = "int",
        held: i32 = "int",
        expected: i64 = "bigint",
        new_version: i64 = "bigint",
        /// Whether the decision changed the night's restrictions or plan rates (updates
        /// write them only then; inserts always do).
        terms_changed: bool = "bool",
        restrictions: Option<serde_json::Value> = "jsonb",
        plan_rates: Option<serde_json::Value> = "jsonb",
        blocked: i32 = "int",
        /// Whether the decision changed the night's blocks (updates write them only
        /// then; inserts always do).
        blocks_changed: bool = "bool",
        blocks: Option<serde_json::Value> = "jsonb",
    }
}

impl NightRows {
    fn push(
        &mut self,
        (hotel, room_type, night): (i64, i64, NaiveDate),
        state: &RoomNight,
        expected: i64,
        new_version: i64,
        (terms_changed, blocks_changed): (bool, bool),
    ) -> Result<(), AttemptError> {
        let Some(levels) = state.levels() else {
            return Err(internal("a night without inventory cannot be written"));
        };
        self.hotel.push(hotel);
        self.room_type.push(room_type);
        self.night.push(night);
        self.total_rooms.push(to_i32(levels.total_rooms())?);
        self.allowance.push(to_i32(levels.overbooking_allowance())?);
        self.rate_cents.push(levels.rate_cents().get());
        self.confirmed.push(to_i32(state.confirmed())?);
        self.held.push(to_i32(state.held())?);
        self.expected.push(expected);
        self.new_version.push(new_version);
        self.terms_changed.push(terms_changed);
        let (restrictions, plan_rates) = if terms_changed || expected == 0 {
            (
                (!state.restrictions().is_empty())
                    .then(|| serde_json::to_value(state.restrictions()))
                    .transpose()
                    .map_err(internal)?,
                (!state.plan_rates().is_empty())
                    .then(|| serde_json::to_value(state.plan_rates()))
                    .transpose()
                    .map_err(internal)?,
            )
        } else {
            (None, None)
        };
        self.restrictions.push(restrictions);
        self.plan_rates.push(plan_rates);
        self.blocked.push(to_i32(state.blocked())?);
        self.blocks_changed.push(blocks_changed);
        let blocks = if (blocks_changed || expected == 0) && !state.blocks().is_empty() {
            Some(serde_json::to_value(state.blocks()).map_err(internal)?)
        } else {
            None
        };
        self.blocks.push(blocks);
        Ok(())
    }
}

columns! {
    /// The hotels whose catalog a write was decided on, at the version read (see
    /// [`Writer::expect_catalog`]).
    struct CatalogRows {
        hotel: i64 = "bigint",
        expected: i64 = "bigint",
    }
}

columns! {
    /// `room_night_allocations` rows to delete.
    struct GoneRows {
        hotel: i64 = "bigint",
        room_type: i64 = "bigint",
        night: NaiveDate = "date",
        reservation_id: Uuid = "uuid",
    }
}

impl GoneRows {
    fn push(&mut self, hotel: i64, room_type: i64, night: NaiveDate, id: ReservationId) {
        self.hotel.push(hotel);
        self.room_type.push(room_type);
        self.night.push(night);
        self.reservation_id.push(id.as_uuid());
    }
}

columns! {
    /// `room_night_allocations` rows to write, column by column: inserted when new,
    /// updated when `stored`.
    struct AllocationRows {
        hotel: i64 = "bigint",
        room_type: i64 = "bigint",
        night: NaiveDate = "date",
        reservation_id: Uuid = "uuid",
        rooms: i32 = "int",
        expires_at: Option<DateTime<Utc>> = "timestamptz",
        /// The block the rooms were taken from, if any.
        block_code: Option<String> = "text",
        /// Whether the row is in the table already (as loaded). A new one is a plain insert:
        /// `ON CONFLICT` costs a speculative insertion and a WAL record of its own per row,
        /// and a hold's allocations are all new. (Were one there after all, the unique key
        /// refuses it and the attempt is retried as a conflict.)
        stored: bool = "bool",
    }
}

impl AllocationRows {
    fn push(
        &mut self,
        (hotel, room_type, night, id): (i64, i64, NaiveDate, ReservationId),
        rooms: u32,
        expires_at: Option<DateTime<Utc>>,
        block: Option<aggregates::BlockCode>,
        stored: bool,
    ) -> Result<(), AttemptError> {
        self.hotel.push(hotel);
        self.room_type.push(room_type);
        self.night.push(night);
        self.reservation_id.push(id.as_uuid());
        self.rooms.push(to_i32(rooms)?);
        self.expires_at.push(expires_at);
        self.block_code.push(block.map(String::from));
        self.stored.push(stored);
        Ok(())
    }
}

columns! {
    /// `reservations` rows to insert or compare-and-set, column by column.
    struct ReservationRows {
        id: Uuid = "uuid",
        stream_id: String = "text",
        hotel: i64 = "bigint",
        room_type: i64 = "bigint",
        start_date: NaiveDate = "date",
        end_date: NaiveDate = "date",
        rooms: i32 = "int",
        status: &'static str = "text",
        /// The guest as the row stores it (sealed at flush); on a changed row, `None` when
        /// it did not change.
        guest: Option<serde_json::Value> = "jsonb",
        channel: String = "text",
        total_cents: i64 = "bigint",
        hold_expires_at: DateTime<Utc> = "timestamptz",
        created_at: DateTime<Utc> = "timestamptz",
        updated_at: DateTime<Utc> = "timestamptz",
        state: serde_json::Value = "jsonb",
        expected: i64 = "bigint",
        new_version: i64 = "bigint",
    }
}

impl ReservationRows {
    fn push(
        &mut self,
        after: &Reservation,
        stream_id: String,
        expected: i64,
        new_version: i64,
        guest: Option<&Personal<Guest>>,
    ) -> Result<(), AttemptError> {
        let (Some(details), Some(status)) = (after.details(), after.recorded_status()) else {
            return Err(internal("a reservation without details or status"));
        };
        self.id.push(details.reservation_id.as_uuid());
        self.stream_id.push(stream_id);
        self.hotel.push(details.hotel_id.get());
        self.room_type.push(details.room_type_id.get());
        self.start_date.push(details.stay.start());
        self.end_date.push(details.stay.end());
        self.rooms.push(to_i32(details.rooms.get())?);
        self.status.push(status.as_str());
        self.guest.push(
            guest
                .map(serde_json::to_value)
                .transpose()
                .map_err(internal)?,
        );
        self.channel.push(details.channel.clone());
        self.total_cents.push(details.total_cents.get());
        self.hold_expires_at.push(details.hold_expires_at);
        self.created_at.push(details.created_at);
        self.updated_at
            .push(after.updated_at().unwrap_or(details.created_at));
        self.state
            .push(super::reservation_row::slim(after).map_err(internal)?);
        self.expected.push(expected);
        self.new_version.push(new_version);
        Ok(())
    }
}

columns! {
    /// Idempotency records to store as completed, column by column.
    struct IdempotencyRows {
        client: String = "text",
        key: String = "text",
        request_hash: String = "text",
        outcome: serde_json::Value = "jsonb",
    }
}
