//! What the console's morning pages read: the hotel's numbers per night (ADR, RevPAR,
//! nights sold beyond the physical rooms), pickup, the front desk's arrivals and
//! departures, and a night's history with who changed it.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

const TWIN: i64 = 4;

/// A hotel of 5 kings (18,000 a night) and 3 twins (10,000, one room of overbooking)
/// on the nights from the 10th.
async fn two_room_types(app: &TestApp) {
    app.seed_hotel(day(10), 5, 5).await;
    app.put_room_type(HOTEL, TWIN, &json!({"name": "twin", "max_occupancy": 2}))
        .await
        .assert_status(200);
    app.put_inventory(
        HOTEL,
        TWIN,
        &json!({"start_date": day(10), "end_date": day(15), "total_rooms": 3,
                "overbooking_allowance": 1, "rate_cents": 10_000}),
    )
    .await
    .assert_status(200);
}

async fn booked(
    app: &TestApp,
    key: &str,
    room_type: i64,
    nights: (u64, u64),
    rooms: i64,
) -> String {
    let mut body = hold_body(day(nights.0), day(nights.1), rooms);
    body["room_type_id"] = json!(room_type);
    let id = app.hold_ok(WEB, key, &body).await;
    app.confirm(WEB, &format!("{key}-pay"), &id, "tok_ok")
        .await
        .assert_status(200);
    id
}

fn int(v: &Value, field: &str) -> i64 {
    v[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

#[tokio::test]
async fn the_hotel_row_adds_up_its_room_types_with_adr_and_revpar_and_flags_an_oversold_night() {
    let app = spawn_app().await;
    two_room_types(&app).await;
    booked(&app, "kings", KING, (10, 12), 2).await;
    booked(&app, "twins", TWIN, (10, 11), 4).await;
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;

    let path = format!(
        "/v1/hotels/{HOTEL}/occupancy?start_date={}&end_date={}",
        day(10),
        day(13)
    );
    let reply = app.get(&path, Some(ADMIN)).await;

    let body = reply.assert_status(200);
    let nights = body["hotel"]["nights"]
        .as_array()
        .expect("the hotel's nights");
    assert_eq!(nights.len(), 3);
    // The 10th: 2 kings and 4 twins of 8 rooms (the twins one beyond their 3).
    let first = &nights[0];
    assert_eq!(
        (
            int(first, "total_rooms"),
            int(first, "confirmed"),
            int(first, "revenue_cents")
        ),
        (8, 6, 2 * 18_000 + 4 * 10_000)
    );
    assert_eq!(
        int(first, "adr_cents"),
        12_667,
        "76,000 / 6 to the nearest cent"
    );
    assert_eq!(int(first, "revpar_cents"), 9_500, "76,000 / 8");
    assert_eq!(first["oversold"], true);
    assert_eq!(
        body["room_types"][1]["nights"][0]["oversold"], true,
        "{body}"
    );
    assert_eq!(body["room_types"][0]["nights"][0]["oversold"], false);
    // The 11th: the kings alone; the 12th: nothing sold, no ADR (not zero).
    assert_eq!(nights[1]["oversold"], false);
    assert_eq!(int(&nights[1], "adr_cents"), 18_000);
    assert_eq!(int(&nights[1], "revpar_cents"), 4_500);
    assert_eq!(nights[2]["adr_cents"], Value::Null);
    assert_eq!(int(&nights[2], "revpar_cents"), 0);
    let totals = &body["hotel"]["totals"];
    assert_eq!(
        (
            int(totals, "total_rooms"),
            int(totals, "confirmed"),
            int(totals, "revenue_cents")
        ),
        (24, 8, 112_000)
    );
    assert_eq!(int(totals, "adr_cents"), 14_000);
    assert_eq!(int(totals, "oversold_nights"), 1);
    runners.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn pickup_counts_the_rooms_booked_and_cancelled_in_the_last_day_and_week() {
    let app = spawn_app().await;
    two_room_types(&app).await;
    booked(&app, "stays", KING, (10, 12), 2).await;
    let cancelled = booked(&app, "cancelled", TWIN, (11, 12), 1).await;
    app.cancel(WEB, "cancel", &cancelled, &json!({}))
        .await
        .assert_status(200);
    app.hold_ok(WEB, "hold", &hold_body(day(10), day(11), 1))
        .await;
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let path = format!(
        "/v1/hotels/{HOTEL}/pickup?start_date={}&end_date={}",
        day(10),
        day(13)
    );
    let counts = |night: &Value| {
        [
            "booked_last_day",
            "booked_last_week",
            "cancelled_last_day",
            "cancelled_last_week",
            "on_the_books",
            "on_the_books_week_ago",
        ]
        .map(|field| int(night, field))
    };

    let today = app.get(&path, Some(AUDITOR)).await;

    let today = today.assert_status(200).clone();
    let nights = today["nights"].as_array().expect("nights");
    assert_eq!(nights.len(), 3);
    assert_eq!(counts(&nights[0]), [3, 3, 0, 0, 3, 0], "the 10th: {today}");
    assert_eq!(counts(&nights[1]), [3, 3, 1, 1, 2, 0], "the 11th: {today}");
    assert_eq!(counts(&nights[2]), [0; 6], "the 12th: {today}");

    // Eight days on: the hold has lapsed, the confirmed stay was on the books a week ago.
    app.clock.advance(chrono::Duration::days(8));
    let later = app.get(&path, Some(ADMIN)).await;
    let later = later.assert_status(200).clone();
    assert_eq!(counts(&later["nights"][0]), [0, 0, 0, 0, 2, 2], "{later}");
    assert_eq!(counts(&later["nights"][1]), [0, 0, 0, 0, 2, 2], "{later}");
    app.get(&path, Some(WEB))
        .await
        .assert_error(403, "forbidden");
    runners.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn the_front_desk_lists_a_days_arrivals_and_departures() {
    let app = spawn_app().await;
    two_room_types(&app).await;
    let arriving = booked(&app, "arriving", KING, (10, 12), 1).await;
    let leaving = booked(&app, "leaving", TWIN, (10, 11), 1).await;
    let staying = booked(&app, "staying", KING, (11, 13), 1).await;
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let ids = |reply: &Reply| -> Vec<String> {
        let mut ids: Vec<String> = reply.json["reservations"]
            .as_array()
            .expect("reservations")
            .iter()
            .map(|r| r["reservation_id"].as_str().expect("id").to_owned())
            .collect();
        ids.sort();
        ids
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    let arrivals = app
        .get(
            &format!("/v1/reservations?hotel_id={HOTEL}&arrival_date={}", day(10)),
            Some(ADMIN),
        )
        .await;
    let departures = app
        .get(
            &format!(
                "/v1/reservations?hotel_id={HOTEL}&departure_date={}",
                day(11)
            ),
            Some(ADMIN),
        )
        .await;

    arrivals.assert_status(200);
    assert_eq!(
        ids(&arrivals),
        sorted(vec![arriving.clone(), leaving.clone()])
    );
    assert_eq!(ids(&departures), vec![leaving]);
    let in_house = app
        .get(
            &format!("/v1/reservations?hotel_id={HOTEL}&date={}", day(11)),
            Some(ADMIN),
        )
        .await;
    assert_eq!(ids(&in_house), sorted(vec![arriving, staying]));
    let refused = app
        .get("/v1/reservations?arrival_date=10000-01-01", Some(ADMIN))
        .await;
    assert_eq!(refused.status.as_u16() / 100, 4, "{}", refused.text);
    runners.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn a_nights_history_names_who_changed_it_and_when() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    app_staff(&app).await;
    let cookie = sign_in_cookie(&app).await;
    // The revenue manager sets the 11th's rate in the console.
    let change = app
        .send(
            app.request(
                Method::PUT,
                &format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory"),
                None,
            )
            .header("Cookie", &cookie.0)
            .header("X-CSRF-Token", &cookie.1)
            .json(
                &json!({"start_date": day(11), "end_date": day(12), "total_rooms": 5,
                          "rate_cents": 23_500}),
            ),
        )
        .await;
    change.assert_status(200);
    app.hold_ok(WEB, "hold", &hold_body(day(11), day(12), 1))
        .await;

    let path = format!(
        "/v1/hotels/{HOTEL}/room-types/{KING}/nights/{}/events",
        day(11)
    );
    let reply = app.get(&path, Some(AUDITOR)).await;

    let body = reply.assert_status(200);
    let events = body["events"].as_array().expect("events");
    let who: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default(),
                e["metadata"]["client"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(events.len(), 3, "{who:?}");
    assert_eq!(
        who[0],
        ("InventorySet", "staff"),
        "the seed's inventory (the admin token): {who:?}"
    );
    assert_eq!(who[1].1, "Mia Sousa", "the rate change: {who:?}");
    assert!(events[1]["metadata"]["staff_id"].is_string(), "{body}");
    assert!(events[1]["recorded_at"].is_string(), "{body}");
    assert_eq!(who[2].1, "web", "the hold: {who:?}");
    // Another night has its own history; a night never given rooms has none.
    let before = format!(
        "/v1/hotels/{HOTEL}/room-types/{KING}/nights/{}/events",
        day(9)
    );
    let empty = app.get(&before, Some(ADMIN)).await;
    assert_eq!(empty.assert_status(200)["events"], json!([]));
    for (bad, status) in [
        (
            format!("/v1/hotels/{HOTEL}/room-types/99/nights/{}/events", day(11)),
            404,
        ),
        (
            format!("/v1/hotels/{HOTEL}/room-types/{KING}/nights/tomorrow/events"),
            404,
        ),
        (
            format!(
                "/v1/hotels/4242/room-types/{KING}/nights/{}/events",
                day(11)
            ),
            404,
        ),
    ] {
        assert_eq!(
            app.get(&bad, Some(ADMIN)).await.status.as_u16(),
            status,
            "{bad}"
        );
    }
    app.get(&path, Some(WEB))
        .await
        .assert_error(403, "forbidden");
    app.finish().await;
}

async fn app_staff(app: &TestApp) {
    app::staff::create(
        &app.db.pool,
        "mia@hotel.example",
        "Mia Sousa",
        app::staff::StaffRole::Revenue,
        "a long enough secret",
    )
    .await
    .expect("staff");
}

/// Mia's session: the cookie pair and the CSRF token.
async fn sign_in_cookie(app: &TestApp) -> (String, String) {
    let reply = app
        .send(
            app.request(Method::POST, "/v1/sessions", None)
                .json(&json!({"email": "mia@hotel.example", "password": "a long enough secret"})),
        )
        .await;
    let csrf = reply.assert_status(201)["csrf_token"]
        .as_str()
        .expect("csrf")
        .to_owned();
    let cookie = reply.headers["set-cookie"]
        .to_str()
        .expect("ascii")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    (cookie, csrf)
}

#[tokio::test]
async fn refused_holds_are_recorded_as_turnaways_per_night_and_reason_without_the_guest() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 2).await; // 2 kings, at most 2 guests a room
    app.put_restrictions(
        HOTEL,
        KING,
        &json!({"start_date": day(13), "end_date": day(14), "stop_sell": true}),
    )
    .await
    .assert_status(200);
    app.hold_ok(WEB, "fills", &hold_body(day(10), day(12), 2))
        .await;
    let before = app.snapshot().await;

    // Sold out on the 10th-11th (twice), stopped on the 13th, three guests a room.
    let mut crowded = hold_body(day(12), day(13), 1);
    crowded["guests"] = json!(3);
    for (key, body, code) in [
        ("full-1", hold_body(day(10), day(12), 1), "sold_out"),
        ("full-2", hold_body(day(11), day(13), 2), "sold_out"),
        ("stopped", hold_body(day(13), day(14), 1), "restricted"),
        ("crowded", crowded, "occupancy_exceeded"),
    ] {
        let reply = app.hold(WEB, key, &body).await;
        assert_eq!(reply.status.as_u16() / 100, 4, "{key}: {}", reply.text);
        assert!(
            reply.text.contains(code) || code == "restricted",
            "{key}: {}",
            reply.text
        );
    }
    // A request the hotel could not take for another reason is not a turnaway.
    let mut unknown = hold_body(day(10), day(11), 1);
    unknown["room_type_id"] = json!(99);
    assert_eq!(
        app.hold(WEB, "unknown", &unknown).await.status.as_u16() / 100,
        4
    );

    // Written moments later, off the request path.
    let path = format!(
        "/v1/hotels/{HOTEL}/turnaways?from={}&to={}",
        day(9),
        day(15)
    );
    let body = {
        let mut waited = 0;
        loop {
            let reply = app.get(&path, Some(ADMIN)).await;
            let body = reply.assert_status(200).clone();
            let requests: i64 = body["nights"]
                .as_array()
                .expect("nights")
                .iter()
                .map(|n| int(n, "requests"))
                .sum();
            if requests == 6 || waited > 100 {
                break body;
            }
            waited += 1;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };

    let nights: Vec<(String, i64, i64, i64, i64, i64)> = body["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| {
            (
                n["date"].as_str().expect("date").to_owned(),
                int(n, "requests"),
                int(n, "rooms"),
                int(&n["by_reason"], "sold_out"),
                int(&n["by_reason"], "restricted"),
                int(&n["by_reason"], "occupancy"),
            )
        })
        .collect();
    assert_eq!(
        nights,
        vec![
            (day(10).to_string(), 1, 1, 1, 0, 0),
            (day(11).to_string(), 2, 3, 2, 0, 0),
            (day(12).to_string(), 2, 3, 1, 0, 1),
            (day(13).to_string(), 1, 1, 0, 1, 0),
        ],
        "nights without turnaways are left out: {body}"
    );
    assert_eq!(app.snapshot().await, before, "a turnaway appends no event");
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT t::text FROM turnaways t ORDER BY turnaway_id")
            .fetch_all(&app.db.pool)
            .await
            .expect("rows");
    assert!(
        stored
            .iter()
            .all(|row| !row.contains("Ana") && !row.contains("example.com")),
        "no personal data: {stored:?}"
    );
    for (bad, field) in [
        (
            format!("/v1/hotels/{HOTEL}/turnaways?from={}&to={}", day(9), day(9)),
            "to",
        ),
        (
            format!(
                "/v1/hotels/{HOTEL}/turnaways?from={}&to={}",
                day(9),
                day(500)
            ),
            "to",
        ),
    ] {
        let reply = app.get(&bad, Some(ADMIN)).await;
        assert_eq!(reply.assert_error(422, "invalid_request")["field"], field);
    }
    app.get(
        &format!("/v1/hotels/4242/turnaways?from={}&to={}", day(9), day(15)),
        Some(ADMIN),
    )
    .await
    .assert_error(404, "not_found");
    app.get(&path, Some(WEB))
        .await
        .assert_error(403, "forbidden");
    app.finish().await;
}
