//! The read-side projections this server runs, as a small registry: their names (what
//! `reservations projections rebuild NAME` accepts), starting their runners, rebuilding
//! one into a new generation, and reporting where each has got to.
//!
//! The registry is the one place that knows which projections exist, so the CLI, the
//! `serve` wiring and the status report cannot disagree about them.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use projections::analytics::{Occupancy, ReservationsView, OCCUPANCY, RESERVATIONS_VIEW};
use projections::audit::AuditLog;
use projections::availability::{AvailabilityProjection, Keys};
use projections::{Checkpoint, RunnerConfig, Tail};

use app::relay::JetStreamRelay;
use projections::redis_conn::RedisConn;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A projection that can be named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProjectionName {
    Availability,
    ReservationsView,
    Occupancy,
}

impl ProjectionName {
    pub const ALL: [ProjectionName; 3] = [
        ProjectionName::Availability,
        ProjectionName::ReservationsView,
        ProjectionName::Occupancy,
    ];

    /// The name of its checkpoint row, as the projection itself reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectionName::Availability => projections::availability::NAME,
            ProjectionName::ReservationsView => RESERVATIONS_VIEW,
            ProjectionName::Occupancy => OCCUPANCY,
        }
    }
}

impl fmt::Display for ProjectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProjectionName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|name| name.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|n| n.as_str()).collect();
                format!("unknown projection {s:?}; known: {}", known.join(", "))
            })
    }
}

/// The Redis availability model's connection and key names.
#[derive(Clone)]
pub struct RedisModel {
    pub redis: RedisConn,
    pub keys: Keys,
}

/// Starts the runner of every projection: availability (when Redis is configured), the
/// reservations view, occupancy, the audit log and the JetStream relay (when NATS is
/// configured), all reading the log through one shared [`Tail`] so that each event is
/// read from the database once, not five times.
pub fn spawn_runners(
    pool: PgPool,
    availability: Option<RedisModel>,
    relay: Option<JetStreamRelay>,
    webhooks: projections::webhooks::WebhookProjection,
    config: RunnerConfig,
    shutdown: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let tail = Tail::default();
    let mut runners = Vec::with_capacity(5);
    if let Some(relay) = relay {
        runners.push(tokio::spawn(projections::run_sharing(
            pool.clone(),
            relay,
            config,
            tail.clone(),
            shutdown.clone(),
        )));
    }
    if let Some(model) = availability {
        runners.push(spawn_availability_runner(
            pool.clone(),
            model.redis,
            model.keys,
            config,
            &tail,
            shutdown.clone(),
        ));
    }
    runners.extend(spawn_analytics_runners(
        pool.clone(),
        config,
        &tail,
        shutdown.clone(),
    ));
    runners.push(tokio::spawn(projections::run_sharing(
        pool.clone(),
        webhooks,
        config,
        tail.clone(),
        shutdown.clone(),
    )));
    runners.push(spawn_audit_runner(pool, config, &tail, shutdown));
    runners
}

/// Starts the Redis availability projection, reading the log through `tail`.
pub fn spawn_availability_runner(
    pool: PgPool,
    redis: RedisConn,
    keys: Keys,
    config: RunnerConfig,
    tail: &Tail,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(projections::run_sharing(
        pool,
        AvailabilityProjection::new(redis, keys),
        config,
        tail.clone(),
        shutdown,
    ))
}

/// Follows the event log into the audit log. Safe to run in every server process: the
/// runner's leadership lock lets one of them write, the others stand by. (The audit log
/// is append-only, so it is not in the rebuildable registry.)
pub fn spawn_audit_runner(
    pool: PgPool,
    config: RunnerConfig,
    tail: &Tail,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(projections::run_sharing(
        pool,
        AuditLog::new(),
        config,
        tail.clone(),
        shutdown,
    ))
}

/// Starts the runners of the PostgreSQL analytics projections (reservations view and
/// occupancy), reading the log through `tail`, until `shutdown` turns true.
pub fn spawn_analytics_runners(
    pool: PgPool,
    config: RunnerConfig,
    tail: &Tail,
    shutdown: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(projections::run_sharing(
            pool.clone(),
            ReservationsView,
            config,
            tail.clone(),
            shutdown.clone(),
        )),
        tokio::spawn(projections::run_sharing(
            pool,
            Occupancy,
            config,
            tail.clone(),
            shutdown,
        )),
    ]
}

/// Rebuilds `name` from position zero into the next generation while the current one
/// keeps serving (and its runner, wherever it runs, keeps following the log), then
/// switches. `progress(applied, total)` is called after every batch. Returns the new
/// generation.
///
/// Two rebuilds of one projection would fill the same next generation and clear each
/// other's rows, so a session advisory lock per projection lets only one run at a time;
/// the second is refused at once rather than queued behind a long replay.
pub async fn rebuild(
    pool: &PgPool,
    redis: Option<RedisModel>,
    name: ProjectionName,
    batch_size: i64,
    progress: impl FnMut(u64, u64),
) -> anyhow::Result<i32> {
    let mut guard = pool.acquire().await?;
    let locked: bool = sqlx::query_scalar(
        "SELECT pg_try_advisory_lock(hashtext('projection-rebuild'), hashtext($1))",
    )
    .bind(name.as_str())
    .fetch_one(&mut *guard)
    .await?;
    if !locked {
        anyhow::bail!("a rebuild of {name} is already running");
    }
    let result = match name {
        ProjectionName::Availability => match redis {
            Some(model) => {
                let mut projection = AvailabilityProjection::new(model.redis, model.keys);
                projections::rebuild(pool, &mut projection, batch_size, progress).await
            }
            None => Err(anyhow::anyhow!("rebuilding availability needs Redis")),
        },
        ProjectionName::ReservationsView => {
            projections::rebuild(pool, &mut ReservationsView, batch_size, progress).await
        }
        ProjectionName::Occupancy => {
            projections::rebuild(pool, &mut Occupancy, batch_size, progress).await
        }
    };
    let unlocked =
        sqlx::query("SELECT pg_advisory_unlock(hashtext('projection-rebuild'), hashtext($1))")
            .bind(name.as_str())
            .execute(&mut *guard)
            .await;
    if unlocked.is_err() {
        // Closing the session releases its locks.
        drop(guard.detach());
    }
    result
}

/// Where one projection has got to.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectionStatus {
    pub name: String,
    /// `None` for a registered projection that has never run.
    pub generation: Option<i32>,
    pub checkpoint: Checkpoint,
    pub updated_at: Option<DateTime<Utc>>,
    /// Events not yet applied, and the age in seconds of the oldest of them.
    pub behind: i64,
    pub lag_seconds: f64,
}

/// Every projection with a checkpoint (whoever registered it), plus the registered ones
/// that have none yet, by name.
pub async fn status(pool: &PgPool) -> anyhow::Result<Vec<ProjectionStatus>> {
    let mut conn = pool.acquire().await?;
    let rows: Vec<(String, i32, i64, i64, DateTime<Utc>)> = sqlx::query_as(
        "SELECT name, generation, transaction_id::text::bigint, global_position, updated_at
           FROM projection_checkpoints ORDER BY name",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::new();
    for (name, generation, transaction_id, position, updated_at) in rows {
        let checkpoint = Checkpoint {
            transaction_id,
            position,
        };
        let (behind, lag_seconds) = projections::log::lag(&mut conn, checkpoint).await?;
        out.push(ProjectionStatus {
            name,
            generation: Some(generation),
            checkpoint,
            updated_at: Some(updated_at),
            behind,
            lag_seconds,
        });
    }
    for name in ProjectionName::ALL {
        if !out.iter().any(|s| s.name == name.as_str()) {
            let (behind, lag_seconds) = projections::log::lag(&mut conn, Checkpoint::START).await?;
            out.push(ProjectionStatus {
                name: name.as_str().to_owned(),
                generation: None,
                checkpoint: Checkpoint::START,
                updated_at: None,
                behind,
                lag_seconds,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known_ones() {
        for name in ProjectionName::ALL {
            assert_eq!(name.as_str().parse::<ProjectionName>(), Ok(name));
        }
        let error = "nonexistent".parse::<ProjectionName>().unwrap_err();
        assert!(
            error.contains("availability")
                && error.contains("reservations_view")
                && error.contains("occupancy"),
            "{error}"
        );
    }
}

/// How often the payment workers run, and when an in-flight request counts as dead.
#[derive(Debug, Clone, Copy)]
pub struct PaymentWorkerConfig {
    pub interval: std::time::Duration,
    pub abandon_after: chrono::Duration,
    pub batch: i64,
    /// How long after the end of a stay's arrival date (midnight at the hotel) an
    /// unarrived guest is recorded a no-show.
    pub no_show_grace: chrono::Duration,
}

impl Default for PaymentWorkerConfig {
    fn default() -> Self {
        Self {
            interval: std::time::Duration::from_secs(1),
            abandon_after: chrono::Duration::seconds(120),
            batch: 200,
            no_show_grace: chrono::Duration::hours(4),
        }
    }
}

/// Runs the expiry sweeper, the payment recovery worker, the capture worker, the
/// no-show worker and the payment outbox in one loop until `shutdown` turns true; a
/// pass in progress finishes first. A round that found a full batch of lapsed holds is
/// followed by the next at once. Safe in every server process at once (each step is;
/// see their modules).
pub fn spawn_payment_workers(
    payments: app::payments::PaymentService,
    config: PaymentWorkerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if *shutdown.borrow() {
                return;
            }
            let more_lapsed = match app::sweeper::sweep_once(
                payments.commands(),
                config.batch,
                config.abandon_after,
            )
            .await
            {
                Ok(swept) => swept.more,
                Err(e) => {
                    tracing::warn!(error = %e, "expiry sweeper pass failed");
                    false
                }
            };
            if let Err(e) = payments.recover_due(config.batch).await {
                tracing::warn!(error = %e, "payment recovery pass failed");
            }
            if let Err(e) = app::sweeper::capture_due_once(payments.commands(), config.batch).await
            {
                tracing::warn!(error = %e, "capture pass failed");
            }
            if let Err(e) = app::sweeper::record_no_shows_once(
                payments.commands(),
                config.batch,
                config.no_show_grace,
            )
            .await
            {
                tracing::warn!(error = %e, "no-show pass failed");
            }
            if let Err(e) = payments.deliver_outbox(config.batch).await {
                tracing::warn!(error = %e, "payment outbox pass failed");
            }
            // A backlog of lapsed holds is worked off at once, a batch per round, the
            // other passes still taking their turn between batches.
            if !more_lapsed {
                pause(config.interval, &mut shutdown).await;
            }
        }
    })
}

/// Sends the guest's queued e-mails every `interval` until `shutdown` turns true (a
/// message being sent is finished first), at once again while a pass found a full
/// batch. Safe in every server process at once (see `mail`).
pub fn spawn_mail_worker(
    commands: app::commands::CommandService,
    mailer: std::sync::Arc<dyn app::mail::Mailer>,
    config: app::mail::MailConfig,
    interval: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    const BATCH: i64 = 50;
    tokio::spawn(async move {
        loop {
            if *shutdown.borrow() {
                return;
            }
            let full = match app::mail::send_due(
                commands.pool(),
                commands.privacy(),
                mailer.as_ref(),
                &config,
                commands.now(),
                BATCH,
            )
            .await
            {
                Ok(sent) => {
                    sent.sent + sent.retrying + sent.failed + sent.dropped >= BATCH as usize
                }
                Err(e) => {
                    tracing::warn!(error = %e, "mail pass failed");
                    false
                }
            };
            if !full {
                pause(interval, &mut shutdown).await;
            }
        }
    })
}

/// Sends the partner webhooks' due deliveries every `interval` until `shutdown` turns
/// true (at once again while a pass found a full batch). Safe in every server process
/// at once (see `webhooks::sender`).
pub fn spawn_webhook_sender(
    commands: app::commands::CommandService,
    config: app::webhooks::sender::SenderConfig,
    destinations: app::webhooks::destinations::Destinations,
    interval: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    const BATCH: i64 = 50;
    tokio::spawn(async move {
        // Deliveries go to partners' own URLs: no proxy from the environment, no
        // redirects (a receiver answers where it was subscribed), and public addresses
        // only unless the operator allowed a host (see `webhooks::destinations`).
        let client = match app::webhooks::sender::WebhookClient::new(destinations) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!(error = %e, "no HTTP client for webhooks; none is sent");
                return;
            }
        };
        loop {
            if *shutdown.borrow() {
                return;
            }
            let full = match app::webhooks::sender::send_due(
                commands.pool(),
                &client,
                &config,
                commands.now(),
                BATCH,
            )
            .await
            {
                Ok(d) => d.delivered + d.retrying + d.failed >= BATCH as usize,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook pass failed");
                    false
                }
            };
            if !full {
                pause(interval, &mut shutdown).await;
            }
        }
    })
}

/// Runs [`app::sweeper::retention_once`] every `interval` until `shutdown` turns true,
/// repeating at once while a pass still found full batches. Safe in every server process
/// at once.
pub fn spawn_retention_worker(
    commands: app::commands::CommandService,
    retention: app::sweeper::Retention,
    interval: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if *shutdown.borrow() {
                return;
            }
            let more = match app::sweeper::retention_once(&commands, retention).await {
                Ok(done) => {
                    let full = |n: u64| n >= u64::try_from(retention.batch).unwrap_or(u64::MAX);
                    full(done.idempotency_keys)
                        || full(done.payment_webhooks)
                        || full(done.payment_outbox)
                        || full(done.mail_outbox)
                        || full(done.webhook_deliveries)
                        || full(done.payment_sagas)
                        || done.allocations_unfinished
                }
                Err(e) => {
                    tracing::warn!(error = %e, "retention pass failed");
                    false
                }
            };
            if more {
                continue;
            }
            pause(interval, &mut shutdown).await;
        }
    })
}

/// Runs [`app::commands::CommandService::extend_horizon`] every `interval` (the first
/// pass one `interval` after start, so a server started for a benchmark or a test does
/// not grow its catalog at once) until `shutdown` turns true. Safe in every server
/// process at once.
pub fn spawn_horizon_worker(
    commands: app::commands::CommandService,
    days: u32,
    interval: std::time::Duration,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            pause(interval, &mut shutdown).await;
            if *shutdown.borrow() {
                return;
            }
            match commands.extend_horizon(days).await {
                Ok(done) if done.nights > 0 => tracing::info!(
                    room_types = done.room_types,
                    nights = done.nights,
                    "inventory carried forward to the horizon"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "inventory horizon pass failed"),
            }
        }
    })
}

/// Waits `interval`, or less if `shutdown` changes meanwhile (a worker's loop then
/// checks it and stops).
async fn pause(interval: std::time::Duration, shutdown: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(interval) => {}
        _ = shutdown.changed() => {}
    }
}
