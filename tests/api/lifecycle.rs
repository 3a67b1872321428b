//! The reservation lifecycle over HTTP: hold, look up, lapse, cancel, change dates, and
//! a reservation's event history.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use crate::support::*;

#[tokio::test]
async fn a_hold_answers_201_with_the_reservation_and_takes_every_night() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;

    let reply = app
        .hold(WEB, "first", &{
            let mut body = hold_body(day(10), day(13), 2);
            body["expected_total_cents"] = json!(3 * RATE * 2);
            body
        })
        .await;

    let body = reply.assert_status(201);
    let id: uuid::Uuid = body["reservation_id"]
        .as_str()
        .expect("reservation_id")
        .parse()
        .expect("a UUID");
    assert_eq!(body["status"], "held");
    assert_eq!(body["total_cents"], 3 * RATE * 2);
    assert_eq!(body["hotel_id"], HOTEL);
    assert_eq!(body["room_type_id"], KING);
    assert_eq!(body["start_date"], date(10));
    assert_eq!(body["end_date"], date(13));
    assert_eq!(body["nights"], 3);
    assert_eq!(body["rooms"], 2);
    assert_eq!(
        body["guest"],
        json!({"name": "Ana Lima", "email": "ana@example.com"})
    );
    assert_eq!(body["channel"], "web");
    let expires: DateTime<Utc> = body["hold_expires_at"]
        .as_str()
        .expect("hold_expires_at")
        .parse()
        .expect("RFC 3339");
    assert_eq!(expires, app.now() + Duration::seconds(HOLD_TTL_SECONDS));
    for d in 10..13 {
        assert_eq!(app.taken(day(d)).await, 2, "night {d}");
    }
    assert_eq!(
        app.taken(day(13)).await,
        0,
        "the check-out night is not sold"
    );
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM reservations WHERE reservation_id = $1")
            .bind(id)
            .fetch_one(&app.db.pool)
            .await
            .expect("count");
    assert_eq!(stored, 1);
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn a_hold_over_a_sold_out_night_is_409_naming_that_night_and_takes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 1).await;
    app.hold_ok(WEB, "middle", &hold_body(day(12), day(13), 1))
        .await;
    let before = app.snapshot().await;

    let reply = app
        .hold(MOBILE, "span", &hold_body(day(10), day(15), 1))
        .await;

    let body = reply.assert_error(409, "sold_out");
    assert_eq!(body["night"], date(12));
    assert_eq!(app.snapshot().await, before, "all nights or none");
    assert_eq!(app.taken(day(10)).await, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_hold_with_a_stale_expected_total_is_409_price_changed_with_the_current_total() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let mut body = hold_body(day(10), day(12), 1);
    body["expected_total_cents"] = json!(30_000);

    let reply = app.hold(WEB, "stale", &body).await;

    let error = reply.assert_error(409, "price_changed");
    assert_eq!(error["total_cents"], 2 * RATE);
    assert_eq!(app.count("reservations").await, 0);
    assert_eq!(app.taken(day(10)).await, 0);
    app.finish().await;
}

#[tokio::test]
async fn holds_with_invalid_dates_rooms_hotel_or_room_type_are_422() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 20).await;
    let before = app.snapshot().await;
    let with = |field: &str, value: Value| {
        let mut body = hold_body(day(10), day(12), 1);
        body[field] = value;
        body
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "inverted",
            hold_body(day(12), day(10), 1),
            "invalid_request",
        ),
        (
            "zero nights",
            hold_body(day(10), day(10), 1),
            "invalid_request",
        ),
        (
            "zero rooms",
            hold_body(day(10), day(12), 0),
            "invalid_request",
        ),
        (
            "eleven rooms",
            hold_body(day(10), day(12), 11),
            "invalid_request",
        ),
        (
            "unknown hotel",
            with("hotel_id", json!(999)),
            "unknown_hotel",
        ),
        (
            "unknown room type",
            with("room_type_id", json!(99)),
            "unknown_room_type",
        ),
    ];

    for (n, (name, body, code)) in cases.into_iter().enumerate() {
        let reply = app.hold(WEB, &format!("invalid-{n}"), &body).await;

        let error = reply.assert_error(422, code);
        if code == "invalid_request" {
            assert!(
                error["field"].is_string(),
                "{name}: names the field: {error}"
            );
        }
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn get_reservation_shows_the_hold_and_shows_expired_once_the_hold_has_lapsed() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let created = app.hold(WEB, "k", &hold_body(day(10), day(12), 1)).await;
    let id = created.str("reservation_id");

    let now = app.get_reservation(WEB, &id).await;
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS - 1));
    let just_before = app.get_reservation(WEB, &id).await;
    app.clock.advance(Duration::seconds(2));
    let after = app.get_reservation(WEB, &id).await;

    assert_eq!(now.assert_status(200), &created.json, "read-your-writes");
    assert_eq!(just_before.assert_status(200)["status"], "held");
    let after = after.assert_status(200);
    assert_eq!(after["status"], "expired");
    assert_eq!(after["reservation_id"], id);
    app.finish().await;
}

#[tokio::test]
async fn get_reservation_by_admin_and_auditor_is_allowed_and_an_unknown_id_is_404() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app.hold_ok(WEB, "k", &hold_body(day(10), day(12), 1)).await;

    let admin = app.get_reservation(ADMIN, &id).await;
    let auditor = app.get_reservation(AUDITOR, &id).await;
    let unknown = app
        .get_reservation(WEB, &uuid::Uuid::new_v4().to_string())
        .await;

    assert_eq!(admin.assert_status(200)["reservation_id"], id);
    assert_eq!(auditor.assert_status(200)["reservation_id"], id);
    unknown.assert_error(404, "not_found");
    app.finish().await;
}

#[tokio::test]
async fn cancelling_returns_the_nights_to_sale_and_a_second_cancel_is_409_invalid_state() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 1).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;

    let cancelled = app
        .cancel(WEB, "cancel-1", &id, &json!({"reason": "change of plans"}))
        .await;
    let after_first = app.snapshot().await;
    let again = app.cancel(WEB, "cancel-2", &id, &json!({})).await;

    let body = cancelled.assert_status(200);
    assert_eq!(body["status"], "cancelled");
    assert_eq!(body["reservation_id"], id);
    assert!(body["refund_cents"].is_i64(), "refund_cents in {body}");
    assert_eq!(app.taken(day(10)).await, 0);
    assert_eq!(app.taken(day(11)).await, 0);
    let error = again.assert_error(409, "invalid_state");
    assert_eq!(error["status"], "cancelled");
    assert_eq!(app.snapshot().await, after_first, "releases nothing");
    assert_eq!(
        app.get_reservation(WEB, &id).await.json["status"],
        "cancelled"
    );
    app.hold_ok(MOBILE, "rebook", &hold_body(day(10), day(12), 1))
        .await;
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn cancelling_a_lapsed_hold_is_409_invalid_state_and_writes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 1).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));
    let before = app.snapshot().await;

    let reply = app.cancel(WEB, "cancel", &id, &json!({})).await;

    let error = reply.assert_error(409, "invalid_state");
    assert_eq!(error["status"], "expired");
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn changing_dates_moves_the_stay_and_its_price_in_one_step() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 1).await;
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(15), "end_date": day(16), "total_rooms": 1, "rate_cents": 25_000}),
    )
    .await
    .assert_status(200);
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;

    let reply = app
        .change_dates(
            WEB,
            "move",
            &id,
            &json!({"start_date": day(14), "end_date": day(17), "expected_total_cents": RATE + 25_000 + RATE}),
        )
        .await;

    let body = reply.assert_status(200);
    assert_eq!(body["reservation_id"], id);
    assert_eq!(body["start_date"], date(14));
    assert_eq!(body["end_date"], date(17));
    assert_eq!(body["nights"], 3);
    assert_eq!(body["total_cents"], RATE + 25_000 + RATE);
    assert_eq!(body["status"], "held");
    for (d, taken) in [
        (10, 0),
        (11, 0),
        (13, 0),
        (14, 1),
        (15, 1),
        (16, 1),
        (17, 0),
    ] {
        assert_eq!(app.taken(day(d)).await, taken, "night {d}");
    }
    let got = app.get_reservation(WEB, &id).await;
    assert_eq!(got.json["start_date"], date(14));
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn changing_dates_onto_a_sold_out_night_is_409_naming_it_and_nothing_changes() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 1).await;
    let id = app
        .hold_ok(WEB, "mine", &hold_body(day(10), day(12), 1))
        .await;
    app.hold_ok(MOBILE, "theirs", &hold_body(day(15), day(16), 1))
        .await;
    let before = app.snapshot().await;
    let reservation_before = app.get_reservation(WEB, &id).await;

    let reply = app
        .change_dates(
            WEB,
            "move",
            &id,
            &json!({"start_date": day(13), "end_date": day(17)}),
        )
        .await;

    let error = reply.assert_error(409, "sold_out");
    assert_eq!(error["night"], date(15));
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.get_reservation(WEB, &id).await.text,
        reservation_before.text
    );
    app.finish().await;
}

#[tokio::test]
async fn changing_to_the_same_dates_is_422_and_changing_a_lapsed_hold_is_409_hold_expired() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 1).await;
    let id = app
        .hold_ok(WEB, "mine", &hold_body(day(10), day(12), 1))
        .await;

    let same = app
        .change_dates(
            WEB,
            "same",
            &id,
            &json!({"start_date": day(10), "end_date": day(12)}),
        )
        .await;
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));
    let lapsed = app
        .change_dates(
            WEB,
            "late",
            &id,
            &json!({"start_date": day(11), "end_date": day(13)}),
        )
        .await;

    same.assert_error(422, "invalid_request");
    lapsed.assert_error(409, "hold_expired");
    app.finish().await;
}

#[tokio::test]
async fn commands_on_an_unknown_reservation_are_404() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 1).await;
    let unknown = uuid::Uuid::new_v4().to_string();
    let before = app.snapshot().await;

    let cancel = app.cancel(WEB, "c", &unknown, &json!({})).await;
    let change = app
        .change_dates(
            WEB,
            "m",
            &unknown,
            &json!({"start_date": day(10), "end_date": day(12)}),
        )
        .await;
    let events = app.reservation_events(AUDITOR, &unknown).await;

    cancel.assert_error(404, "not_found");
    change.assert_error(404, "not_found");
    events.assert_error(404, "not_found");
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_reservations_event_history_lists_its_events_in_order() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 2).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    app.change_dates(
        WEB,
        "move",
        &id,
        &json!({"start_date": day(11), "end_date": day(13)}),
    )
    .await
    .assert_status(200);
    app.cancel(WEB, "cancel", &id, &json!({"reason": "ill"}))
        .await
        .assert_status(200);

    let by_owner = app.reservation_events(WEB, &id).await;
    let by_auditor = app.reservation_events(AUDITOR, &id).await;

    let body = by_owner.assert_status(200);
    assert_eq!(body["reservation_id"], id);
    let events = body["events"].as_array().expect("events");
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect();
    assert_eq!(
        types,
        vec!["ReservationHeld", "DatesChanged", "ReservationCancelled"]
    );
    let versions: Vec<i64> = events
        .iter()
        .map(|e| e["version"].as_i64().expect("version"))
        .collect();
    assert_eq!(versions, vec![1, 2, 3]);
    for event in events {
        assert_eq!(event["stream"], format!("reservation/{HOTEL}:{id}"));
        assert!(event["position"].is_i64());
        assert!(event["recorded_at"].is_string());
        assert!(event["data"].is_object());
    }
    assert_eq!(events[2]["data"]["reason"], "ill");
    assert_eq!(by_auditor.assert_status(200), body);
    app.finish().await;
}

#[tokio::test]
async fn changing_dates_with_a_stale_expected_total_is_409_price_changed_and_nothing_changes() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 1).await;
    let id = app
        .hold_ok(WEB, "mine", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;

    let reply = app
        .change_dates(
            WEB,
            "move",
            &id,
            &json!({"start_date": day(13), "end_date": day(16), "expected_total_cents": 2 * RATE}),
        )
        .await;

    let error = reply.assert_error(409, "price_changed");
    assert_eq!(error["total_cents"], 3 * RATE);
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_hold_over_nights_without_inventory_is_sold_out_naming_the_first_of_them() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;
    let before = app.snapshot().await;

    let reply = app
        .hold(WEB, "beyond", &hold_body(day(11), day(15), 1))
        .await;

    assert_eq!(reply.assert_error(409, "sold_out")["night"], date(13));
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}
