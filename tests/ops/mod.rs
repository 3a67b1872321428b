//! Operational endpoints, open without a token: liveness, readiness, metrics, OpenAPI.

use reqwest::header::CONTENT_TYPE;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn healthz_and_readyz_answer_200_without_a_token() {
    let app = spawn_app().await;

    let health = app.get("/healthz", None).await;
    let ready = app.get("/readyz", None).await;

    assert_eq!(health.assert_status(200), &json!({"status": "ok"}));
    assert_eq!(ready.assert_status(200), &json!({"status": "ready"}));
    app.finish().await;
}

#[tokio::test]
async fn metrics_count_http_requests_and_bookings_after_a_booking() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 1).await;
    app.hold_ok(WEB, "m1", &hold_body(day(10), day(11), 1))
        .await;
    app.hold(WEB, "m2", &hold_body(day(10), day(11), 1))
        .await
        .assert_error(409, "sold_out");

    let reply = app.get("/metrics", None).await;

    reply.assert_status(200);
    let content_type = reply.headers[CONTENT_TYPE].to_str().expect("text");
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let lines: Vec<&str> = reply.text.lines().collect();
    let has = |needle: &[&str]| lines.iter().any(|l| needle.iter().all(|n| l.contains(n)));
    assert!(
        has(&[
            "http_requests_total{",
            "route=\"/v1/reservations\"",
            "status=\"201\""
        ]),
        "{}",
        reply.text
    );
    assert!(
        has(&["bookings_total{", "outcome=\"held\""]),
        "{}",
        reply.text
    );
    assert!(
        has(&["bookings_total{", "outcome=\"sold_out\""]),
        "{}",
        reply.text
    );
    assert!(has(&["http_request_duration_seconds"]));
    // The holds went through group commit: its time in line and its transactions.
    assert!(has(&["group_commit_wait_seconds_count"]), "{}", reply.text);
    assert!(
        has(&["group_commit_batch_seconds_bucket{", "le=\"0.02\""]),
        "{}",
        reply.text
    );
    app.finish().await;
}

#[tokio::test]
async fn openapi_json_is_an_openapi_document_describing_every_route() {
    let app = spawn_app().await;

    let reply = app.get("/openapi.json", None).await;

    let doc = reply.assert_status(200);
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with('3')),
        "openapi version in {}",
        reply.text
    );
    let paths = doc["paths"].as_object().expect("paths");
    for (path, methods) in [
        ("/v1/hotels", &["get"][..]),
        ("/v1/hotels/{hotel_id}", &["get", "put"][..]),
        (
            "/v1/hotels/{hotel_id}/room-types/{room_type_id}",
            &["put"][..],
        ),
        (
            "/v1/hotels/{hotel_id}/room-types/{room_type_id}/inventory",
            &["put"][..],
        ),
        ("/v1/hotels/{hotel_id}/availability", &["get"][..]),
        ("/v1/reservations", &["post"][..]),
        ("/v1/reservations/{reservation_id}", &["get"][..]),
        ("/v1/reservations/{reservation_id}/cancel", &["post"][..]),
        (
            "/v1/reservations/{reservation_id}/change-dates",
            &["post"][..],
        ),
        ("/v1/reservations/{reservation_id}/events", &["get"][..]),
        ("/v1/events", &["get"][..]),
        ("/healthz", &["get"][..]),
        ("/readyz", &["get"][..]),
        ("/metrics", &["get"][..]),
        ("/openapi.json", &["get"][..]),
    ] {
        let item = paths
            .get(path)
            .unwrap_or_else(|| panic!("{path} missing from the document"));
        for method in methods {
            assert!(item.get(*method).is_some(), "{method} {path}");
        }
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    app.finish().await;
}

#[tokio::test]
async fn an_unknown_route_is_404_json_and_a_wrong_method_is_405_json() {
    let app = spawn_app().await;

    let unknown = app.get("/v1/nothing-here", Some(WEB)).await;
    let unknown_without_token = app.get("/v2/hotels", None).await;
    let wrong_method = app
        .send(app.request(reqwest::Method::DELETE, "/v1/hotels/812", Some(ADMIN)))
        .await;
    let post_healthz = app
        .send(app.request(reqwest::Method::POST, "/healthz", None))
        .await;

    unknown.assert_error(404, "not_found");
    unknown_without_token.assert_error(404, "not_found");
    wrong_method.assert_error(405, "method_not_allowed");
    post_healthz.assert_error(405, "method_not_allowed");
    app.finish().await;
}
