//! A guest's rights over their data (docs/privacy.md): everything the platform holds of
//! them, opened (`GET /v1/guests/export`, GDPR art. 15 and 20), and its erasure
//! (`POST /v1/guests/erase`, art. 17). Both are staff's (admin tokens): a guest asks
//! the hotel, which answers for the whole chain.

use aggregates::{Guest, GuestId, ReservationId};
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::bodies::ReservationOut;
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiQuery, Idempotency, IdempotencyKeyHeader};
use super::reservations::{answer, caller, EventOut};
use crate::state::AppState;
use app::commands::erase::{self, GuestRef};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). A guest's export and erasure.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(erase))
        .routes(routes!(export))
}

/// Whom a request is about: exactly one of the two. As a body, its schema is
/// `schema::guest_query` (one of two objects); as a query, each parameter says that it
/// and the other exclude each other (`x-exactly-one-of`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GuestQuery {
    /// The guest's e-mail (case-insensitive); exactly one of `email` and `guest_id`.
    #[param(schema_with = super::schema::guest_email)]
    pub email: Option<String>,
    /// The guest's id, as an export or an erasure answered it; exactly one of `email`
    /// and `guest_id`.
    #[param(schema_with = super::schema::guest_id)]
    pub guest_id: Option<String>,
}

impl utoipa::PartialSchema for GuestQuery {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        super::schema::guest_query()
    }
}

impl ToSchema for GuestQuery {}

impl GuestQuery {
    fn guest(self) -> Result<GuestRef, ApiError> {
        match (self.email, self.guest_id) {
            (Some(email), None) => {
                // The address as the domain accepts one (a name is not needed to find
                // a guest, only to hold a room).
                let guest = Guest::parse("guest", &email)?;
                Ok(GuestRef::Email(guest.email().to_owned()))
            }
            (None, Some(id)) => Ok(GuestRef::Id(GuestId::parse(&id)?)),
            _ => Err(ApiError::invalid(
                "email",
                "name the guest by exactly one of email and guest_id",
            )),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErasureOut {
    pub guest_id: String,
    /// Keys destroyed by this request (0 when the guest was erased before).
    pub keys_destroyed: usize,
    /// The guest's reservations found, and how many recorded `GuestErased` now.
    pub reservations: usize,
    pub reservations_recorded: usize,
    /// Reservations held before personal data was sealed: their rows and views are
    /// cleared, but their events keep the guest in the clear (docs/privacy.md).
    pub reservations_held_before_sealing: usize,
    /// Stored answers (idempotency records) scrubbed of the guest.
    pub answers_scrubbed: u64,
    /// Channels whose hold count for the guest was forgotten; null when Redis could
    /// not be asked (the counts then lapse with their window, and name no one).
    pub hold_counts_forgotten: Option<usize>,
}

/// Erase a guest: their keys are destroyed (nothing sealed under them opens again,
/// anywhere), each of their reservations records `GuestErased`, and every answer about
/// those reservations shows `"[erased]"` for the guest from then on. The history still
/// verifies. A repeat destroys and records nothing more.
#[utoipa::path(post, path = "/v1/guests/erase", tag = "guests", request_body = GuestQuery,
    params(IdempotencyKeyHeader),
    responses((status = 200, body = ErasureOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn erase(
    State(state): State<AppState>,
    principal: Principal,
    // Required like every request that changes state; the erasure needs no record of
    // it, since repeating it is harmless and answers what the repeat did.
    Idempotency(_key): Idempotency,
    ApiJson(body): ApiJson<GuestQuery>,
) -> Result<Json<ErasureOut>, ApiError> {
    principal.require(&[Role::Admin])?;
    let who = body.guest()?;
    let caller = caller(&principal)?;
    let done = erase::erase(&state.commands, state.hold_limiter.as_ref(), &caller, &who).await?;
    Ok(Json(ErasureOut {
        guest_id: done.guest_id.to_string(),
        keys_destroyed: done.keys_destroyed,
        reservations: done.reservations,
        reservations_recorded: done.reservations_recorded,
        reservations_held_before_sealing: done.reservations_held_before_sealing,
        answers_scrubbed: done.answers_scrubbed,
        hold_counts_forgotten: done.hold_counts_forgotten,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExportedReservation {
    pub reservation: ReservationOut,
    /// Its history, personal data opened.
    pub events: Vec<EventOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GuestExport {
    pub guest_id: String,
    /// Every reservation of the guest's that still names them, newest first.
    pub reservations: Vec<ExportedReservation>,
    pub exported_at: DateTime<Utc>,
}

/// Everything the platform holds of a guest, opened: their reservations and each one's
/// history. After an erasure, nothing names them any more and the export is empty.
#[utoipa::path(get, path = "/v1/guests/export", tag = "guests", params(GuestQuery),
    responses((status = 200, body = GuestExport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn export(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<GuestQuery>,
) -> Result<Json<GuestExport>, ApiError> {
    principal.require(&[Role::Admin])?;
    let privacy = state.commands.privacy();
    let (guest_id, email) = match query.guest()? {
        GuestRef::Email(email) => (
            privacy.guest_id_in(state.commands.pool(), &email).await?,
            Some(email),
        ),
        GuestRef::Id(id) => (id, None),
    };
    let ids = state
        .queries
        .guest_reservations(guest_id.as_str(), email.as_deref())
        .await?;
    let mut reservations = Vec::with_capacity(ids.len());
    for id in ids {
        let id = ReservationId::from_uuid(id);
        let Some(view) = state.queries.reservation(id).await? else {
            continue;
        };
        let Some((_, history)) = state.queries.reservation_history(id).await? else {
            continue;
        };
        let mut events: Vec<EventOut> = history.into_iter().map(EventOut::from).collect();
        let mut data: Vec<(ReservationId, &str, &mut serde_json::Value)> = events
            .iter_mut()
            .map(|e| (id, e.event_type.as_str(), &mut e.data))
            .collect();
        privacy.open_events(&mut data).await?;
        reservations.push(ExportedReservation {
            reservation: answer(&state, &principal, view).await?,
            events,
        });
    }
    Ok(Json(GuestExport {
        guest_id: guest_id.to_string(),
        reservations,
        exported_at: state.commands.now(),
    }))
}
