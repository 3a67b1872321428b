//! Extractors that turn every malformed request into an `ApiError` with the contract's
//! error shape (axum's own rejections answer in plain text).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;

use super::error::ApiError;
use crate::queries::Lsn;
use crate::write::IdempotencyKey;

/// `axum::Json`, answering bad bodies in the contract's shape.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// `axum::extract::Query`, answering bad query strings in the contract's shape.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `axum::extract::Path`, answering bad path segments in the contract's shape.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::JsonDataError(e) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_request",
                format!("the body does not fit the request: {}", e.body_text()),
            ),
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ),
            JsonRejection::BytesRejection(e) => ApiError::new(
                e.status(),
                "malformed_request",
                format!("the body could not be read: {}", e.body_text()),
            ),
            other => ApiError::bad_request(
                "malformed_json",
                format!("the body is not valid JSON: {}", other.body_text()),
            ),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request(
            "malformed_request",
            format!("bad query string: {}", rejection.body_text()),
        )
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request(
            "malformed_request",
            format!("bad path: {}", rejection.body_text()),
        )
    }
}

/// The `Idempotency-Key` header, required on every POST that changes state.
#[derive(Debug, Clone)]
pub struct Idempotency(pub IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for Idempotency {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let value = parts.headers.get("idempotency-key").ok_or_else(|| {
            ApiError::bad_request(
                "missing_idempotency_key",
                "this request changes state: send an Idempotency-Key header (1 to 255 printable ASCII characters)",
            )
        })?;
        let text = value.to_str().map_err(|_| invalid_key())?;
        IdempotencyKey::parse(text)
            .map(Idempotency)
            .map_err(|_| invalid_key())
    }
}

fn invalid_key() -> ApiError {
    ApiError::bad_request(
        "invalid_idempotency_key",
        "Idempotency-Key must be 1 to 255 printable ASCII characters",
    )
}

/// The `Consistency-Token` header: a token a write answered (with a read replica
/// configured). A read that presents it is answered from data that includes that
/// write (see `queries::replica`); without it, the replica answers as of its `as_of`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Consistency(pub Option<Lsn>);

impl<S: Send + Sync> FromRequestParts<S> for Consistency {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(CONSISTENCY_TOKEN) else {
            return Ok(Self(None));
        };
        value
            .to_str()
            .ok()
            .and_then(Lsn::parse)
            .map(|token| Self(Some(token)))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_consistency_token",
                    "Consistency-Token must be a token a write answered, such as 16/B374D848",
                )
            })
    }
}

/// The header a write answers and a read may present.
pub const CONSISTENCY_TOKEN: &str = "consistency-token";
