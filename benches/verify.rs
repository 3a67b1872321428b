//! Audit verification at scale: `cargo bench --bench verify`.
//!
//! 1. Creates a scratch database and writes a large, *valid* history straight into it
//!    with bulk `INSERT ... SELECT generate_series` (the command path would take hours
//!    for a million events): a catalog of hotels, one `InventorySet` per night, and per
//!    night `BENCH_RESERVATIONS` one-night reservations that are held, then confirmed,
//!    cancelled while held or left to lapse, and one confirmed stay cancelled later;
//!    with the `room_nights` and `room_night_allocations` rows that history leaves.
//!    Each statement gives every stream at most one event, in sequence order, so the
//!    commit order is a legal order for every stream. Events are of today's versions,
//!    their personal data sealed as the write side stores it (nothing to upcast).
//! 2. Builds the audit log by running the projection to the end (`catch_up`), timed.
//! 3. Times `verify` over all of it, and reports events per second and peak memory
//!    (VmHWM, reset just before verify through /proc/self/clear_refs, so the figure is
//!    verify's own peak, not the build's).
//!
//! Scale: `BENCH_NIGHTS` room-night streams (default 25,000) x `BENCH_RESERVATIONS`
//! per night (default 10) gives 43 events per night: 1,075,150 events by default.
//! Uses the PostgreSQL at `TEST_DATABASE_URL` (default
//! postgres://postgres@127.0.0.1:5432/postgres); drops the scratch database at the end
//! unless `BENCH_KEEP_DB=1` (then it prints its URL, e.g. to run
//! `reservations audit verify` on it under `/usr/bin/time -v`).

use std::str::FromStr;
use std::time::{Duration, Instant};

use projections::audit::{self, AuditLog};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgPool};

/// Nights per room type; hotels have two room types, so 500 streams per hotel.
const NIGHTS_PER_TYPE: i64 = 250;
const HOLD_EXPIRES: &str = "2029-12-01T00:15:00Z";
const CREATED: &str = "2029-12-01T00:00:00Z";

fn env_i64(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Peak and current resident memory of this process, in MiB (VmHWM, VmRSS).
fn memory_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Resets VmHWM to the current RSS (Linux: "5" to clear_refs).
fn reset_peak_memory() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let nights = env_i64("BENCH_NIGHTS", 25_000).max(1);
    let per_night = env_i64("BENCH_RESERVATIONS", 10).clamp(6, 1000);
    let keep = std::env::var("BENCH_KEEP_DB").is_ok_and(|v| v == "1");
    let name = format!("rsv_bench_verify_{}", uuid::Uuid::new_v4().simple());
    let url = PgConnectOptions::from_str(&server)?
        .database(&name)
        .to_url_lossy()
        .to_string();
    let pool = store::db::connect_and_migrate(&url, 8).await?;

    let started = Instant::now();
    generate(&pool, nights, per_night).await?;
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&pool)
        .await?;
    sqlx::query("VACUUM ANALYZE events").execute(&pool).await?;
    println!(
        "generated {events} events ({nights} nights x {per_night} reservations) in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    projections::catch_up(&pool, &mut AuditLog, 5_000, Duration::from_secs(3_600)).await?;
    let build = started.elapsed().as_secs_f64();
    sqlx::query("VACUUM ANALYZE audit_log")
        .execute(&pool)
        .await?;
    println!(
        "audit log built by the projection: {events} events in {build:.1} s = {:.0} events/s",
        events as f64 / build
    );

    let (peak_before, rss_before) = memory_mib();
    let reset = reset_peak_memory();
    let started = Instant::now();
    let report = audit::verify(&pool).await?;
    let took = started.elapsed().as_secs_f64();
    let (peak, rss) = memory_mib();
    println!(
        "verify: ok={} events_checked={} first_bad_position={:?} problems={}",
        report.ok,
        report.events_checked,
        report.first_bad_position,
        report.problems.len()
    );
    println!(
        "verify: {} events in {took:.1} s = {:.0} events/s",
        report.events_checked,
        report.events_checked as f64 / took
    );
    println!(
        "memory: peak during verify {peak:.1} MiB (VmHWM{}), RSS before {rss_before:.1} MiB, \
         after {rss:.1} MiB; process peak before verify {peak_before:.1} MiB",
        if reset {
            ", reset before verify"
        } else {
            ", NOT reset: whole process"
        }
    );
    for problem in report.problems.iter().take(5) {
        println!("  problem: {problem}");
    }
    pool.close().await;

    if keep {
        println!("kept the database: DATABASE_URL={url}");
    } else {
        let mut admin = PgConnectOptions::from_str(&server)?.connect().await?;
        sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
    }
    if !report.ok || report.events_checked != events as u64 {
        anyhow::bail!("the generated history did not verify cleanly");
    }
    Ok(())
}

/// The per-stream values, for stream number `s` in 0..nights: its hotel, room type,
/// night and stream id.
fn streams(nights: i64) -> String {
    format!(
        "(SELECT s,
                 s / (2 * {NIGHTS_PER_TYPE}) + 1 AS hotel,
                 (s / {NIGHTS_PER_TYPE}) % 2 + 1 AS rt,
                 DATE '2030-01-01' + (s % {NIGHTS_PER_TYPE})::int AS night
            FROM generate_series(0::bigint, {last}) s) n",
        last = nights - 1
    )
}

/// The reservation id (as text) of reservation `j` of stream `s`.
fn reservation_id(per_night: i64, j: i64) -> String {
    format!("lpad(to_hex(n.s * {per_night} + {j}), 32, '0')::uuid::text")
}

/// Personal data as the write side stores it, sealed (`aggregates::personal`): the
/// guest, the key and `bytes` of base64 ciphertext (a guest's name and e-mail seal to
/// about 88), derived from the reservation id `id` (SQL) so rows differ.
fn sealed(id: &str, bytes: usize) -> String {
    format!(
        "jsonb_build_object('sealed', jsonb_build_object(
             'guest', 'g_' || md5({id}), 'key', {id},
             'data', rpad(encode(decode(md5({id}), 'hex'), 'base64'), {bytes}, 'A=')))"
    )
}

const NIGHT_ID: &str = "n.hotel || ':' || n.rt || ':' || to_char(n.night, 'YYYY-MM-DD')";

/// Inserts rows `(aggregate_type, aggregate_id, sequence, event_type, payload)` from a
/// `VALUES` list evaluated per stream.
async fn insert_events(pool: &PgPool, nights: i64, values: &str) -> anyhow::Result<()> {
    let sql = format!(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                             payload, metadata)
         SELECT v.t, v.i, v.q, v.e,
                CASE v.t WHEN 'reservation' THEN '{reservation}' ELSE '{night}' END,
                v.p, '{{\"command\":\"bench\",\"client\":\"bench\"}}'
           FROM {streams}
          CROSS JOIN LATERAL (VALUES {values}) AS v(t, i, q, e, p)
          ORDER BY n.s",
        streams = streams(nights),
        reservation = aggregates::ReservationEvent::VERSION,
        night = aggregates::RoomNightEvent::VERSION,
    );
    sqlx::query(&sql).execute(pool).await?;
    Ok(())
}

async fn generate(pool: &PgPool, nights: i64, per_night: i64) -> anyhow::Result<()> {
    let hotels = (nights + 2 * NIGHTS_PER_TYPE - 1) / (2 * NIGHTS_PER_TYPE);
    let r = per_night;

    // The catalog: events and inline rows.
    sqlx::query(&format!(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                             payload, metadata)
         SELECT 'hotel', h::text, v.q, v.e, '1.0', v.p, '{{}}'
           FROM generate_series(1, {hotels}) h
          CROSS JOIN LATERAL (VALUES
            (1, 'HotelDetailsSet', jsonb_build_object('HotelDetailsSet', jsonb_build_object(
                'hotel_id', h, 'details', jsonb_build_object(
                    'name', 'Bench ' || h, 'city', 'Benchville', 'timezone', 'UTC')))),
            (2, 'RoomTypeSet', jsonb_build_object('RoomTypeSet', jsonb_build_object(
                'room_type_id', 1, 'details', jsonb_build_object('name', 'double', 'max_occupancy', 2)))),
            (3, 'RoomTypeSet', jsonb_build_object('RoomTypeSet', jsonb_build_object(
                'room_type_id', 2, 'details', jsonb_build_object('name', 'twin', 'max_occupancy', 2))))
          ) AS v(q, e, p)
          ORDER BY h, v.q"
    ))
    .execute(pool)
    .await?;
    sqlx::query(&format!(
        "INSERT INTO hotels (hotel_id, name, city, timezone, state, version)
         SELECT h, 'Bench ' || h, 'Benchville', 'UTC', '{{}}', 3 FROM generate_series(1, {hotels}) h"
    ))
    .execute(pool)
    .await?;
    sqlx::query(&format!(
        "INSERT INTO room_types (hotel_id, room_type_id, name, max_occupancy)
         SELECT h, t, CASE t WHEN 1 THEN 'double' ELSE 'twin' END, 2
           FROM generate_series(1, {hotels}) h, generate_series(1, 2) t"
    ))
    .execute(pool)
    .await?;

    // Inventory: sequence 1 of every night, room for every reservation at once.
    insert_events(
        pool,
        nights,
        &format!(
            "('room_night', {NIGHT_ID}, 1::bigint, 'InventorySet',
              jsonb_build_object('InventorySet', jsonb_build_object(
                  'key', jsonb_build_object('hotel_id', n.hotel, 'room_type_id', n.rt,
                                            'night', to_char(n.night, 'YYYY-MM-DD')),
                  'total_rooms', {r}, 'overbooking_allowance', 0, 'rate_cents', 10000)))"
        ),
    )
    .await?;

    // Holds: reservation j holds one room on its night (night sequence 1 + j) and is
    // recorded as held (its sequence 1).
    for j in 1..=r {
        let id = reservation_id(r, j);
        insert_events(
            pool,
            nights,
            &format!(
                "('room_night', {NIGHT_ID}, {night_seq}::bigint, 'RoomsHeld',
                  jsonb_build_object('RoomsHeld', jsonb_build_object(
                      'reservation_id', {id}, 'rooms', 1, 'expires_at', '{HOLD_EXPIRES}'))),
                 ('reservation', n.hotel || ':' || {id}, 1::bigint, 'ReservationHeld',
                  jsonb_build_object('ReservationHeld', jsonb_build_object(
                      'reservation_id', {id}, 'hotel_id', n.hotel, 'room_type_id', n.rt,
                      'stay', jsonb_build_object('start_date', to_char(n.night, 'YYYY-MM-DD'),
                                                 'end_date', to_char(n.night + 1, 'YYYY-MM-DD')),
                      'rooms', 1,
                      'guest', {sealed},
                      'channel', 'bench', 'total_cents', 10000,
                      'hold_expires_at', '{HOLD_EXPIRES}', 'created_at', '{CREATED}')))",
                night_seq = 1 + j,
                sealed = sealed(&id, 88),
            ),
        )
        .await?;
    }

    // Outcomes: j % 3 == 0 confirmed, 1 cancelled while held, 2 lapsed and expired.
    for j in 1..=r {
        let id = reservation_id(r, j);
        let (night_event, night_payload, res_event, res_payload) = match j % 3 {
            0 => (
                "HoldConfirmed",
                format!("jsonb_build_object('reservation_id', {id}, 'rooms', 1)"),
                "ReservationConfirmed",
                format!("jsonb_build_object('confirmed_at', '{CREATED}')"),
            ),
            1 => (
                "RoomsReleased",
                format!(
                    "jsonb_build_object('reservation_id', {id}, 'rooms', 1, 'was_confirmed', false)"
                ),
                "ReservationCancelled",
                format!(
                    "jsonb_build_object('cancelled_at', '{CREATED}', 'reason', {}, 'by', 'guest')",
                    sealed(&id, 44)
                ),
            ),
            _ => (
                "HoldLapsed",
                format!(
                    "jsonb_build_object('reservation_id', {id}, 'rooms', 1, 'expired_at', '{HOLD_EXPIRES}')"
                ),
                "HoldExpired",
                format!("jsonb_build_object('expired_at', '{HOLD_EXPIRES}')"),
            ),
        };
        insert_events(
            pool,
            nights,
            &format!(
                "('room_night', {NIGHT_ID}, {night_seq}::bigint, '{night_event}',
                  jsonb_build_object('{night_event}', {night_payload})),
                 ('reservation', n.hotel || ':' || {id}, 2::bigint, '{res_event}',
                  jsonb_build_object('{res_event}', {res_payload}))",
                night_seq = 1 + r + j,
            ),
        )
        .await?;
    }

    // Reservation 6 of every night, confirmed, is cancelled: a confirmed release.
    let id = reservation_id(r, 6);
    insert_events(
        pool,
        nights,
        &format!(
            "('room_night', {NIGHT_ID}, {night_seq}::bigint, 'RoomsReleased',
              jsonb_build_object('RoomsReleased', jsonb_build_object(
                  'reservation_id', {id}, 'rooms', 1, 'was_confirmed', true))),
             ('reservation', n.hotel || ':' || {id}, 3::bigint, 'ReservationCancelled',
              jsonb_build_object('ReservationCancelled', jsonb_build_object(
                  'cancelled_at', '{CREATED}', 'reason', {sealed}, 'by', 'guest')))",
            night_seq = 2 + 2 * r,
            sealed = sealed(&id, 44),
        ),
    )
    .await?;

    // The inline state that history leaves: confirmed are j % 3 == 0 except j = 6.
    let confirmed: Vec<i64> = (1..=r).filter(|j| j % 3 == 0 && *j != 6).collect();
    sqlx::query(&format!(
        "INSERT INTO room_nights (hotel_id, room_type_id, night, total_rooms,
                                  overbooking_allowance, rate_cents, confirmed, held, version)
         SELECT n.hotel, n.rt, n.night, {r}, 0, 10000, {confirmed}, 0, {version}
           FROM {streams}",
        confirmed = confirmed.len(),
        version = 2 + 2 * r,
        streams = streams(nights),
    ))
    .execute(pool)
    .await?;
    for j in confirmed {
        sqlx::query(&format!(
            "INSERT INTO room_night_allocations (hotel_id, room_type_id, night, reservation_id,
                                                 rooms, expires_at)
             SELECT n.hotel, n.rt, n.night, ({id})::uuid, 1, NULL FROM {streams}",
            id = reservation_id(r, j),
            streams = streams(nights),
        ))
        .execute(pool)
        .await?;
    }
    Ok(())
}
