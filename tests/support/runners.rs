//! The analytics projections' runners for tests that read the read side: started as
//! `serve` starts them (with small batches and fast polling), stopped, and waited on
//! until they stand on the last event of the log.

use std::time::Duration as StdDuration;

use projections::RunnerConfig;
use reservations::workers;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Small batches, fast polling: many batch boundaries, quick catch-up.
pub fn fast_runners() -> RunnerConfig {
    RunnerConfig {
        batch_size: 3,
        poll_interval: StdDuration::from_millis(20),
        lag_interval: StdDuration::from_secs(1),
        max_backoff: StdDuration::from_millis(200),
        gather: StdDuration::ZERO,
    }
}

/// The analytics runners, as `serve` would run them, until stopped.
pub struct Runners {
    stop: watch::Sender<bool>,
    handles: Vec<JoinHandle<()>>,
}

impl Runners {
    pub fn start(pool: &PgPool) -> Self {
        let (stop, shutdown) = watch::channel(false);
        let handles = workers::spawn_analytics_runners(
            pool.clone(),
            fast_runners(),
            &projections::Tail::default(),
            shutdown,
        );
        Self { stop, handles }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for handle in self.handles {
            tokio::time::timeout(StdDuration::from_secs(10), handle)
                .await
                .expect("runner stops")
                .expect("runner task");
        }
    }
}

/// Waits until every event of the log is visible to log readers. Transaction ids are
/// cluster-wide, so a transaction still open in another test's database holds back
/// `pg_snapshot_xmin`, and with it what a reader here may read.
pub async fn wait_visible(pool: &PgPool) {
    let deadline = tokio::time::Instant::now() + StdDuration::from_secs(30);
    loop {
        let hidden: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM events
              WHERE transaction_id >= pg_snapshot_xmin(pg_current_snapshot())",
        )
        .fetch_one(pool)
        .await
        .expect("visibility");
        if hidden == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{hidden} events stayed invisible"
        );
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
}

/// Waits until both analytics checkpoints stand on the last event of the log.
pub async fn wait_caught_up(pool: &PgPool) {
    wait_checkpoints(pool, &["reservations_view", "occupancy"]).await;
}

/// Waits until the checkpoints of `names` all stand on the last event of the log.
pub async fn wait_checkpoints(pool: &PgPool, names: &[&str]) {
    let deadline = tokio::time::Instant::now() + StdDuration::from_secs(60);
    loop {
        let last: Option<(i64, i64)> = sqlx::query_as(
            "SELECT transaction_id::text::bigint, global_position FROM events
              ORDER BY transaction_id DESC, global_position DESC LIMIT 1",
        )
        .fetch_optional(pool)
        .await
        .expect("last event");
        let checkpoints: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT transaction_id::text::bigint, global_position FROM projection_checkpoints
              WHERE name = ANY($1)",
        )
        .bind(names)
        .fetch_all(pool)
        .await
        .expect("checkpoints");
        if let Some(last) = last {
            if checkpoints.len() == names.len() && checkpoints.iter().all(|c| *c == last) {
                return;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{names:?} did not catch up: log ends at {last:?}, checkpoints {checkpoints:?}"
        );
        tokio::time::sleep(StdDuration::from_millis(20)).await;
    }
}
