//! Loading the streams a command touches, from their inline state rows.
//!
//! A night is loaded from `room_nights` (its counters and version) plus only the
//! allocations the command can touch: the reservation's own, and every lapsed hold (which
//! a command that needs room drops). The domain never derives a count from the
//! allocation maps, so this partial load decides exactly as a full replay would.

use std::collections::BTreeMap;

use aggregates::{
    Hold, Hotel, HotelId, InventoryLevels, Nights, Reservation, ReservationId, RoomNight,
    RoomNightKey, RoomTypeId,
};
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::AttemptError;
use crate::error::CommandError;

fn corrupt(what: &str, e: impl std::fmt::Display) -> AttemptError {
    AttemptError::Fatal(CommandError::Internal(format!(
        "stored {what} unreadable: {e}"
    )))
}

/// A stream's inline state and the version it was at when loaded.
#[derive(Debug, Clone)]
pub struct LoadedReservation {
    pub reservation: Reservation,
    pub version: i64,
}

/// The nights of one hotel and room type that a command touches, with their versions
/// (absent: the night has no stream yet).
#[derive(Debug, Clone)]
pub struct LoadedNights {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub nights: Nights,
    pub versions: BTreeMap<NaiveDate, i64>,
}

/// What [`Loader::open`] found: the hotel, and each request's claim in request order.
#[derive(Debug)]
pub struct Opened {
    pub hotel: Hotel,
    pub hotel_version: i64,
    pub claims: Vec<Claim>,
}

/// One request's idempotency claim: whether its key's lock is ours, and its record.
#[derive(Debug)]
pub struct Claim {
    pub claimed: bool,
    pub record: Option<super::idempotency::StoredRecord>,
}

pub struct Loader<'c> {
    pub conn: &'c mut PgConnection,
}

impl Loader<'_> {
    /// Pessimistic strategy, first lock of a command: a transaction-scoped advisory lock
    /// on (hotel, room type), taken before any row lock.
    ///
    /// Every command that writes nights of a room type queues here, so a flash sale
    /// waits in line instead of retrying. It also keeps the event log's commit-order
    /// reading faithful to each stream's order: PostgreSQL assigns a transaction id at
    /// its first row lock or write, and an advisory lock needs none, so a command only
    /// gets its id after the previous writer of the same nights has committed. Without
    /// it, a command could take an id, then wait on a night another command locked
    /// later, and append that night's next event under a smaller transaction id than
    /// the event before it — and readers ordering by `(transaction_id, position)`
    /// would see the stream out of order. (Optimistic commands read before their first
    /// write, and fail if a stream moved meanwhile, so they keep the order too.)
    pub async fn lock_room_type(
        &mut self,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
    ) -> Result<(), AttemptError> {
        // The two-int advisory key space; ids beyond 2^31 fold onto smaller ones, which
        // only makes unrelated room types queue together.
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(hotel_id.get() as i32)
            .bind(room_type_id.get() as i32)
            .execute(&mut *self.conn)
            .await?;
        Ok(())
    }

    /// The first statement of a hold (or a batch of holds) — one round trip for three
    /// things: claim every request's idempotency key (`pg_try_advisory_xact_lock`, and
    /// its stored record), take the `(hotel, room type)` lock when `lock` (see
    /// [`Self::lock_room_type`]), and read the hotel.
    ///
    /// The records are read on the statement's snapshot, which may predate a duplicate
    /// that finished just before the key's lock was ours; that duplicate's record then
    /// makes the final write of this one refuse (`Conflict`), and the retry replays it.
    pub async fn open(
        &mut self,
        requests: &[&super::RequestFingerprint],
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        lock: bool,
    ) -> Result<Opened, AttemptError> {
        let lock_ids: Vec<i64> = requests.iter().map(|r| r.lock_id()).collect();
        let clients: Vec<&str> = requests.iter().map(|r| r.client.as_str()).collect();
        let keys: Vec<&str> = requests.iter().map(|r| r.key.as_str()).collect();
        let rows = sqlx::query(
            "WITH room_type AS MATERIALIZED (
                  SELECT CASE WHEN $6 THEN pg_advisory_xact_lock($4::int, $5::int) END AS locked
             ), claims AS MATERIALIZED (
                  SELECT u.ord, pg_try_advisory_xact_lock(u.lock_id) AS claimed, u.client, u.key
                    FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY
                         AS u(lock_id, client, key, ord)
             )
             SELECT 0::bigint AS ord, NULL::bool AS claimed, NULL::text AS request_hash,
                    NULL::text AS state, NULL::jsonb AS outcome, h.state AS hotel_state,
                    h.version AS hotel_version
               FROM room_type LEFT JOIN hotels h ON h.hotel_id = $7
             UNION ALL
             SELECT c.ord, c.claimed, k.request_hash, k.state, k.outcome, NULL, NULL
               FROM claims c
               LEFT JOIN idempotency_keys k
                      ON k.client = c.client AND k.key = c.key
                     AND k.created_at > now() - interval '24 hours'
             ORDER BY ord",
        )
        .bind(&lock_ids)
        .bind(&clients)
        .bind(&keys)
        .bind(hotel_id.get() as i32)
        .bind(room_type_id.get() as i32)
        .bind(lock)
        .bind(hotel_id.get())
        .fetch_all(&mut *self.conn)
        .await?;
        let mut opened = Opened {
            hotel: Hotel::default(),
            hotel_version: 0,
            claims: Vec::with_capacity(requests.len()),
        };
        for row in rows {
            let ord: i64 = row.try_get("ord")?;
            if ord == 0 {
                if let Some(state) = row.try_get::<Option<serde_json::Value>, _>("hotel_state")? {
                    opened.hotel =
                        serde_json::from_value(state).map_err(|e| corrupt("hotel", e))?;
                    opened.hotel_version = row.try_get("hotel_version")?;
                }
                continue;
            }
            let claimed: bool = row.try_get::<Option<bool>, _>("claimed")?.unwrap_or(false);
            let record = match row.try_get::<Option<String>, _>("request_hash")? {
                Some(request_hash) => Some(super::idempotency::StoredRecord {
                    request_hash,
                    state: row.try_get("state")?,
                    outcome: row.try_get("outcome")?,
                }),
                None => None,
            };
            opened.claims.push(Claim { claimed, record });
        }
        if opened.claims.len() != requests.len() {
            return Err(corrupt("claims", "one claim per request expected"));
        }
        Ok(opened)
    }

    /// The hotel aggregate and its version (a default aggregate at version 0 if unknown).
    pub async fn hotel(&mut self, hotel_id: HotelId) -> Result<(Hotel, i64), AttemptError> {
        let row = sqlx::query("SELECT state, version FROM hotels WHERE hotel_id = $1")
            .bind(hotel_id.get())
            .fetch_optional(&mut *self.conn)
            .await?;
        match row {
            None => Ok((Hotel::default(), 0)),
            Some(row) => {
                let state: serde_json::Value = row.try_get("state")?;
                let hotel = serde_json::from_value(state).map_err(|e| corrupt("hotel", e))?;
                Ok((hotel, row.try_get("version")?))
            }
        }
    }

    /// The reservation and its version; `lock` takes its row `FOR UPDATE` so concurrent
    /// commands on one reservation queue (pessimistic strategy).
    pub async fn reservation(
        &mut self,
        reservation_id: ReservationId,
        lock: bool,
    ) -> Result<Option<LoadedReservation>, AttemptError> {
        let sql = if lock {
            "SELECT state, version FROM reservations WHERE reservation_id = $1 FOR UPDATE"
        } else {
            "SELECT state, version FROM reservations WHERE reservation_id = $1"
        };
        let row = sqlx::query(sql)
            .bind(reservation_id.as_uuid())
            .fetch_optional(&mut *self.conn)
            .await?;
        match row {
            None => Ok(None),
            Some(row) => {
                let state: serde_json::Value = row.try_get("state")?;
                let reservation =
                    serde_json::from_value(state).map_err(|e| corrupt("reservation", e))?;
                Ok(Some(LoadedReservation {
                    reservation,
                    version: row.try_get("version")?,
                }))
            }
        }
    }

    /// The given nights, in night order. With `lock`, their rows are locked `FOR UPDATE`
    /// in that order before anything is decided.
    pub async fn nights(
        &mut self,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        dates: &[NaiveDate],
        reservation_id: Option<ReservationId>,
        now: DateTime<Utc>,
        lock: bool,
    ) -> Result<LoadedNights, AttemptError> {
        // One statement for the nights and the allocations a command can touch. Under
        // the pessimistic strategy the `(hotel, room type)` lock is already ours, so no
        // writer of these rows is running and one snapshot sees them all as they are;
        // under the optimistic one, one snapshot is exactly what the version checks at
        // write time compare against.
        let sql = format!(
            "WITH n AS (
                  SELECT night, total_rooms, overbooking_allowance, rate_cents, confirmed, held,
                         version
                    FROM room_nights
                   WHERE hotel_id = $1 AND room_type_id = $2 AND night = ANY($3)
                   ORDER BY night
                   {lock})
             SELECT true AS is_night, night, total_rooms, overbooking_allowance, rate_cents,
                    confirmed, held, version, NULL::uuid AS reservation_id, NULL::int AS rooms,
                    NULL::timestamptz AS expires_at
               FROM n
             UNION ALL
             SELECT false, night, NULL, NULL, NULL, NULL, NULL, NULL, reservation_id, rooms,
                    expires_at
               FROM room_night_allocations
              WHERE hotel_id = $1 AND room_type_id = $2 AND night = ANY($3)
                AND (reservation_id = $4 OR expires_at <= $5)",
            lock = if lock { "FOR UPDATE" } else { "" }
        );
        let reservation_uuid = reservation_id.map(|r| r.as_uuid()).unwrap_or(Uuid::nil());
        // Planned for its actual arguments every time (an unnamed statement), unlike the
        // rest of the write path (generic plans, see `db::write_pool`): the
        // allocations of a hot night grow by thousands a minute, and a generic plan made
        // while the table was small scans all of them (measured: 9 ms instead of 0.03).
        let all_rows = sqlx::query(&sql)
            .persistent(false)
            .bind(hotel_id.get())
            .bind(room_type_id.get())
            .bind(dates)
            .bind(reservation_uuid)
            .bind(now)
            .fetch_all(&mut *self.conn)
            .await?;
        let (rows, allocation_rows): (Vec<_>, Vec<_>) = all_rows
            .into_iter()
            .partition(|row| row.try_get::<bool, _>("is_night").unwrap_or(false));

        let mut holds: BTreeMap<NaiveDate, BTreeMap<ReservationId, Hold>> = BTreeMap::new();
        let mut confirmations: BTreeMap<NaiveDate, BTreeMap<ReservationId, u32>> = BTreeMap::new();
        for row in allocation_rows {
            let night: NaiveDate = row.try_get("night")?;
            let id = ReservationId::from_uuid(
                row.try_get::<Option<Uuid>, _>("reservation_id")?
                    .ok_or_else(|| corrupt("allocation", "no reservation id"))?,
            );
            let rooms = non_negative(row.try_get::<Option<i32>, _>("rooms")?.unwrap_or(0))?;
            match row.try_get::<Option<DateTime<Utc>>, _>("expires_at")? {
                Some(expires_at) => {
                    holds
                        .entry(night)
                        .or_default()
                        .insert(id, Hold { rooms, expires_at });
                }
                None => {
                    confirmations.entry(night).or_default().insert(id, rooms);
                }
            }
        }

        let mut loaded = LoadedNights {
            hotel_id,
            room_type_id,
            nights: Nights::new(),
            versions: BTreeMap::new(),
        };
        for row in rows {
            let night: NaiveDate = row.try_get("night")?;
            let levels = InventoryLevels::parse(
                i64::from(row.try_get::<i32, _>("total_rooms")?),
                i64::from(row.try_get::<i32, _>("overbooking_allowance")?),
                row.try_get("rate_cents")?,
            )
            .map_err(|e| corrupt("room night", e))?;
            let state = RoomNight::from_snapshot(
                RoomNightKey::new(hotel_id, room_type_id, night),
                levels,
                non_negative(row.try_get("confirmed")?)?,
                non_negative(row.try_get("held")?)?,
                holds.remove(&night).unwrap_or_default(),
                confirmations.remove(&night).unwrap_or_default(),
            );
            loaded.versions.insert(night, row.try_get("version")?);
            loaded.nights.insert(night, state);
        }
        Ok(loaded)
    }
}

fn non_negative(value: i32) -> Result<u32, AttemptError> {
    u32::try_from(value).map_err(|e| corrupt("room count", e))
}
