//! Bearer tokens and roles. Tokens are configured at start-up (`API_TOKENS`, entries
//! `token:role[:name]`); a request's token is looked up by its SHA-256, so the table never
//! compares secrets byte by byte.

use std::collections::HashMap;
use std::fmt;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Hotel staff: catalog and inventory, any reservation.
    Admin,
    /// A booking front-end: its own reservations only.
    Channel,
    /// Read-only: event history and audit.
    Auditor,
}

impl Role {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "admin" => Some(Role::Admin),
            "channel" => Some(Role::Channel),
            "auditor" => Some(Role::Auditor),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Admin => "admin",
            Role::Channel => "channel",
            Role::Auditor => "auditor",
        })
    }
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Stable per token (a prefix of its hash): scopes idempotency keys.
    pub token_id: String,
    /// The configured name; for a channel, the owner of its reservations.
    pub name: String,
    pub role: Role,
}

impl Principal {
    /// Refuses the request unless the caller has one of `roles`.
    pub fn require(&self, roles: &[Role]) -> Result<(), ApiError> {
        if roles.contains(&self.role) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "the {} role may not do this",
                self.role
            )))
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct TokenTable {
    by_hash: HashMap<[u8; 32], Principal>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenTable {
    /// Parses `token:role[:name],...`. The name defaults to the role.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut table = TokenTable::default();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let mut parts = entry.splitn(3, ':');
            let token = parts.next().unwrap_or_default();
            let role = parts.next().unwrap_or_default();
            let role = Role::parse(role).ok_or_else(|| {
                format!(
                    "API_TOKENS: role of entry starting {:.4}… must be admin, channel or auditor",
                    token
                )
            })?;
            if token.len() < 8 {
                return Err("API_TOKENS: tokens must be at least 8 characters".into());
            }
            let name = parts
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or(&role.to_string())
                .to_owned();
            table.insert(token, role, name);
        }
        Ok(table)
    }

    pub fn insert(&mut self, token: &str, role: Role, name: String) {
        let hash = digest(token);
        let token_id = hex::encode(&hash[..8]);
        self.by_hash.insert(
            hash,
            Principal {
                token_id,
                name,
                role,
            },
        );
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// A table with one freshly generated admin token, and that token.
    pub fn generated_admin() -> (Self, String) {
        let mut bytes = [0_u8; 24];
        rand::thread_rng().fill_bytes(&mut bytes);
        let token = format!("adm_{}", hex::encode(bytes));
        let mut table = TokenTable::default();
        table.insert(&token, Role::Admin, "admin".into());
        (table, token)
    }

    pub fn authenticate(&self, token: &str) -> Option<&Principal> {
        self.by_hash.get(&digest(token))
    }
}

/// The caller, from any state that holds the token table (the application's; the
/// extractor names no more of it than the table, and borrows it).
impl<S> FromRequestParts<S> for Principal
where
    S: AsRef<TokenTable> + Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer <token>"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(|| ApiError::unauthorized("Authorization must be: Bearer <token>"))?;
        state
            .as_ref()
            .authenticate(token)
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("unknown token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_with_roles_and_optional_names() {
        let table =
            TokenTable::parse("secret-admin:admin, web-token-1:channel:web,audit-123:auditor")
                .expect("valid");
        let web = table.authenticate("web-token-1").expect("known");
        assert_eq!((web.role, web.name.as_str()), (Role::Channel, "web"));
        assert_eq!(
            table.authenticate("audit-123").map(|p| p.name.as_str()),
            Some("auditor")
        );
        assert!(table.authenticate("nope").is_none());
    }

    #[test]
    fn bad_token_specs_are_refused() {
        assert!(TokenTable::parse("secret-admin:root").is_err());
        assert!(TokenTable::parse("short:admin").is_err());
        assert!(TokenTable::parse("secret-admin").is_err());
    }
}
