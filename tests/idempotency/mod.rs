//! Idempotency keys: a replay answers the first outcome unchanged (even a rejection), a
//! key cannot be reused for another request, keys are scoped per client, and concurrent
//! duplicates make one reservation.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use aggregates::{Rejection, ReservationId};
use chrono::Duration;
use reqwest::Method;
use serde_json::json;
use store::error::CommandError;
use store::write::Strategy;

use crate::support::*;

#[tokio::test]
async fn a_replayed_hold_answers_the_first_status_and_body_byte_for_byte() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let body = hold_body(day(10), day(12), 1);
    let first = app.hold(WEB, "once", &body).await;
    let id = first.str("reservation_id");

    let replay = app.hold(WEB, "once", &body).await;
    app.cancel(WEB, "cancel", &id, &json!({}))
        .await
        .assert_status(200);
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 60));
    let replay_after_changes = app.hold(WEB, "once", &body).await;

    first.assert_status(201);
    for reply in [&replay, &replay_after_changes] {
        assert_eq!(reply.status, first.status);
        assert_eq!(reply.text, first.text, "the first body, unchanged");
    }
    assert_eq!(app.count("reservations").await, 1);
    app.finish().await;
}

#[tokio::test]
async fn a_stored_answer_refers_to_the_reservation_and_a_replay_after_erasure_reads_the_guest_as_erased(
) {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let body = hold_body(day(10), day(12), 1);
    let first = app.hold(WEB, "kept", &body).await;
    let first = first.assert_status(201).clone();
    let id = first["reservation_id"].as_str().expect("id").to_owned();

    // The record keeps where the answer is (the stream, its version, the time), not a
    // copy of it: no guest, no amounts.
    let stored: serde_json::Value =
        sqlx::query_scalar("SELECT outcome FROM idempotency_keys WHERE key = 'kept'")
            .fetch_one(&app.db.pool)
            .await
            .expect("the record");
    assert_eq!(
        stored["Reservation"]["reservation_id"],
        id.as_str(),
        "{stored}"
    );
    assert_eq!(stored["Reservation"]["version"], 1, "{stored}");
    assert!(stored.pointer("/Reservation/guest").is_none(), "{stored}");
    assert!(!stored.to_string().contains("total_cents"), "{stored}");

    app.post_json(
        "/v1/guests/erase",
        ADMIN,
        "erase-ana",
        &json!({"email": "ana@example.com"}),
    )
    .await
    .assert_status(200);
    let replay = app.hold(WEB, "kept", &body).await;

    let mut replayed = replay.assert_status(201).clone();
    assert_eq!(
        replayed["guest"],
        json!({"name": "[erased]", "email": "[erased]"}),
        "the guest is gone from every copy, the stored answer's too"
    );
    replayed["guest"] = first["guest"].clone();
    assert_eq!(replayed, first, "everything else as first answered");
    assert_eq!(app.count("reservations").await, 1);
    app.finish().await;
}

#[tokio::test]
async fn a_replay_with_the_same_request_in_other_json_formatting_is_still_a_replay() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let first = app.hold(WEB, "fmt", &hold_body(day(10), day(12), 1)).await;
    let reordered = format!(
        r#"{{ "guest": {{"email": "ana@example.com", "name": "Ana Lima"}},
             "rooms": 1, "end_date": "{}", "start_date": "{}",
             "room_type_id": {KING}, "hotel_id": {HOTEL} }}"#,
        day(12),
        day(10)
    );

    let replay = app
        .send(
            app.request(Method::POST, "/v1/reservations", Some(WEB))
                .header("Idempotency-Key", "fmt")
                .header("Content-Type", "application/json")
                .body(reordered),
        )
        .await;

    first.assert_status(201);
    assert_eq!((replay.status, &replay.text), (first.status, &first.text));
    assert_eq!(app.count("reservations").await, 1);
    app.finish().await;
}

#[tokio::test]
async fn a_replayed_sold_out_answer_stays_sold_out_after_rooms_free_up() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 1).await;
    let holder = app
        .hold_ok(WEB, "holder", &hold_body(day(10), day(11), 1))
        .await;
    let body = hold_body(day(10), day(12), 1);
    let first = app.hold(WEB, "too-late", &body).await;
    app.cancel(WEB, "free", &holder, &json!({}))
        .await
        .assert_status(200);
    let before = app.snapshot().await;

    let replay = app.hold(WEB, "too-late", &body).await;

    assert_eq!(first.assert_error(409, "sold_out")["night"], date(10));
    assert_eq!(replay.status, first.status);
    assert_eq!(
        replay.text, first.text,
        "the first answer, not a new attempt"
    );
    assert_eq!(app.snapshot().await, before);
    app.hold_ok(WEB, "fresh-key", &body).await;
    app.finish().await;
}

#[tokio::test]
async fn a_replayed_cancel_answers_the_first_200_again() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 1).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let first = app
        .cancel(WEB, "cancel", &id, &json!({"reason": "x"}))
        .await;
    let events = app.count("events").await;

    let replay = app
        .cancel(WEB, "cancel", &id, &json!({"reason": "x"}))
        .await;

    first.assert_status(200);
    assert_eq!((replay.status, &replay.text), (first.status, &first.text));
    assert_eq!(app.count("events").await, events);
    app.finish().await;
}

#[tokio::test]
async fn the_same_key_with_a_different_body_is_422_idempotency_key_reused() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let first = app
        .hold(WEB, "reused", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;

    let other_dates = app
        .hold(WEB, "reused", &hold_body(day(11), day(13), 1))
        .await;
    let other_rooms = app
        .hold(WEB, "reused", &hold_body(day(10), day(12), 2))
        .await;
    let other_command = app
        .cancel(WEB, "reused", &first.str("reservation_id"), &json!({}))
        .await;

    first.assert_status(201);
    other_dates.assert_error(422, "idempotency_key_reused");
    other_rooms.assert_error(422, "idempotency_key_reused");
    other_command.assert_error(422, "idempotency_key_reused");
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn keys_are_scoped_per_token_so_two_channels_may_use_the_same_key() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;

    let web = app
        .hold(WEB, "shared-key", &hold_body(day(10), day(12), 1))
        .await;
    let mobile = app
        .hold(MOBILE, "shared-key", &hold_body(day(11), day(13), 2))
        .await;

    let web = web.assert_status(201);
    let mobile = mobile.assert_status(201);
    assert_ne!(web["reservation_id"], mobile["reservation_id"]);
    assert_eq!(web["channel"], "web");
    assert_eq!(mobile["channel"], "mobile");
    assert_eq!(mobile["rooms"], 2);
    assert_eq!(app.count("reservations").await, 2);
    assert_eq!(app.taken(day(11)).await, 3);
    app.finish().await;
}

#[tokio::test]
async fn a_state_changing_post_without_an_idempotency_key_is_400() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;
    let posts = [
        (
            "/v1/reservations".to_owned(),
            hold_body(day(10), day(12), 1),
        ),
        (format!("/v1/reservations/{id}/cancel"), json!({})),
        (
            format!("/v1/reservations/{id}/change-dates"),
            json!({"start_date": day(11), "end_date": day(13)}),
        ),
    ];

    for (path, body) in posts {
        let reply = app
            .send(app.request(Method::POST, &path, Some(WEB)).json(&body))
            .await;

        reply.assert_error(400, "missing_idempotency_key");
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn keys_that_are_empty_too_long_or_not_printable_ascii_are_400_and_255_chars_is_fine() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let body = hold_body(day(10), day(12), 1);
    let too_long = "k".repeat(256);
    let bad: Vec<&[u8]> = vec![
        too_long.as_bytes(),
        b"",
        "clé".as_bytes(),
        b"tab\there",
        b"\xff\xfe",
    ];
    let before = app.snapshot().await;

    for key in bad {
        let (name, value) = raw_header("idempotency-key", key);
        let reply = app
            .send(
                app.request(Method::POST, "/v1/reservations", Some(WEB))
                    .header(name, value)
                    .json(&body),
            )
            .await;

        assert_eq!(reply.status.as_u16(), 400, "key {key:?}: {}", reply.text);
        assert_error_shape(&reply);
        assert_eq!(reply.json["error"], "invalid_idempotency_key");
    }
    assert_eq!(app.snapshot().await, before);
    let longest = app.hold(WEB, &"k".repeat(255), &body).await;
    longest.assert_status(201);
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_duplicates_of_one_key_make_exactly_one_reservation() {
    let app = Arc::new(spawn_app().await);
    app.seed_hotel(day(10), 5, 5).await;
    let body = hold_body(day(10), day(13), 2);

    let mut clients = Vec::new();
    for _ in 0..20 {
        let app = app.clone();
        let body = body.clone();
        clients.push(tokio::spawn(async move {
            let mut in_flight = 0;
            for _ in 0..500 {
                let reply = app.hold(WEB, "dup", &body).await;
                if reply.status.as_u16() == 409
                    && matches!(
                        reply.json["error"].as_str(),
                        Some("request_in_flight" | "try_again")
                    )
                {
                    assert!(reply.headers.contains_key("retry-after"));
                    in_flight += 1;
                    tokio::time::sleep(StdDuration::from_millis(5)).await;
                    continue;
                }
                return (reply, in_flight);
            }
            panic!("still in flight after 500 tries");
        }));
    }
    let mut answers = Vec::new();
    for client in clients {
        answers.push(client.await.expect("client task"));
    }

    let retried: usize = answers.iter().map(|(_, in_flight)| in_flight).sum();
    println!("{retried} answers were request_in_flight / try_again and retried");
    let (first, _) = &answers[0];
    first.assert_status(201);
    for (reply, _) in &answers {
        assert_eq!(reply.status, first.status);
        assert_eq!(reply.json["reservation_id"], first.json["reservation_id"]);
        assert_eq!(reply.text, first.text);
    }
    assert_eq!(app.count("reservations").await, 1);
    for d in 10..13 {
        assert_eq!(
            app.taken(day(d)).await,
            2,
            "night {d}: one reservation of 2 rooms"
        );
    }
    let held_events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE event_type = 'ReservationHeld'")
            .fetch_one(&app.db.pool)
            .await
            .expect("count");
    assert_eq!(held_events, 1);
    assert_invariants(&app.db.pool).await;
    let app = Arc::into_inner(app).expect("every client finished");
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_duplicate_cancels_cancel_once_and_all_get_the_same_answer() {
    let app = Arc::new(spawn_app().await);
    app.seed_hotel(day(10), 5, 1).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;

    let mut clients = Vec::new();
    for _ in 0..20 {
        let app = app.clone();
        let id = id.clone();
        clients.push(tokio::spawn(async move {
            for _ in 0..500 {
                let reply = app
                    .cancel(WEB, "cancel-once", &id, &json!({"reason": "dup"}))
                    .await;
                if reply.status.as_u16() == 409
                    && matches!(
                        reply.json["error"].as_str(),
                        Some("request_in_flight" | "try_again")
                    )
                {
                    tokio::time::sleep(StdDuration::from_millis(5)).await;
                    continue;
                }
                return reply;
            }
            panic!("still in flight after 500 tries");
        }));
    }
    let mut answers = Vec::new();
    for client in clients {
        answers.push(client.await.expect("client task"));
    }

    let first = &answers[0];
    assert_eq!(first.assert_status(200)["status"], "cancelled");
    for reply in &answers {
        assert_eq!((reply.status, &reply.text), (first.status, &first.text));
    }
    let cancellations: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE event_type = 'ReservationCancelled'")
            .fetch_one(&app.db.pool)
            .await
            .expect("count");
    assert_eq!(cancellations, 1);
    assert_eq!(app.taken(day(10)).await, 0);
    assert_invariants(&app.db.pool).await;
    let app = Arc::into_inner(app).expect("every client finished");
    app.finish().await;
}

#[tokio::test]
async fn a_replayed_request_returns_the_first_outcome_even_a_rejection() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 2, 1).await;
    let request = hold_request(stay(day(10), day(12)), 1, 1);
    let first = svc
        .hold("web", "web", key("k"), request.clone())
        .await
        .expect("hold");

    let mut replay = svc
        .hold("web", "web", key("k"), request.clone())
        .await
        .expect("replay");
    // The stored answer keeps its guest sealed; opened, it is the first answer.
    assert!(replay.guest.sealed().is_some(), "{:?}", replay.guest);
    let binding = store::privacy::Binding {
        reservation: ReservationId::from_uuid(replay.reservation_id),
        field: store::privacy::Field::Guest,
    };
    svc.privacy()
        .open(binding, &mut replay.guest)
        .await
        .expect("open");
    let other_client = svc
        .hold("mobile", "mobile", key("k"), request.clone())
        .await;
    let reused = svc
        .hold(
            "web",
            "web",
            key("k"),
            hold_request(stay(day(10), day(11)), 1, 1),
        )
        .await;
    let sold_out = svc
        .hold("mobile", "mobile", key("k2"), request.clone())
        .await;
    let sold_out_replay = {
        // Free the rooms: the replay must still say sold_out, as the first answer did.
        svc.cancel(
            &web(),
            web().name(),
            Some(key("free")),
            ReservationId::from_uuid(first.reservation_id),
            "free".into(),
        )
        .await
        .expect("cancel");
        svc.hold("mobile", "mobile", key("k2"), request.clone())
            .await
    };

    assert_eq!(replay, first, "the same answer, the same reservation");
    assert!(
        matches!(
            other_client,
            Err(CommandError::Rejected(Rejection::SoldOut { .. }))
        ),
        "keys are scoped per client: {other_client:?}"
    );
    assert!(matches!(reused, Err(CommandError::KeyReused)));
    assert!(matches!(
        sold_out,
        Err(CommandError::Rejected(Rejection::SoldOut { .. }))
    ));
    assert!(matches!(
        sold_out_replay,
        Err(CommandError::Rejected(Rejection::SoldOut { .. }))
    ));
    let key_on_first_event: Option<String> = sqlx::query_scalar(
        "SELECT metadata->>'idempotency_key' FROM events
          WHERE aggregate_type = 'reservation' AND sequence = 1",
    )
    .fetch_one(&db.pool)
    .await
    .expect("metadata");
    assert_eq!(key_on_first_event.as_deref(), Some("k"));
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_calls_with_one_key_make_one_reservation() {
    for strategy in [Strategy::Optimistic, Strategy::Pessimistic, Strategy::Group] {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(30), 3, 5).await;
        let request = hold_request(stay(day(30), day(32)), 1, 1);

        let mut calls = Vec::new();
        for _ in 0..20 {
            let svc = svc.clone();
            let request = request.clone();
            calls.push(tokio::spawn(async move {
                // Like a client: retry while the first is in flight, same key.
                loop {
                    match svc
                        .hold("web", "web", key("same-intent"), request.clone())
                        .await
                    {
                        Err(CommandError::InFlight) | Err(CommandError::Contention { .. }) => {
                            tokio::task::yield_now().await
                        }
                        other => return other,
                    }
                }
            }));
        }
        let mut ids = std::collections::BTreeSet::new();
        for call in calls {
            let view = call.await.expect("task").expect("hold");
            ids.insert(view.reservation_id);
        }

        assert_eq!(ids.len(), 1, "every call got the same reservation");
        let (reservations,): (i64,) = sqlx::query_as("SELECT count(*) FROM reservations")
            .fetch_one(&db.pool)
            .await
            .expect("count");
        assert_eq!(reservations, 1);
        assert_eq!(taken(&db.pool, day(30)).await, 1);
        assert_eq!(taken(&db.pool, day(31)).await, 1);
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}
