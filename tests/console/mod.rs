//! The staff console: the endpoints it reads (who a token is, every hotel, a hotel's
//! calendar, the reservation search by status, reservations made per minute), the page
//! as the server serves it, and the page itself in a real headless Chromium
//! (`browser.rs`, driving `e2e/console.test.mjs`).
//!
//! Every test runs `reservations serve` as a process of its own, with its projections
//! and workers running on the real clock, as staff would find it.

mod browser;
mod morning;

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

async fn get(server: &ServerProcess, path: &str, token: &str) -> Reply {
    server.call(Method::GET, path, token, None, None).await
}

/// A server with the test hotel: 5 king rooms on 40 nights from `first`.
async fn seeded() -> (TestDb, ServerProcess, chrono::NaiveDate) {
    let db = TestDb::new().await;
    let server = ServerProcess::start(&db, &[("PROJECTION_GATHER_MS", "0".to_owned())]).await;
    let first = day(10);
    server.seed_hotel(first, 40, 5).await;
    (db, server, first)
}

/// The night of `date` in the calendar's first room type.
fn night<'a>(calendar: &'a Value, date: &str) -> &'a Value {
    calendar["room_types"][0]["nights"]
        .as_array()
        .and_then(|nights| nights.iter().find(|n| n["date"] == date))
        .unwrap_or_else(|| panic!("no night {date} in {calendar}"))
}

/// Reads with `read` until `done` holds for what it read (the read models follow the
/// log a moment after a write), for at most 10 s; `what` names it if it never does.
async fn read_until<T: std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    mut read: impl FnMut() -> F,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let value = read().await;
        if done(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} never showed it: {value:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Reads the calendar at `path` until `done` holds for it.
async fn calendar_until(
    server: &ServerProcess,
    path: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let read = || async move { get(server, path, ADMIN).await.assert_status(200).clone() };
    read_until("the calendar", read, done).await
}

#[tokio::test]
async fn me_names_the_token_and_its_role() {
    let db = TestDb::new().await;
    let server = ServerProcess::start(&db, &[]).await;

    let admin = get(&server, "/v1/me", ADMIN).await;
    let channel = get(&server, "/v1/me", WEB).await;
    let auditor = get(&server, "/v1/me", AUDITOR).await;
    let unknown = get(&server, "/v1/me", "not-a-token").await;

    assert_eq!(
        admin.assert_status(200),
        &json!({"name": "staff", "role": "admin"})
    );
    assert_eq!(
        channel.assert_status(200),
        &json!({"name": "web", "role": "channel"})
    );
    assert_eq!(auditor.assert_status(200)["role"], "auditor");
    unknown.assert_error(401, "unauthorized");
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn hotels_without_a_city_lists_every_hotel_by_id() {
    let (db, server, _) = seeded().await;
    let porto = json!({"name": "Hotel Douro", "city": "Porto", "timezone": "Europe/Lisbon"});
    server
        .call(Method::PUT, "/v1/hotels/3", ADMIN, None, Some(&porto))
        .await
        .assert_status(200);

    let every = get(&server, "/v1/hotels", AUDITOR).await;
    let lisbon = get(&server, "/v1/hotels?city=lisbon", AUDITOR).await;

    let ids: Vec<i64> = every.assert_status(200)["hotels"]
        .as_array()
        .map(|hs| hs.iter().filter_map(|h| h["hotel_id"].as_i64()).collect())
        .unwrap_or_default();
    assert_eq!(ids, vec![3, HOTEL]);
    assert_eq!(
        lisbon.assert_status(200)["hotels"].as_array().map(Vec::len),
        Some(1)
    );
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn the_calendar_shows_each_nights_rooms_rates_and_restrictions_and_follows_a_hold() {
    // Arrange: a plan, a stop-sell on one night for every plan, a min stay for the plan
    // on another, and a confirmed stay of two rooms.
    let (db, server, first) = seeded().await;
    let hotel = format!("/v1/hotels/{HOTEL}");
    let plan = json!({"name": "Flexible", "room_type_ids": [KING]});
    server
        .call(
            Method::PUT,
            &format!("{hotel}/rate-plans/{FLEXIBLE}"),
            ADMIN,
            None,
            Some(&plan),
        )
        .await
        .assert_status(200);
    let (d2, d3) = (plus_days(first, 2), plus_days(first, 3));
    let ari = json!({"updates": [
        {"room_type_id": KING, "start_date": d2, "end_date": d3,
         "restrictions": {"stop_sell": true}},
        {"room_type_id": KING, "start_date": d3, "end_date": plus_days(first, 4),
         "restrictions": {"rate_plan_id": FLEXIBLE, "min_stay": 2},
         "rates": [{"rate_plan_id": FLEXIBLE, "rate_cents": 21_000}]}]});
    server
        .call(
            Method::PUT,
            &format!("{hotel}/ari"),
            ADMIN,
            None,
            Some(&ari),
        )
        .await
        .assert_status(200);
    server
        .hold_and_confirm(&hold_body(first, plus_days(first, 2), 2))
        .await;
    let path = format!(
        "{hotel}/calendar?start_date={first}&end_date={}",
        plus_days(first, 31)
    );

    // Act: read it once the read model has the confirmation.
    let calendar = calendar_until(&server, &path, |c| {
        night(c, &first.to_string())["confirmed"] == 2
    })
    .await;

    // Assert: 31 nights, each with its counters, prices and markers.
    let nights = calendar["room_types"][0]["nights"].as_array().map(Vec::len);
    assert_eq!(nights, Some(31));
    assert_eq!(calendar["room_types"][0]["room_type_id"], KING);
    assert_eq!(
        calendar["rate_plans"],
        json!([{"rate_plan_id": FLEXIBLE, "name": "Flexible"}])
    );
    assert_eq!(
        night(&calendar, &first.to_string()),
        &json!({"date": first, "has_inventory": true, "total_rooms": 5, "overbooking_allowance": 0, "held": 0,
                "confirmed": 2, "blocked": 0, "remaining": 3, "rate_cents": RATE, "restrictions": {},
                "prices": [{"rate_plan_id": FLEXIBLE, "rate_cents": RATE}]})
    );
    assert_eq!(
        night(&calendar, &d2.to_string())["restrictions"],
        json!({"stop_sell": true})
    );
    assert_eq!(
        night(&calendar, &d3.to_string())["prices"],
        json!([{"rate_plan_id": FLEXIBLE, "rate_cents": 21_000, "restrictions": {"min_stay": 2}}])
    );
    assert!(calendar["as_of"].is_string());

    // Act: a hold on the first night; the calendar follows it without being asked twice.
    let held = server
        .call(
            Method::POST,
            "/v1/reservations",
            WEB,
            Some("one-more"),
            Some(&hold_body(first, plus_days(first, 1), 1)),
        )
        .await;
    held.assert_status(201);
    // (From the Redis read model: the write side's rows would show it at once.)
    let calendar = calendar_until(&server, &path, |c| {
        c["source"] == "cache" && night(c, &first.to_string())["held"] == 1
    })
    .await;

    // Assert
    assert_eq!(night(&calendar, &first.to_string())["remaining"], 2);
    assert_eq!(
        night(&calendar, &plus_days(first, 1).to_string())["remaining"],
        3
    );
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn a_calendar_past_the_inventory_shows_nights_without_rooms() {
    let (db, server, first) = seeded().await;
    let start = plus_days(first, 38);
    let path = format!(
        "/v1/hotels/{HOTEL}/calendar?start_date={start}&end_date={}",
        plus_days(first, 42)
    );

    // (Once the read model has the inventory: a moment after it was set.)
    calendar_until(&server, &path, |c| {
        night(c, &plus_days(first, 39).to_string())["total_rooms"] == 5
    })
    .await;

    let calendar = get(&server, &path, AUDITOR).await;

    let calendar = calendar.assert_status(200);
    assert_eq!(
        night(calendar, &plus_days(first, 39).to_string())["total_rooms"],
        5
    );
    assert_eq!(
        night(calendar, &plus_days(first, 39).to_string())["has_inventory"],
        true
    );
    assert_eq!(
        night(calendar, &plus_days(first, 40).to_string()),
        &json!({"date": plus_days(first, 40), "has_inventory": false, "total_rooms": 0,
                "overbooking_allowance": 0,
                "held": 0, "confirmed": 0, "blocked": 0, "remaining": 0, "rate_cents": null,
                "restrictions": {}, "prices": []})
    );
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn the_calendar_is_for_staff_and_auditors_and_refuses_bad_ranges() {
    let (db, server, first) = seeded().await;
    let at = |hotel: &str, end: chrono::NaiveDate| {
        format!("/v1/hotels/{hotel}/calendar?start_date={first}&end_date={end}")
    };
    let month = plus_days(first, 30);

    get(&server, &at("812", month), WEB)
        .await
        .assert_error(403, "forbidden");
    get(&server, &at("812", plus_days(first, 93)), ADMIN)
        .await
        .assert_error(422, "invalid_request");
    get(&server, &at("812", first), ADMIN)
        .await
        .assert_error(422, "invalid_request");
    get(&server, &at("4242", month), ADMIN)
        .await
        .assert_error(404, "not_found");
    get(&server, &at("abc", month), ADMIN)
        .await
        .assert_error(400, "malformed_request");
    get(
        &server,
        &format!("/v1/hotels/812/calendar?start_date={first}"),
        ADMIN,
    )
    .await
    .assert_error(422, "invalid_request");
    get(&server, &at("812", plus_days(first, 92)), ADMIN)
        .await
        .assert_status(200);
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn the_reservation_search_filters_by_status() {
    // Arrange: one confirmed stay, one held, one cancelled.
    let (db, server, first) = seeded().await;
    let confirmed = server
        .hold_and_confirm(&hold_body(first, plus_days(first, 1), 1))
        .await;
    let hold = |key: &'static str, start: u64| {
        let body = hold_body(plus_days(first, start), plus_days(first, start + 1), 1);
        let server = &server;
        async move {
            let reply = server
                .call(
                    Method::POST,
                    "/v1/reservations",
                    WEB,
                    Some(key),
                    Some(&body),
                )
                .await;
            reply.assert_status(201)["reservation_id"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_default()
        }
    };
    let held = hold("held", 3).await;
    let cancelled = hold("to-cancel", 5).await;
    server
        .call(
            Method::POST,
            &format!("/v1/reservations/{cancelled}/cancel"),
            ADMIN,
            Some("c"),
            Some(&json!({})),
        )
        .await
        .assert_status(200);

    // Act: search each status once the view has the cancellation.
    let ids = |status: &'static str| {
        let server = &server;
        async move {
            let reply = get(
                server,
                &format!("/v1/reservations?status={status}"),
                AUDITOR,
            )
            .await;
            let ids: Vec<String> = reply.assert_status(200)["reservations"]
                .as_array()
                .map(|rs| {
                    rs.iter()
                        .filter_map(|r| r["reservation_id"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            ids
        }
    };
    read_until(
        "the reservations view",
        || ids("cancelled"),
        |ids| !ids.is_empty(),
    )
    .await;

    // Assert
    assert_eq!(ids("confirmed").await, vec![confirmed]);
    assert_eq!(ids("held").await, vec![held]);
    assert_eq!(ids("cancelled").await, vec![cancelled]);
    assert!(ids("expired").await.is_empty());
    get(&server, "/v1/reservations?status=lost", ADMIN)
        .await
        .assert_error(422, "invalid_request");
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn reservations_made_per_minute_count_what_became_of_them() {
    // Arrange: two reservations made now, one confirmed.
    let (db, server, first) = seeded().await;
    server
        .hold_and_confirm(&hold_body(first, plus_days(first, 1), 1))
        .await;
    let other = hold_body(plus_days(first, 2), plus_days(first, 3), 1);
    server
        .call(
            Method::POST,
            "/v1/reservations",
            WEB,
            Some("second"),
            Some(&other),
        )
        .await
        .assert_status(201);

    // Act: once the view has both (they may straddle a minute, so sum the span).
    let read = || async {
        let reply = get(&server, "/v1/ops/bookings?minutes=5", AUDITOR).await;
        let minutes = reply.assert_status(200)["minutes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let sum = |field: &str| {
            minutes
                .iter()
                .filter_map(|m| m[field].as_i64())
                .sum::<i64>()
        };
        (sum("held"), sum("confirmed"), minutes)
    };
    let (made, confirmed, minutes) =
        read_until("the booking rate", read, |(made, confirmed, _)| {
            (*made, *confirmed) == (2, 1)
        })
        .await;

    // Assert: five minutes, oldest first, the two reservations counted once.
    assert_eq!((made, confirmed), (2, 1));
    assert_eq!(minutes.len(), 5);
    let stamps: Vec<&str> = minutes
        .iter()
        .filter_map(|m| m["minute"].as_str())
        .collect();
    let mut sorted = stamps.clone();
    sorted.sort_unstable();
    assert_eq!(stamps, sorted);
    get(&server, "/v1/ops/bookings", WEB)
        .await
        .assert_error(403, "forbidden");
    get(&server, "/v1/ops/bookings?minutes=0", ADMIN)
        .await
        .assert_error(422, "invalid_request");
    get(&server, "/v1/ops/bookings?minutes=1441", ADMIN)
        .await
        .assert_error(422, "invalid_request");
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn the_console_is_served_with_its_files_and_a_strict_content_policy() {
    let db = TestDb::new().await;
    let server = ServerProcess::start(&db, &[]).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let fetch = |path: &str| client.get(server.url(path)).send();

    let bare = fetch("/console").await.expect("GET /console");
    let page = fetch("/console/").await.expect("GET /console/");
    let module = fetch("/console/app.js").await.expect("GET app.js");
    let missing = Reply::of(
        fetch("/console/nothing.js")
            .await
            .expect("GET a missing file"),
    )
    .await;

    assert_eq!(bare.status(), 308);
    assert_eq!(bare.headers()["location"], "/console/");
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    let html = page.text().await.unwrap_or_default();
    assert!(
        html.contains("name=\"token\"") || html.contains("app.js"),
        "{html}"
    );
    assert_eq!(module.status(), 200);
    assert_eq!(
        module.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    missing.assert_error(404, "not_found");
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn without_redis_the_calendar_reads_the_write_sides_rows() {
    // Arrange: a server whose Redis is a closed port, and a confirmed stay.
    let db = TestDb::new().await;
    let closed = free_port();
    let server =
        ServerProcess::start(&db, &[("REDIS_URL", format!("redis://127.0.0.1:{closed}"))]).await;
    let first = day(10);
    server.seed_hotel(first, 5, 5).await;
    server
        .hold_and_confirm(&hold_body(first, plus_days(first, 2), 3))
        .await;

    // Act
    let path = format!(
        "/v1/hotels/{HOTEL}/calendar?start_date={first}&end_date={}",
        plus_days(first, 3)
    );
    let reply = get(&server, &path, ADMIN).await;

    // Assert: exact at once, and said to be so.
    let calendar = reply.assert_status(200);
    assert_eq!(calendar["source"], "database");
    let first_night = night(calendar, &first.to_string());
    assert_eq!(
        (
            first_night["confirmed"].clone(),
            first_night["remaining"].clone()
        ),
        (json!(3), json!(2))
    );
    assert_eq!(
        night(calendar, &plus_days(first, 2).to_string())["remaining"],
        5
    );
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}
