//! A database of its own for every test, on the machine's PostgreSQL.

use std::str::FromStr;
use std::sync::Arc;

use app::clock::Clock;
use app::commands::{CommandService, WriteConfig};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use store::write::Strategy;

/// Where the tests' databases live; a fresh one is created per test.
pub fn server_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub struct TestDb {
    pub name: String,
    pub url: String,
    pub pool: PgPool,
}

impl TestDb {
    /// Creates and migrates a database of its own for one test.
    pub async fn new() -> Self {
        Self::on(&server_url()).await
    }

    /// As [`TestDb::new`], on the PostgreSQL server at `server`.
    pub async fn on(server: &str) -> Self {
        let name = format!("rsv_test_{}", uuid::Uuid::new_v4().simple());
        let options = PgConnectOptions::from_str(server).expect("a server URL");
        let url = options.clone().database(&name).to_url_lossy().to_string();
        let pool = store::db::connect_and_migrate(&url, 20)
            .await
            .expect("create and migrate the test database");
        Self { name, url, pool }
    }

    /// A second, independent pool on the same database (as a second server would have).
    pub async fn another_pool(&self) -> PgPool {
        PgPoolOptions::new()
            .max_connections(20)
            .connect(&self.url)
            .await
            .expect("second pool")
    }

    pub fn service(&self, strategy: Strategy) -> CommandService {
        CommandService::new(self.pool.clone(), config(strategy))
    }

    pub fn service_with_clock(&self, strategy: Strategy, clock: Arc<dyn Clock>) -> CommandService {
        CommandService::with_clock(self.pool.clone(), config(strategy), clock)
    }

    /// Drops the database, and the keys its read model left in the machine's Redis
    /// (call at the end of a test that passed).
    pub async fn drop_database(self) {
        self.pool.close().await;
        if let Ok(client) = redis::Client::open("redis://127.0.0.1:6379") {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                let pattern = format!("rsv:{}:*", self.name);
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(&pattern)
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default();
                if !keys.is_empty() {
                    let _: Result<(), _> =
                        redis::cmd("UNLINK").arg(&keys).query_async(&mut conn).await;
                }
            }
        }
        let options = PgConnectOptions::from_str(&server_url()).expect("TEST_DATABASE_URL");
        if let Ok(mut admin) = options.connect().await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ))
            .execute(&mut admin)
            .await;
            let _ = admin.close().await;
        }
    }
}

pub fn config(strategy: Strategy) -> WriteConfig {
    WriteConfig {
        strategy,
        ..WriteConfig::default()
    }
}

/// The plans PostgreSQL would use for the prepared statement `name` called with
/// `arguments` (SQL text): generic (what a connection settles on after a few calls) and
/// custom, as `(plan_cache_mode, EXPLAIN output)`.
pub async fn generic_and_custom_plans(
    conn: &mut sqlx::PgConnection,
    name: &str,
    arguments: &str,
) -> Vec<(&'static str, String)> {
    let mut plans = Vec::new();
    for mode in ["force_generic_plan", "force_custom_plan"] {
        sqlx::query(&format!("SET plan_cache_mode = {mode}"))
            .execute(&mut *conn)
            .await
            .expect("plan mode");
        let lines: Vec<String> =
            sqlx::query_scalar(&format!("EXPLAIN EXECUTE {name}({arguments})"))
                .fetch_all(&mut *conn)
                .await
                .expect("explain");
        plans.push((mode, lines.join("\n")));
    }
    plans
}
