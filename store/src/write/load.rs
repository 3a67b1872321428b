//! Loading the streams a command touches, from their inline state rows.
//!
//! A night is loaded from `room_nights` (its counters and version) plus only the
//! allocations the command can touch: the reservation's own, and every lapsed hold (which
//! a command that needs room drops). The domain never derives a count from the
//! allocation maps, so this partial load decides exactly as a full replay would.

use std::collections::{BTreeMap, HashMap};

use aggregates::{
    BlockCode, Cents, Hold, Hotel, HotelId, InventoryLevels, Nights, Reservation, ReservationId,
    RoomNight, RoomNightKey, RoomTypeId,
};
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::attempt::AttemptError;
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

/// A (hotel, room type): the unit the write path locks and batches by.
pub type Room = (HotelId, RoomTypeId);

/// What [`Loader::open`] found: the hotels, and each request's claim in request order.
#[derive(Debug)]
pub struct Opened {
    pub hotels: HashMap<HotelId, Hotel>,
    /// Each hotel's version as read (see `Writer::expect_catalog`).
    pub versions: HashMap<HotelId, i64>,
    pub claims: Vec<Claim>,
}

impl Opened {
    /// A hotel read by `open` (a default aggregate if unknown).
    pub fn hotel(&self, hotel_id: HotelId) -> &Hotel {
        static UNKNOWN: std::sync::OnceLock<Hotel> = std::sync::OnceLock::new();
        self.hotels
            .get(&hotel_id)
            .unwrap_or_else(|| UNKNOWN.get_or_init(Hotel::default))
    }

    /// The version a hotel was read at; 0 for one not found.
    pub fn version(&self, hotel_id: HotelId) -> i64 {
        self.versions.get(&hotel_id).copied().unwrap_or(0)
    }
}

/// The nights of one (hotel, room type) a command or a batch wants loaded.
#[derive(Debug, Clone)]
pub struct WantedNights {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub dates: Vec<NaiveDate>,
    /// Nights read but neither locked nor written: a stay's check-out day, whose
    /// `closed_to_departure` binds it. A date also in `dates` is loaded as one of those.
    ///
    /// Under the locking strategies (group commit, the default, and pessimistic) it
    /// cannot change under the decision: every writer of a room type's nights holds its
    /// lock. Under the optimistic strategy nothing guards it between the read and the
    /// commit. Checking its version would refuse every hold whose check-out day another
    /// hold had just booked (the version moves with the counters), and a lock on it
    /// queues those holds behind each other, which is the pessimistic strategy; so an
    /// optimistic hold meets the check-out day's restrictions as they were when it read
    /// them.
    pub peek: Vec<NaiveDate>,
}

/// One request's idempotency claim: whether its key's lock is ours, and its record.
#[derive(Debug)]
pub struct Claim {
    pub claimed: bool,
    pub record: Option<super::idempotency::StoredRecord>,
}

/// The first statement of a hold or a batch of holds ([`Loader::open`]): `$1..$3` the
/// requests' lock ids, clients and keys, `$4, $5` the rooms' advisory keys, `$6`
/// whether to lock them exclusively (else shared), `$7` the hotels.
static OPEN_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("WITH {OPEN_CTES} {OPEN_SELECT} ORDER BY ord"));

/// [`OPEN_SQL`]'s CTEs: the rooms' locks (`rooms`, one row) and the requests' claims.
const OPEN_CTES: &str = "rooms AS MATERIALIZED (
                  SELECT count(*) AS locked
                    FROM (SELECT pg_advisory_xact_lock(r.hotel, r.room_type)
                            FROM unnest($4::int[], $5::int[]) AS r(hotel, room_type)
                           WHERE $6
                          UNION ALL
                          SELECT pg_advisory_xact_lock_shared(r.hotel, r.room_type)
                            FROM unnest($4::int[], $5::int[]) AS r(hotel, room_type)
                           WHERE NOT $6) l
             ), claims AS MATERIALIZED (
                  SELECT u.ord, pg_try_advisory_xact_lock(u.lock_id) AS claimed, u.client, u.key
                    FROM unnest($1::bigint[], $2::text[], $3::text[]) WITH ORDINALITY
                         AS u(lock_id, client, key, ord)
             )";

/// [`OPEN_SQL`]'s rows: the hotels (`ord` 0), then each request's claim and record.
const OPEN_SELECT: &str =
    "SELECT 0::bigint AS ord, NULL::bool AS claimed, NULL::text AS request_hash,
                    NULL::text AS state, NULL::jsonb AS outcome, h.state AS hotel_state,
                    h.version AS hotel_version
               FROM rooms CROSS JOIN hotels h
              WHERE h.hotel_id = ANY($7::bigint[])
             UNION ALL
             SELECT c.ord, c.claimed, k.request_hash, k.state, k.outcome, NULL, NULL
               FROM claims c
               LEFT JOIN LATERAL (
                    SELECT r.request_hash, r.state, r.outcome FROM idempotency_keys r
                     WHERE r.client = c.client AND r.key = c.key
                       AND r.created_at > now() - interval '24 hours'
                    OFFSET 0) k ON true";

/// [`Loader::open_with_nights`]: the opening and the nights read in one statement, the
/// nights' parameters after the opening's seven. A row is the opening's (its night
/// columns NULL) or the nights read's (`is_night` not NULL, its opening columns NULL).
/// The wanted nights wait for `rooms`, so the rooms' locks come before any night's row
/// lock, as when the two ran one after the other.
static OPEN_WITH_NIGHTS_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let nights = NightsSql::after(8, true, false, Some("rooms"));
    format!(
        "WITH {OPEN_CTES}, {ctes},
         opening AS ({OPEN_SELECT}),
         nights AS ({select})
         SELECT o.*, NULL::bool AS is_night, NULL::bigint AS hotel_id,
                NULL::bigint AS room_type_id, NULL::date AS night, NULL::int AS total_rooms,
                NULL::int AS overbooking_allowance, NULL::bigint AS rate_cents,
                NULL::int AS confirmed, NULL::int AS held, NULL::bigint AS version,
                NULL::jsonb AS restrictions, NULL::jsonb AS plan_rates,
                NULL::int AS blocked, NULL::jsonb AS blocks,
                NULL::uuid AS reservation_id, NULL::int AS rooms,
                NULL::timestamptz AS expires_at, NULL::text AS block_code
           FROM opening o
         UNION ALL
         SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, n.* FROM nights n",
        ctes = nights.ctes,
        select = nights.select,
    )
});

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
        let (hotel, room_type) = advisory_key((hotel_id, room_type_id));
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(hotel)
            .bind(room_type)
            .execute(&mut *self.conn)
            .await?;
        Ok(())
    }

    /// The first statement of a hold (or a batch of holds) — one round trip for three
    /// things: claim every request's idempotency key (`pg_try_advisory_xact_lock`, and
    /// its stored record), take the `(hotel, room type)` lock of every room in `rooms`
    /// (see [`Self::lock_room_type`]; exclusive when `lock`, shared otherwise, so that
    /// a catalog change that must not race a sale, which takes them exclusively with
    /// [`Self::lock_room_types`], waits for every hold under way under any strategy),
    /// and read their hotels with their versions.
    ///
    /// The room locks are taken one after the other in one fixed order (their advisory
    /// keys, ascending), so batches that share rooms queue instead of deadlocking; a
    /// command that locks one room can never wait on a batch that waits on it, because it
    /// takes no other lock after its room's.
    ///
    /// The records are read on the statement's snapshot, which may predate a duplicate
    /// that finished just before the key's lock was ours; that duplicate's record then
    /// makes the final write of this one refuse (`Conflict`), and the retry replays it.
    pub async fn open(
        &mut self,
        requests: &[&super::idempotency::RequestFingerprint],
        rooms: &[Room],
        lock: bool,
    ) -> Result<Opened, AttemptError> {
        let params = OpenParams::of(requests, rooms);
        let rows = params
            .bind(sqlx::query(OPEN_SQL.as_str()), lock)
            .fetch_all(&mut *self.conn)
            .await?;
        Opened::decode(&rows, requests.len())
    }

    /// [`Self::open`] with the rooms locked, and [`Self::nights_of`] the `wanted`
    /// nights of a hold batch (locked, no reservation's own allocations), in ONE
    /// statement: a round trip less for every batch of holds.
    pub async fn open_with_nights(
        &mut self,
        requests: &[&super::idempotency::RequestFingerprint],
        rooms: &[Room],
        wanted: &[WantedNights],
        now: DateTime<Utc>,
    ) -> Result<(Opened, Vec<LoadedNights>), AttemptError> {
        let params = OpenParams::of(requests, rooms);
        let nights = NightParams::of(wanted);
        let query = params.bind(sqlx::query(OPEN_WITH_NIGHTS_SQL.as_str()), true);
        let rows = nights.bind(query, now).fetch_all(&mut *self.conn).await?;
        let mut opening = Vec::new();
        let mut night_rows = Vec::new();
        for row in rows {
            if row.try_get::<Option<bool>, _>("is_night")?.is_some() {
                night_rows.push(row);
            } else {
                opening.push(row);
            }
        }
        let opened = Opened::decode(&opening, requests.len())?;
        Ok((opened, decode_nights(wanted, night_rows)?))
    }

    /// Takes the `(hotel, room type)` lock of every one of `room_types` (see
    /// [`Self::lock_room_type`]), in the one order batches of holds take them, so that
    /// no hold of those rooms is under way until this transaction ends: a catalog change
    /// that must not race a sale (a currency change) waits for the holds in flight and
    /// makes the next ones wait.
    pub async fn lock_room_types(
        &mut self,
        hotel_id: HotelId,
        room_types: impl IntoIterator<Item = RoomTypeId>,
    ) -> Result<(), AttemptError> {
        let mut keys: Vec<(i32, i32)> = room_types
            .into_iter()
            .map(|room_type| advisory_key((hotel_id, room_type)))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let (hotels, room_types): (Vec<i32>, Vec<i32>) = keys.into_iter().unzip();
        sqlx::query(
            "SELECT count(*) FROM (
                 SELECT pg_advisory_xact_lock(k.hotel, k.room_type)
                   FROM unnest($1::int[], $2::int[]) WITH ORDINALITY AS k(hotel, room_type, ord)
                  ORDER BY k.ord) l",
        )
        .bind(&hotels)
        .bind(&room_types)
        .execute(&mut *self.conn)
        .await?;
        Ok(())
    }

    /// A reservation of the hotel not yet ended (held, confirmed or checked in) with a
    /// night on or after `from`, if there is one: found through the nights' allocations
    /// (their key starts with the hotel), so it reads the hotel's nights, not every
    /// reservation.
    pub async fn live_reservation(
        &mut self,
        hotel_id: HotelId,
        from: NaiveDate,
    ) -> Result<Option<ReservationId>, AttemptError> {
        let row = sqlx::query(
            "SELECT a.reservation_id FROM room_night_allocations a
               JOIN reservations r ON r.reservation_id = a.reservation_id
              WHERE a.hotel_id = $1 AND a.night >= $2
                AND r.status IN ('held', 'confirmed', 'checked_in')
              LIMIT 1",
        )
        .bind(hotel_id.get())
        .bind(from)
        .fetch_optional(&mut *self.conn)
        .await?;
        match row {
            Some(row) => Ok(Some(ReservationId::from_uuid(
                row.try_get("reservation_id")?,
            ))),
            None => Ok(None),
        }
    }

    /// A group block and its version (a default aggregate at version 0 if unknown);
    /// `lock` takes its row `FOR UPDATE`, so two changes of one block queue.
    pub async fn block(
        &mut self,
        hotel_id: HotelId,
        code: BlockCode,
        lock: bool,
    ) -> Result<(aggregates::Block, i64), AttemptError> {
        let sql = if lock {
            "SELECT state, version FROM blocks WHERE hotel_id = $1 AND code = $2 FOR UPDATE"
        } else {
            "SELECT state, version FROM blocks WHERE hotel_id = $1 AND code = $2"
        };
        let row = sqlx::query(sql)
            .bind(hotel_id.get())
            .bind(code.as_str())
            .fetch_optional(&mut *self.conn)
            .await?;
        match row {
            None => Ok((aggregates::Block::default(), 0)),
            Some(row) => {
                let state: serde_json::Value = row.try_get("state")?;
                let block = serde_json::from_value(state).map_err(|e| corrupt("block", e))?;
                Ok((block, row.try_get("version")?))
            }
        }
    }

    /// A group block of the hotel not yet released, if there is one.
    pub async fn open_block(
        &mut self,
        hotel_id: HotelId,
    ) -> Result<Option<BlockCode>, AttemptError> {
        let code: Option<String> = sqlx::query_scalar(
            "SELECT code FROM blocks WHERE hotel_id = $1 AND NOT released LIMIT 1",
        )
        .bind(hotel_id.get())
        .fetch_optional(&mut *self.conn)
        .await?;
        code.map(|c| BlockCode::parse(&c).map_err(|e| corrupt("block", e)))
            .transpose()
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
        Ok(self
            .reservations(std::slice::from_ref(&reservation_id), lock)
            .await?
            .pop())
    }

    /// The stored reservations of `ids` that exist, in id order; with `lock`, their rows
    /// are locked `FOR UPDATE` in that order (so two batches on shared reservations queue
    /// rather than deadlock).
    pub async fn reservations(
        &mut self,
        ids: &[ReservationId],
        lock: bool,
    ) -> Result<Vec<LoadedReservation>, AttemptError> {
        static LOCKED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            format!(
                "SELECT {} FROM reservations WHERE reservation_id = ANY($1)
                  ORDER BY reservation_id FOR UPDATE",
                super::reservation_row::COLUMNS
            )
        });
        static READ: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            format!(
                "SELECT {} FROM reservations WHERE reservation_id = ANY($1)
                  ORDER BY reservation_id",
                super::reservation_row::COLUMNS
            )
        });
        let sql = if lock { LOCKED.as_str() } else { READ.as_str() };
        let ids: Vec<uuid::Uuid> = ids.iter().map(ReservationId::as_uuid).collect();
        let rows = sqlx::query(sql)
            .bind(&ids)
            .fetch_all(&mut *self.conn)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(LoadedReservation {
                    reservation: super::reservation_row::restore(row)
                        .map_err(|e| corrupt("reservation", e))?,
                    version: row.try_get("version")?,
                })
            })
            .collect()
    }

    /// The given nights of one room, in night order. With `lock`, their rows are locked
    /// `FOR UPDATE` in that order before anything is decided.
    pub async fn nights(
        &mut self,
        wanted: WantedNights,
        reservation_id: Option<ReservationId>,
        now: DateTime<Utc>,
        lock: bool,
    ) -> Result<LoadedNights, AttemptError> {
        let mut loaded = self
            .nights_of(std::slice::from_ref(&wanted), reservation_id, now, lock)
            .await?;
        loaded
            .pop()
            .ok_or_else(|| corrupt("room nights", "one room asked, none loaded"))
    }

    /// The wanted nights of several rooms in one statement, each room's in the order
    /// given; with `lock`, every row is locked `FOR UPDATE` in (hotel, room type, night)
    /// order before anything is decided. Besides the nights, it loads the allocations a
    /// command can touch: `reservation_id`'s own and every lapsed hold.
    pub async fn nights_of(
        &mut self,
        wanted: &[WantedNights],
        reservation_id: Option<ReservationId>,
        now: DateTime<Utc>,
        lock: bool,
    ) -> Result<Vec<LoadedNights>, AttemptError> {
        // Under the pessimistic strategy every room's lock is already ours, so no writer
        // of these rows is running and one snapshot sees them all as they are; under the
        // optimistic one, one snapshot is exactly what the version checks at write time
        // compare against.
        let sql = nights_sql(lock, reservation_id.is_some());
        // A prepared statement with a generic plan, like the rest of the write path (see
        // `db::write_pool`): planning it on every call was most of its time (see
        // docs/benchmarks.md, `allocator-and-planning`). See `nights_sql` for why its plan is safe whatever the statistics.
        let params = NightParams::of(wanted);
        let query = params.bind(sqlx::query(&sql), now);
        let query = match reservation_id {
            Some(id) => query.bind(id.as_uuid()),
            None => query,
        };
        let all_rows = query.fetch_all(&mut *self.conn).await?;
        decode_nights(wanted, all_rows)
    }
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// [`OPEN_SQL`]'s parameters but `$6` (whether to lock the rooms).
struct OpenParams<'r> {
    lock_ids: Vec<i64>,
    clients: Vec<&'r str>,
    keys: Vec<&'r str>,
    lock_hotels: Vec<i32>,
    lock_room_types: Vec<i32>,
    hotel_ids: Vec<i64>,
}

impl<'r> OpenParams<'r> {
    fn of(requests: &[&'r super::idempotency::RequestFingerprint], rooms: &[Room]) -> Self {
        let mut room_keys: Vec<(i32, i32)> = rooms.iter().map(|r| advisory_key(*r)).collect();
        room_keys.sort_unstable();
        room_keys.dedup();
        let (lock_hotels, lock_room_types) = room_keys.into_iter().unzip();
        let mut hotel_ids: Vec<i64> = rooms.iter().map(|(h, _)| h.get()).collect();
        hotel_ids.sort_unstable();
        hotel_ids.dedup();
        Self {
            lock_ids: requests.iter().map(|r| r.lock_id()).collect(),
            clients: requests.iter().map(|r| r.client.as_str()).collect(),
            keys: requests.iter().map(|r| r.key.as_str()).collect(),
            lock_hotels,
            lock_room_types,
            hotel_ids,
        }
    }

    /// `$1..$7`. The locks are taken in array order: a function scan yields its rows in
    /// order and nothing sorts them. Each key's record is probed by its primary key
    /// (the lateral subquery, which OFFSET 0 keeps from being flattened into a join):
    /// as a join, a generic plan made while the table was small read every record of
    /// the last day through `idempotency_keys_by_age` for every batch, and a hold
    /// slowed as the day's records grew (docs/scaling.md, `empty-table-statistics`).
    fn bind<'q>(&'q self, query: PgQuery<'q>, lock: bool) -> PgQuery<'q> {
        query
            .bind(&self.lock_ids)
            .bind(&self.clients)
            .bind(&self.keys)
            .bind(&self.lock_hotels)
            .bind(&self.lock_room_types)
            .bind(lock)
            .bind(&self.hotel_ids)
    }
}

/// The nights read's arrays (see [`nights_sql`]): every wanted night, then the peeked
/// ones not already wanted.
struct NightParams {
    hotels: Vec<i64>,
    room_types: Vec<i64>,
    nights: Vec<NaiveDate>,
    peeks: Vec<bool>,
}

impl NightParams {
    fn of(wanted: &[WantedNights]) -> Self {
        let mut params = Self {
            hotels: Vec::new(),
            room_types: Vec::new(),
            nights: Vec::new(),
            peeks: Vec::new(),
        };
        for room in wanted {
            let peeked = room.peek.iter().filter(|d| !room.dates.contains(d));
            for (night, peek) in room
                .dates
                .iter()
                .map(|d| (d, false))
                .chain(peeked.map(|d| (d, true)))
            {
                params.hotels.push(room.hotel_id.get());
                params.room_types.push(room.room_type_id.get());
                params.nights.push(*night);
                params.peeks.push(peek);
            }
        }
        params
    }

    /// The nights read's `$1..$5` (numbered after whatever `query` bound before).
    fn bind<'q>(&'q self, query: PgQuery<'q>, now: DateTime<Utc>) -> PgQuery<'q> {
        query
            .bind(&self.hotels)
            .bind(&self.room_types)
            .bind(&self.nights)
            .bind(now)
            .bind(&self.peeks)
    }
}

impl Opened {
    /// The opening's rows: the hotels (`ord` 0) and one claim per request.
    fn decode(rows: &[sqlx::postgres::PgRow], requests: usize) -> Result<Self, AttemptError> {
        let mut opened = Opened {
            hotels: HashMap::new(),
            versions: HashMap::new(),
            claims: Vec::with_capacity(requests),
        };
        let mut claims = Vec::with_capacity(requests);
        for row in rows {
            let ord: i64 = row.try_get("ord")?;
            if ord == 0 {
                if let Some(state) = row.try_get::<Option<serde_json::Value>, _>("hotel_state")? {
                    let hotel: Hotel =
                        serde_json::from_value(state).map_err(|e| corrupt("hotel", e))?;
                    if let Some(hotel_id) = hotel.hotel_id() {
                        opened
                            .versions
                            .insert(hotel_id, row.try_get::<i64, _>("hotel_version")?);
                        opened.hotels.insert(hotel_id, hotel);
                    }
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
            claims.push((ord, Claim { claimed, record }));
        }
        claims.sort_by_key(|(ord, _)| *ord);
        opened.claims = claims.into_iter().map(|(_, claim)| claim).collect();
        if opened.claims.len() != requests {
            return Err(corrupt("claims", "one claim per request expected"));
        }
        Ok(opened)
    }
}

/// The nights read's rows (see [`nights_sql`]) as each wanted room's nights, in the
/// order the rooms were wanted.
fn decode_nights(
    wanted: &[WantedNights],
    all_rows: Vec<sqlx::postgres::PgRow>,
) -> Result<Vec<LoadedNights>, AttemptError> {
    type NightKey = (i64, i64, NaiveDate);
    let mut holds: HashMap<NightKey, BTreeMap<ReservationId, Hold>> = HashMap::new();
    let mut confirmations: HashMap<NightKey, BTreeMap<ReservationId, u32>> = HashMap::new();
    let mut picks: HashMap<NightKey, BTreeMap<ReservationId, BlockCode>> = HashMap::new();
    let mut night_rows = Vec::new();
    for row in all_rows {
        let key: NightKey = (
            row.try_get("hotel_id")?,
            row.try_get("room_type_id")?,
            row.try_get("night")?,
        );
        if row.try_get::<bool, _>("is_night")? {
            night_rows.push((key, row));
            continue;
        }
        let id = ReservationId::from_uuid(
            row.try_get::<Option<Uuid>, _>("reservation_id")?
                .ok_or_else(|| corrupt("allocation", "no reservation id"))?,
        );
        let rooms = non_negative(row.try_get::<Option<i32>, _>("rooms")?.unwrap_or(0))?;
        if let Some(code) = row.try_get::<Option<&str>, _>("block_code")? {
            let code = BlockCode::parse(code).map_err(|e| corrupt("allocation", e))?;
            picks.entry(key).or_default().insert(id, code);
        }
        match row.try_get::<Option<DateTime<Utc>>, _>("expires_at")? {
            Some(expires_at) => {
                holds
                    .entry(key)
                    .or_default()
                    .insert(id, Hold { rooms, expires_at });
            }
            None => {
                confirmations.entry(key).or_default().insert(id, rooms);
            }
        }
    }

    let mut loaded: Vec<LoadedNights> = wanted
        .iter()
        .map(|room| LoadedNights {
            hotel_id: room.hotel_id,
            room_type_id: room.room_type_id,
            nights: Nights::new(),
            versions: BTreeMap::new(),
        })
        .collect();
    let index: HashMap<(i64, i64), usize> = wanted
        .iter()
        .enumerate()
        .map(|(i, room)| ((room.hotel_id.get(), room.room_type_id.get()), i))
        .collect();
    for (key, row) in night_rows {
        let (hotel, room_type, night) = key;
        let Some(target) = index
            .get(&(hotel, room_type))
            .and_then(|i| loaded.get_mut(*i))
        else {
            return Err(corrupt("room night", "a night no room asked for"));
        };
        // A night row's columns are NOT NULL: decoded as plain values, a NULL is an
        // error rather than a zero.
        let levels = InventoryLevels::parse(
            i64::from(row.try_get::<i32, _>("total_rooms")?),
            i64::from(row.try_get::<i32, _>("overbooking_allowance")?),
            Cents::new(row.try_get("rate_cents")?),
        )
        .map_err(|e| corrupt("room night", e))?;
        let restrictions = json_column(&row, "restrictions")?;
        let plan_rates = json_column(&row, "plan_rates")?;
        let state = RoomNight::from_snapshot(
            RoomNightKey::new(target.hotel_id, target.room_type_id, night),
            levels,
            non_negative(row.try_get("confirmed")?)?,
            non_negative(row.try_get("held")?)?,
            holds.remove(&key).unwrap_or_default(),
            confirmations.remove(&key).unwrap_or_default(),
        )
        .with_terms(restrictions, plan_rates)
        .with_blocks(
            non_negative(row.try_get("blocked")?)?,
            json_column(&row, "blocks")?,
            picks.remove(&key).unwrap_or_default(),
        );
        target.versions.insert(night, row.try_get("version")?);
        target.nights.insert(night, state);
    }
    Ok(loaded)
}

/// A room's advisory lock key: the two-int key space, where ids beyond 2^31 fold onto
/// smaller ones (which only makes unrelated room types queue together).
fn advisory_key((hotel_id, room_type_id): Room) -> (i32, i32) {
    (hotel_id.get() as i32, room_type_id.get() as i32)
}

/// A nullable JSON column decoded into `T`; NULL is `T`'s default (nothing set).
fn json_column<T: serde::de::DeserializeOwned + Default>(
    row: &sqlx::postgres::PgRow,
    column: &str,
) -> Result<T, AttemptError> {
    match row.try_get::<Option<serde_json::Value>, _>(column)? {
        Some(json) => serde_json::from_value(json).map_err(|e| corrupt(column, e)),
        None => Ok(T::default()),
    }
}

fn non_negative(value: i32) -> Result<u32, AttemptError> {
    u32::try_from(value).map_err(|e| corrupt("room count", e))
}

/// The nights read (see [`Loader::nights_of`]): `$1..$3` the wanted nights as arrays,
/// `$4` the clock that tells a lapsed hold, `$5` whether each wanted night is only
/// peeked at (read without a lock, and without its allocations: nothing will be
/// decided on it), `$6` the reservation whose own allocations are loaded too (with
/// `reservation`).
///
/// Each allocation branch is a `LATERAL` subquery fenced by `OFFSET 0`, so it can only
/// be run once per wanted night with that night's key bound: a probe of an index on
/// (hotel, room type, night, ...), whatever the statistics say. Written as plain joins,
/// a generic plan made on a never-analyzed allocation table (a young database, or one
/// whose autovacuum is off or behind) read the reservation's allocations with a bitmap
/// scan of the whole primary key on `reservation_id` alone, then joined, a cost that
/// grew with every hold (see docs/benchmarks.md, `allocation-scan`). One
/// `OR` instead of two branches would read every allocation of a night, thousands on a
/// sold-out one. A hold, whose reservation is new, has no allocations of its own to read,
/// so its statement has no such branch.
pub fn nights_sql(lock: bool, reservation: bool) -> String {
    let parts = NightsSql::new(1, lock, reservation);
    format!("WITH {} {}", parts.ctes, parts.select)
}

/// The nights read in two parts, so [`Loader::open_with_nights`] can run it in the
/// same statement as the opening: its CTEs (`wanted`, `n`, `p`) and the `SELECT` over
/// them. Its parameters are numbered from `first` (`$first` is the `$1` of
/// [`nights_sql`]'s description, and so on); `after`, if given, is a CTE the wanted
/// nights wait for (the opening's room locks, taken before any night's row lock).
struct NightsSql {
    ctes: String,
    select: String,
}

impl NightsSql {
    fn new(first: usize, lock: bool, reservation: bool) -> Self {
        Self::after(first, lock, reservation, None)
    }

    fn after(first: usize, lock: bool, reservation: bool, after: Option<&str>) -> Self {
        let p = |n: usize| format!("${}", first + n - 1);
        let (hotels, room_types, nights, now, peeks, own) = (p(1), p(2), p(3), p(4), p(5), p(6));
        // Run after the room locks in one statement, the read's snapshot predates them:
        // a batch that held the same room and committed meanwhile is unseen. The nights
        // are locked, and a lock reads a row's latest version; the allocations are then
        // locked too, so one that batch deleted (a lapsed hold it dropped) is not read
        // as still there, and one it changed is read as changed. (Rows it inserted are
        // its own live holds, which nothing here wants.)
        let lock_allocations = if after.is_some() && lock {
            "FOR UPDATE"
        } else {
            ""
        };
        let allocations = |condition: &str| {
            format!(
                "UNION ALL
                 SELECT false, w.hotel_id, w.room_type_id, w.night, NULL, NULL, NULL, NULL,
                        NULL, NULL, NULL, NULL, NULL, NULL, a.reservation_id, a.rooms,
                        a.expires_at, a.block_code
                   FROM wanted w
                  CROSS JOIN LATERAL (
                        SELECT a.reservation_id, a.rooms, a.expires_at, a.block_code
                          FROM room_night_allocations a
                         WHERE a.hotel_id = w.hotel_id AND a.room_type_id = w.room_type_id
                           AND a.night = w.night AND {condition}
                        {lock_allocations}
                        OFFSET 0) a
                  WHERE NOT w.peek"
            )
        };
        let lapsed = allocations(&format!("a.expires_at <= {now}"));
        let own = if reservation {
            allocations(&format!("a.reservation_id = {own}"))
        } else {
            String::new()
        };
        let lock = if lock { "FOR UPDATE OF rn" } else { "" };
        // Joined with the one row of `after`, the wanted nights exist only once it has
        // been evaluated.
        let after = after.map_or(String::new(), |cte| format!("CROSS JOIN {cte}"));
        // The night's columns, read alike from the locked nights and the peeked ones.
        let columns = "rn.hotel_id, rn.room_type_id, rn.night, rn.total_rooms,
                         rn.overbooking_allowance, rn.rate_cents, rn.confirmed, rn.held,
                         rn.version, rn.restrictions, rn.plan_rates, rn.blocked, rn.blocks";
        let ctes = format!(
            "wanted AS MATERIALIZED (
                  SELECT w.* FROM unnest({hotels}::bigint[], {room_types}::bigint[],
                                         {nights}::date[], {peeks}::bool[])
                         AS w(hotel_id, room_type_id, night, peek)
                  {after}
             ), n AS (
                  SELECT {columns}
                    FROM wanted w
                    JOIN room_nights rn USING (hotel_id, room_type_id, night)
                   WHERE NOT w.peek
                   ORDER BY rn.hotel_id, rn.room_type_id, rn.night
                   {lock}
             ), p AS (
                  SELECT {columns}
                    FROM wanted w
                    JOIN room_nights rn USING (hotel_id, room_type_id, night)
                   WHERE w.peek)"
        );
        let select = format!(
            "SELECT true AS is_night, hotel_id, room_type_id, night, total_rooms,
                    overbooking_allowance, rate_cents, confirmed, held, version,
                    restrictions, plan_rates, blocked, blocks, NULL::uuid AS reservation_id,
                    NULL::int AS rooms, NULL::timestamptz AS expires_at,
                    NULL::text AS block_code
               FROM n
             UNION ALL
             SELECT true, hotel_id, room_type_id, night, total_rooms, overbooking_allowance,
                    rate_cents, confirmed, held, version, restrictions, plan_rates, blocked,
                    blocks, NULL, NULL, NULL, NULL
               FROM p
             {lapsed}
             {own}"
        );
        Self { ctes, select }
    }
}
