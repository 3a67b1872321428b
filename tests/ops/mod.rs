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
    assert_eq!(
        ready.assert_status(200),
        &json!({"status": "ready", "failing": []})
    );
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

/// The value of an unlabelled (or exactly labelled) series in a `/metrics` page.
fn metric(page: &str, series: &str) -> Option<f64> {
    page.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Scrapes until `series` reads `expected` (another test's scrape may set the shared
/// gauges to its own database's figures in between), at most ten times.
async fn scraped(app: &TestApp, series: &str, expected: f64) -> Option<f64> {
    let mut last = None;
    for _ in 0..10 {
        let page = app.get("/metrics", None).await;
        last = metric(&page.text, series);
        if last == Some(expected) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    last
}

#[tokio::test]
async fn the_stalled_work_gauges_move_when_the_workers_are_stopped() {
    // Arrange: workers stopped (the test harness runs none); a hold, and a confirmed
    // stay whose e-mail waits (no SMTP_URL).
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let lapsing = app
        .hold_ok(WEB, "lapse", &hold_body(day(10), day(12), 1))
        .await;
    let paid = app
        .hold_ok(WEB, "paid", &hold_body(day(10), day(12), 1))
        .await;
    app.confirm(WEB, "pay", &paid, "tok_ok")
        .await
        .assert_status(200);
    let before = app::signals::read(&app.db.pool, app.now())
        .await
        .expect("signals");

    // Act: the hold lapses, nobody sweeps it; twenty minutes pass for the e-mail.
    app.clock
        .advance(chrono::Duration::seconds(HOLD_TTL_SECONDS + 1200));
    let after = app::signals::read(&app.db.pool, app.now())
        .await
        .expect("signals");
    let overdue = scraped(&app, "holds_overdue", 1.0).await;
    let pending = scraped(&app, "outbox_pending{kind=\"email\"}", 1.0).await;

    // Assert
    assert_eq!(before.holds_overdue, 0);
    assert_eq!(after.holds_overdue, 1, "{lapsing} is past its expiry");
    let email = |w: &app::signals::StalledWork| {
        w.outboxes
            .iter()
            .find(|(k, _)| *k == app::signals::OutboxKind::Email)
            .map(|(_, s)| *s)
            .expect("the e-mail outbox")
    };
    assert_eq!(email(&before).pending, 1);
    assert!(email(&before).oldest_seconds < 60.0);
    assert!(email(&after).oldest_seconds >= 1200.0, "{after:?}");
    assert_eq!(after.payment_sagas_open, 0);
    assert_eq!(overdue, Some(1.0));
    assert_eq!(pending, Some(1.0));
    app.finish().await;
}

async fn retry(app: &TestApp, id: &str) -> Reply {
    let url = app.url(&format!("/v1/ops/outbox/{id}/retry"));
    Reply::of(
        app.client
            .post(url)
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("retry"),
    )
    .await
}

#[tokio::test]
async fn a_failed_outbox_row_is_listed_counted_and_retried_by_an_admin() {
    // Arrange: an e-mail the mail server refuses for good.
    let sink = SmtpSink::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let mut body = hold_body(day(10), day(12), 1);
    body["guest"] = json!({"name": "Rui Nogueira", "email": "rui@refused.test"});
    let id = app.hold_ok(WEB, "hold", &body).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    let mailer =
        app::mail::smtp::SmtpMailer::new(&sink.url(), "Hotel <h@tejo.example>").expect("mailer");
    let privacy = store::privacy::Privacy::postgres(app.db.pool.clone());
    let config = app::mail::MailConfig::default();
    app::mail::send_due(&app.db.pool, &privacy, &mailer, &config, app.now(), 10)
        .await
        .expect("mail pass");

    // Act
    let listed = app.get("/v1/ops/outbox?state=failed", Some(ADMIN)).await;
    let failed = scraped(&app, "outbox_failed{kind=\"email\"}", 1.0).await;
    let row_id = listed.json["rows"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let by_channel = app.get("/v1/ops/outbox?state=failed", Some(WEB)).await;
    let bad_state = app.get("/v1/ops/outbox?state=sent", Some(ADMIN)).await;
    let retried = retry(&app, &row_id).await;
    let again = retry(&app, &row_id).await;
    let unknown = retry(&app, "email-999999").await;
    let nonsense = retry(&app, "relay-1").await;
    let after = app.get("/v1/ops/outbox?state=failed", Some(ADMIN)).await;
    let state: String = sqlx::query_scalar("SELECT state FROM mail_outbox")
        .fetch_one(&app.db.pool)
        .await
        .expect("the row");

    // Assert
    let rows = listed.assert_status(200)["rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["kind"], "email");
    assert_eq!(rows[0]["what"], "confirmation");
    assert_eq!(rows[0]["reservation_id"], id.as_str());
    assert!(row_id.starts_with("email-"), "{row_id}");
    assert_eq!(failed, Some(1.0));
    by_channel.assert_error(403, "forbidden");
    bad_state.assert_error(422, "invalid_request");
    assert_eq!(retried.assert_status(202)["status"], "queued");
    again.assert_error(404, "not_found");
    unknown.assert_error(404, "not_found");
    nonsense.assert_error(404, "not_found");
    assert_eq!(after.assert_status(200)["rows"], json!([]));
    assert_eq!(state, "pending");
    app.finish().await;
}
