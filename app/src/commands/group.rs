//! Group commit: holds that arrive while a transaction is running wait in line, and go
//! together into the next transaction — each still decided in arrival order against the
//! state the previous one left.
//!
//! Every booking transaction pays a fixed price whatever it carries: a connection and
//! its backend, five round trips, three statements to start and plan, a commit that
//! waits for the WAL flush. A flash sale is every client on the same nights: row locks
//! (pessimistic) make them queue one transaction at a time, each paying all of that for
//! one booking, and optimistic retries are worse. So holds are handed to a few **lanes**
//! (a hotel always to the same one, by a hash of its id): each lane runs one
//! transaction at a time and takes what queued meanwhile for the oldest waiting hold's
//! shard into the next one, whatever its hotels and room types. That transaction claims every
//! request's idempotency key, takes the locks of every room in the batch in one fixed
//! order, reads all their nights in one statement, decides the holds one after the
//! other in memory, and writes all of them in one statement. A refused hold (sold out)
//! is refused alone; the others are unaffected. A batch the database refuses (or whose
//! state cannot be used) is run again one hold at a time, so one hold that cannot be
//! written never fails its neighbours; an unreachable database fails the batch at once.
//!
//! **A batch never spans two shards** ([`super::shards`]): hotels are the key a sharded
//! log would be distributed by, and a batch over two shards would become a distributed
//! transaction the day they live on different nodes. Within a shard a batch takes any
//! hotels: spread load (every hold a different hotel) shares one transaction's
//! statements and commit among the holds that queued together, as a flash sale on one
//! hotel does. (With a transaction per hotel, spread load paid all of it per hold.)
//! Holds of other shards that queued behind wait for their own batch, oldest first, so
//! none waits longer than the batches ahead of it.
//!
//! Correctness is the pessimistic strategy's: the same `(hotel, room type)` advisory
//! locks order batches with every other writer of those nights (in this process or
//! another), so several server processes each batching their own requests stay exact.
//! A lane's worker exits when its queue has been idle for a while.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aggregates::{booking, HotelId, Reservation, ReservationId, StayNights};
use chrono::{DateTime, NaiveDate, Utc};
use tokio::sync::{mpsc, oneshot};

use sqlx::PgPool;

use super::answers::StoredAnswer;
use super::shards::ShardMap;
use super::{HoldRequest, Outcome, ReservationView, WriteConfig};
use store::error::CommandError;
use store::privacy::Privacy;
use store::write::{
    idempotency, settle, with_retries, AttemptError, EventMetadata, Loader, RequestFingerprint,
    Room, RoomWork, WantedNights, Writer,
};

/// A hold to decide, as the caller prepared it.
pub(crate) struct Hold {
    pub channel: String,
    pub fingerprint: RequestFingerprint,
    pub request: HoldRequest,
    pub reservation_id: ReservationId,
    pub now: DateTime<Utc>,
    pub metadata: EventMetadata,
}

impl Hold {
    /// The domain's command for this hold, lasting `ttl`.
    pub(crate) fn decide(&self, ttl: chrono::Duration) -> booking::HoldStay {
        booking::HoldStay {
            request: self.request.clone(),
            reservation_id: self.reservation_id,
            channel: self.channel.clone(),
            now: self.now,
            hold_expires_at: self.now + ttl,
        }
    }
}

/// One hold waiting for its batch.
struct HoldJob {
    hold: Hold,
    reply: oneshot::Sender<Result<Outcome, CommandError>>,
    /// When it joined its lane's queue.
    queued_at: Instant,
}

impl HoldJob {
    fn hotel(&self) -> HotelId {
        self.hold.request.hotel_id
    }

    /// The rooms the hold takes nights of: one per line.
    fn rooms(&self) -> impl Iterator<Item = Room> + '_ {
        let hotel = self.hotel();
        self.hold
            .request
            .lines()
            .map(move |line| (hotel, line.room_type_id))
    }
}

/// The lanes' queues (a lane has one while it has work), and what a batch needs: the
/// pool and the write configuration. Workers hold this, never the command service, so
/// the service owns the group commit and not the other way round.
pub struct GroupCommit {
    pool: PgPool,
    config: WriteConfig,
    privacy: Privacy,
    /// Which hotels may share a batch.
    shards: Arc<ShardMap>,
    lanes: usize,
    queues: Mutex<HashMap<usize, mpsc::UnboundedSender<HoldJob>>>,
}

/// Lanes when none are configured. With batches of one hotel, four were the best of 2,
/// 4, 8 and 16 on two cores; with batches of a shard, fewer lanes make larger batches,
/// and two beat four on spread load on two cores (2,385-2,797 holds/s against
/// 1,877-2,414, alternated; docs/benchmarks.md, "The hold's budget"). A flash sale on
/// one hotel is one lane whatever the count.
pub const DEFAULT_LANES: usize = 2;
/// Most holds decided in one transaction.
const MAX_BATCH: usize = 256;
/// Most holds a worker takes off its queue to sort into batches by shard: enough for
/// several batches, few enough that sorting them stays cheap.
const MAX_WAITING: usize = 4 * MAX_BATCH;
/// A worker with nothing to do for this long stops (the next hold starts a new one).
const IDLE: Duration = Duration::from_secs(5);

impl GroupCommit {
    /// `config.group_lanes` transactions at most in flight at once (at least one).
    pub fn new(pool: PgPool, config: WriteConfig, privacy: Privacy, shards: Arc<ShardMap>) -> Self {
        Self {
            pool,
            config,
            privacy,
            shards,
            lanes: config.group_lanes.max(1),
            queues: Mutex::default(),
        }
    }

    /// The lane of a hotel: always the same, so one room's holds are never in two
    /// batches at once (they would only queue on its lock), and a hotel's room types
    /// can share a batch.
    fn lane(&self, hotel: HotelId) -> usize {
        // A fixed hasher (not a random one): the same hotel maps to the same lane in
        // every process, which keeps the lanes' load the same from run to run.
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(hotel.get());
        (hash % self.lanes as u64) as usize
    }

    /// Queues a hold; the answer comes when its batch has committed.
    pub(crate) async fn submit(self: &Arc<Self>, hold: Hold) -> Result<Outcome, CommandError> {
        let (reply, answer) = oneshot::channel();
        let job = HoldJob {
            hold,
            reply,
            queued_at: Instant::now(),
        };
        let lane = self.lane(job.hotel());
        {
            // Sending under the lock: a worker only retires under it, after checking its
            // queue is empty, so no job is ever sent to a worker that has gone.
            let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let sender = queues.entry(lane).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(worker(Arc::clone(self), lane, rx));
                tx
            });
            if let Err(mpsc::error::SendError(job)) = sender.send(job) {
                // The worker panicked; start another.
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(worker(Arc::clone(self), lane, rx));
                let _ = tx.send(job);
                queues.insert(lane, tx);
            }
        }
        answer
            .await
            .map_err(|_| CommandError::Internal("the group commit worker dropped a hold".into()))?
    }
}

async fn worker(group: Arc<GroupCommit>, lane: usize, mut jobs: mpsc::UnboundedReceiver<HoldJob>) {
    // Holds taken off the queue that are not in a batch yet (other shards' than the
    // batch being formed), oldest first.
    let mut waiting: VecDeque<HoldJob> = VecDeque::new();
    loop {
        if waiting.is_empty() {
            match tokio::time::timeout(IDLE, jobs.recv()).await {
                Ok(Some(job)) => waiting.push_back(job),
                Ok(None) => return,
                Err(_) => {
                    let mut queues = group.queues.lock().unwrap_or_else(|e| e.into_inner());
                    if jobs.is_empty() {
                        queues.remove(&lane);
                        return;
                    }
                    continue;
                }
            }
        }
        while waiting.len() < MAX_WAITING {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        let shards = &group.shards;
        let batch = one_shard(&mut waiting, |job| shards.shard_of(job.hotel()), MAX_BATCH);
        let started = Instant::now();
        metrics::histogram!("group_commit_batch_size").record(batch.len() as f64);
        for job in &batch {
            // Time spent in line, for the transaction before to finish.
            metrics::histogram!("group_commit_wait_seconds")
                .record(started.duration_since(job.queued_at).as_secs_f64());
        }
        let mut outcomes = run_batch(&group, &batch).await;
        metrics::histogram!("group_commit_batch_seconds").record(started.elapsed().as_secs_f64());
        if batch.len() > 1 && matches!(outcomes, Err(ref e) if refused_by_content(e)) {
            // Something in the batch cannot be written: run each hold on its own, so
            // only the holds that fail are refused.
            let mut alone = Vec::with_capacity(batch.len());
            for job in &batch {
                alone.push(match run_batch(&group, std::slice::from_ref(job)).await {
                    Ok(mut one) => one.pop().unwrap_or_else(|| {
                        Err(CommandError::Internal(
                            "a batch of one gave no answer".into(),
                        ))
                    }),
                    Err(e) => Err(e),
                });
            }
            outcomes = Ok(alone);
        }
        match outcomes {
            Ok(outcomes) => {
                for (job, outcome) in batch.into_iter().zip(outcomes) {
                    let _ = job.reply.send(outcome);
                }
            }
            Err(e) => {
                let message = e.to_string();
                for job in batch {
                    let _ = job.reply.send(Err(copy_error(&e, &message)));
                }
            }
        }
    }
}

/// Takes the next batch out of `waiting`: the oldest hold's shard's holds, in arrival
/// order, at most `max`; the others stay, in their order.
fn one_shard<T>(waiting: &mut VecDeque<T>, shard_of: impl Fn(&T) -> usize, max: usize) -> Vec<T> {
    let Some(shard) = waiting.front().map(&shard_of) else {
        return Vec::new();
    };
    let mut batch = Vec::new();
    let mut rest = VecDeque::with_capacity(waiting.len());
    for item in waiting.drain(..) {
        if batch.len() < max && shard_of(&item) == shard {
            batch.push(item);
        } else {
            rest.push_back(item);
        }
    }
    *waiting = rest;
    batch
}

/// Decides and writes a batch in one transaction (retried whole on a lost race);
/// returns each hold's outcome in order.
async fn run_batch(
    group: &GroupCommit,
    batch: &[HoldJob],
) -> Result<Vec<Result<Outcome, CommandError>>, CommandError> {
    with_retries(group.config.retry, |_| async {
        let mut tx = group.pool.begin().await?;
        let result = attempt(&group.config, &group.privacy, &mut tx, batch).await;
        settle(tx, result).await
    })
    .await
}

/// Whether a failed batch may owe its failure to one of its holds: the database
/// refused a statement, or what was read or decided could not be used. Not a lost race
/// (retried already), and not an unreachable database or an exhausted pool, where running
/// the holds one by one would only make each of them wait for the same timeout.
fn refused_by_content(e: &CommandError) -> bool {
    matches!(
        e,
        CommandError::Database(sqlx::Error::Database(_))
            | CommandError::Internal(_)
            | CommandError::OversoldRefused { .. }
    )
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
        CommandError::OversoldRefused { constraint } => CommandError::OversoldRefused {
            constraint: constraint.clone(),
        },
        _ => CommandError::Internal(message.to_owned()),
    }
}

async fn attempt(
    config: &WriteConfig,
    privacy: &Privacy,
    tx: &mut sqlx::PgConnection,
    batch: &[HoldJob],
) -> Result<Vec<Result<Outcome, CommandError>>, AttemptError> {
    let Some(first) = batch.first() else {
        return Ok(Vec::new());
    };
    let fingerprints: Vec<&RequestFingerprint> =
        batch.iter().map(|j| &j.hold.fingerprint).collect();
    let rooms: Vec<Room> = batch.iter().flat_map(HoldJob::rooms).collect();
    // Every night the batch's holds want, room by room (and, peeked at, their check-out
    // days), read with the claims in one statement: a hold the claims then answer
    // (replayed, in flight) only had its nights read for nothing.
    let mut wanted: BTreeMap<Room, (Vec<NaiveDate>, Vec<NaiveDate>)> = BTreeMap::new();
    for job in batch {
        for room in job.rooms() {
            let (dates, peek) = wanted.entry(room).or_default();
            dates.extend(job.hold.request.stay.nights());
            peek.push(job.hold.request.stay.end());
        }
    }
    let wanted: Vec<WantedNights> = wanted
        .into_iter()
        .map(|((hotel_id, room_type_id), (mut dates, mut peek))| {
            dates.sort_unstable();
            dates.dedup();
            peek.sort_unstable();
            peek.dedup();
            WantedNights {
                hotel_id,
                room_type_id,
                dates,
                peek,
            }
        })
        .collect();
    let (mut opened, loaded) = Loader { conn: &mut *tx }
        .open_with_nights(&fingerprints, &rooms, &wanted, latest_now(batch))
        .await?;
    let claims = std::mem::take(&mut opened.claims);
    // Which holds run, and what the others answer (replayed, in flight, key reused).
    let mut answers: Vec<Option<Result<Outcome, CommandError>>> = Vec::with_capacity(batch.len());
    let mut seen: HashSet<i64> = HashSet::new();
    for (job, claim) in batch.iter().zip(claims) {
        // The same key twice in one batch: the advisory lock is re-entrant within the
        // transaction, so the second copy is answered as the concurrent duplicate it is.
        if !claim.claimed || !seen.insert(job.hold.fingerprint.lock_id()) {
            answers.push(Some(Err(CommandError::InFlight)));
            continue;
        }
        match idempotency::judge::<StoredAnswer>(&job.hold.fingerprint, claim.record) {
            Ok(Some(stored)) => answers.push(Some(Ok(stored.answer(&mut *tx).await?))),
            Ok(None) => answers.push(None),
            Err(AttemptError::Fatal(e)) => answers.push(Some(Err(e))),
            Err(AttemptError::Conflict) => return Err(AttemptError::Conflict),
        }
    }
    let mut work: HashMap<Room, RoomWork> = loaded
        .into_iter()
        .map(|loaded| {
            (
                (loaded.hotel_id, loaded.room_type_id),
                RoomWork::new(loaded),
            )
        })
        .collect();
    let mut writer = Writer::new(&first.hold.metadata)?;
    let mut outcomes = Vec::with_capacity(batch.len());
    for (job, answer) in batch.iter().zip(answers) {
        if let Some(answer) = answer {
            outcomes.push(answer);
            continue;
        }
        let hotel_id = job.hotel();
        let hold = &job.hold;
        let mut nights = StayNights::default();
        for (_, room_type) in job.rooms() {
            let Some(work) = work.get(&(hotel_id, room_type)) else {
                return Err(AttemptError::Fatal(CommandError::Internal(
                    "a hold's room was not loaded".into(),
                )));
            };
            nights.add(room_type, work.nights());
        }
        let hotel = opened.hotel(hotel_id);
        let decision = booking::hold_stay(
            hotel,
            &Reservation::default(),
            &nights,
            &config.limits,
            hold.decide(config.hold_ttl),
        );
        let mut version = 0;
        let outcome: Outcome = match decision {
            Err(rejection) => Err(rejection),
            Ok(decision) => {
                if decision
                    .nights
                    .iter()
                    .any(|(key, _)| !work.contains_key(&(key.hotel_id, key.room_type_id)))
                {
                    return Err(AttemptError::Fatal(CommandError::Internal(
                        "a hold changed nights of a room it did not load".into(),
                    )));
                }
                version = decision.reservation.len() as i64;
                let metadata = writer.set_metadata(&hold.metadata)?.clone();
                writer.expect_catalog(hotel_id, opened.version(hotel_id));
                let after = writer.queue_reservation(None, &decision.reservation)?;
                let view = after
                    .as_ref()
                    .and_then(|r| ReservationView::of(r, hold.now));
                // The next hold of these rooms decides on the nights as this one leaves
                // them.
                let mut rooms = job.rooms().peekable();
                while let Some(room) = rooms.next() {
                    if let Some(work) = work.get_mut(&room) {
                        if rooms.peek().is_some() {
                            work.decided(metadata.clone(), decision.clone());
                        } else {
                            work.decided(metadata, decision);
                            break;
                        }
                    }
                }
                view.ok_or_else(|| {
                    AttemptError::Fatal(CommandError::Internal("a hold left no reservation".into()))
                })
                .map(Ok)?
            }
        };
        writer.queue_idempotency(
            &hold.fingerprint,
            &StoredAnswer::of(&outcome, version, hold.now),
        )?;
        outcomes.push(Ok(outcome));
    }
    for work in work.values() {
        work.queue(&mut writer)?;
    }
    writer.flush(&mut *tx, privacy).await?;
    Ok(outcomes)
}

/// The clock reading that loads lapsed holds: the batch's latest, so every hold that
/// has lapsed for any of its requests is loaded (each request still judges a hold
/// lapsed or live by its own time).
fn latest_now(batch: &[HoldJob]) -> DateTime<Utc> {
    batch
        .iter()
        .map(|j| j.hold.now)
        .max()
        .unwrap_or_else(Utc::now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hotel(id: i64) -> HotelId {
        HotelId::parse(id).expect("a valid hotel id")
    }

    /// Holds as (hotel, arrival number).
    fn waiting(hotels: &[i64]) -> VecDeque<(HotelId, usize)> {
        hotels
            .iter()
            .enumerate()
            .map(|(n, &h)| (hotel(h), n))
            .collect()
    }

    fn arrivals(items: &[(HotelId, usize)]) -> Vec<usize> {
        items.iter().map(|&(_, n)| n).collect()
    }

    /// Hotels as their own shards (the map where every hotel is alone).
    fn alone(&(h, _): &(HotelId, usize)) -> usize {
        usize::try_from(h.get()).unwrap_or(0)
    }

    #[test]
    fn a_batch_is_the_oldest_holds_shard_in_arrival_order() {
        let mut queue = waiting(&[7, 3, 7, 9, 7, 3]);

        let batch = one_shard(&mut queue, alone, MAX_BATCH);

        assert_eq!(arrivals(&batch), vec![0, 2, 4]);
        assert_eq!(arrivals(queue.make_contiguous()), vec![1, 3, 5]);
    }

    #[test]
    fn the_holds_left_behind_form_the_next_batches_oldest_first() {
        let mut queue = waiting(&[7, 3, 7, 9, 7, 3]);
        let mut batches = Vec::new();
        while !queue.is_empty() {
            batches.push(arrivals(&one_shard(&mut queue, alone, MAX_BATCH)));
        }

        assert_eq!(batches, vec![vec![0, 2, 4], vec![1, 5], vec![3]]);
    }

    #[test]
    fn a_full_batch_leaves_its_hotels_later_holds_in_order() {
        let mut queue = waiting(&[5, 5, 5, 6, 5]);

        let batch = one_shard(&mut queue, alone, 2);

        assert_eq!(arrivals(&batch), vec![0, 1]);
        assert_eq!(arrivals(queue.make_contiguous()), vec![2, 3, 4]);
    }

    #[test]
    fn one_shard_batches_every_hotel_waiting_in_arrival_order() {
        let map = ShardMap::parse("").expect("one shard");
        let mut queue = waiting(&[7, 3, 7, 9, 7, 3]);

        let batch = one_shard(&mut queue, |&(h, _)| map.shard_of(h), MAX_BATCH);

        assert_eq!(arrivals(&batch), vec![0, 1, 2, 3, 4, 5]);
        assert!(queue.is_empty());
    }

    #[test]
    fn hotels_of_another_shard_wait_for_their_own_batch() {
        let map = ShardMap::parse("9:us").expect("two shards");
        let mut queue = waiting(&[7, 9, 3, 9, 7]);

        let first = one_shard(&mut queue, |&(h, _)| map.shard_of(h), MAX_BATCH);
        let second = one_shard(&mut queue, |&(h, _)| map.shard_of(h), MAX_BATCH);

        assert_eq!(arrivals(&first), vec![0, 2, 4]);
        assert_eq!(arrivals(&second), vec![1, 3]);
    }

    #[test]
    fn an_empty_queue_gives_an_empty_batch() {
        let mut queue = waiting(&[]);

        assert!(one_shard(&mut queue, alone, MAX_BATCH).is_empty());
    }
}
