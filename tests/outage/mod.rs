//! When PostgreSQL goes away: the API says so with 503 and `Retry-After`, never a 500,
//! and the process keeps serving what it can (liveness); a connection that died while
//! idle is replaced, not handed out.

use std::str::FromStr;
use std::sync::Arc;

use reservations::clock::SystemClock;
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
    let pool = reservations::db::write_pool(&db.url, 1)
        .await
        .expect("pool");
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
