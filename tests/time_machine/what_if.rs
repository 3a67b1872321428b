//! What-if: a recorded history replayed under the allowance in force (which must give
//! back what was sold and earned, as the occupancy report says) and under larger ones.

use aggregates::booking::{check_in_instant, CHECK_IN_HOUR};
use chrono::{Duration, NaiveDate, Utc};
use serde_json::{json, Value};

use crate::support::*;

fn in_lisbon(date: NaiveDate, minutes: i64) -> chrono::DateTime<Utc> {
    let lisbon = aggregates::types::TimeZone::parse("Europe/Lisbon").expect("valid");
    check_in_instant(date, lisbon) + Duration::minutes(minutes - i64::from(CHECK_IN_HOUR) * 60)
}

fn int(v: &Value, field: &str) -> i64 {
    v[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

async fn booked(app: &TestApp, key: &str, nights: (u64, u64), rooms: i64) -> String {
    let id = app
        .hold_ok(WEB, key, &hold_body(day(nights.0), day(nights.1), rooms))
        .await;
    app.confirm(WEB, &format!("{key}-pay"), &id, "tok_ok")
        .await
        .assert_status(200);
    id
}

/// A hold the hotel turns away, refused on the wall clock (as a server's clock is).
async fn turned_away(app: &TestApp, key: &str, body: &Value) {
    app.clock.set(Utc::now());
    let reply = app.hold(WEB, key, body).await;
    assert_eq!(reply.status.as_u16() / 100, 4, "{key}: {}", reply.text);
}

/// Waits for the turnaway log to hold `n` rows (written off the request path).
async fn turnaways_written(app: &TestApp, n: i64) {
    for _ in 0..200 {
        if app.count("turnaways").await >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the turnaway log never reached {n} rows");
}

fn ask(allowance: Value) -> Value {
    json!({"hotel_id": HOTEL, "room_type_id": KING, "from": day(10), "to": day(13),
           "policy": allowance, "walk_cost_cents": 30_000})
}

/// Per night: (sold, revenue, walks at worst) of `which` ("in_force" or "what_if").
fn per_night(body: &Value, which: &str) -> Vec<(i64, i64, i64)> {
    body["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| {
            let f = &n[which];
            (
                int(f, "room_nights_sold"),
                int(f, "revenue_cents"),
                int(f, "walks_worst"),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_policy_in_force_gives_back_what_was_sold_and_a_larger_allowance_takes_the_turnaways() {
    // Given two kings on the 10th to the 12th, sold, cancelled, repriced and turned away
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 2).await;
    let arrives = booked(&app, "a", (10, 12), 1).await;
    let absent = booked(&app, "b", (10, 11), 1).await;
    let dropped = app.hold_ok(WEB, "c", &hold_body(day(11), day(12), 1)).await;
    app.cancel(WEB, "c-cancel", &dropped, &json!({}))
        .await
        .assert_status(200);
    turned_away(&app, "t1", &hold_body(day(10), day(11), 1)).await;
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(12), "end_date": day(13), "total_rooms": 2,
                "rate_cents": 21_000}),
    )
    .await
    .assert_status(200);
    booked(&app, "d", (12, 13), 1).await;
    turned_away(&app, "t2", &hold_body(day(10), day(12), 1)).await;
    booked(&app, "e", (11, 12), 1).await;
    let mut crowded = hold_body(day(12), day(13), 1);
    crowded["guests"] = json!(3);
    turned_away(&app, "t3", &crowded).await;
    turnaways_written(&app, 3).await;
    // One guest arrives on the 10th, the other never comes.
    app.clock.set(in_lisbon(day(10), 16 * 60));
    app.check_in(ADMIN, "in", &arrives).await.assert_status(200);
    app.clock.set(in_lisbon(day(11), 4 * 60));
    assert_eq!(app.record_no_shows(Duration::hours(4)).await, 1);
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;

    // When the history is replayed under the allowance in force and one more
    let one_more = app
        .post_json(
            "/v1/analytics/what-if",
            AUDITOR,
            "w1",
            &ask(json!({"overbooking_allowance": 1})),
        )
        .await;

    // Then the policy in force is what the occupancy report says was sold and earned
    let body = one_more.assert_status(200).clone();
    let occupancy = app
        .get(
            &format!(
                "/v1/hotels/{HOTEL}/occupancy?start_date={}&end_date={}",
                day(10),
                day(13)
            ),
            Some(ADMIN),
        )
        .await;
    let occupancy = occupancy.assert_status(200);
    let recorded: Vec<(i64, i64, i64)> = occupancy["room_types"][0]["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| (int(n, "confirmed"), int(n, "revenue_cents"), 0))
        .collect();
    assert_eq!(per_night(&body, "in_force"), recorded, "{body}");
    assert_eq!(
        recorded,
        vec![(2, 2 * RATE, 0), (2, 2 * RATE, 0), (1, 21_000, 0)],
        "the no-show keeps its night; the repriced night sold at its new rate"
    );
    // and one more room takes the first sold-out turnaway on the 10th (the second
    // finds it full again); the restricted one stays away.
    assert_eq!(
        per_night(&body, "what_if"),
        vec![(3, 3 * RATE, 1), (2, 2 * RATE, 0), (1, 21_000, 0)]
    );
    assert_eq!(int(&body["what_if"], "room_nights_sold"), 6);
    assert_eq!(int(&body["in_force"], "room_nights_sold"), 5);
    // One guest came, one did not: half of the unknown guest is expected; the 10th has
    // the arrived guest and the turnaway's for two rooms, so nobody is expected walked.
    assert_eq!(body["assumptions"]["no_show_rate"], json!(0.5));
    assert_eq!(
        (
            int(&body["assumptions"], "rooms_due"),
            int(&body["assumptions"], "no_shows")
        ),
        (2, 1)
    );
    assert_eq!(body["what_if"]["walks_expected"], json!(0.0));
    assert_eq!(int(&body["what_if"], "walks_worst"), 1);
    assert_eq!(
        int(&body["what_if"], "net_revenue_cents"),
        5 * RATE + 21_000
    );
    assert_eq!(int(&body["policy"], "overbooking_allowance"), 1);

    // Two more: the second turnaway now fits on the 10th and the 11th as well.
    let two_more = app
        .post_json(
            "/v1/analytics/what-if",
            ADMIN,
            "w2",
            &ask(json!({"overbooking_allowance": 2})),
        )
        .await;
    let two_more = two_more.assert_status(200).clone();
    assert_eq!(
        per_night(&two_more, "what_if"),
        vec![(4, 4 * RATE, 2), (3, 3 * RATE, 1), (1, 21_000, 0)]
    );
    // The 10th: the arrived guest, the no-show, and two unknown at one half: one walked
    // when both come (1/4).
    assert_eq!(
        two_more["nights"][0]["what_if"]["walks_expected"],
        json!(0.25)
    );

    // From the 11th on, the guest who arrived on the 10th is not due in the range: no
    // arrival is recorded there, so the rate is unknown (not zero).
    let mut later = ask(json!({"overbooking_allowance": 1}));
    later["from"] = json!(day(11));
    let later = app
        .post_json("/v1/analytics/what-if", ADMIN, "w-later", &later)
        .await;
    let later = later.assert_status(200);
    assert_eq!(int(&later["assumptions"], "rooms_due"), 0, "{later}");
    assert_eq!(later["assumptions"]["no_show_rate"], Value::Null);

    // Deterministic for the same log.
    let again = app
        .post_json(
            "/v1/analytics/what-if",
            AUDITOR,
            "w3",
            &ask(json!({"overbooking_allowance": 1})),
        )
        .await;
    assert_eq!(*again.assert_status(200), body);

    // A suggested allowance is the no-show report's for that risk.
    let report = app
        .get(
            &format!(
                "/v1/hotels/{HOTEL}/no-shows?start_date={}&end_date={}&risk=0.7",
                day(10),
                day(13)
            ),
            Some(ADMIN),
        )
        .await;
    let suggested = int(
        &report.assert_status(200)["room_types"][0],
        "suggested_allowance",
    );
    let by_risk = app
        .post_json(
            "/v1/analytics/what-if",
            ADMIN,
            "w4",
            &ask(json!({"suggested_risk": 0.7})),
        )
        .await;
    let by_risk = by_risk.assert_status(200);
    assert_eq!(
        int(&by_risk["policy"], "overbooking_allowance"),
        suggested,
        "{by_risk}"
    );
    assert_eq!(
        suggested, 1,
        "one no-show in two: one more room at a 0.7 risk"
    );
    assert_eq!(by_risk["policy"]["suggested_risk"], json!(0.7));
    let _ = absent;
    runners.stop().await;
    // The auditor's verify of the same history says how fast it went.
    let verified = std::process::Command::new(env!("CARGO_BIN_EXE_reservations"))
        .args(["audit", "verify", "--database-url", &app.db.url])
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs");
    let said = String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "{said}");
    let report: Value = serde_json::from_slice(&verified.stdout).expect("JSON");
    assert!(
        said.contains(&format!("verified {} events in", report["events_checked"]))
            && said.contains("events/s"),
        "{said}"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_stay_is_due_on_its_own_arrival_date_not_on_the_first_night_a_range_reaches() {
    // Given a three-night stay from the 10th whose guest arrived
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 2).await;
    let stay = booked(&app, "stay", (10, 13), 1).await;
    app.clock.set(in_lisbon(day(10), 16 * 60));
    app.check_in(ADMIN, "in", &stay).await.assert_status(200);
    let due = |from: u64| {
        let app = &app;
        async move {
            let mut body = ask(json!({"overbooking_allowance": 0}));
            body["from"] = json!(day(from));
            let reply = app
                .post_json(
                    "/v1/analytics/what-if",
                    ADMIN,
                    &format!("due-{from}"),
                    &body,
                )
                .await;
            reply.assert_status(200)["assumptions"].clone()
        }
    };

    // When asked from its arrival, and from the night after
    let from_arrival = due(10).await;
    let from_after = due(11).await;

    // Then it is due only in the range holding its arrival date
    assert_eq!(int(&from_arrival, "rooms_due"), 1, "{from_arrival}");
    assert_eq!(from_arrival["no_show_rate"], json!(0.0));
    assert_eq!(int(&from_after, "rooms_due"), 0, "{from_after}");
    assert_eq!(from_after["no_show_rate"], Value::Null);
    app.finish().await;
}

#[tokio::test]
async fn a_what_if_question_out_of_its_rules_is_refused_naming_the_field() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 2).await;
    let mut both = ask(json!({"overbooking_allowance": 1, "suggested_risk": 0.1}));
    let cases = [
        (both.clone(), 422, "policy"),
        (ask(json!({})), 422, "policy"),
        (
            ask(json!({"overbooking_allowance": -1})),
            422,
            "policy.overbooking_allowance",
        ),
        (
            ask(json!({"suggested_risk": 1.0})),
            422,
            "policy.suggested_risk",
        ),
        (
            json!({"hotel_id": HOTEL, "room_type_id": KING, "from": day(12), "to": day(12),
                   "policy": {"overbooking_allowance": 1}}),
            422,
            "to",
        ),
        (
            json!({"hotel_id": HOTEL, "room_type_id": KING, "from": day(10), "to": day(12),
                   "policy": {"overbooking_allowance": 1}, "walk_cost_cents": -5}),
            422,
            "walk_cost_cents",
        ),
    ];
    for (i, (body, status, field)) in cases.into_iter().enumerate() {
        let reply = app
            .post_json("/v1/analytics/what-if", ADMIN, &format!("bad-{i}"), &body)
            .await;
        assert_eq!(
            reply.assert_error(status, "invalid_request")["field"],
            field,
            "{body}"
        );
    }
    both["room_type_id"] = json!(99);
    both["policy"] = json!({"overbooking_allowance": 1});
    app.post_json("/v1/analytics/what-if", ADMIN, "unknown", &both)
        .await
        .assert_error(404, "not_found");
    app.post_json(
        "/v1/analytics/what-if",
        WEB,
        "channel",
        &ask(json!({"overbooking_allowance": 1})),
    )
    .await
    .assert_error(403, "forbidden");
    app.finish().await;
}

#[tokio::test]
async fn a_full_group_blocks_refusal_is_logged_as_block_exhausted_and_no_allowance_sells_it() {
    // Given five kings on the 10th to the 12th, two of them a group's block, all picked up
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;
    app.put_json(
        &format!("/v1/hotels/{HOTEL}/blocks/ACME"),
        Some(ADMIN),
        &json!({"name": "Acme offsite", "room_type_id": KING, "start_date": day(10),
                "end_date": day(13), "rooms": 2, "rate_cents": 15_000,
                "release_date": day(5)}),
    )
    .await
    .assert_status(200);
    let from_block = |start: u64, end: u64, rooms: i64| {
        let mut body = hold_body(day(start), day(end), rooms);
        body["block_code"] = json!("ACME");
        body
    };
    let picked = app.hold_ok(WEB, "acme-1", &from_block(10, 13, 2)).await;
    app.confirm(WEB, "acme-1-pay", &picked, "tok_ok")
        .await
        .assert_status(200);

    // When one more of the group asks the block for the 11th and the 12th
    app.clock.set(Utc::now());
    let refused = app.hold(WEB, "acme-2", &from_block(11, 13, 1)).await;

    // Then it is refused as the block's, while general sale still has its three rooms
    let error = refused.assert_error(409, "block_exhausted");
    assert_eq!(error["night"], json!(day(11)));
    assert_eq!(error["remaining"], 0);
    let left = app.availability(WEB, HOTEL, day(10), day(13), None).await;
    let left: Vec<i64> = left.assert_status(200)["room_types"][0]["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| int(n, "remaining"))
        .collect();
    assert_eq!(left, vec![3, 3, 3], "general sale is not sold out");

    // and the turnaway log counts it on the nights it asked for as `block_exhausted`
    turnaways_written(&app, 1).await;
    let log = app
        .get(
            &format!(
                "/v1/hotels/{HOTEL}/turnaways?from={}&to={}",
                day(9),
                day(14)
            ),
            Some(ADMIN),
        )
        .await;
    let log = log.assert_status(200).clone();
    let nights: Vec<(String, i64, i64, i64, i64, i64, i64)> = log["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| {
            let by = &n["by_reason"];
            (
                n["date"].as_str().expect("date").to_owned(),
                int(n, "requests"),
                int(n, "rooms"),
                int(by, "sold_out"),
                int(by, "restricted"),
                int(by, "occupancy"),
                int(by, "block_exhausted"),
            )
        })
        .collect();
    assert_eq!(
        nights,
        vec![
            (day(11).to_string(), 1, 1, 0, 0, 0, 1),
            (day(12).to_string(), 1, 1, 0, 0, 0, 1),
        ],
        "{log}"
    );

    // and a larger allowance does not sell it from general sale: the block was full
    let reply = app
        .post_json(
            "/v1/analytics/what-if",
            ADMIN,
            "w-block",
            &ask(json!({"overbooking_allowance": 2})),
        )
        .await;
    let body = reply.assert_status(200).clone();
    assert_eq!(int(&body["replayed"], "turnaways"), 1, "{body}");
    let in_force = per_night(&body, "in_force");
    assert_eq!(
        in_force.iter().map(|n| n.0).collect::<Vec<_>>(),
        vec![2, 2, 2],
        "the block's rooms were sold: {body}"
    );
    assert_eq!(per_night(&body, "what_if"), in_force, "{body}");
    assert_eq!(
        int(&body["what_if"], "room_nights_sold"),
        int(&body["in_force"], "room_nights_sold")
    );
    app.finish().await;
}
