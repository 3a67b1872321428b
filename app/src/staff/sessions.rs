//! Staff sessions: what a sign-in gives the browser, and what every later request is
//! checked against.
//!
//! A session is two random secrets. The *token* goes into an HttpOnly cookie, so no
//! script reads it; the table keeps only its SHA-256, so a copy of the table signs no
//! one in. The *CSRF token* is handed to the page, which sends it in a header with every
//! write: a page on another site can make a browser send the cookie (SameSite=Strict
//! already stops that in today's browsers) but can never read the CSRF token, so a
//! forged write fails even where the cookie's attribute is not honoured.
//!
//! A session lasts at most [`LIFETIME`] (a shift), ends after [`IDLE`] without a
//! request, at sign-out, and when its account is disabled. A check is one read; the
//! request is recorded (`last_seen_at`) only when the last record is more than
//! [`SEEN_EVERY`] old, so a console polling every two seconds writes a row a minute, not
//! thirty, and idleness is measured to within that minute.

use chrono::{DateTime, Duration, Utc};
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::{Staff, StaffError, StaffRole};

/// The longest a session lasts from its sign-in.
pub const LIFETIME: Duration = Duration::hours(12);
/// A session unused this long has ended.
pub const IDLE: Duration = Duration::hours(2);
/// How stale `last_seen_at` may get before a request records itself.
pub const SEEN_EVERY: Duration = Duration::minutes(1);

/// A session just opened: the secrets to hand to the browser, once.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// The cookie's value.
    pub token: String,
    pub csrf_token: String,
    pub expires_at: DateTime<Utc>,
}

/// A live session and the person it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub staff: Staff,
    pub csrf_token: String,
    pub expires_at: DateTime<Utc>,
}

fn secret(prefix: &str) -> String {
    let mut bytes = [0_u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Opens a session for `staff_id` at `now`.
pub async fn open(
    pool: &PgPool,
    staff_id: Uuid,
    now: DateTime<Utc>,
) -> Result<NewSession, StaffError> {
    let session = NewSession {
        token: secret("ses_"),
        csrf_token: secret("csrf_"),
        expires_at: now + LIFETIME,
    };
    sqlx::query(
        "INSERT INTO staff_sessions
             (token_hash, staff_id, csrf_token, created_at, expires_at, last_seen_at)
         VALUES ($1, $2, $3, $4, $5, $4)",
    )
    .bind(token_hash(&session.token))
    .bind(staff_id)
    .bind(&session.csrf_token)
    .bind(now)
    .bind(session.expires_at)
    .execute(pool)
    .await?;
    Ok(session)
}

/// The live session `token` names at `now` (recording the request), or `None` if it is
/// unknown, expired, idle too long, revoked, or its account disabled.
pub async fn find(
    pool: &PgPool,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Option<Session>, StaffError> {
    let hash = token_hash(token);
    let row = sqlx::query(
        "SELECT p.staff_id, p.email, p.name, p.role, s.csrf_token, s.expires_at,
                s.last_seen_at
           FROM staff_sessions AS s JOIN staff AS p ON p.staff_id = s.staff_id
          WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND p.disabled_at IS NULL
            AND s.expires_at > $2 AND s.last_seen_at > $2 - $3::interval",
    )
    .bind(&hash)
    .bind(now)
    .bind(format!("{} seconds", IDLE.num_seconds()))
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let last_seen: DateTime<Utc> = row.try_get("last_seen_at")?;
    if now - last_seen > SEEN_EVERY {
        // Never moves it back (a request answered late by another server).
        sqlx::query(
            "UPDATE staff_sessions SET last_seen_at = greatest(last_seen_at, $2)
              WHERE token_hash = $1",
        )
        .bind(&hash)
        .bind(now)
        .execute(pool)
        .await?;
    }
    let role: String = row.try_get("role")?;
    Ok(Some(Session {
        staff: Staff {
            staff_id: row.try_get("staff_id")?,
            email: row.try_get("email")?,
            name: row.try_get("name")?,
            role: StaffRole::parse(&role)
                .ok_or_else(|| StaffError::Hashing(format!("a stored role {role:?} unknown")))?,
        },
        csrf_token: row.try_get("csrf_token")?,
        expires_at: row.try_get("expires_at")?,
    }))
}

/// Ends the session `token` names (sign-out). Whether there was a live one.
pub async fn revoke(pool: &PgPool, token: &str, now: DateTime<Utc>) -> Result<bool, StaffError> {
    let done = sqlx::query(
        "UPDATE staff_sessions SET revoked_at = $2
          WHERE token_hash = $1 AND revoked_at IS NULL",
    )
    .bind(token_hash(token))
    .bind(now)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() > 0)
}
