//! Daily occupancy and revenue (`occupancy_daily`, `occupancy_confirmations`): per
//! (hotel, room type, night) the inventory, rooms confirmed and held, revenue, holds
//! placed and lapsed, and cancellations (see the [module docs](super)).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use aggregates::{CommandName, RoomNightEvent, RoomNightKey, TypedEvent};
use chrono::NaiveDate;
use columns::{columns, Columns, Statement};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{to_i32, OCCUPANCY};
use crate::log::StoredEvent;
use crate::runner::Projection;

/// What the projection reads of an event's metadata: the command that wrote it (a
/// night released by a cancellation counts as one).
#[derive(serde::Deserialize)]
struct CommandOf<'a> {
    #[serde(borrow)]
    command: Option<&'a str>,
}

/// Daily occupancy, revenue, holds and cancellations; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Occupancy;

/// One room-night stream: `{hotel}:{room type}:{YYYY-MM-DD}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct NightKey {
    hotel_id: i64,
    room_type_id: i64,
    night: NaiveDate,
}

impl From<&RoomNightKey> for NightKey {
    fn from(key: &RoomNightKey) -> Self {
        Self {
            hotel_id: key.hotel_id.get(),
            room_type_id: key.room_type_id.get(),
            night: key.night,
        }
    }
}

/// An `occupancy_daily` row in memory (counts widened to i64 while folding).
#[derive(Debug, Clone, Default, PartialEq)]
struct Daily {
    total_rooms: i64,
    overbooking_allowance: i64,
    rate_cents: i64,
    confirmed: i64,
    held: i64,
    revenue_cents: i64,
    holds_placed: i64,
    holds_lapsed: i64,
    cancellations: i64,
    version: i64,
}

/// An `occupancy_daily` row as stored.
#[derive(sqlx::FromRow)]
struct StoredDaily {
    hotel_id: i64,
    room_type_id: i64,
    night: NaiveDate,
    total_rooms: i32,
    overbooking_allowance: i32,
    rate_cents: i64,
    confirmed: i32,
    held: i32,
    revenue_cents: i64,
    holds_placed: i64,
    holds_lapsed: i64,
    cancellations: i64,
    version: i64,
}

/// An `occupancy_confirmations` row: what one reservation's confirmed rooms on one night
/// added to its revenue.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Confirmation {
    rooms: i64,
    revenue_cents: i64,
}

/// Everything a batch touches, loaded once and written back once.
#[derive(Default)]
struct OccupancyState {
    nights: HashMap<NightKey, Daily>,
    /// The nights that have a row (read by `load`): updated, where the others are
    /// inserted. (An upsert locks each row it updates with a WAL record of its own.)
    stored_nights: HashSet<NightKey>,
    changed_nights: HashSet<NightKey>,
    /// `None`: no confirmed allocation (deleted if it was stored).
    confirmations: HashMap<(NightKey, Uuid), Option<Confirmation>>,
    changed_confirmations: HashSet<(NightKey, Uuid)>,
}

impl OccupancyState {
    fn confirm(&mut self, key: NightKey, reservation: Uuid, rooms: i64) {
        let night = self.nights.entry(key).or_default();
        let amount = rooms.saturating_mul(night.rate_cents);
        night.revenue_cents = night.revenue_cents.saturating_add(amount);
        let slot = self.confirmations.entry((key, reservation)).or_insert(None);
        // A second confirmation of the same allocation cannot be written (the aggregate
        // decides it is a no-op); were one ever recorded, adding keeps revenue equal to
        // what a later release takes back.
        let previous = slot.unwrap_or(Confirmation {
            rooms: 0,
            revenue_cents: 0,
        });
        *slot = Some(Confirmation {
            rooms: previous.rooms.saturating_add(rooms),
            revenue_cents: previous.revenue_cents.saturating_add(amount),
        });
        self.changed_confirmations.insert((key, reservation));
    }

    /// Applies one night event; `false` if it was already applied.
    fn fold(
        &mut self,
        key: NightKey,
        sequence: i64,
        event: &RoomNightEvent,
        by_cancellation: bool,
    ) -> bool {
        let night = self.nights.entry(key).or_default();
        if night.version >= sequence {
            return false;
        }
        night.version = sequence;
        self.changed_nights.insert(key);
        // Counters saturate at zero as the aggregate's do, so a corrupt history shows as
        // odd numbers here rather than a stalled projection.
        let minus = |value: i64, rooms: u32| (value - i64::from(rooms)).max(0);
        match *event {
            RoomNightEvent::InventorySet {
                total_rooms,
                overbooking_allowance,
                rate_cents,
                ..
            } => {
                night.total_rooms = i64::from(total_rooms);
                night.overbooking_allowance = i64::from(overbooking_allowance);
                night.rate_cents = rate_cents.get();
            }
            RoomNightEvent::RoomsHeld { rooms, .. }
            | RoomNightEvent::BlockRoomsHeld { rooms, .. } => {
                night.held += i64::from(rooms);
                night.holds_placed += i64::from(rooms);
            }
            // Restrictions and plans' own rates shape what may be sold, not what was:
            // occupancy and revenue follow the rooms taken.
            RoomNightEvent::RestrictionsSet { .. } | RoomNightEvent::PlanRateSet { .. } => {}
            // Rooms a block sets aside are not sold until its people book them (the
            // block's pickups below count as any booking does).
            RoomNightEvent::BlockSet { .. }
            | RoomNightEvent::BlockRemoved { .. }
            | RoomNightEvent::BlockReleased { .. } => {}
            RoomNightEvent::RoomsBooked {
                reservation_id,
                rooms,
            } => {
                night.confirmed += i64::from(rooms);
                self.confirm(key, reservation_id.as_uuid(), i64::from(rooms));
            }
            RoomNightEvent::HoldConfirmed {
                reservation_id,
                rooms,
            } => {
                night.held = minus(night.held, rooms);
                night.confirmed += i64::from(rooms);
                self.confirm(key, reservation_id.as_uuid(), i64::from(rooms));
            }
            RoomNightEvent::HoldLapsed { rooms, .. }
            | RoomNightEvent::BlockHoldLapsed { rooms, .. } => {
                night.held = minus(night.held, rooms);
                night.holds_lapsed += i64::from(rooms);
            }
            RoomNightEvent::RoomsReleased {
                reservation_id,
                rooms,
                was_confirmed,
            }
            | RoomNightEvent::BlockRoomsReleased {
                reservation_id,
                rooms,
                was_confirmed,
                ..
            } => {
                if was_confirmed {
                    night.confirmed = minus(night.confirmed, rooms);
                    let slot_key = (key, reservation_id.as_uuid());
                    let stored = self.confirmations.insert(slot_key, None).flatten();
                    self.changed_confirmations.insert(slot_key);
                    let amount = match stored {
                        Some(confirmation) => confirmation.revenue_cents,
                        None => {
                            // The confirmation is always applied before its release;
                            // without it, today's rate is the best estimate.
                            tracing::warn!(reservation = %reservation_id, ?key, "release of a confirmation the projection never saw");
                            i64::from(rooms).saturating_mul(night.rate_cents)
                        }
                    };
                    night.revenue_cents = night.revenue_cents.saturating_sub(amount);
                } else {
                    night.held = minus(night.held, rooms);
                }
                if by_cancellation {
                    night.cancellations += i64::from(rooms);
                }
            }
        }
        true
    }
}

columns! {
    /// `occupancy_daily` rows to write, column by column (generation apart).
    struct NightColumns {
        hotel_id: i64 = "bigint",
        room_type_id: i64 = "bigint",
        night: NaiveDate = "date",
        total_rooms: i32 = "int",
        overbooking_allowance: i32 = "int",
        rate_cents: i64 = "bigint",
        confirmed: i32 = "int",
        held: i32 = "int",
        revenue_cents: i64 = "bigint",
        holds_placed: i64 = "bigint",
        holds_lapsed: i64 = "bigint",
        cancellations: i64 = "bigint",
        version: i64 = "bigint",
    }
}

/// Nights of generation `$1` that have a row.
const UPDATE_NIGHTS: Statement = Statement::new(
    "UPDATE occupancy_daily AS d
        SET total_rooms = nights.total_rooms,
            overbooking_allowance = nights.overbooking_allowance,
            rate_cents = nights.rate_cents, confirmed = nights.confirmed,
            held = nights.held, revenue_cents = nights.revenue_cents,
            holds_placed = nights.holds_placed, holds_lapsed = nights.holds_lapsed,
            cancellations = nights.cancellations, version = nights.version
       FROM {nights}
      WHERE d.generation = $1 AND d.hotel_id = nights.hotel_id
        AND d.room_type_id = nights.room_type_id AND d.night = nights.night",
)
.after(1);

/// Nights of generation `$1` that have none yet.
const INSERT_NIGHTS: Statement = Statement::new(
    "INSERT INTO occupancy_daily (generation, hotel_id, room_type_id, night, total_rooms,
            overbooking_allowance, rate_cents, confirmed, held, revenue_cents,
            holds_placed, holds_lapsed, cancellations, version)
     SELECT $1, nights.hotel_id, nights.room_type_id, nights.night, nights.total_rooms,
            nights.overbooking_allowance, nights.rate_cents, nights.confirmed,
            nights.held, nights.revenue_cents, nights.holds_placed, nights.holds_lapsed,
            nights.cancellations, nights.version
       FROM {nights}",
)
.after(1);

impl Occupancy {
    /// Runs `statement` with the nights as the row set `nights` (generation `$1`).
    async fn write_nights(
        tx: &mut PgConnection,
        generation: i32,
        nights: &[(NightKey, &Daily)],
        statement: Statement,
        sql: &'static OnceLock<String>,
    ) -> anyhow::Result<()> {
        if nights.is_empty() {
            return Ok(());
        }
        let mut columns = NightColumns::default();
        for (key, row) in nights {
            columns.hotel_id.push(key.hotel_id);
            columns.room_type_id.push(key.room_type_id);
            columns.night.push(key.night);
            columns
                .total_rooms
                .push(to_i32(row.total_rooms, "total_rooms")?);
            columns
                .overbooking_allowance
                .push(to_i32(row.overbooking_allowance, "overbooking_allowance")?);
            columns.rate_cents.push(row.rate_cents);
            columns.confirmed.push(to_i32(row.confirmed, "confirmed")?);
            columns.held.push(to_i32(row.held, "held")?);
            columns.revenue_cents.push(row.revenue_cents);
            columns.holds_placed.push(row.holds_placed);
            columns.holds_lapsed.push(row.holds_lapsed);
            columns.cancellations.push(row.cancellations);
            columns.version.push(row.version);
        }
        let sets: [(&str, &dyn Columns); 1] = [("nights", &columns)];
        let sql = sql.get_or_init(|| statement.render(&sets));
        Statement::bind(sqlx::query(sql).bind(generation), &sets)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    async fn load(
        tx: &mut PgConnection,
        generation: i32,
        keys: &[NightKey],
        releases: &[(NightKey, Uuid)],
    ) -> anyhow::Result<OccupancyState> {
        let mut state = OccupancyState::default();
        let rows: Vec<StoredDaily> = sqlx::query_as(
            "SELECT d.hotel_id, d.room_type_id, d.night, d.total_rooms,
                    d.overbooking_allowance, d.rate_cents, d.confirmed, d.held,
                    d.revenue_cents, d.holds_placed, d.holds_lapsed, d.cancellations,
                    d.version
               FROM occupancy_daily d
               JOIN unnest($2::bigint[], $3::bigint[], $4::date[]) AS k (h, t, n)
                 ON d.hotel_id = k.h AND d.room_type_id = k.t AND d.night = k.n
              WHERE d.generation = $1",
        )
        .bind(generation)
        .bind(keys.iter().map(|k| k.hotel_id).collect::<Vec<_>>())
        .bind(keys.iter().map(|k| k.room_type_id).collect::<Vec<_>>())
        .bind(keys.iter().map(|k| k.night).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
        for row in rows {
            let key = NightKey {
                hotel_id: row.hotel_id,
                room_type_id: row.room_type_id,
                night: row.night,
            };
            state.stored_nights.insert(key);
            state.nights.insert(
                key,
                Daily {
                    total_rooms: i64::from(row.total_rooms),
                    overbooking_allowance: i64::from(row.overbooking_allowance),
                    rate_cents: row.rate_cents,
                    confirmed: i64::from(row.confirmed),
                    held: i64::from(row.held),
                    revenue_cents: row.revenue_cents,
                    holds_placed: row.holds_placed,
                    holds_lapsed: row.holds_lapsed,
                    cancellations: row.cancellations,
                    version: row.version,
                },
            );
        }
        if !releases.is_empty() {
            let rows: Vec<(i64, i64, NaiveDate, Uuid, i32, i64)> = sqlx::query_as(
                "SELECT c.hotel_id, c.room_type_id, c.night, c.reservation_id, c.rooms,
                        c.revenue_cents
                   FROM occupancy_confirmations c
                   JOIN unnest($2::bigint[], $3::bigint[], $4::date[], $5::uuid[]) AS k (h, t, n, r)
                     ON c.hotel_id = k.h AND c.room_type_id = k.t AND c.night = k.n
                    AND c.reservation_id = k.r
                  WHERE c.generation = $1",
            )
            .bind(generation)
            .bind(releases.iter().map(|(k, _)| k.hotel_id).collect::<Vec<_>>())
            .bind(
                releases
                    .iter()
                    .map(|(k, _)| k.room_type_id)
                    .collect::<Vec<_>>(),
            )
            .bind(releases.iter().map(|(k, _)| k.night).collect::<Vec<_>>())
            .bind(releases.iter().map(|(_, r)| *r).collect::<Vec<_>>())
            .fetch_all(&mut *tx)
            .await?;
            for (h, t, n, reservation, rooms, revenue_cents) in rows {
                let key = NightKey {
                    hotel_id: h,
                    room_type_id: t,
                    night: n,
                };
                state.confirmations.insert(
                    (key, reservation),
                    Some(Confirmation {
                        rooms: i64::from(rooms),
                        revenue_cents,
                    }),
                );
            }
        }
        Ok(state)
    }

    async fn store(
        tx: &mut PgConnection,
        generation: i32,
        state: &OccupancyState,
    ) -> anyhow::Result<()> {
        let (mut updated, mut inserted) = (Vec::new(), Vec::new());
        for key in &state.changed_nights {
            if let Some(row) = state.nights.get(key) {
                if state.stored_nights.contains(key) {
                    updated.push((*key, row));
                } else {
                    inserted.push((*key, row));
                }
            }
        }
        // The nights that have a row are updated; the others inserted (the transaction
        // holds this projection's checkpoint lock, so no other writer adds one between).
        static UPDATE_SQL: OnceLock<String> = OnceLock::new();
        static INSERT_SQL: OnceLock<String> = OnceLock::new();
        Self::write_nights(tx, generation, &updated, UPDATE_NIGHTS, &UPDATE_SQL).await?;
        Self::write_nights(tx, generation, &inserted, INSERT_NIGHTS, &INSERT_SQL).await?;

        let mut gone: Vec<(NightKey, Uuid)> = Vec::new();
        let mut kept: Vec<(NightKey, Uuid, Confirmation)> = Vec::new();
        for slot in &state.changed_confirmations {
            match state.confirmations.get(slot).copied().flatten() {
                Some(confirmation) => kept.push((slot.0, slot.1, confirmation)),
                None => gone.push(*slot),
            }
        }
        if !gone.is_empty() {
            sqlx::query(
                "DELETE FROM occupancy_confirmations c
                  USING unnest($2::bigint[], $3::bigint[], $4::date[], $5::uuid[]) AS k (h, t, n, r)
                  WHERE c.generation = $1 AND c.hotel_id = k.h AND c.room_type_id = k.t
                    AND c.night = k.n AND c.reservation_id = k.r",
            )
            .bind(generation)
            .bind(gone.iter().map(|(k, _)| k.hotel_id).collect::<Vec<_>>())
            .bind(gone.iter().map(|(k, _)| k.room_type_id).collect::<Vec<_>>())
            .bind(gone.iter().map(|(k, _)| k.night).collect::<Vec<_>>())
            .bind(gone.iter().map(|(_, r)| *r).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
        }
        if !kept.is_empty() {
            let rooms = kept
                .iter()
                .map(|(_, _, c)| to_i32(c.rooms, "rooms"))
                .collect::<anyhow::Result<Vec<i32>>>()?;
            sqlx::query(
                "INSERT INTO occupancy_confirmations (generation, hotel_id, room_type_id, night,
                        reservation_id, rooms, revenue_cents)
                 SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::date[], $5::uuid[],
                        $6::int[], $7::bigint[])
                 ON CONFLICT (generation, hotel_id, room_type_id, night, reservation_id)
                 DO UPDATE SET rooms = excluded.rooms, revenue_cents = excluded.revenue_cents",
            )
            .bind(generation)
            .bind(kept.iter().map(|(k, _, _)| k.hotel_id).collect::<Vec<_>>())
            .bind(
                kept.iter()
                    .map(|(k, _, _)| k.room_type_id)
                    .collect::<Vec<_>>(),
            )
            .bind(kept.iter().map(|(k, _, _)| k.night).collect::<Vec<_>>())
            .bind(kept.iter().map(|(_, r, _)| *r).collect::<Vec<_>>())
            .bind(rooms)
            .bind(
                kept.iter()
                    .map(|(_, _, c)| c.revenue_cents)
                    .collect::<Vec<_>>(),
            )
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    }
}

/// The new holds of one night in a batch: their rooms, and the first and last sequence.
struct HeldRun {
    rooms: i64,
    first: i64,
    last: i64,
}

impl Occupancy {
    /// Adds the holds of the nights that have nothing else in `events` to their rows,
    /// where a row is exactly at the version before them; returns the nights updated.
    async fn add_holds(
        tx: &mut PgConnection,
        generation: i32,
        events: &[(NightKey, i64, &RoomNightEvent, bool)],
    ) -> anyhow::Result<HashSet<NightKey>> {
        let mut runs: HashMap<NightKey, HeldRun> = HashMap::new();
        let mut mixed: HashSet<NightKey> = HashSet::new();
        for (key, sequence, event, _) in events {
            if mixed.contains(key) {
                continue;
            }
            match (*event, runs.get_mut(key)) {
                (RoomNightEvent::RoomsHeld { rooms, .. }, Some(run))
                    if *sequence == run.last + 1 =>
                {
                    run.rooms += i64::from(*rooms);
                    run.last = *sequence;
                }
                (RoomNightEvent::RoomsHeld { rooms, .. }, None) => {
                    runs.insert(
                        *key,
                        HeldRun {
                            rooms: i64::from(*rooms),
                            first: *sequence,
                            last: *sequence,
                        },
                    );
                }
                _ => {
                    runs.remove(key);
                    mixed.insert(*key);
                }
            }
        }
        if runs.is_empty() {
            return Ok(HashSet::new());
        }
        let runs: Vec<(NightKey, HeldRun)> = runs.into_iter().collect();
        let updated: Vec<(i64, i64, NaiveDate)> = sqlx::query_as(
            "UPDATE occupancy_daily AS d
                SET held = d.held + u.rooms, holds_placed = d.holds_placed + u.rooms,
                    version = u.last
               FROM unnest($2::bigint[], $3::bigint[], $4::date[], $5::bigint[],
                           $6::bigint[], $7::bigint[])
                    AS u (hotel_id, room_type_id, night, rooms, first, last)
              WHERE d.generation = $1 AND d.hotel_id = u.hotel_id
                AND d.room_type_id = u.room_type_id AND d.night = u.night
                AND d.version = u.first - 1
          RETURNING d.hotel_id, d.room_type_id, d.night",
        )
        .bind(generation)
        .bind(runs.iter().map(|(k, _)| k.hotel_id).collect::<Vec<_>>())
        .bind(runs.iter().map(|(k, _)| k.room_type_id).collect::<Vec<_>>())
        .bind(runs.iter().map(|(k, _)| k.night).collect::<Vec<_>>())
        .bind(runs.iter().map(|(_, r)| r.rooms).collect::<Vec<_>>())
        .bind(runs.iter().map(|(_, r)| r.first).collect::<Vec<_>>())
        .bind(runs.iter().map(|(_, r)| r.last).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
        Ok(updated
            .into_iter()
            .map(|(hotel_id, room_type_id, night)| NightKey {
                hotel_id,
                room_type_id,
                night,
            })
            .collect())
    }
}

impl Projection for Occupancy {
    fn name(&self) -> &'static str {
        OCCUPANCY
    }

    async fn apply(
        &mut self,
        tx: &mut PgConnection,
        generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let mut events = Vec::new();
        for stored in batch {
            match stored.typed_for(OCCUPANCY)? {
                TypedEvent::RoomNight { key, event } => {
                    let by_cancellation =
                        serde_json::from_str::<CommandOf<'_>>(stored.metadata.get())
                            .ok()
                            .and_then(|m| m.command)
                            .and_then(CommandName::parse)
                            == Some(CommandName::Cancel);
                    events.push((NightKey::from(key), stored.sequence, event, by_cancellation));
                }
                TypedEvent::Hotel { .. }
                | TypedEvent::Reservation { .. }
                | TypedEvent::Block { .. } => {}
            }
        }
        if events.is_empty() {
            return Ok(());
        }
        // Nights whose every event here is a new hold (most nights under a booking
        // load) only count up: they are updated by their sums without being read
        // first. The others, and any of these whose row is not exactly at the version
        // before (missing, or already past it: a batch applied again), are read,
        // folded event by event and written back.
        let added = Self::add_holds(tx, generation, &events).await?;
        events.retain(|(key, ..)| !added.contains(key));
        if events.is_empty() {
            return Ok(());
        }
        let keys: Vec<NightKey> = events
            .iter()
            .map(|(key, ..)| *key)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        // Only a release of confirmed rooms needs the stored amount of its confirmation.
        let releases: Vec<(NightKey, Uuid)> = events
            .iter()
            .filter_map(|(key, _, event, _)| match event {
                RoomNightEvent::RoomsReleased {
                    reservation_id,
                    was_confirmed: true,
                    ..
                }
                | RoomNightEvent::BlockRoomsReleased {
                    reservation_id,
                    was_confirmed: true,
                    ..
                } => Some((*key, reservation_id.as_uuid())),
                _ => None,
            })
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let mut state = Self::load(tx, generation, &keys, &releases).await?;
        for (key, sequence, event, by_cancellation) in events {
            state.fold(key, sequence, event, by_cancellation);
        }
        Self::store(tx, generation, &state).await
    }

    async fn clear(&mut self, conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM occupancy_confirmations WHERE generation = $1")
            .bind(generation)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM occupancy_daily WHERE generation = $1")
            .bind(generation)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn night_key(stream: &str) -> anyhow::Result<NightKey> {
        Ok(NightKey::from(&RoomNightKey::parse_stream_id(stream)?))
    }

    #[test]
    fn stream_ids_parse() {
        let key = night_key("812:3:2027-06-01").expect("valid");
        assert_eq!(
            (key.hotel_id, key.room_type_id, key.night.to_string()),
            (812, 3, "2027-06-01".to_owned())
        );
        assert!(night_key("812:3").is_err());
        assert!(night_key("812:x:2027-06-01").is_err());
        assert!(night_key("812:3:2027-13-01").is_err());
        let id = Uuid::new_v4();
        let reservation = |stream: &str| {
            aggregates::contract::parse_reservation_stream_id(stream).map(|(_, r)| r.as_uuid())
        };
        assert_eq!(reservation(&format!("812:{id}")).expect("valid"), id);
        assert!(reservation("812:not-a-uuid").is_err());
        assert!(reservation("no-colon").is_err());
    }

    fn night_event(
        state: &mut OccupancyState,
        sequence: i64,
        event: RoomNightEvent,
        cancel: bool,
    ) -> bool {
        let key = night_key("1:1:2027-06-01").expect("valid");
        state.fold(key, sequence, &event, cancel)
    }

    #[test]
    fn a_release_takes_back_exactly_what_its_confirmation_added() {
        let reservation = aggregates::ReservationId::from_uuid(Uuid::new_v4());
        let other = aggregates::ReservationId::from_uuid(Uuid::new_v4());
        let key = night_key("1:1:2027-06-01").expect("valid");
        let mut state = OccupancyState::default();
        let inventory = |rate| RoomNightEvent::InventorySet {
            key: aggregates::RoomNightKey::new(
                aggregates::HotelId::parse(1).expect("id"),
                aggregates::RoomTypeId::parse(1).expect("id"),
                key.night,
            ),
            total_rooms: 10,
            overbooking_allowance: 0,
            rate_cents: aggregates::Cents::new(rate),
        };
        assert!(night_event(&mut state, 1, inventory(100), false));
        assert!(night_event(
            &mut state,
            2,
            RoomNightEvent::RoomsBooked {
                reservation_id: reservation,
                rooms: 2
            },
            false
        ));
        assert!(night_event(&mut state, 3, inventory(500), false));
        assert!(night_event(
            &mut state,
            4,
            RoomNightEvent::RoomsBooked {
                reservation_id: other,
                rooms: 1
            },
            false
        ));
        assert_eq!(state.nights[&key].revenue_cents, 2 * 100 + 500);
        assert!(night_event(
            &mut state,
            5,
            RoomNightEvent::RoomsReleased {
                reservation_id: reservation,
                rooms: 2,
                was_confirmed: true
            },
            true
        ));
        let night = &state.nights[&key];
        assert_eq!(
            (night.revenue_cents, night.confirmed, night.cancellations),
            (500, 1, 2)
        );
        // A repeat of an applied event changes nothing.
        assert!(!night_event(
            &mut state,
            5,
            RoomNightEvent::RoomsReleased {
                reservation_id: other,
                rooms: 1,
                was_confirmed: true
            },
            true
        ));
        assert_eq!(state.nights[&key].revenue_cents, 500);
        assert_eq!(state.confirmations[&(key, reservation.as_uuid())], None);
    }
}
