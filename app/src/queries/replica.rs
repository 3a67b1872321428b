//! The read replica (`READ_DATABASE_URL`): a PostgreSQL streaming replica that answers
//! the look-ups allowed to be as old as their `as_of`, so that search traffic does not
//! compete with bookings for the primary.
//!
//! - **How fresh it is** is measured, not assumed: a monitor samples the primary's WAL
//!   position every [`ReplicaConfig::sample_every`], remembering when it read each, and
//!   the replica's replay position; once the replica has replayed past a sample, it
//!   holds everything committed before the sample was taken, so that time is its
//!   `as_of`. A replica whose `as_of` is older than [`ReplicaConfig::max_staleness`],
//!   that cannot be reached, or that is not in recovery (promoted: no longer a copy of
//!   this primary) is not read.
//! - **Read-your-writes across servers**: every successful write answers the primary's
//!   WAL position after its commit as `Consistency-Token`. A read that presents one is
//!   served by the replica only once the replica has replayed that far (it waits up to
//!   [`ReplicaConfig::token_wait`]), else by the primary.
//! - **Never an error**: a read the replica fails (it died, or a connection broke) is
//!   read again from the primary, and the replica is not read again until the monitor
//!   reaches it. Every read that falls back is counted by reason
//!   (`replica_fallbacks_total{reason}`), every read it serves too
//!   (`replica_reads_total`); `replica_lag_seconds` and `replica_up` are gauges.
//!
//! Projection runners, the write side and look-ups that must see the caller's own last
//! write without a token (a reservation by id, its history) stay on the primary: the
//! runners need LISTEN/NOTIFY and horizons of `pg_current_snapshot()` that only the
//! primary's running transactions define (docs/scaling.md, "Beyond one machine").

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::Clock;

/// A position in PostgreSQL's write-ahead log (`pg_lsn`), as a consistency token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(u64);

impl Lsn {
    /// PostgreSQL's text form: two hexadecimal halves, `16/B374D848`.
    pub fn parse(text: &str) -> Option<Self> {
        let (high, low) = text.trim().split_once('/')?;
        let valid = |half: &str| {
            !half.is_empty() && half.len() <= 8 && half.chars().all(|c| c.is_ascii_hexdigit())
        };
        if !valid(high) || !valid(low) {
            return None;
        }
        let high = u64::from_str_radix(high, 16).ok()?;
        let low = u64::from_str_radix(low, 16).ok()?;
        Some(Self((high << 32) | low))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// The primary's WAL position now: after a commit has returned, at or past its record.
pub async fn current_lsn(primary: &PgPool) -> Result<Lsn, sqlx::Error> {
    let text: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(primary)
        .await?;
    Lsn::parse(&text).ok_or_else(|| sqlx::Error::Protocol(format!("not an LSN: {text:?}")))
}

#[derive(Debug, Clone, Copy)]
pub struct ReplicaConfig {
    pub sample_every: Duration,
    pub max_staleness: Duration,
    pub token_wait: Duration,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        Self {
            sample_every: Duration::from_millis(100),
            max_staleness: Duration::from_secs(5),
            token_wait: Duration::from_millis(250),
        }
    }
}

/// What the monitor last learnt.
#[derive(Debug, Clone, Copy, Default)]
struct Freshness {
    /// The replica's replay position.
    replayed: Option<Lsn>,
    /// Everything committed on the primary before this time is on the replica.
    as_of: Option<DateTime<Utc>>,
    /// The last read of the replica succeeded, and it is still a replica.
    up: bool,
}

/// Why a read did not go to the replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Unreachable, failed a read, or promoted.
    Down,
    /// Its `as_of` is older than the staleness allowed.
    Lagging,
    /// It has not replayed the caller's consistency token in time.
    BehindToken,
    /// It failed this read.
    Failed,
    /// It lacks a hotel, room type or night the read names (see
    /// [`super::QueryError::NotReplayed`]).
    Unreplayed,
}

impl Fallback {
    pub const fn as_str(self) -> &'static str {
        match self {
            Fallback::Down => "down",
            Fallback::Lagging => "lagging",
            Fallback::BehindToken => "behind_token",
            Fallback::Failed => "failed",
            Fallback::Unreplayed => "unreplayed",
        }
    }
}

/// A streaming replica of the primary, and what is known of its freshness.
#[derive(Clone)]
pub struct Replica {
    pool: PgPool,
    config: ReplicaConfig,
    freshness: Arc<Mutex<Freshness>>,
}

impl Replica {
    pub fn new(pool: PgPool, config: ReplicaConfig) -> Self {
        Self {
            pool,
            config,
            freshness: Arc::default(),
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn freshness(&self) -> Freshness {
        *self.freshness.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut Freshness)) {
        let mut freshness = self.freshness.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut freshness);
    }

    /// A read failed on the replica: do not read it until the monitor reaches it again.
    pub fn failed(&self) {
        self.update(|f| f.up = false);
        metrics::gauge!("replica_up").set(0.0);
    }

    /// Whether a read may go to the replica now, and if so the `as_of` its answer has.
    pub async fn admit(
        &self,
        token: Option<Lsn>,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, Fallback> {
        let freshness = self.freshness();
        let as_of = match freshness.as_of {
            Some(as_of) if freshness.up => as_of,
            _ => return Err(Fallback::Down),
        };
        let allowed =
            chrono::Duration::from_std(self.config.max_staleness).unwrap_or(chrono::Duration::MAX);
        if now - as_of > allowed {
            return Err(Fallback::Lagging);
        }
        let Some(token) = token else {
            return Ok(as_of);
        };
        if freshness.replayed.is_some_and(|replayed| replayed >= token) {
            return Ok(as_of);
        }
        // Ask the replica itself, for a short while: the monitor's figure is up to a
        // sample old, and a token is usually only a few milliseconds ahead.
        let deadline = tokio::time::Instant::now() + self.config.token_wait;
        loop {
            match replay_lsn(&self.pool).await {
                Ok(Some(replayed)) if replayed >= token => {
                    self.update(|f| f.replayed = f.replayed.max(Some(replayed)));
                    return Ok(as_of);
                }
                Ok(_) => {}
                Err(_) => {
                    self.failed();
                    return Err(Fallback::Down);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Fallback::BehindToken);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Follows the primary's and the replica's WAL positions until `shutdown`.
    pub fn spawn_monitor(
        &self,
        primary: PgPool,
        clock: Arc<dyn Clock>,
        mut shutdown: watch::Receiver<bool>,
    ) -> JoinHandle<()> {
        let replica = self.clone();
        tokio::spawn(async move {
            // Samples of the primary's position not yet replayed: (position, when read).
            let mut pending: VecDeque<(Lsn, DateTime<Utc>)> = VecDeque::new();
            while !*shutdown.borrow() {
                replica.sample(&primary, clock.as_ref(), &mut pending).await;
                tokio::select! {
                    _ = tokio::time::sleep(replica.config.sample_every) => {}
                    _ = shutdown.changed() => {}
                }
            }
        })
    }

    async fn sample(
        &self,
        primary: &PgPool,
        clock: &dyn Clock,
        pending: &mut VecDeque<(Lsn, DateTime<Utc>)>,
    ) {
        let taken_at = clock.now();
        match current_lsn(primary).await {
            Ok(position) => {
                pending.push_back((position, taken_at));
                // A replica that never catches up must not grow this without bound.
                while pending.len() > 1_000 {
                    pending.pop_front();
                }
            }
            Err(e) => tracing::debug!(error = %e, "replica monitor: primary unreadable"),
        }
        let read = tokio::time::timeout(Duration::from_secs(1), replay_lsn(&self.pool)).await;
        let replayed = match read {
            Ok(Ok(Some(replayed))) => replayed,
            Ok(Ok(None)) => {
                // Not in recovery: promoted, or not a replica at all.
                tracing::warn!(
                    "READ_DATABASE_URL is not a replica in recovery; reading the primary"
                );
                self.failed();
                return;
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "replica unreachable");
                self.failed();
                return;
            }
            Err(_) => {
                self.failed();
                return;
            }
        };
        let mut as_of = None;
        while let Some((position, at)) = pending.front().copied() {
            if position > replayed {
                break;
            }
            as_of = Some(at);
            pending.pop_front();
        }
        self.update(|f| {
            f.replayed = Some(replayed);
            f.as_of = as_of.or(f.as_of);
            f.up = true;
        });
        metrics::gauge!("replica_up").set(1.0);
        if let Some(as_of) = self.freshness().as_of {
            let lag = (clock.now() - as_of).num_milliseconds().max(0) as f64 / 1000.0;
            metrics::gauge!("replica_lag_seconds").set(lag);
        }
    }
}

/// The replica's replay position; `None` if it is not in recovery.
async fn replay_lsn(replica: &PgPool) -> Result<Option<Lsn>, sqlx::Error> {
    let text: Option<String> = sqlx::query_scalar(
        "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END",
    )
    .fetch_one(replica)
    .await?;
    Ok(text.as_deref().and_then(Lsn::parse))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_lsn_reads_and_writes_postgresqls_text_form() {
        let lsn = Lsn::parse("16/B374D848").expect("an lsn");
        assert_eq!(lsn.to_string(), "16/B374D848");
        assert!(Lsn::parse("0/0") < Lsn::parse("0/1"));
        assert!(Lsn::parse("1/0") > Lsn::parse("0/FFFFFFFF"));
        for bad in [
            "",
            "16",
            "/1",
            "1/",
            "x/1",
            "1/123456789",
            "1/2/3",
            "-1/0",
            "+1/0",
        ] {
            assert_eq!(Lsn::parse(bad), None, "{bad}");
        }
    }
}
