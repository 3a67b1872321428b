//! Background work that `reservations serve` runs beside the API: the projection
//! runners. Each runner competes for its projection's leadership lock, so running
//! several server processes is safe: one leads, the others stand by.

use projections::availability::{AvailabilityProjection, Keys};
use projections::RunnerConfig;
use redis::aio::ConnectionManager;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Starts the Redis availability projection.
pub fn spawn_availability_runner(
    pool: PgPool,
    redis: ConnectionManager,
    keys: Keys,
    config: RunnerConfig,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(projections::run(
        pool,
        AvailabilityProjection::new(redis, keys),
        config,
        shutdown,
    ))
}
