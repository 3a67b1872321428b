//! Housekeeping in the background, each pass safe in several processes at once:
//!
//! - the expiry sweeper: records the expiry of every lapsed hold (releasing its nights)
//!   and gives up on idempotency records of requests that will never finish;
//! - the capture worker and the no-show worker (a stay's money and its end, decided by
//!   the reservation's own commands);
//! - retention: deletes what no answer needs any more (idempotency records after their
//!   day, payment receipts and delivered outbox rows after `RETENTION_DAYS`).
//!
//! The sweeper is housekeeping, not a gate: every decision already treats a lapsed hold
//! as gone (a sale never waits for the sweeper), and a reader sees a lapsed hold as
//! `expired` straight away. What the sweeper adds is the history (`HoldExpired`), the
//! counters in `room_nights` and the read models catching up, and the nights' holds
//! dropped. Several sweepers may run at once: expiring is idempotent and each
//! reservation's commands are serialized by its row lock, so a hold expires once.

use aggregates::ReservationId;
use chrono::{DateTime, Days, Duration, NaiveDate, Utc};
use futures::StreamExt;
use uuid::Uuid;

use crate::commands::CommandService;
use store::error::CommandError;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub expired: usize,
    /// Group blocks released because their release date ended at the hotel.
    pub blocks_released: usize,
    pub abandoned_requests: u64,
    /// The pass found a full batch of lapsed holds: more may be waiting, and the next
    /// pass should not wait for the interval.
    pub more: bool,
}

/// Lapsed holds expired in one transaction ([`CommandService::expire_lapsed_many`]):
/// one transaction each, a pass was bound by round trips and commits (see
/// docs/scaling.md, `sweeper-rate`) while holds made concurrently lapse concurrently. A
/// batch holds its rooms' locks until it commits, so holds of those rooms wait for it:
/// 100 at a time, one batch in flight, kept up with 1,400 holds/s all lapsing after 5 s
/// with a p99 of 99 ms for the holds (250, two in flight: 140 ms), as measured when
/// the batch size was chosen.
const EXPIRY_BATCH: usize = 100;
/// Batches of a pass in flight at once.
const EXPIRY_CONCURRENCY: usize = 1;
/// Expiries in flight at once when a batch failed and its holds are expired one by one.
const ALONE_CONCURRENCY: usize = 8;

/// Expires up to `limit` lapsed holds in batches of [`EXPIRY_BATCH`], and marks as
/// abandoned the requests that have been in flight longer than `abandon_after` (their
/// process died: the retry runs again instead of waiting forever on
/// `request_in_flight`). A batch that fails is run again one hold at a time, so one
/// expiry that cannot be written does not hold back the others; the first failure is
/// returned once they have finished.
pub async fn sweep_once(
    commands: &CommandService,
    limit: i64,
    abandon_after: Duration,
) -> Result<Swept, CommandError> {
    let now = commands.now();
    let lapsed: Vec<Uuid> = sqlx::query_scalar(
        "SELECT reservation_id FROM reservations
          WHERE status = 'held' AND hold_expires_at <= $1
          ORDER BY hold_expires_at
          LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(commands.pool())
    .await?;
    let mut swept = Swept {
        more: i64::try_from(lapsed.len()).unwrap_or(i64::MAX) >= limit,
        ..Swept::default()
    };
    let mut failed = None;
    let ids: Vec<ReservationId> = lapsed.into_iter().map(ReservationId::from_uuid).collect();
    let chunks: Vec<Vec<ReservationId>> = ids.chunks(EXPIRY_BATCH).map(<[_]>::to_vec).collect();
    let mut batches = futures::stream::iter(chunks)
        .map(|batch: Vec<ReservationId>| async move {
            let outcome = commands.expire_lapsed_many(&batch).await;
            (batch, outcome)
        })
        .buffer_unordered(EXPIRY_CONCURRENCY);
    let mut alone = Vec::new();
    while let Some((batch, outcome)) = batches.next().await {
        match outcome {
            // Fewer than the batch: another sweeper, a payment or a cancellation got
            // there first.
            Ok(recorded) => swept.expired += recorded,
            Err(e) => {
                tracing::warn!(error = %e, holds = batch.len(), "an expiry batch failed; expiring its holds one by one");
                alone.extend(batch);
            }
        }
    }
    drop(batches);
    let mut expiries = futures::stream::iter(alone)
        .map(|id| commands.expire_lapsed(id))
        .buffer_unordered(ALONE_CONCURRENCY);
    while let Some(outcome) = expiries.next().await {
        match outcome {
            Ok(recorded) => swept.expired += usize::from(recorded),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    drop(expiries);
    if swept.expired > 0 {
        metrics::counter!("holds_expired_by_sweeper_total").increment(swept.expired as u64);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    // Blocks whose release date has ended give their unpicked rooms back to sale (a
    // failure here holds back nothing else of the pass; the next one tries again).
    match commands.release_due_blocks().await {
        Ok(released) => swept.blocks_released = released,
        Err(e) => tracing::warn!(error = %e, "releasing due blocks failed"),
    }
    let abandoned = sqlx::query(
        "UPDATE idempotency_keys SET state = 'abandoned'
          WHERE state = 'in_flight' AND created_at <= $1",
    )
    .bind(now - abandon_after)
    .execute(commands.pool())
    .await?;
    swept.abandoned_requests = abandoned.rows_affected();
    Ok(swept)
}

/// Captures up to `limit` authorizations whose capture is due (the capture worker):
/// each through the reservation's own command, which decides from its ledger whether a
/// capture is still owed, so two workers on one reservation capture once, and a
/// cancellation that got there first (a void) leaves nothing to capture. The gateway
/// call itself goes through the payment outbox, written with the event.
pub async fn capture_due_once(
    commands: &CommandService,
    limit: i64,
) -> Result<usize, CommandError> {
    let due: Vec<Uuid> = sqlx::query_scalar(
        "SELECT reservation_id FROM payment_captures_due
          WHERE due_at <= $1 ORDER BY due_at LIMIT $2",
    )
    .bind(commands.now())
    .bind(limit)
    .fetch_all(commands.pool())
    .await?;
    let mut captured = 0;
    for id in due {
        if commands.capture_due(ReservationId::from_uuid(id)).await? {
            captured += 1;
        }
    }
    if captured > 0 {
        metrics::counter!("payments_captured_by_worker_total").increment(captured as u64);
    }
    Ok(captured)
}

/// Records up to `limit` no-shows: confirmed stays not checked in once their arrival
/// date has ended at their hotel, `grace` after midnight there. The candidates are
/// read by the UTC date (a hotel's date is at most a day ahead of it); each is judged
/// by its own hotel's date in its command.
pub async fn record_no_shows_once(
    commands: &CommandService,
    limit: i64,
    grace: Duration,
) -> Result<usize, CommandError> {
    let latest_arrival = (commands.now() - grace).date_naive();
    let candidates: Vec<Uuid> = sqlx::query_scalar(
        "SELECT reservation_id FROM reservations
          WHERE status = 'confirmed' AND start_date <= $1
          ORDER BY start_date LIMIT $2",
    )
    .bind(latest_arrival)
    .bind(limit)
    .fetch_all(commands.pool())
    .await?;
    let mut recorded = 0;
    for id in candidates {
        if commands
            .record_lapsed_no_show(ReservationId::from_uuid(id), grace)
            .await?
        {
            recorded += 1;
        }
    }
    if recorded > 0 {
        metrics::counter!("no_shows_recorded_by_worker_total").increment(recorded as u64);
    }
    Ok(recorded)
}

/// How long housekeeping keeps what has served its purpose.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Payment webhook receipts, delivered payment outbox rows, finished payment
    /// sagas, sent e-mails and delivered partner webhooks, after their last change.
    pub payments: Duration,
    /// Rows deleted per table per pass (several passes finish a backlog without one
    /// long transaction).
    pub batch: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            payments: Duration::days(30),
            batch: 5_000,
        }
    }
}

/// Idempotency records are answered for 24 hours; after that a request with the same
/// key is a new request (see `write::idempotency`), so the record is dead weight. An
/// hour of margin covers clocks that disagree.
pub const IDEMPOTENCY_KEPT: Duration = Duration::hours(25);

/// What one retention pass deleted, per table.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Retained {
    pub idempotency_keys: u64,
    pub payment_webhooks: u64,
    pub payment_outbox: u64,
    pub payment_sagas: u64,
    /// Guest e-mails sent (or dropped) before the retention.
    pub mail_outbox: u64,
    /// Partner webhook deliveries delivered before the retention.
    pub webhook_deliveries: u64,
    /// Confirmed allocations of nights long past (see [`compact_allocations`]).
    pub allocations: u64,
    /// Whether the allocations' pass has room types left to visit.
    pub allocations_unfinished: bool,
    /// Staff sessions that ended (expired or signed out) before the retention.
    pub staff_sessions: u64,
}

/// Deletes, a batch per table, what no decision or answer needs any more:
///
/// - idempotency records older than [`IDEMPOTENCY_KEPT`] (already treated as absent);
/// - payment webhook receipts older than `retention.payments` (a webhook delivered again
///   after that is applied again, and the reservation, which knows its payments, ignores
///   it);
/// - payment outbox rows delivered before then (failed rows stay for a person);
/// - payment sagas that ended before then (recovery only looks at open ones);
/// - guest e-mails sent or dropped, and partner webhook deliveries delivered, before
///   then (a reservation's messages and a subscription's log show the recent ones;
///   pending and failed rows stay);
/// - staff sessions that ended (expired or signed out) before then: a session row is
///   a sign-in's record, kept as long as the payments' trail.
///
/// Safe in several processes at once: each batch skips rows another pass has locked,
/// and deleting a row twice deletes it once.
pub async fn retention_once(
    commands: &CommandService,
    retention: Retention,
) -> Result<Retained, CommandError> {
    let now = commands.now();
    let pool = commands.pool();
    let batch = retention.batch;
    let delete = |table: &'static str, condition: &'static str, before| async move {
        let sql = format!(
            "DELETE FROM {table} WHERE ctid IN (
                 SELECT ctid FROM {table} WHERE {condition} LIMIT $2 FOR UPDATE SKIP LOCKED)"
        );
        let deleted = sqlx::query(&sql)
            .bind(before)
            .bind(batch)
            .execute(pool)
            .await?
            .rows_affected();
        if deleted > 0 {
            metrics::counter!("retention_deleted_total", "table" => table).increment(deleted);
        }
        Ok::<u64, sqlx::Error>(deleted)
    };
    let kept_until = now - retention.payments;
    Ok(Retained {
        idempotency_keys: delete(
            "idempotency_keys",
            "created_at < $1",
            now - IDEMPOTENCY_KEPT,
        )
        .await?,
        payment_webhooks: delete("payment_webhooks", "received_at < $1", kept_until).await?,
        payment_outbox: delete(
            "payment_outbox",
            "done_at IS NOT NULL AND done_at < $1",
            kept_until,
        )
        .await?,
        payment_sagas: delete(
            "payment_sagas",
            "state <> 'authorizing' AND updated_at < $1",
            kept_until,
        )
        .await?,
        mail_outbox: delete(
            "mail_outbox",
            "state IN ('sent', 'dropped') AND created_at < $1",
            kept_until,
        )
        .await?,
        webhook_deliveries: delete(
            "webhook_deliveries",
            "state = 'delivered' AND delivered_at < $1",
            kept_until,
        )
        .await?,
        staff_sessions: delete(
            "staff_sessions",
            "expires_at < $1 OR revoked_at < $1",
            kept_until,
        )
        .await?,
        ..compact_allocations(commands, ROOM_TYPES_PER_PASS).await?
    })
}

/// Room types whose past allocations one retention pass deletes.
const ROOM_TYPES_PER_PASS: i64 = 500;

/// The first night whose allocations are kept at `now`: every stay that includes an
/// earlier night ended a day ago or more wherever its hotel is (a stay has at most the
/// booking limit's nights, and a hotel's date is at most a day from UTC's).
pub fn allocations_kept_from(now: DateTime<Utc>, max_nights: u32) -> NaiveDate {
    let days = u64::from(max_nights) + 2;
    now.date_naive()
        .checked_sub_days(Days::new(days))
        .unwrap_or(NaiveDate::MIN)
}

/// One step of compacting the allocations of nights long past: the confirmed
/// allocations (a lapsed hold waits for the sweeper, which records its lapse) of
/// nights before [`allocations_kept_from`], for the next `room_types` room types in key
/// order. Nothing will release or move those rooms again, so the rows serve no
/// decision; the nights' counters stay, and the events from which `audit verify`
/// replays the allocations stay in the log (migration 21 explains the bookkeeping).
///
/// Safe in several processes at once: the bookkeeping row is locked for the step, and
/// a process that finds it locked does nothing this time.
pub async fn compact_allocations(
    commands: &CommandService,
    room_types: i64,
) -> Result<Retained, CommandError> {
    let cutoff = allocations_kept_from(commands.now(), commands.config().limits.max_nights);
    let mut tx = commands.pool().begin().await?;
    let state: Option<(Option<NaiveDate>, Option<NaiveDate>, i64, i64)> = sqlx::query_as(
        "SELECT compacted_before, target_before, after_hotel_id, after_room_type_id
           FROM allocation_compaction FOR UPDATE SKIP LOCKED",
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some((compacted, target, after_hotel, after_room_type)) = state else {
        return Ok(Retained::default());
    };
    let (target, after) = match target {
        Some(target) => (target, (after_hotel, after_room_type)),
        None if compacted.is_none_or(|c| c < cutoff) => {
            // A new pass up to today's cutoff. It is recorded before any row goes, so
            // verify stops comparing those nights' allocations first.
            sqlx::query(
                "UPDATE allocation_compaction
                    SET target_before = $1, after_hotel_id = 0, after_room_type_id = 0",
            )
            .bind(cutoff)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            return Ok(Retained {
                allocations_unfinished: true,
                ..Retained::default()
            });
        }
        None => return Ok(Retained::default()),
    };
    let batch: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT hotel_id, room_type_id FROM room_types
          WHERE (hotel_id, room_type_id) > ($1, $2)
          ORDER BY hotel_id, room_type_id LIMIT $3",
    )
    .bind(after.0)
    .bind(after.1)
    .bind(room_types)
    .fetch_all(&mut *tx)
    .await?;
    let Some(last) = batch.last().copied() else {
        sqlx::query(
            "UPDATE allocation_compaction
                SET compacted_before = target_before, target_before = NULL,
                    after_hotel_id = 0, after_room_type_id = 0",
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        return Ok(Retained::default());
    };
    let (hotels, types): (Vec<i64>, Vec<i64>) = batch.into_iter().unzip();
    let deleted = sqlx::query(
        "DELETE FROM room_night_allocations a
          USING unnest($1::bigint[], $2::bigint[]) AS t(hotel_id, room_type_id)
          WHERE a.hotel_id = t.hotel_id AND a.room_type_id = t.room_type_id
            AND a.night < $3 AND a.expires_at IS NULL",
    )
    .bind(&hotels)
    .bind(&types)
    .bind(target)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query("UPDATE allocation_compaction SET after_hotel_id = $1, after_room_type_id = $2")
        .bind(last.0)
        .bind(last.1)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    if deleted > 0 {
        metrics::counter!("retention_deleted_total", "table" => "room_night_allocations")
            .increment(deleted);
    }
    Ok(Retained {
        allocations: deleted,
        allocations_unfinished: true,
        ..Retained::default()
    })
}
