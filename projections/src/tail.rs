//! One read of the log's tail for every runner of a process.
//!
//! A server runs four projections, and each reads every event: without sharing, that
//! is four reads of the same rows and four times the JSON decoded (see
//! docs/benchmarks.md, `one-read-for-all-runners`). The runners of one process share a [`Tail`]
//! instead: the first runner to ask for events after a checkpoint reads them from the
//! database, decoded once into typed events (see [`crate::log`]), and keeps them; the
//! others, asking for the same events a moment later, get them from memory.
//!
//! **Why this cannot skip or reorder an event.** A read returns the events of the log in
//! commit order right after a checkpoint, and only events of transactions older than
//! every transaction still running (see [`crate::log`]): nothing can ever be inserted
//! among them later. So a read is an exact, immutable segment of the log: the events
//! between the checkpoint it started after and its last event. The tail keeps
//! contiguous segments only, and serves a checkpoint inside them with exactly the
//! events that follow it there; a checkpoint it does not cover goes to the database.
//!
//! Reads are made one at a time (under the tail's lock), so runners woken by the same
//! notification read the database once between them rather than all at once. The tail
//! keeps at most [`Tail::capacity`] events: a runner far behind the others reads from
//! the database, as it would without the tail.

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sqlx::PgConnection;
use tokio::sync::Mutex;

use crate::log::{self, Checkpoint, StoredEvent};

/// Events a [`Tail`] keeps by default: a few batches, so runners a batch or two apart
/// still share reads, in a few megabytes.
pub const DEFAULT_CAPACITY: usize = 4_000;

/// The recently read tail of the log, shared by the runners of one process (clones
/// share it).
#[derive(Clone, Debug)]
pub struct Tail {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    segments: Mutex<Segments>,
    capacity: usize,
    from_memory: AtomicU64,
    from_database: AtomicU64,
}

/// Contiguous segments, oldest first: each one's `after` is the previous one's last
/// event.
#[derive(Debug, Default)]
struct Segments {
    chunks: VecDeque<Chunk>,
    events: usize,
}

#[derive(Debug)]
struct Chunk {
    /// The checkpoint the read started after: the log holds nothing between it and
    /// `events[0]`.
    after: Checkpoint,
    /// Never empty.
    events: Arc<[StoredEvent]>,
}

impl Chunk {
    fn last(&self) -> Checkpoint {
        self.events
            .last()
            .map_or(self.after, StoredEvent::checkpoint)
    }
}

/// Events of the log in commit order, right after the checkpoint they were asked for.
/// Shared with other runners: read it, don't keep it.
#[derive(Debug, Clone)]
pub struct Batch {
    events: Arc<[StoredEvent]>,
    from: usize,
    to: usize,
}

impl Batch {
    fn new(events: Arc<[StoredEvent]>, from: usize, limit: usize) -> Self {
        let to = events.len().min(from.saturating_add(limit));
        let from = from.min(to);
        Self { events, from, to }
    }
}

impl Deref for Batch {
    type Target = [StoredEvent];

    fn deref(&self) -> &[StoredEvent] {
        self.events.get(self.from..self.to).unwrap_or_default()
    }
}

impl Default for Tail {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl Tail {
    /// A tail that keeps at most about `capacity` events (at least its newest read).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Shared {
                segments: Mutex::new(Segments::default()),
                capacity,
                from_memory: AtomicU64::new(0),
                from_database: AtomicU64::new(0),
            }),
        }
    }

    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Batches served from memory and read from the database, since the tail was made.
    pub fn reads(&self) -> (u64, u64) {
        (
            self.inner.from_memory.load(Ordering::Relaxed),
            self.inner.from_database.load(Ordering::Relaxed),
        )
    }

    /// The next at most `limit` events after `after`, in commit order: what
    /// [`log::read_after`] returns on `conn`, from memory when another runner has just
    /// read them.
    pub async fn read_after(
        &self,
        conn: &mut PgConnection,
        after: Checkpoint,
        limit: i64,
    ) -> Result<Batch, sqlx::Error> {
        let wanted = usize::try_from(limit).unwrap_or(0);
        let mut segments = self.inner.segments.lock().await;
        if let Some(batch) = segments.serve(after, wanted) {
            self.inner.from_memory.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("projection_log_reads_total", "source" => "memory").increment(1);
            return Ok(batch);
        }
        let events: Arc<[StoredEvent]> = log::read_after(conn, after, limit).await?.into();
        self.inner.from_database.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("projection_log_reads_total", "source" => "database").increment(1);
        if !events.is_empty() {
            segments.keep(after, events.clone(), self.inner.capacity);
        }
        Ok(Batch::new(events, 0, wanted))
    }
}

impl Segments {
    /// The events after `after` if a kept segment covers `after` and holds some.
    fn serve(&self, after: Checkpoint, limit: usize) -> Option<Batch> {
        let chunk = self
            .chunks
            .iter()
            .find(|chunk| chunk.after <= after && after < chunk.last())?;
        let from = chunk
            .events
            .partition_point(|event| event.checkpoint() <= after);
        Some(Batch::new(chunk.events.clone(), from, limit))
    }

    /// Keeps a segment just read: appended if it continues the kept ones; if it starts
    /// past them (another process applied the events in between), it replaces them; if
    /// it starts before them (a runner far behind), it is not kept.
    fn keep(&mut self, after: Checkpoint, events: Arc<[StoredEvent]>, capacity: usize) {
        if let Some(end) = self.chunks.back().map(Chunk::last) {
            if after < end {
                // Before what is kept (what is inside it is served, never read).
                return;
            }
            if after > end {
                self.chunks.clear();
                self.events = 0;
            }
        }
        self.events += events.len();
        self.chunks.push_back(Chunk { after, events });
        while self.events > capacity && self.chunks.len() > 1 {
            if let Some(oldest) = self.chunks.pop_front() {
                self.events -= oldest.events.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn event(transaction_id: i64, position: i64) -> StoredEvent {
        let columns = crate::log::EventColumns {
            position,
            transaction_id,
            aggregate_type: "RoomNight".into(),
            aggregate_id: format!("n-{position}"),
            sequence: 1,
            event_type: "Test".into(),
            event_version: "1".into(),
            payload: serde_json::value::to_raw_value(&()).expect("json"),
            metadata: serde_json::value::to_raw_value(&()).expect("json"),
            recorded_at: Utc::now(),
        };
        StoredEvent::decode(columns, &aggregates::EventDecoder::default())
    }

    fn at(transaction_id: i64, position: i64) -> Checkpoint {
        Checkpoint {
            transaction_id,
            position,
        }
    }

    fn positions(batch: &Batch) -> Vec<i64> {
        batch.iter().map(|e| e.position).collect()
    }

    /// Events of transactions 10 (positions 1, 2) and 11 (3), then 12 (4, 5).
    fn two_reads() -> Segments {
        let mut segments = Segments::default();
        segments.keep(
            Checkpoint::START,
            vec![event(10, 1), event(10, 2), event(11, 3)].into(),
            100,
        );
        segments.keep(at(11, 3), vec![event(12, 4), event(12, 5)].into(), 100);
        segments
    }

    #[test]
    fn a_checkpoint_inside_a_kept_read_is_served_the_events_after_it() {
        let segments = two_reads();

        let served = segments.serve(at(10, 1), 100).map(|b| positions(&b));

        assert_eq!(served, Some(vec![2, 3]));
    }

    #[test]
    fn the_start_of_a_kept_read_is_served_all_of_it() {
        let segments = two_reads();

        assert_eq!(
            segments
                .serve(Checkpoint::START, 100)
                .map(|b| positions(&b)),
            Some(vec![1, 2, 3])
        );
        assert_eq!(
            segments.serve(at(11, 3), 100).map(|b| positions(&b)),
            Some(vec![4, 5])
        );
    }

    #[test]
    fn the_end_of_what_is_kept_goes_to_the_database() {
        let segments = two_reads();

        assert!(segments.serve(at(12, 5), 100).is_none());
        assert!(segments.serve(at(13, 9), 100).is_none());
    }

    #[test]
    fn a_served_batch_keeps_to_the_limit() {
        let segments = two_reads();

        let served = segments.serve(Checkpoint::START, 2).map(|b| positions(&b));

        assert_eq!(served, Some(vec![1, 2]));
    }

    #[test]
    fn a_read_that_starts_past_what_is_kept_replaces_it() {
        let mut segments = two_reads();

        segments.keep(at(20, 9), vec![event(21, 10)].into(), 100);

        assert!(segments.serve(at(10, 1), 100).is_none());
        assert_eq!(
            segments.serve(at(20, 9), 100).map(|b| positions(&b)),
            Some(vec![10])
        );
        assert_eq!(segments.events, 1);
    }

    #[test]
    fn a_read_of_older_events_is_not_kept() {
        let mut segments = Segments::default();
        segments.keep(at(11, 3), vec![event(12, 4)].into(), 100);

        segments.keep(Checkpoint::START, vec![event(10, 1)].into(), 100);

        assert!(segments.serve(Checkpoint::START, 100).is_none());
        assert_eq!(segments.events, 1);
    }

    #[test]
    fn the_oldest_reads_are_dropped_past_the_capacity() {
        let mut segments = Segments::default();
        segments.keep(
            Checkpoint::START,
            vec![event(10, 1), event(10, 2)].into(),
            3,
        );
        segments.keep(at(10, 2), vec![event(11, 3), event(11, 4)].into(), 3);

        assert!(segments.serve(Checkpoint::START, 100).is_none());
        assert_eq!(
            segments.serve(at(10, 2), 100).map(|b| positions(&b)),
            Some(vec![3, 4])
        );
    }
}
