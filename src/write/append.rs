//! Appending a decision: the events of every stream, with their expected versions, and
//! the inline state rows, inside the caller's transaction. A stream someone else moved
//! since it was loaded makes the attempt fail with `Conflict`; nothing is half-written
//! because the caller then rolls the whole transaction back.

use std::collections::BTreeSet;

use aggregates::{
    Decision, Hotel, HotelEvent, Reservation, ReservationEvent, ReservationId, RoomNight,
    RoomNightEvent,
};
use chrono::{DateTime, NaiveDate, Utc};
use cqrs_es::{Aggregate, DomainEvent};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{AttemptError, LoadedNights, LoadedReservation};
use crate::error::CommandError;

/// Who caused the events and under which request; stored with every event of a
/// command (postgres-es's metadata is a map of strings).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EventMetadata {
    pub command: &'static str,
    pub client: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// One row to append to `events`.
struct EventRow {
    aggregate_type: &'static str,
    aggregate_id: String,
    sequence: i64,
    event_type: String,
    event_version: String,
    payload: serde_json::Value,
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
    ) -> Result<(), AttemptError> {
        for (offset, event) in events.iter().enumerate() {
            self.rows.push(EventRow {
                aggregate_type,
                aggregate_id: aggregate_id.to_owned(),
                sequence: first_sequence + offset as i64,
                event_type: event.event_type(),
                event_version: event.event_version(),
                payload: serde_json::to_value(event).map_err(internal)?,
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
        RoomNightEvent::InventorySet { .. } => None,
        RoomNightEvent::RoomsHeld { reservation_id, .. }
        | RoomNightEvent::RoomsBooked { reservation_id, .. }
        | RoomNightEvent::HoldConfirmed { reservation_id, .. }
        | RoomNightEvent::HoldLapsed { reservation_id, .. }
        | RoomNightEvent::RoomsReleased { reservation_id, .. } => Some(*reservation_id),
    }
}

/// Collects everything one command writes, then writes it with a handful of statements.
pub struct Writer {
    metadata: serde_json::Value,
    events: EventBatch,
}

impl Writer {
    pub fn new(metadata: &EventMetadata) -> Result<Self, AttemptError> {
        Ok(Self {
            metadata: serde_json::to_value(metadata).map_err(internal)?,
            events: EventBatch::default(),
        })
    }

    /// Writes the changed nights of `decision` (counters with a version check, and the
    /// allocations its events touched) and queues their events.
    pub async fn nights(
        &mut self,
        conn: &mut PgConnection,
        loaded: &LoadedNights,
        decision: &Decision,
    ) -> Result<(), AttemptError> {
        let mut updates = NightRows::default();
        let mut inserts = NightRows::default();
        let mut gone: (Vec<NaiveDate>, Vec<Uuid>) = Default::default();
        let mut kept = AllocationRows::default();

        for (key, events) in &decision.nights {
            let version = loaded.versions.get(&key.night).copied().unwrap_or(0);
            let mut after = loaded.nights.get(&key.night).cloned().unwrap_or_default();
            for event in events {
                after.apply_event(event);
            }
            let new_version = version + events.len() as i64;
            self.events
                .push(RoomNight::TYPE, &key.stream_id(), version + 1, events)?;
            let rows = if version == 0 {
                &mut inserts
            } else {
                &mut updates
            };
            rows.push(key.night, &after, version, new_version)?;

            let touched: BTreeSet<ReservationId> =
                events.iter().filter_map(reservation_of).collect();
            for id in touched {
                if let Some(hold) = after.hold_of(&id) {
                    kept.push(key.night, id, hold.rooms, Some(hold.expires_at))?;
                } else if let Some(rooms) = after.confirmed_for(&id) {
                    kept.push(key.night, id, rooms, None)?;
                } else {
                    gone.0.push(key.night);
                    gone.1.push(id.as_uuid());
                }
            }
        }

        let (hotel, room_type) = (loaded.hotel_id.get(), loaded.room_type_id.get());
        if !updates.night.is_empty() {
            let result = sqlx::query(
                "UPDATE room_nights AS rn
                    SET total_rooms = u.total_rooms, overbooking_allowance = u.allowance,
                        rate_cents = u.rate_cents, confirmed = u.confirmed, held = u.held,
                        version = u.new_version
                   FROM unnest($3::date[], $4::int[], $5::int[], $6::bigint[], $7::int[],
                               $8::int[], $9::bigint[], $10::bigint[])
                        AS u(night, total_rooms, allowance, rate_cents, confirmed, held,
                             expected, new_version)
                  WHERE rn.hotel_id = $1 AND rn.room_type_id = $2 AND rn.night = u.night
                    AND rn.version = u.expected",
            )
            .bind(hotel)
            .bind(room_type)
            .bind(&updates.night)
            .bind(&updates.total_rooms)
            .bind(&updates.allowance)
            .bind(&updates.rate_cents)
            .bind(&updates.confirmed)
            .bind(&updates.held)
            .bind(&updates.expected)
            .bind(&updates.new_version)
            .execute(&mut *conn)
            .await?;
            if result.rows_affected() != updates.night.len() as u64 {
                return Err(AttemptError::Conflict);
            }
        }
        if !inserts.night.is_empty() {
            sqlx::query(
                "INSERT INTO room_nights (hotel_id, room_type_id, night, total_rooms,
                        overbooking_allowance, rate_cents, confirmed, held, version)
                 SELECT $1, $2, u.night, u.total_rooms, u.allowance, u.rate_cents,
                        u.confirmed, u.held, u.new_version
                   FROM unnest($3::date[], $4::int[], $5::int[], $6::bigint[], $7::int[],
                               $8::int[], $9::bigint[])
                        AS u(night, total_rooms, allowance, rate_cents, confirmed, held,
                             new_version)",
            )
            .bind(hotel)
            .bind(room_type)
            .bind(&inserts.night)
            .bind(&inserts.total_rooms)
            .bind(&inserts.allowance)
            .bind(&inserts.rate_cents)
            .bind(&inserts.confirmed)
            .bind(&inserts.held)
            .bind(&inserts.new_version)
            .execute(&mut *conn)
            .await?;
        }
        if !gone.0.is_empty() {
            sqlx::query(
                "DELETE FROM room_night_allocations AS a
                  USING unnest($3::date[], $4::uuid[]) AS g(night, reservation_id)
                  WHERE a.hotel_id = $1 AND a.room_type_id = $2
                    AND a.night = g.night AND a.reservation_id = g.reservation_id",
            )
            .bind(hotel)
            .bind(room_type)
            .bind(&gone.0)
            .bind(&gone.1)
            .execute(&mut *conn)
            .await?;
        }
        if !kept.night.is_empty() {
            sqlx::query(
                "INSERT INTO room_night_allocations
                        (hotel_id, room_type_id, night, reservation_id, rooms, expires_at)
                 SELECT $1, $2, k.night, k.reservation_id, k.rooms, k.expires_at
                   FROM unnest($3::date[], $4::uuid[], $5::int[], $6::timestamptz[])
                        AS k(night, reservation_id, rooms, expires_at)
                 ON CONFLICT (hotel_id, room_type_id, night, reservation_id)
                 DO UPDATE SET rooms = EXCLUDED.rooms, expires_at = EXCLUDED.expires_at",
            )
            .bind(hotel)
            .bind(room_type)
            .bind(&kept.night)
            .bind(&kept.reservation_id)
            .bind(&kept.rooms)
            .bind(&kept.expires_at)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// Writes a reservation's new state (insert when new, compare-and-set otherwise) and
    /// queues its events. Returns the state after the events.
    pub async fn reservation(
        &mut self,
        conn: &mut PgConnection,
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
        let Some(status) = after.recorded_status() else {
            return Err(internal("a reservation without a status"));
        };
        let stream_id = aggregates::reservation::reservation_stream_id(
            details.hotel_id,
            details.reservation_id,
        );
        self.events
            .push(Reservation::TYPE, &stream_id, version + 1, events)?;
        let new_version = version + events.len() as i64;
        let state = serde_json::to_value(&after).map_err(internal)?;
        let updated_at: DateTime<Utc> = after.updated_at().unwrap_or(details.created_at);
        if version == 0 {
            sqlx::query(
                "INSERT INTO reservations (reservation_id, stream_id, hotel_id, room_type_id,
                        start_date, end_date, rooms, status, guest_name, guest_email, channel,
                        total_cents, hold_expires_at, created_at, updated_at, state, version)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                         $16, $17)",
            )
            .bind(details.reservation_id.as_uuid())
            .bind(&stream_id)
            .bind(details.hotel_id.get())
            .bind(details.room_type_id.get())
            .bind(details.stay.start())
            .bind(details.stay.end())
            .bind(to_i32(details.rooms.get())?)
            .bind(status.as_str())
            .bind(details.guest.name())
            .bind(details.guest.email())
            .bind(&details.channel)
            .bind(details.total_cents)
            .bind(details.hold_expires_at)
            .bind(details.created_at)
            .bind(updated_at)
            .bind(&state)
            .bind(new_version)
            .execute(&mut *conn)
            .await?;
        } else {
            let result = sqlx::query(
                "UPDATE reservations
                    SET start_date = $2, end_date = $3, status = $4, total_cents = $5,
                        updated_at = $6, state = $7, version = $8
                  WHERE reservation_id = $1 AND version = $9",
            )
            .bind(details.reservation_id.as_uuid())
            .bind(details.stay.start())
            .bind(details.stay.end())
            .bind(status.as_str())
            .bind(details.total_cents)
            .bind(updated_at)
            .bind(&state)
            .bind(new_version)
            .bind(version)
            .execute(&mut *conn)
            .await?;
            if result.rows_affected() != 1 {
                return Err(AttemptError::Conflict);
            }
        }
        Ok(Some(after))
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
        self.events
            .push(Hotel::TYPE, &hotel_id.to_string(), version + 1, events)?;
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
            .bind(details.timezone())
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
            .bind(details.timezone())
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

    /// Appends every queued event in one statement, in stream order; the primary key
    /// rejects any stream version another writer appended first.
    pub async fn flush(self, conn: &mut PgConnection) -> Result<(), AttemptError> {
        let mut rows = self.events.rows;
        if rows.is_empty() {
            return Ok(());
        }
        // A fixed order (sorted stream ids) so concurrent writers meet in the same order.
        rows.sort_by(|a, b| {
            (a.aggregate_type, &a.aggregate_id, a.sequence).cmp(&(
                b.aggregate_type,
                &b.aggregate_id,
                b.sequence,
            ))
        });
        let types: Vec<&str> = rows.iter().map(|r| r.aggregate_type).collect();
        let ids: Vec<&str> = rows.iter().map(|r| r.aggregate_id.as_str()).collect();
        let sequences: Vec<i64> = rows.iter().map(|r| r.sequence).collect();
        let event_types: Vec<&str> = rows.iter().map(|r| r.event_type.as_str()).collect();
        let versions: Vec<&str> = rows.iter().map(|r| r.event_version.as_str()).collect();
        let payloads: Vec<&serde_json::Value> = rows.iter().map(|r| &r.payload).collect();
        sqlx::query(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type,
                    event_version, payload, metadata)
             SELECT t, i, s, e, v, p, $7
               FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[],
                           $6::jsonb[]) AS u(t, i, s, e, v, p)",
        )
        .bind(&types)
        .bind(&ids)
        .bind(&sequences)
        .bind(&event_types)
        .bind(&versions)
        .bind(&payloads)
        .bind(&self.metadata)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// `room_nights` rows to write, column by column.
#[derive(Default)]
struct NightRows {
    night: Vec<NaiveDate>,
    total_rooms: Vec<i32>,
    allowance: Vec<i32>,
    rate_cents: Vec<i64>,
    confirmed: Vec<i32>,
    held: Vec<i32>,
    expected: Vec<i64>,
    new_version: Vec<i64>,
}

impl NightRows {
    fn push(
        &mut self,
        night: NaiveDate,
        state: &RoomNight,
        expected: i64,
        new_version: i64,
    ) -> Result<(), AttemptError> {
        let Some(levels) = state.levels() else {
            return Err(internal("a night without inventory cannot be written"));
        };
        self.night.push(night);
        self.total_rooms.push(to_i32(levels.total_rooms())?);
        self.allowance.push(to_i32(levels.overbooking_allowance())?);
        self.rate_cents.push(levels.rate_cents());
        self.confirmed.push(to_i32(state.confirmed())?);
        self.held.push(to_i32(state.held())?);
        self.expected.push(expected);
        self.new_version.push(new_version);
        Ok(())
    }
}

/// `room_night_allocations` rows to upsert, column by column.
#[derive(Default)]
struct AllocationRows {
    night: Vec<NaiveDate>,
    reservation_id: Vec<Uuid>,
    rooms: Vec<i32>,
    expires_at: Vec<Option<DateTime<Utc>>>,
}

impl AllocationRows {
    fn push(
        &mut self,
        night: NaiveDate,
        id: ReservationId,
        rooms: u32,
        expires_at: Option<DateTime<Utc>>,
    ) -> Result<(), AttemptError> {
        self.night.push(night);
        self.reservation_id.push(id.as_uuid());
        self.rooms.push(to_i32(rooms)?);
        self.expires_at.push(expires_at);
        Ok(())
    }
}
