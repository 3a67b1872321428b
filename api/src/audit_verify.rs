//! `GET /v1/audit/verify` (auditor, admin): bring the audit log up to date, then check
//! its hash chain, replay the whole history through the aggregates, judge every sale
//! against the restrictions, rate plans and occupancy in force when it was made, and
//! compare the replayed nights with `room_nights`. The work is
//! `projections::audit::verify`; this is only the HTTP face of it.
//!
//! The answer is 200 whether or not the history checks out: `ok` says which. An error
//! status means verification could not run (the database, or the audit runner not
//! catching up in time).
//!
//! A verification reads the whole history through six connections of the server's
//! pool, so a process runs one at a time: a second request meanwhile is answered 429
//! with `Retry-After` rather than queued, and bookings keep their connections. A history
//! too long to verify within the request timeout is verified with
//! `reservations audit verify` instead (same checks, no timeout).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use projections::audit::{self, VerifyReport};
use serde::Serialize;
use tokio::sync::Semaphore;
use utoipa::ToSchema;

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody};
use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). The audit replay.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(verify))
}

/// How long to wait for a running audit runner to copy what is already committed.
/// Short enough to stay inside the request timeout.
const CATCH_UP_WAIT: Duration = Duration::from_secs(10);

/// One verification at a time in this process.
static RUNNING: Semaphore = Semaphore::const_new(1);

/// The verification report.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditReport {
    /// Nothing wrong was found.
    pub ok: bool,
    /// Audit rows (one per event) checked.
    pub events_checked: u64,
    /// The smallest event position implicated by a problem; null when none is (also
    /// when only `room_nights` disagrees with a history that itself checks out).
    #[schema(nullable)]
    pub first_bad_position: Option<i64>,
    /// One line per problem, by position; at most 100 (then a line says how many more).
    pub problems: Vec<String>,
    /// Events committed after the audit log was brought up to date, not covered by
    /// this run.
    pub pending_events: u64,
}

impl From<VerifyReport> for AuditReport {
    fn from(r: VerifyReport) -> Self {
        Self {
            ok: r.ok,
            events_checked: r.events_checked,
            first_bad_position: r.first_bad_position,
            problems: r.problems,
            pending_events: r.pending_events,
        }
    }
}

/// Checks the audit hash chain and replays the history against every invariant.
#[utoipa::path(get, path = "/v1/audit/verify", tag = "audit",
    responses((status = 200, body = AuditReport),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 429, description = "verify_in_progress: another verification is running in this server", body = ErrorBody),
        (status = 503, description = "the database is unavailable, or the audit log could not be brought up to date in time", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn verify(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<AuditReport>, ApiError> {
    principal.require(Role::AUDIT)?;
    let Ok(_running) = RUNNING.try_acquire() else {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "verify_in_progress",
            "a verification is already running; try again when it has finished",
        )
        .retry_after(5));
    };
    let report = audit::catch_up_and_verify(&state.pool, CATCH_UP_WAIT)
        .await
        .map_err(|e| {
            tracing::warn!(error = %format!("{e:#}"), "audit verification could not run");
            ApiError::unavailable(
                "the audit log could not be verified right now; try again shortly",
            )
        })?;
    if !report.ok {
        tracing::warn!(
            first_bad_position = ?report.first_bad_position,
            problems = report.problems.len(),
            "audit verification found problems"
        );
    }
    Ok(Json(report.into()))
}
