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
    #[error("too many sign-ins are being checked at once; try again in a few seconds")]
    Busy,
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
    if !aggregates::types::is_email_address(email) {
        return Err(invalid(
            "email",
            "must be an e-mail address such as ana@hotel.example",
        ));
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
    let hash = argon2_turn(move || hash_password(&password)).await??;
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

/// Argon2 computations (a sign-in's check, a new account's hash) running at once,
/// server-wide. Each costs tens of milliseconds of CPU and 19 MiB of memory by design;
/// unbounded, a burst of sign-ins (any e-mail will do) would exhaust the machine. One
/// waits up to [`BUSY_WAIT`] for a turn.
const ARGON2_AT_ONCE: usize = 4;
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// `work` (an Argon2 computation) on a blocking thread, one of [`ARGON2_AT_ONCE`]: the
/// CPU it takes must not hold up the requests sharing the runtime's threads.
async fn argon2_turn<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StaffError> {
    static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(ARGON2_AT_ONCE);
    let _turn = tokio::time::timeout(BUSY_WAIT, TURNS.acquire())
        .await
        .map_err(|_| StaffError::Busy)?
        .map_err(|_| StaffError::Busy)?;
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StaffError::Hashing(e.to_string()))
}

/// [`verify_password`] in an [`argon2_turn`]; a check that could not run is a wrong
/// password, unless it found no turn (busy).
async fn verify_off_runtime(password: &str, hash: String) -> Result<bool, StaffError> {
    let password = password.to_owned();
    match argon2_turn(move || verify_password(&password, &hash)).await {
        Ok(right) => Ok(right),
        Err(StaffError::Busy) => Err(StaffError::Busy),
        Err(_) => Ok(false),
    }
}

/// Checks a sign-in at `now`: the staff member, if the e-mail and password are theirs
/// and the account is not locked.
///
/// The attempt is counted *before* the password is checked, in one statement that also
/// refuses a locked account: guesses sent at once each take a turn, so no more than
/// [`MAX_FAILURES`] are ever checked per lock-out, however many arrive together. The
/// [`MAX_FAILURES`]th attempt in a row locks the account (and starts the count again);
/// a right password unlocks it and resets the count.
pub async fn sign_in(
    pool: &PgPool,
    email: &str,
    password: &str,
    now: DateTime<Utc>,
) -> Result<Staff, StaffError> {
    // No account's address has a control character (`create` refuses them), and
    // PostgreSQL's text cannot hold a NUL: such an address is nobody's.
    let row = if email.chars().any(char::is_control) {
        None
    } else {
        sqlx::query(
            "SELECT staff_id, locked_until FROM staff
              WHERE lower(email) = lower($1) AND disabled_at IS NULL",
        )
        .bind(email.trim())
        .fetch_optional(pool)
        .await?
    };
    let Some(row) = row else {
        verify_off_runtime(password, decoy_hash().to_owned()).await?;
        return Err(StaffError::WrongCredentials);
    };
    let staff_id: Uuid = row.try_get("staff_id")?;
    let claimed = sqlx::query(
        "UPDATE staff
            SET failed_sign_ins = CASE WHEN failed_sign_ins + 1 >= $2 THEN 0
                                       ELSE failed_sign_ins + 1 END,
                locked_until = CASE WHEN failed_sign_ins + 1 >= $2 THEN $3 END
          WHERE staff_id = $1 AND disabled_at IS NULL
            AND (locked_until IS NULL OR locked_until <= $4)
      RETURNING email, name, role, password_hash, locked_until",
    )
    .bind(staff_id)
    .bind(MAX_FAILURES)
    .bind(now + LOCK_OUT)
    .bind(now)
    .fetch_optional(pool)
    .await?;
    let Some(claimed) = claimed else {
        // Locked (or locked by a guess that arrived with this one): no check at all.
        let until: Option<DateTime<Utc>> = row.try_get("locked_until")?;
        let until = match until.filter(|until| *until > now) {
            Some(until) => until,
            None => sqlx::query_scalar::<_, Option<DateTime<Utc>>>(
                "SELECT locked_until FROM staff WHERE staff_id = $1",
            )
            .bind(staff_id)
            .fetch_one(pool)
            .await?
            .unwrap_or(now + LOCK_OUT),
        };
        return Err(StaffError::LockedOut { until });
    };
    let hash: String = claimed.try_get("password_hash")?;
    if !verify_off_runtime(password, hash).await? {
        let locked: Option<DateTime<Utc>> = claimed.try_get("locked_until")?;
        return Err(match locked {
            Some(until) => StaffError::LockedOut { until },
            None => StaffError::WrongCredentials,
        });
    }
    sqlx::query("UPDATE staff SET failed_sign_ins = 0, locked_until = NULL WHERE staff_id = $1")
        .bind(staff_id)
        .execute(pool)
        .await?;
    let role: String = claimed.try_get("role")?;
    Ok(Staff {
        staff_id,
        email: claimed.try_get("email")?,
        name: claimed.try_get("name")?,
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

    /// Four Argon2 computations at once take every turn; a fifth, finding none within
    /// [`BUSY_WAIT`], is answered busy without running, and once one of the four ends
    /// the next finds a turn. (The clock is paused and moved by hand: a blocking task
    /// running keeps tokio from moving it on its own.)
    #[tokio::test(start_paused = true)]
    async fn a_fifth_argon2_computation_at_once_is_busy_after_the_wait() {
        let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
        let mut releases = Vec::new();
        let mut holders = Vec::new();
        for n in 0..ARGON2_AT_ONCE {
            let (release, released) = std::sync::mpsc::channel::<()>();
            releases.push(release);
            let entered_tx = entered_tx.clone();
            holders.push(tokio::spawn(argon2_turn(move || {
                entered_tx.send(n).expect("the test is listening");
                // Until the test drops its end (also when it fails).
                let _ = released.recv();
                n
            })));
        }
        for _ in 0..ARGON2_AT_ONCE {
            entered.recv().await.expect("a computation started");
        }

        let fifth = tokio::spawn(argon2_turn(|| -> usize {
            panic!("a computation without a turn ran")
        }));
        tokio::task::yield_now().await;
        tokio::time::advance(BUSY_WAIT - std::time::Duration::from_millis(1)).await;
        assert!(!fifth.is_finished(), "busy before the wait was over");
        tokio::time::advance(std::time::Duration::from_millis(2)).await;
        let fifth = fifth.await.expect("the fifth call ends");

        assert!(matches!(fifth, Err(StaffError::Busy)), "{fifth:?}");
        drop(releases.remove(0));
        let next = argon2_turn(|| 42).await;
        assert!(matches!(next, Ok(42)), "{next:?}");
        drop(releases);
        for (n, holder) in holders.into_iter().enumerate() {
            let held = holder.await.expect("a holder ends");
            assert!(matches!(held, Ok(m) if m == n), "{held:?}");
        }
    }

    #[test]
    fn roles_round_trip_through_their_names() {
        for role in StaffRole::ALL {
            assert_eq!(StaffRole::parse(role.as_str()), Some(role));
        }
        assert_eq!(StaffRole::parse("owner"), None);
    }
}
