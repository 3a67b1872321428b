//! Operational endpoints: liveness, readiness, metrics (with the stalled-work gauges
//! read at each scrape), the outboxes' failed rows and their retry, and the OpenAPI
//! document.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiPath, ApiQuery};
use crate::state::AppState;
use app::signals;
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Health, readiness, metrics, the OpenAPI document, and operations.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
        .routes(routes!(me))
        .routes(routes!(bookings))
        .routes(routes!(outbox))
        .routes(routes!(retry_outbox))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, body = Status)))]
pub async fn healthz() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// Ready, and what is failing behind it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    #[schema(example = "ready")]
    pub status: &'static str,
    /// The background work (projections, the JetStream relay) whose runner is failing
    /// and retrying now, with its reason: the server still answers, but what it
    /// derives is falling behind. Empty when all is well.
    pub failing: Vec<FailingOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FailingOut {
    /// The runner: `availability`, `occupancy`, `reservations_view`, `audit_log`,
    /// `webhooks`, `jetstream_relay`.
    #[schema(example = "jetstream_relay")]
    pub name: String,
    /// The whole error chain, the dependency's own reason included.
    #[schema(
        example = "creating JetStream stream RESERVATION_EVENTS: jetstream error: subjects overlap with an existing stream (code 400, error code 10065)"
    )]
    pub error: String,
    /// When the current run of failures began.
    pub since: chrono::DateTime<chrono::Utc>,
}

/// The database answers; `failing` lists the background work that is failing.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, body = Readiness), Unavailable))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Readiness>, ApiError> {
    let failing = projections::runner::failing(&state.pool);
    match tokio::time::timeout(Duration::from_secs(2), failing).await {
        Ok(Ok(failing)) => Ok(Json(Readiness {
            status: "ready",
            failing: failing
                .into_iter()
                .map(|f| FailingOut {
                    name: f.name,
                    error: f.error,
                    since: f.since,
                })
                .collect(),
        })),
        Ok(Err(e)) => Err(super::error::database(e)),
        Err(_) => Err(ApiError::unavailable("the database did not answer in time")),
    }
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    // The stalled-work gauges are the database's figures at this scrape; a database
    // that does not answer leaves them as they were (and `/readyz` says why).
    let read = signals::read(&state.pool, state.commands.now());
    match tokio::time::timeout(Duration::from_secs(2), read).await {
        Ok(Ok(work)) => signals::publish(&work),
        Ok(Err(e)) => tracing::warn!(error = %e, "reading the stalled-work gauges failed"),
        Err(_) => tracing::warn!("reading the stalled-work gauges took over 2 s"),
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.prometheus.render(),
    )
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi(State(state): State<AppState>) -> impl IntoResponse {
    Json(state.openapi)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutboxQuery {
    /// Only `failed` (the rows a person has to look at).
    #[param(example = "failed", schema_with = super::schema::outbox_state)]
    pub state: Option<String>,
    /// At most this many rows (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The rows the outboxes gave up on.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutboxRows {
    pub rows: Vec<OutboxRowOut>,
}

/// One outbox row given up on.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutboxRowOut {
    /// `{kind}-{n}`: what `POST /v1/ops/outbox/{id}/retry` takes.
    #[schema(example = "email-12")]
    pub id: String,
    /// `payment`, `email` or `webhook`.
    #[schema(example = "email")]
    pub kind: String,
    /// The reservation it is about (absent for a webhook delivery).
    pub reservation_id: Option<uuid::Uuid>,
    /// The payment call (`capture`, `refund`, `void`), the e-mail's kind or the
    /// webhook's type.
    #[schema(example = "confirmation")]
    pub what: String,
    #[schema(example = "failed")]
    pub state: &'static str,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The outboxes' failed rows, oldest first (admin).
#[utoipa::path(get, path = "/v1/ops/outbox", tag = "operations", params(OutboxQuery),
    responses((status = 200, body = OutboxRows), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 422, body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn outbox(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<OutboxQuery>,
) -> Result<Json<OutboxRows>, ApiError> {
    principal.require(&[Role::Admin])?;
    if query.state.as_deref().is_some_and(|s| s != "failed") {
        return Err(ApiError::invalid("state", "must be \"failed\""));
    }
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let rows = signals::failed_rows(&state.pool, limit)
        .await
        .map_err(super::error::database)?;
    Ok(Json(OutboxRows {
        rows: rows
            .into_iter()
            .map(|r| OutboxRowOut {
                id: r.public_id(),
                kind: r.kind.as_str().to_owned(),
                reservation_id: r.reservation_id,
                what: r.what,
                state: "failed",
                attempts: r.attempts,
                last_error: r.last_error,
                created_at: r.created_at,
            })
            .collect(),
    }))
}

/// Puts a failed outbox row back in its queue, due now, its attempts reset (admin).
#[utoipa::path(post, path = "/v1/ops/outbox/{id}/retry", tag = "operations",
    params(("id" = String, Path, description = "`{kind}-{n}` as listed")),
    responses((status = 202, body = Status), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn retry_outbox(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<Status>), ApiError> {
    principal.require(&[Role::Admin])?;
    let (kind, n) = signals::parse_public_id(&id)
        .ok_or_else(|| ApiError::not_found("no such failed outbox row"))?;
    let retried = signals::retry(&state.pool, kind, n, state.commands.now())
        .await
        .map_err(super::error::database)?;
    if !retried {
        return Err(ApiError::not_found("no such failed outbox row"));
    }
    tracing::info!(outbox = %kind, id = n, "failed outbox row retried by an operator");
    Ok((StatusCode::ACCEPTED, Json(Status { status: "queued" })))
}

/// Who is asking: a token, or a person signed in to the console.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// The token's name (a channel's reservations belong to it), or the person's.
    #[schema(example = "staff")]
    pub name: String,
    /// `admin`, `channel`, `auditor`, `revenue` or `front_desk`.
    #[schema(example = "admin")]
    pub role: String,
    /// The person, when signed in with a staff session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staff_id: Option<uuid::Uuid>,
    /// The session's CSRF token (a reloaded console page reads it here), when signed in
    /// with a staff session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csrf_token: Option<String>,
}

/// The caller's name and role (any token or staff session).
#[utoipa::path(get, path = "/v1/me", tag = "operations",
    responses((status = 200, body = Me), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn me(principal: Principal) -> impl IntoResponse {
    // A session's answer carries its CSRF token: kept by no cache.
    (
        [(
            axum::http::header::CACHE_CONTROL,
            axum::http::HeaderValue::from_static("no-store"),
        )],
        Json(Me {
            name: principal.name,
            role: principal.role.to_string(),
            staff_id: principal.staff_id,
            csrf_token: principal.csrf_token,
        }),
    )
}

/// Longest span of the booking rate.
const MAX_RATE_MINUTES: u32 = 24 * 60;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BookingRateQuery {
    /// Minutes back from now, the current one included (1..=1440, default 60).
    #[param(minimum = 1, maximum = 1440)]
    pub minutes: Option<i64>,
}

/// Reservations made in one minute.
#[derive(Debug, Serialize, ToSchema)]
pub struct MinuteOut {
    pub minute: chrono::DateTime<chrono::Utc>,
    /// Every reservation made (held) in the minute.
    pub held: i64,
    /// Those of them confirmed since (checked in, out and no-shows included).
    pub confirmed: i64,
    /// Those of them cancelled since.
    pub cancelled: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BookingRateOut {
    /// When the reservations view last applied events; null if it has never run.
    pub as_of: Option<chrono::DateTime<chrono::Utc>>,
    /// One per minute, oldest first, the current (partial) minute last.
    pub minutes: Vec<MinuteOut>,
}

/// Reservations made per minute, by what became of them (admin, auditor).
#[utoipa::path(get, path = "/v1/ops/bookings", tag = "operations", params(BookingRateQuery),
    responses((status = 200, body = BookingRateOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn bookings(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<BookingRateQuery>,
) -> Result<Json<BookingRateOut>, ApiError> {
    let minutes = query.minutes.unwrap_or(60);
    let minutes = u32::try_from(minutes)
        .ok()
        .filter(|m| (1..=MAX_RATE_MINUTES).contains(m))
        .ok_or_else(|| {
            ApiError::invalid(
                "minutes",
                format!("minutes must be between 1 and {MAX_RATE_MINUTES}"),
            )
        })?;
    principal.require(Role::STAFF)?;
    let rate = state.queries.booking_rate(minutes).await?;
    Ok(Json(BookingRateOut {
        as_of: rate.as_of,
        minutes: rate
            .minutes
            .into_iter()
            .map(|m| MinuteOut {
                minute: m.minute,
                held: m.made,
                confirmed: m.confirmed,
                cancelled: m.cancelled,
            })
            .collect(),
    }))
}
