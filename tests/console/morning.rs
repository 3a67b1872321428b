//! The console as a revenue manager and a front desk open it in the morning, in a real
//! headless Chromium (the scenario is `e2e/morning.test.mjs`): the hotel's numbers under
//! the calendar checked against the API, a hold seen arriving in the pickup, a rate
//! change found in the night's history under the person who made it, CSV exports read
//! back, a guest checked in from the arrivals list, a colleague added by an admin, and
//! every page passing the accessibility check at 1440 and 390 pixels wide.
//!
//! This test makes the server, the hotel and the staff accounts; the script makes the
//! reservations (it knows the hotel's today) and drives the pages. Screenshots go to
//! `artifacts/console-morning/` (the ones in docs/console.md come from there).

use std::path::PathBuf;

use reqwest::Method;
use serde_json::json;

use super::browser::{chromium, e2e_folder, Scenario};
use crate::support::*;

const TWIN: i64 = 4;
const PASSWORD: &str = "morning pass phrase";

#[tokio::test]
async fn a_revenue_manager_and_a_front_desk_work_their_morning_in_a_real_browser() {
    // Arrange: a hotel of 5 kings (180.00) and 8 twins (150.00) on the next 400 nights,
    // and four people: an admin, a revenue manager, a front desk and an auditor.
    let (chromium, folder) = (chromium(), e2e_folder());
    let db = TestDb::new().await;
    let server = ServerProcess::start(&db, &[("PROJECTION_GATHER_MS", "0".to_owned())]).await;
    let first = day(0);
    server.seed_hotel(first, 400, 5).await;
    server
        .call(
            Method::PUT,
            &format!("/v1/hotels/{HOTEL}/room-types/{TWIN}"),
            ADMIN,
            None,
            Some(&json!({"name": "twin", "max_occupancy": 2})),
        )
        .await
        .assert_status(200);
    server
        .call(
            Method::PUT,
            &format!("/v1/hotels/{HOTEL}/room-types/{TWIN}/inventory"),
            ADMIN,
            None,
            Some(
                &json!({"start_date": first, "end_date": plus_days(first, 400),
                         "total_rooms": 8, "overbooking_allowance": 1, "rate_cents": 15_000}),
            ),
        )
        .await
        .assert_status(200);
    for (email, name, role) in [
        (
            "ana@hotel.example",
            "Ana Lima",
            app::staff::StaffRole::Admin,
        ),
        (
            "mia@hotel.example",
            "Mia Sousa",
            app::staff::StaffRole::Revenue,
        ),
        (
            "eva@hotel.example",
            "Eva Rocha",
            app::staff::StaffRole::FrontDesk,
        ),
        (
            "rui@hotel.example",
            "Rui Costa",
            app::staff::StaffRole::Auditor,
        ),
    ] {
        app::staff::create(&db.pool, email, name, role, PASSWORD)
            .await
            .expect("a staff account");
    }
    let screenshots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("artifacts/console-morning");
    std::fs::create_dir_all(&screenshots).expect("the screenshot folder");
    let downloads = std::env::temp_dir().join(format!("console-morning-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&downloads).expect("a download folder");

    // Act: the scenario, in Chromium.
    let scenario = Scenario {
        folder: &folder,
        script: "morning.test.mjs",
        env: vec![
            ("BASE_URL", server.url("")),
            ("ADMIN_TOKEN", ADMIN.to_owned()),
            ("CHANNEL_TOKEN", WEB.to_owned()),
            ("HOTEL_ID", HOTEL.to_string()),
            ("KING_ID", KING.to_string()),
            ("TWIN_ID", TWIN.to_string()),
            ("TIMEZONE", "Europe/Lisbon".to_owned()),
            ("STAFF_PASSWORD", PASSWORD.to_owned()),
            ("CHROMIUM_PATH", chromium.display().to_string()),
            ("SCREENSHOTS", screenshots.display().to_string()),
            ("DOWNLOADS", downloads.display().to_string()),
        ],
    };
    let (passed, report) = scenario.run(&[]);
    println!("{report}");

    // Assert: every step passed, and what the clicks changed is in the write side and
    // its history.
    assert!(passed, "the browser scenario failed:\n{report}");
    let checked_in: i64 =
        sqlx::query_scalar("SELECT count(*) FROM reservations WHERE status = 'checked_in'")
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(checked_in, 1, "the front desk checked one guest in");
    let by_person: Vec<(String, String)> = sqlx::query_as(
        "SELECT metadata->>'client', metadata->>'staff_id' FROM events
          WHERE metadata ? 'staff_id' ORDER BY global_position",
    )
    .fetch_all(&db.pool)
    .await
    .expect("events");
    let names: Vec<&str> = by_person.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"Mia Sousa"), "{names:?}");
    assert!(names.contains(&"Eva Rocha"), "{names:?}");
    let added: i64 =
        sqlx::query_scalar("SELECT count(*) FROM staff WHERE email = 'leo@hotel.example'")
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(added, 1, "the admin added a colleague in the console");
    let _ = std::fs::remove_dir_all(&downloads);
    drop(server);
    db.drop_database().await;
}
