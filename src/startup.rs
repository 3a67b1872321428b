//! The server process: configuration, building the app on a bound port (port 0 in
//! tests), and running it until a shutdown signal, letting in-flight requests finish.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use chrono::Duration;
use sqlx::PgPool;
use tokio::net::TcpListener;

use projections::availability::{Keys, Reader};
use projections::RunnerConfig;
use sqlx::postgres::PgConnectOptions;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::workers::{spawn_payment_workers, PaymentWorkerConfig};
use crate::workers::{spawn_runners, RedisModel};
use api::auth::TokenTable;
use api::telemetry::{prometheus, Metrics};
use api::{router, AppState, AppStateInner};
use app::clock::{Clock, SystemClock};
use app::commands::{CommandService, WriteConfig};
use app::payments::simulated::{SimulatedConfig, SimulatedGateway};
use app::payments::{PaymentConfig, PaymentService};
use app::queries::{AvailabilityCache, Queries};
use app::rate_limit::HoldLimiter;
use clap::builder::TypedValueParser as _;
use store::write::Strategy;

/// Everything `reservations serve` can be told, from flags or the environment.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// PostgreSQL; the database is created and migrated at start.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/reservations"
    )]
    pub database_url: String,
    /// Redis for the availability read model and rate limits.
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
    /// HTTP address to listen on (port 0: any free port).
    #[arg(long, env = "LISTEN_ADDR", default_value = "127.0.0.1:8080")]
    pub listen_addr: String,
    /// Comma-separated `token:role[:name]`, role `admin`, `channel` or `auditor`. When
    /// unset, an admin token is generated and printed once at start.
    #[arg(long, env = "API_TOKENS", hide_env_values = true)]
    pub api_tokens: Option<String>,
    /// How long a hold lasts before it lapses.
    #[arg(long, env = "HOLD_TTL_SECONDS", default_value_t = 900,
          value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub hold_ttl_seconds: u32,
    /// Holds one guest (e-mail) may make per channel within the window; beyond, 429.
    /// 0 turns the limit off. Kept in Redis; while Redis is unreachable, holds are allowed.
    #[arg(long, env = "HOLD_LIMIT_PER_GUEST", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub hold_limit_per_guest: u32,
    /// The sliding window of the per-guest hold limit, in seconds.
    #[arg(long, env = "HOLD_LIMIT_WINDOW_SECONDS", default_value_t = 900,
          value_parser = clap::value_parser!(u32).range(1..=86_400))]
    pub hold_limit_window_seconds: u32,
    /// HMAC key for `X-Signature` on the payment webhook; unset refuses the webhook.
    #[arg(long, env = "PAYMENT_WEBHOOK_SECRET", hide_env_values = true)]
    pub payment_webhook_secret: Option<String>,
    /// How concurrent bookings of the same nights are kept apart.
    #[arg(long, env = "WRITE_STRATEGY", default_value = "group",
          value_parser = clap::builder::PossibleValuesParser::new(Strategy::ALL.map(Strategy::as_str))
              .try_map(|name| name.parse::<Strategy>()))]
    pub strategy: Strategy,
    /// Group commit: how many batches of holds may be in flight at once (each a
    /// transaction on its own connection).
    #[arg(long, env = "GROUP_COMMIT_LANES", default_value_t = app::commands::group::DEFAULT_LANES as u32,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub group_commit_lanes: u32,
    /// Which hotels' holds may share a transaction: `id:shard` or `first-last:shard`,
    /// comma-separated (e.g. `1-499:eu,500-999:us`); a hotel not named is in `main`, so
    /// empty is one shard. Every server of a database must use the same map.
    #[arg(long, env = "HOTEL_SHARDS", default_value = "")]
    pub hotel_shards: String,
    /// Most nights the bulk inventory commands may be writing at once, over all
    /// requests (inventory ranges, bulk ARI, the horizon); more wait their turn. Bounds
    /// the server's memory under many concurrent year-long updates.
    #[arg(long, env = "BULK_WRITE_NIGHTS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub bulk_write_nights: u32,
    /// Run the projection runners in this process (a standby if another process leads).
    #[arg(long, env = "RUN_PROJECTIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub run_projections: bool,
    /// How long a projection runner at the head of the log lets commits gather before
    /// it reads them: more is fewer, larger batches (less work per event, under load)
    /// and staler read models.
    #[arg(long, env = "PROJECTION_GATHER_MS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(0..=5_000))]
    pub projection_gather_ms: u64,
    /// Size of the PostgreSQL connection pool.
    #[arg(long, env = "DB_MAX_CONNECTIONS", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub db_max_connections: u32,
    /// Run the expiry sweeper, payment recovery and payment outbox in this process.
    #[arg(long, env = "RUN_WORKERS", default_value_t = true, action = clap::ArgAction::Set)]
    pub run_workers: bool,
    /// How long a confirm waits for the payment provider before answering 202.
    /// At most 20 s, so a confirm always answers before the HTTP request timeout (30 s).
    #[arg(long, env = "PAYMENT_TIMEOUT_MS", default_value_t = 3_000,
          value_parser = clap::value_parser!(u64).range(1..=20_000))]
    pub payment_timeout_ms: u64,
    /// How long an unanswered payment is left to its request and the webhook before
    /// the recovery worker asks the provider.
    #[arg(long, env = "PAYMENT_RECOVER_AFTER_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub payment_recover_after_seconds: u64,
    /// Simulated payment provider: latency of each call.
    #[arg(long, env = "SIM_GATEWAY_LATENCY_MS", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub sim_gateway_latency_ms: u64,
    /// Simulated payment provider: delay before it sends each webhook.
    #[arg(long, env = "SIM_WEBHOOK_DELAY_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub sim_webhook_delay_ms: u64,
    /// Simulated payment provider: how many times it delivers each webhook.
    #[arg(long, env = "SIM_WEBHOOK_COPIES", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=10))]
    pub sim_webhook_copies: u32,
    /// How long after the end of a stay's arrival date (midnight at the hotel) a guest
    /// who has not checked in is recorded a no-show by the worker.
    #[arg(long, env = "NO_SHOW_GRACE_MINUTES", default_value_t = 240,
          value_parser = clap::value_parser!(u32).range(0..=10_080))]
    pub no_show_grace_minutes: u32,
    /// How long payment webhook receipts, delivered payment outbox rows, finished
    /// payment sagas, sent guest e-mails and delivered partner webhooks are kept
    /// (idempotency records: a day, as answered).
    #[arg(long, env = "RETENTION_DAYS", default_value_t = 30,
          value_parser = clap::value_parser!(u32).range(1..=3_650))]
    pub retention_days: u32,
    /// Keep every room type with inventory on sale this many days ahead, carrying its
    /// last week forward (checked hourly); 0 turns it off.
    #[arg(long, env = "INVENTORY_HORIZON_DAYS", default_value_t = 365,
          value_parser = clap::value_parser!(u32).range(0..=730))]
    pub inventory_horizon_days: u32,
    /// A streaming replica of DATABASE_URL: look-ups that may be as old as their
    /// `as_of` read it (hotel pages, availability and search from PostgreSQL, analytics,
    /// reservation lists, the event feed). Unset: the primary serves them.
    #[arg(long, env = "READ_DATABASE_URL")]
    pub read_database_url: Option<String>,
    /// The oldest `as_of` the replica may answer with; staler, the primary answers.
    #[arg(long, env = "REPLICA_MAX_STALENESS_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub replica_max_staleness_ms: u64,
    /// NATS with JetStream: every committed event is published once, in commit order,
    /// to `NATS_STREAM` on `{NATS_SUBJECT_PREFIX}.{hotel_id}`. Unset: no relay.
    #[arg(long, env = "NATS_URL")]
    pub nats_url: Option<String>,
    /// The JetStream stream the relay publishes to (created if missing).
    #[arg(long, env = "NATS_STREAM", default_value = "RESERVATION_EVENTS")]
    pub nats_stream: String,
    /// The relay's subjects: `{prefix}.{hotel_id}`.
    #[arg(
        long,
        env = "NATS_SUBJECT_PREFIX",
        default_value = "reservations.events"
    )]
    pub nats_subject_prefix: String,
    /// The guest's e-mails go out through this SMTP server (`smtp://host:port`, with
    /// `?tls=required` for STARTTLS, or `smtps://`; `user:password@` if it wants them).
    /// Unset: messages are queued and counted, and none is sent.
    #[arg(long, env = "SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// The sender of the guest's e-mails (`Name <address>`).
    #[arg(
        long,
        env = "MAIL_FROM",
        default_value = "Reservations <reservations@localhost>"
    )]
    pub mail_from: String,
    /// How often the mail worker looks for messages to send.
    #[arg(long, env = "MAIL_POLL_MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub mail_poll_ms: u64,
    /// The first retry of a message the mail server did not take; each further retry
    /// waits twice as long, up to MAIL_RETRY_MAX_SECONDS.
    #[arg(long, env = "MAIL_RETRY_FIRST_MS", default_value_t = 2_000,
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub mail_retry_first_ms: u64,
    #[arg(long, env = "MAIL_RETRY_MAX_SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub mail_retry_max_seconds: u64,
    /// Attempts before a message is given up (`failed`, counted, listed for a person).
    #[arg(long, env = "MAIL_MAX_ATTEMPTS", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub mail_max_attempts: u32,
    /// Whether staff sessions' cookie is `Secure`: `auto` (unless the request names a
    /// loopback host, where a browser speaks plain HTTP to a server on the same machine)
    /// or `always` (behind a TLS-terminating proxy that forwards `Host: 127.0.0.1`).
    #[arg(long, env = "SESSION_COOKIE_SECURE", default_value = "auto",
          value_parser = ["auto", "always"])]
    pub session_cookie_secure: String,
    /// How often the webhook worker looks for deliveries to send.
    #[arg(long, env = "WEBHOOK_POLL_MS", default_value_t = 1_000,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub webhook_poll_ms: u64,
    /// A delivery's first retry; each further one waits twice as long, up to
    /// WEBHOOK_RETRY_MAX_SECONDS, until WEBHOOK_RETRY_HOURS after it was made (then it
    /// is `failed`).
    #[arg(long, env = "WEBHOOK_RETRY_FIRST_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub webhook_retry_first_ms: u64,
    #[arg(long, env = "WEBHOOK_RETRY_MAX_SECONDS", default_value_t = 3_600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub webhook_retry_max_seconds: u64,
    #[arg(long, env = "WEBHOOK_RETRY_HOURS", default_value_t = 24,
          value_parser = clap::value_parser!(u32).range(1..=720))]
    pub webhook_retry_hours: u32,
    /// Failed attempts in a row after which a subscriber is paused (until PUT again).
    #[arg(long, env = "WEBHOOK_PAUSE_AFTER", default_value_t = 50,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub webhook_pause_after: u32,
    /// How long a receiver has to answer a delivery.
    #[arg(long, env = "WEBHOOK_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub webhook_timeout_ms: u64,
    /// Hosts (names or addresses, comma-separated) that partner webhooks may reach
    /// although they are loopback, private or link-local: a partner on a private link,
    /// or a test's receiver. Empty: public addresses only.
    #[arg(long, env = "WEBHOOK_ALLOWED_HOSTS", default_value = "")]
    pub webhook_allowed_hosts: String,
}

impl Settings {
    /// Defaults for a given database, as if no flag or variable were set.
    pub fn for_database(database_url: &str) -> Self {
        Self {
            database_url: database_url.to_owned(),
            redis_url: "redis://127.0.0.1:6379".into(),
            listen_addr: "127.0.0.1:8080".into(),
            api_tokens: None,
            hold_ttl_seconds: 900,
            hold_limit_per_guest: 3,
            hold_limit_window_seconds: 900,
            payment_webhook_secret: None,
            strategy: Strategy::Group,
            group_commit_lanes: app::commands::group::DEFAULT_LANES as u32,
            hotel_shards: String::new(),
            bulk_write_nights: 10_000,
            run_projections: true,
            projection_gather_ms: 20,
            db_max_connections: 20,
            run_workers: true,
            payment_timeout_ms: 3_000,
            payment_recover_after_seconds: 30,
            sim_gateway_latency_ms: 50,
            sim_webhook_delay_ms: 5_000,
            sim_webhook_copies: 1,
            no_show_grace_minutes: 240,
            retention_days: 30,
            inventory_horizon_days: 365,
            read_database_url: None,
            replica_max_staleness_ms: 5_000,
            nats_url: None,
            nats_stream: "RESERVATION_EVENTS".into(),
            nats_subject_prefix: "reservations.events".into(),
            smtp_url: None,
            mail_from: "Reservations <reservations@localhost>".into(),
            mail_poll_ms: 1_000,
            mail_retry_first_ms: 2_000,
            mail_retry_max_seconds: 600,
            mail_max_attempts: 20,
            session_cookie_secure: "auto".into(),
            webhook_poll_ms: 1_000,
            webhook_retry_first_ms: 5_000,
            webhook_retry_max_seconds: 3_600,
            webhook_retry_hours: 24,
            webhook_pause_after: 50,
            webhook_timeout_ms: 10_000,
            webhook_allowed_hosts: String::new(),
        }
    }

    pub fn webhook_destinations(&self) -> app::webhooks::destinations::Destinations {
        app::webhooks::destinations::Destinations::parse(&self.webhook_allowed_hosts)
    }

    pub fn webhook_sender_config(&self) -> app::webhooks::sender::SenderConfig {
        app::webhooks::sender::SenderConfig {
            first_backoff: std::time::Duration::from_millis(self.webhook_retry_first_ms),
            max_backoff: std::time::Duration::from_secs(self.webhook_retry_max_seconds),
            pause_after: i32::try_from(self.webhook_pause_after).unwrap_or(i32::MAX),
            timeout: std::time::Duration::from_millis(self.webhook_timeout_ms),
            ..app::webhooks::sender::SenderConfig::default()
        }
    }

    pub fn webhook_retry_window(&self) -> Duration {
        Duration::hours(i64::from(self.webhook_retry_hours))
    }

    pub fn mail_config(&self) -> app::mail::MailConfig {
        app::mail::MailConfig {
            max_attempts: i32::try_from(self.mail_max_attempts).unwrap_or(i32::MAX),
            first_backoff: std::time::Duration::from_millis(self.mail_retry_first_ms),
            max_backoff: std::time::Duration::from_secs(self.mail_retry_max_seconds),
            ..app::mail::MailConfig::default()
        }
    }

    pub fn payment_config(&self) -> PaymentConfig {
        PaymentConfig {
            call_timeout: std::time::Duration::from_millis(self.payment_timeout_ms),
            recover_after: std::time::Duration::from_secs(self.payment_recover_after_seconds),
        }
    }

    /// The simulated payment provider these settings describe.
    pub fn simulated_gateway(&self) -> SimulatedGateway {
        SimulatedGateway::new(SimulatedConfig {
            latency: std::time::Duration::from_millis(self.sim_gateway_latency_ms),
            webhook_delay: Some(std::time::Duration::from_millis(self.sim_webhook_delay_ms)),
            webhook_copies: self.sim_webhook_copies,
            shuffle_webhooks: false,
        })
    }

    pub fn write_config(&self) -> WriteConfig {
        WriteConfig {
            strategy: self.strategy,
            group_lanes: self.group_commit_lanes as usize,
            bulk_nights_in_flight: self.bulk_write_nights,
            hold_ttl: Duration::seconds(i64::from(self.hold_ttl_seconds)),
            ..WriteConfig::default()
        }
    }
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    pool: PgPool,
    generated_admin_token: Option<String>,
    workers: Vec<JoinHandle<()>>,
    stop_workers: watch::Sender<bool>,
    payments: PaymentService,
    gateway: SimulatedGateway,
}

impl Application {
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        Self::build_with_clock(settings, Arc::new(SystemClock)).await
    }

    /// Connects (creating and migrating the database), binds the listener and wires the
    /// routes; nothing is served until [`Application::run_until`].
    pub async fn build_with_clock(
        settings: Settings,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let gateway = settings.simulated_gateway();
        Self::build_with(settings, clock, gateway).await
    }

    /// As [`Self::build_with_clock`], with a given simulated payment provider (tests
    /// configure when its webhooks arrive, and read its ledger).
    pub async fn build_with(
        settings: Settings,
        clock: Arc<dyn Clock>,
        gateway: SimulatedGateway,
    ) -> anyhow::Result<Self> {
        let (tokens, generated_admin_token) = match settings.api_tokens.as_deref() {
            Some(spec) if !spec.trim().is_empty() => {
                (TokenTable::parse(spec).map_err(anyhow::Error::msg)?, None)
            }
            _ => {
                let (table, token) = TokenTable::generated_admin();
                (table, Some(token))
            }
        };
        // The relay's target is checked before anything connects: a bad name is a
        // setting to fix, not something to retry.
        let relay_target = match &settings.nats_url {
            Some(url) if !url.trim().is_empty() => Some((
                url.clone(),
                app::relay::RelayTarget::parse(
                    &settings.nats_stream,
                    &settings.nats_subject_prefix,
                )
                .map_err(anyhow::Error::msg)?,
            )),
            _ => None,
        };
        let shards = app::commands::shards::ShardMap::parse(&settings.hotel_shards)
            .map_err(anyhow::Error::msg)?;
        let pool =
            store::db::connect_and_migrate(&settings.database_url, settings.db_max_connections)
                .await
                .context("connecting to PostgreSQL")?;
        // Two servers batching by different maps could join two shards in a transaction.
        app::commands::shards::check_recorded(&pool, &shards).await?;
        // Partner secrets stored before they were sealed are sealed now (see
        // `webhooks::secrets`); a failure leaves them readable as they are.
        match app::webhooks::secrets::seal_clear(&pool).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sealed = n, "sealed the webhook secrets stored in the clear"),
            Err(e) => {
                tracing::warn!(error = %e, "could not seal the webhook secrets stored in the clear")
            }
        }
        // Commands get connections set up for key look-ups (see `db::write_pool`).
        let write_pool = store::db::write_pool(&settings.database_url, settings.db_max_connections)
            .await
            .context("connecting to PostgreSQL")?;
        let listener = TcpListener::bind(&settings.listen_addr)
            .await
            .with_context(|| format!("binding {}", settings.listen_addr))?;
        let database = database_name(&settings.database_url)?;
        let keys = Keys::for_database(&database);
        // Redis is optional at start: the connection is lazy, and every reader falls
        // back to PostgreSQL while it is unreachable.
        let read_connections = std::thread::available_parallelism().map_or(1, usize::from);
        let availability = match AvailabilityCache::connect(
            &settings.redis_url,
            read_connections,
            Reader::new(keys),
        ) {
            Ok(cache) => Some(cache),
            Err(e) => {
                tracing::warn!(error = %e, "REDIS_URL unusable; availability is read from PostgreSQL and the hold limit is off");
                None
            }
        };
        // The hold limit shares the read model's connection; it fails open, so a Redis
        // outage never stops bookings (see `rate_limit`).
        let hold_limiter = match (&availability, settings.hold_limit_per_guest) {
            (_, 0) => None,
            (Some(cache), limit) => Some(HoldLimiter::new(
                cache.redis.clone(),
                &database,
                limit,
                std::time::Duration::from_secs(u64::from(settings.hold_limit_window_seconds)),
            )),
            (None, _) => None,
        };
        // A mail setting that cannot work is a setting to fix, found before anything runs.
        let mailer = match settings
            .smtp_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
        {
            Some(url) => Some(app::mail::smtp::SmtpMailer::new(url, &settings.mail_from)?),
            None => {
                tracing::warn!("SMTP_URL unset: guest e-mails are queued and none is sent");
                None
            }
        };
        let (stop_workers, stopped) = watch::channel(false);
        // Wakes the projection runners (here or in another process) after this
        // process's commits.
        let mut workers = vec![tokio::spawn(store::write::announce::notify_commits(
            pool.clone(),
            stopped.clone(),
        ))];
        if settings.run_projections {
            let relay = match relay_target {
                Some((url, target)) => Some(app::relay::JetStreamRelay::new(
                    app::relay::connect(&url).await?,
                    target,
                )),
                None => None,
            };
            workers.extend(spawn_runners(
                pool.clone(),
                availability.as_ref().map(|cache| RedisModel {
                    redis: cache.redis.clone(),
                    keys: cache.reader.keys().clone(),
                }),
                relay,
                projections::webhooks::WebhookProjection {
                    retry_window: settings.webhook_retry_window(),
                },
                RunnerConfig {
                    gather: std::time::Duration::from_millis(settings.projection_gather_ms),
                    ..RunnerConfig::default()
                },
                stopped.clone(),
            ));
        }
        let mut queries = Queries::new(pool.clone(), availability.clone(), Arc::clone(&clock));
        if let Some(url) = settings
            .read_database_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
        {
            // Lazy: a replica that is down at start is read once it is up, and until
            // then the primary answers.
            let replica_pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(settings.db_max_connections)
                .acquire_timeout(std::time::Duration::from_secs(2))
                .connect_lazy(url)
                .context("READ_DATABASE_URL")?;
            let replica = app::queries::Replica::new(
                replica_pool,
                app::queries::ReplicaConfig {
                    max_staleness: std::time::Duration::from_millis(
                        settings.replica_max_staleness_ms,
                    ),
                    ..Default::default()
                },
            );
            workers.push(replica.spawn_monitor(pool.clone(), Arc::clone(&clock), stopped.clone()));
            queries = queries.with_replica(replica);
        }
        let commands =
            CommandService::with_clock(write_pool.clone(), settings.write_config(), clock)
                .with_shards(shards);
        let payments = PaymentService::new(
            commands.clone(),
            Arc::new(gateway.clone()),
            settings.payment_config(),
        );
        let webhook_secret: Option<Arc<str>> = settings
            .payment_webhook_secret
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(Arc::from);
        if let (Some(secret), Ok(addr)) = (&webhook_secret, listener.local_addr()) {
            // The simulated provider calls back this very server.
            let host = if addr.ip().is_unspecified() {
                "127.0.0.1".to_owned()
            } else {
                addr.ip().to_string()
            };
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            gateway.deliver_webhooks_to(
                format!("http://{host}:{}/v1/payments/webhook", addr.port()),
                secret.as_bytes(),
            );
        } else {
            tracing::warn!("PAYMENT_WEBHOOK_SECRET unset: webhooks are refused, and late payment results arrive only through recovery");
        }
        if settings.run_workers && settings.inventory_horizon_days > 0 {
            workers.push(crate::workers::spawn_horizon_worker(
                commands.clone(),
                settings.inventory_horizon_days,
                std::time::Duration::from_secs(3_600),
                stopped.clone(),
            ));
        }
        if settings.run_workers {
            workers.push(crate::workers::spawn_retention_worker(
                commands.clone(),
                app::sweeper::Retention {
                    payments: Duration::days(i64::from(settings.retention_days)),
                    ..app::sweeper::Retention::default()
                },
                std::time::Duration::from_secs(60),
                stopped.clone(),
            ));
            workers.push(spawn_payment_workers(
                payments.clone(),
                PaymentWorkerConfig {
                    no_show_grace: Duration::minutes(i64::from(settings.no_show_grace_minutes)),
                    ..PaymentWorkerConfig::default()
                },
                stopped.clone(),
            ));
            workers.push(crate::workers::spawn_webhook_sender(
                payments.commands().clone(),
                settings.webhook_sender_config(),
                settings.webhook_destinations(),
                std::time::Duration::from_millis(settings.webhook_poll_ms),
                stopped.clone(),
            ));
            if let Some(mailer) = mailer {
                workers.push(crate::workers::spawn_mail_worker(
                    payments.commands().clone(),
                    Arc::new(mailer),
                    settings.mail_config(),
                    std::time::Duration::from_millis(settings.mail_poll_ms),
                    stopped.clone(),
                ));
            }
        }
        let state = AppState::new(AppStateInner {
            commands,
            pool: pool.clone(),
            tokens: Arc::new(tokens),
            metrics: Metrics,
            prometheus: prometheus(),
            queries,
            payments: payments.clone(),
            webhook_secret,
            hold_limiter,
            webhook_retry_window: settings.webhook_retry_window(),
            webhook_destinations: settings.webhook_destinations(),
            openapi: api::openapi(),
            secure_cookies_always: settings.session_cookie_secure == "always",
        });
        Ok(Self {
            listener,
            router: router(state),
            pool,
            generated_admin_token,
            workers,
            stop_workers,
            payments,
            gateway,
        })
    }

    /// The payment saga this server runs (tests drive its workers directly).
    pub fn payments(&self) -> &PaymentService {
        &self.payments
    }

    /// The simulated payment provider this server talks to.
    pub fn gateway(&self) -> &SimulatedGateway {
        &self.gateway
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// The admin token generated because no `API_TOKENS` were configured.
    pub fn generated_admin_token(&self) -> Option<&str> {
        self.generated_admin_token.as_deref()
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Serves until `shutdown` completes, then stops accepting and lets in-flight
    /// requests finish before returning.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await?;
        // Requests are done; let each runner finish the batch it is applying.
        let _ = self.stop_workers.send(true);
        for worker in self.workers {
            if tokio::time::timeout(std::time::Duration::from_secs(30), worker)
                .await
                .is_err()
            {
                tracing::warn!("a projection runner did not stop within 30 s");
            }
        }
        self.payments.commands().pool().close().await;
        self.pool.close().await;
        Ok(())
    }

    /// Serves until SIGINT or SIGTERM.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.run_until(shutdown_signal()).await
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// The database name in a PostgreSQL URL (what `connect_and_migrate` creates).
pub fn database_name(url: &str) -> anyhow::Result<String> {
    let options: PgConnectOptions = url.parse()?;
    Ok(options
        .get_database()
        .unwrap_or_else(|| options.get_username())
        .to_owned())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Settings;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        settings: Settings,
    }

    fn parse(args: &[&str]) -> Result<Settings, clap::Error> {
        let mut all = vec!["serve", "--database-url", "postgres://localhost/x"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|cli| cli.settings)
    }

    #[test]
    fn projection_gather_defaults_to_twenty_milliseconds_and_is_bounded() {
        let defaults = Settings::for_database("postgres://localhost/x");

        assert_eq!(parse(&[]).map(|s| s.projection_gather_ms).ok(), Some(20));
        assert_eq!(defaults.projection_gather_ms, 20);
        assert_eq!(
            parse(&["--projection-gather-ms", "250"])
                .map(|s| s.projection_gather_ms)
                .ok(),
            Some(250)
        );
        assert!(parse(&["--projection-gather-ms", "5001"]).is_err());
        assert!(parse(&["--projection-gather-ms", "-1"]).is_err());
    }
}
