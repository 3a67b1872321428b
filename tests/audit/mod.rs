//! The audit log against a real PostgreSQL: it copies every event into a hash chain
//! that refuses changes, and `verify` finds every kind of tampering at the right
//! position — in the audit log, in the event log, and in the inline night tables — as
//! well as histories the aggregates could never have decided. Each test has its own
//! database.

use std::sync::Arc;
use std::time::Duration;

use aggregates::{AggregateType, ReservationId};
use app::clock::ManualClock;
use app::commands::{Caller, CommandService};
use chrono::Utc;
use projections::audit::{self, AuditLog, VerifyReport};
use projections::log::read_after;
use projections::Checkpoint;
use serde_json::{json, Value};
use sqlx::PgPool;
use store::write::Strategy;
use uuid::Uuid;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

fn id(view: &app::commands::ReservationView) -> ReservationId {
    ReservationId::from_uuid(view.reservation_id)
}

/// What the workload left, for tests that tamper with it.
struct Workload {
    /// Confirmed on nights 10 and 11 (1 room each).
    confirmed: ReservationId,
    /// Cancelled after a change of dates.
    cancelled: ReservationId,
    /// The workload's clock at the end (16 minutes past the start).
    now: chrono::DateTime<Utc>,
}

/// A small hotel's life through the command API: holds, a change of dates of a hold
/// and of a confirmed stay, confirmations, cancellations of a hold and of a confirmed
/// stay, a hold that lapses and is dropped by a later hold, and an expiry by the
/// sweeper's command. Nights 10..20 have 3 rooms each.
async fn workload(db: &TestDb) -> Workload {
    let clock = ManualClock::new(Utc::now());
    let svc: CommandService = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock.clone()));
    hotel_with_rooms(&svc, day(10), 10, 3).await;

    let confirmed = svc
        .hold(
            "web",
            "web",
            key("h1"),
            hold_request(stay(day(10), day(12)), 1, 1),
        )
        .await
        .expect("hold 1");
    svc.confirm(&web(), Some(key("c1")), id(&confirmed))
        .await
        .expect("confirm 1");

    let moved_hold = svc
        .hold(
            "web",
            "web",
            key("h2"),
            hold_request(stay(day(11), day(13)), 2, 2),
        )
        .await
        .expect("hold 2");
    svc.change_dates(
        &web(),
        web().name(),
        Some(key("m2")),
        id(&moved_hold),
        stay(day(14), day(16)),
        None,
        None,
    )
    .await
    .expect("move hold 2");
    svc.cancel(
        &web(),
        web().name(),
        Some(key("x2")),
        id(&moved_hold),
        "plans".to_owned(),
    )
    .await
    .expect("cancel 2");

    let moved_stay = svc
        .hold(
            "web",
            "web",
            key("h3"),
            hold_request(stay(day(12), day(14)), 1, 3),
        )
        .await
        .expect("hold 3");
    svc.confirm(&web(), Some(key("c3")), id(&moved_stay))
        .await
        .expect("confirm 3");
    svc.change_dates(
        &web(),
        web().name(),
        Some(key("m3")),
        id(&moved_stay),
        stay(day(15), day(17)),
        None,
        None,
    )
    .await
    .expect("move confirmed 3");

    let expired = svc
        .hold(
            "web",
            "web",
            key("h4"),
            hold_request(stay(day(17), day(18)), 1, 4),
        )
        .await
        .expect("hold 4");
    let lapsing = svc
        .hold(
            "web",
            "web",
            key("h5"),
            hold_request(stay(day(18), day(19)), 3, 5),
        )
        .await
        .expect("hold 5");
    clock.advance(chrono::Duration::minutes(16));
    svc.expire_hold(id(&expired)).await.expect("expire 4");
    // Night 18 is full of hold 5's lapsed rooms: this hold drops them first.
    svc.hold(
        "web",
        "web",
        key("h6"),
        hold_request(stay(day(18), day(19)), 2, 6),
    )
    .await
    .expect("hold 6 after hold 5 lapsed");
    let _ = lapsing;

    let cancelled_stay = svc
        .hold(
            "web",
            "web",
            key("h7"),
            hold_request(stay(day(10), day(11)), 1, 7),
        )
        .await
        .expect("hold 7");
    svc.confirm(&web(), Some(key("c7")), id(&cancelled_stay))
        .await
        .expect("confirm 7");
    svc.cancel(
        &web(),
        web().name(),
        Some(key("x7")),
        id(&cancelled_stay),
        "no longer".to_owned(),
    )
    .await
    .expect("cancel confirmed 7");

    Workload {
        confirmed: id(&confirmed),
        cancelled: id(&moved_hold),
        now: app::clock::Clock::now(&clock),
    }
}

async fn verify(pool: &PgPool) -> VerifyReport {
    audit::catch_up_and_verify(pool, WAIT)
        .await
        .expect("verification runs")
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs `statement` on audit_log with its append-only trigger switched off, as a
/// superuser could.
async fn tamper(pool: &PgPool, statement: &str) {
    let mut tx = pool.begin().await.expect("begin");
    for sql in [
        "ALTER TABLE audit_log DISABLE TRIGGER USER",
        statement,
        "ALTER TABLE audit_log ENABLE TRIGGER USER",
    ] {
        sqlx::query(sql)
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    tx.commit().await.expect("commit");
}

/// The position of one event.
async fn position_of(pool: &PgPool, condition: &str) -> i64 {
    count(
        pool,
        &format!("SELECT global_position FROM events WHERE {condition}"),
    )
    .await
}

/// Appends an event to a stream behind the aggregates' back (the next sequence).
async fn sneak_event(pool: &PgPool, aggregate_type: &str, stream: &str, payload: Value) -> i64 {
    let event_type = payload
        .as_object()
        .and_then(|o| o.keys().next())
        .cloned()
        .expect("externally tagged payload");
    sqlx::query_scalar(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                             payload, metadata)
         SELECT $1, $2, coalesce(max(sequence), 0) + 1, $3, $5, $4, '{}'
           FROM events WHERE aggregate_type = $1 AND aggregate_id = $2
         RETURNING global_position",
    )
    .bind(aggregate_type)
    .bind(stream)
    .bind(event_type)
    .bind(payload)
    // The version the payload's shape is of (this build's).
    .bind(if aggregate_type == "reservation" {
        aggregates::ReservationEvent::VERSION
    } else {
        "1.0"
    })
    .fetch_one(pool)
    .await
    .expect("sneak an event in")
}

fn night_stream(days: u64) -> String {
    aggregates::RoomNightKey::new(hotel_id(), king(), day(days)).stream_id()
}

fn mentions(report: &VerifyReport, text: &str) -> bool {
    report.problems.iter().any(|p| p.contains(text))
}

#[tokio::test]
async fn a_lawful_history_verifies_and_every_event_is_checked() {
    let db = TestDb::new().await;
    let work = workload(&db).await;
    // The write side's own invariants, judged at the workload's clock.
    assert_invariants_at(&db.pool, work.now).await;

    let report = verify(&db.pool).await;

    let events = count(&db.pool, "SELECT count(*) FROM events").await;
    assert!(events > 40, "the workload wrote {events} events");
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.events_checked, events as u64);
    assert_eq!(report.first_bad_position, None);
    assert!(report.problems.is_empty());
    assert_eq!(report.pending_events, 0);
    // The workload did produce what it set out to: a lapse dropped by a later hold, a
    // sweeper expiry, a booked (moved confirmed) night, confirmed and held releases.
    for event_type in [
        "HoldLapsed",
        "HoldExpired",
        "RoomsBooked",
        "DatesChanged",
        "ReservationCancelled",
        "HoldConfirmed",
    ] {
        let n = count(
            &db.pool,
            &format!("SELECT count(*) FROM audit_log WHERE event_type = '{event_type}'"),
        )
        .await;
        assert!(n > 0, "no {event_type} in the audit log");
    }
    db.drop_database().await;
}

#[tokio::test]
async fn the_chain_links_every_row_to_the_one_before() {
    let db = TestDb::new().await;
    workload(&db).await;
    audit::catch_up_and_verify(&db.pool, WAIT)
        .await
        .expect("catch up");

    // Each row's hash is SHA-256 of the one before and its event's canonical bytes, from
    // 32 zero bytes: recompute the chain from the event log.
    let rows: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT position, hash FROM audit_log ORDER BY seq")
            .fetch_all(&db.pool)
            .await
            .expect("audit rows");
    let events: std::collections::HashMap<i64, projections::StoredEvent> = whole_log(&db.pool)
        .await
        .into_iter()
        .map(|e| (e.position, e))
        .collect();
    let mut prev = audit::GENESIS_HASH.to_vec();
    let mut broken_links = 0;
    for (position, hash) in &rows {
        let event = &events[position];
        let expected = audit::chain_hash(&prev, &audit::EventFields::from(event)).expect("hash");
        if expected.as_slice() != hash.as_slice() {
            broken_links += 1;
        }
        prev.clone_from(hash);
    }
    let order = count(
        &db.pool,
        "SELECT count(*) FROM audit_log a JOIN events e ON e.global_position = a.position
          WHERE a.seq <> (SELECT count(*) FROM events x
                           WHERE (x.transaction_id, x.global_position)
                                 <= (e.transaction_id, e.global_position))",
    )
    .await;

    assert!(!rows.is_empty());
    assert_eq!(broken_links, 0);
    assert_eq!(order, 0, "audit rows are in commit order, seq from 1");
    db.drop_database().await;
}

#[tokio::test]
async fn the_audit_log_refuses_update_delete_and_truncate() {
    let db = TestDb::new().await;
    workload(&db).await;
    verify(&db.pool).await;
    let rows = count(&db.pool, "SELECT count(*) FROM audit_log").await;

    for statement in [
        "UPDATE audit_log SET hash = sha256(hash) WHERE seq = 1",
        "DELETE FROM audit_log WHERE seq = 1",
        "TRUNCATE audit_log",
        // Even a statement that would touch nothing.
        "DELETE FROM audit_log WHERE false",
    ] {
        let err = sqlx::query(statement)
            .execute(&db.pool)
            .await
            .expect_err(statement);
        assert!(
            err.to_string().contains("append-only"),
            "{statement}: {err}"
        );
    }

    assert_eq!(
        count(&db.pool, "SELECT count(*) FROM audit_log").await,
        rows
    );
    assert!(verify(&db.pool).await.ok);
    db.drop_database().await;
}

#[tokio::test]
async fn a_changed_audit_hash_is_found_at_its_position() {
    let db = TestDb::new().await;
    let work = workload(&db).await;
    assert!(verify(&db.pool).await.ok);
    let stream = night_stream(11);
    let position = position_of(
        &db.pool,
        &format!(
            "aggregate_id = '{stream}' AND event_type = 'RoomsHeld'
               AND payload->'RoomsHeld'->>'reservation_id' = '{}'",
            work.confirmed
        ),
    )
    .await;

    tamper(
        &db.pool,
        &format!("UPDATE audit_log SET hash = sha256(hash) WHERE position = {position}"),
    )
    .await;
    let report = verify(&db.pool).await;

    // The row no longer matches its event, and the next link no longer matches it.
    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(
        report.problems[0].contains(&format!("position {position} "))
            && mentions(&report, "differs from what the audit log recorded"),
        "{report:#?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn a_deleted_audit_row_is_found_at_its_position() {
    let db = TestDb::new().await;
    workload(&db).await;
    assert!(verify(&db.pool).await.ok);
    let events = count(&db.pool, "SELECT count(*) FROM events").await;
    let position = count(
        &db.pool,
        &format!("SELECT position FROM audit_log WHERE seq = {}", events / 2),
    )
    .await;

    tamper(
        &db.pool,
        &format!("DELETE FROM audit_log WHERE position = {position}"),
    )
    .await;
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(mentions(&report, "has no audit row"), "{report:#?}");
    assert!(mentions(&report, "chain jumps"), "{report:#?}");
    assert_eq!(report.events_checked, events as u64 - 1);
    db.drop_database().await;
}

#[tokio::test]
async fn an_event_changed_in_the_event_log_is_found_against_its_audit_copy() {
    let db = TestDb::new().await;
    let work = workload(&db).await;
    assert!(verify(&db.pool).await.ok);
    let position = position_of(
        &db.pool,
        &format!(
            "event_type = 'ReservationHeld'
               AND payload->'ReservationHeld'->>'reservation_id' = '{}'",
            work.cancelled
        ),
    )
    .await;

    // The events table has no trigger: anyone with SQL can rewrite history there.
    sqlx::query(
        "UPDATE events SET payload = jsonb_set(payload, '{ReservationHeld,total_cents}', '1')
          WHERE global_position = $1",
    )
    .bind(position)
    .execute(&db.pool)
    .await
    .expect("rewrite an event");
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(
        mentions(&report, "differs from what the audit log recorded"),
        "{report:#?}"
    );
    assert_eq!(report.problems.len(), 1, "reported once: {report:#?}");
    db.drop_database().await;
}

#[tokio::test]
async fn releasing_rooms_a_reservation_never_held_is_found_at_its_position() {
    let db = TestDb::new().await;
    workload(&db).await;
    assert!(verify(&db.pool).await.ok);

    let position = sneak_event(
        &db.pool,
        AggregateType::RoomNight.as_str(),
        &night_stream(19),
        json!({"RoomsReleased": {
            "reservation_id": Uuid::new_v4(), "rooms": 1, "was_confirmed": false}}),
    )
    .await;
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(
        mentions(&report, "releases held rooms it does not have"),
        "{report:#?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn holding_beyond_capacity_is_found_at_its_position() {
    let db = TestDb::new().await;
    workload(&db).await;
    assert!(verify(&db.pool).await.ok);
    let stream = night_stream(10);
    // Night 10 has 3 rooms and 1 confirmed: a hold of 3 more oversells it.
    let position = sneak_event(
        &db.pool,
        AggregateType::RoomNight.as_str(),
        &stream,
        json!({"RoomsHeld": {
            "reservation_id": Uuid::new_v4(), "rooms": 3,
            "expires_at": "2030-01-01T00:00:00Z"}}),
    )
    .await;
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(
        mentions(
            &report,
            "oversold after RoomsHeld: confirmed 1 + held 3 + blocked 0 > capacity 3"
        ),
        "{report:#?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn an_illegal_reservation_transition_is_found_at_its_position() {
    let db = TestDb::new().await;
    let work = workload(&db).await;
    assert!(verify(&db.pool).await.ok);

    let stream = aggregates::contract::reservation_stream_id(hotel_id(), work.cancelled);
    let position = sneak_event(
        &db.pool,
        AggregateType::Reservation.as_str(),
        &stream,
        json!({"ReservationConfirmed": {"confirmed_at": "2030-01-01T00:00:00Z"}}),
    )
    .await;
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(
        mentions(
            &report,
            "ReservationConfirmed while the reservation is cancelled"
        ),
        "{report:#?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn a_room_nights_row_changed_without_events_is_reported() {
    let db = TestDb::new().await;
    workload(&db).await;
    assert!(verify(&db.pool).await.ok);

    sqlx::query("UPDATE room_nights SET held = held + 1 WHERE night = $1")
        .bind(day(19))
        .execute(&db.pool)
        .await
        .expect("change a night behind the events' back");
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    // The history is sound; the inline state is not: no event is to blame.
    assert_eq!(report.first_bad_position, None);
    let expected = format!(
        "night {}: room_nights differs from the replayed events: held 1 (replayed: 0)",
        night_stream(19)
    );
    assert_eq!(report.problems, vec![expected]);
    db.drop_database().await;
}

#[tokio::test]
async fn allocations_and_nights_missing_on_either_side_are_reported() {
    let db = TestDb::new().await;
    let work = workload(&db).await;
    assert!(verify(&db.pool).await.ok);

    sqlx::query("DELETE FROM room_night_allocations WHERE reservation_id = $1 AND night = $2")
        .bind(work.confirmed.as_uuid())
        .bind(day(11))
        .execute(&db.pool)
        .await
        .expect("drop an allocation");
    sqlx::query(
        "INSERT INTO room_nights (hotel_id, room_type_id, night, total_rooms,
                overbooking_allowance, rate_cents, version)
         VALUES ($1, $2, $3, 5, 0, 100, 1)",
    )
    .bind(HOTEL)
    .bind(KING)
    .bind(day(40))
    .execute(&db.pool)
    .await
    .expect("a night with no events");
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, None);
    assert!(
        mentions(
            &report,
            &format!(
                "night {}: room_night_allocations differ from the replayed events: \
                 reservation {} has no row (replayed: 1 room(s) confirmed)",
                night_stream(11),
                work.confirmed
            )
        ),
        "{report:#?}"
    );
    assert!(
        mentions(
            &report,
            &format!("night {}: room_nights row without events", night_stream(40))
        ),
        "{report:#?}"
    );
    assert_eq!(report.problems.len(), 2, "{report:#?}");
    db.drop_database().await;
}

fn fields<'a>(
    payload: &'a str,
    metadata: &'a str,
    recorded_at: chrono::DateTime<Utc>,
) -> audit::EventFields<'a> {
    audit::EventFields {
        position: 1,
        transaction_id: 1,
        aggregate_type: "room_night",
        aggregate_id: "812:3:2027-06-10",
        sequence: 1,
        event_type: "RoomsHeld",
        event_version: "1.0",
        payload,
        metadata,
        recorded_at,
    }
}

#[tokio::test]
async fn jsonb_read_back_gives_the_same_canonical_bytes() {
    let db = TestDb::new().await;
    // Keys out of order, nested objects in arrays, escapes, non-ASCII, big integers.
    let original: Value = serde_json::from_str(
        r#"{"z": {"b": [3, {"y": true, "x": null}], "a": "caf\u00e9 \"quoted\"\n"},
            "a": -9007199254740991, "m": 18446744073709551615, "f": 1.5}"#,
    )
    .expect("json");
    let back: Value = sqlx::query_scalar("SELECT $1::jsonb")
        .bind(&original)
        .fetch_one(&db.pool)
        .await
        .expect("round trip");
    let text: String = sqlx::query_scalar("SELECT $1::jsonb::text")
        .bind(&original)
        .fetch_one(&db.pool)
        .await
        .expect("as text");
    let metadata = json!({"client": "web", "command": "hold_stay"});
    let recorded_at = Utc::now();

    let metadata = metadata.to_string();
    let (original, back) = (original.to_string(), back.to_string());
    let sent = audit::canonical_bytes(&fields(&original, &metadata, recorded_at)).expect("bytes");
    let read = audit::canonical_bytes(&fields(&back, &metadata, recorded_at)).expect("bytes");
    // What the readers hash: the column as PostgreSQL's text of it.
    let read_as_text =
        audit::canonical_bytes(&fields(&text, &metadata, recorded_at)).expect("bytes");

    // jsonb does reorder keys, so the check is not vacuous.
    assert!(text.starts_with(r#"{"a": "#), "{text}");
    assert_eq!(sent, read);
    assert_eq!(read_as_text, sent);
    db.drop_database().await;
}

/// Every event of the log, as the audit runner would read it: once all of it can be
/// read (a reader sees only the transactions older than every one still running, in
/// any database of the server, and the other tests run beside this one).
async fn whole_log(pool: &PgPool) -> Vec<projections::StoredEvent> {
    let stored = count(pool, "SELECT count(*) FROM events").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut conn = pool.acquire().await.expect("conn");
    loop {
        let events = read_after(&mut conn, Checkpoint::START, 10_000)
            .await
            .expect("events");
        if events.len() as i64 == stored {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {stored} events stayed invisible",
            stored - events.len() as i64
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn appending_a_batch_twice_adds_nothing_the_second_time() {
    let db = TestDb::new().await;
    workload(&db).await;
    let batch = whole_log(&db.pool).await;

    let mut tx = db.pool.begin().await.expect("begin");
    let first = audit::append(&mut tx, &batch).await.expect("append");
    let second = audit::append(&mut tx, &batch).await.expect("append again");
    tx.commit().await.expect("commit");

    assert!(!batch.is_empty());
    assert_eq!(first, batch.len());
    assert_eq!(second, 0);
    assert_eq!(
        count(&db.pool, "SELECT count(*) FROM audit_log").await,
        batch.len() as i64
    );
    db.drop_database().await;
}

/// Reads the whole log as the audit runner would, runs `statement` on one event of it
/// (its position bound as `$1`), then appends what was read (checking that every event
/// is in the chain) and verifies. Returns the event as read and the report.
async fn touch_an_event_between_read_and_copy(
    db: &TestDb,
    statement: &str,
) -> (projections::StoredEvent, VerifyReport) {
    workload(db).await;
    let mut batch = whole_log(&db.pool).await;
    let touched = batch[batch.len() / 2].position;
    sqlx::query(statement)
        .bind(touched)
        .execute(&db.pool)
        .await
        .expect("touch the event");

    let mut tx = db.pool.begin().await.expect("begin");
    let appended = audit::append(&mut tx, &batch).await.expect("append");
    tx.commit().await.expect("commit");
    let report = verify(&db.pool).await;

    assert_eq!(appended, batch.len(), "the chain has no hole");
    assert_eq!(
        count(&db.pool, "SELECT count(*) FROM audit_log").await,
        batch.len() as i64
    );
    let event = batch.swap_remove(batch.len() / 2);
    (event, report)
}

/// What the audit row at `position` names: its stream, sequence and type.
async fn audit_row(pool: &PgPool, position: i64) -> (String, i64, String) {
    sqlx::query_as("SELECT aggregate_id, sequence, event_type FROM audit_log WHERE position = $1")
        .bind(position)
        .fetch_one(pool)
        .await
        .expect("the audit row")
}

/// What an event as read names, as `audit_row` gives it.
fn as_read(event: &projections::StoredEvent) -> (String, i64, String) {
    (
        event.aggregate_id.clone(),
        event.sequence,
        event.event_type.clone(),
    )
}

#[tokio::test]
async fn an_event_gone_between_its_read_and_its_copy_is_kept_as_read_and_reported_missing() {
    let db = TestDb::new().await;

    let (gone, report) =
        touch_an_event_between_read_and_copy(&db, "DELETE FROM events WHERE global_position = $1")
            .await;

    assert_eq!(audit_row(&db.pool, gone.position).await, as_read(&gone));
    assert!(!report.ok);
    assert_eq!(
        report.first_bad_position,
        Some(gone.position),
        "{report:#?}"
    );
    assert!(
        mentions(
            &report,
            &format!("position {}: the audit row has no event", gone.position)
        ),
        "{report:#?}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn an_event_changed_between_its_read_and_its_copy_is_kept_as_read_and_reported_changed() {
    let db = TestDb::new().await;

    let (changed, report) = touch_an_event_between_read_and_copy(
        &db,
        "UPDATE events SET metadata = jsonb_set(metadata, '{client}', '\"someone else\"')
          WHERE global_position = $1",
    )
    .await;

    // The audit row holds the hash of the event as it was first read, so the event as
    // it is now is found changed, once (the chain goes on from the recorded hash).
    assert_eq!(
        audit_row(&db.pool, changed.position).await,
        as_read(&changed)
    );
    assert!(!report.ok);
    assert_eq!(
        report.first_bad_position,
        Some(changed.position),
        "{report:#?}"
    );
    assert!(
        mentions(&report, "differs from what the audit log recorded"),
        "{report:#?}"
    );
    assert_eq!(report.problems.len(), 1, "{report:#?}");
    db.drop_database().await;
}

#[tokio::test]
async fn the_audit_log_cannot_be_cleared_or_rebuilt() {
    let db = TestDb::new().await;
    workload(&db).await;
    verify(&db.pool).await;
    let rows = count(&db.pool, "SELECT count(*) FROM audit_log").await;

    let rebuilt = projections::rebuild(&db.pool, &mut AuditLog, 100, |_, _| {}).await;
    let mut conn = db.pool.acquire().await.expect("conn");
    let cleared = projections::Projection::clear(&mut AuditLog, &mut conn, 1).await;

    let err = rebuilt.expect_err("rebuild refused");
    assert!(err.to_string().contains("cannot be rebuilt"), "{err}");
    let err = cleared.expect_err("clear refused");
    assert!(err.to_string().contains("append-only"), "{err}");
    assert_eq!(
        count(&db.pool, "SELECT count(*) FROM audit_log").await,
        rows
    );
    let generation: i32 = sqlx::query_scalar(
        "SELECT generation FROM projection_checkpoints WHERE name = 'audit_log'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("checkpoint");
    assert_eq!(generation, 1);
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn the_spawned_runner_follows_the_log_and_verify_waits_for_it() {
    let db = TestDb::new().await;
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let runner = reservations::workers::spawn_audit_runner(
        db.pool.clone(),
        projections::RunnerConfig::default(),
        &projections::Tail::default(),
        shutdown,
    );

    workload(&db).await;
    let events = count(&db.pool, "SELECT count(*) FROM events").await;
    let mut copied = 0;
    for _ in 0..100 {
        copied = count(&db.pool, "SELECT count(*) FROM audit_log").await;
        if copied == events {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // With the runner leading, verify waits for it instead of appending itself.
    let report = verify(&db.pool).await;

    assert_eq!(copied, events, "the runner copied every event");
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.events_checked, events as u64);
    let _ = stop.send(true);
    tokio::time::timeout(Duration::from_secs(10), runner)
        .await
        .expect("runner stops")
        .expect("runner task");
    db.drop_database().await;
}

#[tokio::test]
async fn http_verify_is_for_auditors_and_admins() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    app.hold_ok(WEB, "k1", &hold_body(day(10), plus_days(day(10), 2), 1))
        .await;
    let events = app.count("events").await;

    let auditor = app.get("/v1/audit/verify", Some(AUDITOR)).await;
    let admin = app.get("/v1/audit/verify", Some(ADMIN)).await;
    let channel = app.get("/v1/audit/verify", Some(WEB)).await;
    let anonymous = app.get("/v1/audit/verify", None).await;

    let body = auditor.assert_status(200);
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(body["events_checked"], events);
    assert_eq!(body["first_bad_position"], Value::Null);
    assert_eq!(body["problems"], json!([]));
    assert_eq!(admin.assert_status(200)["ok"], true);
    channel.assert_error(403, "forbidden");
    anonymous.assert_error(401, "unauthorized");

    let position: i64 = count(&app.db.pool, "SELECT max(position) FROM audit_log").await;
    tamper(
        &app.db.pool,
        &format!("DELETE FROM audit_log WHERE position = {position}"),
    )
    .await;
    let after = app.get("/v1/audit/verify", Some(AUDITOR)).await;
    let body = after.assert_status(200);
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["first_bad_position"], position, "{body}");

    let openapi = app.get("/openapi.json", None).await;
    assert!(
        openapi.json["paths"]["/v1/audit/verify"]["get"].is_object(),
        "verify is documented"
    );
    app.finish().await;
}

/// A `ReservationHeld` as the write side records one, for a stay at hotel 812's king
/// rooms under `rate_plan_id` (the house policy: tests that sneak these in break other
/// rules than the policy).
fn held_event(
    dates: aggregates::StayDates,
    created_at: chrono::DateTime<Utc>,
    rate_plan_id: Option<i64>,
) -> (String, Value) {
    let reservation_id = ReservationId::from_uuid(Uuid::new_v4());
    let details = aggregates::ReservationDetails {
        more_lines: Vec::new(),
        reservation_id,
        hotel_id: hotel_id(),
        room_type_id: king(),
        stay: dates,
        rooms: aggregates::RoomCount::parse(1).expect("rooms"),
        guest: aggregates::Personal::Clear(guest(9)),
        channel: "web".to_owned(),
        total_cents: aggregates::Cents::new(18_000),
        hold_expires_at: created_at + chrono::Duration::minutes(15),
        created_at,
        rate_plan_id: rate_plan_id.map(|id| aggregates::RatePlanId::parse(id).expect("id")),
        cancellation_policy: aggregates::cancellation::CancellationPolicy::HOUSE,
        guests: aggregates::GuestCount::ONE,
        first_night_cents: None,
        currency: aggregates::Currency::EUR,
        taxes: aggregates::taxes::Taxes::default(),
        block_code: None,
    };
    let stream = aggregates::contract::reservation_stream_id(hotel_id(), reservation_id);
    let payload = serde_json::to_value(aggregates::ReservationEvent::ReservationHeld(details))
        .expect("serializable");
    (stream, payload)
}

#[tokio::test]
async fn http_verify_judges_each_hold_by_the_restrictions_and_plans_in_force_before_it() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    let restrictions = format!("/v1/hotels/{HOTEL}/room-types/{KING}/restrictions");
    app.put_json(
        &format!("/v1/hotels/{HOTEL}/rate-plans/2"),
        Some(ADMIN),
        &json!({"name": "Non-refundable", "room_type_ids": [KING],
                "cancellation_policy": {"refundable": false}}),
    )
    .await
    .assert_status(200);
    // Stays arriving on day 12 last two nights at least.
    app.put_json(
        &restrictions,
        Some(ADMIN),
        &json!({"start_date": day(12), "end_date": day(13), "min_stay": 2}),
    )
    .await
    .assert_status(200);
    let two_nights = app
        .hold_ok(WEB, "two-nights", &hold_body(day(12), day(14), 1))
        .await;
    let mut planned = hold_body(day(10), day(12), 1);
    planned["rate_plan_id"] = json!(2);
    planned["guests"] = json!(2);
    app.hold_ok(WEB, "planned", &planned).await;
    app.hold(WEB, "one-night", &hold_body(day(12), day(13), 1))
        .await
        .assert_error(409, "restricted");
    // Stopping the nights already held afterwards does not make their holds wrong.
    app.put_json(
        &restrictions,
        Some(ADMIN),
        &json!({"start_date": day(10), "end_date": day(12), "stop_sell": true}),
    )
    .await
    .assert_status(200);

    let lawful = app.get("/v1/audit/verify", Some(AUDITOR)).await;
    assert_eq!(lawful.assert_status(200)["ok"], true, "{}", lawful.text);

    // Sneaked in after the restrictions: a one-night stay arriving on day 12, a stay
    // under a plan the hotel does not have, and a move of the two nights onto the
    // stopped day 11 (judged as the reservation's earlier events left it).
    let now = app::clock::Clock::now(&app.clock);
    let (short_stream, short) = held_event(stay(day(12), day(13)), now, None);
    let short_at = sneak_event(&app.db.pool, "reservation", &short_stream, short).await;
    let (unplanned_stream, unplanned) = held_event(stay(day(15), day(17)), now, Some(9));
    let unplanned_at = sneak_event(&app.db.pool, "reservation", &unplanned_stream, unplanned).await;
    let moved_stream = format!("{HOTEL}:{two_nights}");
    let moved = serde_json::to_value(aggregates::ReservationEvent::DatesChanged {
        more_refund_caps: Vec::new(),
        more_line_prices: Vec::new(),
        stay: stay(day(11), day(13)),
        total_cents: aggregates::Cents::new(36_000),
        changed_at: now,
        first_night_cents: None,
        refund_cap_percent: None,
        capture_due_at: None,
    })
    .expect("serializable");
    let moved_at = sneak_event(&app.db.pool, "reservation", &moved_stream, moved).await;
    let tampered = app.get("/v1/audit/verify", Some(AUDITOR)).await;

    let body = tampered.assert_status(200);
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["first_bad_position"], short_at, "{body}");
    let problems: Vec<&str> = body["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(problems.len(), 3, "{body}");
    let breaks = format!(
        "position {short_at} (reservation {short_stream} #1): ReservationHeld of [{}, {}) on ",
        day(12),
        day(13)
    );
    assert!(
        problems[0].starts_with(&breaks)
            && problems[0].contains(&format!("the stay breaks min_stay on {}", day(12))),
        "{body}"
    );
    assert!(
        problems[1].starts_with(&format!(
            "position {unplanned_at} (reservation {unplanned_stream} #1): "
        )) && problems[1].contains(&format!(
            "rate plan 9, which is not a plan of hotel {HOTEL} selling room type {KING}"
        )),
        "{body}"
    );
    assert!(
        problems[2].starts_with(&format!(
            "position {moved_at} (reservation {moved_stream} #2): DatesChanged to [{}, {})",
            day(11),
            day(13)
        )) && problems[2].contains(&format!("the stay breaks stop_sell on {}", day(11))),
        "{body}"
    );
    app.finish().await;
}

#[tokio::test]
async fn allocations_of_nights_long_past_are_compacted_and_the_history_still_verifies() {
    use app::sweeper::{retention_once, Retention};
    // Arrange: a confirmed stay, a hold never confirmed and a later confirmed stay.
    let app = spawn_app().await;
    let first = plus_days(Utc::now().date_naive(), 3);
    app.seed_hotel(first, 10, 5).await;
    let stay = |start: u64, guest: &str| {
        json!({"hotel_id": HOTEL, "room_type_id": KING, "start_date": plus_days(first, start),
               "end_date": plus_days(first, start + 2), "rooms": 1,
               "guest": {"name": "Guest", "email": guest}})
    };
    let early = app
        .hold_ok(WEB, "early", &stay(0, "early@example.com"))
        .await;
    app.confirm(WEB, "early-pay", &early, "tok_ok")
        .await
        .assert_status(200);
    let held = app.hold_ok(WEB, "held", &stay(1, "held@example.com")).await;
    let late = app.hold_ok(WEB, "late", &stay(5, "late@example.com")).await;
    app.confirm(WEB, "late-pay", &late, "tok_ok")
        .await
        .assert_status(200);
    let allocations = |id: String| {
        let pool = app.db.pool.clone();
        async move {
            count(
                &pool,
                &format!(
                    "SELECT count(*) FROM room_night_allocations WHERE reservation_id = '{id}'"
                ),
            )
            .await
        }
    };
    let nights_before = night_rows(&app.db.pool).await;

    // Act: 36 days after the first night, the last stay that could include the first
    // four nights ended long ago (stays are at most 30 nights): retention compacts them.
    app.clock.set(app.now() + chrono::Duration::days(39));
    let mut passes = 0;
    let mut deleted = 0;
    loop {
        let done = retention_once(app.payments.commands(), Retention::default())
            .await
            .expect("pass");
        deleted += done.allocations;
        passes += 1;
        if !done.allocations_unfinished {
            break;
        }
        assert!(passes < 10, "the pass never finishes");
    }

    // Assert: the early stay's confirmed allocations are gone; the unconfirmed hold's
    // wait for the sweeper to record its lapse; the later stay's nights are kept; the
    // nights' counters are untouched; and the whole history still verifies.
    assert_eq!(deleted, 2);
    assert_eq!(allocations(early).await, 0);
    assert_eq!(allocations(held).await, 2);
    assert_eq!(allocations(late).await, 2);
    assert_eq!(night_rows(&app.db.pool).await, nights_before);
    let report = verify(&app.db.pool).await;
    assert!(report.ok, "{report:#?}");
    // And the next pass has nothing to do until the cutoff moves on.
    let again = retention_once(app.payments.commands(), Retention::default())
        .await
        .expect("pass");
    assert_eq!(
        (again.allocations, again.allocations_unfinished),
        (0, false)
    );
    app.finish().await;
}

#[tokio::test]
async fn a_booking_from_a_block_given_back_to_general_sale_is_found() {
    // A block of 2 of night 10's 3 rooms, and a hold of 1 from it.
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 3).await;
    let code = aggregates::BlockCode::parse("ACME").expect("code");
    let terms = aggregates::BlockTerms::parse(
        "Acme",
        king(),
        stay(day(10), day(12)),
        aggregates::RoomCount::parse(2).expect("rooms"),
        aggregates::Cents::new(15_000),
        day(5),
    )
    .expect("terms");
    svc.set_block(&Caller::Staff("staff".into()), hotel_id(), code, terms)
        .await
        .expect("block");
    let mut request = hold_request(stay(day(10), day(11)), 1, 1);
    request.block_code = Some(code);
    let held = svc
        .hold("web", "web", key("from-block"), request)
        .await
        .expect("hold from the block");
    assert!(verify(&db.pool).await.ok);

    // The hold's room is given back as general sale's, not the block's: the block's
    // pickup would stay counted, and its room would be sold twice.
    let position = sneak_event(
        &db.pool,
        AggregateType::RoomNight.as_str(),
        &night_stream(10),
        json!({"RoomsReleased": {"reservation_id": id(&held), "rooms": 1,
                                 "was_confirmed": false}}),
    )
    .await;
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(report.first_bad_position, Some(position), "{report:#?}");
    assert!(
        mentions(
            &report,
            "took its rooms from block ACME but releases them as general sale's"
        ),
        "{report:#?}"
    );
    db.drop_database().await;
}

/// Verify reads the night tables in the stream ids' byte order without sorting them
/// (see `in_stream_id_order`): hotels 9, 10, 81 and 812 and room types 1, 3 and 10 sort one way
/// as numbers and another as `"{hotel}:{type}:{night}"` text (`812:` before `81:`,
/// `10:` before `9:`). A lawful history over all of them verifies with nothing out of
/// place, and a changed row and a stray allocation are each found at their own night.
#[tokio::test]
async fn nights_of_ids_that_sort_apart_as_text_are_compared_row_for_row() {
    let db = TestDb::new().await;
    let clock = ManualClock::new(Utc::now());
    let svc: CommandService = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock));
    let staff = Caller::Staff("staff".into());
    let hotels = [9_i64, 10, 81, 812];
    let room_types = [1_i64, 3, 10];
    for hotel in hotels {
        let hotel_id = aggregates::HotelId::parse(hotel).expect("hotel id");
        svc.set_hotel(
            &staff,
            hotel_id,
            aggregates::HotelDetails::parse(&format!("Hotel {hotel}"), "Lisbon", "Europe/Lisbon")
                .expect("details"),
            None,
        )
        .await
        .expect("set hotel");
        for room_type in room_types {
            room_type_of_hotel_with_rooms(&svc, hotel_id, room_type, day(9), 3, 4).await;
        }
    }
    // Allocations on the hotels and room types at either end of the text order.
    let mut held = Vec::new();
    for (n, (hotel, room_type)) in [(812_i64, 10_i64), (81, 1), (10, 3), (9, 10)]
        .into_iter()
        .enumerate()
    {
        let mut request = hold_request(stay(day(9), day(11)), 1, n);
        request.hotel_id = aggregates::HotelId::parse(hotel).expect("hotel id");
        request.room_type_id = aggregates::RoomTypeId::parse(room_type).expect("room type");
        let view = svc
            .hold("web", "web", key(&format!("sort-{n}")), request)
            .await
            .expect("hold");
        held.push(id(&view));
    }
    let events = count(&db.pool, "SELECT count(*) FROM events").await;

    let lawful = verify(&db.pool).await;

    assert!(lawful.ok, "{lawful:#?}");
    assert_eq!(lawful.events_checked, u64::try_from(events).unwrap_or(0));
    assert_eq!(
        count(&db.pool, "SELECT count(*) FROM room_night_allocations").await,
        8
    );

    sqlx::query(
        "UPDATE room_nights SET confirmed = confirmed + 1
          WHERE hotel_id = 10 AND room_type_id = 1 AND night = $1",
    )
    .bind(day(10))
    .execute(&db.pool)
    .await
    .expect("change a night behind the events' back");
    sqlx::query(
        "INSERT INTO room_night_allocations (hotel_id, room_type_id, night, reservation_id, rooms)
         VALUES (812, 3, $1, $2, 1)",
    )
    .bind(day(11))
    .bind(held[0].as_uuid())
    .execute(&db.pool)
    .await
    .expect("an allocation no event made");
    let report = verify(&db.pool).await;

    assert!(!report.ok);
    assert_eq!(
        report.problems,
        vec![
            format!(
                "night 10:1:{}: room_nights differs from the replayed events: confirmed 1 \
                 (replayed: 0)",
                day(10)
            ),
            format!(
                "night 812:3:{}: room_night_allocations differ from the replayed events: \
                 reservation {} has 1 room(s) confirmed (replayed: nothing)",
                day(11),
                held[0]
            ),
        ],
        "{report:#?}"
    );
    db.drop_database().await;
}
