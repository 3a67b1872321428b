//! Verifying the audit log: the chain and the terms of every sale (one walk of the log
//! in commit order), the replay of every stream, the inline night tables and the
//! copies, each read on its own connection of one shared snapshot (see the
//! [module docs](super)).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aggregates::contract::{RawEvent, RawPayload, ReservationEventType, RoomNightEventType};
use aggregates::{AggregateType, RoomNight};
use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use futures::stream::BoxStream;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Postgres, Row, Transaction};
use uuid::Uuid;

use super::chain::{ChainHasher, EventFields};
use super::replay::{StreamReplay, TermsReplay};
use super::{AuditLog, GENESIS_HASH, MAX_PROBLEMS, NAME};
use crate::log::Checkpoint;

/// The result of [`verify`]; the body of `GET /v1/audit/verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// No problem found.
    pub ok: bool,
    /// Audit rows checked (the whole chain).
    pub events_checked: u64,
    /// The smallest event position implicated by a problem; `null` when none is, or
    /// when the only problems are in the inline tables (`room_nights`, allocations),
    /// whose history itself checked out.
    pub first_bad_position: Option<i64>,
    /// What is wrong, one line each, by position; at most [`MAX_PROBLEMS`] lines (a last
    /// line says how many more there were).
    pub problems: Vec<String>,
    /// Events committed after the audit log's checkpoint: not verified by this run (the
    /// nights they touch were not compared with `room_nights`).
    pub pending_events: u64,
}

/// How far a running verify has got, for a progress bar: the audit rows there are to
/// walk, and the events each of the two whole walks (the chain's, in commit order, and
/// the streams' replay, in key order) has passed. They run side by side; the slower is
/// how far the verify is.
#[derive(Debug, Default)]
pub struct VerifyProgress {
    total: AtomicU64,
    chain: AtomicU64,
    streams: AtomicU64,
}

impl VerifyProgress {
    /// Events to walk (0 until the verify has read its snapshot's size).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Events both walks have passed.
    pub fn done(&self) -> u64 {
        self.chain
            .load(Ordering::Relaxed)
            .min(self.streams.load(Ordering::Relaxed))
    }
}

/// A problem, with the event position it implicates if any.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    position: Option<i64>,
    message: String,
}

/// The problems one check found: the first [`MAX_PROBLEMS`] kept, all counted, and the
/// smallest position among all of them.
#[derive(Debug, Default)]
struct Findings {
    kept: Vec<Problem>,
    total: usize,
    first_bad: Option<i64>,
}

impl Findings {
    fn report(&mut self, position: Option<i64>, message: String) {
        self.total += 1;
        if let Some(p) = position {
            self.first_bad = Some(self.first_bad.map_or(p, |f| f.min(p)));
        }
        if self.kept.len() < MAX_PROBLEMS {
            self.kept.push(Problem { position, message });
        }
    }

    fn merge(parts: Vec<Findings>) -> Findings {
        let mut all = Findings::default();
        for part in parts {
            all.total += part.total;
            all.first_bad = match (all.first_bad, part.first_bad) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            all.kept.extend(part.kept);
        }
        // By position, so the first line names the first bad event; problems of the
        // inline tables (no position) last.
        all.kept
            .sort_by_key(|p| (p.position.is_none(), p.position.unwrap_or(0)));
        all
    }

    fn into_lines(self) -> Vec<String> {
        let shown = self.kept.len().min(MAX_PROBLEMS);
        let mut lines: Vec<String> = self
            .kept
            .into_iter()
            .take(shown)
            .map(|p| p.message)
            .collect();
        if self.total > shown {
            lines.push(format!("... and {} more problem(s)", self.total - shown));
        }
        lines
    }
}

/// Brings the audit log up to date (see [`crate::catch_up()`]), then verifies it.
pub async fn catch_up_and_verify(pool: &PgPool, wait: Duration) -> anyhow::Result<VerifyReport> {
    catch_up_and_verify_with(pool, wait, Arc::default()).await
}

/// [`catch_up_and_verify`], saying how far it has got in `progress`.
pub async fn catch_up_and_verify_with(
    pool: &PgPool,
    wait: Duration,
    progress: Arc<VerifyProgress>,
) -> anyhow::Result<VerifyReport> {
    crate::catch_up(pool, &mut AuditLog, 1000, wait)
        .await
        .context("bringing the audit log up to date")?;
    verify_with(pool, progress).await
}

/// Verifies the audit log, the whole history and the inline night tables; see the
/// module documentation. Needs six connections of `pool` at once.
pub async fn verify(pool: &PgPool) -> anyhow::Result<VerifyReport> {
    verify_with(pool, Arc::default()).await
}

/// [`verify`], saying how far it has got in `progress`.
pub async fn verify_with(
    pool: &PgPool,
    progress: Arc<VerifyProgress>,
) -> anyhow::Result<VerifyReport> {
    // One snapshot for every reader: exported by the first transaction, adopted by the
    // others before they read anything.
    let mut first = snapshot_tx(pool, None).await?;
    let snapshot: String = sqlx::query_scalar("SELECT pg_export_snapshot()")
        .fetch_one(&mut *first)
        .await?;
    let mut replay_tx = snapshot_tx(pool, Some(&snapshot)).await?;
    let nights_tx = snapshot_tx(pool, Some(&snapshot)).await?;
    let allocations_tx = snapshot_tx(pool, Some(&snapshot)).await?;
    let terms_tx = snapshot_tx(pool, Some(&snapshot)).await?;
    let events_tx = snapshot_tx(pool, Some(&snapshot)).await?;

    let checkpoint = audit_checkpoint(&mut replay_tx).await?;
    // The chain's rows are numbered from 1 with no gap (a gap is a problem it reports):
    // the last number is how many there are to walk, read through the index.
    let rows: i64 = sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM audit_log")
        .fetch_one(&mut *replay_tx)
        .await?;
    progress
        .total
        .store(u64::try_from(rows).unwrap_or(0), Ordering::Relaxed);
    let (pending_events, pending_nights) = pending(&mut replay_tx, checkpoint).await?;
    // Nights before it have had their confirmed allocations compacted away (or are
    // being compacted): their allocations are not compared (migration 21).
    let compacted_before: Option<chrono::NaiveDate> = sqlx::query_scalar(
        "SELECT coalesce(target_before, compacted_before) FROM allocation_compaction",
    )
    .fetch_optional(&mut *replay_tx)
    .await?
    .flatten();

    // The checks run side by side, each on its own connection and task: the chain's
    // hashing and the replays' decoding are CPU-bound and independent. A
    // JoinSet aborts them all if this future is dropped (a request that timed out), so
    // no check goes on holding connections for nobody.
    let started = std::time::Instant::now();
    let mut checks = tokio::task::JoinSet::new();
    // Each check answers (its rank, rows walked, findings); the rank keeps the report
    // in the same order whichever check finishes first.
    let chain_progress = Arc::clone(&progress);
    checks.spawn(timed("chain and terms", started, async move {
        let (checked, chain, terms) = check_chain(
            first,
            events_tx,
            terms_tx,
            checkpoint,
            &chain_progress.chain,
        )
        .await?;
        Ok((0, checked, vec![chain, terms]))
    }));
    checks.spawn(timed("streams", started, async move {
        let findings = check_streams(
            replay_tx,
            nights_tx,
            allocations_tx,
            pending_nights,
            compacted_before,
            checkpoint,
            &progress.streams,
        )
        .await?;
        Ok((1, 0, vec![findings]))
    }));
    let mut events_checked = 0;
    let mut parts = Vec::with_capacity(4);
    while let Some(done) = checks.join_next().await {
        let (rank, checked, findings) = done??;
        events_checked += checked;
        parts.push((rank, findings));
    }
    parts.sort_by_key(|(rank, _)| *rank);

    let findings = Findings::merge(parts.into_iter().flat_map(|(_, f)| f).collect());
    let ok = findings.total == 0;
    Ok(VerifyReport {
        ok,
        events_checked,
        first_bad_position: findings.first_bad,
        problems: findings.into_lines(),
        pending_events,
    })
}

/// Runs one check and logs how long it took (each runs in parallel with the others).
async fn timed<T>(
    check: &'static str,
    started: std::time::Instant,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let result = work.await;
    tracing::info!(
        check,
        seconds = started.elapsed().as_secs_f64(),
        ok = result.is_ok(),
        "audit verify check finished"
    );
    result
}

/// A read-only repeatable-read transaction, on `snapshot` if given.
async fn snapshot_tx(
    pool: &PgPool,
    snapshot: Option<&str>,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    if let Some(id) = snapshot {
        // The id comes from pg_export_snapshot (hex digits and dashes); SET TRANSACTION
        // SNAPSHOT takes no bind parameters, hence the literal, quoted defensively.
        sqlx::query(&format!(
            "SET TRANSACTION SNAPSHOT '{}'",
            id.replace('\'', "''")
        ))
        .execute(&mut *tx)
        .await?;
    }
    // Whole-table reads costed high enough to be JIT-compiled, to no gain: their work
    // is moving rows, not evaluating expressions.
    sqlx::query("SET LOCAL jit = off").execute(&mut *tx).await?;
    Ok(tx)
}

/// Where the audit log has got to (the start if it never ran). Read here rather than
/// with the runner's `load_checkpoint`, which creates a missing row: this transaction is
/// read-only.
async fn audit_checkpoint(conn: &mut PgConnection) -> Result<Checkpoint, sqlx::Error> {
    let row: Option<(i64, i64)> = sqlx::query_as(
        "SELECT transaction_id::text::bigint, global_position
           FROM projection_checkpoints WHERE name = $1",
    )
    .bind(NAME)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(
        row.map_or(Checkpoint::START, |(transaction_id, position)| Checkpoint {
            transaction_id,
            position,
        }),
    )
}

/// Events after the audit checkpoint, and the nights they touch.
async fn pending(
    conn: &mut PgConnection,
    checkpoint: Checkpoint,
) -> Result<(u64, HashSet<String>), sqlx::Error> {
    let mut rows = sqlx::query(
        "SELECT aggregate_type, aggregate_id FROM events
          WHERE (transaction_id, global_position) > ($1::text::xid8, $2)",
    )
    .bind(checkpoint.transaction_id.to_string())
    .bind(checkpoint.position)
    .fetch(&mut *conn);
    let mut count = 0_u64;
    let mut nights = HashSet::new();
    while let Some(row) = rows.try_next().await? {
        count += 1;
        let kind: String = row.try_get("aggregate_type")?;
        if kind == AggregateType::RoomNight.as_str() {
            nights.insert(row.try_get::<String, _>("aggregate_id")?);
        }
    }
    Ok((count, nights))
}

/// One audit row: where its event is in commit order, and the row as read, from which
/// what names the event and its hash are borrowed when compared (no copy of them is
/// made: this runs once per event).
struct AuditRow {
    seq: i64,
    position: i64,
    transaction_id: i64,
    row: PgRow,
}

impl AuditRow {
    /// The stream, sequence and type the row names.
    fn names(&self) -> Result<(&str, &str, i64, &str), sqlx::Error> {
        Ok((
            self.row.try_get_unchecked(3)?,
            self.row.try_get_unchecked(4)?,
            self.row.try_get_unchecked(5)?,
            self.row.try_get_unchecked(6)?,
        ))
    }

    fn hash(&self) -> Result<&[u8], sqlx::Error> {
        self.row.try_get_unchecked(7)
    }
}

/// Unchecked column types, as in the replay's loop: one call per audit row.
fn audit_row(row: PgRow) -> Result<AuditRow, sqlx::Error> {
    Ok(AuditRow {
        seq: row.try_get_unchecked(0)?,
        position: row.try_get_unchecked(1)?,
        transaction_id: row.try_get_unchecked(2)?,
        row,
    })
}

/// PostgreSQL's epoch (2000-01-01 UTC) in Unix microseconds.
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The chain's row's `recorded_at` (column 9). A `timestamptz` is sent as microseconds
/// since 2000-01-01 UTC, 8 bytes big-endian as a bigint: read as an i64, as
/// `transaction_id` is, rather than through sqlx's chrono decoding, which goes by a
/// fixed offset and a `Duration` (once per event of the log).
fn recorded_at(row: &PgRow) -> Result<DateTime<Utc>, sqlx::Error> {
    let micros: i64 = row.try_get_unchecked(9)?;
    micros
        .checked_add(POSTGRES_EPOCH_MICROS)
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(|| sqlx::Error::ColumnDecode {
            index: "recorded_at".to_owned(),
            source: format!("{micros} microseconds from 2000 is out of range").into(),
        })
}

/// Checks 1 and 5: the chain, by `seq`, against the events it records, merged in commit
/// order up to the audit checkpoint (`audit_log` by `seq` and `events` by
/// `events_commit_order` are both in that order, so two sequential reads suffice). Each
/// row's hash must be `SHA-256(previous row's hash || canonical bytes of its event as
/// it is now in events)`, its `seq` one more than the last, and what names the event
/// (stream, sequence, type) the event's own; an audit row without its event and an event
/// without its audit row are reported. Returns how many audit rows it walked.
///
/// Check 4 rides along (see [`SaleTerms`]): the events it needs are read here, in the
/// same order, so the log is not read a third time.
async fn check_chain(
    mut audit_tx: Transaction<'static, Postgres>,
    mut events_tx: Transaction<'static, Postgres>,
    mut terms_tx: Transaction<'static, Postgres>,
    checkpoint: Checkpoint,
    walked: &AtomicU64,
) -> anyhow::Result<(u64, Findings, Findings)> {
    let mut findings = Findings::default();
    let mut terms = SaleTerms::new();
    let mut audit = Sorted::open(
        sqlx::query(
            // `transaction_id` as it is sent (an xid8 in binary is 8 bytes big-endian, as
            // a bigint): read as an i64, with no text conversion on either side.
            "SELECT seq, position, transaction_id, aggregate_type, aggregate_id,
                    sequence, event_type, hash
               FROM audit_log ORDER BY seq",
        )
        .fetch(&mut *audit_tx),
        audit_row,
    )
    .await?;
    let mut events = sqlx::query(
        "SELECT global_position, transaction_id, aggregate_type, aggregate_id,
                sequence, event_type, event_version, payload::text, metadata::text, recorded_at
           FROM events e
          WHERE (e.transaction_id, e.global_position) <= ($1::text::xid8, $2)
          -- Qualified: unqualified, transaction_id would name the output column (the
          -- bigint cast) and be sorted instead of read in the index's order.
          ORDER BY e.transaction_id, e.global_position",
    )
    .bind(checkpoint.transaction_id.to_string())
    .bind(checkpoint.position)
    .fetch(&mut *events_tx);
    let mut last_seq = 0_i64;
    let mut last_hash: Vec<u8> = GENESIS_HASH.to_vec();
    let mut hasher = ChainHasher::default();
    let mut checked = 0_u64;
    let mut next_event = events.try_next().await?;
    loop {
        let event_key = match &next_event {
            Some(row) => Some((
                row.try_get_unchecked::<i64, _>(1)?,
                row.try_get_unchecked::<i64, _>(0)?,
            )),
            None => None,
        };
        let audit_key = audit.next.as_ref().map(|a| (a.transaction_id, a.position));
        match (audit_key, event_key) {
            (None, None) => break,
            // An event the audit log never recorded (it is before the checkpoint).
            (None, Some((_, p))) | (Some(_), Some((_, p)))
                if audit_key.is_none() || event_key < audit_key =>
            {
                findings.report(
                    Some(p),
                    format!("position {p}: the event has no audit row (an audit row was removed)"),
                );
                if let Some(row) = &next_event {
                    terms.feed(row, &mut terms_tx).await?;
                }
                next_event = events.try_next().await?;
            }
            _ => {
                let Some(a) = audit.advance().await? else {
                    break;
                };
                checked += 1;
                walked.store(checked, Ordering::Relaxed);
                let p = a.position;
                if a.seq != last_seq + 1 {
                    findings.report(
                        Some(p),
                        format!(
                            "position {p} (audit seq {}): chain broken: the chain jumps from \
                             seq {last_seq} to {} ({} row(s) missing)",
                            a.seq,
                            a.seq,
                            a.seq - last_seq - 1
                        ),
                    );
                }
                if event_key == Some((a.transaction_id, a.position)) {
                    let Some(row) = next_event.take() else { break };
                    terms.feed(&row, &mut terms_tx).await?;
                    // As text: the chain's canonical form is written from it directly
                    // with no `Value` built (docs/scaling.md, `double-decode`).
                    let payload: &str = row.try_get_unchecked(7)?;
                    let metadata: &str = row.try_get_unchecked(8)?;
                    let fields = EventFields {
                        position: p,
                        transaction_id: a.transaction_id,
                        aggregate_type: row.try_get_unchecked(2)?,
                        aggregate_id: row.try_get_unchecked(3)?,
                        sequence: row.try_get_unchecked(4)?,
                        event_type: row.try_get_unchecked(5)?,
                        event_version: row.try_get_unchecked(6)?,
                        payload,
                        metadata,
                        recorded_at: recorded_at(&row)?,
                    };
                    let (aggregate_type, aggregate_id, sequence, event_type) = a.names()?;
                    let named = (
                        fields.aggregate_type,
                        fields.aggregate_id,
                        fields.sequence,
                        fields.event_type,
                    ) == (aggregate_type, aggregate_id, sequence, event_type);
                    if !named {
                        findings.report(
                            Some(p),
                            format!(
                                "position {p}: the event is {} {} #{} {}, its audit row \
                                 recorded {aggregate_type} {aggregate_id} #{sequence} \
                                 {event_type}",
                                fields.aggregate_type,
                                fields.aggregate_id,
                                fields.sequence,
                                fields.event_type,
                            ),
                        );
                    } else if hasher.hash(&last_hash, &fields)?.as_slice() != a.hash()? {
                        findings.report(
                            Some(p),
                            format!(
                                "position {p} ({aggregate_type} {aggregate_id} #{sequence}): \
                                 the event differs from what the audit log recorded (the \
                                 event, or its audit row, was changed after it was written)"
                            ),
                        );
                    }
                    next_event = events.try_next().await?;
                } else {
                    findings.report(
                        Some(p),
                        format!(
                            "position {p}: the audit row has no event (an event was removed, \
                             or the audit row was added)"
                        ),
                    );
                }
                // Go on from the stored hash, so one changed event is reported once,
                // not as a break of every link after it.
                last_seq = a.seq;
                last_hash.clear();
                last_hash.extend_from_slice(a.hash()?);
            }
        }
    }
    Ok((checked, findings, terms.findings))
}

/// One `room_nights` row, keyed by its stream id.
#[derive(Debug)]
struct NightRow {
    stream_id: String,
    total_rooms: i32,
    allowance: i32,
    rate_cents: i64,
    confirmed: i32,
    held: i32,
    blocked: i32,
    /// The night's blocks as stored (NULL: none).
    blocks: Option<serde_json::Value>,
    version: i64,
}

/// One `room_night_allocations` row, keyed by its stream id.
#[derive(Debug)]
struct AllocationRow {
    stream_id: String,
    reservation_id: Uuid,
    rooms: i32,
    expires_at: Option<DateTime<Utc>>,
    block_code: Option<String>,
}

/// A row stream sorted by stream id, read one row ahead so it can be merged.
struct Sorted<'c, T> {
    rows: BoxStream<'c, Result<PgRow, sqlx::Error>>,
    decode: fn(PgRow) -> Result<T, sqlx::Error>,
    next: Option<T>,
}

impl<'c, T> Sorted<'c, T> {
    async fn open(
        rows: BoxStream<'c, Result<PgRow, sqlx::Error>>,
        decode: fn(PgRow) -> Result<T, sqlx::Error>,
    ) -> Result<Self, sqlx::Error> {
        let mut sorted = Self {
            rows,
            decode,
            next: None,
        };
        sorted.advance().await?;
        Ok(sorted)
    }

    /// Returns the current row and reads the next one.
    async fn advance(&mut self) -> Result<Option<T>, sqlx::Error> {
        let next = match self.rows.try_next().await? {
            Some(row) => Some((self.decode)(row)?),
            None => None,
        };
        Ok(std::mem::replace(&mut self.next, next))
    }
}

/// `room_nights`, in stream id order.
fn night_rows() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        in_stream_id_order(
            "room_nights",
            "total_rooms, overbooking_allowance, rate_cents, confirmed, held, blocked, blocks,
             version",
            "night",
        )
    })
}

/// `room_night_allocations`, in stream id order.
fn allocation_rows() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        in_stream_id_order(
            "room_night_allocations",
            "reservation_id, rooms, expires_at, block_code",
            "night, reservation_id",
        )
    })
}

/// `hotel_id, room_type_id, night` and `columns` of `table` (a night table, keyed by
/// hotel, room type and night), in byte order of the stream id (`{hotel}:{type}:{night}`,
/// as `RoomNightKey::stream_id` writes it), the order the replay reads the log in,
/// without sorting the tables: that order is the (hotel, room type) pairs sorted by
/// `"{hotel}:"` then `"{type}:"` as bytes (digits sort before `:`, so `"812:"` before
/// `"81:"`, as `812:…` before `81:…`), then each pair's nights by date, which its primary
/// key gives. The pairs are few (a sort of one row per room type); each pair's rows come
/// from an index range, a `LATERAL` subquery that can only be joined as a nested loop,
/// outer rows in their order and each one's rows in theirs. Sorting all the rows by a
/// computed text (one row per night: 9.2M on a chain) cost more than the replay beside it.
/// Within a night, by `order`.
fn in_stream_id_order(table: &str, columns: &str, order: &str) -> String {
    format!(
        "SELECT r.hotel_id, r.room_type_id, r.night, {columns}
           FROM (SELECT hotel_id, room_type_id
                   FROM (SELECT DISTINCT hotel_id, room_type_id FROM {table}) pairs
                  ORDER BY (hotel_id::text || ':') COLLATE \"C\",
                           (room_type_id::text || ':') COLLATE \"C\"
                 OFFSET 0) k
          CROSS JOIN LATERAL (
                 SELECT * FROM {table} t
                  WHERE t.hotel_id = k.hotel_id AND t.room_type_id = k.room_type_id
                  ORDER BY {order}
                 OFFSET 0) r"
    )
}

/// The stream id of a night's row (its ids as stored, valid or not: a row is compared,
/// not trusted). Columns by index, as both night tables' reads begin
/// ([`in_stream_id_order`]), their types unchecked as in the replay's loop (the SELECT
/// fixes them; a mismatch is a decode error, not a wrong value): this runs once per
/// row, and a name is a lookup.
fn night_stream_id(row: &PgRow) -> Result<String, sqlx::Error> {
    Ok(aggregates::streams::night_stream_id_of(
        row.try_get_unchecked(0)?,
        row.try_get_unchecked(1)?,
        row.try_get_unchecked(2)?,
    ))
}

/// A `room_nights` row: the columns of [`night_rows`], by index.
fn night_row(row: PgRow) -> Result<NightRow, sqlx::Error> {
    Ok(NightRow {
        stream_id: night_stream_id(&row)?,
        total_rooms: row.try_get_unchecked(3)?,
        allowance: row.try_get_unchecked(4)?,
        rate_cents: row.try_get_unchecked(5)?,
        confirmed: row.try_get_unchecked(6)?,
        held: row.try_get_unchecked(7)?,
        blocked: row.try_get_unchecked(8)?,
        blocks: row.try_get_unchecked(9)?,
        version: row.try_get_unchecked(10)?,
    })
}

/// A `room_night_allocations` row: the columns of [`allocation_rows`], by index.
fn allocation_row(row: PgRow) -> Result<AllocationRow, sqlx::Error> {
    Ok(AllocationRow {
        stream_id: night_stream_id(&row)?,
        reservation_id: row.try_get_unchecked(3)?,
        rooms: row.try_get_unchecked(4)?,
        expires_at: row.try_get_unchecked(5)?,
        block_code: row.try_get_unchecked(6)?,
    })
}

/// Checks 2 and 3: replays every stream and merges the replayed nights with the inline tables.
async fn check_streams(
    mut replay_tx: Transaction<'static, Postgres>,
    mut nights_tx: Transaction<'static, Postgres>,
    mut allocations_tx: Transaction<'static, Postgres>,
    pending_nights: HashSet<String>,
    compacted_before: Option<chrono::NaiveDate>,
    checkpoint: Checkpoint,
    walked: &AtomicU64,
) -> anyhow::Result<Findings> {
    let mut findings = Findings::default();
    // The event log itself (check 1 proves it is what the chain recorded), up to the
    // audit checkpoint, in its primary key's order: its stream columns are in the "C"
    // collation, so that order is byte order, as the inline tables are read.
    let mut events = sqlx::query(
        "SELECT global_position, aggregate_type, aggregate_id, sequence, event_type,
                event_version, payload::text
           FROM events
          WHERE (transaction_id, global_position) <= ($1::text::xid8, $2)
          ORDER BY aggregate_type, aggregate_id, sequence",
    )
    .bind(checkpoint.transaction_id.to_string())
    .bind(checkpoint.position)
    .fetch(&mut *replay_tx);
    let mut inline = InlineNights {
        nights: Sorted::open(sqlx::query(night_rows()).fetch(&mut *nights_tx), night_row).await?,
        allocations: Sorted::open(
            sqlx::query(allocation_rows()).fetch(&mut *allocations_tx),
            allocation_row,
        )
        .await?,
        pending: pending_nights,
        compacted_before,
    };

    // The stream being replayed; one value restarted for each stream, keeping its
    // buffers (most of a chain's streams are nights of one event).
    let mut current: Option<StreamReplay> = None;
    // A stream is reported once: after its first illegal event the state is suspect,
    // and what follows would mostly repeat the same problem.
    let mut broken = false;
    while let Some(row) = events.try_next().await? {
        walked.fetch_add(1, Ordering::Relaxed);
        // Columns by index, their types unchecked (the SELECT above fixes them; a
        // mismatch is a decode error, not a wrong value): this loop runs once per event.
        let position: i64 = row.try_get_unchecked(0)?;
        let aggregate_type: &str = row.try_get_unchecked(1)?;
        let aggregate_id: &str = row.try_get_unchecked(2)?;
        let stream = match &mut current {
            Some(s) if s.aggregate_type == aggregate_type && s.aggregate_id == aggregate_id => s,
            Some(done) => {
                inline.finish(done, &mut findings).await?;
                done.restart(aggregate_type, aggregate_id);
                broken = false;
                done
            }
            None => current.insert(StreamReplay::new(aggregate_type, aggregate_id)),
        };
        let sequence: i64 = row.try_get_unchecked(3)?;
        let event_type: &str = row.try_get_unchecked(4)?;
        let event_version: &str = row.try_get_unchecked(5)?;
        let payload: &str = row.try_get_unchecked(6)?;
        if let Err(problem) = stream.apply(sequence, event_type, event_version, payload) {
            if !broken {
                findings.report(
                    Some(position),
                    format!(
                        "position {position} ({aggregate_type} {aggregate_id} #{sequence}): {problem}"
                    ),
                );
            }
            broken = true;
        }
    }
    if let Some(done) = current.take() {
        inline.finish(&done, &mut findings).await?;
    }
    inline.rest(&mut findings).await?;
    Ok(findings)
}

/// The inline night tables, read alongside the replay.
struct InlineNights<'c> {
    nights: Sorted<'c, NightRow>,
    allocations: Sorted<'c, AllocationRow>,
    /// Nights with events the audit log has not copied yet: not compared.
    pending: HashSet<String>,
    /// Nights before this date may have had their confirmed allocations compacted
    /// away: their allocations are not compared (their counters still are).
    compacted_before: Option<chrono::NaiveDate>,
}

impl InlineNights<'_> {
    /// Compares a replayed stream (if it is a night) with its rows, reporting the rows of
    /// nights that sort before it as rows without events.
    async fn finish(
        &mut self,
        stream: &StreamReplay,
        findings: &mut Findings,
    ) -> anyhow::Result<()> {
        let Some(night) = stream.night() else {
            return Ok(());
        };
        let id = stream.aggregate_id.as_str();
        self.skip_before(Some(id), findings).await?;
        let row = match &self.nights.next {
            Some(row) if row.stream_id == id => self.nights.advance().await?,
            _ => None,
        };
        let mut allocations = Vec::new();
        while self
            .allocations
            .next
            .as_ref()
            .is_some_and(|a| a.stream_id == id)
        {
            if let Some(a) = self.allocations.advance().await? {
                allocations.push(a);
            }
        }
        if self.pending.contains(id) {
            return Ok(());
        }
        match row {
            None => findings.report(
                None,
                format!("night {id}: has events but no room_nights row"),
            ),
            Some(row) => {
                let differences = compare_night(night, stream.last_sequence, &row);
                if !differences.is_empty() {
                    findings.report(
                        None,
                        format!(
                            "night {id}: room_nights differs from the replayed events: {}",
                            differences.join(", ")
                        ),
                    );
                }
            }
        }
        let compacted = self.compacted_before.is_some_and(|before| {
            aggregates::contract::parse_room_night_stream_id(id).is_ok_and(|key| key.night < before)
        });
        if compacted {
            return Ok(());
        }
        let differences = compare_allocations(night, &allocations);
        if !differences.is_empty() {
            findings.report(
                None,
                format!(
                    "night {id}: room_night_allocations differ from the replayed events: {}",
                    differences.join(", ")
                ),
            );
        }
        Ok(())
    }

    /// Rows left once every stream is replayed have no events.
    async fn rest(&mut self, findings: &mut Findings) -> anyhow::Result<()> {
        self.skip_before(None, findings).await
    }

    /// Consumes the rows of nights sorting before `id` (all of them for `None`): nights
    /// the audit log has no events for.
    async fn skip_before(
        &mut self,
        id: Option<&str>,
        findings: &mut Findings,
    ) -> anyhow::Result<()> {
        let before = |stream_id: &str| id.is_none_or(|id| stream_id < id);
        while self
            .nights
            .next
            .as_ref()
            .is_some_and(|r| before(&r.stream_id))
        {
            if let Some(row) = self.nights.advance().await? {
                if !self.pending.contains(&row.stream_id) {
                    findings.report(
                        None,
                        format!("night {}: room_nights row without events", row.stream_id),
                    );
                }
            }
        }
        let mut last_reported: Option<String> = None;
        while self
            .allocations
            .next
            .as_ref()
            .is_some_and(|a| before(&a.stream_id))
        {
            if let Some(a) = self.allocations.advance().await? {
                let new = last_reported.as_deref() != Some(a.stream_id.as_str());
                if new && !self.pending.contains(&a.stream_id) {
                    findings.report(
                        None,
                        format!(
                            "night {}: room_night_allocations rows without events",
                            a.stream_id
                        ),
                    );
                    last_reported = Some(a.stream_id);
                }
            }
        }
        Ok(())
    }
}

/// The fields of a `room_nights` row that differ from the replayed night.
fn compare_night(night: &RoomNight, last_sequence: i64, row: &NightRow) -> Vec<String> {
    let levels = night.levels();
    let replayed = [
        ("total_rooms", levels.map(|l| i64::from(l.total_rooms()))),
        (
            "overbooking_allowance",
            levels.map(|l| i64::from(l.overbooking_allowance())),
        ),
        ("rate_cents", levels.map(|l| l.rate_cents().get())),
        ("confirmed", Some(i64::from(night.confirmed()))),
        ("held", Some(i64::from(night.held()))),
        ("blocked", Some(i64::from(night.blocked()))),
        ("version", Some(last_sequence)),
    ];
    let stored = [
        i64::from(row.total_rooms),
        i64::from(row.allowance),
        row.rate_cents,
        i64::from(row.confirmed),
        i64::from(row.held),
        i64::from(row.blocked),
        row.version,
    ];
    let mut differences: Vec<String> = replayed
        .iter()
        .zip(stored)
        .filter(|((_, r), s)| *r != Some(*s))
        .map(|((name, r), s)| match r {
            Some(r) => format!("{name} {s} (replayed: {r})"),
            None => format!("{name} {s} (replayed: no inventory)"),
        })
        .collect();
    // The blocks' rooms and pickups, as the night's JSON stores them.
    let stored_blocks: Option<BTreeMap<aggregates::BlockCode, aggregates::room_night::BlockNight>> =
        match &row.blocks {
            None => Some(BTreeMap::new()),
            Some(json) => serde_json::from_value(json.clone()).ok(),
        };
    if stored_blocks.as_ref() != Some(night.blocks()) {
        differences.push(format!(
            "blocks {} (replayed: {})",
            row.blocks
                .as_ref()
                .map_or_else(|| "none".to_owned(), |b| b.to_string()),
            serde_json::to_string(night.blocks()).unwrap_or_default()
        ));
    }
    differences
}

/// Allocation rows that differ from the replayed holds and confirmations of a night.
fn compare_allocations(night: &RoomNight, rows: &[AllocationRow]) -> Vec<String> {
    // As the write side stores them: a hold (with its expiry) wins over a confirmation.
    // Expiries compared in microseconds, PostgreSQL's resolution: the rows were written
    // from the same events, truncated.
    let micros = |t: Option<DateTime<Utc>>| t.map(|t| t.timestamp_micros());
    let mut expected: BTreeMap<Uuid, (i64, Option<DateTime<Utc>>)> = BTreeMap::new();
    for (id, rooms) in night.confirmations() {
        expected.insert(id.as_uuid(), (i64::from(*rooms), None));
    }
    for (id, hold) in night.holds() {
        expected.insert(id.as_uuid(), (i64::from(hold.rooms), Some(hold.expires_at)));
    }
    let mut differences = Vec::new();
    for row in rows {
        let id = aggregates::ReservationId::from_uuid(row.reservation_id);
        let replayed_block = night.block_of(&id).map(|c| c.as_str());
        if expected.contains_key(&row.reservation_id) && row.block_code.as_deref() != replayed_block
        {
            differences.push(format!(
                "reservation {id} is taken from {} (replayed: {})",
                row.block_code.as_deref().unwrap_or("general sale"),
                replayed_block.unwrap_or("general sale")
            ));
        }
        let stored = (i64::from(row.rooms), row.expires_at);
        match expected.remove(&row.reservation_id) {
            Some(replayed) if replayed.0 == stored.0 && micros(replayed.1) == micros(stored.1) => {}
            Some(replayed) => differences.push(format!(
                "reservation {} has {} (replayed: {})",
                row.reservation_id,
                describe(stored),
                describe(replayed)
            )),
            None => differences.push(format!(
                "reservation {} has {} (replayed: nothing)",
                row.reservation_id,
                describe(stored)
            )),
        }
    }
    for (id, replayed) in expected {
        differences.push(format!(
            "reservation {id} has no row (replayed: {})",
            describe(replayed)
        ));
    }
    differences
}

fn describe((rooms, expires_at): (i64, Option<DateTime<Utc>>)) -> String {
    match expires_at {
        Some(t) => format!(
            "{rooms} room(s) held until {}",
            t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
        ),
        None => format!("{rooms} room(s) confirmed"),
    }
}

/// Check 4: the terms of every sale (restrictions, plan, occupancy) as the history
/// stood before its transaction; see [`TermsReplay`]. Fed by the chain's walk (commit
/// order) with the events it reads: every hotel event and those of three types
/// (`RestrictionsSet`, `ReservationHeld`, `DatesChanged`), a small part of the log. A
/// `DatesChanged` comes with the earlier events of its reservation's stream, read on
/// this check's own connection (date changes are rare and their streams short, so the
/// check keeps no reservation of its own). (An upcaster that renames one of these types
/// must add the old name to [`SaleTerms::reads`].)
struct SaleTerms {
    replay: TermsReplay,
    findings: Findings,
}

/// The earlier events of a reservation's stream, for a `DatesChanged`.
const EARLIER_EVENTS: &str = "SELECT sequence, event_type, event_version, payload::text
       FROM events
      WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence < $3
      ORDER BY sequence";

impl SaleTerms {
    fn new() -> Self {
        Self {
            replay: TermsReplay::new(),
            findings: Findings::default(),
        }
    }

    /// Whether the check reads an event of this stream and type.
    fn reads(aggregate_type: &str, event_type: &str) -> bool {
        aggregate_type == AggregateType::Hotel.as_str()
            || event_type == RoomNightEventType::RestrictionsSet.as_str()
            || event_type == ReservationEventType::ReservationHeld.as_str()
            || event_type == ReservationEventType::DatesChanged.as_str()
    }

    /// Applies one row of the chain's walk (its columns: position, transaction,
    /// stream, sequence, type, version, payload as text), if the check reads it.
    async fn feed(&mut self, row: &PgRow, conn: &mut PgConnection) -> anyhow::Result<()> {
        let aggregate_type: &str = row.try_get_unchecked(2)?;
        let event_type: &str = row.try_get_unchecked(5)?;
        if !Self::reads(aggregate_type, event_type) {
            return Ok(());
        }
        let position: i64 = row.try_get_unchecked(0)?;
        let transaction_id: i64 = row.try_get_unchecked(1)?;
        let aggregate_id: &str = row.try_get_unchecked(3)?;
        let sequence: i64 = row.try_get_unchecked(4)?;
        let earlier: Vec<(i64, String, String, String)> =
            if event_type == ReservationEventType::DatesChanged.as_str() {
                sqlx::query_as(EARLIER_EVENTS)
                    .bind(aggregate_type)
                    .bind(aggregate_id)
                    .bind(sequence)
                    .fetch_all(&mut *conn)
                    .await?
            } else {
                Vec::new()
            };
        let raw = RawEvent {
            aggregate_type,
            aggregate_id,
            sequence,
            event_type,
            event_version: row.try_get_unchecked(6)?,
            payload: RawPayload::Text(row.try_get_unchecked(7)?),
        };
        let earlier = earlier
            .iter()
            .map(|(sequence, event_type, event_version, payload)| RawEvent {
                aggregate_type,
                aggregate_id,
                sequence: *sequence,
                event_type,
                event_version,
                payload: RawPayload::Text(payload),
            });
        if let Err(problem) = self.replay.apply(transaction_id, raw, earlier) {
            self.findings.report(
                Some(position),
                format!(
                    "position {position} ({aggregate_type} {aggregate_id} #{sequence}): {problem}"
                ),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_keep_the_smallest_position_and_cap_the_list() {
        let mut a = Findings::default();
        for p in (10..(MAX_PROBLEMS as i64 + 20)).rev() {
            a.report(Some(p), format!("p{p}"));
        }
        let mut b = Findings::default();
        b.report(None, "table".to_owned());
        b.report(Some(3), "p3".to_owned());
        let merged = Findings::merge(vec![a, b]);
        assert_eq!(merged.first_bad, Some(3));
        assert_eq!(merged.total, MAX_PROBLEMS + 12);
        let lines = merged.into_lines();
        assert_eq!(lines.len(), MAX_PROBLEMS + 1);
        assert_eq!(lines[0], "p3");
        assert!(lines[MAX_PROBLEMS].starts_with("... and"), "{lines:?}");
    }
}
