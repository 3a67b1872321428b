//! Announcing committed writes to the projection runners of every process.
//!
//! Runners LISTEN on `events`. The NOTIFY used to come from a trigger on `events`,
//! inside every booking transaction, and PostgreSQL serializes the commits of
//! notifying transactions (the notification queue's lock is held through each one's
//! WAL flush) and signals every listener for each of them, which cost spread load a
//! third of its holds with four runners listening (see `notify-per-booking` in
//! `docs/benchmarks.md`).
//!
//! So a write transaction that commits only bumps an in-process counter ([`committed`]),
//! and one task per server process ([`notify_commits`]) turns the bumps into at most
//! one `NOTIFY events` per [`SPACING`], on a connection of its own, after the commits
//! it announces. Nothing depends on a wake-up arriving: runners also poll, so a lost or
//! late one costs latency, never an event. A process without the task (a CLI command,
//! a test without an application) leaves its commits to the polls.

use std::sync::LazyLock;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

/// Commits of this process so far (the value is only ever compared for change).
static COMMITS: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

/// The least time between two announcements of one process.
pub const SPACING: Duration = Duration::from_millis(10);

/// Records that a write transaction of this process committed (it may have appended
/// events). Cheap: no I/O.
pub fn committed() {
    COMMITS.send_modify(|n| *n = n.wrapping_add(1));
}

/// Announces this process's commits with `NOTIFY events` until `shutdown` turns true.
pub async fn notify_commits(pool: PgPool, mut shutdown: watch::Receiver<bool>) {
    let mut commits = COMMITS.subscribe();
    // Commits before the task started are announced too (a runner may be waiting).
    commits.mark_changed();
    loop {
        tokio::select! {
            changed = commits.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = shutdown.changed() => return,
        }
        commits.borrow_and_update();
        if let Err(e) = sqlx::query("SELECT pg_notify('events', '')")
            .execute(&pool)
            .await
        {
            tracing::debug!(error = %e, "could not announce commits; the runners will poll");
        }
        tokio::select! {
            _ = tokio::time::sleep(SPACING) => {}
            _ = shutdown.changed() => return,
        }
    }
}
