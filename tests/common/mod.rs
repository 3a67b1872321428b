//! Shared helpers for the integration tests: a fresh database per test on the machine's
//! PostgreSQL, typed helpers to set up a hotel, and the invariant checks every race
//! ends with (from `room_nights`, from the events, and by replaying the events).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::Arc;

use aggregates::booking::InventoryUpdate;
use aggregates::{
    AggregateType, Guest, HotelDetails, HotelId, Reservation, ReservationEvent, ReservationStatus,
    RoomCount, RoomNight, RoomNightEvent, RoomNightKey, RoomTypeDetails, RoomTypeId, StayDates,
};
use chrono::{Days, NaiveDate, Utc};
use reservations::clock::Clock;
use reservations::commands::{CommandService, HoldRequest, WriteConfig};
use reservations::write::Strategy;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool, Row};

/// Where the tests' databases live; a fresh one is created per test.
pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub struct TestDb {
    pub name: String,
    pub url: String,
    pub pool: PgPool,
}

impl TestDb {
    /// Creates and migrates a database of its own for one test.
    pub async fn new() -> Self {
        let name = format!("rsv_test_{}", uuid::Uuid::new_v4().simple());
        let options = PgConnectOptions::from_str(&server_url()).expect("TEST_DATABASE_URL");
        let url = options.clone().database(&name).to_url_lossy().to_string();
        let pool = reservations::db::connect_and_migrate(&url, 20)
            .await
            .expect("create and migrate the test database");
        Self { name, url, pool }
    }

    /// A second, independent pool on the same database (as a second server would have).
    pub async fn another_pool(&self) -> PgPool {
        PgPoolOptions::new()
            .max_connections(20)
            .connect(&self.url)
            .await
            .expect("second pool")
    }

    pub fn service(&self, strategy: Strategy) -> CommandService {
        CommandService::new(self.pool.clone(), config(strategy))
    }

    pub fn service_with_clock(&self, strategy: Strategy, clock: Arc<dyn Clock>) -> CommandService {
        CommandService::with_clock(self.pool.clone(), config(strategy), clock)
    }

    /// Drops the database, and the keys its read model left in the machine's Redis
    /// (call at the end of a test that passed).
    pub async fn drop_database(self) {
        self.pool.close().await;
        if let Ok(client) = redis::Client::open("redis://127.0.0.1:6379") {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                let pattern = format!("rsv:{}:*", self.name);
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(&pattern)
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let _: Result<(), _> =
                        redis::cmd("UNLINK").arg(&keys).query_async(&mut conn).await;
                }
            }
        }
        let options = PgConnectOptions::from_str(&server_url()).expect("TEST_DATABASE_URL");
        if let Ok(mut admin) = options.connect().await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ))
            .execute(&mut admin)
            .await;
            let _ = admin.close().await;
        }
    }
}

pub fn config(strategy: Strategy) -> WriteConfig {
    WriteConfig {
        strategy,
        ..WriteConfig::default()
    }
}

pub const HOTEL: i64 = 812;
pub const KING: i64 = 3;

pub fn hotel_id() -> HotelId {
    HotelId::parse(HOTEL).expect("hotel id")
}

pub fn king() -> RoomTypeId {
    RoomTypeId::parse(KING).expect("room type id")
}

/// A date `days` from today: always in the bookable future.
pub fn day(days: u64) -> NaiveDate {
    Utc::now()
        .date_naive()
        .checked_add_days(Days::new(days))
        .expect("date")
}

pub fn stay(from: NaiveDate, to: NaiveDate) -> StayDates {
    StayDates::parse(from, to).expect("valid stay")
}

pub fn guest(n: usize) -> Guest {
    Guest::parse(&format!("Guest {n}"), &format!("guest{n}@example.com")).expect("guest")
}

/// Defines hotel 812 (Lisbon) with room type 3 ("king") and sets `total_rooms` rooms at
/// 180.00 a night on `nights` nights starting at `first`.
pub async fn hotel_with_rooms(
    svc: &CommandService,
    first: NaiveDate,
    nights: u64,
    total_rooms: i64,
) {
    svc.set_hotel(
        hotel_id(),
        HotelDetails::parse("Hotel Tejo", "Lisbon", "Europe/Lisbon").expect("details"),
    )
    .await
    .expect("set hotel");
    svc.set_room_type(
        hotel_id(),
        king(),
        RoomTypeDetails::parse("king", 2).expect("room type"),
    )
    .await
    .expect("set room type");
    let last = first.checked_add_days(Days::new(nights)).expect("date");
    svc.set_inventory(
        hotel_id(),
        king(),
        stay(first, last),
        InventoryUpdate {
            total_rooms,
            overbooking_allowance: Some(0),
            rate_cents: Some(18_000),
        },
    )
    .await
    .expect("set inventory");
}

pub fn hold_request(stay: StayDates, rooms: i64, guest_no: usize) -> HoldRequest {
    HoldRequest {
        hotel_id: hotel_id(),
        room_type_id: king(),
        stay,
        rooms: RoomCount::parse(rooms).expect("rooms"),
        guest: guest(guest_no),
        expected_total_cents: None,
    }
}

pub fn key(s: &str) -> reservations::write::IdempotencyKey {
    reservations::write::IdempotencyKey::parse(s).expect("key")
}

/// One row of `room_nights`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NightRow {
    pub total_rooms: i32,
    pub allowance: i32,
    pub confirmed: i32,
    pub held: i32,
    pub version: i64,
}

pub async fn night_rows(pool: &PgPool) -> BTreeMap<(i64, i64, NaiveDate), NightRow> {
    sqlx::query(
        "SELECT hotel_id, room_type_id, night, total_rooms, overbooking_allowance,
                confirmed, held, version FROM room_nights",
    )
    .fetch_all(pool)
    .await
    .expect("room_nights")
    .into_iter()
    .map(|r| {
        (
            (r.get("hotel_id"), r.get("room_type_id"), r.get("night")),
            NightRow {
                total_rooms: r.get("total_rooms"),
                allowance: r.get("overbooking_allowance"),
                confirmed: r.get("confirmed"),
                held: r.get("held"),
                version: r.get("version"),
            },
        )
    })
    .collect()
}

/// Rooms taken (held + confirmed) per night, from `room_nights`.
pub async fn taken(pool: &PgPool, night: NaiveDate) -> i32 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(confirmed + held), 0)::int FROM room_nights WHERE night = $1",
    )
    .bind(night)
    .fetch_one(pool)
    .await
    .expect("taken")
}

/// What a full replay of the event log says.
pub struct Replayed {
    pub nights: BTreeMap<String, RoomNight>,
    pub reservations: BTreeMap<String, Reservation>,
    pub events: usize,
}

/// Replays every stream from the events table through the aggregates, checking that
/// each stream's sequence has no gap and that the invariant holds after every event.
pub async fn replay(pool: &PgPool) -> Replayed {
    let rows = sqlx::query(
        "SELECT aggregate_type, aggregate_id, sequence, payload FROM events
          ORDER BY aggregate_type, aggregate_id, sequence",
    )
    .fetch_all(pool)
    .await
    .expect("events");
    let mut replayed = Replayed {
        nights: BTreeMap::new(),
        reservations: BTreeMap::new(),
        events: rows.len(),
    };
    let mut last_sequence: HashMap<(String, String), i64> = HashMap::new();
    for row in rows {
        let kind: String = row.get("aggregate_type");
        let id: String = row.get("aggregate_id");
        let sequence: i64 = row.get("sequence");
        let previous = last_sequence.insert((kind.clone(), id.clone()), sequence);
        assert_eq!(
            previous.unwrap_or(0) + 1,
            sequence,
            "stream {kind}/{id} has a gap"
        );
        let payload: serde_json::Value = row.get("payload");
        match AggregateType::parse(&kind) {
            Some(AggregateType::RoomNight) => {
                let event: RoomNightEvent = serde_json::from_value(payload).expect("night event");
                let night = replayed.nights.entry(id.clone()).or_default();
                night.apply_event(&event);
                assert!(
                    night.invariant_holds(),
                    "replay: {id} oversold after event {sequence}: {night:?}"
                );
            }
            Some(AggregateType::Reservation) => {
                let event: ReservationEvent =
                    serde_json::from_value(payload).expect("reservation event");
                replayed
                    .reservations
                    .entry(id)
                    .or_default()
                    .apply_event(&event);
            }
            Some(AggregateType::Hotel) | None => {}
        }
    }
    replayed
}

/// The invariant, checked three ways, plus "no partial hold":
/// - every `room_nights` row satisfies confirmed + held <= total + allowance, and its
///   counters are the sums of its allocation rows;
/// - replaying the events rebuilds exactly those counters, and never oversells a night
///   at any point of the history;
/// - every held or confirmed reservation has its allocation on every night of its stay,
///   and no other reservation holds anything.
pub async fn assert_invariants(pool: &PgPool) -> Replayed {
    assert_invariants_at(pool, Utc::now()).await
}

/// As [`assert_invariants`], with holds judged lapsed or live at `now`.
pub async fn assert_invariants_at(pool: &PgPool, now: chrono::DateTime<Utc>) -> Replayed {
    let rows = night_rows(pool).await;
    for (key, row) in &rows {
        assert!(
            row.confirmed + row.held <= row.total_rooms + row.allowance,
            "room_nights oversold at {key:?}: {row:?}"
        );
    }
    let sums: Vec<(i64, i64, NaiveDate, i64, i64)> = sqlx::query_as(
        "SELECT n.hotel_id, n.room_type_id, n.night,
                coalesce(sum(a.rooms) FILTER (WHERE a.expires_at IS NULL), 0)::bigint,
                coalesce(sum(a.rooms) FILTER (WHERE a.expires_at IS NOT NULL), 0)::bigint
           FROM room_nights n
           LEFT JOIN room_night_allocations a USING (hotel_id, room_type_id, night)
          GROUP BY 1, 2, 3",
    )
    .fetch_all(pool)
    .await
    .expect("allocation sums");
    for (h, t, n, confirmed, held) in sums {
        let row = &rows[&(h, t, n)];
        assert_eq!(
            (i64::from(row.confirmed), i64::from(row.held)),
            (confirmed, held),
            "counters of {h}:{t}:{n} differ from its allocations"
        );
    }

    let replayed = replay(pool).await;
    for ((h, t, n), row) in &rows {
        let key = RoomNightKey::new(
            HotelId::parse(*h).expect("hotel id"),
            RoomTypeId::parse(*t).expect("room type id"),
            *n,
        );
        let stream = key.stream_id();
        let night = replayed
            .nights
            .get(&stream)
            .unwrap_or_else(|| panic!("no events for {stream}"));
        assert_eq!(
            (night.confirmed(), night.held()),
            (row.confirmed as u32, row.held as u32),
            "replayed {stream} differs from room_nights"
        );
    }
    assert_eq!(replayed.nights.len(), rows.len(), "streams without a row");

    for reservation in replayed.reservations.values() {
        let Some(details) = reservation.details() else {
            panic!("reservation stream without details");
        };
        let occupies = reservation
            .recorded_status()
            .is_some_and(|s| s.occupies_nights());
        for night in details.stay.nights() {
            let stream =
                RoomNightKey::new(details.hotel_id, details.room_type_id, night).stream_id();
            let state = replayed.nights.get(&stream);
            let holds = state.is_some_and(|n| {
                n.hold_of(&details.reservation_id).is_some()
                    || n.confirmed_for(&details.reservation_id).is_some()
            });
            let lapsed = reservation.recorded_status() == Some(ReservationStatus::Held)
                && details.hold_expires_at <= now;
            if !lapsed {
                assert_eq!(
                    holds,
                    occupies,
                    "reservation {} ({:?}) on {night}: allocation present = {holds}",
                    details.reservation_id,
                    reservation.recorded_status()
                );
            }
        }
    }
    replayed
}

/// Streams whose events, read in commit order `(transaction_id, global_position)` as
/// projections read them, are not in sequence order. Must be zero: projections apply
/// each stream's events in the order they read them.
pub async fn streams_out_of_commit_order(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (
            SELECT sequence, lag(sequence) OVER (
                     PARTITION BY aggregate_type, aggregate_id
                     ORDER BY transaction_id, global_position) AS previous
              FROM events) s
          WHERE previous IS NOT NULL AND sequence <> previous + 1",
    )
    .fetch_one(pool)
    .await
    .expect("order check")
}

/// The plans PostgreSQL would use for the prepared statement `name` called with
/// `arguments` (SQL text): generic (what a connection settles on after a few calls) and
/// custom, as `(plan_cache_mode, EXPLAIN output)`.
pub async fn generic_and_custom_plans(
    conn: &mut sqlx::PgConnection,
    name: &str,
    arguments: &str,
) -> Vec<(&'static str, String)> {
    let mut plans = Vec::new();
    for mode in ["force_generic_plan", "force_custom_plan"] {
        sqlx::query(&format!("SET plan_cache_mode = {mode}"))
            .execute(&mut *conn)
            .await
            .expect("plan mode");
        let lines: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN EXECUTE {name}({arguments})"))
                .fetch_all(&mut *conn)
                .await
                .expect("explain");
        plans.push((mode, lines.join("\n")));
    }
    plans
}
