//! Sealing and opening one value: XChaCha20-Poly1305 under the guest's key, with a
//! random 24-byte nonce (large enough that random nonces never repeat in practice) and
//! associated data naming what the value is: the reservation, the field, the guest and
//! the key. A value copied to another reservation or field, or altered by one bit, does
//! not open: [`open`] reports it, it never returns other bytes.
//!
//! The associated data cannot be the event's log position: the same sealed value is
//! stored in the event, the reservation's row and its view, and the position is only
//! known when the log commits. What binds the stored bytes to their place in the log is
//! the audit chain, which hashes them as stored.

use aggregates::{GuestId, ReservationId, Sealed};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

/// Bytes of a key.
pub const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;
/// Tag of the associated data's format: a change of it is a new tag.
const FORMAT: &str = "rsv-personal-v1";

/// One of a guest's keys.
#[derive(Clone)]
pub struct GuestKey {
    pub id: Uuid,
    pub guest: GuestId,
    bytes: [u8; KEY_BYTES],
}

impl std::fmt::Debug for GuestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestKey")
            .field("id", &self.id)
            .field("guest", &self.guest)
            .finish_non_exhaustive()
    }
}

impl GuestKey {
    /// A new random key for `guest`.
    pub fn generate(guest: GuestId) -> Self {
        let key = XChaCha20Poly1305::generate_key(&mut OsRng);
        let mut bytes = [0; KEY_BYTES];
        bytes.copy_from_slice(&key);
        Self {
            id: Uuid::new_v4(),
            guest,
            bytes,
        }
    }

    /// A key as the key store keeps it; `None` if the bytes are not a key.
    pub fn from_stored(id: Uuid, guest: GuestId, stored: &[u8]) -> Option<Self> {
        let bytes: [u8; KEY_BYTES] = stored.try_into().ok()?;
        Some(Self { id, guest, bytes })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Which personal value of a reservation: part of what a sealed value is bound to.
pub use aggregates::personal::PersonalField as Field;

/// A field's name in what a sealed value is bound to (stored inside every sealed
/// value's associated data: never renamed).
fn binding_name(field: Field) -> &'static str {
    match field {
        Field::Guest => "guest",
        Field::CancelReason => "cancel_reason",
    }
}

/// What a sealed value is bound to.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub reservation: ReservationId,
    pub field: Field,
}

/// Why a value could not be sealed (nothing is stored then: the write fails).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sealing personal data: {0}")]
pub struct SealError(String);

/// Why a sealed value did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("the sealed data is not base64 of a nonce and a ciphertext")]
    Malformed,
    #[error("the sealed data does not open under its key: it was altered, or moved from another reservation or field")]
    Tampered,
    #[error("the opened data is not the value expected: {0}")]
    Shape(String),
}

fn associated_data(binding: Binding, guest: &GuestId, key: Uuid) -> Vec<u8> {
    format!(
        "{FORMAT}|{}|{}|{guest}|{key}",
        binding.reservation.as_uuid(),
        binding_name(binding.field)
    )
    .into_bytes()
}

/// Seals `value` (as JSON) under `key`, bound to `binding`.
pub fn seal<T: Serialize>(
    value: &T,
    key: &GuestKey,
    binding: Binding,
) -> Result<Sealed, SealError> {
    let plaintext = serde_json::to_vec(value).map_err(|e| SealError(e.to_string()))?;
    let cipher = XChaCha20Poly1305::new(Key::from_slice(&key.bytes));
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let aad = associated_data(binding, &key.guest, key.id);
    let ciphertext = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: &plaintext,
                aad: &aad,
            },
        )
        .map_err(|_| SealError("the cipher refused the value".to_owned()))?;
    let mut data = Vec::with_capacity(NONCE_BYTES + ciphertext.len());
    data.extend_from_slice(&nonce);
    data.extend_from_slice(&ciphertext);
    Ok(Sealed {
        guest: key.guest.clone(),
        key: key.id,
        data: STANDARD.encode(data),
    })
}

/// Opens `sealed` with `key` (the key it names), bound to `binding`.
pub fn open<T: DeserializeOwned>(
    sealed: &Sealed,
    key: &GuestKey,
    binding: Binding,
) -> Result<T, OpenError> {
    let data = STANDARD
        .decode(&sealed.data)
        .map_err(|_| OpenError::Malformed)?;
    if data.len() < NONCE_BYTES {
        return Err(OpenError::Malformed);
    }
    let (nonce, ciphertext) = data.split_at(NONCE_BYTES);
    let cipher = XChaCha20Poly1305::new(Key::from_slice(&key.bytes));
    let aad = associated_data(binding, &sealed.guest, sealed.key);
    let plaintext = cipher
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad: &aad,
            },
        )
        .map_err(|_| OpenError::Tampered)?;
    serde_json::from_slice(&plaintext).map_err(|e| OpenError::Shape(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest() -> GuestId {
        GuestId::from_digest([7; 16])
    }

    fn binding(n: u128) -> Binding {
        Binding {
            reservation: ReservationId::from_uuid(Uuid::from_u128(n)),
            field: Field::Guest,
        }
    }

    #[test]
    fn a_sealed_value_opens_with_its_key_and_binding() {
        let key = GuestKey::generate(guest());
        let sealed = seal(&"Ana Lima", &key, binding(1)).expect("seal");
        assert!(!sealed.data.contains("Ana"));
        let opened: String = open(&sealed, &key, binding(1)).expect("open");
        assert_eq!(opened, "Ana Lima");
    }

    #[test]
    fn the_same_value_seals_differently_each_time() {
        let key = GuestKey::generate(guest());
        let a = seal(&"Ana", &key, binding(1)).expect("seal");
        let b = seal(&"Ana", &key, binding(1)).expect("seal");
        assert_ne!(a.data, b.data);
    }

    #[test]
    fn a_sealed_value_does_not_open_elsewhere_or_altered_or_with_another_key() {
        let key = GuestKey::generate(guest());
        let sealed = seal(&"Ana", &key, binding(1)).expect("seal");
        assert_eq!(
            open::<String>(&sealed, &key, binding(2)),
            Err(OpenError::Tampered)
        );
        let reason = Binding {
            field: Field::CancelReason,
            ..binding(1)
        };
        assert_eq!(
            open::<String>(&sealed, &key, reason),
            Err(OpenError::Tampered)
        );
        let other = GuestKey::generate(guest());
        assert_eq!(
            open::<String>(&sealed, &other, binding(1)),
            Err(OpenError::Tampered)
        );
        let mut bytes = STANDARD.decode(&sealed.data).expect("base64");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let altered = Sealed {
            data: STANDARD.encode(bytes),
            ..sealed.clone()
        };
        assert_eq!(
            open::<String>(&altered, &key, binding(1)),
            Err(OpenError::Tampered)
        );
        let truncated = Sealed {
            data: "AAAA".into(),
            ..sealed
        };
        assert_eq!(
            open::<String>(&truncated, &key, binding(1)),
            Err(OpenError::Malformed)
        );
    }
}
