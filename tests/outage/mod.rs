//! When PostgreSQL goes away: the API says so with 503 and `Retry-After`, never a 500,
//! and the process keeps serving what it can (liveness); a connection that died while
//! idle is replaced, not handed out.

use std::str::FromStr;
use std::sync::Arc;

use app::clock::SystemClock;
use reservations::startup::{Application, Settings};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};

use crate::support::*;

#[tokio::test]
async fn a_database_outage_is_503_with_retry_after() {
    // Arrange: a running app on its own database.
    let db = TestDb::new().await;
    let mut settings = Settings::for_database(&db.url);
    settings.listen_addr = "127.0.0.1:0".into();
    settings.api_tokens = Some("web-token-1:channel:web".into());
    let app = Application::build_with_clock(settings, Arc::new(SystemClock))
        .await
        .expect("build");
    let base = format!("http://127.0.0.1:{}", app.port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let ready = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);

    // Act: the database disappears under the running server.
    db.pool.close().await;
    let admin = PgConnectOptions::from_str(&server_url()).expect("url");
    let mut admin = admin.connect().await.expect("admin connection");
    sqlx::query(&format!("DROP DATABASE \"{}\" WITH (FORCE)", db.name))
        .execute(&mut admin)
        .await
        .expect("drop");
    admin.close().await.expect("close");

    let hold = client
        .post(format!("{base}/v1/reservations"))
        .bearer_auth("web-token-1")
        .header("Idempotency-Key", "k1")
        .json(&serde_json::json!({
            "hotel_id": 812, "room_type_id": 3,
            "start_date": day(10), "end_date": day(12),
            "rooms": 1, "guest": {"name": "Ana", "email": "ana@example.com"}
        }))
        .send()
        .await
        .expect("hold");
    let ready = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    let health = client
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect("healthz");

    // Assert
    for (what, response) in [("hold", hold), ("readyz", ready)] {
        assert_eq!(response.status(), 503, "{what}");
        assert!(
            response.headers().contains_key("retry-after"),
            "{what}: Retry-After"
        );
        let body: serde_json::Value = response.json().await.expect("json body");
        assert_eq!(body["error"], "unavailable", "{what}: {body}");
        assert!(body["message"].is_string());
    }
    assert_eq!(health.status(), 200, "the process itself is still up");
    let _ = stop.send(());
    server.await.expect("server task").expect("clean shutdown");
}

#[tokio::test]
async fn a_connection_that_died_while_idle_is_replaced_not_handed_out() {
    // Arrange: the service's pool with one connection, which then sits idle while its
    // backend is terminated (as by a database restart or an idle-session timeout).
    let db = TestDb::new().await;
    let pool = store::db::write_pool(&db.url, 1).await.expect("pool");
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .expect("pid");
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(backend)
        .fetch_one(&db.pool)
        .await
        .expect("terminate");
    assert!(terminated);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    // Act: the next statement through the pool.
    let answer: Result<i32, _> = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await;

    // Assert: it ran, on a new connection.
    let new_backend = answer.expect("the dead connection is checked and replaced");
    assert_ne!(new_backend, backend);
    pool.close().await;
    db.drop_database().await;
}

/// Reads `path` `n` times in a row as the web channel; the sources that answered.
async fn sources(server: &ServerProcess, path: &str, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..n {
        let reply = server
            .call(reqwest::Method::GET, path, WEB, None, None)
            .await;
        seen.push(
            reply.assert_status(200)["source"]
                .as_str()
                .unwrap_or("?")
                .to_owned(),
        );
    }
    seen
}

fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn with_redis_down_reads_go_straight_to_postgresql_and_return_to_the_model_when_it_is_back() {
    // Arrange: a server whose Redis port has nothing listening on it.
    let port = free_port();
    let db = TestDb::new().await;
    let server = ServerProcess::start(
        &db,
        &[
            ("REDIS_URL", format!("redis://127.0.0.1:{port}")),
            ("PROJECTION_GATHER_MS", "0".to_owned()),
        ],
    )
    .await;
    let first = day(10);
    server.seed_hotel(first, 5, 5).await;
    let path = format!(
        "/v1/hotels/{HOTEL}/availability?start_date={first}&end_date={}",
        plus_days(first, 2)
    );

    // Act: forty reads while Redis is down.
    let down = sources(&server, &path, 40).await;
    let metrics = server
        .call(reqwest::Method::GET, "/metrics", WEB, None, None)
        .await
        .text;

    // Assert: every read answered from PostgreSQL, and only a few of them (the first,
    // and one a second after it) waited on Redis; the rest skipped it.
    assert!(down.iter().all(|s| s == "database"), "{down:?}");
    let tried = counter(&metrics, "availability_cache_errors_total");
    let skipped = counter(&metrics, "availability_cache_skipped_total");
    assert!(
        (1.0..=5.0).contains(&tried),
        "reads that waited on Redis: {tried}"
    );
    assert_eq!(tried + skipped, 40.0, "{metrics}");

    // Act: Redis comes up on that port (empty: the model is rebuilt into it).
    let mut redis = PrivateRedis::start_on(port);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut back = Vec::new();
    while tokio::time::Instant::now() < deadline {
        back = sources(&server, &path, 1).await;
        if back == ["cache"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    redis.stop();

    // Assert: the reads found the model again.
    assert_eq!(back, ["cache"], "reads never returned to the model");
    drop(server);
    db.drop_database().await;
}
