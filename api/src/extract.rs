//! Extractors that turn every malformed request into an `ApiError` with the contract's
//! error shape (axum's own rejections answer in plain text).

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::DeserializeOwned;

use super::error::ApiError;
use app::queries::Lsn;
use store::write::IdempotencyKey;

/// A JSON body, answering a bad one in the contract's shape: not JSON at all is 400
/// `malformed_json`; JSON that does not fit the request (a missing field, a value of
/// the wrong type, a date that does not exist) is 422 `invalid_request` naming the
/// `field`, exactly as the same mistake in a query string is (see [`ApiQuery`]).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

/// A query string, answering a bad one as a body's mistakes are answered: 422
/// `invalid_request` naming the `field`.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

/// `axum::extract::Path`, answering bad path segments in the contract's shape.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !json_content_type(request.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(unreadable_body)?;
        let mut json = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut json).map_err(|e| {
            let (path, inner) = (e.path().to_string(), e.into_inner());
            match inner.classify() {
                serde_json::error::Category::Data => misfit(&path, &inner.to_string()),
                _ => not_json(&inner),
            }
        })?;
        json.end().map_err(|e| not_json(&e))?;
        Ok(Self(value))
    }
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(pairs)
            .map(Self)
            .map_err(|e| misfit(&e.path().to_string(), &e.inner().to_string()))
    }
}

/// `application/json`, or a `+json` type, whatever its parameters.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn unreadable_body(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the body is larger than the 64 KiB a request may carry",
        );
    }
    ApiError::new(
        rejection.status(),
        "malformed_request",
        format!("the body could not be read: {}", rejection.body_text()),
    )
}

fn not_json(e: &serde_json::Error) -> ApiError {
    ApiError::bad_request(
        "malformed_json",
        format!(
            "the body is not valid JSON: {} at line {} column {}",
            syntax_words(e),
            e.line(),
            e.column()
        ),
    )
}

/// What serde_json says of a syntax error, without its position (given apart).
fn syntax_words(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// A body or query that is well formed but does not fit the request: 422
/// `invalid_request`, naming the field (`guest.email`, `updates[2].start_date`) and
/// the rule in the API's words rather than the deserializer's.
fn misfit(path: &str, message: &str) -> ApiError {
    let (field, rule) = in_api_words(path, message);
    match field {
        Some(field) => ApiError::invalid(&field, format!("{field}: {rule}")),
        None => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", rule),
    }
}

/// The field a deserializer's complaint is about and what it says, as the API says
/// it: the type names of the code (`u32`, `struct CreateReservation`, chrono's parse
/// errors) become what a client can act on.
pub(crate) fn in_api_words(path: &str, message: &str) -> (Option<String>, String) {
    // serde_path_to_error names the root ".", and fields with dots and `[i]`.
    let at = (path != "." && !path.is_empty()).then(|| path.to_owned());
    let quoted = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('`').next())
            .map(str::to_owned)
    };
    let under = |name: String| match &at {
        Some(parent) => format!("{parent}.{name}"),
        None => name,
    };
    // Missing, unknown and repeated fields name the field in the message itself.
    if let Some(name) = quoted("missing field `") {
        return (Some(under(name)), "is required".to_owned());
    }
    if let Some(name) = quoted("unknown field `") {
        let known = message
            .split_once("expected ")
            .map(|(_, list)| format!(" (the fields are {list})"))
            .unwrap_or_default();
        return (
            Some(under(name)),
            format!("is not a field of this request{known}"),
        );
    }
    if let Some(name) = quoted("duplicate field `") {
        return (Some(under(name)), "is given twice".to_owned());
    }
    if let Some(value) = quoted("unknown variant `") {
        let known = message
            .split_once("expected ")
            .map(|(_, list)| format!("; it must be {list}"))
            .unwrap_or_default();
        return (
            at,
            format!("{value:?} is not one of the values allowed{known}"),
        );
    }
    let Some(field) = at else {
        // The root itself: the body is not the object a request is.
        if message.contains("expected struct") || message.contains("expected a map") {
            return (None, "the body must be a JSON object".to_owned());
        }
        return (None, format!("the request does not fit: {message}"));
    };
    let lower = message.to_ascii_lowercase();
    let rule = if is_date_error(&lower) && field.ends_with("_at") {
        // Instants are named `..._at`; dates are not.
        "must be an instant, written RFC 3339 (2027-05-02T10:00:00Z)".to_owned()
    } else if is_date_error(&lower) {
        "must be a date that exists, written YYYY-MM-DD".to_owned()
    } else if lower.contains("invalid digit")
        || lower.contains("cannot parse integer")
        || lower.contains("invalid type") && expects_integer(&lower)
    {
        "must be a whole number".to_owned()
    } else if lower.contains("too large") || lower.contains("too small") {
        "is out of range".to_owned()
    } else if lower.contains("invalid value") && expects_integer(&lower) {
        "must be a whole number in range".to_owned()
    } else if lower.contains("expected a string") || lower.contains("expected a borrowed string") {
        "must be text".to_owned()
    } else if lower.contains("expected a boolean")
        || lower.contains("provided string was not `true`")
    {
        "must be true or false".to_owned()
    } else if lower.contains("expected a sequence") {
        "must be a list".to_owned()
    } else if lower.contains("expected struct") || lower.contains("expected a map") {
        "must be a JSON object".to_owned()
    } else if lower.contains("expected f64") || lower.contains("invalid float") {
        "must be a number".to_owned()
    } else {
        // A complaint of a field's own parser (an id, an e-mail): it is in the API's
        // words already.
        message.to_owned()
    };
    (Some(field), rule)
}

/// chrono's and the date fields' complaints.
fn is_date_error(lower: &str) -> bool {
    [
        "input contains invalid characters",
        "input is out of range",
        "premature end of input",
        "trailing input",
        "input is not enough",
        "no possible date and time",
        "expected a formatted date",
        "expected a date",
    ]
    .iter()
    .any(|words| lower.contains(words))
}

fn expects_integer(lower: &str) -> bool {
    [
        "expected u8",
        "expected u16",
        "expected u32",
        "expected u64",
        "expected usize",
        "expected i8",
        "expected i16",
        "expected i32",
        "expected i64",
        "expected isize",
    ]
    .iter()
    .any(|t| lower.contains(t))
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        use axum::extract::path::ErrorKind;
        let value_of = |value: &str, expected: &str| {
            let what = if expected.starts_with('i') || expected.starts_with('u') {
                "a whole number"
            } else {
                "a valid value"
            };
            format!("{value:?} in the path is not {what}")
        };
        let message = match &rejection {
            PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
                ErrorKind::ParseErrorAtKey {
                    value,
                    expected_type,
                    ..
                }
                | ErrorKind::ParseErrorAtIndex {
                    value,
                    expected_type,
                    ..
                }
                | ErrorKind::ParseError {
                    value,
                    expected_type,
                } => value_of(value, expected_type),
                ErrorKind::InvalidUtf8InPathParam { .. } => {
                    "the path is not valid UTF-8 once decoded".to_owned()
                }
                _ => "the path does not name anything this API serves".to_owned(),
            },
            _ => "the path does not name anything this API serves".to_owned(),
        };
        ApiError::bad_request("malformed_request", message)
    }
}

/// The `Idempotency-Key` header as the OpenAPI document describes it, declared once for
/// every route that takes one (`params(IdempotencyKeyHeader, ...)`); [`Idempotency`]
/// is what reads it.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// 1..=255 printable ASCII; one per intent.
    #[serde(rename = "Idempotency-Key")]
    #[param(min_length = 1, max_length = 255, pattern = r"^[ -~]+$")]
    pub idempotency_key: String,
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
