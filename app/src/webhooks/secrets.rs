//! Partner webhooks' signing secrets, sealed at rest as guests' personal data is.
//!
//! A subscription's `whsec_` secret is what lets anyone sign a delivery a partner will
//! trust: stored in the clear, a copy of the database (a backup, a replica, a support
//! dump) would let its holder forge our webhooks. So the secret is stored sealed
//! (XChaCha20-Poly1305, as [`store::privacy::cipher`] seals personal data) under a key of
//! the deployment kept in the key store (`privacy.settings`, `webhook_secrets_key`),
//! bound to the subscription's id: a sealed secret copied to another subscription does
//! not open. The sender opens it for each pass; nothing answers it to a client.
//!
//! Secrets stored before sealing (text starting `whsec_`) still open as they are, and
//! are sealed when the server starts ([`seal_clear`]) or the subscription is put again.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use sqlx::PgPool;

use store::privacy::keys::{KeyStore, KeyStoreError, PgKeyStore, WEBHOOK_SECRETS_KEY};

/// How a sealed secret's text begins.
const PREFIX: &str = "sealed:v1:";
const NONCE_BYTES: usize = 24;

/// The key secrets are sealed under (32 bytes).
#[derive(Clone)]
pub struct SecretsKey(Key);

impl std::fmt::Debug for SecretsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretsKey(..)")
    }
}

/// Why a stored secret does not open.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(transparent)]
    Keys(#[from] KeyStoreError),
    #[error("the stored secret of subscription {0} does not open: it was altered or moved")]
    Tampered(String),
}

impl SecretsKey {
    /// The deployment's key, made by the first process that asks.
    pub async fn load(pool: &PgPool) -> Result<Self, KeyStoreError> {
        let mut conn = pool.acquire().await?;
        let bytes = PgKeyStore::new(pool.clone())
            .deployment_secret(&mut conn, WEBHOOK_SECRETS_KEY)
            .await?;
        Self::from_bytes(&bytes)
            .ok_or_else(|| KeyStoreError::Corrupt("the webhook secrets key is not 32 bytes".into()))
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        (bytes.len() == 32).then(|| Self(*Key::from_slice(bytes)))
    }

    /// `secret` sealed for subscription `id`, as stored.
    pub fn seal(&self, id: &str, secret: &str) -> String {
        let cipher = XChaCha20Poly1305::new(&self.0);
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = associated_data(id);
        // Encrypting a few bytes in memory cannot fail (only a message past the
        // cipher's length limit would).
        let sealed = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: secret.as_bytes(),
                    aad: &aad,
                },
            )
            .unwrap_or_default();
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{PREFIX}{}", STANDARD.encode(bytes))
    }

    /// The secret of subscription `id` as stored (sealed, or in the clear from before).
    pub fn open(&self, id: &str, stored: &str) -> Result<String, SecretError> {
        let Some(encoded) = stored.strip_prefix(PREFIX) else {
            // Stored before secrets were sealed.
            return Ok(stored.to_owned());
        };
        let tampered = || SecretError::Tampered(id.to_owned());
        let bytes = STANDARD.decode(encoded).map_err(|_| tampered())?;
        if bytes.len() <= NONCE_BYTES {
            return Err(tampered());
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
        let aad = associated_data(id);
        let opened = XChaCha20Poly1305::new(&self.0)
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| tampered())?;
        String::from_utf8(opened).map_err(|_| tampered())
    }
}

fn associated_data(id: &str) -> Vec<u8> {
    format!("rsv-webhook-secret-v1|{id}").into_bytes()
}

/// Seals every secret still stored in the clear; how many it sealed.
pub async fn seal_clear(pool: &PgPool) -> Result<u64, KeyStoreError> {
    let clear: Vec<(String, String)> = sqlx::query_as(
        "SELECT subscription_id, secret FROM webhook_subscriptions WHERE secret NOT LIKE 'sealed:%'",
    )
    .fetch_all(pool)
    .await?;
    if clear.is_empty() {
        return Ok(0);
    }
    let key = SecretsKey::load(pool).await?;
    let mut sealed = 0;
    for (id, secret) in clear {
        // Only if it is still the clear text read: a PUT meanwhile stored a sealed one.
        sealed += sqlx::query(
            "UPDATE webhook_subscriptions SET secret = $3
              WHERE subscription_id = $1 AND secret = $2",
        )
        .bind(&id)
        .bind(&secret)
        .bind(key.seal(&id, &secret))
        .execute(pool)
        .await?
        .rows_affected();
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SecretsKey {
        SecretsKey::from_bytes(&[7; 32]).expect("a key")
    }

    #[test]
    fn a_sealed_secret_opens_for_its_subscription_and_shows_nothing_of_itself() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

        let sealed = key().seal("pms-1", secret);

        assert!(sealed.starts_with(PREFIX));
        assert!(!sealed.contains("MfKQ9r8G"));
        assert_ne!(
            sealed,
            key().seal("pms-1", secret),
            "a fresh nonce each time"
        );
        assert_eq!(key().open("pms-1", &sealed).expect("opens"), secret);
    }

    #[test]
    fn a_sealed_secret_moved_to_another_subscription_or_altered_does_not_open() {
        let sealed = key().seal("pms-1", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let mut altered = sealed.clone();
        altered.replace_range(PREFIX.len()..PREFIX.len() + 1, "A");

        assert!(key().open("pms-2", &sealed).is_err());
        assert!(altered == sealed || key().open("pms-1", &altered).is_err());
        let other = SecretsKey::from_bytes(&[8; 32]).expect("a key");
        assert!(other.open("pms-1", &sealed).is_err());
    }

    #[test]
    fn a_secret_stored_before_sealing_opens_as_it_is() {
        let clear = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

        assert_eq!(key().open("pms-1", clear).expect("opens"), clear);
    }
}
