//! A guest's personal data as the domain carries it: in the clear, sealed under the
//! guest's own key, or erased (docs/privacy.md).
//!
//! The log is append-only and hash-chained, so what it stores of a person must be
//! something that can later be made unreadable without rewriting it: the write side
//! seals every [`Personal`] value before it is stored (an AEAD under a key per guest,
//! kept outside the log), and erasing a guest destroys the key. The domain never reads
//! personal data to decide anything; it only carries it from a command to its event, so
//! its rules work the same on any of the three states, and the replay of an auditor, who
//! holds no key, reads the same events as the write side did.
//!
//! Serialized as `{"clear": ...}`, `{"sealed": {"guest", "key", "data"}}` or
//! `"erased"`. A value in the clear is what a command brings and what an entitled reader
//! is answered; the write side refuses to store one (events written before sealing
//! existed are read as clear through an upcaster, see [`crate::contract::decode`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::types::InvalidInput;

/// Personal data: in the clear, sealed, or erased.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Personal<T> {
    /// As the guest gave it (a command), or opened for a reader entitled to it.
    Clear(T),
    /// Sealed under one of its guest's keys; only the key store can open it.
    Sealed(Sealed),
    /// Its key was destroyed (the guest was erased): nothing can open it any more.
    Erased,
}

impl<T> Personal<T> {
    /// The value in the clear, if it is.
    pub fn clear(&self) -> Option<&T> {
        match self {
            Self::Clear(value) => Some(value),
            Self::Sealed(_) | Self::Erased => None,
        }
    }

    /// The sealed value, if it is.
    pub fn sealed(&self) -> Option<&Sealed> {
        match self {
            Self::Sealed(sealed) => Some(sealed),
            Self::Clear(_) | Self::Erased => None,
        }
    }

    pub fn is_erased(&self) -> bool {
        matches!(self, Self::Erased)
    }
}

/// Which personal value of a reservation an event carries: what it is sealed as, and
/// its key in the event's payload. The one list of them (see
/// [`crate::contract::ReservationEventType::personal_field`]), read by the writer that
/// seals them and by every reader that must leave them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonalField {
    /// The guest's name and e-mail.
    Guest,
    /// A cancellation's reason (free text).
    CancelReason,
}

impl PersonalField {
    /// Its key in the payload of the event that carries it.
    pub const fn payload_key(self) -> &'static str {
        match self {
            Self::Guest => "guest",
            Self::CancelReason => "reason",
        }
    }
}

/// A value sealed under a guest's key: whose it is, which key, and the AEAD's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The guest the data is of.
    pub guest: GuestId,
    /// The guest's key that sealed it (a guest who books again after an erasure has a
    /// new key; the old one stays destroyed).
    pub key: Uuid,
    /// Base64 (standard, padded) of the nonce followed by the ciphertext and its tag.
    pub data: String,
}

/// A guest's identity within a chain: a keyed digest of the normalized e-mail address,
/// so that it is stable across reservations but cannot be reversed by hashing guesses
/// without the chain's secret. Written `g_` and 32 lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GuestId(String);

impl GuestId {
    const PREFIX: &'static str = "g_";
    const HEX_DIGITS: usize = 32;

    /// The id of 16 digest bytes (the caller computes the keyed digest).
    pub fn from_digest(digest: [u8; 16]) -> Self {
        let mut text = String::with_capacity(Self::PREFIX.len() + Self::HEX_DIGITS);
        text.push_str(Self::PREFIX);
        for byte in digest {
            text.push(hex_digit(byte >> 4));
            text.push(hex_digit(byte & 0x0f));
        }
        Self(text)
    }

    pub fn parse(text: &str) -> Result<Self, InvalidInput> {
        let well_formed = text.strip_prefix(Self::PREFIX).is_some_and(|hex| {
            hex.len() == Self::HEX_DIGITS
                && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        });
        if well_formed {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidInput::new(
                "guest_id",
                "must be a guest id such as g_0123456789abcdef0123456789abcdef",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn hex_digit(nibble: u8) -> char {
    char::from(if nibble < 10 {
        b'0' + nibble
    } else {
        b'a' + nibble - 10
    })
}

impl std::fmt::Display for GuestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for GuestId {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text).map_err(|e| e.message)
    }
}

impl From<GuestId> for String {
    fn from(id: GuestId) -> Self {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_id_is_written_as_hex_and_parses_back() {
        let id = GuestId::from_digest([0xab; 16]);
        assert_eq!(id.as_str(), "g_abababababababababababababababab");
        assert_eq!(GuestId::parse(id.as_str()), Ok(id));
    }

    #[test]
    fn a_guest_id_of_another_shape_is_refused() {
        for text in [
            "",
            "g_",
            "g_ABABABABABABABABABABABABABABABAB",
            "x_abababababababababababababababab",
            "g_abababababababababababababababa",
            "g_abababababababababababababababab0",
        ] {
            assert!(GuestId::parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn personal_data_is_tagged_by_its_state() {
        let clear: Personal<String> = Personal::Clear("changed plans".into());
        assert_eq!(
            serde_json::to_value(&clear).expect("json"),
            serde_json::json!({"clear": "changed plans"})
        );
        let erased: Personal<String> = Personal::Erased;
        assert_eq!(
            serde_json::to_value(&erased).expect("json"),
            serde_json::json!("erased")
        );
        let sealed: Personal<String> = Personal::Sealed(Sealed {
            guest: GuestId::from_digest([1; 16]),
            key: Uuid::nil(),
            data: "AAAA".into(),
        });
        let json = serde_json::to_value(&sealed).expect("json");
        assert_eq!(
            json["sealed"]["guest"],
            "g_01010101010101010101010101010101"
        );
        let back: Personal<String> = serde_json::from_value(json).expect("back");
        assert_eq!(back, sealed);
    }
}
