//! Sending the deliveries: `POST` of the body to the subscriber's URL with the Standard
//! Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`), after the
//! commit, outside any transaction.
//!
//! A worker leases due rows ([`store::outbox`]: several servers share the work; a row is
//! leased once)
//! of subscribers not paused, and only the first pending delivery of each ordering key
//! (a reservation, or a room type's inventory): a reservation's `cancelled` never
//! reaches a partner before its `confirmed`, even while the first is being retried. The
//! rows of a pass, each of another key, are sent concurrently. A
//! 2xx is delivered; anything else (a status, a timeout, a refused connection) is
//! retried with the same id after a backoff doubling up to a ceiling, until the
//! delivery's day is over (`failed`). Every failed attempt counts against the
//! subscriber; one failing that many times in a row is paused (`webhook_paused_total`)
//! until an admin PUTs it again, rather than retried for ever.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use sqlx::{PgPool, Row};

use super::destinations::{self, Destinations};
use super::secrets::SecretsKey;
use super::{signature, signing_key};
use store::privacy::KeyStoreError;

/// The HTTP client deliveries go out through, with the destinations it may reach (see
/// [`destinations`]): the only way to send them, so no caller can skip the guard.
#[derive(Debug, Clone)]
pub struct WebhookClient {
    http: reqwest::Client,
    destinations: Destinations,
    /// The key the subscriptions' secrets are sealed under, loaded on first need.
    secrets: std::sync::Arc<tokio::sync::OnceCell<SecretsKey>>,
}

impl WebhookClient {
    pub fn new(destinations: Destinations) -> reqwest::Result<Self> {
        Ok(Self {
            http: destinations::client(&destinations)?,
            destinations,
            secrets: std::sync::Arc::default(),
        })
    }

    async fn secrets(&self, pool: &PgPool) -> Result<&SecretsKey, sqlx::Error> {
        self.secrets
            .get_or_try_init(|| async {
                SecretsKey::load(pool).await.map_err(|e| match e {
                    KeyStoreError::Database(e) => e,
                    other => sqlx::Error::Protocol(other.to_string()),
                })
            })
            .await
    }

    fn http(&self) -> &reqwest::Client {
        &self.http
    }

    fn destinations(&self) -> &Destinations {
        &self.destinations
    }
}

/// An error with its causes, which is where reqwest says what went wrong (a refused
/// connection, or the resolver's refusal of a private address).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Deliveries of one pass sent at once.
const CONCURRENCY: usize = 16;

/// How the sender behaves.
#[derive(Debug, Clone, Copy)]
pub struct SenderConfig {
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// Failed attempts in a row after which a subscriber is paused.
    pub pause_after: i32,
    /// How long a receiver has to answer.
    pub timeout: Duration,
    /// How long a sender may take with a leased row before another may try it.
    pub lease: Duration,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(3_600),
            pause_after: 50,
            timeout: Duration::from_secs(10),
            lease: Duration::from_secs(60),
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub delivered: usize,
    pub retrying: usize,
    pub failed: usize,
    pub paused: usize,
}

struct Due {
    id: i64,
    delivery_id: String,
    subscription: String,
    url: String,
    secret: String,
    body: String,
    attempts: i32,
    give_up_at: DateTime<Utc>,
}

/// Due deliveries: the first pending one of each ordering key of a subscriber not
/// paused, those due (a key's deliveries go out in order).
const LEASE: store::outbox::Lease = store::outbox::Lease {
    heads: "SELECT id FROM (
                SELECT DISTINCT ON (d.subscription_id, d.ordering_key) d.id, d.next_attempt_at
                  FROM webhook_deliveries d
                  JOIN webhook_subscriptions s
                    ON s.subscription_id = d.subscription_id AND s.paused_at IS NULL
                 WHERE d.state = 'pending'
                 ORDER BY d.subscription_id, d.ordering_key, d.id) heads
             WHERE next_attempt_at <= $1
             ORDER BY id
             LIMIT $2",
    lease: "UPDATE webhook_deliveries d SET next_attempt_at = $3, attempts = d.attempts + 1
              FROM webhook_subscriptions s
             WHERE d.id = ANY($1) AND d.state = 'pending' AND d.next_attempt_at <= $2
               AND s.subscription_id = d.subscription_id
            RETURNING d.id, d.delivery_id, d.subscription_id, s.url, s.secret,
                      d.body::text AS body, d.attempts, d.give_up_at",
};

/// Sends up to `limit` due deliveries; safe in several processes at once.
pub async fn send_due(
    pool: &PgPool,
    client: &WebhookClient,
    config: &SenderConfig,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Delivered, sqlx::Error> {
    let rows = LEASE.take(pool, now, config.lease, limit).await?;
    if rows.is_empty() {
        return Ok(Delivered::default());
    }
    let key = client.secrets(pool).await?;
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let subscription: String = row.try_get("subscription_id")?;
        let stored: String = row.try_get("secret")?;
        // A secret that does not open signs nothing: the attempt fails and says why.
        let secret = key.open(&subscription, &stored).unwrap_or_else(|e| {
            tracing::error!(error = %e, "a webhook secret does not open");
            String::new()
        });
        due.push(Due {
            id: row.try_get("id")?,
            delivery_id: row.try_get("delivery_id")?,
            subscription,
            url: row.try_get("url")?,
            secret,
            body: row.try_get("body")?,
            attempts: row.try_get("attempts")?,
            give_up_at: row.try_get("give_up_at")?,
        });
    }
    due.sort_by_key(|d| d.id);
    // The rows leased together have different ordering keys (only the first pending
    // delivery of a key is due), so they may be sent at once without reordering any
    // reservation's deliveries.
    let attempts: Vec<(Due, Answer)> = futures::stream::iter(due)
        .map(|row| async move {
            let outcome = post(client, config, &row, now).await;
            (row, outcome)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut done = Delivered::default();
    for (row, Answer { status, error }) in attempts {
        if error.is_none() {
            sqlx::query(
                "UPDATE webhook_deliveries
                    SET state = 'delivered', delivered_at = $2, last_status = $3, last_error = NULL
                  WHERE id = $1",
            )
            .bind(row.id)
            .bind(now)
            .bind(status)
            .execute(pool)
            .await?;
            sqlx::query(
                "UPDATE webhook_subscriptions SET consecutive_failures = 0
                  WHERE subscription_id = $1 AND consecutive_failures <> 0",
            )
            .bind(&row.subscription)
            .execute(pool)
            .await?;
            metrics::counter!("webhook_delivered_total").increment(1);
            done.delivered += 1;
            continue;
        }
        let retry_at =
            now + crate::backoff::doubling(config.first_backoff, config.max_backoff, row.attempts);
        let give_up = retry_at > row.give_up_at;
        sqlx::query(
            "UPDATE webhook_deliveries
                SET state = CASE WHEN $5 THEN 'failed' ELSE 'pending' END,
                    next_attempt_at = $2, last_status = $3, last_error = $4
              WHERE id = $1",
        )
        .bind(row.id)
        .bind(retry_at)
        .bind(status)
        .bind(&error)
        .bind(give_up)
        .execute(pool)
        .await?;
        tracing::warn!(subscription = %row.subscription, delivery = %row.delivery_id,
            attempts = row.attempts, give_up, error = error.as_deref().unwrap_or(""),
            "webhook delivery not acknowledged");
        if give_up {
            metrics::counter!("webhook_failed_total").increment(1);
            done.failed += 1;
        } else {
            metrics::counter!("webhook_retries_total").increment(1);
            done.retrying += 1;
        }
        let paused = sqlx::query(
            "UPDATE webhook_subscriptions
                SET consecutive_failures = consecutive_failures + 1,
                    paused_at = CASE WHEN consecutive_failures + 1 >= $2 THEN $3 ELSE paused_at END
              WHERE subscription_id = $1 AND paused_at IS NULL
             RETURNING paused_at IS NOT NULL AS paused",
        )
        .bind(&row.subscription)
        .bind(config.pause_after)
        .bind(now)
        .fetch_optional(pool)
        .await?;
        if paused.is_some_and(|r| r.try_get::<bool, _>("paused").unwrap_or(false)) {
            tracing::error!(subscription = %row.subscription,
                "webhook subscriber paused after failing {} times in a row", config.pause_after);
            metrics::counter!("webhook_paused_total").increment(1);
            done.paused += 1;
        }
    }
    Ok(done)
}

/// What one attempt came to.
struct Answer {
    /// The status the receiver answered (none: no answer).
    status: Option<i32>,
    /// Why it does not count as delivered (none: a 2xx).
    error: Option<String>,
}

/// One attempt at a delivery.
async fn post(
    client: &WebhookClient,
    config: &SenderConfig,
    row: &Due,
    now: DateTime<Utc>,
) -> Answer {
    let answer = |status: Option<u16>, error: Option<String>| Answer {
        status: status.map(i32::from),
        error,
    };
    let Some(key) = signing_key(&row.secret) else {
        let error = "the subscription's secret is not a whsec_ key";
        return answer(None, Some(error.into()));
    };
    // A host written as an address never reaches the client's guarded resolver: it is
    // checked here (see `destinations`).
    let literal = reqwest::Url::parse(&row.url).ok().and_then(|url| {
        let host = url.host_str()?.to_owned();
        Some((destinations::literal_ip(&host)?, host))
    });
    if let Some(refusal) = literal.and_then(|(ip, host)| client.destinations().refusal(&host, ip)) {
        return answer(None, Some(refusal));
    }
    let timestamp = now.timestamp();
    let signed = signature(&key, &row.delivery_id, timestamp, row.body.as_bytes());
    let sent = client
        .http()
        .post(&row.url)
        .timeout(config.timeout)
        .header("content-type", "application/json")
        .header("webhook-id", &row.delivery_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signed)
        .body(row.body.clone())
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => {
            answer(Some(response.status().as_u16()), None)
        }
        Ok(response) => {
            let status = response.status();
            answer(Some(status.as_u16()), Some(format!("answered {status}")))
        }
        Err(e) if e.is_timeout() => answer(None, Some("no answer in time".into())),
        Err(e) => answer(None, Some(format!("could not be reached: {}", causes(&e)))),
    }
}
