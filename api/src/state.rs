//! What every handler can reach (axum's `State`): the use cases, the pool, the
//! tokens, the metrics. Its own module, under every handler, so that the router that
//! assembles the handlers (`lib.rs`) sits above them and nothing imports it back.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;

use crate::auth::TokenTable;
use crate::telemetry::Metrics;
use app::commands::CommandService;
use app::queries::Queries;
use app::rate_limit::HoldLimiter;

/// What every handler can reach: a handle, cloned for every request (axum's `State`),
/// so one reference count instead of every field's (cloning the fields showed in the
/// server's profile under reads).
#[derive(Clone)]
pub struct AppState(Arc<AppStateInner>);

impl AppState {
    pub fn new(inner: AppStateInner) -> Self {
        Self(Arc::new(inner))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateInner;

    fn deref(&self) -> &AppStateInner {
        &self.0
    }
}

/// The shared parts of [`AppState`].
pub struct AppStateInner {
    pub commands: CommandService,
    pub pool: PgPool,
    pub tokens: Arc<TokenTable>,
    pub metrics: Metrics,
    pub prometheus: PrometheusHandle,
    /// Every read a handler makes (see [`app::queries`]).
    pub queries: Queries,
    /// The payment saga (confirm, webhook).
    pub payments: app::payments::PaymentService,
    /// The key that signs webhooks; `None` refuses them.
    pub webhook_secret: Option<Arc<str>>,
    /// The per-guest hold limit; `None` when it is turned off or Redis is unusable.
    pub hold_limiter: Option<HoldLimiter>,
    /// How long a partner webhook delivery is retried (a manual retry gives it as long
    /// again).
    pub webhook_retry_window: chrono::Duration,
    /// Where partner webhooks may go (checked when a subscription is put).
    pub webhook_destinations: app::webhooks::destinations::Destinations,
    /// The OpenAPI document `GET /openapi.json` serves ([`crate::openapi`]), handed to
    /// its handler rather than named by it (the document is made from the handlers).
    pub openapi: &'static utoipa::openapi::OpenApi,
    /// Staff sessions' cookie is `Secure` even on a loopback host (`SESSION_COOKIE_SECURE=always`).
    pub secure_cookies_always: bool,
}

/// What the extractor of the caller ([`crate::auth::Principal`]) reads: the tokens,
/// the sessions' database and the commands' clock (a test's manual clock ages sessions
/// too).
impl crate::auth::Authenticator for AppState {
    fn tokens(&self) -> &TokenTable {
        &self.tokens
    }

    fn sessions(&self) -> &PgPool {
        &self.pool
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.commands.now()
    }
}
