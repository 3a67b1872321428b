//! Group commit: the holds of one (hotel, room type) that arrive while a transaction for
//! it is running wait in line, and go together into the next transaction — each still
//! decided in arrival order against the state the previous one left.
//!
//! A flash sale is every client on the same nights. Row locks (pessimistic) make them
//! queue one transaction at a time, each paying the whole cost of a transaction and a
//! commit for one booking; optimistic retries are worse. Here one in-process worker per
//! (hotel, room type) drains its queue into batches: one transaction claims every
//! request's idempotency key, takes the room-type lock, reads the nights once, decides
//! the holds one after the other in memory, and writes all of them in one statement. A
//! refused hold (sold out) is refused alone; the others in the batch are unaffected.
//!
//! Correctness is the pessimistic strategy's: the same `(hotel, room type)` advisory
//! lock orders batches with every other writer of those nights (in this process or
//! another), so several server processes each batching their own requests stay exact.
//! A worker exits when its queue has been idle for a while.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aggregates::{booking, Decision, Reservation, ReservationId};
use chrono::{DateTime, NaiveDate, Utc};
use tokio::sync::{mpsc, oneshot};

use super::{
    idempotency, settle, with_retries, AttemptError, EventMetadata, Loader, RequestFingerprint,
    Writer,
};
use crate::commands::{CommandService, HoldRequest, Outcome, ReservationView};
use crate::error::CommandError;

/// One hold waiting for its batch.
pub(crate) struct HoldJob {
    pub channel: String,
    pub fingerprint: RequestFingerprint,
    pub request: HoldRequest,
    pub reservation_id: ReservationId,
    pub now: DateTime<Utc>,
    pub metadata: EventMetadata,
    pub reply: oneshot::Sender<Result<Outcome, CommandError>>,
}

type Key = (i64, i64);

/// The queues, one per (hotel, room type) with work.
#[derive(Default)]
pub struct GroupCommit {
    queues: Mutex<HashMap<Key, mpsc::UnboundedSender<HoldJob>>>,
}

/// Most holds decided in one transaction.
const MAX_BATCH: usize = 256;
/// A worker with nothing to do for this long stops (the next hold starts a new one).
const IDLE: Duration = Duration::from_secs(5);

impl GroupCommit {
    /// Queues a hold; the answer comes when its batch has committed.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        service: &CommandService,
        job: HoldJob,
    ) -> Result<Outcome, CommandError> {
        let key = (job.request.hotel_id.get(), job.request.room_type_id.get());
        let (reply, answer) = oneshot::channel();
        let job = HoldJob { reply, ..job };
        {
            // Sending under the lock: a worker only retires under it, after checking its
            // queue is empty, so no job is ever sent to a worker that has gone.
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let sender = queues.entry(key).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(worker(Arc::clone(self), service.clone(), key, rx));
                tx
            });
            if let Err(mpsc::error::SendError(job)) = sender.send(job) {
                // The worker panicked; start another.
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(worker(Arc::clone(self), service.clone(), key, rx));
                let _ = tx.send(job);
                queues.insert(key, tx);
            }
        }
        answer
            .await
            .map_err(|_| CommandError::Internal("the group commit worker dropped a hold".into()))?
    }
}

async fn worker(
    group: Arc<GroupCommit>,
    service: CommandService,
    key: Key,
    mut jobs: mpsc::UnboundedReceiver<HoldJob>,
) {
    loop {
        let first = match tokio::time::timeout(IDLE, jobs.recv()).await {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(_) => {
                let mut queues = group.queues.lock().unwrap_or_else(|e| e.into_inner());
                if jobs.is_empty() {
                    queues.remove(&key);
                    return;
                }
                continue;
            }
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        metrics::histogram!("group_commit_batch_size").record(batch.len() as f64);
        let outcomes = run_batch(&service, &batch).await;
        for (job, outcome) in batch.into_iter().zip(outcomes) {
            let _ = job.reply.send(outcome);
        }
    }
}

/// Decides and writes a batch in one transaction (retried whole on a lost race);
/// returns each hold's outcome in order.
async fn run_batch(
    service: &CommandService,
    batch: &[HoldJob],
) -> Vec<Result<Outcome, CommandError>> {
    let config = *service.config();
    let Some(first) = batch.first() else {
        return Vec::new();
    };
    let (hotel_id, room_type_id) = (first.request.hotel_id, first.request.room_type_id);
    let result = with_retries(config.retry, |_| async {
        let mut tx = service.pool().begin().await?;
        let result = attempt(service, &mut tx, batch, hotel_id, room_type_id).await;
        settle(tx, result).await
    })
    .await;
    match result {
        Ok(outcomes) => outcomes,
        Err(e) => {
            let message = e.to_string();
            batch
                .iter()
                .map(|_| Err(copy_error(&e, &message)))
                .collect()
        }
    }
}

/// The same failure for every hold of a failed batch.
fn copy_error(e: &CommandError, message: &str) -> CommandError {
    match e {
        CommandError::Contention { attempts } => CommandError::Contention {
            attempts: *attempts,
        },
        CommandError::Database(_) => {
            CommandError::Database(sqlx::Error::Protocol(message.to_owned()))
        }
        _ => CommandError::Internal(message.to_owned()),
    }
}

async fn attempt(
    service: &CommandService,
    tx: &mut sqlx::PgConnection,
    batch: &[HoldJob],
    hotel_id: aggregates::HotelId,
    room_type_id: aggregates::RoomTypeId,
) -> Result<Vec<Result<Outcome, CommandError>>, AttemptError> {
    let config = *service.config();
    let fingerprints: Vec<&RequestFingerprint> = batch.iter().map(|j| &j.fingerprint).collect();
    let mut loader = Loader { conn: &mut *tx };
    let opened = loader
        .open(&fingerprints, hotel_id, room_type_id, true)
        .await?;
    // Which holds run, and what the others answer (replayed, in flight, key reused).
    let mut answers: Vec<Option<Result<Outcome, CommandError>>> = Vec::with_capacity(batch.len());
    let mut seen: HashSet<i64> = HashSet::new();
    for (job, claim) in batch.iter().zip(opened.claims) {
        // The same key twice in one batch: the advisory lock is re-entrant within the
        // transaction, so the second copy is answered as the concurrent duplicate it is.
        if !claim.claimed || !seen.insert(job.fingerprint.lock_id()) {
            answers.push(Some(Err(CommandError::InFlight)));
            continue;
        }
        match idempotency::judge::<Outcome>(&job.fingerprint, claim.record) {
            Ok(Some(stored)) => answers.push(Some(Ok(stored))),
            Ok(None) => answers.push(None),
            Err(AttemptError::Fatal(e)) => answers.push(Some(Err(e))),
            Err(AttemptError::Conflict) => return Err(AttemptError::Conflict),
        }
    }
    let mut dates: Vec<NaiveDate> = batch
        .iter()
        .zip(&answers)
        .filter(|(_, a)| a.is_none())
        .flat_map(|(job, _)| job.request.stay.nights())
        .collect();
    dates.sort_unstable();
    dates.dedup();
    let loaded = Loader { conn: &mut *tx }
        .nights(
            hotel_id,
            room_type_id,
            &dates,
            None,
            latest_now(batch),
            true,
        )
        .await?;
    let mut nights = loaded.nights.clone();
    let mut writer = Writer::new(&batch[0].metadata)?;
    let mut decided: Vec<(serde_json::Value, Decision)> = Vec::new();
    let mut outcomes = Vec::with_capacity(batch.len());
    for (job, answer) in batch.iter().zip(answers) {
        if let Some(answer) = answer {
            outcomes.push(answer);
            continue;
        }
        let decision = booking::hold_stay(
            &opened.hotel,
            &Reservation::default(),
            &nights,
            &config.limits,
            booking::HoldStay {
                reservation_id: job.reservation_id,
                hotel_id,
                room_type_id,
                stay: job.request.stay,
                rooms: job.request.rooms,
                guest: job.request.guest.clone(),
                channel: job.channel.clone(),
                expected_total_cents: job.request.expected_total_cents,
                now: job.now,
                hold_expires_at: job.now + config.hold_ttl,
            },
        );
        let outcome: Outcome = match decision {
            Err(rejection) => Err(rejection),
            Ok(decision) => {
                // The next hold decides on the nights as this one leaves them.
                for (key, events) in &decision.nights {
                    let night = nights.entry(key.night).or_default();
                    for event in events {
                        night.apply_event(event);
                    }
                }
                let metadata = writer.set_metadata(&job.metadata)?.clone();
                let after = writer.queue_reservation(None, &decision.reservation)?;
                let view = after.as_ref().and_then(|r| ReservationView::of(r, job.now));
                decided.push((metadata, decision));
                view.ok_or_else(|| {
                    AttemptError::Fatal(CommandError::Internal("a hold left no reservation".into()))
                })
                .map(Ok)?
            }
        };
        writer.queue_idempotency(&job.fingerprint, &outcome)?;
        outcomes.push(Ok(outcome));
    }
    let refs: Vec<(&serde_json::Value, &Decision)> = decided.iter().map(|(m, d)| (m, d)).collect();
    writer.queue_nights_of(&loaded, &refs)?;
    writer.flush(&mut *tx).await?;
    Ok(outcomes)
}

/// The clock reading that loads lapsed holds: the batch's latest, so every hold that
/// has lapsed for any of its requests is loaded (each request still judges a hold
/// lapsed or live by its own time).
fn latest_now(batch: &[HoldJob]) -> DateTime<Utc> {
    batch.iter().map(|j| j.now).max().unwrap_or_else(Utc::now)
}
