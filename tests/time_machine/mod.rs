//! The auditor's time machine: availability as the log knew it at a past moment, asked
//! after the fact and compared with what the live endpoint served at that moment.

mod what_if;

use serde_json::{json, Value};

use crate::support::*;

/// What availability served, without the fields that say when and how it was read.
fn served(body: &Value) -> Value {
    json!({"currency": body["currency"], "room_types": body["room_types"]})
}

/// A moment strictly after everything written so far, and before anything written next.
async fn moment() -> chrono::DateTime<chrono::Utc> {
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let at = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    at
}

#[tokio::test]
async fn availability_as_known_at_a_moment_is_what_was_served_at_that_moment() {
    let app = spawn_app().await;
    let before_the_hotel = moment().await;
    app.seed_hotel(day(10), 5, 5).await;
    let stay = format!(
        "/v1/hotels/{HOTEL}/availability?start_date={}&end_date={}&rooms=1",
        day(10),
        day(12)
    );
    // A history: the catalog, a hold, its cancellation, then an inventory change.
    let mut history = Vec::new();
    let read = |label: &'static str| {
        let app = &app;
        let stay = stay.clone();
        async move {
            let reply = app.get(&stay, Some(ADMIN)).await;
            let at = moment().await;
            (label, at, served(reply.assert_status(200)))
        }
    };
    history.push(read("seeded").await);
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 2))
        .await;
    history.push(read("after the hold").await);
    app.cancel(WEB, "cancel", &id, &json!({}))
        .await
        .assert_status(200);
    history.push(read("after the cancellation").await);
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(11), "end_date": day(12), "total_rooms": 3,
                "rate_cents": 21_000}),
    )
    .await
    .assert_status(200);
    history.push(read("after the inventory change").await);

    let instant =
        |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    for (label, at, then) in &history {
        let asked = format!("{stay}&as_known_at={}", instant(at));

        let reply = app.get(&asked, Some(AUDITOR)).await;

        let body = reply.assert_status(200);
        assert_eq!(body["source"], "log", "{label}");
        assert_eq!(served(body), *then, "{label}: as known at {at}");
    }
    // The command line prints the same answer.
    let (_, held_at, held_then) = &history[1];
    let printed = std::process::Command::new(env!("CARGO_BIN_EXE_reservations"))
        .args([
            "audit",
            "at",
            "--hotel",
            &HOTEL.to_string(),
            "--at",
            &instant(held_at),
        ])
        .args([
            "--start-date",
            &day(10).to_string(),
            "--end-date",
            &day(12).to_string(),
        ])
        .env("DATABASE_URL", &app.db.url)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs");
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let printed: Value = serde_json::from_slice(&printed.stdout).expect("JSON");
    assert_eq!(served(&printed), *held_then);
    assert_eq!(printed["source"], "log");
    // The moments differ from each other: the test would catch a log read as of now.
    assert_ne!(history[0].2, history[1].2);
    assert_ne!(history[1].2, history[3].2);
    let remaining = |v: &Value| v["room_types"][0]["nights"][1]["remaining"].clone();
    assert_eq!(
        [&history[0].2, &history[1].2, &history[2].2, &history[3].2].map(remaining),
        [json!(5), json!(3), json!(5), json!(3)]
    );

    let at = |t: chrono::DateTime<chrono::Utc>| format!("{stay}&as_known_at={}", instant(&t));
    app.get(&at(before_the_hotel), Some(AUDITOR))
        .await
        .assert_error(404, "not_found");
    let future = chrono::Utc::now() + chrono::Duration::hours(1);
    let refused = app.get(&at(future), Some(ADMIN)).await;
    assert_eq!(
        refused.assert_error(422, "invalid_request")["field"],
        "as_known_at"
    );
    app.get(&at(history[1].1), Some(WEB))
        .await
        .assert_error(403, "forbidden");
    let malformed = app
        .get(&format!("{stay}&as_known_at=yesterday"), Some(ADMIN))
        .await;
    assert!(
        malformed.assert_error(422, "invalid_request")["message"]
            .as_str()
            .is_some_and(|m| m.contains("RFC 3339")),
        "{}",
        malformed.text
    );
    app.finish().await;
}
