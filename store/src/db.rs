//! Connecting to PostgreSQL: create the database if it is missing, then run the
//! migrations, so `reservations serve` works on a machine with nothing but a server.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Creates the database named in `url` when it does not exist yet (connecting to the
/// server's `postgres` database to do so).
pub async fn create_database_if_missing(url: &str) -> anyhow::Result<()> {
    let options = PgConnectOptions::from_str(url)?;
    let name = options
        .get_database()
        .map(str::to_owned)
        .unwrap_or_else(|| options.get_username().to_owned());
    let mut admin = options.clone().database("postgres").connect().await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut admin)
            .await?;
    if !exists {
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        if let Err(e) = sqlx::query(&format!("CREATE DATABASE {quoted}"))
            .execute(&mut admin)
            .await
        {
            // Another process may have created it in the meantime.
            let raced = e
                .as_database_error()
                .and_then(|d| d.code())
                .is_some_and(|c| c == "42P04" || c == "23505");
            if !raced {
                return Err(e.into());
            }
        }
    }
    admin.close().await?;
    Ok(())
}

/// A connection idle for longer than this is checked (a round trip) before it is used.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The service's pool settings. By default sqlx pings every connection it hands out:
/// a round trip before every transaction, for the server and for PostgreSQL (see
/// docs/benchmarks.md, `ping-per-transaction`). A connection that was in use less than a second ago
/// is known to be alive; one idle for longer (perhaps across a database restart) is
/// still checked, and closed if it does not answer.
fn pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < CHECK_IDLE_AFTER {
                    return Ok(true);
                }
                Ok(conn.ping().await.is_ok())
            })
        })
}

/// Connects a pool, creating and migrating the database first.
pub async fn connect_and_migrate(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    create_database_if_missing(url).await?;
    let pool = pool_options(max_connections)
        .connect_with(PgConnectOptions::from_str(url)?)
        .await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}

/// The session settings of the write path's connections (see [`write_pool`]).
pub const WRITE_PATH_SETTINGS: [(&str, &str); 5] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
    ("enable_hashjoin", "off"),
    ("enable_mergejoin", "off"),
    ("jit", "off"),
];

/// A pool for the write path (commands, payments, workers), on a migrated database.
///
/// Every statement of the write path is a look-up or a change by key, over arrays
/// (`unnest`), so its connections are set for that and nothing else:
/// - generic plans, made once per connection: left to its default, PostgreSQL keeps
///   planning these array statements again on every call (it cannot cost the arrays),
///   and planning was half of a booking (see docs/benchmarks.md, `replanning`);
/// - no sequential scans, hash or merge joins: a generic plan is made with the
///   statistics of the moment, and on tables that grow from empty (a new deployment, a
///   benchmark) those said "tiny", so plans that scanned the idempotency records or the
///   allocations stayed in use as the tables grew, and a hold slowed as they did (see
///   docs/benchmarks.md, `lagging-statistics`). Indexes and nested loops are right for every statement here
///   whatever the statistics say;
/// - no JIT: a key look-up never pays back compiling it, and a plan that has to scan
///   anyway carries the disabled scan's huge cost, which made PostgreSQL compile (with
///   inlining and optimization) on every execution, 60-400 ms of CPU each time (see
///   docs/scaling.md, `generic-plan-jit`).
///
/// Readers, projections and reports use the default pool and settings.
pub async fn write_pool(url: &str, max_connections: u32) -> anyhow::Result<PgPool> {
    let options = PgConnectOptions::from_str(url)?.options(WRITE_PATH_SETTINGS);
    Ok(pool_options(max_connections).connect_with(options).await?)
}
