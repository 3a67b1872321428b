//! Paying for a hold: `POST /v1/reservations/{id}/confirm` runs the payment saga, and
//! `POST /v1/payments/webhook` is where the gateway reports results it could not give
//! in time (and repeats the ones it did).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{Principal, Role};
use super::bodies::ReservationOut;
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath, Idempotency, IdempotencyKeyHeader};
use super::params::reservation_id;
use super::reservations::{answer, caller, client_scope};
use crate::state::AppState;
use app::payments::gateway::PaymentToken;
use app::payments::{signature, PaymentResult, WebhookNotice, WebhookResult, WebhookStatus};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Confirming with a card, and the gateway's callback.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(confirm))
        .routes(routes!(webhook))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ConfirmReservation {
    /// The card, tokenized by the payment provider. With the simulated provider:
    /// `tok_ok` authorizes, `tok_decline` is declined, `tok_timeout` answers late
    /// (through the webhook).
    #[schema(example = "tok_ok", pattern = r"^tok_[A-Za-z0-9_]{1,100}$")]
    pub payment_token: String,
}

/// Pay for a held reservation and confirm it. The total is authorized with the payment
/// provider outside any transaction; a retry never charges twice.
#[utoipa::path(post, path = "/v1/reservations/{reservation_id}/confirm", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path),
        IdempotencyKeyHeader),
    request_body = ConfirmReservation,
    responses(
        (status = 200, description = "paid and confirmed", body = ReservationOut),
        (status = 202, description = "the provider has not answered yet; still held, the result arrives through the webhook", body = ReservationOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 402, description = "payment_declined: the hold was released", body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "hold_expired (nothing is charged), invalid_state, request_in_flight", body = ErrorBody),
        (status = 415, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, description = "the database or the payment provider is unavailable; nothing was charged", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn confirm(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    Idempotency(key): Idempotency,
    ApiJson(body): ApiJson<ConfirmReservation>,
) -> Result<Response, ApiError> {
    principal.require(&[Role::Channel, Role::Admin])?;
    let caller = caller(&principal)?;
    let id = reservation_id(&id)?;
    let token = PaymentToken::parse(&body.payment_token)?;
    let reply = state
        .payments
        .confirm(&caller, &client_scope(&principal), key, id, token)
        .await??;
    metrics::counter!("confirmations_total", "result" => format!("{:?}", reply.result).to_lowercase())
        .increment(1);
    Ok(match reply.result {
        PaymentResult::Confirmed => (
            StatusCode::OK,
            Json(answer(&state, &principal, reply.reservation).await?),
        )
            .into_response(),
        PaymentResult::Pending => (
            StatusCode::ACCEPTED,
            Json(answer(&state, &principal, reply.reservation).await?),
        )
            .into_response(),
        PaymentResult::Declined => ApiError::new(
            StatusCode::PAYMENT_REQUIRED,
            "payment_declined",
            "the card was declined; the hold was released",
        )
        .with("reservation_id", reply.reservation.reservation_id)
        .with("status", reply.reservation.status)
        .into_response(),
    })
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookIn {
    /// 1 to 255 printable ASCII characters, no spaces.
    #[schema(
        example = "sim_00000001",
        min_length = 1,
        max_length = 255,
        pattern = r"^[!-~]+$"
    )]
    pub provider_txn_id: String,
    pub reservation_id: uuid::Uuid,
    /// `authorized` or `declined`.
    #[schema(example = "authorized")]
    pub status: WebhookStatus,
    #[schema(minimum = 0)]
    pub amount_cents: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookOut {
    /// `confirmed`, `refunded` (the authorization could not be kept and is given back),
    /// `declined`, `ignored` (already known) or `duplicate` (delivered before).
    #[schema(example = "confirmed")]
    pub result: WebhookResult,
    /// The reservation's status after it.
    #[schema(example = "confirmed")]
    pub reservation_status: Option<String>,
}

/// The payment provider reports an authorization result. Signed with `X-Signature`:
/// the hex HMAC-SHA256 of the raw body under `PAYMENT_WEBHOOK_SECRET`. Delivered at
/// least once: a repeat is acknowledged and changes nothing.
#[utoipa::path(post, path = "/v1/payments/webhook", tag = "payments",
    request_body = WebhookIn,
    params(("X-Signature" = String, Header, description = "hex HMAC-SHA256 of the body (`sha256=` before it is optional)")),
    responses(
        (status = 200, body = WebhookOut),
        (status = 400, body = ErrorBody),
        (status = 401, description = "missing or wrong signature", body = ErrorBody),
        (status = 403, description = "no webhook secret is configured", body = ErrorBody),
        (status = 404, description = "unknown reservation", body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable))]
pub async fn webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<WebhookOut>, ApiError> {
    let Some(secret) = state.webhook_secret.as_deref() else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "webhook_disabled",
            "no PAYMENT_WEBHOOK_SECRET is configured; webhooks are refused",
        ));
    };
    let signed = headers
        .get("x-signature")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|sig| signature::verify(secret.as_bytes(), &body, sig));
    if !signed {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
            "X-Signature must be the hex HMAC-SHA256 of the body under the shared secret",
        ));
    }
    let notice: WebhookIn = serde_json::from_slice(&body).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::bad_request("malformed_json", format!("the body is not JSON: {e}"))
        } else {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("the body does not match the webhook: {e}"),
            )
        }
    })?;
    let printable = |s: &str| s.bytes().all(|b| (0x21..0x7f).contains(&b));
    if notice.provider_txn_id.is_empty()
        || notice.provider_txn_id.len() > 255
        || !printable(&notice.provider_txn_id)
    {
        return Err(ApiError::invalid(
            "provider_txn_id",
            "provider_txn_id: 1 to 255 printable ASCII characters without spaces",
        ));
    }
    if notice.amount_cents < 0 {
        return Err(ApiError::invalid(
            "amount_cents",
            "amount_cents: must not be negative",
        ));
    }
    let (result, view) = state
        .payments
        .apply_webhook(WebhookNotice {
            provider_txn_id: notice.provider_txn_id,
            reservation_id: aggregates::ReservationId::from_uuid(notice.reservation_id),
            status: notice.status,
            amount_cents: notice.amount_cents,
        })
        .await?;
    Ok(Json(WebhookOut {
        result,
        reservation_status: view.map(|v| v.status.as_str().to_owned()),
    }))
}
