//! Bringing a projection up to date once, on demand, and returning: what a one-shot
//! command (`reservations audit verify`) or a request (`GET /v1/audit/verify`) needs
//! before it reads the projection, whether or not a runner is following the log.
//!
//! It respects the runner's rules: batches go through the runner's `apply_batch` (each
//! batch and its checkpoint in one transaction, refused if the generation changed), and
//! only the holder of the projection's leadership lock applies anything. If a runner
//! already leads, this waits for that runner to reach the target instead of competing
//! with it.
//!
//! The target is the last event committed when the call starts. The commit-order reader
//! only sees events of transactions older than every transaction still running *on the
//! whole server*, so an event can be committed and not yet readable; the catch-up waits
//! (polling, up to a deadline) until it is, rather than stopping short of it.

use std::time::{Duration, Instant};

use sqlx::PgConnection;
use sqlx::PgPool;

use crate::log::{self, Checkpoint};
use crate::runner::{apply_batch, leader_lock_id, load_checkpoint, Projection};

/// How long to sleep while the events to apply are committed but not yet readable.
const POLL: Duration = Duration::from_millis(20);

/// Applies every event committed before the call to `projection`, and returns the
/// checkpoint reached. When another process leads the projection, waits for its
/// checkpoint to get there instead. Gives up with an error after `wait`.
pub async fn catch_up<P: Projection>(
    pool: &PgPool,
    projection: &mut P,
    batch_size: i64,
    wait: Duration,
) -> anyhow::Result<Checkpoint> {
    let deadline = Instant::now() + wait;
    let name = projection.name();
    let mut leader = pool.acquire().await?;
    let target = last_committed(&mut leader).await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(leader_lock_id(name))
        .fetch_one(&mut *leader)
        .await?;
    if !locked {
        return wait_for(&mut leader, name, target, deadline).await;
    }
    let result = apply_until(pool, projection, &mut leader, target, batch_size, deadline).await;
    // Release leadership; if the connection is broken, closing it releases the lock.
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(leader_lock_id(name))
        .execute(&mut *leader)
        .await;
    if unlocked.is_err() {
        let _ = leader.detach();
    }
    result
}

/// The last committed event in commit order (`START` when there is none).
async fn last_committed(conn: &mut PgConnection) -> Result<Checkpoint, sqlx::Error> {
    let row: Option<(i64, i64)> = sqlx::query_as(
        "SELECT transaction_id::text::bigint, global_position FROM events
          ORDER BY transaction_id DESC, global_position DESC
          LIMIT 1",
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(
        row.map_or(Checkpoint::START, |(transaction_id, position)| Checkpoint {
            transaction_id,
            position,
        }),
    )
}

async fn apply_until<P: Projection>(
    pool: &PgPool,
    projection: &mut P,
    leader: &mut PgConnection,
    target: Checkpoint,
    batch_size: i64,
    deadline: Instant,
) -> anyhow::Result<Checkpoint> {
    let name = projection.name();
    let (mut generation, mut checkpoint) = load_checkpoint(leader, name).await?;
    if !projection
        .storage_intact(leader, generation, checkpoint)
        .await?
    {
        anyhow::bail!("{name}: its storage lost data; the projection runner rebuilds it");
    }
    while checkpoint < target {
        let batch = log::read_after(leader, checkpoint, batch_size).await?;
        let Some(last) = batch.last() else {
            // Committed, but an older transaction somewhere is still running.
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "{name}: events up to {target:?} are committed but still not readable \
                     (a transaction older than them is running); reached {checkpoint:?}"
                );
            }
            tokio::time::sleep(POLL).await;
            continue;
        };
        let last = last.checkpoint();
        if apply_batch(pool, projection, generation, &batch).await? {
            checkpoint = last;
        } else {
            // A rebuild switched generations meanwhile: go on from its checkpoint.
            (generation, checkpoint) = load_checkpoint(leader, name).await?;
            projection.switched(generation).await?;
        }
    }
    Ok(checkpoint)
}

async fn wait_for(
    conn: &mut PgConnection,
    name: &str,
    target: Checkpoint,
    deadline: Instant,
) -> anyhow::Result<Checkpoint> {
    loop {
        let (_, checkpoint) = load_checkpoint(conn, name).await?;
        if checkpoint >= target {
            return Ok(checkpoint);
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "{name}: the runner leading this projection is at {checkpoint:?} and did not \
                 reach {target:?} in time"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}
