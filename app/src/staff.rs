//! Staff accounts: the people who work the console, each with a role and a password
//! hashed with Argon2id (the PHC string keeps its salt and parameters, so a stronger
//! setting later still verifies the old hashes).
//!
//! A sign-in is checked here, and so is the lock-out: after [`MAX_FAILURES`] wrong
//! passwords in a row an account is locked for [`LOCK_OUT`], whatever password comes
//! next, so guessing costs a quarter of an hour per five tries. A right password
//! resets the count. An unknown e-mail costs as much time as a known one (a hash is
//! verified either way), so the answer's delay does not tell which addresses exist.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use chrono::{DateTime, Duration, Utc};
use rand::RngCore;
use sqlx::{PgPool, Row};
use uuid::Uuid;

pub mod sessions;

/// Wrong passwords in a row that lock an account.
pub const MAX_FAILURES: i32 = 5;
/// How long a locked account refuses every password.
pub const LOCK_OUT: Duration = Duration::minutes(15);
/// The shortest password accepted.
pub const MIN_PASSWORD: usize = 12;

/// What a staff member may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaffRole {
    /// Everything, staff accounts included.
    Admin,
    /// Inventory, rates, restrictions and blocks.
    Revenue,
    /// Arrivals and departures: check-in, check-out, no-show, cancellation.
    FrontDesk,
    /// Reads everything, changes nothing.
    Auditor,
}

impl StaffRole {
    pub const ALL: [Self; 4] = [Self::Admin, Self::Revenue, Self::FrontDesk, Self::Auditor];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Revenue => "revenue",
            Self::FrontDesk => "front_desk",
            Self::Auditor => "auditor",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// A staff account as stored (its password hash apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staff {
    pub staff_id: Uuid,
    pub email: String,
    pub name: String,
    pub role: StaffRole,
}

#[derive(Debug, thiserror::Error)]
pub enum StaffError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("a staff account with this e-mail exists already")]
    EmailTaken,
    #[error("the e-mail or the password is wrong")]
    WrongCredentials,
    #[error("too many wrong passwords: the account is locked until {until}")]
    LockedOut { until: DateTime<Utc> },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("password hashing failed: {0}")]
    Hashing(String),
}

fn invalid(field: &'static str, message: impl Into<String>) -> StaffError {
    StaffError::Invalid {
        field,
        message: message.into(),
    }
}

/// The Argon2id hash of `password`, with a fresh random salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String, StaffError> {
    let mut salt = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| StaffError::Hashing(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| StaffError::Hashing(e.to_string()))
}

/// Whether `password` is the one `hash` was made from (a malformed hash matches nothing).
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// [`verify_password`] on a blocking thread: a verification takes tens of milliseconds
/// of CPU on purpose, which must not hold up the requests sharing the runtime's threads.
async fn verify_off_runtime(password: &str, hash: String) -> bool {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || verify_password(&password, &hash))
        .await
        .unwrap_or(false)
}

/// A hash of no one's password, verified for an unknown e-mail so that it takes as long.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("no one's password at all").unwrap_or_default())
}

/// Creates a staff account. The e-mail is one account's (any case); the name 1 to 200
/// characters; the password at least [`MIN_PASSWORD`] characters.
pub async fn create(
    pool: &PgPool,
    email: &str,
    name: &str,
    role: StaffRole,
    password: &str,
) -> Result<Staff, StaffError> {
    let email = email.trim();
    let parts = email.split_once('@');
    let well_formed = parts.is_some_and(|(local, domain)| {
        !local.is_empty() && !domain.is_empty() && !domain.contains('@')
    }) && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if email.len() > 254 || !well_formed {
        return Err(invalid("email", "must be an e-mail address"));
    }
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(invalid(
            "name",
            "must be 1 to 200 characters, without control characters",
        ));
    }
    if password.chars().count() < MIN_PASSWORD {
        return Err(invalid(
            "password",
            format!("must be at least {MIN_PASSWORD} characters"),
        ));
    }
    let password = password.to_owned();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| StaffError::Hashing(e.to_string()))??;
    let staff_id = Uuid::now_v7();
    let inserted = sqlx::query(
        "INSERT INTO staff (staff_id, email, name, role, password_hash)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING",
    )
    .bind(staff_id)
    .bind(email)
    .bind(name)
    .bind(role.as_str())
    .bind(&hash)
    .execute(pool)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(StaffError::EmailTaken);
    }
    Ok(Staff {
        staff_id,
        email: email.to_owned(),
        name: name.to_owned(),
        role,
    })
}

/// Checks a sign-in at `now`: the staff member, if the e-mail and password are theirs
/// and the account is not locked. Counts a wrong password, and locks the account at
/// the [`MAX_FAILURES`]th in a row.
pub async fn sign_in(
    pool: &PgPool,
    email: &str,
    password: &str,
    now: DateTime<Utc>,
) -> Result<Staff, StaffError> {
    // No account's address has a control character (`create` refuses them), and
    // PostgreSQL's text cannot hold a NUL: such an address is nobody's.
    if email.chars().any(char::is_control) {
        verify_off_runtime(password, decoy_hash().to_owned()).await;
        return Err(StaffError::WrongCredentials);
    }
    let row = sqlx::query(
        "SELECT staff_id, email, name, role, password_hash, failed_sign_ins, locked_until
           FROM staff WHERE lower(email) = lower($1) AND disabled_at IS NULL",
    )
    .bind(email.trim())
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else {
        verify_off_runtime(password, decoy_hash().to_owned()).await;
        return Err(StaffError::WrongCredentials);
    };
    let staff_id: Uuid = row.try_get("staff_id")?;
    let hash: String = row.try_get("password_hash")?;
    let locked_until: Option<DateTime<Utc>> = row.try_get("locked_until")?;
    let right = verify_off_runtime(password, hash).await;
    if let Some(until) = locked_until.filter(|until| *until > now) {
        return Err(StaffError::LockedOut { until });
    }
    if !right {
        // One statement: concurrent wrong guesses each count.
        let locked: Option<DateTime<Utc>> = sqlx::query_scalar(
            "UPDATE staff
                SET failed_sign_ins = CASE WHEN failed_sign_ins + 1 >= $2 THEN 0
                                           ELSE failed_sign_ins + 1 END,
                    locked_until = CASE WHEN failed_sign_ins + 1 >= $2 THEN $3
                                        ELSE locked_until END
              WHERE staff_id = $1
          RETURNING locked_until",
        )
        .bind(staff_id)
        .bind(MAX_FAILURES)
        .bind(now + LOCK_OUT)
        .fetch_one(pool)
        .await?;
        return Err(match locked.filter(|until| *until > now) {
            Some(until) => StaffError::LockedOut { until },
            None => StaffError::WrongCredentials,
        });
    }
    sqlx::query("UPDATE staff SET failed_sign_ins = 0, locked_until = NULL WHERE staff_id = $1")
        .bind(staff_id)
        .execute(pool)
        .await?;
    let role: String = row.try_get("role")?;
    Ok(Staff {
        staff_id,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        role: StaffRole::parse(&role)
            .ok_or_else(|| StaffError::Hashing(format!("a stored role {role:?} unknown")))?,
    })
}

/// A staff account as the admins' list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub staff: Staff,
    pub created_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
    /// Locked by wrong passwords until then (if that is still ahead).
    pub locked_until: Option<DateTime<Utc>>,
}

/// Every staff account, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<Listed>, StaffError> {
    let rows = sqlx::query(
        "SELECT staff_id, email, name, role, created_at, disabled_at, locked_until
           FROM staff ORDER BY lower(name), staff_id",
    )
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            let role: String = row.try_get("role")?;
            Ok(Listed {
                staff: Staff {
                    staff_id: row.try_get("staff_id")?,
                    email: row.try_get("email")?,
                    name: row.try_get("name")?,
                    role: StaffRole::parse(&role).ok_or_else(|| {
                        StaffError::Hashing(format!("a stored role {role:?} unknown"))
                    })?,
                },
                created_at: row.try_get("created_at")?,
                disabled_at: row.try_get("disabled_at")?,
                locked_until: row.try_get("locked_until")?,
            })
        })
        .collect()
}

/// Disables an account at `now` and ends its sessions, in one transaction. Whether the
/// account existed (disabling one twice keeps the first time).
pub async fn disable(
    pool: &PgPool,
    staff_id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool, StaffError> {
    let mut tx = pool.begin().await?;
    let found =
        sqlx::query("UPDATE staff SET disabled_at = coalesce(disabled_at, $2) WHERE staff_id = $1")
            .bind(staff_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    sqlx::query(
        "UPDATE staff_sessions SET revoked_at = $2 WHERE staff_id = $1 AND revoked_at IS NULL",
    )
    .bind(staff_id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(found.rows_affected() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let hash = hash_password("correct horse battery").expect("hash");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(!hash.contains("correct horse"));
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse batterY", &hash));
        assert!(!verify_password("correct horse battery", "not a hash"));
        // A fresh salt each time: two hashes of one password differ.
        assert_ne!(hash, hash_password("correct horse battery").expect("hash"));
    }

    #[test]
    fn roles_round_trip_through_their_names() {
        for role in StaffRole::ALL {
            assert_eq!(StaffRole::parse(role.as_str()), Some(role));
        }
        assert_eq!(StaffRole::parse("owner"), None);
    }
}
