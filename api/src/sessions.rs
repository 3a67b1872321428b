//! Staff as people: signing in and out of the console, and the admins' list of staff
//! accounts.
//!
//! A sign-in (`POST /v1/sessions`, e-mail and password) sets the `session` cookie:
//! HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it),
//! Path=/, and Secure except on a loopback address (where a browser talks plain HTTP to
//! a server on the same machine). Its answer carries the session's CSRF token, which the
//! console sends with every write (see [`crate::auth`]). Sign-out revokes the session in
//! the database, so a copied cookie is worth nothing after it.

use app::staff::{self, StaffRole};
use axum::extract::State;
use axum::http::header::{HOST, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::auth::{cookie, Principal, Role, SESSION_COOKIE};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath};
use crate::state::AppState;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(sign_in))
        .routes(routes!(current_session, sign_out))
        .routes(routes!(list_staff, create_staff))
        .routes(routes!(disable_staff))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    #[schema(example = "ana@hotel.example", max_length = 254)]
    pub email: String,
    #[schema(example = "a long pass phrase", max_length = 1024)]
    pub password: String,
}

/// A staff member as the API shows them (never their password or its hash).
#[derive(Debug, Serialize, ToSchema)]
pub struct StaffOut {
    pub staff_id: Uuid,
    pub email: String,
    pub name: String,
    /// `admin`, `revenue`, `front_desk` or `auditor`.
    #[schema(example = "revenue")]
    pub role: String,
}

impl From<staff::Staff> for StaffOut {
    fn from(s: staff::Staff) -> Self {
        Self {
            staff_id: s.staff_id,
            email: s.email,
            name: s.name,
            role: s.role.as_str().to_owned(),
        }
    }
}

/// A session just opened.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionOut {
    pub staff: StaffOut,
    /// Send it as `X-CSRF-Token` with every write made with this session.
    pub csrf_token: String,
    /// The session ends then at the latest (and after two idle hours).
    pub expires_at: DateTime<Utc>,
}

/// An answer carrying a session's CSRF token is kept by no cache.
const NO_STORE: (axum::http::HeaderName, HeaderValue) = (
    axum::http::header::CACHE_CONTROL,
    HeaderValue::from_static("no-store"),
);

/// Passwords longer than this are refused before hashing (hashing is costly by design).
const MAX_PASSWORD: usize = 1024;

/// Whether the request named this machine (a loopback host): the only place the cookie
/// goes without `Secure`, since a browser there speaks plain HTTP to the server.
fn loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

fn session_cookie(
    state: &AppState,
    headers: &HeaderMap,
    value: &str,
    max_age_seconds: i64,
) -> HeaderValue {
    let secure = if loopback(headers) && !state.secure_cookies_always {
        ""
    } else {
        "; Secure"
    };
    let text = format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_seconds}{secure}"
    );
    // The value is hex and the attributes fixed: always a valid header.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Sign in with an e-mail and password: sets the `session` cookie. Five wrong passwords
/// in a row lock the account for 15 minutes (423 `account_locked`, with `locked_until`).
#[utoipa::path(post, path = "/v1/sessions", tag = "staff",
    request_body = SignIn,
    responses(
        (status = 201, body = SessionOut, description = "signed in; `Set-Cookie: session=…; HttpOnly; SameSite=Strict`"),
        (status = 400, body = ErrorBody),
        (status = 401, description = "wrong_credentials: the e-mail or the password is wrong", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody),
        (status = 423, description = "account_locked, with `locked_until`", body = ErrorBody),
        Unavailable))]
pub async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SignIn>,
) -> Result<Response, ApiError> {
    if body.email.len() > 254 {
        return Err(ApiError::invalid("email", "email: at most 254 characters"));
    }
    if body.password.len() > MAX_PASSWORD {
        return Err(ApiError::invalid(
            "password",
            format!("password: at most {MAX_PASSWORD} bytes"),
        ));
    }
    let now = state.commands.now();
    let person = staff::sign_in(&state.pool, &body.email, &body.password, now).await?;
    // A browser holds one session: the one it had before this sign-in ends.
    if let Some(old) = cookie(&headers, SESSION_COOKIE) {
        staff::sessions::revoke(&state.pool, old, now).await?;
    }
    let session = staff::sessions::open(&state.pool, person.staff_id, now).await?;
    tracing::info!(staff_id = %person.staff_id, "staff signed in");
    let cookie = session_cookie(
        &state,
        &headers,
        &session.token,
        staff::sessions::LIFETIME.num_seconds(),
    );
    let body = SessionOut {
        staff: person.into(),
        csrf_token: session.csrf_token,
        expires_at: session.expires_at,
    };
    Ok((
        StatusCode::CREATED,
        [(SET_COOKIE, cookie), NO_STORE],
        Json(body),
    )
        .into_response())
}

/// The browser's session, if it has a live one: 200 with the person and the CSRF token
/// (a reloaded console page takes them back from here), 204 if it has none. Never 401:
/// a page asking whether it is signed in is not refused.
#[utoipa::path(get, path = "/v1/sessions/current", tag = "staff",
    responses((status = 200, body = SessionOut), (status = 204, description = "no live session"),
        Unavailable))]
pub async fn current_session(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(token) = cookie(&headers, SESSION_COOKIE) else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    match staff::sessions::find(&state.pool, token, state.commands.now()).await? {
        Some(session) => Ok((
            [NO_STORE],
            Json(SessionOut {
                staff: session.staff.into(),
                csrf_token: session.csrf_token,
                expires_at: session.expires_at,
            }),
        )
            .into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// Sign out: the session is revoked (its cookie signs nothing in again) and cleared.
#[utoipa::path(delete, path = "/v1/sessions/current", tag = "staff",
    responses((status = 204, description = "signed out"),
        (status = 401, body = ErrorBody),
        (status = 403, description = "csrf_failed", body = ErrorBody),
        Unavailable))]
pub async fn sign_out(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(token) = principal
        .staff_id
        .and_then(|_| cookie(&headers, SESSION_COOKIE))
    else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_session",
            "signed in with a token, not a staff session: there is nothing to sign out of",
        ));
    };
    staff::sessions::revoke(&state.pool, token, state.commands.now()).await?;
    let cookie = session_cookie(&state, &headers, "", 0);
    Ok((StatusCode::NO_CONTENT, [(SET_COOKIE, cookie)]).into_response())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListedOut {
    #[serde(flatten)]
    pub staff: StaffOut,
    pub created_at: DateTime<Utc>,
    /// When the account was disabled; null while it may sign in.
    pub disabled_at: Option<DateTime<Utc>>,
    /// Locked by wrong passwords until then; null if not locked now.
    pub locked_until: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StaffList {
    pub staff: Vec<ListedOut>,
}

/// Every staff account (admin).
#[utoipa::path(get, path = "/v1/staff", tag = "staff",
    responses((status = 200, body = StaffList), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn list_staff(
    State(state): State<AppState>,
    principal: Principal,
) -> Result<Json<StaffList>, ApiError> {
    principal.require(&[Role::Admin])?;
    let now = state.commands.now();
    let staff = staff::list(&state.pool)
        .await?
        .into_iter()
        .map(|l| ListedOut {
            staff: l.staff.into(),
            created_at: l.created_at,
            disabled_at: l.disabled_at,
            locked_until: l.locked_until.filter(|until| *until > now),
        })
        .collect();
    Ok(Json(StaffList { staff }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewStaff {
    /// An e-mail address (a domain with a dot inside it): one account per address, in
    /// any case.
    #[schema(
        example = "ana@hotel.example",
        min_length = 5,
        max_length = 254,
        pattern = r"^[^@\s\u0000-\u001F\u007F-\u009F]+@[^@\s.\u0000-\u001F\u007F-\u009F][^@\s\u0000-\u001F\u007F-\u009F]*\.[^@\s\u0000-\u001F\u007F-\u009F]*[^@\s.\u0000-\u001F\u007F-\u009F]$"
    )]
    pub email: String,
    #[schema(
        example = "Ana Lima",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub name: String,
    /// `admin`, `revenue`, `front_desk` or `auditor`.
    #[schema(schema_with = super::schema::staff_role)]
    pub role: String,
    /// At least 12 characters; only its Argon2id hash is kept.
    #[schema(min_length = 12, max_length = 1024)]
    pub password: String,
}

/// Create a staff account (admin).
#[utoipa::path(post, path = "/v1/staff", tag = "staff",
    request_body = NewStaff,
    responses((status = 201, body = StaffOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, description = "email_taken", body = ErrorBody),
        (status = 415, body = ErrorBody), (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn create_staff(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<NewStaff>,
) -> Result<(StatusCode, Json<StaffOut>), ApiError> {
    principal.require(&[Role::Admin])?;
    let role = StaffRole::parse(&body.role).ok_or_else(|| {
        ApiError::invalid(
            "role",
            "role: must be admin, revenue, front_desk or auditor",
        )
    })?;
    if body.password.len() > MAX_PASSWORD {
        return Err(ApiError::invalid(
            "password",
            format!("password: at most {MAX_PASSWORD} bytes"),
        ));
    }
    let created = staff::create(&state.pool, &body.email, &body.name, role, &body.password).await?;
    tracing::info!(staff_id = %created.staff_id, by = %principal.name, "staff account created");
    Ok((StatusCode::CREATED, Json(created.into())))
}

/// Disable a staff account (admin): it can no longer sign in, and its sessions end now.
/// Its name stays in the history it made.
#[utoipa::path(delete, path = "/v1/staff/{staff_id}", tag = "staff",
    params(("staff_id" = Uuid, Path)),
    responses((status = 204, description = "disabled"), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "own_account: an admin disabling themselves", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn disable_staff(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(raw): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    principal.require(&[Role::Admin])?;
    let staff_id =
        Uuid::parse_str(&raw).map_err(|_| ApiError::not_found("no such staff account"))?;
    if principal.staff_id == Some(staff_id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "own_account",
            "an admin cannot disable their own account (another admin can)",
        ));
    }
    if staff::disable(&state.pool, staff_id, state.commands.now()).await? {
        tracing::info!(%staff_id, by = %principal.name, "staff account disabled");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("no such staff account"))
    }
}
