//! The one API error type. Every way a request can fail — a domain rejection, a bad
//! request, an auth failure, an infrastructure outage — becomes an `ApiError`, and this
//! file alone decides its status code and its `{"error", "message", ...}` body.

use aggregates::Rejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use app::queries::QueryError;
use store::error::CommandError;

/// The answer every route that reaches the database may give while it is down: `503
/// unavailable`, with `Retry-After`. Declared once for the OpenAPI document and listed in
/// each route's `responses(...)`; never built (the error type answers it).
#[derive(utoipa::IntoResponses)]
#[response(
    status = 503,
    description = "The database is unavailable: nothing was changed; retry after `Retry-After` seconds"
)]
pub struct Unavailable(pub ErrorBody);

/// The error body every endpoint returns: a stable code for programs, a message for
/// people, and sometimes details (`night`, `total_cents`, `status`, `field`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code, e.g. `sold_out`.
    #[schema(example = "sold_out")]
    pub error: String,
    /// Explanation for a person.
    pub message: String,
}

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Map<String, Value>,
    retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: Map::new(),
            retry_after: None,
        }
    }

    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.details.insert(
            key.to_owned(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
        self
    }

    /// The same error about a field inside `prefix` (`updates[2]`): its `field` and
    /// message name the full path, so a client finds what to fix in a long request.
    pub fn in_field(mut self, prefix: &str) -> Self {
        if let Some(Value::String(field)) = self.details.get("field") {
            let full = format!("{prefix}.{field}");
            self.message = format!("{prefix}: {}", self.message);
            self.details.insert("field".to_owned(), Value::String(full));
        } else {
            self.message = format!("{prefix}: {}", self.message);
        }
        self
    }

    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message).with("field", field)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message).retry_after(2)
    }

    /// 429: too many holds by one guest; `Retry-After` and `retry_after_seconds` say when
    /// the next one is allowed.
    pub fn rate_limited(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
            .with("retry_after_seconds", retry_after_seconds)
            .retry_after(retry_after_seconds)
    }
}

impl From<aggregates::InvalidInput> for ApiError {
    fn from(e: aggregates::InvalidInput) -> Self {
        ApiError::invalid(e.field, format!("{}: {}", e.field, e.message))
    }
}

impl From<Rejection> for ApiError {
    fn from(rejection: Rejection) -> Self {
        let message = rejection.to_string();
        match rejection {
            // The cause's code and fields, with the line that refused and its message.
            Rejection::InLine {
                line,
                room_type_id,
                cause,
            } => {
                let mut error = ApiError::from(*cause)
                    .with("line", line)
                    .with("room_type_id", room_type_id);
                error.message = message;
                error
            }
            Rejection::SoldOut { night } => {
                ApiError::new(StatusCode::CONFLICT, "sold_out", message).with("night", night)
            }
            Rejection::PriceChanged { total_cents } => {
                ApiError::new(StatusCode::CONFLICT, "price_changed", message)
                    .with("total_cents", total_cents)
            }
            Rejection::UnknownHotel => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unknown_hotel", message)
            }
            Rejection::UnknownRoomType => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_room_type",
                message,
            ),
            Rejection::ReservationNotFound => ApiError::not_found(message),
            Rejection::ReservationExists => {
                ApiError::new(StatusCode::CONFLICT, "reservation_exists", message)
            }
            Rejection::InvalidState { status } => {
                ApiError::new(StatusCode::CONFLICT, "invalid_state", message).with("status", status)
            }
            Rejection::HoldExpired { expired_at } => {
                ApiError::new(StatusCode::CONFLICT, "hold_expired", message)
                    .with("expired_at", expired_at)
            }
            // The contract's code for every state a cancellation cannot leave; the
            // arrival date says why.
            Rejection::ArrivalEnded { arrival } => {
                ApiError::new(StatusCode::CONFLICT, "invalid_state", message)
                    .with("arrival_date", arrival)
            }
            Rejection::TooEarly { arrival } => {
                ApiError::new(StatusCode::CONFLICT, "too_early", message)
                    .with("arrival_date", arrival)
            }
            Rejection::StayEnded { departure } => {
                ApiError::new(StatusCode::CONFLICT, "invalid_state", message)
                    .with("departure_date", departure)
            }
            Rejection::HoldStillLive => {
                ApiError::new(StatusCode::CONFLICT, "invalid_state", message).with("status", "held")
            }
            Rejection::InventoryBelowReserved { night, reserved } => {
                ApiError::new(StatusCode::CONFLICT, "inventory_below_reserved", message)
                    .with("night", night)
                    .with("reserved", reserved)
            }
            Rejection::Restricted { restriction, night } => {
                ApiError::new(StatusCode::CONFLICT, "restricted", message)
                    .with("restriction", restriction.as_str())
                    .with("night", night)
            }
            // The contract's code, with what it is about.
            Rejection::PlanDoesNotSell {
                rate_plan_id,
                room_type_id,
            } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_rate_plan",
                message,
            )
            .with("rate_plan_id", rate_plan_id)
            .with("room_type_id", room_type_id),
            Rejection::UnknownRatePlan => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_rate_plan",
                message,
            ),
            Rejection::OccupancyExceeded { max_occupancy } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "occupancy_exceeded",
                message,
            )
            .with("max_occupancy", max_occupancy),
            Rejection::DerivedRatePlan => {
                ApiError::new(StatusCode::CONFLICT, "derived_rate_plan", message)
            }
            Rejection::NoInventory { night } => {
                ApiError::new(StatusCode::CONFLICT, "no_inventory", message).with("night", night)
            }
            // The payment service answers this itself (it asks the gateway); a client
            // meets it only if that is bypassed, and then the card was not asked.
            Rejection::PaymentRequired { shortfall_cents } => {
                ApiError::new(StatusCode::PAYMENT_REQUIRED, "payment_declined", message)
                    .with("shortfall_cents", shortfall_cents)
            }
            Rejection::RatePlanCycle { rate_plan_id } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "rate_plan_cycle", message)
                    .with("rate_plan_id", rate_plan_id)
            }
            Rejection::CurrencyInUse {
                currency,
                reservation_id,
            } => ApiError::new(StatusCode::CONFLICT, "currency_in_use", message)
                .with("currency", currency.code())
                .with("reservation_id", reservation_id),
            Rejection::BlockExhausted { night, remaining } => {
                ApiError::new(StatusCode::CONFLICT, "block_exhausted", message)
                    .with("night", night)
                    .with("remaining", remaining)
            }
            Rejection::BlockReleased { night } => {
                ApiError::new(StatusCode::CONFLICT, "block_released", message).with("night", night)
            }
            Rejection::BlockWasReleased => {
                ApiError::new(StatusCode::CONFLICT, "block_released", message)
            }
            Rejection::BelowPickup { night, picked_up } => {
                ApiError::new(StatusCode::CONFLICT, "below_pickup", message)
                    .with("night", night)
                    .with("picked_up", picked_up)
            }
            Rejection::BlockNotFound => ApiError::not_found(message),
            Rejection::BlockInCurrency { currency, code } => {
                ApiError::new(StatusCode::CONFLICT, "currency_in_use", message)
                    .with("currency", currency.code())
                    .with("block_code", code.as_str())
            }
            Rejection::BlockDatesFixed => {
                ApiError::new(StatusCode::CONFLICT, "block_booking_dates", message)
            }
            Rejection::Invalid(invalid) => ApiError::invalid(
                &invalid.field,
                format!("{}: {}", invalid.field, invalid.message),
            ),
        }
    }
}

impl From<CommandError> for ApiError {
    fn from(e: CommandError) -> Self {
        let message = e.to_string();
        match e {
            CommandError::Rejected(rejection) => rejection.into(),
            CommandError::KeyReused => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                message,
            ),
            CommandError::InFlight => {
                ApiError::new(StatusCode::CONFLICT, "request_in_flight", message).retry_after(1)
            }
            CommandError::Contention { .. } => {
                ApiError::new(StatusCode::CONFLICT, "try_again", message).retry_after(1)
            }
            CommandError::Forbidden => ApiError::forbidden(message),
            CommandError::PaymentUnavailable(reason) => {
                tracing::warn!(%reason, "payment gateway unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "payment_unavailable",
                    "the payment provider is unavailable; nothing was charged, try again shortly",
                )
                .retry_after(5)
            }
            CommandError::PaymentDeclined { shortfall_cents } => {
                ApiError::new(StatusCode::PAYMENT_REQUIRED, "payment_declined", message)
                    .with("shortfall_cents", shortfall_cents)
            }
            CommandError::OversoldRefused { constraint } => ApiError::new(
                StatusCode::CONFLICT,
                "oversold_refused",
                "the database refused this change as it would break an inventory rule; nothing was changed",
            )
            .with("constraint", constraint),
            CommandError::Database(e) => database(e),
            CommandError::Internal(detail) => {
                tracing::error!(%detail, "internal inconsistency");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "an internal error occurred; it has been logged",
                )
            }
        }
    }
}

/// A database failure is the dependency's, not the client's: 503 with `Retry-After`.
pub fn database(e: sqlx::Error) -> ApiError {
    tracing::warn!(error = %e, "database error");
    ApiError::unavailable("the database is unavailable; try again shortly")
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Database(e) => database(e),
            // Only a read of the replica answers this, and the primary is then asked:
            // reaching a client means the primary could not be.
            QueryError::NotReplayed => {
                ApiError::unavailable("the database is unavailable; try again shortly")
            }
            QueryError::Corrupt(detail) => {
                tracing::error!(%detail, "stored state unreadable");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "an internal error occurred; it has been logged",
                )
            }
        }
    }
}

impl From<app::staff::StaffError> for ApiError {
    fn from(e: app::staff::StaffError) -> Self {
        use app::staff::StaffError;
        let message = e.to_string();
        match e {
            StaffError::Invalid { field, .. } => ApiError::invalid(field, message),
            StaffError::EmailTaken => ApiError::new(StatusCode::CONFLICT, "email_taken", message),
            StaffError::WrongCredentials => {
                ApiError::new(StatusCode::UNAUTHORIZED, "wrong_credentials", message)
            }
            StaffError::LockedOut { until } => {
                ApiError::new(StatusCode::LOCKED, "account_locked", message)
                    .with("locked_until", until)
            }
            StaffError::Database(e) => database(e),
            StaffError::Busy => ApiError::unavailable(message),
            StaffError::Hashing(detail) => {
                tracing::error!(%detail, "staff account unreadable");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "an internal error occurred; it has been logged",
                )
            }
        }
    }
}

impl From<store::privacy::PrivacyError> for ApiError {
    fn from(e: store::privacy::PrivacyError) -> Self {
        match e {
            store::privacy::PrivacyError::Keys(store::privacy::KeyStoreError::Database(e)) => {
                database(e)
            }
            // Loud, never other data: stored personal data that does not open under its
            // live key was altered (or its key was).
            e => {
                tracing::error!(error = %e, "personal data does not open");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "an internal error occurred; it has been logged",
                )
            }
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        database(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".into(), json!(self.code));
        body.insert("message".into(), json!(self.message));
        body.extend(self.details);
        let mut response = (self.status, Json(Value::Object(body))).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No Argon2 turn for a sign-in (too many at once) is the server's, not the
    /// client's: 503 `unavailable` in the contract's error shape, with `Retry-After`.
    #[tokio::test]
    async fn a_staff_check_without_a_turn_is_503_unavailable_with_retry_after() {
        let busy = ApiError::from(app::staff::StaffError::Busy);

        let response = busy.into_response();

        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let header = |name: header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(header(header::RETRY_AFTER).as_deref(), Some("2"));
        assert!(
            header(header::CONTENT_TYPE).is_some_and(|t| t.starts_with("application/json")),
            "{:?}",
            header(header::CONTENT_TYPE)
        );
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the body");
        let body: Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(
            body,
            json!({
                "error": "unavailable",
                "message": app::staff::StaffError::Busy.to_string(),
            })
        );
    }
}
