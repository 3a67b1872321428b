//! Reading the event log in commit order, without ever skipping an event.
//!
//! Positions (`global_position`) are handed out when a row is inserted, but transactions
//! commit in another order: reading `position > checkpoint` can pass over an event whose
//! transaction was still running and commits later. So the log is read ordered by
//! `(transaction_id, global_position)`, and only events of transactions older than every
//! transaction still running (`transaction_id < pg_snapshot_xmin(pg_current_snapshot())`):
//! nothing can ever be inserted before what has been read.
//!
//! Within one stream, that order is the stream's own sequence order because the write
//! side never lets a command take its transaction id and then wait for another writer
//! of the same stream (see the write side's `lock_room_type`).
//!
//! **Decoded once, here.** Each event read is decoded into a typed value as its row is
//! read ([`StoredEvent::typed`], through `aggregates::EventDecoder` and its upcasters),
//! so the runners sharing a [`crate::Tail`] read and decode each event once between
//! them. An event the build cannot read keeps its error instead; a projection that
//! needs it fails its batch with [`StoredEvent::typed_for`], which counts it, and the
//! audit log, which copies every event as it is, never asks.

use std::sync::LazyLock;

use aggregates::contract::{RawEvent, RawPayload};
use aggregates::{DecodeError, EventDecoder, TypedEvent};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};

/// The decoder every read of the log goes through: production's upcasters.
static DECODER: LazyLock<EventDecoder> = LazyLock::new(EventDecoder::default);

/// Where a reader has got to: the last event read. `Checkpoint::START` is before all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Checkpoint {
    pub transaction_id: i64,
    pub position: i64,
}

impl Checkpoint {
    pub const START: Checkpoint = Checkpoint {
        transaction_id: 0,
        position: 0,
    };
}

/// One event as stored, with its place in the log, and what it decodes to.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub position: i64,
    pub transaction_id: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    /// The payload and the metadata as PostgreSQL's text of them: the typed event is
    /// decoded from the text, and a reader that wants a `serde_json::Value` (the event
    /// feed) parses its own; building one for every event read cost a quarter of a
    /// rebuild's CPU (docs/scaling.md, `double-decode`).
    pub payload: Box<RawValue>,
    pub metadata: Box<RawValue>,
    pub recorded_at: DateTime<Utc>,
    /// The columns above, decoded (see the module docs).
    typed: Result<TypedEvent, DecodeError>,
}

/// The columns of a stored event, before decoding.
#[derive(Debug, Clone)]
pub struct EventColumns {
    pub position: i64,
    pub transaction_id: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    pub payload: Box<RawValue>,
    pub metadata: Box<RawValue>,
    pub recorded_at: DateTime<Utc>,
}

impl StoredEvent {
    /// The event `columns` store, decoded by `decoder`.
    pub fn decode(columns: EventColumns, decoder: &EventDecoder) -> Self {
        let typed = decoder.decode(RawEvent {
            aggregate_type: &columns.aggregate_type,
            aggregate_id: &columns.aggregate_id,
            sequence: columns.sequence,
            event_type: &columns.event_type,
            event_version: &columns.event_version,
            payload: RawPayload::Text(columns.payload.get()),
        });
        let EventColumns {
            position,
            transaction_id,
            aggregate_type,
            aggregate_id,
            sequence,
            event_type,
            event_version,
            payload,
            metadata,
            recorded_at,
        } = columns;
        Self {
            position,
            transaction_id,
            aggregate_type,
            aggregate_id,
            sequence,
            event_type,
            event_version,
            payload,
            metadata,
            recorded_at,
            typed,
        }
    }

    /// The event `columns` store, decoded as every reader of the log decodes it.
    pub fn from_columns(columns: EventColumns) -> Self {
        Self::decode(columns, &DECODER)
    }

    /// What the event decodes to, or why it does not.
    pub fn typed(&self) -> Result<&TypedEvent, &DecodeError> {
        self.typed.as_ref()
    }

    /// The typed event for `projection`, which cannot apply the batch without it: an
    /// event of a type this build does not know is counted
    /// (`projection_unknown_events_total`, by projection, aggregate type and event
    /// type) and, like one that does not decode, fails the batch with an error naming
    /// it, so the runner retries and reports it rather than skipping it.
    pub fn typed_for(&self, projection: &'static str) -> anyhow::Result<&TypedEvent> {
        self.typed.as_ref().map_err(|error| {
            if error.is_unknown() {
                metrics::counter!(
                    "projection_unknown_events_total",
                    "projection" => projection,
                    "aggregate_type" => self.aggregate_type.clone(),
                    "event_type" => self.event_type.clone()
                )
                .increment(1);
            }
            tracing::error!(
                projection,
                position = self.position,
                aggregate_type = %self.aggregate_type,
                event_type = %self.event_type,
                %error,
                "projection cannot read an event"
            );
            anyhow::anyhow!(
                "{projection}: the event at position {} ({} {} #{}) cannot be read: {error}",
                self.position,
                self.aggregate_type,
                self.aggregate_id,
                self.sequence
            )
        })
    }

    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            transaction_id: self.transaction_id,
            position: self.position,
        }
    }

    pub fn from_row(row: &sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        let columns = EventColumns {
            position: row.try_get("global_position")?,
            transaction_id: row.try_get("txid")?,
            aggregate_type: row.try_get("aggregate_type")?,
            aggregate_id: row.try_get("aggregate_id")?,
            sequence: row.try_get("sequence")?,
            event_type: row.try_get("event_type")?,
            event_version: row.try_get("event_version")?,
            payload: row.try_get::<Json<Box<RawValue>>, _>("payload")?.0,
            metadata: row.try_get::<Json<Box<RawValue>>, _>("metadata")?.0,
            recorded_at: row.try_get("recorded_at")?,
        };
        Ok(Self::decode(columns, &DECODER))
    }
}

/// The columns every reader selects (`txid` as a plain bigint).
pub const EVENT_COLUMNS: &str = "global_position, transaction_id::text::bigint AS txid, \
     aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, \
     recorded_at";

/// The next at most `limit` events after `after`, in commit order.
pub async fn read_after(
    conn: &mut PgConnection,
    after: Checkpoint,
    limit: i64,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events
          WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
            AND (transaction_id, global_position) > ($1::text::xid8, $2)
          ORDER BY transaction_id, global_position
          LIMIT $3"
    );
    let rows = sqlx::query(&sql)
        .bind(after.transaction_id.to_string())
        .bind(after.position)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(StoredEvent::from_row).collect()
}

/// The most events [`lag`] counts.
///
/// Small enough that the planner walks the index whatever it believes of the table: a
/// larger cap on a table without statistics got the statement planned as a scan and
/// sort of the whole log (see docs/benchmarks.md, `lag-count-scan`). Past this many events
/// behind, "at least 10,000" says all an operator needs; the age of the oldest unread
/// event says how far behind in time.
pub const LAG_CAP: i64 = 10_000;

/// How far behind `after` is: events not yet read (visible or not; counted up to
/// [`LAG_CAP`]), and how old the oldest of them is.
///
/// The count walks the commit-order index from the checkpoint and stops at the cap, so
/// it costs what the lag is, not what the log is (a plain `count(*)` over the range was
/// planned as a parallel scan; see docs/benchmarks.md, `projection-housekeeping`).
pub async fn lag(conn: &mut PgConnection, after: Checkpoint) -> Result<(i64, f64), sqlx::Error> {
    let row = sqlx::query(
        "SELECT count(*) AS behind,
                coalesce(extract(epoch FROM now() - min(recorded_at)), 0)::float8 AS seconds
           FROM (SELECT recorded_at FROM events
                  WHERE (transaction_id, global_position) > ($1::text::xid8, $2)
                  ORDER BY transaction_id, global_position
                  LIMIT $3) behind",
    )
    .bind(after.transaction_id.to_string())
    .bind(after.position)
    .bind(LAG_CAP)
    .fetch_one(&mut *conn)
    .await?;
    Ok((row.try_get("behind")?, row.try_get("seconds")?))
}

/// The place in the log of the event at `position`, if there is one (a reader that
/// pages by position, such as the HTTP feed, resumes from it).
pub async fn checkpoint_of(
    conn: &mut PgConnection,
    position: i64,
) -> Result<Option<Checkpoint>, sqlx::Error> {
    let txid: Option<i64> = sqlx::query_scalar(
        "SELECT transaction_id::text::bigint FROM events WHERE global_position = $1",
    )
    .bind(position)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(txid.map(|transaction_id| Checkpoint {
        transaction_id,
        position,
    }))
}

/// Every event of one stream, in its sequence order (committed ones: a reader sees
/// what its snapshot sees).
pub async fn read_stream(
    conn: &mut PgConnection,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events
          WHERE aggregate_type = $1 AND aggregate_id = $2
          ORDER BY sequence"
    );
    let rows = sqlx::query(&sql)
        .bind(aggregate_type)
        .bind(aggregate_id)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(StoredEvent::from_row).collect()
}

/// The events of the streams `aggregate_ids` (of one type) recorded at or before `at`,
/// stream by stream, each in order: what the log knew of them then. Read through the
/// events' primary key, one range per stream.
pub async fn read_streams_until(
    conn: &mut PgConnection,
    aggregate_type: &str,
    aggregate_ids: &[String],
    at: DateTime<Utc>,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    let sql = format!(
        "SELECT {EVENT_COLUMNS} FROM events
          WHERE aggregate_type = $1 AND aggregate_id = ANY($2) AND recorded_at <= $3
          ORDER BY aggregate_id, sequence"
    );
    let rows = sqlx::query(&sql)
        .bind(aggregate_type)
        .bind(aggregate_ids)
        .bind(at)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(StoredEvent::from_row).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use metrics::{Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, SharedString};
    use metrics::{Recorder, Unit};

    use super::*;

    /// One counter registered: its name, its labels and its total.
    type Registered = (String, Vec<(String, String)>, Arc<Total>);

    /// Counts what is recorded.
    #[derive(Default)]
    struct Counted(Mutex<Vec<Registered>>);

    #[derive(Default)]
    struct Total(AtomicU64);

    impl CounterFn for Total {
        fn increment(&self, value: u64) {
            self.0.fetch_add(value, Ordering::Relaxed);
        }

        fn absolute(&self, value: u64) {
            self.0.store(value, Ordering::Relaxed);
        }
    }

    impl Recorder for Counted {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let total = Arc::new(Total::default());
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            if let Ok(mut counted) = self.0.lock() {
                counted.push((key.name().to_owned(), labels, total.clone()));
            }
            Counter::from_arc(total)
        }

        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }

        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    fn stored(aggregate_type: &str, event_type: &str, payload: serde_json::Value) -> StoredEvent {
        let columns = EventColumns {
            position: 41,
            transaction_id: 7,
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: "7:3:2027-06-10".to_owned(),
            sequence: 2,
            event_type: event_type.to_owned(),
            event_version: "1.0".to_owned(),
            payload: serde_json::value::to_raw_value(&payload).expect("json"),
            metadata: serde_json::value::to_raw_value(&serde_json::json!({})).expect("json"),
            recorded_at: Utc::now(),
        };
        StoredEvent::decode(columns, &DECODER)
    }

    #[test]
    fn an_unknown_event_type_fails_the_projection_naming_it_and_is_counted() {
        let event = stored(
            "room_night",
            "RoomsTeleported",
            serde_json::json!({"RoomsTeleported": {"rooms": 1}}),
        );
        let counted = Counted::default();

        let result = metrics::with_local_recorder(&counted, || {
            event
                .typed_for("occupancy")
                .map(|_| ())
                .map_err(|e| e.to_string())
        });

        let error = result.expect_err("an event this build does not know");
        assert!(error.contains("occupancy"), "{error}");
        assert!(error.contains("RoomsTeleported"), "{error}");
        assert!(error.contains("position 41"), "{error}");
        let counted = counted.0.lock().map(|c| c.clone()).unwrap_or_default();
        let [(name, labels, total)] = counted.as_slice() else {
            panic!(
                "one counter: {:?}",
                counted.iter().map(|c| &c.0).collect::<Vec<_>>()
            );
        };
        assert_eq!(name, "projection_unknown_events_total");
        let label = |k: &str| {
            labels
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(label("projection"), Some("occupancy"));
        assert_eq!(label("aggregate_type"), Some("room_night"));
        assert_eq!(label("event_type"), Some("RoomsTeleported"));
        assert_eq!(total.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_known_event_that_does_not_decode_fails_the_projection_without_counting_it_unknown() {
        let event = stored(
            "room_night",
            "RoomsHeld",
            serde_json::json!({"RoomsHeld": {"rooms": "two"}}),
        );
        let counted = Counted::default();

        let result =
            metrics::with_local_recorder(&counted, || event.typed_for("availability").is_err());

        assert!(result);
        assert!(counted.0.lock().map(|c| c.is_empty()).unwrap_or(false));
        assert!(event.typed().is_err());
    }

    #[test]
    fn a_known_event_reads_as_its_typed_event() {
        let payload = serde_json::json!({"RoomsBooked": {
            "reservation_id": uuid::Uuid::from_u128(5), "rooms": 2}});
        let event = stored("room_night", "RoomsBooked", payload);
        match event.typed_for("occupancy") {
            Ok(TypedEvent::RoomNight { key, event }) => {
                assert_eq!(key.stream_id(), "7:3:2027-06-10");
                assert_eq!(event.kind().as_str(), "RoomsBooked");
            }
            other => panic!("a room-night event, got {other:?}"),
        }
    }
}
