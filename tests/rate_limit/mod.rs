//! The per-guest hold limit (default: 3 holds per guest e-mail per channel per 15
//! minutes): the next hold is 429 with `Retry-After` and changes nothing; other guests
//! and other channels are not affected; only holds that succeed count, a replay counts
//! once; and when Redis is unreachable or silent, holds go ahead (fail open).

use std::time::{Duration as StdDuration, Instant};

use chrono::Duration;
use reservations::startup::Settings;
use serde_json::{json, Value};

use crate::support::*;

/// The default limit and window, which these tests rely on.
const LIMIT: usize = 3;
const WINDOW_SECONDS: i64 = 900;

/// An app with the per-guest hold limit as it ships (the harness raises it for the other
/// tests).
async fn spawn_app_with_the_default_hold_limit() -> TestApp {
    spawn_app_with(|settings| {
        let defaults = Settings::for_database(&settings.database_url);
        settings.hold_limit_per_guest = defaults.hold_limit_per_guest;
        settings.hold_limit_window_seconds = defaults.hold_limit_window_seconds;
    })
    .await
}

/// A one-night hold of one king room for the guest with `email`, `night` days ahead.
fn hold_for(email: &str, night: u64) -> Value {
    json!({
        "hotel_id": HOTEL,
        "room_type_id": KING,
        "start_date": day(night),
        "end_date": day(night + 1),
        "rooms": 1,
        "guest": {"name": "Ana Lima", "email": email},
    })
}

const ANA: &str = "ana@example.com";
const BOB: &str = "bob@example.com";

/// Reservations in the database for a guest on a channel (the row holds the guest
/// sealed, under their id).
async fn reservations_of(app: &TestApp, email: &str, channel: &str) -> i64 {
    let guest = store::privacy::Privacy::postgres(app.db.pool.clone())
        .guest_id_in(&app.db.pool, email)
        .await
        .expect("guest id");
    sqlx::query_scalar(
        "SELECT count(*) FROM reservations
          WHERE guest -> 'sealed' ->> 'guest' = $1 AND channel = $2",
    )
    .bind(guest.as_str())
    .bind(channel)
    .fetch_one(&app.db.pool)
    .await
    .expect("count reservations")
}

/// The `Retry-After` header as whole seconds.
fn retry_after(reply: &Reply) -> u64 {
    reply
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no whole-seconds Retry-After on {}", reply.text))
}

/// A port on which nothing listens.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

#[tokio::test]
async fn the_defaults_are_three_holds_per_guest_per_channel_in_fifteen_minutes() {
    let settings = Settings::for_database("postgres://localhost/x");

    assert_eq!(settings.hold_limit_per_guest as usize, LIMIT);
    assert_eq!(
        i64::from(settings.hold_limit_window_seconds),
        WINDOW_SECONDS
    );
}

#[tokio::test]
async fn the_fourth_hold_by_a_guest_on_a_channel_within_the_window_is_429_and_changes_nothing() {
    // Arrange: three holds, 100 s apart.
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    for n in 0..LIMIT as u64 {
        app.hold_ok(WEB, &format!("ana-{n}"), &hold_for(ANA, 10 + n))
            .await;
        app.clock.advance(Duration::seconds(100));
    }
    let before = app.snapshot().await;

    // Act
    let fourth = app.hold(WEB, "ana-3", &hold_for(ANA, 14)).await;

    // Assert: the oldest hold leaves the window 900 - 300 s from now.
    let body = fourth.assert_error(429, "rate_limited");
    assert_eq!(retry_after(&fourth), 600);
    assert_eq!(body["retry_after_seconds"], 600, "{}", fourth.text);
    assert_eq!(reservations_of(&app, ANA, "web").await, LIMIT as i64);
    assert_eq!(
        app.snapshot().await,
        before,
        "a refused hold changes nothing"
    );
    app.finish().await;
}

#[tokio::test]
async fn holds_by_another_guest_or_on_another_channel_are_not_counted_against_the_guest() {
    // Arrange: Ana has used up her holds on the web channel.
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    for n in 0..LIMIT as u64 {
        app.hold_ok(WEB, &format!("ana-{n}"), &hold_for(ANA, 10 + n))
            .await;
    }

    // Act
    let bob_on_web = app.hold(WEB, "bob-0", &hold_for(BOB, 10)).await;
    let ana_on_mobile = app.hold(MOBILE, "ana-m-0", &hold_for(ANA, 10)).await;
    let ana_on_web = app.hold(WEB, "ana-3", &hold_for(ANA, 14)).await;

    // Assert
    bob_on_web.assert_status(201);
    ana_on_mobile.assert_status(201);
    ana_on_web.assert_error(429, "rate_limited");
    assert_eq!(reservations_of(&app, BOB, "web").await, 1);
    assert_eq!(reservations_of(&app, ANA, "mobile").await, 1);
    assert_eq!(reservations_of(&app, ANA, "web").await, LIMIT as i64);
    app.finish().await;
}

#[tokio::test]
async fn once_the_window_has_passed_the_guest_may_hold_again() {
    // Arrange: Ana is limited.
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    for n in 0..LIMIT as u64 {
        app.hold_ok(WEB, &format!("ana-{n}"), &hold_for(ANA, 10 + n))
            .await;
    }
    let limited = app.hold(WEB, "ana-3", &hold_for(ANA, 14)).await;
    limited.assert_error(429, "rate_limited");
    let wait = retry_after(&limited);
    assert_eq!(wait, WINDOW_SECONDS as u64);

    // Act: one second short of the window, then the whole window.
    app.clock.advance(Duration::seconds(wait as i64 - 1));
    let too_soon = app.hold(WEB, "ana-4", &hold_for(ANA, 14)).await;
    app.clock.advance(Duration::seconds(1));
    let after_the_window = app.hold(WEB, "ana-5", &hold_for(ANA, 14)).await;

    // Assert
    too_soon.assert_error(429, "rate_limited");
    assert_eq!(retry_after(&too_soon), 1);
    after_the_window.assert_status(201);
    assert_eq!(reservations_of(&app, ANA, "web").await, LIMIT as i64 + 1);
    app.finish().await;
}

#[tokio::test]
async fn a_replayed_hold_with_the_same_idempotency_key_is_not_counted_again() {
    // Arrange: two holds, the second replayed twice.
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    let first = app.hold(WEB, "ana-0", &hold_for(ANA, 10)).await;
    let second = app.hold(WEB, "ana-1", &hold_for(ANA, 11)).await;
    let replays = [
        app.hold(WEB, "ana-1", &hold_for(ANA, 11)).await,
        app.hold(WEB, "ana-1", &hold_for(ANA, 11)).await,
    ];

    // Act: the third hold still fits; then a replay at the limit, then a fourth hold.
    let third = app.hold(WEB, "ana-2", &hold_for(ANA, 12)).await;
    let replay_at_the_limit = app.hold(WEB, "ana-0", &hold_for(ANA, 10)).await;
    let fourth = app.hold(WEB, "ana-3", &hold_for(ANA, 13)).await;

    // Assert: replays answer the stored 201, whether or not the guest is at the limit.
    first.assert_status(201);
    second.assert_status(201);
    for replay in &replays {
        assert_eq!((replay.status, &replay.text), (second.status, &second.text));
    }
    third.assert_status(201);
    assert_eq!(
        (replay_at_the_limit.status, &replay_at_the_limit.text),
        (first.status, &first.text)
    );
    fourth.assert_error(429, "rate_limited");
    assert_eq!(reservations_of(&app, ANA, "web").await, 3);
    app.finish().await;
}

#[tokio::test]
async fn concurrent_duplicates_of_a_hold_count_once() {
    // Arrange
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    let body = hold_for(ANA, 10);

    // Act: eight copies of one request at once (one holds, the others are answered
    // `request_in_flight` or replayed), then the rest of the allowance.
    let duplicates = futures::future::join_all((0..8).map(|_| app.hold(WEB, "ana-0", &body))).await;
    let second = app.hold(WEB, "ana-1", &hold_for(ANA, 11)).await;
    let third = app.hold(WEB, "ana-2", &hold_for(ANA, 12)).await;
    let fourth = app.hold(WEB, "ana-3", &hold_for(ANA, 13)).await;

    // Assert: the duplicates used one hold of the allowance, not none and not more.
    for reply in &duplicates {
        match (reply.status.as_u16(), reply.json["error"].as_str()) {
            (201, _) | (409, Some("request_in_flight")) => {}
            _ => panic!("unexpected {} {}", reply.status, reply.text),
        }
    }
    second.assert_status(201);
    third.assert_status(201);
    fourth.assert_error(429, "rate_limited");
    assert_eq!(reservations_of(&app, ANA, "web").await, 3);
    app.finish().await;
}

#[tokio::test]
async fn refused_holds_do_not_use_up_the_allowance() {
    // Arrange: one room a night, and Bob has the first night.
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 1).await;
    app.hold_ok(WEB, "bob-0", &hold_for(BOB, 10)).await;
    let mut wrong_price = hold_for(ANA, 11);
    wrong_price["expected_total_cents"] = json!(RATE - 1);
    let mut unknown_room_type = hold_for(ANA, 11);
    unknown_room_type["room_type_id"] = json!(KING + 100);

    // Act: three refusals, then the allowance.
    let refused = [
        app.hold(WEB, "ana-sold-out-0", &hold_for(ANA, 10)).await,
        app.hold(WEB, "ana-sold-out-1", &hold_for(ANA, 10)).await,
        app.hold(WEB, "ana-price", &wrong_price).await,
        app.hold(WEB, "ana-room-type", &unknown_room_type).await,
    ];
    let mut held = Vec::new();
    for n in 0..LIMIT as u64 {
        held.push(
            app.hold(WEB, &format!("ana-{n}"), &hold_for(ANA, 11 + n))
                .await,
        );
    }
    let over = app.hold(WEB, "ana-3", &hold_for(ANA, 14)).await;

    // Assert
    refused[0].assert_error(409, "sold_out");
    refused[1].assert_error(409, "sold_out");
    refused[2].assert_error(409, "price_changed");
    refused[3].assert_error(422, "unknown_room_type");
    for reply in &held {
        reply.assert_status(201);
    }
    over.assert_error(429, "rate_limited");
    assert_eq!(reservations_of(&app, ANA, "web").await, LIMIT as i64);
    app.finish().await;
}

#[tokio::test]
async fn the_case_of_the_guest_email_does_not_matter() {
    // Arrange
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    let spellings = ["Ana@Example.com", "ANA@EXAMPLE.COM", "ana@example.com"];
    for (n, email) in spellings.iter().enumerate() {
        app.hold_ok(WEB, &format!("ana-{n}"), &hold_for(email, 10 + n as u64))
            .await;
    }

    // Act
    let fourth = app
        .hold(WEB, "ana-3", &hold_for("aNa@eXample.COM", 14))
        .await;

    // Assert: one count, in one key under the deployment's prefix, naming no e-mail.
    fourth.assert_error(429, "rate_limited");
    let client = redis::Client::open("redis://127.0.0.1:6379").expect("redis url");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("rsv:{}:holds:*", app.db.name))
        .query_async(&mut redis)
        .await
        .expect("keys");
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].starts_with(&format!("rsv:{}:holds:web:", app.db.name)));
    assert!(!keys[0].to_lowercase().contains("example"), "{}", keys[0]);
    let counted: i64 = redis::cmd("ZCARD")
        .arg(&keys[0])
        .query_async(&mut redis)
        .await
        .expect("zcard");
    assert_eq!(counted, LIMIT as i64);
    app.finish().await;
}

#[tokio::test]
async fn an_invalid_hold_is_answered_as_invalid_even_when_the_guest_is_at_the_limit() {
    // Arrange
    let app = spawn_app_with_the_default_hold_limit().await;
    app.seed_hotel(day(10), 10, 5).await;
    for n in 0..LIMIT as u64 {
        app.hold_ok(WEB, &format!("ana-{n}"), &hold_for(ANA, 10 + n))
            .await;
    }
    let before = app.snapshot().await;
    let mut backwards = hold_for(ANA, 14);
    backwards["end_date"] = json!(day(13));
    let mut too_many_rooms = hold_for(ANA, 14);
    too_many_rooms["rooms"] = json!(11);

    // Act
    let replies = [
        app.hold(WEB, "ana-backwards", &backwards).await,
        app.hold(WEB, "ana-rooms", &too_many_rooms).await,
    ];

    // Assert
    for reply in &replies {
        reply.assert_error(422, "invalid_request");
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn with_redis_unreachable_holds_still_succeed() {
    // Arrange: REDIS_URL points at a port nobody listens on.
    let port = closed_port();
    let app = spawn_app_with(|settings| {
        let defaults = Settings::for_database(&settings.database_url);
        settings.hold_limit_per_guest = defaults.hold_limit_per_guest;
        settings.redis_url = format!("redis://127.0.0.1:{port}");
    })
    .await;
    app.seed_hotel(day(10), 10, 5).await;

    // Act: more holds than the limit allows.
    let mut replies = Vec::new();
    for n in 0..=LIMIT as u64 + 1 {
        replies.push(
            app.hold(WEB, &format!("ana-{n}"), &hold_for(ANA, 10 + n))
                .await,
        );
    }
    let metrics = app.get("/metrics", None).await;

    // Assert: the limit fails open, and says so in the metrics.
    for reply in &replies {
        reply.assert_status(201);
    }
    assert_eq!(reservations_of(&app, ANA, "web").await, LIMIT as i64 + 2);
    assert!(
        metrics.text.contains("hold_rate_limit_unavailable_total"),
        "{}",
        metrics.text
    );
    app.finish().await;
}

#[tokio::test]
async fn with_redis_not_answering_holds_go_ahead_after_a_short_timeout() {
    // Arrange: a "Redis" that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let silent = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let app = spawn_app_with(|settings| {
        let defaults = Settings::for_database(&settings.database_url);
        settings.hold_limit_per_guest = defaults.hold_limit_per_guest;
        settings.redis_url = format!("redis://127.0.0.1:{port}");
    })
    .await;
    app.seed_hotel(day(10), 10, 5).await;

    // Act
    let started = Instant::now();
    let mut replies = Vec::new();
    for n in 0..=LIMIT as u64 {
        replies.push(
            app.hold(WEB, &format!("ana-{n}"), &hold_for(ANA, 10 + n))
                .await,
        );
    }
    let took = started.elapsed();

    // Assert: every hold went ahead, none waited long for Redis.
    for reply in &replies {
        reply.assert_status(201);
    }
    assert!(
        took < StdDuration::from_secs(2 * (LIMIT as u64 + 1)),
        "{} holds took {took:?}",
        LIMIT + 1
    );
    assert_eq!(reservations_of(&app, ANA, "web").await, LIMIT as i64 + 1);
    silent.abort();
    app.finish().await;
}
