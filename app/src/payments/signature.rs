//! Webhook signatures: `X-Signature` is the hex HMAC-SHA256 of the raw body under the
//! shared secret (`PAYMENT_WEBHOOK_SECRET`). Checked over the bytes as received, before
//! any parsing, and compared in constant time so the comparison leaks nothing about
//! how much of a forged signature was right.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The signature of `body` under `secret`, as the gateway sends it.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC accepts keys of any length, so `new_from_slice` cannot fail here.
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(body);
            hex::encode(mac.finalize().into_bytes())
        }
        Err(_) => String::new(),
    }
}

/// Whether `signature` (hex, optionally prefixed `sha256=`) signs `body` under `secret`.
pub fn verify(secret: &[u8], body: &[u8], signature: &str) -> bool {
    let signature = signature.trim();
    let hex_part = signature.strip_prefix("sha256=").unwrap_or(signature);
    let Ok(expected) = hex::decode(hex_part) else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_made_with_the_secret_verifies() {
        let signature = sign(b"secret", b"{\"a\":1}");
        assert!(verify(b"secret", b"{\"a\":1}", &signature));
        assert!(verify(
            b"secret",
            b"{\"a\":1}",
            &format!("sha256={signature}")
        ));
    }

    #[test]
    fn another_body_secret_or_garbage_does_not_verify() {
        let signature = sign(b"secret", b"{\"a\":1}");
        assert!(!verify(b"secret", b"{\"a\":2}", &signature));
        assert!(!verify(b"other", b"{\"a\":1}", &signature));
        assert!(!verify(b"secret", b"{\"a\":1}", "zz"));
        assert!(!verify(b"secret", b"{\"a\":1}", ""));
        assert!(!verify(b"secret", b"{\"a\":1}", &signature[..10]));
    }

    #[test]
    fn a_known_vector_matches() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
