//! Guests' personal data: sealed before it is stored, opened for whoever is entitled to
//! it, and erased by destroying its keys (crypto-shredding; docs/privacy.md).
//!
//! What is personal here: a reservation's guest (name and e-mail) and what anyone types
//! into free text about it (a cancellation's reason). The domain carries these as
//! [`Personal`] values and never reads them; the write side seals every value still in
//! the clear as it stores a decision ([`crate::write`], at flush), under the guest's own
//! key, so the log, the reservation's row, its view, the relay's stream and every
//! backup hold only ciphertext (an idempotency record refers to the reservation and
//! holds no copy of the guest). Everything else
//! stays plain: the projections, the analytics and the audit's replay never need a key.
//!
//! - [`cipher`]: sealing and opening one value (XChaCha20-Poly1305, bound to the
//!   reservation and the field it belongs to);
//! - [`keys`]: the key store (PostgreSQL's `privacy` schema behind a trait);
//! - [`Privacy`]: the handle the write side, the queries and the API share: guest ids,
//!   and opening values in batches.
//!
//! A guest's id is a keyed digest (HMAC-SHA256 under a secret of the deployment) of the
//! normalized e-mail: stable, so a guest's reservations can be found and erased
//! together, and not a bare hash that anyone could confirm by hashing a guessed address.

pub mod cipher;
pub mod keys;

use std::collections::HashMap;
use std::sync::Arc;

use aggregates::contract::ReservationEventType;
use aggregates::{GuestId, Personal, ReservationId};
use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::Sha256;
use sqlx::{PgConnection, PgPool};
use tokio::sync::OnceCell;
use uuid::Uuid;

pub use cipher::{Binding, Field, GuestKey, OpenError};
pub use keys::{KeyState, KeyStore, KeyStoreError, PgKeyStore};

pub use crate::view::{ERASED_TEXT, SEALED_TEXT};

#[derive(Debug, thiserror::Error)]
pub enum PrivacyError {
    #[error(transparent)]
    Keys(#[from] KeyStoreError),
    /// A sealed value did not open under its live key: the stored data was altered.
    #[error("personal data of reservation {reservation} ({field:?}) does not open: {error}")]
    Open {
        reservation: ReservationId,
        field: Field,
        error: OpenError,
    },
}

/// The handle on the guests' keys and ids.
#[derive(Clone)]
pub struct Privacy {
    store: Arc<dyn KeyStore>,
    /// The guest-id secret, read (or made) on first use.
    secret: Arc<OnceCell<Vec<u8>>>,
}

impl std::fmt::Debug for Privacy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Privacy").finish_non_exhaustive()
    }
}

impl Privacy {
    /// Keys in the database of `pool`.
    pub fn postgres(pool: PgPool) -> Self {
        Self::new(Arc::new(PgKeyStore::new(pool)))
    }

    pub fn new(store: Arc<dyn KeyStore>) -> Self {
        Self {
            store,
            secret: Arc::new(OnceCell::new()),
        }
    }

    pub fn store(&self) -> &dyn KeyStore {
        self.store.as_ref()
    }

    /// The id of the guest with `email` (compared as the domain stores it: trimmed and
    /// lower-case).
    pub async fn guest_id(
        &self,
        conn: &mut PgConnection,
        email: &str,
    ) -> Result<GuestId, PrivacyError> {
        let secret = self
            .secret
            .get_or_try_init(move || self.store.guest_id_secret(conn))
            .await?;
        Ok(guest_id_with(secret, email)?)
    }

    /// [`Self::guest_id`] on a connection of `pool`.
    pub async fn guest_id_in(&self, pool: &PgPool, email: &str) -> Result<GuestId, PrivacyError> {
        if let Some(secret) = self.secret.get() {
            return Ok(guest_id_with(secret, email)?);
        }
        let mut conn = pool.acquire().await.map_err(KeyStoreError::from)?;
        self.guest_id(&mut conn, email).await
    }

    /// Opens every sealed value of `values` in place (one read of the key store for all):
    /// a live key gives the value in the clear, a destroyed one [`Personal::Erased`]. A
    /// value that does not open under its live key is an error, never other data.
    pub async fn open_all<T: DeserializeOwned>(
        &self,
        values: &mut [(Binding, &mut Personal<T>)],
    ) -> Result<(), PrivacyError> {
        let mut ids: Vec<Uuid> = values
            .iter()
            .filter_map(|(_, value)| value.sealed().map(|s| s.key))
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        ids.sort_unstable();
        ids.dedup();
        let keys = self.store.opening_keys(&ids).await?;
        open_with(&keys, values)
    }

    /// [`Self::open_all`] of one value.
    pub async fn open<T: DeserializeOwned>(
        &self,
        binding: Binding,
        value: &mut Personal<T>,
    ) -> Result<(), PrivacyError> {
        self.open_all(&mut [(binding, value)]).await
    }
}

/// Where a reservation event of `event_type` keeps personal data in its payload
/// (`{"<event type>": {"<key>": ...}}`): which field, and its key. Defined once, for the
/// writer that seals and the readers that open.
pub fn event_field(event_type: &str) -> Option<(ReservationEventType, Field, &'static str)> {
    let kind = ReservationEventType::parse(event_type)?;
    let field = kind.personal_field()?;
    Some((kind, field, field.payload_key()))
}

/// The personal value in a reservation event's payload, if it has one: the payload as
/// stored (`{"<event type>": {...}}`) or its data as the API shows it (untagged).
pub fn event_slot<'a>(event_type: &str, payload: &'a mut Value) -> Option<(Field, &'a mut Value)> {
    let (kind, field, key) = event_field(event_type)?;
    let data = if payload.get(kind.as_str()).is_some() {
        payload.get_mut(kind.as_str())?
    } else {
        payload
    };
    Some((field, data.get_mut(key)?))
}

impl Privacy {
    /// Opens, in place, the personal values in the payloads of a reservation's events
    /// (`{"sealed": ...}` becomes `{"clear": ...}`, or `"erased"` once its key is gone),
    /// for a reader entitled to them. One read of the key store for all.
    pub async fn open_events(
        &self,
        events: &mut [(ReservationId, &str, &mut Value)],
    ) -> Result<(), PrivacyError> {
        let mut slots: Vec<(Binding, &mut Value, Personal<Value>)> = Vec::new();
        for (reservation, event_type, payload) in events.iter_mut() {
            let Some((field, value)) = event_slot(event_type, payload) else {
                continue;
            };
            // A value of another shape (not personal data as this build writes it) is
            // left as it is stored.
            let Ok(personal) = serde_json::from_value::<Personal<Value>>(value.clone()) else {
                continue;
            };
            let binding = Binding {
                reservation: *reservation,
                field,
            };
            slots.push((binding, value, personal));
        }
        let mut opening: Vec<(Binding, &mut Personal<Value>)> = slots
            .iter_mut()
            .map(|(binding, _, personal)| (*binding, personal))
            .collect();
        self.open_all(&mut opening).await?;
        for (_, value, personal) in slots {
            if let Ok(opened) = serde_json::to_value(personal) {
                *value = opened;
            }
        }
        Ok(())
    }
}

/// Opens `values` with keys already read.
pub fn open_with<T: DeserializeOwned>(
    keys: &HashMap<Uuid, KeyState>,
    values: &mut [(Binding, &mut Personal<T>)],
) -> Result<(), PrivacyError> {
    for (binding, value) in values.iter_mut() {
        let Personal::Sealed(sealed) = &**value else {
            continue;
        };
        let opened = match keys.get(&sealed.key) {
            Some(KeyState::Live(key)) => {
                Personal::Clear(cipher::open(sealed, key, *binding).map_err(|error| {
                    PrivacyError::Open {
                        reservation: binding.reservation,
                        field: binding.field,
                        error,
                    }
                })?)
            }
            // Destroyed, or a key this store never had (its row removed by hand): the
            // value can never be opened, which is what an erasure means.
            Some(KeyState::Destroyed) | None => Personal::Erased,
        };
        **value = opened;
    }
    Ok(())
}

fn guest_id_with(secret: &[u8], email: &str) -> Result<GuestId, KeyStoreError> {
    let normalized = email.trim().to_lowercase();
    // HMAC takes a key of any length; the error is for fixed-length MACs.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret)
        .map_err(|e| KeyStoreError::Corrupt(format!("the guest-id secret: {e}")))?;
    mac.update(b"guest-id-v1\0");
    mac.update(normalized.as_bytes());
    let digest = mac.finalize().into_bytes();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    Ok(GuestId::from_digest(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_id_depends_on_the_secret_and_the_normalized_address_only() {
        let id = |secret: &[u8], email| guest_id_with(secret, email).expect("id");
        let a = id(b"secret one", "Ana@Example.com ");
        assert_eq!(a, id(b"secret one", "ana@example.com"));
        assert_ne!(a, id(b"secret two", "ana@example.com"));
        assert_ne!(a, id(b"secret one", "ana2@example.com"));
    }
}
