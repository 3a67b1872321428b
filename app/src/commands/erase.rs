//! Erasing a guest (GDPR art. 17): their keys are destroyed first, so that from that
//! commit on nothing sealed under them opens anywhere (the log, the rows, the views,
//! the relay's stream, backups); then each of their reservations records
//! `GuestErased` through the write side (its row and, through the projection, its view
//! keep nothing of the guest, not even their id), stored answers that still name them
//! are scrubbed, and their hold counts in Redis forgotten.
//!
//! Nothing in the log is rewritten: the chain, computed over the stored bytes, still
//! verifies. What a guest's reservations were (dates, rooms, money) stays: it is the
//! hotel's record, and carries nothing that names the person once their key is gone.
//!
//! Reservations held before personal data was sealed carry their guest in the clear in
//! their events; those events cannot be changed without breaking the chain (see
//! docs/privacy.md, "History written before sealing"). An erasure by e-mail finds such
//! reservations by their e-mail, records `GuestErased` on them and clears their rows and
//! views; their events keep what they said, and the answer counts them so that an
//! operator knows.

use aggregates::{GuestId, ReservationId};
use sqlx::Row;
use uuid::Uuid;

use super::{Caller, CommandService};
use crate::rate_limit::HoldLimiter;
use store::error::CommandError;
use store::privacy::Privacy;

/// Whom to erase.
#[derive(Debug, Clone)]
pub enum GuestRef {
    /// By e-mail: their sealed reservations by id, and those held before sealing by
    /// the address itself.
    Email(String),
    /// By id: their sealed reservations only.
    Id(GuestId),
}

/// What an erasure did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Erasure {
    pub guest_id: GuestId,
    /// Keys destroyed by this call (0 on a repeat).
    pub keys_destroyed: usize,
    /// The guest's reservations found, and how many recorded `GuestErased` now.
    pub reservations: usize,
    pub reservations_recorded: usize,
    /// Of those, held before sealing: their events keep the guest in the clear.
    pub reservations_held_before_sealing: usize,
    /// Stored answers (idempotency records) scrubbed of the guest.
    pub answers_scrubbed: u64,
    /// Channels whose hold count for the guest was forgotten; `None` when Redis could
    /// not be asked (the counts then lapse with their window, and name no one).
    pub hold_counts_forgotten: Option<usize>,
}

fn db(e: impl Into<sqlx::Error>) -> CommandError {
    CommandError::Database(e.into())
}

/// Erases the guest `who` (see the module docs). Safe to repeat, and to run in several
/// processes at once: a repeat destroys and records nothing more.
pub async fn erase(
    commands: &CommandService,
    limiter: Option<&HoldLimiter>,
    caller: &Caller,
    who: &GuestRef,
) -> Result<Erasure, CommandError> {
    let privacy: &Privacy = commands.privacy();
    let pool = commands.pool();
    let (guest_id, email) = match who {
        GuestRef::Email(email) => (
            privacy
                .guest_id_in(pool, email)
                .await
                .map_err(|e| CommandError::Internal(e.to_string()))?,
            Some(email.trim().to_lowercase()),
        ),
        GuestRef::Id(id) => (id.clone(), None),
    };
    let mut tx = pool.begin().await.map_err(db)?;
    let destroyed = privacy
        .store()
        .destroy(&mut tx, &guest_id)
        .await
        .map_err(|e| CommandError::Internal(e.to_string()))?;
    tx.commit().await.map_err(db)?;

    let rows = sqlx::query(
        "SELECT reservation_id, false AS clear FROM reservations
          WHERE guest ? 'sealed' AND guest -> 'sealed' ->> 'guest' = $1
         UNION
         SELECT reservation_id, true FROM reservations
          WHERE guest_email IS NOT NULL AND guest_email = $2",
    )
    .bind(guest_id.as_str())
    .bind(email.as_deref())
    .fetch_all(pool)
    .await
    .map_err(db)?;
    let mut ids = Vec::with_capacity(rows.len());
    let mut held_before_sealing = 0;
    for row in &rows {
        let id: Uuid = row.try_get("reservation_id").map_err(db)?;
        if row.try_get::<bool, _>("clear").map_err(db)? {
            held_before_sealing += 1;
        }
        ids.push(id);
    }
    let mut recorded = 0;
    for id in &ids {
        if commands
            .erase_guest_of(caller, ReservationId::from_uuid(*id))
            .await?
        {
            recorded += 1;
        }
    }
    // An answer stored whole (`{"Ok": <the reservation's view>}`, as records written
    // before answers were kept by reference hold it) loses its guest (sealed ones are
    // unreadable already; answers stored before sealing are in the clear). One stored
    // by reference reads the guest as erased on its own (see `commands::answers`).
    let texts: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    let scrubbed = sqlx::query(
        "UPDATE idempotency_keys SET outcome = jsonb_set(outcome, '{Ok,guest}', '\"erased\"')
          WHERE outcome ? 'Ok' AND outcome -> 'Ok' ->> 'reservation_id' = ANY($1)
            AND outcome -> 'Ok' -> 'guest' IS DISTINCT FROM '\"erased\"'",
    )
    .bind(&texts)
    .execute(pool)
    .await
    .map_err(db)?
    .rows_affected();
    let forgotten = match limiter {
        Some(limiter) => match limiter.forget(&guest_id).await {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!(error = %e, "an erasure could not forget the guest's hold counts in Redis");
                None
            }
        },
        None => Some(0),
    };
    metrics::counter!("guests_erased_total").increment(1);
    tracing::info!(guest = %guest_id, keys = destroyed.len(), reservations = ids.len(), "guest erased");
    Ok(Erasure {
        guest_id,
        keys_destroyed: destroyed.len(),
        reservations: ids.len(),
        reservations_recorded: recorded,
        reservations_held_before_sealing: held_before_sealing,
        answers_scrubbed: scrubbed,
        hold_counts_forgotten: forgotten,
    })
}

/// The guests all of whose stays ended before `cutoff` (the retention of personal
/// data: a chain erases its guests some years after their last stay). Read from the
/// write side's rows: a full pass, for a job that runs rarely.
pub async fn guests_whose_stays_ended_before(
    commands: &CommandService,
    cutoff: chrono::NaiveDate,
) -> Result<Vec<GuestRef>, CommandError> {
    let pool = commands.pool();
    let sealed: Vec<String> = sqlx::query_scalar(
        "SELECT guest -> 'sealed' ->> 'guest' FROM reservations WHERE guest ? 'sealed'
          GROUP BY 1 HAVING max(end_date) < $1 ORDER BY 1",
    )
    .bind(cutoff)
    .fetch_all(pool)
    .await
    .map_err(db)?;
    let clear: Vec<String> = sqlx::query_scalar(
        "SELECT guest_email FROM reservations WHERE guest_email IS NOT NULL
          GROUP BY 1 HAVING max(end_date) < $1 ORDER BY 1",
    )
    .bind(cutoff)
    .fetch_all(pool)
    .await
    .map_err(db)?;
    let mut guests = Vec::with_capacity(sealed.len() + clear.len());
    for id in sealed {
        let id = GuestId::parse(&id)
            .map_err(|e| CommandError::Internal(format!("a stored guest id: {}", e.message)))?;
        guests.push(GuestRef::Id(id));
    }
    guests.extend(clear.into_iter().map(GuestRef::Email));
    Ok(guests)
}

/// Erases every guest whose stays all ended before `cutoff`, one at a time (see
/// [`erase`]); what each erasure did.
pub async fn erase_stays_ended_before(
    commands: &CommandService,
    limiter: Option<&HoldLimiter>,
    caller: &Caller,
    cutoff: chrono::NaiveDate,
) -> Result<Vec<Erasure>, CommandError> {
    let mut done = Vec::new();
    for guest in guests_whose_stays_ended_before(commands, cutoff).await? {
        done.push(erase(commands, limiter, caller, &guest).await?);
    }
    Ok(done)
}
