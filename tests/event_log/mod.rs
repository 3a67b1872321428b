//! The event log: what the unit of work writes stays readable by postgres-es, and the
//! global feed pages through it with `after` and `limit`, in commit order, with no
//! duplicate and no gap across pages.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use aggregates::{Reservation, ReservationEvent, ReservationId, RoomNight};
use cqrs_es::persist::PersistedEventStore;
use cqrs_es::EventStore;
use postgres_es::PostgresEventRepository;
use serde_json::{json, Value};
use store::write::Strategy;

use crate::support::*;

/// Every event the feed serves, read in one page (the feed only shows transactions older
/// than every running one, cluster-wide, so wait until it has caught up).
async fn whole_feed(app: &TestApp) -> Vec<Value> {
    let expected = app.count("events").await as usize;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let reply = app.events_feed(AUDITOR, None, Some(1000)).await;
        let events = reply.assert_status(200)["events"]
            .as_array()
            .expect("events")
            .clone();
        if events.len() == expected || Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn paging_the_feed_returns_every_event_once_in_order_and_next_is_the_cursor() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 4, 3).await;
    for n in 0..3 {
        let id = app
            .hold_ok(WEB, &format!("h{n}"), &hold_body(day(10), day(12), 1))
            .await;
        if n == 1 {
            app.cancel(WEB, "c", &id, &json!({}))
                .await
                .assert_status(200);
        }
    }
    let all = whole_feed(&app).await;
    let stored: BTreeSet<i64> = sqlx::query_scalar("SELECT global_position FROM events")
        .fetch_all(&app.db.pool)
        .await
        .expect("positions")
        .into_iter()
        .collect();

    let mut paged = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let reply = app.events_feed(AUDITOR, after, Some(4)).await;
        let body = reply.assert_status(200);
        let events = body["events"].as_array().expect("events").clone();
        assert!(events.len() <= 4, "limit respected");
        let next = body["next"].as_i64().expect("next");
        match events.last() {
            Some(last) => assert_eq!(next, last["position"].as_i64().expect("position")),
            None => {
                assert_eq!(Some(next), after, "an empty page keeps the cursor");
                break;
            }
        }
        paged.extend(events);
        after = Some(next);
        pages += 1;
        assert!(pages < 100, "the feed never ends");
    }

    assert_eq!(all.len(), stored.len(), "the feed caught up with the table");
    assert!(pages >= all.len().div_ceil(4));
    assert_eq!(paged, all, "pages concatenate to the whole feed");
    let positions: Vec<i64> = paged
        .iter()
        .map(|e| e["position"].as_i64().expect("position"))
        .collect();
    let unique: BTreeSet<i64> = positions.iter().copied().collect();
    assert_eq!(unique.len(), positions.len(), "no duplicates");
    assert_eq!(unique, stored, "no gaps");
    for event in &paged {
        for field in ["stream", "type", "recorded_at"] {
            assert!(event[field].is_string(), "{field} in {event}");
        }
        assert!(event["version"].is_i64());
        assert!(event["data"].is_object() || event["data"].is_array());
    }
    assert!(paged.iter().any(|e| e["type"] == "ReservationCancelled"));
    app.finish().await;
}

#[tokio::test]
async fn the_feed_refuses_limits_outside_1_to_1000_and_negative_or_unknown_cursors() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 1, 1).await;
    let cases = [
        (None, Some(0)),
        (None, Some(-1)),
        (None, Some(1001)),
        (Some(-5), None),
    ];

    for (after, limit) in cases {
        let reply = app.events_feed(AUDITOR, after, limit).await;

        assert_eq!(
            reply.status.as_u16(),
            422,
            "after={after:?} limit={limit:?}"
        );
        assert_error_shape(&reply);
    }
    // A cursor that names no event: the contract leaves 404 (unknown resource) or 422
    // (well-formed but invalid) open; either way a 4xx in the error shape.
    let unknown = app.events_feed(AUDITOR, Some(987_654), None).await;
    assert!(
        matches!(unknown.status.as_u16(), 404 | 422),
        "{} {}",
        unknown.status,
        unknown.text
    );
    assert_error_shape(&unknown);
    let garbage = app.get("/v1/events?limit=ten", Some(AUDITOR)).await;
    assert_eq!(
        garbage.assert_error(422, "invalid_request")["field"],
        "limit"
    );
    let smallest = app.events_feed(AUDITOR, None, Some(1)).await;
    let largest = app.events_feed(AUDITOR, None, Some(1000)).await;
    assert!(
        smallest.assert_status(200)["events"]
            .as_array()
            .expect("events")
            .len()
            <= 1
    );
    largest.assert_status(200);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reader_paging_while_clients_book_misses_nothing_and_sees_nothing_twice() {
    let app = std::sync::Arc::new(spawn_app().await);
    app.seed_hotel(day(10), 5, 100).await;
    let mut writers = Vec::new();
    for w in 0..4 {
        let app = app.clone();
        writers.push(tokio::spawn(async move {
            for n in 0..8 {
                let start = day(10 + (n % 3));
                app.hold_ok(
                    if w % 2 == 0 { WEB } else { MOBILE },
                    &format!("w{w}-{n}"),
                    &hold_body(start, plus_days(start, 2), 1),
                )
                .await;
            }
        }));
    }

    let mut paged: Vec<Value> = Vec::new();
    let mut after = None;
    let mut writers_done = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = app.events_feed(AUDITOR, after, Some(5)).await;
        let body = reply.assert_status(200);
        let events = body["events"].as_array().expect("events").clone();
        after = Some(body["next"].as_i64().expect("next"));
        let empty = events.is_empty();
        paged.extend(events);
        if !writers_done && writers.iter().all(|w| w.is_finished()) {
            writers_done = true;
        }
        if writers_done && empty && paged.len() as i64 == app.count("events").await {
            break;
        }
        assert!(Instant::now() < deadline, "the feed never caught up");
        if empty {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for writer in writers {
        writer.await.expect("writer");
    }

    let positions: Vec<i64> = paged
        .iter()
        .map(|e| e["position"].as_i64().expect("position"))
        .collect();
    let unique: BTreeSet<i64> = positions.iter().copied().collect();
    assert_eq!(unique.len(), positions.len(), "no event served twice");
    let stored: BTreeSet<i64> = sqlx::query_scalar("SELECT global_position FROM events")
        .fetch_all(&app.db.pool)
        .await
        .expect("positions")
        .into_iter()
        .collect();
    assert_eq!(unique, stored, "no event skipped");
    assert_eq!(
        paged,
        whole_feed(&app).await,
        "the same order as one read of the whole feed"
    );
    let app = std::sync::Arc::into_inner(app).expect("writers done");
    app.finish().await;
}

#[tokio::test]
async fn postgres_es_reads_the_streams_the_unit_of_work_writes() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Optimistic);
    hotel_with_rooms(&svc, day(10), 3, 2).await;
    let view = svc
        .hold(
            "web",
            "web",
            key("h"),
            hold_request(stay(day(10), day(12)), 1, 1),
        )
        .await
        .expect("hold");
    let id = ReservationId::from_uuid(view.reservation_id);
    svc.cancel(
        &app::commands::Caller::Channel("web".into()),
        "web",
        Some(key("c")),
        id,
        "x".into(),
    )
    .await
    .expect("cancel");

    let reservations_store: PersistedEventStore<PostgresEventRepository, Reservation> =
        PersistedEventStore::new_event_store(PostgresEventRepository::new(db.pool.clone()));
    let nights_store: PersistedEventStore<PostgresEventRepository, RoomNight> =
        PersistedEventStore::new_event_store(PostgresEventRepository::new(db.pool.clone()));
    let stream = aggregates::contract::reservation_stream_id(hotel_id(), id);
    let events = reservations_store
        .load_events(&stream)
        .await
        .expect("postgres-es loads the reservation stream");
    let night_events = nights_store
        .load_events(&aggregates::RoomNightKey::new(hotel_id(), king(), day(10)).stream_id())
        .await
        .expect("postgres-es loads a night stream");

    assert_eq!(events.len(), 2);
    assert!(matches!(
        events[0].payload,
        ReservationEvent::ReservationHeld(_)
    ));
    assert!(matches!(
        events[1].payload,
        ReservationEvent::ReservationCancelled { .. }
    ));
    assert_eq!(
        events[0]
            .metadata
            .get("idempotency_key")
            .map(String::as_str),
        Some("h")
    );
    let mut night = RoomNight::default();
    for envelope in &night_events {
        night.apply_event(&envelope.payload);
    }
    assert_eq!(night_events.len(), 3, "inventory set, held, released");
    assert_eq!((night.held(), night.confirmed()), (0, 0));
    db.drop_database().await;
}
