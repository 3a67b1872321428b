//! Guests' personal data (docs/privacy.md): sealed at rest from the first write, opened
//! for the reservation's channel and staff only, exported, and erased by destroying the
//! guest's key, after which nothing in PostgreSQL or Redis names the guest, every
//! answer about their reservations says `[erased]`, the history still verifies and a
//! rebuilt view matches. A sealed value that was altered fails loudly.

use std::time::Duration;

use projections::audit;
use reservations::workers::{self, ProjectionName};
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

/// The guest who asks to be erased, named so that no other text in the database could
/// contain it by chance.
const ZELDA_NAME: &str = "Zelda Quarrington-Vasquez";
const ZELDA_EMAIL: &str = "zelda.quarrington@example.org";
const ZELDA_REASON: &str = "Zelda Quarrington-Vasquez cannot travel";
/// Every fragment of her that must not be readable anywhere once she is erased.
const ZELDA_TEXTS: [&str; 3] = ["quarrington", "zelda", "cannot travel"];
const BOB_NAME: &str = "Bob Stayer";
const BOB_EMAIL: &str = "bob.stayer@example.net";

/// The second hotel: 813 in Porto, a king room type of its own.
const PORTO: i64 = 813;

fn hold_at(hotel: i64, night: u64, name: &str, email: &str) -> Value {
    json!({
        "hotel_id": hotel,
        "room_type_id": KING,
        "start_date": day(night),
        "end_date": day(night + 2),
        "rooms": 1,
        "guest": {"name": name, "email": email},
    })
}

async fn seed_two_hotels(app: &TestApp) {
    app.seed_hotel(day(1), 60, 5).await;
    app.put_hotel(
        PORTO,
        &json!({"name": "Hotel Douro", "city": "Porto", "timezone": "Europe/Lisbon"}),
    )
    .await
    .assert_status(200);
    app.put_room_type(PORTO, KING, &json!({"name": "king", "max_occupancy": 2}))
        .await
        .assert_status(200);
    app.put_inventory(
        PORTO,
        KING,
        &json!({"start_date": day(1), "end_date": day(61), "total_rooms": 5,
                "overbooking_allowance": 0, "rate_cents": RATE}),
    )
    .await
    .assert_status(200);
}

/// Zelda's four reservations over two hotels (held, confirmed, cancelled with a reason
/// that names her, held) and Bob's confirmed one. Returns (Zelda's ids, Bob's id).
async fn bookings(app: &TestApp) -> (Vec<String>, String) {
    let held = app
        .hold_ok(WEB, "z-1", &hold_at(HOTEL, 10, ZELDA_NAME, ZELDA_EMAIL))
        .await;
    let confirmed = app
        .hold_ok(WEB, "z-2", &hold_at(HOTEL, 20, ZELDA_NAME, ZELDA_EMAIL))
        .await;
    app.confirm(WEB, "z-2-pay", &confirmed, "tok_ok")
        .await
        .assert_status(200);
    let cancelled = app
        .hold_ok(WEB, "z-3", &hold_at(PORTO, 10, ZELDA_NAME, ZELDA_EMAIL))
        .await;
    app.cancel(
        WEB,
        "z-3-cancel",
        &cancelled,
        &json!({"reason": ZELDA_REASON}),
    )
    .await
    .assert_status(200);
    let porto_held = app
        .hold_ok(MOBILE, "z-4", &hold_at(PORTO, 30, ZELDA_NAME, ZELDA_EMAIL))
        .await;
    let bob = app
        .hold_ok(WEB, "b-1", &hold_at(HOTEL, 10, BOB_NAME, BOB_EMAIL))
        .await;
    app.confirm(WEB, "b-1-pay", &bob, "tok_ok")
        .await
        .assert_status(200);
    (vec![held, confirmed, cancelled, porto_held], bob)
}

/// Every (table, column, row) of every text, json and jsonb column of every table in
/// the database (`public` and `privacy`) whose text contains one of `texts`
/// (case-insensitive).
async fn plaintext_anywhere(pool: &PgPool, texts: &[&str]) -> Vec<String> {
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_schema, table_name, column_name FROM information_schema.columns
          WHERE table_schema IN ('public', 'privacy')
            AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea')
            AND table_name IN (SELECT table_name FROM information_schema.tables
                                WHERE table_type = 'BASE TABLE'
                                  AND table_schema IN ('public', 'privacy'))",
    )
    .fetch_all(pool)
    .await
    .expect("columns");
    assert!(columns.len() > 20, "the walk saw the tables: {columns:?}");
    let mut found = Vec::new();
    for (schema, table, column) in columns {
        for text in texts {
            let sql = format!(
                "SELECT count(*) FROM \"{schema}\".\"{table}\"
                  WHERE position($1 in lower(encode(convert_to(\"{column}\"::text, 'UTF8'), 'escape'))) > 0"
            );
            let hits: i64 = sqlx::query_scalar(&sql)
                .bind(text.to_lowercase())
                .fetch_one(pool)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            if hits > 0 {
                found.push(format!(
                    "{schema}.{table}.{column} contains {text:?} ({hits} rows)"
                ));
            }
        }
    }
    found
}

/// Every key of the test's deployment in Redis, with its members or fields.
async fn redis_contents(db: &TestDb) -> Vec<String> {
    let client = redis::Client::open("redis://127.0.0.1:6379").expect("redis url");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("rsv:{}:*", db.name))
        .query_async(&mut redis)
        .await
        .expect("keys");
    let mut contents = keys.clone();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .expect("type");
        let mut command = match kind.as_str() {
            "zset" => redis::cmd("ZRANGE"),
            "hash" => redis::cmd("HGETALL"),
            "set" => redis::cmd("SMEMBERS"),
            _ => continue,
        };
        command.arg(&key);
        if kind == "zset" {
            command.arg(0).arg(-1);
        }
        let items: Vec<String> = command.query_async(&mut redis).await.unwrap_or_default();
        contents.extend(items);
    }
    contents
}

async fn view_rows(pool: &PgPool, generation: i32) -> Vec<Value> {
    sqlx::query_scalar(
        "SELECT jsonb_build_object('id', reservation_id, 'status', status, 'guest', guest,
                'guest_id', guest_id, 'name', guest_name, 'email', guest_email,
                'total', total_cents, 'version', version)
           FROM reservations_view WHERE generation = $1 ORDER BY reservation_id",
    )
    .bind(generation)
    .fetch_all(pool)
    .await
    .expect("view rows")
}

#[tokio::test]
async fn an_erased_guest_leaves_no_readable_trace_and_the_history_still_verifies() {
    // Arrange
    let app = spawn_app().await;
    let runners = Runners::start(&app.db.pool);
    seed_two_hotels(&app).await;
    let (zelda, bob) = bookings(&app).await;
    wait_caught_up(&app.db.pool).await;

    // Sealed at rest from the first write: nothing of either guest is stored in the
    // clear, though both read back to their channel.
    assert_eq!(
        plaintext_anywhere(&app.db.pool, &ZELDA_TEXTS).await,
        Vec::<String>::new()
    );
    assert_eq!(
        plaintext_anywhere(&app.db.pool, &["stayer"]).await,
        Vec::<String>::new()
    );
    let read = app.get_reservation(WEB, &zelda[0]).await;
    assert_eq!(
        read.assert_status(200)["guest"],
        json!({"name": ZELDA_NAME, "email": ZELDA_EMAIL})
    );
    // An auditor reads the history, not the people in it.
    let audited = app.get_reservation(AUDITOR, &zelda[0]).await;
    assert_eq!(audited.assert_status(200)["guest"]["name"], "[sealed]");
    // The export has all four, the reason opened.
    let export = app
        .get(
            &format!("/v1/guests/export?email={}", ZELDA_EMAIL.to_uppercase()),
            Some(ADMIN),
        )
        .await;
    let exported = export.assert_status(200)["reservations"]
        .as_array()
        .expect("reservations")
        .clone();
    assert_eq!(exported.len(), 4, "{}", export.text);
    assert!(exported
        .iter()
        .all(|r| r["reservation"]["guest"]["email"] == ZELDA_EMAIL));
    assert!(export.text.contains(ZELDA_REASON), "{}", export.text);
    assert!(!export.text.contains(BOB_NAME));
    let verified = audit::catch_up_and_verify(&app.db.pool, WAIT)
        .await
        .expect("verify");
    assert!(verified.ok, "{:?}", verified.problems);

    // Act
    let erased = app
        .post_json(
            "/v1/guests/erase",
            ADMIN,
            "erase-zelda",
            &json!({"email": ZELDA_EMAIL}),
        )
        .await;

    // Assert
    let body = erased.assert_status(200).clone();
    assert_eq!(body["keys_destroyed"], 1, "{body}");
    assert_eq!(body["reservations"], 4, "{body}");
    assert_eq!(body["reservations_recorded"], 4, "{body}");
    assert_eq!(body["reservations_held_before_sealing"], 0, "{body}");
    wait_caught_up(&app.db.pool).await;
    for id in &zelda {
        let owner = if id == &zelda[3] { MOBILE } else { WEB };
        let read = app.get_reservation(owner, id).await;
        assert_eq!(
            read.assert_status(200)["guest"],
            json!({"name": "[erased]", "email": "[erased]"}),
            "{id}"
        );
        let history = app.reservation_events(owner, id).await;
        let history = history.assert_status(200);
        assert_eq!(history["events"][0]["data"]["guest"], "erased", "{history}");
        assert!(history["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["type"] == "GuestErased"));
    }
    // The stays, their status and money are still the hotel's record.
    let confirmed = app.get_reservation(WEB, &zelda[1]).await;
    assert_eq!(confirmed.assert_status(200)["status"], "confirmed");
    // The other guest reads as before.
    let other = app.get_reservation(WEB, &bob).await;
    assert_eq!(
        other.assert_status(200)["guest"],
        json!({"name": BOB_NAME, "email": BOB_EMAIL})
    );
    let list = app
        .get(
            &format!("/v1/reservations?guest_email={ZELDA_EMAIL}"),
            Some(ADMIN),
        )
        .await;
    assert_eq!(list.assert_status(200)["reservations"], json!([]));
    let export = app
        .get(
            &format!("/v1/guests/export?email={ZELDA_EMAIL}"),
            Some(ADMIN),
        )
        .await;
    assert_eq!(export.assert_status(200)["reservations"], json!([]));
    // Nothing readable of her anywhere: PostgreSQL (every text and JSON column of every
    // table) and Redis (every key of the deployment, and what it holds).
    assert_eq!(
        plaintext_anywhere(&app.db.pool, &ZELDA_TEXTS).await,
        Vec::<String>::new()
    );
    let guest_id = body["guest_id"].as_str().expect("guest id").to_owned();
    let redis = redis_contents(&app.db).await;
    assert!(
        !redis.iter().any(|item| item.contains(&guest_id)
            || ZELDA_TEXTS.iter().any(|t| item.to_lowercase().contains(t))),
        "{redis:?}"
    );
    let keys_left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM privacy.guest_keys WHERE guest_id = $1 AND key IS NOT NULL",
    )
    .bind(&guest_id)
    .fetch_one(&app.db.pool)
    .await
    .expect("keys");
    assert_eq!(keys_left, 0);
    // The chain, computed over what is stored, still verifies.
    let verified = audit::catch_up_and_verify(&app.db.pool, WAIT)
        .await
        .expect("verify");
    assert!(verified.ok, "{:?}", verified.problems);
    // A rebuild of the view from the log matches what the runner left.
    runners.stop().await;
    let incremental = view_rows(&app.db.pool, 1).await;
    workers::rebuild(
        &app.db.pool,
        None,
        ProjectionName::ReservationsView,
        1_000,
        |_, _| {},
    )
    .await
    .expect("rebuild");
    assert_eq!(view_rows(&app.db.pool, 2).await, incremental);
    // A repeat destroys and records nothing more.
    let again = app
        .post_json(
            "/v1/guests/erase",
            ADMIN,
            "erase-zelda-2",
            &json!({"guest_id": guest_id}),
        )
        .await;
    let again = again.assert_status(200);
    assert_eq!(
        (
            again["keys_destroyed"].clone(),
            again["reservations_recorded"].clone()
        ),
        (json!(0), json!(0))
    );
    app.finish().await;
}

#[tokio::test]
async fn a_guest_who_books_again_after_an_erasure_gets_a_new_key() {
    // Arrange
    let app = spawn_app().await;
    app.seed_hotel(day(1), 30, 5).await;
    let before = app
        .hold_ok(
            WEB,
            "first",
            &hold_at(HOTEL, 5, "Ana Lima", "ana@example.com"),
        )
        .await;
    app.post_json(
        "/v1/guests/erase",
        ADMIN,
        "erase",
        &json!({"email": "ana@example.com"}),
    )
    .await
    .assert_status(200);

    // Act
    let after = app
        .hold_ok(
            WEB,
            "second",
            &hold_at(HOTEL, 8, "Ana Lima", "ana@example.com"),
        )
        .await;

    // Assert
    let old = app.get_reservation(WEB, &before).await;
    assert_eq!(old.assert_status(200)["guest"]["email"], "[erased]");
    let new = app.get_reservation(WEB, &after).await;
    assert_eq!(new.assert_status(200)["guest"]["email"], "ana@example.com");
    let keys: Vec<(bool,)> =
        sqlx::query_as("SELECT key IS NOT NULL FROM privacy.guest_keys ORDER BY created_at")
            .fetch_all(&app.db.pool)
            .await
            .expect("keys");
    assert_eq!(keys, vec![(false,), (true,)]);
    app.finish().await;
}

#[tokio::test]
async fn an_altered_sealed_value_fails_loudly_and_verify_names_the_event() {
    // Arrange
    let app = spawn_app().await;
    app.seed_hotel(day(1), 30, 5).await;
    let id = app
        .hold_ok(WEB, "h", &hold_at(HOTEL, 5, BOB_NAME, BOB_EMAIL))
        .await;
    let verified = audit::catch_up_and_verify(&app.db.pool, WAIT)
        .await
        .expect("verify");
    assert!(verified.ok, "{:?}", verified.problems);
    let position: i64 = sqlx::query_scalar(
        "SELECT global_position FROM events WHERE event_type = 'ReservationHeld'",
    )
    .fetch_one(&app.db.pool)
    .await
    .expect("position");

    // Act: one character of the sealed guest changed, in the log and in the row.
    for sql in [
        "UPDATE events SET payload = jsonb_set(payload, '{ReservationHeld,guest,sealed,data}',
                to_jsonb(overlay(payload #>> '{ReservationHeld,guest,sealed,data}' placing
                    CASE WHEN substr(payload #>> '{ReservationHeld,guest,sealed,data}', 40, 1) = 'A'
                         THEN 'B' ELSE 'A' END from 40 for 1)))
          WHERE event_type = 'ReservationHeld'",
        "UPDATE reservations SET guest = jsonb_set(guest, '{sealed,data}',
                to_jsonb(overlay(guest #>> '{sealed,data}' placing
                    CASE WHEN substr(guest #>> '{sealed,data}', 40, 1) = 'A'
                         THEN 'B' ELSE 'A' END from 40 for 1)))",
    ] {
        sqlx::query(sql).execute(&app.db.pool).await.expect(sql);
    }

    // Assert: never other data: the reads that would open it fail, and say nothing of it.
    for reply in [
        app.get_reservation(WEB, &id).await,
        app.reservation_events(WEB, &id).await,
    ] {
        reply.assert_error(500, "internal");
        assert!(!reply.text.contains("Bob"), "{}", reply.text);
    }
    // An auditor, who opens nothing, still reads it sealed.
    app.reservation_events(AUDITOR, &id)
        .await
        .assert_status(200);
    let report = audit::catch_up_and_verify(&app.db.pool, WAIT)
        .await
        .expect("verify");
    assert!(!report.ok);
    assert_eq!(
        report.first_bad_position,
        Some(position),
        "{:?}",
        report.problems
    );
    app.finish().await;
}

#[tokio::test]
async fn only_staff_erase_and_export_and_a_guest_is_named_once() {
    let app = spawn_app().await;
    for token in [WEB, AUDITOR] {
        app.post_json(
            "/v1/guests/erase",
            token,
            "e",
            &json!({"email": "ana@example.com"}),
        )
        .await
        .assert_error(403, "forbidden");
        app.get("/v1/guests/export?email=ana@example.com", Some(token))
            .await
            .assert_error(403, "forbidden");
    }
    for body in [
        json!({}),
        json!({"email": "ana@example.com", "guest_id": "g_00000000000000000000000000000000"}),
        json!({"email": "not an address"}),
        json!({"guest_id": "ana"}),
    ] {
        let reply = app.post_json("/v1/guests/erase", ADMIN, "e", &body).await;
        assert_eq!(reply.status.as_u16(), 422, "{body}: {}", reply.text);
        assert_error_shape(&reply);
    }
    app.get("/v1/guests/export", Some(ADMIN))
        .await
        .assert_error(422, "invalid_request");
    let reply = app
        .send(
            app.request(reqwest::Method::POST, "/v1/guests/erase", Some(ADMIN))
                .json(&json!({"email": "ana@example.com"})),
        )
        .await;
    reply.assert_error(400, "missing_idempotency_key");
    app.finish().await;
}

#[tokio::test]
async fn retention_erases_the_guests_whose_stays_all_ended_before_the_cutoff() {
    // Arrange: Ana's stays end on day 7 and 12, Bob's on day 7 and 42.
    let app = spawn_app().await;
    app.seed_hotel(day(1), 60, 5).await;
    let ana = [
        app.hold_ok(WEB, "a1", &hold_at(HOTEL, 5, "Ana Lima", "ana@example.com"))
            .await,
        app.hold_ok(
            WEB,
            "a2",
            &hold_at(HOTEL, 10, "Ana Lima", "ana@example.com"),
        )
        .await,
    ];
    let bob = [
        app.hold_ok(WEB, "b1", &hold_at(HOTEL, 5, BOB_NAME, BOB_EMAIL))
            .await,
        app.hold_ok(WEB, "b2", &hold_at(HOTEL, 40, BOB_NAME, BOB_EMAIL))
            .await,
    ];
    let commands = app::commands::CommandService::new(
        app.db.pool.clone(),
        app::commands::WriteConfig::default(),
    );
    let caller = app::commands::Caller::Staff("retention".into());

    // Act
    let done = app::commands::erase::erase_stays_ended_before(&commands, None, &caller, day(20))
        .await
        .expect("retention");

    // Assert
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].reservations, 2);
    for id in &ana {
        let read = app.get_reservation(WEB, id).await;
        assert_eq!(read.assert_status(200)["guest"]["name"], "[erased]");
    }
    for id in &bob {
        let read = app.get_reservation(WEB, id).await;
        assert_eq!(read.assert_status(200)["guest"]["name"], BOB_NAME);
    }
    app.finish().await;
}

#[tokio::test]
async fn erasing_by_email_clears_a_reservation_row_written_before_sealing_and_counts_it() {
    // Arrange: a row as a build before sealing wrote it (its guest in the clear columns).
    let app = spawn_app().await;
    app.seed_hotel(day(1), 30, 5).await;
    let id = app
        .hold_ok(
            WEB,
            "old",
            &hold_at(HOTEL, 5, "Olga Oldrow", "olga@example.com"),
        )
        .await;
    sqlx::query(
        "UPDATE reservations SET guest = NULL, guest_name = 'Olga Oldrow',
                guest_email = 'olga@example.com'",
    )
    .execute(&app.db.pool)
    .await
    .expect("a row of before sealing");
    let read = app.get_reservation(WEB, &id).await;
    assert_eq!(read.assert_status(200)["guest"]["name"], "Olga Oldrow");

    // Act
    let erased = app
        .post_json(
            "/v1/guests/erase",
            ADMIN,
            "erase-olga",
            &json!({"email": "olga@example.com"}),
        )
        .await;

    // Assert: found by its e-mail, counted, and the row keeps nothing of her.
    let body = erased.assert_status(200);
    assert_eq!(body["reservations_held_before_sealing"], 1, "{body}");
    assert_eq!(body["reservations_recorded"], 1, "{body}");
    let (guest, name, email): (Option<Value>, Option<String>, Option<String>) =
        sqlx::query_as("SELECT guest, guest_name, guest_email FROM reservations")
            .fetch_one(&app.db.pool)
            .await
            .expect("row");
    assert_eq!((guest, name, email), (Some(json!("erased")), None, None));
    let read = app.get_reservation(WEB, &id).await;
    assert_eq!(read.assert_status(200)["guest"]["name"], "[erased]");
    app.finish().await;
}
