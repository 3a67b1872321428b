//! Running a projection: follow the log from its checkpoint, in batches, for ever.
//!
//! - **One active runner per projection**, however many server processes run: a runner
//!   serves only while it holds a session advisory lock named after its projection;
//!   the others wait as standbys and take over if the leader's connection dies.
//! - **Checkpoint** `(transaction_id, global_position)` and **generation** live in
//!   `projection_checkpoints`; each batch is applied and its checkpoint saved in one
//!   PostgreSQL transaction, which locks the checkpoint row. A projection kept in
//!   PostgreSQL writes through that transaction and so applies each event exactly once;
//!   one kept elsewhere (Redis) makes its writes idempotent per event.
//! - **Wake-ups**: LISTEN on `events` (the writing processes NOTIFY after their
//!   commits), with polling as the fallback, so a lost notification costs latency,
//!   never an event. At the head of the log a runner reads at most once per
//!   [`RunnerConfig::gather`], so a steady load is applied in batches, not event by event.
//! - **Shared reads**: the runners of a process can read through one [`Tail`], so the
//!   log's newest events are read and decoded once for all of them.
//! - **Errors** are retried with exponential backoff, counted in metrics, and never
//!   skipped: the checkpoint only moves past a batch that was applied.
//! - **Rebuild**: fill the next generation from position zero while the current one
//!   keeps serving, then switch both the checkpoint and the generation in one commit.

use std::collections::VecDeque;
use std::future::Future;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use sha2::{Digest, Sha256};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgListener;
use sqlx::{PgConnection, PgPool, Postgres, Row};
use tokio::sync::watch;

use crate::log::{self, Checkpoint, StoredEvent};
use crate::tail::Tail;

/// A read model that follows the event log.
pub trait Projection: Send + 'static {
    /// Stable name: the checkpoint row and the leadership lock.
    fn name(&self) -> &'static str;

    /// Applies a batch of events (commit order) to `generation`. `tx` is the transaction
    /// that will save the checkpoint; an error rolls it back and the batch is retried.
    fn apply(
        &mut self,
        tx: &mut PgConnection,
        generation: i32,
        batch: &[StoredEvent],
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Removes everything `generation` holds (before filling it from zero, or once it
    /// is no longer served).
    fn clear(
        &mut self,
        conn: &mut PgConnection,
        generation: i32,
    ) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Whether the storage of `generation` still holds what the checkpoint says was
    /// applied. `false` (say, Redis restarted empty) makes the runner clear it and start
    /// again from position zero.
    /// `conn` is the runner's own connection to the primary.
    fn storage_intact(
        &mut self,
        _conn: &mut PgConnection,
        _generation: i32,
        _checkpoint: Checkpoint,
    ) -> impl Future<Output = anyhow::Result<bool>> + Send {
        async { Ok(true) }
    }

    /// Everything visible has been applied, up to `checkpoint`; every transaction that
    /// committed before `as_of` is reflected.
    fn caught_up(
        &mut self,
        _generation: i32,
        _checkpoint: Checkpoint,
        _as_of: DateTime<Utc>,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    /// `generation` is now the one served (after a rebuild switched to it).
    fn switched(&mut self, _generation: i32) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RunnerConfig {
    pub batch_size: i64,
    /// How long to wait for a notification before polling anyway.
    pub poll_interval: Duration,
    /// How often to measure the lag.
    pub lag_interval: Duration,
    pub max_backoff: Duration,
    /// How long commits are let land before a runner at the head of the log reads
    /// again: after a notification wakes it from idle, and between two reads while it
    /// keeps up with a load (zero: read at once). Bounds a caught-up runner to one
    /// batch per `gather`, so its per-batch statements are shared by more events.
    pub gather: Duration,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            batch_size: 500,
            poll_interval: Duration::from_millis(500),
            lag_interval: Duration::from_secs(2),
            // A dependency that comes back is noticed within seconds.
            max_backoff: Duration::from_secs(5),
            // Under load a commit lands every few milliseconds, and a runner woken by
            // each one spends more on its own statements (read, checkpoint, commit)
            // than on the events: a few milliseconds of lag buy batches (see
            // docs/benchmarks.md, `notify-per-booking` and `handful-batches`).
            gather: Duration::from_millis(20),
        }
    }
}

/// The advisory lock that makes a runner the one active runner of `name`.
pub(crate) fn leader_lock_id(name: &str) -> i64 {
    let digest = Sha256::digest(format!("projection:{name}").as_bytes());
    let mut bytes = [0_u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

/// The projection's checkpoint row (created at position zero if missing).
pub async fn load_checkpoint(
    conn: &mut PgConnection,
    name: &str,
) -> Result<(i32, Checkpoint), sqlx::Error> {
    sqlx::query("INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT DO NOTHING")
        .bind(name)
        .execute(&mut *conn)
        .await?;
    let row = sqlx::query(
        "SELECT generation, transaction_id::text::bigint AS txid, global_position
           FROM projection_checkpoints WHERE name = $1",
    )
    .bind(name)
    .fetch_one(&mut *conn)
    .await?;
    Ok((
        row.try_get("generation")?,
        Checkpoint {
            transaction_id: row.try_get("txid")?,
            position: row.try_get("global_position")?,
        },
    ))
}

/// The generation a projection serves from (1 when it has never run).
pub async fn served_generation(pool: &PgPool, name: &str) -> Result<i32, sqlx::Error> {
    let generation: Option<i32> =
        sqlx::query_scalar("SELECT generation FROM projection_checkpoints WHERE name = $1")
            .bind(name)
            .fetch_optional(pool)
            .await?;
    Ok(generation.unwrap_or(1))
}

async fn save_checkpoint(
    conn: &mut PgConnection,
    name: &str,
    generation: i32,
    checkpoint: Checkpoint,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE projection_checkpoints
            SET generation = $2, transaction_id = $3::text::xid8, global_position = $4,
                updated_at = now()
          WHERE name = $1",
    )
    .bind(name)
    .bind(generation)
    .bind(checkpoint.transaction_id.to_string())
    .bind(checkpoint.position)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Applies one batch and saves its checkpoint, in one transaction. Returns `false` if
/// the served generation changed under us (a rebuild switched): nothing was applied.
pub(crate) async fn apply_batch<P: Projection>(
    pool: &PgPool,
    projection: &mut P,
    generation: i32,
    batch: &[StoredEvent],
) -> anyhow::Result<bool> {
    let Some(last) = batch.last() else {
        return Ok(true);
    };
    let mut tx = pool.begin().await?;
    let applied: anyhow::Result<bool> = async {
        // Asynchronous commit for projection batches (set_config(..., true) is SET LOCAL,
        // in the same round trip as the checkpoint lock). A projection is derived and
        // checkpointed in the same transaction as its writes: a crash that loses the
        // last batches rolls their checkpoint back with them, and they are applied again
        // (idempotently). Meanwhile the batches do not queue for the WAL flush that
        // every booking's commit waits for.
        let current: i32 = sqlx::query_scalar(
            "SELECT generation FROM projection_checkpoints, set_config('synchronous_commit', 'off', true)
              WHERE name = $1 FOR UPDATE OF projection_checkpoints",
        )
        .bind(projection.name())
        .fetch_one(&mut *tx)
        .await?;
        if current != generation {
            return Ok(false);
        }
        projection.apply(&mut tx, generation, batch).await?;
        save_checkpoint(&mut tx, projection.name(), generation, last.checkpoint()).await?;
        Ok(true)
    }
    .await;
    match applied {
        Ok(true) => {
            tx.commit().await?;
            Ok(true)
        }
        other => {
            // Explicitly: a dropped transaction would keep the checkpoint row locked
            // until its connection is next used.
            tx.rollback().await?;
            other
        }
    }
}

/// Runs `projection` until `shutdown` turns true, as leader or standby. A batch under
/// way when shutdown is asked for is finished first.
pub async fn run<P: Projection>(
    pool: PgPool,
    projection: P,
    config: RunnerConfig,
    shutdown: watch::Receiver<bool>,
) {
    run_sharing(pool, projection, config, Tail::default(), shutdown).await;
}

/// As [`run`], reading the log through `tail`, shared with the process's other runners
/// so that each event is read from the database once rather than once per projection.
pub async fn run_sharing<P: Projection>(
    pool: PgPool,
    mut projection: P,
    config: RunnerConfig,
    tail: Tail,
    mut shutdown: watch::Receiver<bool>,
) {
    let name = projection.name();
    let mut backoff = Duration::from_millis(100);
    while !*shutdown.borrow() {
        match lead(&pool, &mut projection, config, &tail, &mut shutdown).await {
            Ok(()) => backoff = Duration::from_millis(100),
            Err(e) => {
                metrics::counter!("projection_errors_total", "projection" => name).increment(1);
                metrics::gauge!("projection_failing", "projection" => name).set(1.0);
                // The whole chain: the context alone ("creating JetStream stream X")
                // does not say why (the server's own reason is the cause).
                let error = format!("{e:#}");
                tracing::warn!(projection = name, %error, ?backoff, "projection runner failed; retrying");
                record_failure(&pool, name, &error).await;
                sleep_or_shutdown(backoff, &mut shutdown).await;
                backoff = (backoff * 2).min(config.max_backoff);
            }
        }
    }
    tracing::info!(projection = name, "projection runner stopped");
}

/// Records why `name` failed, for every server's health answers (best effort: a
/// database that is down is itself the reason, and says so elsewhere).
async fn record_failure(pool: &PgPool, name: &str, error: &str) {
    // At most a few kilobytes of it.
    let error: String = error.chars().take(2_000).collect();
    let recorded = sqlx::query(
        "UPDATE projection_checkpoints
            SET last_error = $2, failing_since = coalesce(failing_since, now())
          WHERE name = $1",
    )
    .bind(name)
    .bind(&error)
    .execute(pool)
    .await;
    if let Err(e) = recorded {
        tracing::debug!(projection = name, error = %e, "could not record the failure");
    }
}

/// A projection whose runner is failing, as recorded by its last leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    pub name: String,
    pub error: String,
    pub since: chrono::DateTime<chrono::Utc>,
}

/// Every projection whose runner is failing now, by name.
pub async fn failing(pool: &PgPool) -> Result<Vec<Failing>, sqlx::Error> {
    let rows: Vec<(String, String, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT name, last_error, failing_since FROM projection_checkpoints
          WHERE last_error IS NOT NULL ORDER BY name",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, error, since)| Failing { name, error, since })
        .collect())
}

async fn sleep_or_shutdown(duration: Duration, shutdown: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(duration) => {}
        _ = shutdown.changed() => {}
    }
}

/// One leadership term: take the lock (or wait as standby), then follow the log.
async fn lead<P: Projection>(
    pool: &PgPool,
    projection: &mut P,
    config: RunnerConfig,
    tail: &Tail,
    shutdown: &mut watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let name = projection.name();
    let mut leader: PoolConnection<Postgres> = pool.acquire().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(leader_lock_id(name))
        .fetch_one(&mut *leader)
        .await?;
    if !locked {
        metrics::gauge!("projection_leader", "projection" => name).set(0.0);
        sleep_or_shutdown(config.poll_interval * 4, shutdown).await;
        return Ok(());
    }
    metrics::gauge!("projection_leader", "projection" => name).set(1.0);
    tracing::info!(projection = name, "projection runner leads");
    let result = follow(pool, projection, config, tail, shutdown, &mut leader).await;
    metrics::gauge!("projection_leader", "projection" => name).set(0.0);
    // Release leadership explicitly; if the connection is broken, closing it does.
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(leader_lock_id(name))
        .execute(&mut *leader)
        .await;
    if unlocked.is_err() {
        let _ = leader.detach();
    }
    result
}

async fn follow<P: Projection>(
    pool: &PgPool,
    projection: &mut P,
    config: RunnerConfig,
    tail: &Tail,
    shutdown: &mut watch::Receiver<bool>,
    leader: &mut PgConnection,
) -> anyhow::Result<()> {
    let name = projection.name();
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen("events").await?;
    let (mut generation, mut checkpoint) = load_checkpoint(leader, name).await?;
    if checkpoint == Checkpoint::START {
        // Starting from nothing: make sure the storage is empty and marked as ours.
        projection.clear(leader, generation).await?;
    } else if !projection
        .storage_intact(leader, generation, checkpoint)
        .await?
    {
        tracing::warn!(
            projection = name,
            generation,
            "storage lost its data; rebuilding from position zero"
        );
        projection.clear(leader, generation).await?;
        checkpoint = Checkpoint::START;
        save_checkpoint(leader, name, generation, checkpoint).await?;
    }
    // Its storage answers again: whatever failed before is over.
    sqlx::query(
        "UPDATE projection_checkpoints SET last_error = NULL, failing_since = NULL
          WHERE name = $1 AND last_error IS NOT NULL",
    )
    .bind(name)
    .execute(&mut *leader)
    .await?;
    metrics::gauge!("projection_failing", "projection" => name).set(0.0);
    let mut last_lag = Instant::now() - config.lag_interval;
    let mut horizon = Horizon::default();
    let mut next_read = Instant::now();
    while !*shutdown.borrow() {
        if last_lag.elapsed() >= config.lag_interval {
            let (behind, seconds) = log::lag(leader, checkpoint).await?;
            metrics::gauge!("projection_lag_events", "projection" => name).set(behind as f64);
            metrics::gauge!("projection_lag_seconds", "projection" => name).set(seconds);
            last_lag = Instant::now();
            // The leader's connection doubles as a liveness check of the lock.
        }
        if let Some(wait) = next_read.checked_duration_since(Instant::now()) {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => continue,
            }
        }
        // The commits announced so far are read below; their wake-ups are spent.
        drain(&mut listener).await;
        let read_at = Instant::now();
        let batch = tail
            .read_after(leader, checkpoint, config.batch_size)
            .await?;
        // At the head of the log (a batch short of full), the next read waits until
        // `gather` after this one: under load, commits land every few milliseconds, and
        // a runner reading again as soon as it has applied would spend its time on
        // batches of a handful of events, each paying the statements of a batch.
        // Behind (a full batch), it reads on at once.
        next_read = if i64::try_from(batch.len()).unwrap_or(i64::MAX) < config.batch_size {
            read_at + config.gather
        } else {
            read_at
        };
        if batch.is_empty() {
            // A rebuild may have switched generations while we were idle.
            let served: i32 =
                sqlx::query_scalar("SELECT generation FROM projection_checkpoints WHERE name = $1")
                    .bind(name)
                    .fetch_one(&mut *leader)
                    .await?;
            if served != generation {
                (generation, checkpoint) = load_checkpoint(leader, name).await?;
                projection.switched(generation).await?;
                tracing::info!(
                    projection = name,
                    generation,
                    "switched to a rebuilt generation"
                );
                continue;
            }
            if !projection
                .storage_intact(leader, generation, checkpoint)
                .await?
            {
                return Err(anyhow::anyhow!("{name}: storage lost its data"));
            }
            if let Some(as_of) = horizon.advance(leader).await? {
                projection.caught_up(generation, checkpoint, as_of).await?;
            }
            let notified = tokio::select! {
                notification = listener.recv() => notification.is_ok(),
                _ = tokio::time::sleep(config.poll_interval) => false,
                _ = shutdown.changed() => false,
            };
            if notified {
                // Woken from idle: let further commits land for `gather` before reading.
                next_read = Instant::now() + config.gather;
            }
            continue;
        }
        if apply_batch(pool, projection, generation, &batch).await? {
            metrics::counter!("projection_events_applied_total", "projection" => name)
                .increment(batch.len() as u64);
            if let Some(last) = batch.last() {
                checkpoint = last.checkpoint();
            }
        } else {
            // A rebuild switched generations: continue from its checkpoint.
            (generation, checkpoint) = load_checkpoint(leader, name).await?;
            projection.switched(generation).await?;
            tracing::info!(
                projection = name,
                generation,
                "switched to a rebuilt generation"
            );
        }
    }
    Ok(())
}

/// Up to when a caught-up reader reflects every commit.
///
/// Reading stops at the oldest running transaction (anywhere on the server), so "no
/// more events" does not mean "everything committed until now". Each idle poll samples
/// `(now, next transaction id)`; once the oldest running transaction id has passed a
/// sample's next id, every transaction that existed at that sample's time has finished
/// and is visible — so everything committed before that time is reflected.
#[derive(Default)]
struct Horizon {
    samples: VecDeque<(DateTime<Utc>, i64)>,
}

/// Discards every notification already sent to `listener`: those it has buffered and
/// those still waiting on its connection. A runner busy with a load never waits on its
/// listener, so the announcements of a burst of commits (up to a hundred a second) pile
/// up on the connection; draining only the buffer would leave them to be received one
/// at a time once the runner goes idle, each waking it for a read of nothing (see
/// docs/benchmarks.md, `spinning-runners`).
async fn drain(listener: &mut PgListener) {
    for _ in 0..100_000 {
        // A zero timeout polls `recv` once: it returns a buffered notification or one
        // the socket already holds, and gives up at once when there is none.
        if !matches!(
            tokio::time::timeout(Duration::ZERO, listener.recv()).await,
            Ok(Ok(_))
        ) {
            return;
        }
    }
}

impl Horizon {
    async fn advance(
        &mut self,
        conn: &mut PgConnection,
    ) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT now() AS now,
                    pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
                    pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax",
        )
        .fetch_one(&mut *conn)
        .await?;
        let now: DateTime<Utc> = row.try_get("now")?;
        let xmin: i64 = row.try_get("xmin")?;
        let xmax: i64 = row.try_get("xmax")?;
        self.samples.push_back((now, xmax));
        let mut as_of = None;
        while let Some(&(time, next_id)) = self.samples.front() {
            if next_id > xmin {
                break;
            }
            as_of = Some(time);
            self.samples.pop_front();
        }
        // Bounded: under a transaction that never ends, keep the oldest samples.
        while self.samples.len() > 1_000 {
            self.samples.pop_back();
        }
        Ok(as_of)
    }
}

/// Rebuilds `projection` from position zero into the next generation while the current
/// one keeps serving, then switches to it. `progress(applied, total)` is called after
/// every batch. Returns the new generation.
pub async fn rebuild<P: Projection>(
    pool: &PgPool,
    projection: &mut P,
    batch_size: i64,
    mut progress: impl FnMut(u64, u64),
) -> anyhow::Result<i32> {
    let name = projection.name();
    let mut conn = pool.acquire().await?;
    let (live, _) = load_checkpoint(&mut conn, name).await?;
    let next = live + 1;
    projection.clear(&mut conn, next).await?;
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&mut *conn)
        .await?;
    let total = u64::try_from(total).unwrap_or(0);
    let mut checkpoint = Checkpoint::START;
    let mut applied = 0_u64;
    // Catch up without holding anything the live runner needs. The next batch is read
    // (and decoded) on a task of its own while this one is applied, so the log's read
    // and the projection's writes overlap instead of taking turns.
    let mut batch = log::read_after(&mut conn, checkpoint, batch_size).await?;
    while let Some(last) = batch.last() {
        let after = last.checkpoint();
        let mut reader = conn;
        let reading = tokio::spawn(async move {
            let read = log::read_after(&mut reader, after, batch_size).await;
            (reader, read)
        });
        let mut tx = pool.begin().await?;
        projection.apply(&mut tx, next, &batch).await?;
        tx.commit().await?;
        checkpoint = after;
        applied += batch.len() as u64;
        progress(applied, total.max(applied));
        let (reader, read) = reading.await?;
        conn = reader;
        batch = read?;
    }
    // Switch: lock the live checkpoint row (the live runner waits), apply what arrived
    // meanwhile, and move the checkpoint and the generation in one commit.
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT 1 FROM projection_checkpoints WHERE name = $1 FOR UPDATE")
        .bind(name)
        .execute(&mut *tx)
        .await?;
    loop {
        let batch = log::read_after(&mut tx, checkpoint, batch_size).await?;
        let Some(last) = batch.last() else { break };
        projection.apply(&mut tx, next, &batch).await?;
        checkpoint = last.checkpoint();
        applied += batch.len() as u64;
        progress(applied, total.max(applied));
    }
    save_checkpoint(&mut tx, name, next, checkpoint).await?;
    tx.commit().await?;
    projection.switched(next).await?;
    projection.clear(&mut conn, live).await?;
    Ok(next)
}
