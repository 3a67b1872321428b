//! The JetStream relay: every committed event, once, in commit order, on NATS JetStream
//! (stream `RESERVATION_EVENTS`, subject `reservations.events.<hotel_id>`, header
//! `Nats-Msg-Id` = the event's log position, body = the event's `/v1/events` item).
//!
//! The relay is a projection whose storage is the stream: it follows the log from a
//! checkpoint of its own, through the same gap-free commit-order read as every read
//! model, under the same leadership lock, so however many servers run, one of them
//! publishes and the others stand by (see `projections::runner`).
//!
//! Its checkpoint moves only after JetStream has acknowledged every message of a batch,
//! so a crash between the publish and the checkpoint's commit makes the next leader
//! read those events again. Two guards keep them from being stored twice:
//!
//! - each message carries `Nats-Msg-Id` = its position, and JetStream drops a copy it
//!   has stored within the stream's duplicate window;
//! - beyond that window too: the relay publishes nothing the stream already holds. When
//!   it starts, and after any failure, it reads the stream's last message, finds that
//!   event in the log, and skips every event up to it **in commit order**: up to its
//!   checkpoint (transaction, position), never up to its position alone. Positions are
//!   handed out at insert and transactions commit in another order, so an event
//!   published later can carry a smaller position than the last one published; a skip
//!   by position would drop it, and with it whole group-commit batches.
//!
//! Each message also states the stream sequence it must follow
//! (`Nats-Expected-Last-Sequence`), so JetStream refuses a message whose predecessor is
//! missing. Publishes are pipelined within a batch; if one fails, those after it fail
//! too, rather than leave a gap that the skip above would then make permanent. The same
//! check keeps a deposed leader that is still publishing from interleaving with its
//! successor. (The sequence is kept on disk by JetStream, unlike the last message id,
//! which a restarted NATS server may not know.)
//!
//! [`occupancy_from_stream`] is the other end: a consumer that rebuilds the occupancy
//! projection from the stream alone, as a system downstream of us would.

use std::time::{Duration, Instant};

use aggregates::{AggregateType, StreamKey};
use anyhow::Context as _;
use async_nats::jetstream::{self, context::PublishAckFuture, message::PublishMessage, stream};
use futures::StreamExt;
use projections::log::EventColumns;
use projections::{Checkpoint, Projection, StoredEvent};
use sqlx::{PgConnection, PgPool};

use projections::feed::EventOut;

/// The relay's checkpoint row and leadership lock.
pub const RELAY: &str = "jetstream_relay";

/// How long JetStream remembers a message id to drop its copies.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(600);

/// How often an idle relay checks that its stream still exists.
const STREAM_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// Where the relay publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayTarget {
    stream: String,
    subject_prefix: String,
}

impl RelayTarget {
    /// A stream name (no spaces, dots or wildcards) and a subject prefix (dot-separated
    /// tokens without wildcards); events go to `{prefix}.{hotel_id}`.
    pub fn parse(stream: &str, subject_prefix: &str) -> Result<Self, String> {
        let plain = |c: char| !c.is_whitespace() && !matches!(c, '*' | '>');
        if stream.is_empty() || stream.len() > 255 || !stream.chars().all(|c| plain(c) && c != '.')
        {
            return Err(format!(
                "NATS_STREAM {stream:?}: a JetStream stream name has no spaces, dots or wildcards"
            ));
        }
        if subject_prefix.is_empty()
            || subject_prefix
                .split('.')
                .any(|token| token.is_empty() || !token.chars().all(plain))
        {
            return Err(format!(
                "NATS_SUBJECT_PREFIX {subject_prefix:?}: dot-separated tokens without spaces or wildcards"
            ));
        }
        Ok(Self {
            stream: stream.to_owned(),
            subject_prefix: subject_prefix.to_owned(),
        })
    }

    pub fn stream(&self) -> &str {
        &self.stream
    }

    pub fn subject_prefix(&self) -> &str {
        &self.subject_prefix
    }

    /// The subject of a hotel's events.
    pub fn subject(&self, hotel_id: i64) -> String {
        format!("{}.{hotel_id}", self.subject_prefix)
    }

    /// The stream as the relay creates it when missing: every hotel's subject, kept on
    /// disk with no limits (a consumer may start from the first event).
    pub fn stream_config(&self) -> stream::Config {
        stream::Config {
            name: self.stream.clone(),
            subjects: vec![format!("{}.>", self.subject_prefix)],
            storage: stream::StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        }
    }
}

/// A JetStream client that connects in the background and keeps reconnecting, so a
/// NATS server that is down at start delays the relay, never the server.
pub async fn connect(url: &str) -> anyhow::Result<jetstream::Context> {
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .with_context(|| format!("NATS_URL {url:?}"))?;
    Ok(jetstream::new(client))
}

/// The last message the stream holds: its stream sequence, and the place in the log
/// (commit order) of the event it carries (`None` when the stream holds nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Published {
    sequence: u64,
    last: Option<Checkpoint>,
}

impl Published {
    /// Whether the stream already holds `event`: it comes, in commit order, no later
    /// than the last event published.
    fn holds(&self, event: &StoredEvent) -> bool {
        self.last.is_some_and(|last| event.checkpoint() <= last)
    }
}

/// The relay (see the module docs).
pub struct JetStreamRelay {
    context: jetstream::Context,
    target: RelayTarget,
    /// What the stream holds, as far as this relay knows; `None`: ask the stream first.
    published: Option<Published>,
    stream_checked: Option<Instant>,
}

impl JetStreamRelay {
    pub fn new(context: jetstream::Context, target: RelayTarget) -> Self {
        Self {
            context,
            target,
            published: None,
            stream_checked: None,
        }
    }

    /// The stream, created if missing; `true` if it had to be created.
    async fn ensure_stream(&mut self) -> anyhow::Result<(stream::Stream, bool)> {
        let found = self.context.get_stream(self.target.stream()).await;
        let (stream, created) = match found {
            Ok(stream) => (stream, false),
            Err(_) => {
                let stream = self
                    .context
                    .create_stream(self.target.stream_config())
                    .await
                    .with_context(|| format!("creating JetStream stream {}", self.target.stream))?;
                tracing::info!(stream = %self.target.stream, "created the JetStream stream");
                (stream, true)
            }
        };
        self.stream_checked = Some(Instant::now());
        Ok((stream, created))
    }

    /// Reads what the stream holds last, and checks it is an event of this log.
    async fn resync(&mut self, conn: &mut PgConnection) -> anyhow::Result<Published> {
        let (stream, _) = self.ensure_stream().await?;
        let info = stream
            .get_info()
            .await
            .context("reading the JetStream stream")?;
        let sequence = info.state.last_sequence;
        if info.state.messages == 0 {
            return Ok(Published {
                sequence,
                last: None,
            });
        }
        let last = stream
            .get_raw_message(sequence)
            .await
            .with_context(|| format!("reading message {sequence} of the JetStream stream"))?;
        let position = last
            .headers
            .get(async_nats::header::NATS_MESSAGE_ID)
            .and_then(|id| id.as_str().parse::<i64>().ok())
            .with_context(|| {
                format!(
                    "message {sequence} of stream {} has no log position as its Nats-Msg-Id: \
                     something else publishes to the relay's subjects",
                    self.target.stream
                )
            })?;
        // After an asynchronous failover the new primary may lack the last
        // transactions the old one committed, and hand their positions out again: the
        // stream would hold events the log no longer has, and skipping "up to" them
        // would skip new ones. Publishing on would give consumers two histories; the
        // relay stops instead, and says so, until an operator decides (see
        // docs/scaling.md, "Failover").
        let item: EventOut = serde_json::from_slice(&last.payload)
            .with_context(|| format!("message {sequence} is not an event item"))?;
        let sql = format!(
            "SELECT {} FROM events WHERE global_position = $1",
            projections::log::EVENT_COLUMNS
        );
        let in_log = sqlx::query(&sql)
            .bind(position)
            .fetch_optional(&mut *conn)
            .await?
            .map(|row| StoredEvent::from_row(&row))
            .transpose()?;
        let same = in_log.filter(|event| EventOut::from(event) == item);
        metrics::gauge!("relay_diverged").set(if same.is_some() { 0.0 } else { 1.0 });
        let Some(event) = same else {
            anyhow::bail!(
                "stream {} ends with position {position} ({} #{}), which the event log does not \
                 hold: it was published from a history this database no longer has",
                self.target.stream,
                item.stream,
                item.version
            );
        };
        Ok(Published {
            sequence,
            last: Some(event.checkpoint()),
        })
    }

    async fn publish(
        &mut self,
        conn: &mut PgConnection,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let mut published = match self.published {
            Some(published) => published,
            None => self.resync(conn).await?,
        };
        let mut acks: Vec<(u64, PublishAckFuture)> = Vec::with_capacity(batch.len());
        for event in batch {
            if published.holds(event) {
                // Already in the stream: published before a crash or a lost checkpoint.
                continue;
            }
            let body = serde_json::to_vec(&EventOut::from(event))?;
            let message = PublishMessage::build()
                .payload(body.into())
                .message_id(event.position.to_string())
                .expected_last_sequence(published.sequence);
            let ack = self
                .context
                .send_publish(self.target.subject(hotel_of(event)?), message)
                .await
                .context("publishing to JetStream")?;
            published = Published {
                sequence: published.sequence + 1,
                last: Some(event.checkpoint()),
            };
            acks.push((published.sequence, ack));
        }
        let published_now = acks.len();
        for (expected, ack) in acks {
            let ack = ack.await.context("JetStream did not store an event")?;
            if ack.duplicate || ack.sequence != expected {
                // Stored, but not where this relay counted: count again before the
                // next batch rather than trust the arithmetic.
                tracing::warn!(
                    expected,
                    stored = ack.sequence,
                    duplicate = ack.duplicate,
                    "JetStream stored an event at another sequence"
                );
                self.published = None;
                return Ok(());
            }
        }
        metrics::counter!("relay_events_published_total").increment(published_now as u64);
        self.published = Some(published);
        Ok(())
    }
}

/// The hotel an event belongs to (every stream id starts with it).
fn hotel_of(event: &StoredEvent) -> anyhow::Result<i64> {
    let aggregate_type = AggregateType::parse(&event.aggregate_type)
        .with_context(|| format!("unknown aggregate type {:?}", event.aggregate_type))?;
    Ok(StreamKey::parse(aggregate_type, &event.aggregate_id)?
        .hotel_id()
        .get())
}

impl Projection for JetStreamRelay {
    fn name(&self) -> &'static str {
        RELAY
    }

    async fn apply(
        &mut self,
        tx: &mut PgConnection,
        _generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let result = self.publish(tx, batch).await;
        if result.is_err() {
            // Whatever part of the batch was stored, the next try starts from what the
            // stream says it holds.
            self.published = None;
        }
        result
    }

    /// A stream cannot be unpublished: starting from position zero only makes sure the
    /// stream exists. (What it already holds is skipped, see the module docs.)
    async fn clear(&mut self, _conn: &mut PgConnection, _generation: i32) -> anyhow::Result<()> {
        self.published = None;
        self.ensure_stream().await.map(|_| ())
    }

    /// The stream is gone (deleted, or a NATS server without its storage): it is
    /// created again and the whole log published into it from position zero.
    async fn storage_intact(
        &mut self,
        _conn: &mut PgConnection,
        _generation: i32,
        checkpoint: Checkpoint,
    ) -> anyhow::Result<bool> {
        if self
            .stream_checked
            .is_some_and(|at| at.elapsed() < STREAM_CHECK_INTERVAL)
        {
            return Ok(true);
        }
        let (_, created) = self.ensure_stream().await?;
        if created {
            self.published = None;
        }
        Ok(!created || checkpoint == Checkpoint::START)
    }
}

/// What [`occupancy_from_stream`] read and wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consumed {
    pub messages: u64,
    pub last_position: Option<i64>,
}

/// Rebuilds the occupancy projection from the JetStream stream alone, into the
/// database of `pool` (a database of its own, migrated: its occupancy tables are
/// cleared and filled), reading every message the stream holds when it starts, in
/// stream order. A consumer downstream of the relay, written as one would be: it knows
/// the stream and the body of a `/v1/events` item, nothing of our event log.
pub async fn occupancy_from_stream(
    context: &jetstream::Context,
    target: &RelayTarget,
    pool: &PgPool,
) -> anyhow::Result<Consumed> {
    let stream = context
        .get_stream(target.stream())
        .await
        .with_context(|| format!("JetStream stream {}", target.stream()))?;
    let info = stream.get_info().await?;
    let last = info.state.last_sequence;
    let mut projection = projections::analytics::Occupancy;
    let mut conn = pool.acquire().await?;
    let (generation, _) =
        projections::runner::load_checkpoint(&mut conn, projections::analytics::OCCUPANCY).await?;
    projection.clear(&mut conn, generation).await?;
    drop(conn);
    let mut consumed = Consumed {
        messages: 0,
        last_position: None,
    };
    if info.state.messages == 0 {
        return Ok(consumed);
    }
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await?;
    let mut messages = consumer.messages().await?;
    let mut batch: Vec<StoredEvent> = Vec::with_capacity(500);
    let mut done = false;
    while !done {
        let message = match messages.next().await {
            Some(message) => message?,
            None => break,
        };
        let sequence = message
            .info()
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .stream_sequence;
        let item: EventOut = serde_json::from_slice(&message.payload)
            .with_context(|| format!("message {sequence} is not an event item"))?;
        consumed.messages += 1;
        consumed.last_position = Some(item.position);
        batch.push(stored_event(&item)?);
        done = sequence >= last;
        if batch.len() == 500 || done {
            let mut tx = pool.begin().await?;
            projection.apply(&mut tx, generation, &batch).await?;
            tx.commit().await?;
            batch.clear();
        }
    }
    Ok(consumed)
}

/// The event an item describes, as the projections read events.
fn stored_event(item: &EventOut) -> anyhow::Result<StoredEvent> {
    let (aggregate_type, aggregate_id) = item
        .stream_parts()
        .with_context(|| format!("stream {:?} is not type/id", item.stream))?;
    let raw = |value: &serde_json::Value| serde_json::value::to_raw_value(value);
    Ok(StoredEvent::from_columns(EventColumns {
        position: item.position,
        // Which transaction wrote it is the log's business; the stream is in commit
        // order already.
        transaction_id: 0,
        aggregate_type: aggregate_type.to_owned(),
        aggregate_id: aggregate_id.to_owned(),
        sequence: item.version,
        event_type: item.event_type.clone(),
        event_version: item.event_version.clone(),
        payload: raw(&item.stored_payload())?,
        metadata: raw(&item.metadata)?,
        recorded_at: item.recorded_at,
    }))
}
