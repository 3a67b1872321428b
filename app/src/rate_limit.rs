//! The per-guest hold limit: at most `limit` holds per guest e-mail per channel within a
//! sliding window (by default 3 per 15 minutes), kept in Redis so that every server
//! process shares one count.
//!
//! What it is for: one guest (or a script posing as one) holding rooms over and over to
//! keep them off sale. What it is not: the arbiter of any sale. PostgreSQL decides every
//! hold, and a hold lapses on its own after the hold TTL.
//!
//! How it is shaped, and why:
//!
//! - **One sorted set per (channel, guest e-mail)**, scored by the time of each counted
//!   hold, and **one Lua script** that trims entries older than the window, then admits
//!   or refuses, in one atomic step: two servers racing for a guest's last allowance
//!   cannot both take it, and there is no read-then-write gap.
//! - **The member is a hash of (client scope, Idempotency-Key)**: a retry of a request
//!   that already counted finds its member and is let through (it replays the stored
//!   answer) without counting twice.
//! - **Only holds that succeed count**: the request that added the member removes it again
//!   when the hold is refused (sold out, price changed, invalid) or fails.
//! - **The time comes from the server's clock**, passed in by the caller, never from
//!   Redis `TIME`: the window then moves with the clock every other rule uses (and tests
//!   can move it).
//! - **Keys** are `rsv:{database}:holds:{channel}:{guest id}`: under the same
//!   per-deployment prefix as the availability model, the guest named by their keyed id
//!   (no address is stored in Redis, nor a bare hash of one that a guess could confirm;
//!   an erasure finds and deletes the guest's keys by it) and the channel name escaped.
//! - **Fail open**: when Redis is down, slow (a short timeout, well under a second) or
//!   answers an error, the hold is allowed, a warning is logged (at most every few
//!   seconds) and `hold_rate_limit_unavailable_total` counts it. The limit protects
//!   inventory from hoarding by one guest, but the database decides every sale and every
//!   hold lapses on its own after the hold TTL, so an outage of the cache must not stop
//!   bookings; what failing open can cost is bounded by the inventory and the hold TTL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use aggregates::GuestId;
use chrono::{DateTime, Utc};
use projections::redis_conn::RedisConn;
use sha2::{Digest, Sha256};

/// How long a limit check (or the release of a refused hold) may wait for Redis before
/// the hold goes ahead without it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(150);

/// At most one "Redis unavailable" warning per this interval; the rest are counted.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// `KEYS[1]`: the guest's sorted set. `ARGV`: now (ms), window (ms), limit, member.
/// Answers `{allowed, added, retry_after_ms}`.
static ADMIT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local member = ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZSCORE', KEYS[1], member) then
  return {1, 0, 0}
end
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, member)
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #oldest < 2 then
  return {0, 0, window}
end
return {0, 0, tonumber(oldest[2]) + window - now}
",
    )
});

/// The per-guest hold limit, shared by every handler (cheap to clone).
#[derive(Clone)]
pub struct HoldLimiter {
    redis: RedisConn,
    prefix: String,
    limit: u32,
    window: Duration,
    timeout: Duration,
    warnings: Arc<WarnThrottle>,
}

/// A hold about to be attempted, as the limiter sees it.
#[derive(Debug, Clone, Copy)]
pub struct HoldAttempt<'a> {
    /// The channel that will own the reservation.
    pub channel: &'a str,
    /// The guest (the keyed id of their e-mail, see [`store::privacy`]).
    pub guest: &'a GuestId,
    /// The scope of the idempotency key (the calling token).
    pub scope: &'a str,
    /// The request's Idempotency-Key.
    pub idempotency_key: &'a str,
}

/// The limiter's answer.
#[derive(Debug)]
pub enum Admission {
    /// Counted now; hand the ticket back to [`HoldLimiter::release`] if the hold fails.
    Counted(Ticket),
    /// Let through without counting: a retry of a request already counted, or Redis
    /// could not be asked (fail open).
    Allowed,
    /// Over the limit: the oldest counted hold leaves the window after `retry_after`.
    Limited { retry_after: Duration },
}

/// A counted hold, to be uncounted if the hold does not succeed.
#[derive(Debug)]
#[must_use = "release the ticket when the hold fails"]
pub struct Ticket {
    key: String,
    member: String,
}

impl HoldLimiter {
    /// A limit of `limit` holds per guest per channel within `window`, with its keys
    /// under the prefix of the deployment whose database is `database`.
    pub fn new(redis: RedisConn, database: &str, limit: u32, window: Duration) -> Self {
        Self {
            redis,
            prefix: format!("rsv:{database}:holds"),
            limit,
            window,
            timeout: DEFAULT_TIMEOUT,
            warnings: Arc::new(WarnThrottle::default()),
        }
    }

    /// How long to wait for Redis before failing open.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// The Redis key of a guest's counted holds on a channel.
    pub fn key(&self, channel: &str, guest: &GuestId) -> String {
        format!("{}:{}:{guest}", self.prefix, escape(channel))
    }

    /// Forgets every hold counted for `guest`, on every channel (their erasure); how
    /// many channels' counts there were.
    pub async fn forget(&self, guest: &GuestId) -> redis::RedisResult<usize> {
        let mut redis = self.redis.clone();
        let keys = redis
            .scan_keys(&format!("{}:*:{guest}", self.prefix))
            .await?;
        for key in &keys {
            redis::cmd("DEL")
                .arg(key)
                .query_async::<()>(&mut redis)
                .await?;
        }
        Ok(keys.len())
    }

    /// Counts the hold if the guest has allowance left at `now`, in one atomic step.
    /// Never fails: when Redis cannot answer, the hold is allowed.
    pub async fn admit(&self, attempt: HoldAttempt<'_>, now: DateTime<Utc>) -> Admission {
        let key = self.key(attempt.channel, attempt.guest);
        let member = member(attempt.scope, attempt.idempotency_key);
        let window_ms = i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX);
        let mut invocation = ADMIT.prepare_invoke();
        invocation
            .key(&key)
            .arg(now.timestamp_millis())
            .arg(window_ms)
            .arg(self.limit)
            .arg(&member);
        let mut redis = self.redis.clone();
        let reply = tokio::time::timeout(
            self.timeout,
            invocation.invoke_async::<(i64, i64, i64)>(&mut redis),
        )
        .await;
        match reply {
            Ok(Ok((1, 1, _))) => Admission::Counted(Ticket { key, member }),
            Ok(Ok((1, _, _))) => Admission::Allowed,
            Ok(Ok((_, _, retry_after_ms))) => {
                metrics::counter!("hold_rate_limited_total", "channel" => attempt.channel.to_owned())
                    .increment(1);
                Admission::Limited {
                    retry_after: Duration::from_millis(u64::try_from(retry_after_ms).unwrap_or(0)),
                }
            }
            Ok(Err(e)) => self.unavailable("check", &e.to_string()),
            Err(_) => self.unavailable("check", "timed out"),
        }
    }

    /// Uncounts a hold that did not succeed. Best effort: if Redis cannot be reached, the
    /// entry stays until it leaves the window.
    pub async fn release(&self, ticket: Ticket) {
        let mut redis = self.redis.clone();
        let mut command = redis::cmd("ZREM");
        command.arg(&ticket.key).arg(&ticket.member);
        let reply =
            tokio::time::timeout(self.timeout, command.query_async::<i64>(&mut redis)).await;
        match reply {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                self.unavailable("release", &e.to_string());
            }
            Err(_) => {
                self.unavailable("release", "timed out");
            }
        }
    }

    fn unavailable(&self, step: &'static str, error: &str) -> Admission {
        metrics::counter!("hold_rate_limit_unavailable_total", "step" => step).increment(1);
        if let Some(suppressed) = self.warnings.allow() {
            tracing::warn!(
                step,
                error,
                suppressed,
                "Redis unavailable for the hold rate limit; allowing the hold (fail open)"
            );
        }
        Admission::Allowed
    }
}

/// Whole seconds a client should wait, rounded up, at least 1.
pub fn retry_after_seconds(retry_after: Duration) -> u32 {
    let millis = retry_after.as_millis().max(1);
    u32::try_from(millis.div_ceil(1000)).unwrap_or(u32::MAX)
}

/// The member of a request: the same (scope, key) is the same member.
fn member(scope: &str, idempotency_key: &str) -> String {
    let mut input = Vec::with_capacity(scope.len() + idempotency_key.len() + 1);
    input.extend_from_slice(scope.as_bytes());
    // The scope never contains NUL, so (scope, key) pairs cannot collide by shifting.
    input.push(0);
    input.extend_from_slice(idempotency_key.as_bytes());
    hash_hex(&input, 16)
}

/// The first `bytes` bytes of the SHA-256 of `input`, in hex.
fn hash_hex(input: &[u8], bytes: usize) -> String {
    let digest = Sha256::digest(input);
    hex::encode(&digest[..bytes.min(digest.len())])
}

/// A key segment that cannot contain a separator or a Redis Cluster hash tag:
/// `[A-Za-z0-9._-]` as is, every other byte as `%XX`.
fn escape(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Lets one warning through per [`WARN_EVERY`], counting the ones it holds back.
#[derive(Default)]
struct WarnThrottle {
    last: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

impl WarnThrottle {
    /// `Some(warnings suppressed since the last one)` when this one may be logged.
    fn allow(&self) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match *last {
            Some(at) if now.duration_since(at) < WARN_EVERY => {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                None
            }
            _ => {
                *last = Some(now);
                Some(self.suppressed.swap(0, Ordering::Relaxed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_seconds(Duration::from_secs(900)), 900);
    }

    #[test]
    fn an_odd_channel_name_is_escaped_and_cannot_add_a_separator() {
        assert_eq!(escape("web"), "web");
        assert_eq!(escape("partner-1.eu_x"), "partner-1.eu_x");
        assert_eq!(escape("a:b{c}*"), "a%3Ab%7Bc%7D%2A");
        assert_eq!(escape("ç"), "%C3%A7");
    }

    #[test]
    fn the_same_scope_and_key_are_the_same_member_and_others_differ() {
        assert_eq!(member("channel:t1", "k1"), member("channel:t1", "k1"));
        assert_ne!(member("channel:t1", "k1"), member("channel:t2", "k1"));
        assert_ne!(member("channel:t1", "k1"), member("channel:t1", "k2"));
        assert_ne!(member("a", "bc"), member("ab", "c"));
    }

    #[tokio::test]
    async fn keys_share_the_deployment_prefix_and_name_the_guest_by_id() {
        let redis =
            projections::redis_conn::connect("redis://127.0.0.1:1").expect("a lazy connection");
        let limiter = HoldLimiter::new(redis, "rsv_db", 3, Duration::from_secs(900));
        let guest = GuestId::from_digest([9; 16]);

        let key = limiter.key("web", &guest);

        assert_eq!(
            key,
            "rsv:rsv_db:holds:web:g_09090909090909090909090909090909"
        );
        assert_ne!(key, limiter.key("mobile", &guest));
    }
}
