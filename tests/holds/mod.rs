//! Holds and the reservation lifecycle: a hold takes every night of the stay or none,
//! at the sum of the nightly rates; it can be looked up, lapses and expires, is
//! confirmed, cancelled (releasing its nights once), moved to other dates in one step,
//! and lists its own event history.

use std::collections::BTreeMap;
use std::sync::Arc;

use aggregates::booking::InventoryUpdate;
use aggregates::{HotelId, Rejection, ReservationId, ReservationStatus, RoomTypeId, StayDates};
use app::clock::{Clock, ManualClock};
use app::commands::StayAction;
use chrono::{DateTime, Days, Duration, Utc};
use serde_json::{json, Value};
use store::error::CommandError;
use store::write::Strategy;

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
    // The owner reads the reason opened; an auditor reads the same history with the
    // personal data sealed.
    assert_eq!(events[2]["data"]["reason"], json!({"clear": "ill"}));
    let audited = by_auditor.assert_status(200);
    let audited_events = audited["events"].as_array().expect("events");
    assert_eq!(audited_events.len(), events.len());
    assert!(audited_events[2]["data"]["reason"]["sealed"]["data"].is_string());
    assert!(!by_auditor.text.contains("ill\""), "{}", by_auditor.text);
    assert!(audited_events[0]["data"]["guest"]["sealed"].is_object());
    assert_eq!(audited_events[1], events[1], "nothing personal: the same");
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
async fn a_hold_over_nights_without_inventory_is_no_inventory_naming_the_first_of_them() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;
    let before = app.snapshot().await;

    let reply = app
        .hold(WEB, "beyond", &hold_body(day(11), day(15), 1))
        .await;

    // Never on sale is not sold out: a client told "sold out" would wait for rooms
    // that were never there.
    let body = reply.assert_error(409, "no_inventory");
    assert_eq!(body["night"], date(13));
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("no inventory")),
        "{body}"
    );
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

const STRATEGIES: [Strategy; 3] = [Strategy::Optimistic, Strategy::Pessimistic, Strategy::Group];

#[tokio::test]
async fn a_stay_ending_on_the_twelfth_and_one_starting_on_the_twelfth_both_succeed() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 5, 1).await;

        let first = svc
            .hold(
                "web",
                "web",
                key("a"),
                hold_request(stay(day(10), day(12)), 1, 1),
            )
            .await;
        let second = svc
            .hold(
                "web",
                "web",
                key("b"),
                hold_request(stay(day(12), day(14)), 1, 2),
            )
            .await;

        assert!(first.is_ok(), "{first:?}");
        assert!(second.is_ok(), "{second:?}");
        for d in 10..14 {
            assert_eq!(taken(&db.pool, day(d)).await, 1, "night {d}");
        }
        assert_eq!(taken(&db.pool, day(14)).await, 0);
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[test]
fn zero_night_and_inverted_stays_are_rejected_at_the_boundary() {
    assert!(StayDates::parse(day(10), day(10)).is_err());
    assert!(StayDates::parse(day(11), day(10)).is_err());
}

#[tokio::test]
async fn holding_is_all_nights_or_none_and_sold_out_names_the_first_failing_night() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 1).await;
    svc.hold(
        "web",
        "web",
        key("middle"),
        hold_request(stay(day(12), day(13)), 1, 1),
    )
    .await
    .expect("hold the middle night");

    let result = svc
        .hold(
            "web",
            "web",
            key("span"),
            hold_request(stay(day(10), day(15)), 1, 2),
        )
        .await;

    match result {
        Err(CommandError::Rejected(Rejection::SoldOut { night })) => assert_eq!(night, day(12)),
        other => panic!("expected sold_out, got {other:?}"),
    }
    assert_eq!(taken(&db.pool, day(10)).await, 0, "no partial hold");
    assert_eq!(taken(&db.pool, day(11)).await, 0, "no partial hold");
    assert_eq!(taken(&db.pool, day(14)).await, 0, "no partial hold");
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test]
async fn the_price_is_the_sum_of_the_nightly_rates_and_a_stale_price_is_refused() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 3).await;
    svc.set_inventory(
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        king(),
        stay(day(11), day(12)),
        InventoryUpdate {
            total_rooms: Some(3),
            overbooking_allowance: None,
            rate_cents: Some(aggregates::Cents::new(25_000)),
        },
    )
    .await
    .expect("weekend rate");

    let mut stale = hold_request(stay(day(10), day(13)), 2, 1);
    stale.expected_total_cents = Some(aggregates::Cents::new(3 * 18_000 * 2));
    let refused = svc.hold("web", "web", key("stale"), stale).await;
    let held = svc
        .hold(
            "web",
            "web",
            key("fresh"),
            hold_request(stay(day(10), day(13)), 2, 1),
        )
        .await
        .expect("hold");

    let expected = aggregates::Cents::new((18_000 + 25_000 + 18_000) * 2);
    match refused {
        Err(CommandError::Rejected(Rejection::PriceChanged { total_cents })) => {
            assert_eq!(total_cents, expected)
        }
        other => panic!("expected price_changed, got {other:?}"),
    }
    assert_eq!(held.total_cents, expected);
    assert_eq!(
        taken(&db.pool, day(10)).await,
        2,
        "only the fresh hold took rooms"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn cancelling_twice_releases_once() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 5, 2).await;
        let view = svc
            .hold(
                "web",
                "web",
                key("h"),
                hold_request(stay(day(10), day(13)), 1, 1),
            )
            .await
            .expect("hold");
        svc.hold(
            "web",
            "web",
            key("h2"),
            hold_request(stay(day(10), day(13)), 1, 2),
        )
        .await
        .expect("second guest");
        let id = ReservationId::from_uuid(view.reservation_id);

        let first = svc
            .cancel(
                &web(),
                web().name(),
                Some(key("c1")),
                id,
                "change of plans".into(),
            )
            .await
            .expect("cancel");
        let second = svc
            .cancel(
                &web(),
                web().name(),
                Some(key("c2")),
                id,
                "change of plans".into(),
            )
            .await;

        assert_eq!(first.status, ReservationStatus::Cancelled);
        match second {
            Err(CommandError::Rejected(Rejection::InvalidState { status })) => {
                assert_eq!(status, ReservationStatus::Cancelled)
            }
            other => panic!("expected invalid_state, got {other:?}"),
        }
        for d in 10..13 {
            assert_eq!(
                taken(&db.pool, day(d)).await,
                1,
                "the other guest keeps night {d}"
            );
        }
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn concurrent_cancels_of_one_reservation_release_its_nights_once() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 3, 3).await;
        for g in 0..2 {
            svc.hold(
                "web",
                "web",
                key(&format!("other{g}")),
                hold_request(stay(day(10), day(13)), 1, g),
            )
            .await
            .expect("other guests");
        }
        let view = svc
            .hold(
                "web",
                "web",
                key("mine"),
                hold_request(stay(day(10), day(13)), 1, 9),
            )
            .await
            .expect("hold");
        let id = ReservationId::from_uuid(view.reservation_id);

        let mut calls = Vec::new();
        for n in 0..16 {
            let svc = svc.clone();
            calls.push(tokio::spawn(async move {
                svc.cancel(
                    &web(),
                    web().name(),
                    Some(key(&format!("cancel{n}"))),
                    id,
                    "x".into(),
                )
                .await
            }));
        }
        let mut cancelled = 0;
        for call in calls {
            match call.await.expect("task") {
                Ok(_) => cancelled += 1,
                Err(CommandError::Rejected(Rejection::InvalidState { .. })) => {}
                Err(CommandError::Contention { .. }) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }

        assert_eq!(cancelled, 1);
        for d in 10..13 {
            assert_eq!(taken(&db.pool, day(d)).await, 2);
        }
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn change_dates_moves_the_stay_in_one_step() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 10, 1).await;
        let view = svc
            .hold(
                "web",
                "web",
                key("h"),
                hold_request(stay(day(10), day(13)), 1, 1),
            )
            .await
            .expect("hold");
        let id = ReservationId::from_uuid(view.reservation_id);

        let moved = svc
            .change_dates(
                &web(),
                web().name(),
                Some(key("m")),
                id,
                stay(day(11), day(15)),
                None,
                None,
            )
            .await
            .expect("change dates");

        assert_eq!((moved.start_date, moved.end_date), (day(11), day(15)));
        assert_eq!(moved.total_cents, aggregates::Cents::new(4 * 18_000));
        assert_eq!(taken(&db.pool, day(10)).await, 0, "left night released");
        for d in 11..15 {
            assert_eq!(taken(&db.pool, day(d)).await, 1, "night {d} taken");
        }
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn change_dates_onto_a_sold_out_night_changes_nothing() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 10, 1).await;
        let view = svc
            .hold(
                "web",
                "web",
                key("h"),
                hold_request(stay(day(10), day(13)), 1, 1),
            )
            .await
            .expect("hold");
        svc.hold(
            "web",
            "web",
            key("blocker"),
            hold_request(stay(day(14), day(15)), 1, 2),
        )
        .await
        .expect("blocker");
        let id = ReservationId::from_uuid(view.reservation_id);
        let before = night_rows(&db.pool).await;

        let result = svc
            .change_dates(
                &web(),
                web().name(),
                Some(key("m")),
                id,
                stay(day(12), day(16)),
                None,
                None,
            )
            .await;

        match result {
            Err(CommandError::Rejected(Rejection::SoldOut { night })) => {
                assert_eq!(night, day(14))
            }
            other => panic!("expected sold_out, got {other:?}"),
        }
        assert_eq!(night_rows(&db.pool).await, before, "nothing changed");
        let still = svc.reservation(id).await.expect("read").expect("exists");
        assert_eq!((still.start_date, still.end_date), (day(10), day(13)));
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_lapsed_hold_does_not_count_and_is_dropped_when_the_room_is_needed() {
    let db = TestDb::new().await;
    let clock = ManualClock::new(Utc::now());
    let svc = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock.clone()));
    hotel_with_rooms(&svc, day(10), 3, 1).await;
    let lapsing = svc
        .hold(
            "web",
            "web",
            key("slow"),
            hold_request(stay(day(10), day(12)), 1, 1),
        )
        .await
        .expect("hold");

    clock.advance(Duration::seconds(901));
    let as_read = svc
        .reservation(ReservationId::from_uuid(lapsing.reservation_id))
        .await
        .expect("read")
        .expect("exists");
    let taker = svc
        .hold(
            "web",
            "web",
            key("fast"),
            hold_request(stay(day(10), day(11)), 1, 2),
        )
        .await;

    assert_eq!(
        as_read.status,
        ReservationStatus::Expired,
        "read as expired at once"
    );
    assert!(
        taker.is_ok(),
        "the lapsed hold did not block the sale: {taker:?}"
    );
    let lapsed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE event_type = 'HoldLapsed'")
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(
        lapsed, 1,
        "dropped with its own event, on the night that needed it"
    );
    assert_eq!(taken(&db.pool, day(10)).await, 1);
    assert_eq!(
        taken(&db.pool, day(11)).await,
        1,
        "still carried until expired"
    );
    assert_invariants_at(&db.pool, clock.now()).await;

    let expired = svc
        .expire_hold(ReservationId::from_uuid(lapsing.reservation_id))
        .await
        .expect("expire");
    assert_eq!(expired.status, ReservationStatus::Expired);
    assert_eq!(
        taken(&db.pool, day(11)).await,
        0,
        "expiry released the other night"
    );
    assert_invariants_at(&db.pool, clock.now()).await;
    db.drop_database().await;
}

#[tokio::test]
async fn expiring_a_live_hold_is_refused() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Optimistic);
    hotel_with_rooms(&svc, day(10), 3, 1).await;
    let view = svc
        .hold(
            "web",
            "web",
            key("h"),
            hold_request(stay(day(10), day(12)), 1, 1),
        )
        .await
        .expect("hold");

    let result = svc
        .expire_hold(ReservationId::from_uuid(view.reservation_id))
        .await;

    assert!(matches!(
        result,
        Err(CommandError::Rejected(Rejection::HoldStillLive))
    ));
    assert_eq!(taken(&db.pool, day(10)).await, 1);
    db.drop_database().await;
}

#[tokio::test]
async fn confirming_a_hold_moves_its_rooms_to_confirmed() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 3, 2).await;
    let view = svc
        .hold(
            "web",
            "web",
            key("h"),
            hold_request(stay(day(10), day(12)), 2, 1),
        )
        .await
        .expect("hold");
    let id = ReservationId::from_uuid(view.reservation_id);

    let confirmed = svc
        .confirm(&web(), Some(key("c")), id)
        .await
        .expect("confirm");
    let again = svc
        .confirm(&web(), Some(key("c2")), id)
        .await
        .expect("again");

    assert_eq!(confirmed.status, ReservationStatus::Confirmed);
    assert_eq!(again.status, ReservationStatus::Confirmed);
    let rows = night_rows(&db.pool).await;
    let night = &rows[&(HOTEL, KING, day(10))];
    assert_eq!((night.confirmed, night.held), (2, 0));
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test]
async fn holding_an_unknown_hotel_or_room_type_or_past_dates_is_rejected() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 2, 1).await;

    let mut unknown_hotel = hold_request(stay(day(10), day(11)), 1, 1);
    unknown_hotel.hotel_id = HotelId::parse(999).expect("id");
    let mut unknown_type = hold_request(stay(day(10), day(11)), 1, 1);
    unknown_type.room_type_id = RoomTypeId::parse(77).expect("id");
    let yesterday = Utc::now()
        .date_naive()
        .checked_sub_days(Days::new(2))
        .expect("date");
    let past = hold_request(stay(yesterday, day(11)), 1, 1);

    assert!(matches!(
        svc.hold("web", "web", key("a"), unknown_hotel).await,
        Err(CommandError::Rejected(Rejection::UnknownHotel))
    ));
    assert!(matches!(
        svc.hold("web", "web", key("b"), unknown_type).await,
        Err(CommandError::Rejected(Rejection::UnknownRoomType))
    ));
    assert!(matches!(
        svc.hold("web", "web", key("c"), past).await,
        Err(CommandError::Rejected(Rejection::Invalid(_)))
    ));
    assert_eq!(taken(&db.pool, day(10)).await, 0);
    db.drop_database().await;
}

#[tokio::test]
async fn an_absurdly_long_stay_is_refused_before_the_database_is_touched() {
    // A pool that cannot reach any database: only a refusal that happens before loading
    // anything can come back as a rejection rather than a database error.
    let unreachable = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(200))
        .connect_lazy("postgres://nobody@127.0.0.1:1/none")
        .expect("lazy pool");
    let svc = app::commands::CommandService::new(unreachable, config(Strategy::Optimistic));
    let millennia = stay(
        chrono::NaiveDate::from_ymd_opt(1900, 1, 1).expect("date"),
        chrono::NaiveDate::from_ymd_opt(9999, 12, 31).expect("date"),
    );

    let held = svc
        .hold("web", "web", key("k"), hold_request(millennia, 1, 1))
        .await;
    let moved = svc
        .change_dates(
            &web(),
            web().name(),
            Some(key("m")),
            ReservationId::from_uuid(uuid::Uuid::nil()),
            millennia,
            None,
            None,
        )
        .await;

    for result in [held.map(|_| ()), moved.map(|_| ())] {
        match result {
            Err(CommandError::Rejected(Rejection::Invalid(invalid))) => {
                assert_eq!(invalid.field, "end_date")
            }
            other => panic!("expected a refusal before any IO, got {other:?}"),
        }
    }
}

/// A batch of holds is one transaction; when one of them cannot be written, the batch
/// is run again one hold at a time, so only that hold fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_that_cannot_be_written_fails_alone_not_its_batch() {
    // Arrange: one lane, so every hold goes through the same queue; a trigger that
    // refuses one guest's reservation, as a database failure the domain cannot foresee.
    let db = TestDb::new().await;
    let svc = app::commands::CommandService::new(
        db.pool.clone(),
        app::commands::WriteConfig {
            group_lanes: 1,
            ..config(Strategy::Group)
        },
    );
    hotel_with_rooms(&svc, day(30), 3, 50).await;
    // The row holds the guest sealed: the trigger knows them by their id.
    let poisoned = svc
        .privacy()
        .guest_id_in(&db.pool, "guest7@example.com")
        .await
        .expect("guest id");
    sqlx::raw_sql(&format!(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
         CREATE TRIGGER refuse_poison BEFORE INSERT ON reservations FOR EACH ROW
           WHEN (NEW.guest -> 'sealed' ->> 'guest' = '{poisoned}')
           EXECUTE FUNCTION refuse_poison();"
    ))
    .execute(&db.pool)
    .await
    .expect("trigger");
    assert_eq!(guest(7).email(), "guest7@example.com", "the poisoned guest");
    // Hold the room's lock elsewhere, so the first hold's batch waits on it while the
    // others queue behind it, and are then decided together in the next batch.
    let mut blocker = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
        .bind(HOTEL as i32)
        .bind(KING as i32)
        .execute(&mut *blocker)
        .await
        .expect("lock the room");

    // Act
    let mut calls = Vec::new();
    for n in 0..12 {
        let svc = svc.clone();
        calls.push(tokio::spawn(async move {
            svc.hold(
                "web",
                "web",
                key(&format!("batch-{n}")),
                hold_request(stay(day(30), day(32)), 1, n),
            )
            .await
        }));
        if n == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    blocker.rollback().await.expect("release the room");
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.expect("task"));
    }

    // Assert: the poisoned hold failed, every other one was placed.
    for (n, outcome) in outcomes.iter().enumerate() {
        if n == 7 {
            assert!(
                matches!(outcome, Err(CommandError::Database(_))),
                "the poisoned hold: {outcome:?}"
            );
        } else {
            assert!(outcome.is_ok(), "hold {n}: {outcome:?}");
        }
    }
    let (reservations,): (i64,) = sqlx::query_as("SELECT count(*) FROM reservations")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(reservations, 11);
    assert_eq!(taken(&db.pool, day(30)).await, 11);
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test]
async fn a_hold_the_database_refuses_is_409_oversold_refused_and_changes_nothing() {
    // Arrange: a rule the database states and the domain does not know (at most one
    // room held a night), so the domain accepts a hold of two that the commit refuses:
    // as if a decision were wrong.
    let app = spawn_app().await;
    let first = plus_days(app.now().date_naive(), 10);
    app.seed_hotel(first, 5, 10).await;
    sqlx::query(
        "ALTER TABLE room_nights ADD CONSTRAINT at_most_one_held_in_this_test CHECK (held <= 1)",
    )
    .execute(&app.db.pool)
    .await
    .expect("add the constraint");
    let before = app.snapshot().await;

    // Act
    let reply = app
        .hold(WEB, "refused-1", &hold_body(first, plus_days(first, 2), 2))
        .await;

    // Assert: a conflict naming the rule, nothing written, and an operator told.
    let body = reply.assert_error(409, "oversold_refused");
    assert_eq!(body["constraint"], "at_most_one_held_in_this_test");
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused write leaves no trace"
    );
    let metrics = app.get("/metrics", None).await;
    assert!(
        metrics
            .text
            .lines()
            .any(|l| l.starts_with("oversold_refused_total")
                && l.contains("at_most_one_held_in_this_test")),
        "the refusal is counted by constraint"
    );
    // A hold the rule allows still goes through.
    app.hold(WEB, "allowed-1", &hold_body(first, plus_days(first, 2), 1))
        .await
        .assert_status(201);
    app.finish().await;
}

/// What each of the racing staff and guest calls on one stay can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum StayCall {
    CheckIn,
    Cancel,
    NoShow,
    ChangeDates,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_check_ins_cancels_no_shows_and_date_changes_leave_one_legal_history() {
    for strategy in STRATEGIES {
        // Arrange: a confirmed stay of nights 10..13 (Lisbon), the clock at 16:00 on its
        // arrival date, and 48 calls at once: 12 each of check-in and no-show (staff),
        // cancel and a move to 11..14 (the guest's channel)
        let db = TestDb::new().await;
        let clock = ManualClock::new(Utc::now());
        let svc = db.service_with_clock(strategy, Arc::new(clock.clone()));
        hotel_with_rooms(&svc, day(10), 5, 3).await;
        let view = svc
            .hold(
                "web",
                "web",
                key("stay"),
                hold_request(stay(day(10), day(13)), 1, 1),
            )
            .await
            .expect("hold");
        let id = ReservationId::from_uuid(view.reservation_id);
        svc.confirm(&web(), None, id).await.expect("confirm");
        clock.set(day(10).and_hms_opt(16, 0, 0).expect("time").and_utc());
        let staff = app::commands::Caller::Staff("front-desk".into());

        // Act
        let mut calls = Vec::new();
        for n in 0..48 {
            let (svc, staff) = (svc.clone(), staff.clone());
            let call = [
                StayCall::CheckIn,
                StayCall::Cancel,
                StayCall::NoShow,
                StayCall::ChangeDates,
            ][n % 4];
            calls.push(tokio::spawn(async move {
                let k = Some(key(&format!("{call:?}-{n}")));
                let outcome = match call {
                    StayCall::CheckIn => {
                        svc.stay_action(&staff, "staff", k, id, StayAction::CheckIn)
                            .await
                    }
                    StayCall::NoShow => {
                        svc.stay_action(&staff, "staff", k, id, StayAction::NoShow)
                            .await
                    }
                    StayCall::Cancel => {
                        svc.cancel(&web(), web().name(), k, id, "plans".into())
                            .await
                    }
                    StayCall::ChangeDates => {
                        svc.change_dates(
                            &web(),
                            web().name(),
                            k,
                            id,
                            stay(day(11), day(14)),
                            None,
                            None,
                        )
                        .await
                    }
                };
                (call, outcome)
            }));
        }
        let mut won: BTreeMap<StayCall, usize> = BTreeMap::new();
        for call in calls {
            let (call, outcome) = call.await.expect("task");
            match outcome {
                Ok(_) => *won.entry(call).or_default() += 1,
                Err(CommandError::Rejected(
                    Rejection::InvalidState { .. }
                    | Rejection::TooEarly { .. }
                    | Rejection::Invalid(_),
                ))
                | Err(CommandError::Contention { .. }) => {}
                Err(e) => panic!("{call:?}: unexpected {e:?}"),
            }
        }

        // Assert: one history a single clerk could have made. At most one call ended
        // the stay's sale (checked in, cancelled or no-show), at most one moved it, and
        // a move leaves check-in and no-show too early (the stay now starts on the 11th)
        let count = |call| won.get(&call).copied().unwrap_or(0);
        let ended = count(StayCall::CheckIn) + count(StayCall::Cancel) + count(StayCall::NoShow);
        assert!(ended <= 1, "{strategy:?}: {won:?}");
        assert!(count(StayCall::ChangeDates) <= 1, "{strategy:?}: {won:?}");
        if count(StayCall::ChangeDates) == 1 {
            assert_eq!(
                count(StayCall::CheckIn) + count(StayCall::NoShow),
                0,
                "{strategy:?}: {won:?}"
            );
        }
        let status = svc
            .reservation(id)
            .await
            .expect("read")
            .expect("exists")
            .status;
        let expected = if count(StayCall::CheckIn) == 1 {
            ReservationStatus::CheckedIn
        } else if count(StayCall::NoShow) == 1 {
            ReservationStatus::NoShow
        } else if count(StayCall::Cancel) == 1 {
            ReservationStatus::Cancelled
        } else {
            ReservationStatus::Confirmed
        };
        assert_eq!(status, expected, "{strategy:?}: {won:?}");
        // The event log says the same, one event per successful call
        let types: Vec<String> = sqlx::query_scalar(
            "SELECT event_type FROM events WHERE aggregate_type = 'reservation' \
             AND aggregate_id LIKE '%' || $1 ORDER BY sequence",
        )
        .bind(id.to_string())
        .fetch_all(&db.pool)
        .await
        .expect("events");
        let logged = |name: &str| types.iter().filter(|t| *t == name).count();
        assert_eq!(
            logged("GuestCheckedIn"),
            count(StayCall::CheckIn),
            "{types:?}"
        );
        assert_eq!(
            logged("NoShowRecorded"),
            count(StayCall::NoShow),
            "{types:?}"
        );
        assert_eq!(
            logged("ReservationCancelled"),
            count(StayCall::Cancel),
            "{types:?}"
        );
        assert_eq!(
            logged("DatesChanged"),
            count(StayCall::ChangeDates),
            "{types:?}"
        );
        // And the nights hold exactly what the history leaves
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_reservation_row_keeps_only_what_its_columns_do_not_and_old_rows_still_load() {
    use store::write::Loader;
    // Arrange: a hold, then a cancellation (two writes of the row)
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app.hold_ok(WEB, "k", &hold_body(day(10), day(12), 1)).await;
    let before = app.get_reservation(WEB, &id).await.json;
    let uuid: uuid::Uuid = id.parse().expect("uuid");

    // The row's state leaves out what its columns say
    let state: Value =
        sqlx::query_scalar("SELECT state FROM reservations WHERE reservation_id = $1")
            .bind(uuid)
            .fetch_one(&app.db.pool)
            .await
            .expect("state");
    assert!(state.get("status").is_none(), "{state}");
    for key in [
        "reservation_id",
        "hotel_id",
        "stay",
        "guest",
        "channel",
        "total_cents",
    ] {
        assert!(state["details"].get(key).is_none(), "{key} in {state}");
    }
    // and what reads back as its default, and the times its columns keep exactly
    for key in ["payment", "refund_cents", "refunded_payments", "updated_at"] {
        assert!(state.get(key).is_none(), "{key} in {state}");
    }
    for key in ["created_at", "hold_expires_at"] {
        assert!(state["details"].get(key).is_none(), "{key} in {state}");
    }

    // Act: the row as a build before this one wrote it (the whole aggregate)
    let mut conn = app.db.pool.acquire().await.expect("conn");
    let loaded = Loader { conn: &mut conn }
        .reservation(aggregates::ReservationId::from_uuid(uuid), false)
        .await
        .expect("load")
        .expect("exists");
    let whole = serde_json::to_value(&loaded.reservation).expect("json");
    sqlx::query("UPDATE reservations SET state = $2 WHERE reservation_id = $1")
        .bind(uuid)
        .bind(&whole)
        .execute(&app.db.pool)
        .await
        .expect("old state");

    // Assert: it reads and moves on as before
    assert_eq!(app.get_reservation(WEB, &id).await.json, before);
    let cancelled = app.cancel(WEB, "cancel", &id, &json!({})).await;
    assert_eq!(cancelled.assert_status(200)["status"], "cancelled");
    let reloaded = Loader { conn: &mut conn }
        .reservation(aggregates::ReservationId::from_uuid(uuid), false)
        .await
        .expect("load")
        .expect("exists");
    assert_eq!(
        reloaded.reservation.details(),
        loaded.reservation.details(),
        "the same stay, read back from its columns"
    );
    drop(conn);
    app.finish().await;
}

/// Hotels `ids` in Lisbon, each with a king room type of `rooms` rooms on days 10 to 12.
async fn hotels_with_kings(app: &TestApp, ids: &[i64], rooms: i64) {
    for &id in ids {
        app.put_hotel(
            id,
            &json!({"name": format!("Hotel {id}"), "city": "Lisbon", "timezone": "Europe/Lisbon"}),
        )
        .await
        .assert_status(200);
        app.put_room_type(id, KING, &json!({"name": "king", "max_occupancy": 2}))
            .await
            .assert_status(200);
        app.put_inventory(
            id,
            KING,
            &json!({"start_date": day(10), "end_date": day(13), "total_rooms": rooms,
                    "overbooking_allowance": 0, "rate_cents": RATE}),
        )
        .await
        .assert_status(200);
    }
}

/// The hotels of the reservations each transaction wrote, by transaction.
async fn hotels_by_transaction(pool: &sqlx::PgPool) -> Vec<(String, Vec<i64>)> {
    sqlx::query_as(
        "SELECT xmin::text, array_agg(DISTINCT hotel_id ORDER BY hotel_id)
           FROM reservations GROUP BY xmin::text",
    )
    .fetch_all(pool)
    .await
    .expect("reservations by transaction")
}

#[tokio::test]
async fn no_transaction_spans_two_shards_and_one_shard_batches_many_hotels() {
    // Arrange: hotels 1 and 2 in shard "a", hotel 3 in "b"; one lane, so holds that
    // arrive together queue for the same transactions.
    let app = Arc::new(
        spawn_app_with(|s| {
            s.hotel_shards = "1-2:a,3:b".into();
            s.group_commit_lanes = 1;
        })
        .await,
    );
    hotels_with_kings(&app, &[1, 2, 3], 1_000).await;

    // Act: bursts of 60 holds at once over the three hotels, until some transaction has
    // taken two hotels (batches form while the one before commits).
    let mut rounds = 0;
    loop {
        let mut tasks = Vec::new();
        for n in 0..60 {
            let app = app.clone();
            tasks.push(tokio::spawn(async move {
                let hotel = [1, 2, 3][n % 3];
                let body = json!({"hotel_id": hotel, "room_type_id": KING,
                                  "start_date": day(10), "end_date": day(12), "rooms": 1,
                                  "guest": {"name": "Ana Lima", "email": "ana@example.com"}});
                app.hold(WEB, &format!("shard-{rounds}-{n}"), &body).await
            }));
        }
        for task in tasks {
            task.await.expect("task").assert_status(201);
        }
        rounds += 1;
        let shared = hotels_by_transaction(&app.db.pool)
            .await
            .iter()
            .any(|(_, hotels)| hotels.len() > 1);
        if shared || rounds == 5 {
            break;
        }
    }

    // Assert: every transaction's hotels are of one shard, and one shard's hotels did
    // share transactions.
    let written = hotels_by_transaction(&app.db.pool).await;
    let shard = |hotel: i64| if hotel == 3 { "b" } else { "a" };
    for (transaction, hotels) in &written {
        let shards: std::collections::BTreeSet<&str> = hotels.iter().map(|h| shard(*h)).collect();
        assert_eq!(
            shards.len(),
            1,
            "transaction {transaction} wrote hotels {hotels:?}"
        );
    }
    assert!(
        written.iter().any(|(_, hotels)| hotels == &vec![1, 2]),
        "no transaction held hotels 1 and 2 together in {rounds} rounds: {written:?}"
    );
    assert_invariants(&app.db.pool).await;
    if let Ok(app) = Arc::try_unwrap(app) {
        app.finish().await;
    }
}

#[tokio::test]
async fn servers_with_different_shard_maps_refuse_to_share_a_database() {
    // Arrange: a server mapping hotels 1 to 99 to shard "eu" has started on the database.
    let app = spawn_app_with(|s| s.hotel_shards = "1-99:eu".into()).await;
    let another = |map: &str| {
        let mut settings = reservations::startup::Settings::for_database(&app.db.url);
        settings.listen_addr = "127.0.0.1:0".into();
        settings.api_tokens = Some(TOKENS.into());
        settings.run_projections = false;
        settings.run_workers = false;
        settings.hotel_shards = map.into();
        reservations::startup::Application::build_with_clock(
            settings,
            Arc::new(ManualClock::new(Utc::now())),
        )
    };

    // Act
    let other_map = another("1-99:us").await;
    let one_shard = another("").await;
    let same_map = another(" 1-99:eu ").await;

    // Assert: only a server with the same map (however written) starts.
    let refused = other_map.err().expect("another map is refused");
    assert!(
        refused.to_string().contains("HOTEL_SHARDS=1-99:us")
            && refused.to_string().contains("HOTEL_SHARDS=1-99:eu"),
        "{refused:#}"
    );
    assert!(one_shard.is_err(), "one shard is another map too");
    assert!(same_map.is_ok(), "{:?}", same_map.err());
    drop(same_map);
    app.finish().await;
}

#[tokio::test]
async fn a_reservation_reads_back_its_times_exactly_whether_its_row_keeps_them_or_its_state_does() {
    // The row's columns keep microseconds, so the state leaves out a time they keep
    // exactly and keeps one with finer digits itself: either way a later answer, made
    // from the row, shows the times the hold was answered with.
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    for (key, nanos) in [("micros", 0), ("nanos", 123)] {
        app.clock.advance(Duration::nanoseconds(nanos));
        let held = app.hold(WEB, key, &hold_body(day(10), day(12), 1)).await;
        let held = held.assert_status(201).clone();
        let id = held["reservation_id"].as_str().expect("id").to_owned();

        let cancelled = app
            .cancel(WEB, &format!("{key}-cancel"), &id, &json!({}))
            .await;

        let cancelled = cancelled.assert_status(200);
        for time in ["created_at", "hold_expires_at"] {
            assert_eq!(cancelled[time], held[time], "{key}: {time}");
        }
        let state: Value = sqlx::query_scalar(
            "SELECT state FROM reservations WHERE reservation_id = $1::text::uuid",
        )
        .bind(&id)
        .fetch_one(&app.db.pool)
        .await
        .expect("the row");
        assert_eq!(
            state.pointer("/details/created_at").is_some(),
            nanos > 0,
            "{key}: the state keeps the time only when the column cannot: {state}"
        );
    }
    app.finish().await;
}
