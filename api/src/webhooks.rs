//! Partner webhooks' subscriptions and delivery log (admin): `docs/api.md`, "Partner
//! webhooks".

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::error::{database, ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::state::AppState;
use app::webhooks::{self, Subscription};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Partner webhook subscriptions and their deliveries.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put, delete))
        .routes(routes!(deliveries))
        .routes(routes!(retry))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PutSubscription {
    /// Where deliveries are POSTed: an absolute `http://` or `https://` URL of at most
    /// 2048 characters, to a host the server is allowed to deliver to.
    #[schema(
        example = "https://pms.example/hooks/reservations",
        max_length = 2048,
        pattern = r"^https?://[^/?#\s]+[^\s]*$"
    )]
    pub url: String,
    /// Event types (`reservation.held`, `.confirmed`, `.cancelled`, `.expired`,
    /// `.declined`, `.dates_changed`, `.checked_in`, `.checked_out`, `.no_show`,
    /// `inventory.changed`, `block.created`, `.changed`, `.released`), or `["*"]` for
    /// all.
    #[schema(schema_with = super::schema::webhook_events)]
    pub events: Vec<String>,
    /// Only these hotels' events (1 to 1000 positive ids); absent: every hotel.
    #[schema(schema_with = super::schema::webhook_hotel_ids)]
    pub hotel_ids: Option<Vec<i64>>,
    /// `whsec_` and the base64 of 24 to 64 random bytes: the key deliveries are signed
    /// with (Standard Webhooks).
    #[schema(
        example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        pattern = r"^whsec_((?:[A-Za-z0-9+/]{4}){8}|(?:[A-Za-z0-9+/]{4}){8,20}(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)|(?:[A-Za-z0-9+/]{4}){21}[A-Za-z0-9+/][AQgw]==)$"
    )]
    pub secret: String,
}

/// A subscription (its secret is never shown again).
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriptionOut {
    pub subscription_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub hotel_ids: Option<Vec<i64>>,
    /// Set when its deliveries kept failing: nothing is sent until it is PUT again.
    pub paused_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<webhooks::StoredSubscription> for SubscriptionOut {
    fn from(s: webhooks::StoredSubscription) -> Self {
        Self {
            subscription_id: s.id,
            url: s.url,
            events: s.event_types,
            hotel_ids: s.hotel_ids,
            paused_at: s.paused_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// Subscribe, or change a subscription (a paused one resumes).
#[utoipa::path(put, path = "/v1/webhooks/{subscription_id}", tag = "webhooks",
    params(("subscription_id" = String, Path, description = "1..=64 of [A-Za-z0-9_.-], chosen by the partner", pattern = r"^[A-Za-z0-9_.\-]{1,64}$")),
    request_body = PutSubscription,
    responses((status = 200, body = SubscriptionOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PutSubscription>,
) -> Result<Json<SubscriptionOut>, ApiError> {
    principal.require(&[Role::Admin])?;
    let subscription = Subscription::parse(
        &id,
        &body.url,
        &body.events,
        body.hotel_ids.as_deref(),
        &body.secret,
    )
    .map_err(|e| ApiError::invalid(e.field, e.message))?;
    state
        .webhook_destinations
        .check_url(&body.url)
        .await
        .map_err(|rule| ApiError::invalid("url", format!("url: {rule}")))?;
    let key = webhooks::secrets::SecretsKey::load(&state.pool)
        .await
        .map_err(|e| match e {
            store::privacy::KeyStoreError::Database(e) => database(e),
            other => {
                tracing::error!(error = %other, "the webhook secrets key is unusable");
                ApiError::unavailable("the key store is unusable; try again shortly")
            }
        })?;
    let (stored, created) = webhooks::put(&state.pool, &subscription, &key, state.commands.now())
        .await
        .map_err(database)?;
    tracing::info!(subscription = %subscription.id(), created, "webhook subscription put");
    Ok(Json(stored.into()))
}

/// Unsubscribe: the subscription and its deliveries are deleted.
#[utoipa::path(delete, path = "/v1/webhooks/{subscription_id}", tag = "webhooks",
    params(("subscription_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    principal.require(&[Role::Admin])?;
    if webhooks::delete(&state.pool, &id).await.map_err(database)? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("no such subscription"))
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// At most this many, newest first (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveriesOut {
    pub subscription_id: String,
    pub paused_at: Option<DateTime<Utc>>,
    pub deliveries: Vec<DeliveryOut>,
}

/// One delivery: the same `id` on every attempt (the body's `id` and `webhook-id`).
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryOut {
    #[schema(example = "msg_0193f3c65b0e7a519a0e2c1c1f8b4a10")]
    pub id: String,
    #[serde(rename = "type")]
    #[schema(example = "reservation.confirmed")]
    pub event_type: String,
    /// `pending` (not tried yet), `retrying`, `delivered` or `failed`.
    #[schema(example = "delivered")]
    pub state: &'static str,
    pub attempts: i32,
    /// The receiver's last answer (none: it could not be reached or did not answer).
    pub last_status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// A subscription's delivery log, newest first.
#[utoipa::path(get, path = "/v1/webhooks/{subscription_id}/deliveries", tag = "webhooks",
    params(("subscription_id" = String, Path), DeliveriesQuery),
    responses((status = 200, body = DeliveriesOut), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn deliveries(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<DeliveriesQuery>,
) -> Result<Json<DeliveriesOut>, ApiError> {
    principal.require(&[Role::Admin])?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 1000"));
    }
    let subscription = webhooks::get(&state.pool, &id)
        .await
        .map_err(database)?
        .ok_or_else(|| ApiError::not_found("no such subscription"))?;
    let rows = webhooks::deliveries(&state.pool, &id, limit)
        .await
        .map_err(database)?;
    Ok(Json(DeliveriesOut {
        subscription_id: subscription.id,
        paused_at: subscription.paused_at,
        deliveries: rows
            .into_iter()
            .map(|d| DeliveryOut {
                id: d.delivery_id,
                event_type: d.event_type,
                state: d.state,
                attempts: d.attempts,
                last_status: d.last_status,
                last_error: d.last_error,
                created_at: d.created_at,
                delivered_at: d.delivered_at,
            })
            .collect(),
    }))
}

/// Send a delivery again now, with a new day of retries (a failed one too).
#[utoipa::path(post, path = "/v1/webhooks/{subscription_id}/deliveries/{delivery_id}/retry",
    tag = "webhooks",
    params(("subscription_id" = String, Path), ("delivery_id" = String, Path)),
    responses((status = 202), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn retry(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, delivery)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    principal.require(&[Role::Admin])?;
    let retried = webhooks::retry(
        &state.pool,
        &id,
        &delivery,
        state.commands.now(),
        state.webhook_retry_window,
    )
    .await
    .map_err(database)?;
    if retried {
        Ok(StatusCode::ACCEPTED)
    } else {
        Err(ApiError::not_found("no such delivery of this subscription"))
    }
}
