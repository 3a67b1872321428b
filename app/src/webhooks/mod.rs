//! Partner webhooks (docs/notifications.md): a partner subscribes to event types (of
//! some hotels, or all), and is POSTed each matching event, signed the Standard Webhooks
//! way, retried until it answers 2xx, in order per reservation.
//!
//! Three parts, one direction: the subscriptions an admin PUTs (here); the deliveries,
//! made from the event log by a projection in the transaction of its checkpoint
//! (`projections::webhooks`, with every other projection: every matching event once,
//! even those committed while the subscriber was failing); and the worker that sends
//! them ([`sender`]).

pub mod destinations;
pub mod secrets;
pub mod sender;

use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use sqlx::{PgPool, Row};

/// The event types a partner may subscribe to (the contract's names).
pub const EVENT_TYPES: [&str; 13] = [
    "reservation.held",
    "reservation.confirmed",
    "reservation.cancelled",
    "reservation.expired",
    "reservation.declined",
    "reservation.dates_changed",
    "reservation.checked_in",
    "reservation.checked_out",
    "reservation.no_show",
    "inventory.changed",
    "block.created",
    "block.changed",
    "block.released",
];

/// Why a subscription was refused (each a 422 naming its field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidSubscription {
    pub field: &'static str,
    pub message: String,
}

fn invalid(field: &'static str, message: impl Into<String>) -> InvalidSubscription {
    InvalidSubscription {
        field,
        message: message.into(),
    }
}

/// A subscription as validated at the boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    id: String,
    url: String,
    /// Empty: every type (`"*"`).
    event_types: Vec<String>,
    hotel_ids: Option<Vec<i64>>,
    secret: String,
}

/// A subscription as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    pub id: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub hotel_ids: Option<Vec<i64>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub paused_at: Option<DateTime<Utc>>,
}

/// The signing key of a `whsec_` secret (the base64 after the prefix).
pub fn signing_key(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix("whsec_")?;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .filter(|key| (24..=64).contains(&key.len()))
}

/// `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under `key`.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag)
    )
}

impl Subscription {
    /// Validates what an admin sent.
    pub fn parse(
        id: &str,
        url: &str,
        events: &[String],
        hotel_ids: Option<&[i64]>,
        secret: &str,
    ) -> Result<Self, InvalidSubscription> {
        let id_ok = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !id_ok {
            return Err(invalid(
                "subscription_id",
                "must be 1 to 64 letters, digits, '_', '.' or '-'",
            ));
        }
        let url = url.trim();
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        let host_ok = url
            .split_once("://")
            .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
            .is_some_and(|host| !host.is_empty());
        if !scheme_ok || !host_ok || url.len() > 2048 || url.chars().any(char::is_whitespace) {
            return Err(invalid(
                "url",
                "must be an absolute http:// or https:// URL of at most 2048 characters",
            ));
        }
        if events.is_empty() || events.len() > EVENT_TYPES.len() + 1 {
            return Err(invalid(
                "events",
                "must list event types, or [\"*\"] for all",
            ));
        }
        let mut event_types = Vec::with_capacity(events.len());
        for event in events {
            if event == "*" {
                event_types.clear();
                break;
            }
            if !EVENT_TYPES.contains(&event.as_str()) {
                return Err(invalid(
                    "events",
                    format!(
                        "unknown event type {event:?}; known: {}",
                        EVENT_TYPES.join(", ")
                    ),
                ));
            }
            if !event_types.contains(event) {
                event_types.push(event.clone());
            }
        }
        let hotel_ids = match hotel_ids {
            None => None,
            Some(ids) if ids.is_empty() || ids.len() > 1000 => {
                return Err(invalid(
                    "hotel_ids",
                    "must list 1 to 1000 hotels, or be absent",
                ))
            }
            Some(ids) if ids.iter().any(|id| *id < 1) => {
                return Err(invalid("hotel_ids", "must be positive integers"))
            }
            Some(ids) => {
                let mut ids = ids.to_vec();
                ids.sort_unstable();
                ids.dedup();
                Some(ids)
            }
        };
        if signing_key(secret).is_none() {
            return Err(invalid(
                "secret",
                "must be \"whsec_\" followed by the base64 of 24 to 64 random bytes",
            ));
        }
        Ok(Self {
            id: id.to_owned(),
            url: url.to_owned(),
            event_types,
            hotel_ids,
            secret: secret.to_owned(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

fn stored(row: &sqlx::postgres::PgRow) -> Result<StoredSubscription, sqlx::Error> {
    let types: Vec<String> = row.try_get("event_types")?;
    Ok(StoredSubscription {
        id: row.try_get("subscription_id")?,
        url: row.try_get("url")?,
        event_types: if types.is_empty() {
            vec!["*".to_owned()]
        } else {
            types
        },
        hotel_ids: row.try_get("hotel_ids")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        paused_at: row.try_get("paused_at")?,
    })
}

/// Creates or replaces a subscription; a paused one resumes (its waiting deliveries
/// go out, oldest first). Returns it as stored and whether it is new.
/// The secret is stored sealed under `key` (see [`secrets`]).
pub async fn put(
    pool: &PgPool,
    subscription: &Subscription,
    key: &secrets::SecretsKey,
    now: DateTime<Utc>,
) -> Result<(StoredSubscription, bool), sqlx::Error> {
    let row = sqlx::query(
        "INSERT INTO webhook_subscriptions
             (subscription_id, url, event_types, hotel_ids, secret, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $6)
         ON CONFLICT (subscription_id) DO UPDATE
            SET url = EXCLUDED.url, event_types = EXCLUDED.event_types,
                hotel_ids = EXCLUDED.hotel_ids, secret = EXCLUDED.secret,
                updated_at = EXCLUDED.updated_at, consecutive_failures = 0, paused_at = NULL
         RETURNING subscription_id, url, event_types, hotel_ids, created_at, updated_at,
                   paused_at, (xmax = 0) AS created",
    )
    .bind(&subscription.id)
    .bind(&subscription.url)
    .bind(&subscription.event_types)
    .bind(&subscription.hotel_ids)
    .bind(key.seal(&subscription.id, &subscription.secret))
    .bind(now)
    .fetch_one(pool)
    .await?;
    // A resumed subscriber's waiting deliveries are due now, not at their backoff.
    sqlx::query(
        "UPDATE webhook_deliveries SET next_attempt_at = LEAST(next_attempt_at, $2)
          WHERE subscription_id = $1 AND state = 'pending'",
    )
    .bind(&subscription.id)
    .bind(now)
    .execute(pool)
    .await?;
    let created: bool = row.try_get("created")?;
    Ok((stored(&row)?, created))
}

/// Deletes a subscription and its deliveries; `false` if there was none.
pub async fn delete(pool: &PgPool, id: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM webhook_subscriptions WHERE subscription_id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// One subscription, if it exists.
pub async fn get(pool: &PgPool, id: &str) -> Result<Option<StoredSubscription>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT subscription_id, url, event_types, hotel_ids, created_at, updated_at, paused_at
           FROM webhook_subscriptions WHERE subscription_id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(stored).transpose()
}

/// A delivery as the log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub delivery_id: String,
    pub event_type: String,
    /// `pending` (not tried yet), `retrying`, `delivered` or `failed`.
    pub state: &'static str,
    pub attempts: i32,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// A subscription's deliveries, newest first, at most `limit`.
pub async fn deliveries(
    pool: &PgPool,
    id: &str,
    limit: i64,
) -> Result<Vec<DeliveryRow>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT delivery_id, event_type, state, attempts, last_status, last_error, created_at,
                delivered_at
           FROM webhook_deliveries WHERE subscription_id = $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(id)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|row| {
            let state: String = row.try_get("state")?;
            let attempts: i32 = row.try_get("attempts")?;
            Ok(DeliveryRow {
                delivery_id: row.try_get("delivery_id")?,
                event_type: row.try_get("event_type")?,
                state: match state.as_str() {
                    "delivered" => "delivered",
                    "failed" => "failed",
                    _ if attempts > 0 => "retrying",
                    _ => "pending",
                },
                attempts,
                last_status: row.try_get("last_status")?,
                last_error: row.try_get("last_error")?,
                created_at: row.try_get("created_at")?,
                delivered_at: row.try_get("delivered_at")?,
            })
        })
        .collect()
}

/// Sends a delivery again: due now, with a new day to succeed in. `false` when the
/// subscription has no such delivery.
pub async fn retry(
    pool: &PgPool,
    subscription: &str,
    delivery: &str,
    now: DateTime<Utc>,
    retry_window: chrono::Duration,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE webhook_deliveries
            SET state = 'pending', next_attempt_at = $3, give_up_at = $4
          WHERE subscription_id = $1 AND delivery_id = $2",
    )
    .bind(subscription)
    .bind(delivery)
    .bind(now)
    .bind(now + retry_window)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn parse(
        url: &str,
        events: &[&str],
        hotels: Option<&[i64]>,
        secret: &str,
    ) -> Result<Subscription, InvalidSubscription> {
        let events: Vec<String> = events.iter().map(|s| s.to_string()).collect();
        Subscription::parse("partner-1", url, &events, hotels, secret)
    }

    #[test]
    fn a_subscription_names_known_types_an_http_url_and_a_whsec_secret() {
        let ok = parse(
            "https://pms.example/hooks",
            &["reservation.confirmed"],
            Some(&[812, 812]),
            SECRET,
        )
        .expect("valid");
        assert_eq!(ok.hotel_ids, Some(vec![812]));
        assert!(parse("http://x", &["*"], None, SECRET)
            .expect("valid")
            .event_types
            .is_empty());
        assert_eq!(
            parse("ftp://x", &["*"], None, SECRET).map_err(|e| e.field),
            Err("url")
        );
        assert_eq!(
            parse("https://", &["*"], None, SECRET).map_err(|e| e.field),
            Err("url")
        );
        assert_eq!(
            parse("http://x", &[], None, SECRET).map_err(|e| e.field),
            Err("events")
        );
        assert_eq!(
            parse("http://x", &["room.sold"], None, SECRET).map_err(|e| e.field),
            Err("events")
        );
        assert_eq!(
            parse("http://x", &["*"], Some(&[0]), SECRET).map_err(|e| e.field),
            Err("hotel_ids")
        );
        assert_eq!(
            parse("http://x", &["*"], None, "secret").map_err(|e| e.field),
            Err("secret")
        );
        assert_eq!(
            parse("http://x", &["*"], None, "whsec_c2hvcnQ=").map_err(|e| e.field),
            Err("secret")
        );
        let events = vec!["*".to_owned()];
        assert_eq!(
            Subscription::parse("no spaces", "http://x", &events, None, SECRET)
                .map_err(|e| e.field),
            Err("subscription_id")
        );
    }

    #[test]
    fn the_signature_is_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let key = signing_key(SECRET).expect("a key");
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
