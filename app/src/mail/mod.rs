//! Telling the guest (docs/notifications.md): sending the messages the write side
//! queued in `mail_outbox` (see `write::mail`), after their commit, through a
//! [`Mailer`].
//!
//! The worker leases due rows ([`store::outbox`]: several processes share the work, each
//! row leased once;
//! a reservation's messages go in order, a cancellation never before the
//! confirmation it cancels), reads the recipient from the reservation's sealed guest —
//! the write side's row, not the view, which may not have caught up with the commit
//! that queued the message — renders the message in the hotel's language and sends it.
//! A mail server that cannot be reached is retried with backoff; one that refuses the
//! message for good, or a row out of attempts, ends `failed` (counted, and listed for
//! a person). A guest erased before the message went out gets none: the row is
//! `dropped`.
//!
//! Sending is at least once, as SMTP allows no better: a process that dies after the
//! server took a message and before the row says so sends it again. The message's
//! `Message-ID` is the same on every attempt (the row's reservation, kind and
//! version), so a receiving system can tell the copy.

pub mod smtp;
pub mod templates;

use std::time::Duration;

use aggregates::{Guest, Personal, ReservationId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use store::privacy::{Binding, Field, Privacy};
use store::write::mail::{MailFacts, MailKind};
use templates::{Language, Names};

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub to_name: String,
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    /// The same on every attempt at this message (see the module docs).
    pub message_id: String,
}

/// Why a message was not sent.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// The server could not be reached, or answered "try later": try again.
    #[error("mail server unavailable: {0}")]
    Unavailable(String),
    /// The server refused this message for good (an address it will not deliver to):
    /// sending it again would be refused again.
    #[error("mail server refused the message: {0}")]
    Refused(String),
}

/// Sends a message; an SMTP server in production ([`smtp::SmtpMailer`]).
#[async_trait]
pub trait Mailer: Send + Sync {
    async fn send(&self, mail: &Mail) -> Result<(), MailError>;
}

/// How the mail worker behaves.
#[derive(Debug, Clone, Copy)]
pub struct MailConfig {
    /// Attempts before a message is given up (`failed`).
    pub max_attempts: i32,
    /// The first retry's delay; each further one doubles it, up to `max_backoff`.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a worker may take with a leased row before another may try it.
    pub lease: Duration,
}

impl Default for MailConfig {
    fn default() -> Self {
        // 2 s doubling to 10 min, 20 attempts: about two hours of trying.
        Self {
            max_attempts: 20,
            first_backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(600),
            lease: Duration::from_secs(60),
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub sent: usize,
    pub retrying: usize,
    pub failed: usize,
    pub dropped: usize,
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
pub enum MailWorkError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Privacy(#[from] store::privacy::PrivacyError),
}

struct Due {
    id: i64,
    reservation_id: Uuid,
    kind: MailKind,
    version: i64,
    facts: MailFacts,
    attempts: i32,
}

/// The catalog's names of a message's hotel and room type, and the hotel's language.
struct Place {
    hotel: String,
    room_type: String,
    /// The names of the room types beyond the first, in the facts' order.
    more_room_types: Vec<String>,
    language: Language,
}

/// The outcome of one attempt at a row.
enum Outcome {
    Sent,
    Retry(String),
    Failed(String),
    Dropped,
}

/// Due messages: the first pending one of each reservation (a reservation's mail goes
/// out in order), those due.
const LEASE: store::outbox::Lease = store::outbox::Lease {
    heads: "SELECT id FROM (
                SELECT DISTINCT ON (reservation_id) id, next_attempt_at FROM mail_outbox
                 WHERE state = 'pending' ORDER BY reservation_id, id) heads
             WHERE next_attempt_at <= $1
             ORDER BY id
             LIMIT $2",
    lease: "UPDATE mail_outbox SET next_attempt_at = $3, attempts = attempts + 1
             WHERE id = ANY($1) AND state = 'pending' AND next_attempt_at <= $2
            RETURNING id, reservation_id, kind, version, facts, attempts",
};

/// Sends up to `limit` due messages; safe in several processes at once.
pub async fn send_due(
    pool: &PgPool,
    privacy: &Privacy,
    mailer: &dyn Mailer,
    config: &MailConfig,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Sent, MailWorkError> {
    let rows = LEASE.take(pool, now, config.lease, limit).await?;
    if rows.is_empty() {
        return Ok(Sent::default());
    }
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let id: i64 = row.try_get("id")?;
        let kind: String = row.try_get("kind")?;
        let facts: serde_json::Value = row.try_get("facts")?;
        let (Some(kind), Ok(facts)) = (
            MailKind::parse(&kind),
            serde_json::from_value::<MailFacts>(facts),
        ) else {
            // Written by a build that knew more kinds or facts: a person looks at it.
            finish(
                pool,
                id,
                Outcome::Failed(format!("unreadable message of kind {kind:?}")),
                now,
                now,
            )
            .await?;
            continue;
        };
        due.push(Due {
            id,
            reservation_id: row.try_get("reservation_id")?,
            kind,
            version: row.try_get("version")?,
            facts,
            attempts: row.try_get("attempts")?,
        });
    }
    due.sort_by_key(|d| d.id);
    let mut done = Sent::default();
    for row in due {
        let outcome = attempt(pool, privacy, mailer, &row).await?;
        let outcome = match outcome {
            Outcome::Retry(error) if row.attempts >= config.max_attempts => Outcome::Failed(error),
            other => other,
        };
        match &outcome {
            Outcome::Sent => done.sent += 1,
            Outcome::Retry(error) => {
                tracing::warn!(reservation = %row.reservation_id, kind = %row.kind,
                    attempts = row.attempts, %error, "guest mail not sent; retrying");
                done.retrying += 1;
            }
            Outcome::Failed(error) => {
                tracing::error!(reservation = %row.reservation_id, kind = %row.kind,
                    attempts = row.attempts, %error, "guest mail given up");
                done.failed += 1;
            }
            Outcome::Dropped => done.dropped += 1,
        }
        let retry_at =
            now + crate::backoff::doubling(config.first_backoff, config.max_backoff, row.attempts);
        finish(pool, row.id, outcome, now, retry_at).await?;
    }
    Ok(done)
}

/// Records what an attempt at `now` came to (`retry_at`: when it is tried again).
async fn finish(
    pool: &PgPool,
    id: i64,
    outcome: Outcome,
    now: DateTime<Utc>,
    retry_at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let (state, error, metric) = match outcome {
        Outcome::Sent => ("sent", None, "mail_sent_total"),
        Outcome::Retry(error) => ("pending", Some(error), "mail_retries_total"),
        Outcome::Failed(error) => ("failed", Some(error), "mail_failed_total"),
        Outcome::Dropped => ("dropped", None, "mail_dropped_total"),
    };
    sqlx::query(
        "UPDATE mail_outbox
            SET state = $2, last_error = $3,
                next_attempt_at = CASE WHEN $2 = 'pending' THEN $4 ELSE next_attempt_at END,
                sent_at = CASE WHEN $2 = 'sent' THEN $5 ELSE sent_at END
          WHERE id = $1",
    )
    .bind(id)
    .bind(state)
    .bind(error)
    .bind(retry_at)
    .bind(now)
    .execute(pool)
    .await?;
    metrics::counter!(metric).increment(1);
    Ok(())
}

/// One attempt at one row: find its recipient and its names, render, send.
async fn attempt(
    pool: &PgPool,
    privacy: &Privacy,
    mailer: &dyn Mailer,
    row: &Due,
) -> Result<Outcome, MailWorkError> {
    let Some(mut guest) = recipient(pool, row.reservation_id).await? else {
        return Ok(Outcome::Failed(
            "the reservation is not in the database".into(),
        ));
    };
    let binding = Binding {
        reservation: ReservationId::from_uuid(row.reservation_id),
        field: Field::Guest,
    };
    privacy.open(binding, &mut guest).await?;
    let guest = match guest {
        Personal::Clear(guest) => guest,
        Personal::Erased => return Ok(Outcome::Dropped),
        Personal::Sealed(_) => {
            return Ok(Outcome::Retry("the guest's key could not be read".into()))
        }
    };
    let place = place(pool, &row.facts).await?;
    let names = Names {
        // The short reference the guest reads out; the full id is in the web links.
        reference: aggregates::ReservationId::from_uuid(row.reservation_id)
            .reference()
            .to_string(),
        guest_name: guest.name(),
        hotel: &place.hotel,
        room_type: &place.room_type,
        more_room_types: &place.more_room_types,
        language: place.language,
    };
    let rendered = match templates::render(row.kind, &row.facts, &names) {
        Ok(rendered) => rendered,
        Err(e) => return Ok(Outcome::Failed(e.to_string())),
    };
    let mail = Mail {
        to_name: guest.name().to_owned(),
        to: guest.email().to_owned(),
        subject: rendered.subject,
        text: rendered.text,
        html: rendered.html,
        message_id: format!("{}.{}.{}", row.reservation_id, row.kind, row.version),
    };
    // A server's error may quote the address; the row keeps no personal data.
    let redact = |e: String| e.replace(&mail.to, "[recipient]");
    Ok(match mailer.send(&mail).await {
        Ok(()) => Outcome::Sent,
        Err(MailError::Unavailable(e)) => Outcome::Retry(redact(e)),
        Err(MailError::Refused(e)) => Outcome::Failed(redact(e)),
    })
}

/// The reservation's guest as its write-side row keeps it: sealed (or erased), or, on a
/// row written before personal data was sealed, in the clear.
async fn recipient(
    pool: &PgPool,
    reservation: Uuid,
) -> Result<Option<Personal<Guest>>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT guest, guest_name, guest_email FROM reservations WHERE reservation_id = $1",
    )
    .bind(reservation)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    if let Some(guest) = row.try_get::<Option<serde_json::Value>, _>("guest")? {
        return serde_json::from_value(guest)
            .map(Some)
            .map_err(|e| sqlx::Error::Decode(e.into()));
    }
    let name: Option<String> = row.try_get("guest_name")?;
    let email: Option<String> = row.try_get("guest_email")?;
    Ok(match (name, email) {
        (Some(name), Some(email)) => Guest::parse(&name, &email).ok().map(Personal::Clear),
        _ => None,
    })
}

/// The names of the message's hotel and room types (the ids, if the catalog has none).
async fn place(pool: &PgPool, facts: &MailFacts) -> Result<Place, sqlx::Error> {
    let ids: Vec<i64> = std::iter::once(facts.room_type_id.get())
        .chain(facts.more_lines.iter().map(|l| l.room_type_id.get()))
        .collect();
    let row = sqlx::query(
        "SELECT h.name AS hotel, h.timezone,
                (SELECT array_agg(coalesce(t.name, 'room type ' || k.id) ORDER BY k.ord)
                   FROM unnest($2::bigint[]) WITH ORDINALITY AS k(id, ord)
                   LEFT JOIN room_types t ON t.hotel_id = h.hotel_id AND t.room_type_id = k.id)
                  AS room_types
           FROM hotels h
          WHERE h.hotel_id = $1",
    )
    .bind(facts.hotel_id.get())
    .bind(&ids)
    .fetch_optional(pool)
    .await?;
    let hotel_id = facts.hotel_id.get();
    let fallback: Vec<String> = ids.iter().map(|id| format!("room type {id}")).collect();
    let (hotel, mut names, language) = match row {
        Some(row) => (
            row.try_get("hotel")?,
            row.try_get::<Option<Vec<String>>, _>("room_types")?
                .filter(|names| names.len() == ids.len())
                .unwrap_or(fallback),
            Language::of_timezone(row.try_get("timezone")?),
        ),
        None => (format!("hotel {hotel_id}"), fallback, Language::English),
    };
    let room_type = if names.is_empty() {
        format!("room type {}", facts.room_type_id)
    } else {
        names.remove(0)
    };
    Ok(Place {
        hotel,
        room_type,
        more_room_types: names,
        language,
    })
}
