//! Where the guests' keys live: [`KeyStore`], and [`PgKeyStore`], which keeps them in
//! PostgreSQL's `privacy` schema, apart from the log (migration 22).
//!
//! A key is made the first time a guest's data is sealed, inside the transaction that
//! stores it; erasing the guest destroys every key of theirs (the row stays, without its
//! bytes, so that a value sealed under it reads as erased rather than as unknown). The
//! sealing read takes a share lock on each key it uses, and destroying takes the row's
//! update lock: an erasure waits for the writes sealing under the guest's keys to
//! commit, and a write that starts after it finds the key gone and makes a new one. A
//! value is therefore never sealed under a key already destroyed.
//!
//! A KMS or Vault replaces [`PgKeyStore`] behind the same trait (the transaction's
//! connection is passed so that a store in the database can lock with it; one outside
//! would wrap and unwrap data keys kept in that same table instead).

use std::collections::HashMap;

use aggregates::GuestId;
use async_trait::async_trait;
use rand::RngCore;
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::cipher::GuestKey;

/// A key as the store has it.
#[derive(Debug, Clone)]
pub enum KeyState {
    Live(GuestKey),
    /// Destroyed by an erasure (or never known to this store).
    Destroyed,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("key store: {0}")]
    Database(#[from] sqlx::Error),
    #[error("key store: a stored key is corrupt: {0}")]
    Corrupt(String),
}

/// The name of the guest-id secret in `privacy.settings`.
pub const GUEST_ID_SECRET: &str = "guest_id_secret";
/// The name of the key partner webhooks' signing secrets are sealed under.
pub const WEBHOOK_SECRETS_KEY: &str = "webhook_secrets_key";

#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// The secret the guests' ids are derived with (made on first use).
    async fn guest_id_secret(&self, conn: &mut PgConnection) -> Result<Vec<u8>, KeyStoreError> {
        self.deployment_secret(conn, GUEST_ID_SECRET).await
    }

    /// A 32-byte secret of the deployment, by name, made by the first process that asks.
    async fn deployment_secret(
        &self,
        conn: &mut PgConnection,
        name: &str,
    ) -> Result<Vec<u8>, KeyStoreError>;

    /// The live key of each of `guests` (made for those that have none) and the state of
    /// each of `keys`, for sealing within the transaction on `conn`: none of them can be
    /// destroyed before it commits.
    async fn sealing_keys(
        &self,
        conn: &mut PgConnection,
        guests: &[GuestId],
        keys: &[Uuid],
    ) -> Result<(HashMap<GuestId, GuestKey>, HashMap<Uuid, KeyState>), KeyStoreError>;

    /// The state of each of `keys`, for opening.
    async fn opening_keys(&self, keys: &[Uuid]) -> Result<HashMap<Uuid, KeyState>, KeyStoreError>;

    /// Destroys every key of `guest`; the ids of those destroyed now.
    async fn destroy(
        &self,
        conn: &mut PgConnection,
        guest: &GuestId,
    ) -> Result<Vec<Uuid>, KeyStoreError>;
}

/// The keys in PostgreSQL (`privacy.guest_keys`, `privacy.settings`).
#[derive(Debug, Clone)]
pub struct PgKeyStore {
    pool: PgPool,
}

impl PgKeyStore {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }
}

fn key_of(row: &sqlx::postgres::PgRow) -> Result<(Uuid, KeyState), KeyStoreError> {
    let corrupt = |e: &dyn std::fmt::Display| KeyStoreError::Corrupt(e.to_string());
    let id: Uuid = row.try_get("key_id")?;
    let guest: String = row.try_get("guest_id")?;
    let guest = GuestId::parse(&guest).map_err(|e| corrupt(&e.message))?;
    let bytes: Option<Vec<u8>> = row.try_get("key")?;
    let state = match bytes {
        None => KeyState::Destroyed,
        Some(bytes) => {
            KeyState::Live(GuestKey::from_stored(id, guest, &bytes).ok_or_else(|| {
                corrupt(&format!(
                    "key {id} is not {} bytes",
                    super::cipher::KEY_BYTES
                ))
            })?)
        }
    };
    Ok((id, state))
}

#[async_trait]
impl KeyStore for PgKeyStore {
    async fn deployment_secret(
        &self,
        conn: &mut PgConnection,
        name: &str,
    ) -> Result<Vec<u8>, KeyStoreError> {
        let mut fresh = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut fresh);
        let made = sqlx::query(
            "WITH made AS (
                 INSERT INTO privacy.settings (name, value) VALUES ($2, $1)
                 ON CONFLICT (name) DO NOTHING
                 RETURNING value)
             SELECT value FROM made
             UNION ALL
             SELECT value FROM privacy.settings WHERE name = $2",
        )
        .bind(&fresh[..])
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
        // Nothing: another process made it after this statement's snapshot was taken.
        let row = match made {
            Some(row) => row,
            None => {
                sqlx::query("SELECT value FROM privacy.settings WHERE name = $1")
                    .bind(name)
                    .fetch_one(&mut *conn)
                    .await?
            }
        };
        Ok(row.try_get("value")?)
    }

    async fn sealing_keys(
        &self,
        conn: &mut PgConnection,
        guests: &[GuestId],
        keys: &[Uuid],
    ) -> Result<(HashMap<GuestId, GuestKey>, HashMap<Uuid, KeyState>), KeyStoreError> {
        let mut live = HashMap::with_capacity(guests.len());
        if !guests.is_empty() {
            let mut wanted: Vec<&GuestId> = guests.iter().collect();
            wanted.sort();
            wanted.dedup();
            let fresh: Vec<GuestKey> = wanted
                .iter()
                .map(|g| GuestKey::generate((*g).clone()))
                .collect();
            // A guest with a live key keeps it: the no-op update returns the existing row
            // and locks it until commit, like the share lock below (one round trip
            // either way).
            let rows = sqlx::query(
                "INSERT INTO privacy.guest_keys (key_id, guest_id, key)
                 SELECT * FROM unnest($1::uuid[], $2::text[], $3::bytea[])
                 ON CONFLICT (guest_id) WHERE key IS NOT NULL
                 DO UPDATE SET key = privacy.guest_keys.key
                 RETURNING key_id, guest_id, key",
            )
            .bind(fresh.iter().map(|k| k.id).collect::<Vec<_>>())
            .bind(fresh.iter().map(|k| k.guest.as_str()).collect::<Vec<_>>())
            .bind(fresh.iter().map(|k| k.bytes().to_vec()).collect::<Vec<_>>())
            .fetch_all(&mut *conn)
            .await?;
            for row in &rows {
                if let (_, KeyState::Live(key)) = key_of(row)? {
                    live.insert(key.guest.clone(), key);
                }
            }
        }
        let mut known = HashMap::with_capacity(keys.len());
        if !keys.is_empty() {
            let rows = sqlx::query(
                "SELECT key_id, guest_id, key FROM privacy.guest_keys
                  WHERE key_id = ANY($1) ORDER BY key_id FOR SHARE",
            )
            .bind(keys)
            .fetch_all(&mut *conn)
            .await?;
            for row in &rows {
                let (id, state) = key_of(row)?;
                known.insert(id, state);
            }
        }
        Ok((live, known))
    }

    async fn opening_keys(&self, keys: &[Uuid]) -> Result<HashMap<Uuid, KeyState>, KeyStoreError> {
        let mut known = HashMap::with_capacity(keys.len());
        if keys.is_empty() {
            return Ok(known);
        }
        let rows = sqlx::query(
            "SELECT key_id, guest_id, key FROM privacy.guest_keys WHERE key_id = ANY($1)",
        )
        .bind(keys)
        .fetch_all(&self.pool)
        .await?;
        for row in &rows {
            let (id, state) = key_of(row)?;
            known.insert(id, state);
        }
        Ok(known)
    }

    async fn destroy(
        &self,
        conn: &mut PgConnection,
        guest: &GuestId,
    ) -> Result<Vec<Uuid>, KeyStoreError> {
        let rows = sqlx::query(
            "UPDATE privacy.guest_keys SET key = NULL, destroyed_at = now()
              WHERE guest_id = $1 AND key IS NOT NULL
             RETURNING key_id",
        )
        .bind(guest.as_str())
        .fetch_all(conn)
        .await?;
        rows.iter()
            .map(|row| row.try_get("key_id").map_err(KeyStoreError::from))
            .collect()
    }
}
