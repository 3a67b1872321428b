//! Who may do what: 401 without a known bearer token, 403 for the wrong role or another
//! channel's reservation (over HTTP and in the command API); the error shape every time,
//! and nothing written.

use aggregates::{ReservationId, ReservationStatus};
use app::commands::Caller;
use reqwest::Method;
use serde_json::{json, Value};
use store::error::CommandError;
use store::write::Strategy;

use crate::support::*;

/// Every endpoint that needs a token, with a body it would accept.
fn protected(id: &str) -> Vec<(Method, String, Option<Value>)> {
    let hold = hold_body(day(10), day(12), 1);
    vec![
        (Method::GET, format!("/v1/hotels/{HOTEL}"), None),
        (Method::GET, "/v1/hotels?city=Lisbon".into(), None),
        (
            Method::GET,
            format!(
                "/v1/hotels/{HOTEL}/availability?start_date={}&end_date={}",
                day(10),
                day(12)
            ),
            None,
        ),
        (
            Method::PUT,
            format!("/v1/hotels/{HOTEL}"),
            Some(json!({"name": "X", "city": "Y", "timezone": "UTC"})),
        ),
        (
            Method::PUT,
            format!("/v1/hotels/{HOTEL}/room-types/{KING}"),
            Some(json!({"name": "king", "max_occupancy": 2})),
        ),
        (
            Method::PUT,
            format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory"),
            Some(json!({"start_date": day(10), "end_date": day(12), "total_rooms": 9})),
        ),
        (Method::POST, "/v1/reservations".into(), Some(hold)),
        (Method::GET, format!("/v1/reservations/{id}"), None),
        (
            Method::POST,
            format!("/v1/reservations/{id}/cancel"),
            Some(json!({})),
        ),
        (
            Method::POST,
            format!("/v1/reservations/{id}/change-dates"),
            Some(json!({"start_date": day(11), "end_date": day(13)})),
        ),
        (Method::GET, format!("/v1/reservations/{id}/events"), None),
        (Method::GET, "/v1/events".into(), None),
    ]
}

async fn call(
    app: &TestApp,
    method: &Method,
    path: &str,
    body: &Option<Value>,
    authorization: Option<&str>,
    key: &str,
) -> Reply {
    let mut request = app
        .client
        .request(method.clone(), app.url(path))
        .header("Idempotency-Key", key);
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    app.send(request).await
}

#[tokio::test]
async fn every_protected_endpoint_answers_401_without_a_known_bearer_token() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;
    let credentials = [
        None,
        Some("Bearer unknown-token-123"),
        Some("Bearer "),
        Some("Basic d2ViLXRva2VuLTE6"),
        Some("web-token-1"),
        Some("Bearer web-token-1x"),
    ];

    for (method, path, body) in protected(&id) {
        for (n, authorization) in credentials.iter().enumerate() {
            let reply = call(
                &app,
                &method,
                &path,
                &body,
                *authorization,
                &format!("k{n}"),
            )
            .await;

            assert_eq!(
                reply.status.as_u16(),
                401,
                "{method} {path} with {authorization:?}: {}",
                reply.text
            );
            assert_error_shape(&reply);
            assert_eq!(reply.json["error"], "unauthorized");
        }
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_token_without_the_right_role_is_403_and_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;
    let endpoints = protected(&id);
    let forbidden: Vec<(&str, Method, String)> = vec![
        (WEB, Method::PUT, format!("/v1/hotels/{HOTEL}")),
        (
            WEB,
            Method::PUT,
            format!("/v1/hotels/{HOTEL}/room-types/{KING}"),
        ),
        (
            WEB,
            Method::PUT,
            format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory"),
        ),
        (
            AUDITOR,
            Method::PUT,
            format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory"),
        ),
        (AUDITOR, Method::PUT, format!("/v1/hotels/{HOTEL}")),
        (AUDITOR, Method::POST, "/v1/reservations".into()),
        (ADMIN, Method::POST, "/v1/reservations".into()),
        (WEB, Method::GET, "/v1/events".into()),
        (MOBILE, Method::GET, "/v1/events".into()),
        (
            AUDITOR,
            Method::POST,
            format!("/v1/reservations/{id}/cancel"),
        ),
        (
            AUDITOR,
            Method::POST,
            format!("/v1/reservations/{id}/change-dates"),
        ),
    ];

    for (n, (token, method, path)) in forbidden.into_iter().enumerate() {
        let (_, _, body) = endpoints
            .iter()
            .find(|(m, p, _)| *m == method && *p == path)
            .expect("a protected endpoint");
        let reply = call(
            &app,
            &method,
            &path,
            body,
            Some(&format!("Bearer {token}")),
            &format!("role-{n}"),
        )
        .await;

        assert_eq!(
            reply.status.as_u16(),
            403,
            "{method} {path} as {token}: {}",
            reply.text
        );
        assert_error_shape(&reply);
        assert_eq!(reply.json["error"], "forbidden");
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn browsing_is_open_to_every_role() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;

    for token in [ADMIN, WEB, MOBILE, AUDITOR] {
        let hotel = app.get_hotel(token, HOTEL).await;
        let search = app.search(token, "Lisbon").await;
        let availability = app.availability(token, HOTEL, day(10), day(12), None).await;

        hotel.assert_status(200);
        assert_eq!(search.assert_status(200)["hotels"][0]["hotel_id"], HOTEL);
        assert_eq!(
            availability.assert_status(200)["room_types"][0]["remaining"],
            5
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn another_channels_reservation_is_403_on_get_cancel_change_and_events() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;

    let get = app.get_reservation(MOBILE, &id).await;
    let cancel = app.cancel(MOBILE, "steal-1", &id, &json!({})).await;
    let change = app
        .change_dates(
            MOBILE,
            "steal-2",
            &id,
            &json!({"start_date": day(11), "end_date": day(13)}),
        )
        .await;
    let events = app.reservation_events(MOBILE, &id).await;

    for reply in [&get, &cancel, &change, &events] {
        reply.assert_error(403, "forbidden");
    }
    assert_eq!(app.snapshot().await, before);
    assert_eq!(app.get_reservation(WEB, &id).await.json["status"], "held");
    app.finish().await;
}

#[tokio::test]
async fn the_event_feed_is_for_auditors_and_admins() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 1, 1).await;

    let auditor = app.events_feed(AUDITOR, None, None).await;
    let admin = app.events_feed(ADMIN, None, None).await;
    let channel = app.events_feed(WEB, None, None).await;

    auditor.assert_status(200);
    admin.assert_status(200);
    channel.assert_error(403, "forbidden");
    app.finish().await;
}

#[tokio::test]
async fn a_channel_cannot_act_on_another_channels_reservation() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 2, 1).await;
    let view = svc
        .hold(
            "web",
            "web",
            key("k"),
            hold_request(stay(day(10), day(12)), 1, 1),
        )
        .await
        .expect("hold");
    let id = ReservationId::from_uuid(view.reservation_id);

    let result = svc
        .cancel(
            &Caller::Channel("mobile".into()),
            "mobile",
            Some(key("c")),
            id,
            "x".into(),
        )
        .await;

    assert!(matches!(result, Err(CommandError::Forbidden)));
    assert_eq!(taken(&db.pool, day(10)).await, 1);
    let by_staff = svc
        .cancel(
            &Caller::Staff("admin".into()),
            "admin",
            None,
            id,
            "overbooked".into(),
        )
        .await
        .expect("staff may cancel");
    assert_eq!(by_staff.status, ReservationStatus::Cancelled);
    db.drop_database().await;
}
