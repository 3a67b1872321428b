//! The staff console in a real headless Chromium (Debian's `chromium`), driven by
//! Playwright (`playwright-core`, from `e2e/`): the scenario is `e2e/console.test.mjs`;
//! this test makes the server and the data it starts from, runs it, and then checks
//! in the database what the clicks were meant to change.
//!
//! Needs `npm ci --prefix e2e` and the `chromium` package (`.ci/run` installs both on a
//! machine without them). Screenshots of every step go to `artifacts/console-e2e/`.

use std::path::PathBuf;
use std::process::Command;

use chrono::Datelike;
use reqwest::Method;
use serde_json::json;

use crate::support::*;

fn chromium() -> PathBuf {
    let path = PathBuf::from(
        std::env::var("CHROMIUM_PATH").unwrap_or_else(|_| "/usr/bin/chromium".to_owned()),
    );
    assert!(
        path.exists(),
        "no Chromium at {}: install Debian's `chromium` package (or set CHROMIUM_PATH)",
        path.display()
    );
    path
}

fn e2e_folder() -> PathBuf {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e");
    assert!(
        folder.join("node_modules/playwright-core").exists(),
        "the browser tests need their packages: run `npm ci --prefix e2e`"
    );
    folder
}

#[tokio::test]
async fn staff_work_the_console_in_a_real_browser() {
    // Arrange: a hotel with 5 king rooms on 60 nights, a plan, and a confirmed stay of
    // two rooms the scenario cancels from its page.
    let (chromium, folder) = (chromium(), e2e_folder());
    let db = TestDb::new().await;
    let server = ServerProcess::start(&db, &[("PROJECTION_GATHER_MS", "0".to_owned())]).await;
    let first = day(3);
    server.seed_hotel(first, 60, 5).await;
    let plan = json!({"name": "Flexible", "room_type_ids": [KING]});
    server
        .call(
            Method::PUT,
            &format!("/v1/hotels/{HOTEL}/rate-plans/{FLEXIBLE}"),
            ADMIN,
            None,
            Some(&plan),
        )
        .await
        .assert_status(200);
    // The scenario works on the month after `first`'s, whose nights all have rooms.
    let night = plus_days(first, 35);
    let month_start = night.with_day0(0).unwrap_or(night);
    let watched = plus_days(month_start, 2);
    let stay_start = plus_days(month_start, 12);
    let mut body = hold_body(stay_start, plus_days(stay_start, 2), 2);
    body["guest"] = json!({"name": "Inês Duarte", "email": "ines@example.com"});
    let to_cancel = server.hold_and_confirm(&body).await;
    let screenshots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("artifacts/console-e2e");
    std::fs::create_dir_all(&screenshots).expect("the screenshot folder");

    // Act: the scenario, in Chromium.
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "console.test.mjs"])
        .current_dir(&folder)
        .env("BASE_URL", server.url(""))
        .env("ADMIN_TOKEN", ADMIN)
        .env("AUDITOR_TOKEN", AUDITOR)
        .env("CHANNEL_TOKEN", WEB)
        .env("HOTEL_ID", HOTEL.to_string())
        .env("ROOM_TYPE_ID", KING.to_string())
        .env("MONTH", month_start.format("%Y-%m").to_string())
        .env("WATCHED_NIGHT", watched.to_string())
        .env("RESERVATION_ID", &to_cancel)
        .env("GUEST_EMAIL", "ines@example.com")
        .env("CHROMIUM_PATH", &chromium)
        .env("SCREENSHOTS", &screenshots)
        .output()
        .expect("run node (Node.js 18 or later is needed for the browser tests)");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{report}");

    // Assert: every step passed, and what the clicks changed is in the write side.
    assert!(
        output.status.success(),
        "the browser scenario failed:\n{report}"
    );
    let status: String =
        sqlx::query_scalar("SELECT status FROM reservations WHERE reservation_id = $1::uuid")
            .bind(&to_cancel)
            .fetch_one(&db.pool)
            .await
            .expect("the reservation's row");
    assert_eq!(status, "cancelled");
    let stopped: Vec<(chrono::NaiveDate, bool)> = sqlx::query_as(
        "SELECT night, coalesce((restrictions #>> '{all,stop_sell}')::boolean, false)
           FROM room_nights WHERE hotel_id = $1 AND room_type_id = $2
            AND night >= $3 AND night < $4 ORDER BY night",
    )
    .bind(HOTEL)
    .bind(KING)
    .bind(plus_days(watched, 4))
    .bind(plus_days(watched, 9))
    .fetch_all(&db.pool)
    .await
    .expect("the nights' rows");
    let expected: Vec<(chrono::NaiveDate, bool)> = (4..9)
        .map(|n| (plus_days(watched, n), (5..8).contains(&n)))
        .collect();
    assert_eq!(
        stopped, expected,
        "stop-sell on the three nights selected, and only them"
    );
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}
