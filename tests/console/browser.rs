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

/// The second room type of the scenario's hotel.
const TWIN: i64 = 4;
/// The staff who sign in to the console, and their (shared) password.
const STAFF_ADMIN: &str = "ana@hotel.example";
const STAFF_AUDITOR: &str = "rui@hotel.example";
const STAFF_PASSWORD: &str = "console pass phrase";

pub(super) fn chromium() -> PathBuf {
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

pub(super) fn e2e_folder() -> PathBuf {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("e2e");
    assert!(
        folder.join("node_modules/playwright-core").exists(),
        "the browser tests need their packages: run `npm ci --prefix e2e`"
    );
    folder
}

#[tokio::test]
async fn staff_work_the_console_in_a_real_browser() {
    // Arrange: a hotel with 5 king rooms and 8 twins on 60 nights, a plan, and a confirmed stay of
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
    let rates = json!({"room_type_id": KING, "start_date": first,
                       "end_date": plus_days(first, 60), "rate_cents": 21_000});
    server
        .call(
            Method::PUT,
            &format!("/v1/hotels/{HOTEL}/rate-plans/{FLEXIBLE}/rates"),
            ADMIN,
            None,
            Some(&rates),
        )
        .await
        .assert_status(200);
    // A second room type, for the bulk edit over several types.
    let twin = json!({"name": "twin", "max_occupancy": 2});
    server
        .call(
            Method::PUT,
            &format!("/v1/hotels/{HOTEL}/room-types/{TWIN}"),
            ADMIN,
            None,
            Some(&twin),
        )
        .await
        .assert_status(200);
    let twin_nights = json!({"start_date": first, "end_date": plus_days(first, 60),
                             "total_rooms": 8, "overbooking_allowance": 0, "rate_cents": 15_000});
    server
        .call(
            Method::PUT,
            &format!("/v1/hotels/{HOTEL}/room-types/{TWIN}/inventory"),
            ADMIN,
            None,
            Some(&twin_nights),
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
    // The people who sign in: an admin and an auditor.
    for (email, name, role) in [
        (STAFF_ADMIN, "Ana Lima", app::staff::StaffRole::Admin),
        (STAFF_AUDITOR, "Rui Costa", app::staff::StaffRole::Auditor),
    ] {
        app::staff::create(&db.pool, email, name, role, STAFF_PASSWORD)
            .await
            .expect("a staff account");
    }
    let screenshots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("artifacts/console-e2e");
    std::fs::create_dir_all(&screenshots).expect("the screenshot folder");

    // Act: the scenario, in Chromium.
    let scenario = Scenario {
        folder: &folder,
        script: "console.test.mjs",
        env: vec![
            ("BASE_URL", server.url("")),
            ("ADMIN_TOKEN", ADMIN.to_owned()),
            ("AUDITOR_TOKEN", AUDITOR.to_owned()),
            ("CHANNEL_TOKEN", WEB.to_owned()),
            ("ADMIN_EMAIL", STAFF_ADMIN.to_owned()),
            ("AUDITOR_EMAIL", STAFF_AUDITOR.to_owned()),
            ("STAFF_PASSWORD", STAFF_PASSWORD.to_owned()),
            ("HOTEL_ID", HOTEL.to_string()),
            ("ROOM_TYPE_ID", KING.to_string()),
            ("TWIN_ID", TWIN.to_string()),
            ("MONTH", month_start.format("%Y-%m").to_string()),
            ("WATCHED_NIGHT", watched.to_string()),
            ("RESERVATION_ID", to_cancel.clone()),
            ("GUEST_EMAIL", "ines@example.com".to_owned()),
            ("CHROMIUM_PATH", chromium.display().to_string()),
            ("SCREENSHOTS", screenshots.display().to_string()),
        ],
    };
    let (passed, report) = scenario.run(&[]);
    println!("{report}");

    // Assert: every step passed, and what the clicks changed is in the write side.
    assert!(passed, "the browser scenario failed:\n{report}");
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

    // Act: a superuser rewrites one audit row; staff run the audit from the page.
    let position: i64 = sqlx::query_scalar(
        "SELECT min(global_position) FROM events WHERE aggregate_id LIKE '%' || $1",
    )
    .bind(&to_cancel)
    .fetch_one(&db.pool)
    .await
    .expect("the reservation's first event");
    let mut tx = db.pool.begin().await.expect("begin");
    for sql in [
        "ALTER TABLE audit_log DISABLE TRIGGER USER".to_owned(),
        format!("UPDATE audit_log SET hash = sha256(hash) WHERE position = {position}"),
        "ALTER TABLE audit_log ENABLE TRIGGER USER".to_owned(),
    ] {
        sqlx::query(&sql).execute(&mut *tx).await.expect(&sql);
    }
    tx.commit().await.expect("commit");
    let (passed, report) = scenario.run(&[("TAMPERED_POSITION", position.to_string())]);

    // Assert: the page said FAILED and named the position.
    println!("{report}");
    assert!(
        passed,
        "the tampered audit was not shown as failed:\n{report}"
    );
    // The server first, so that its runners write no key after the clean-up.
    drop(server);
    db.drop_database().await;
}

/// `node --test` over a script of `e2e/` (`console.test.mjs` unless told) with the
/// scenario's environment.
pub(super) struct Scenario<'a> {
    pub(super) folder: &'a std::path::Path,
    pub(super) env: Vec<(&'static str, String)>,
    pub(super) script: &'static str,
}

impl Scenario<'_> {
    /// Runs the scenario (only the tampered-audit test when `extra` names the position);
    /// whether every test passed, and the report.
    pub(super) fn run(&self, extra: &[(&str, String)]) -> (bool, String) {
        let mut command = Command::new("node");
        command.arg("--test").arg("--test-reporter=spec");
        if !extra.is_empty() {
            command.arg("--test-name-pattern=tampered");
        }
        command.arg(self.script).current_dir(self.folder);
        for (name, value) in self
            .env
            .iter()
            .map(|(n, v)| (*n, v))
            .chain(extra.iter().map(|(n, v)| (*n, v)))
        {
            command.env(name, value);
        }
        let output = command
            .output()
            .expect("run node (Node.js 18 or later is needed for the browser tests)");
        let report = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), report)
    }
}
