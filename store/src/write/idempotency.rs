//! Idempotency records: a retry of the same intent gets the first outcome, not a second
//! booking.
//!
//! A request claims `(client, key)` inside the transaction that writes its events:
//! `pg_try_advisory_xact_lock` on a hash of the pair answers at once whether another
//! request with the same key is running (then: `InFlight`), the record is read (a
//! finished outcome is returned as it was; a different request under the same key is
//! `KeyReused`), and the outcome is inserted with the command's writes. A crash or a lost
//! race rolls the claim back with everything else, so a key is never left half-used.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, Row};

use super::attempt::AttemptError;
use aggregates::CommandName;

use crate::error::CommandError;

/// An `Idempotency-Key`: 1 to 255 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(value: &str) -> Result<Self, aggregates::InvalidInput> {
        if (1..=255).contains(&value.len()) && value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            Ok(Self(value.to_owned()))
        } else {
            Err(aggregates::InvalidInput::new(
                "Idempotency-Key",
                "must be 1 to 255 printable ASCII characters",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A request as the idempotency layer sees it: who sent it, under which key, and a hash
/// of its canonical form (the parsed request, serialized; so whitespace and field order
/// in the client's JSON do not matter).
#[derive(Debug, Clone)]
pub struct RequestFingerprint {
    pub client: String,
    pub key: IdempotencyKey,
    pub request_hash: String,
}

impl RequestFingerprint {
    pub fn new(
        client: &str,
        key: IdempotencyKey,
        command: CommandName,
        request: &impl Serialize,
    ) -> Result<Self, CommandError> {
        let canonical = serde_json::to_vec(request)
            .map_err(|e| CommandError::Internal(format!("request not serializable: {e}")))?;
        let mut hasher = Sha256::new();
        hasher.update(command.as_str().as_bytes());
        hasher.update([0]);
        hasher.update(&canonical);
        Ok(Self {
            client: client.to_owned(),
            key,
            request_hash: hex::encode(hasher.finalize()),
        })
    }

    /// The advisory lock id for this (client, key): 64 bits of a SHA-256. A collision
    /// only makes an unrelated request wait its turn (`InFlight`), never share an outcome.
    pub fn lock_id(&self) -> i64 {
        let mut hasher = Sha256::new();
        hasher.update(self.client.as_bytes());
        hasher.update([0]);
        hasher.update(self.key.as_str().as_bytes());
        let digest = hasher.finalize();
        let mut bytes = [0_u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        i64::from_be_bytes(bytes)
    }
}

/// Claims the key inside `conn`'s transaction. Returns the stored outcome when this is
/// a replay of a finished request; `None` when the caller should run the command.
pub async fn claim<T: DeserializeOwned>(
    conn: &mut PgConnection,
    request: &RequestFingerprint,
) -> Result<Option<T>, AttemptError> {
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(request.lock_id())
        .fetch_one(&mut *conn)
        .await?;
    if !locked {
        return Err(CommandError::InFlight.into());
    }
    let row = sqlx::query(
        "SELECT request_hash, state, outcome FROM idempotency_keys
          WHERE client = $1 AND key = $2 AND created_at > now() - interval '24 hours'",
    )
    .bind(&request.client)
    .bind(request.key.as_str())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let record = StoredRecord {
        request_hash: row.try_get("request_hash")?,
        state: row.try_get("state")?,
        outcome: row.try_get("outcome")?,
    };
    judge(request, Some(record))
}

/// An idempotency record as read, not yet judged.
#[derive(Debug, Clone)]
pub struct StoredRecord {
    pub request_hash: String,
    pub state: String,
    pub outcome: Option<serde_json::Value>,
}

/// What a claimed request should do given its stored record: `None` run it, `Some`
/// replay the stored outcome; a different request under the key is `KeyReused`, one
/// still running `InFlight`.
pub fn judge<T: DeserializeOwned>(
    request: &RequestFingerprint,
    record: Option<StoredRecord>,
) -> Result<Option<T>, AttemptError> {
    let Some(record) = record else {
        return Ok(None);
    };
    if record.request_hash != request.request_hash {
        return Err(CommandError::KeyReused.into());
    }
    match record.state.as_str() {
        "completed" => {
            let outcome = record
                .outcome
                .ok_or_else(|| CommandError::Internal("completed record without outcome".into()))?;
            let decoded = serde_json::from_value(outcome)
                .map_err(|e| CommandError::Internal(format!("stored outcome unreadable: {e}")))?;
            Ok(Some(decoded))
        }
        "in_flight" => Err(CommandError::InFlight.into()),
        _ => Ok(None),
    }
}

/// Stores the outcome of the request, in the same transaction as its writes.
pub async fn complete<T: Serialize>(
    conn: &mut PgConnection,
    request: &RequestFingerprint,
    outcome: &T,
) -> Result<(), AttemptError> {
    let outcome = serde_json::to_value(outcome)
        .map_err(|e| CommandError::Internal(format!("outcome not serializable: {e}")))?;
    let written = sqlx::query(
        "INSERT INTO idempotency_keys (client, key, request_hash, state, outcome)
         VALUES ($1, $2, $3, 'completed', $4)
         ON CONFLICT (client, key) DO UPDATE
            SET request_hash = EXCLUDED.request_hash, state = 'completed',
                outcome = EXCLUDED.outcome, created_at = now()
          WHERE idempotency_keys.state = 'abandoned'
             OR idempotency_keys.created_at <= now() - interval '24 hours'",
    )
    .bind(&request.client)
    .bind(request.key.as_str())
    .bind(&request.request_hash)
    .bind(&outcome)
    .execute(&mut *conn)
    .await?;
    if written.rows_affected() != 1 {
        // Someone finished this key between our claim and now: start over and replay it.
        return Err(AttemptError::Conflict);
    }
    Ok(())
}

/// Marks the request as running across transactions (a payment): a retry meanwhile is
/// `InFlight`; whoever finishes it stores the outcome with [`complete_in_flight`].
pub async fn begin_in_flight(
    conn: &mut PgConnection,
    request: &RequestFingerprint,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), AttemptError> {
    let written = sqlx::query(
        "INSERT INTO idempotency_keys (client, key, request_hash, state, outcome, created_at)
         VALUES ($1, $2, $3, 'in_flight', NULL, $4)
         ON CONFLICT (client, key) DO UPDATE
            SET request_hash = EXCLUDED.request_hash, state = 'in_flight', outcome = NULL,
                created_at = EXCLUDED.created_at
          WHERE idempotency_keys.state = 'abandoned'
             OR idempotency_keys.created_at <= now() - interval '24 hours'",
    )
    .bind(&request.client)
    .bind(request.key.as_str())
    .bind(&request.request_hash)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if written.rows_affected() != 1 {
        return Err(AttemptError::Conflict);
    }
    Ok(())
}

/// Stores the outcome of a request that was in flight (or abandoned by the sweeper and
/// not yet retried). `false` when someone else already stored one.
pub async fn complete_in_flight<T: Serialize>(
    conn: &mut PgConnection,
    client: &str,
    key: &str,
    request_hash: &str,
    outcome: &T,
) -> Result<bool, AttemptError> {
    let outcome = serde_json::to_value(outcome)
        .map_err(|e| CommandError::Internal(format!("outcome not serializable: {e}")))?;
    let written = sqlx::query(
        "UPDATE idempotency_keys SET state = 'completed', outcome = $4
          WHERE client = $1 AND key = $2 AND request_hash = $3
            AND state IN ('in_flight', 'abandoned')",
    )
    .bind(client)
    .bind(key)
    .bind(request_hash)
    .bind(&outcome)
    .execute(&mut *conn)
    .await?;
    Ok(written.rows_affected() == 1)
}

/// Gives up on a request in flight, so that its retry runs again.
pub async fn abandon(conn: &mut PgConnection, client: &str, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE idempotency_keys SET state = 'abandoned'
          WHERE client = $1 AND key = $2 AND state = 'in_flight'",
    )
    .bind(client)
    .bind(key)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The stored outcome of a finished request, if it has one.
pub async fn completed<T: DeserializeOwned>(
    conn: &mut PgConnection,
    request: &RequestFingerprint,
) -> Result<Option<T>, AttemptError> {
    let outcome: Option<Option<serde_json::Value>> = sqlx::query_scalar(
        "SELECT outcome FROM idempotency_keys
          WHERE client = $1 AND key = $2 AND request_hash = $3 AND state = 'completed'",
    )
    .bind(&request.client)
    .bind(request.key.as_str())
    .bind(&request.request_hash)
    .fetch_optional(&mut *conn)
    .await?;
    match outcome.flatten() {
        None => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| CommandError::Internal(format!("stored outcome unreadable: {e}")).into()),
    }
}
