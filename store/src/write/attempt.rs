//! One attempt of a command and the loop around it: what an attempt can end in
//! ([`AttemptError`]), how lost races are retried ([`RetryPolicy`], [`with_retries`]),
//! and how contention is kept apart ([`Strategy`]). Every writer of the unit of work
//! returns an `AttemptError`; the module that declares them (`write`) only names them.

use crate::error::CommandError;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How concurrent commands on the same nights are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Decide without locks; detect conflicts at write time and retry.
    Optimistic,
    /// Lock the nights in order before deciding; queue instead of retrying.
    Pessimistic,
    /// Pessimistic, and the holds that queue meanwhile are decided together in the
    /// next transaction of their lane (see `commands::group`).
    Group,
}

impl Strategy {
    pub const ALL: [Self; 3] = [Self::Optimistic, Self::Pessimistic, Self::Group];

    /// Its name in configuration (`WRITE_STRATEGY`, `--strategy`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Optimistic => "optimistic",
            Self::Pessimistic => "pessimistic",
            Self::Group => "group",
        }
    }

    pub fn locks_nights(self) -> bool {
        matches!(self, Strategy::Pessimistic | Strategy::Group)
    }
}

impl std::str::FromStr for Strategy {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == name)
            .ok_or_else(|| format!("{name:?} is not one of optimistic, pessimistic, group"))
    }
}

/// Retry policy for lost races.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 12,
            base_delay: Duration::from_millis(2),
            max_delay: Duration::from_millis(100),
        }
    }
}

/// Why one attempt did not finish.
#[derive(Debug)]
pub enum AttemptError {
    /// A concurrent writer got there first: reload and try again.
    Conflict,
    /// Anything else: give up and report it.
    Fatal(CommandError),
}

impl From<sqlx::Error> for AttemptError {
    fn from(e: sqlx::Error) -> Self {
        let code = e
            .as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.into_owned());
        match code.as_deref() {
            // unique_violation: another writer appended the same stream version (the
            // events primary key is the optimistic lock) or created the same row.
            // serialization_failure / deadlock_detected: the database picked us to lose.
            Some("23505") | Some("40001") | Some("40P01") => AttemptError::Conflict,
            // check_violation: the database refused a state the domain accepted. The
            // caller is told nothing was written; an operator is told a decision was
            // wrong.
            Some("23514") => {
                let constraint = e
                    .as_database_error()
                    .and_then(|d| d.constraint())
                    .unwrap_or("unnamed")
                    .to_owned();
                tracing::error!(%constraint, error = %e, "the database refused a decided write");
                metrics::counter!("oversold_refused_total", "constraint" => constraint.clone())
                    .increment(1);
                AttemptError::Fatal(CommandError::OversoldRefused { constraint })
            }
            _ => AttemptError::Fatal(CommandError::Database(e)),
        }
    }
}

impl From<CommandError> for AttemptError {
    fn from(e: CommandError) -> Self {
        AttemptError::Fatal(e)
    }
}

/// Ends an attempt's transaction: commit on success, roll back on failure.
///
/// The rollback is explicit on purpose: a dropped sqlx transaction only queues its
/// ROLLBACK until the connection is next used, and until then it keeps its locks —
/// including the idempotency key's advisory lock, which would answer the client's very
/// next request with a spurious `request_in_flight`.
pub async fn settle<T>(
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    result: Result<T, AttemptError>,
) -> Result<T, AttemptError> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            super::announce::committed();
            Ok(value)
        }
        Err(e) => {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(error = %rollback, "rollback failed; the connection is dropped");
            }
            Err(e)
        }
    }
}

/// Runs `attempt` until it succeeds or fails for a reason other than a lost race,
/// backing off with full jitter between attempts.
pub async fn with_retries<T, F, Fut>(policy: RetryPolicy, mut attempt: F) -> Result<T, CommandError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let attempts = policy.max_attempts.max(1);
    for n in 1..=attempts {
        match attempt(n).await {
            Ok(value) => return Ok(value),
            Err(AttemptError::Fatal(e)) => return Err(e),
            Err(AttemptError::Conflict) => {
                CONFLICTS.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("unit_of_work_conflicts_total").increment(1);
                tracing::debug!(attempt = n, "unit of work lost a race");
                if n < attempts {
                    metrics::counter!("unit_of_work_retries_total").increment(1);
                    let ceiling = policy
                        .base_delay
                        .saturating_mul(1 << n.min(10))
                        .min(policy.max_delay);
                    let jitter = rand::thread_rng().gen_range(0..=ceiling.as_micros() as u64);
                    tokio::time::sleep(Duration::from_micros(jitter)).await;
                }
            }
        }
    }
    EXHAUSTED.fetch_add(1, Ordering::Relaxed);
    metrics::counter!("unit_of_work_exhausted_total").increment(1);
    Err(CommandError::Contention { attempts })
}

static CONFLICTS: AtomicU64 = AtomicU64::new(0);
static EXHAUSTED: AtomicU64 = AtomicU64::new(0);

/// Lost races and commands that ran out of retries since the process started (the same
/// figures the Prometheus counters carry; readable without a recorder, for benchmarks).
pub fn contention_totals() -> (u64, u64) {
    (
        CONFLICTS.load(Ordering::Relaxed),
        EXHAUSTED.load(Ordering::Relaxed),
    )
}

impl From<aggregates::Rejection> for AttemptError {
    fn from(e: aggregates::Rejection) -> Self {
        AttemptError::Fatal(CommandError::Rejected(e))
    }
}
