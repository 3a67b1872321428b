//! Writing the audit log: the canonical bytes of an event, the hash that chains it to
//! the row before, and [`append`], which adds a batch of events to the chain inside the
//! projection's transaction. A row names its event (position, commit, stream, type) and
//! holds the chain hash of the event as it was read; the event itself stays in `events`
//! only, and verify recomputes each hash from it.
//!
//! Kept apart from [`super::verify`](mod@super::verify): this half runs in the runner, once per batch, and
//! is what a change to the chain's format must change; verify only reads it back.

use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

use chrono::{DateTime, SecondsFormat, Utc};
use columns::{columns, Columns, Statement};
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::PgConnection;

use super::GENESIS_HASH;
use crate::log::StoredEvent;

/// Tag of the canonical form, hashed with every event so a future change of the form is
/// a new tag rather than a silent reinterpretation of old hashes.
const CANONICAL_FORMAT: &str = "audit-v1";

/// The columns of one event that the chain covers.
#[derive(Debug, Clone, Copy)]
pub struct EventFields<'a> {
    pub position: i64,
    pub transaction_id: i64,
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub sequence: i64,
    pub event_type: &'a str,
    pub event_version: &'a str,
    /// The JSON columns as PostgreSQL's text of them (any key order and spacing: the
    /// canonical form does not depend on either).
    pub payload: &'a str,
    pub metadata: &'a str,
    pub recorded_at: DateTime<Utc>,
}

impl<'a> From<&'a StoredEvent> for EventFields<'a> {
    fn from(e: &'a StoredEvent) -> Self {
        Self {
            position: e.position,
            transaction_id: e.transaction_id,
            aggregate_type: &e.aggregate_type,
            aggregate_id: &e.aggregate_id,
            sequence: e.sequence,
            event_type: &e.event_type,
            event_version: &e.event_version,
            payload: e.payload.get(),
            metadata: e.metadata.get(),
            recorded_at: e.recorded_at,
        }
    }
}

/// The canonical bytes of an event: a JSON object with the fields in a fixed order,
/// nested objects with sorted keys, no insignificant whitespace, and `recorded_at` as
/// RFC 3339 UTC with microseconds (PostgreSQL's resolution).
pub fn canonical_bytes(event: &EventFields<'_>) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256 + event.payload.len() + event.metadata.len());
    write_canonical_event(event, &mut out, &mut Scratch::default())?;
    Ok(out)
}

/// [`canonical_bytes`], appended to `out`, with the one-pass writer's buffers in
/// `scratch`.
fn write_canonical_event(
    event: &EventFields<'_>,
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"format\":");
    serde_json::to_writer(&mut *out, CANONICAL_FORMAT)?;
    out.extend_from_slice(b",\"position\":");
    serde_json::to_writer(&mut *out, &event.position)?;
    out.extend_from_slice(b",\"transaction_id\":");
    serde_json::to_writer(&mut *out, &event.transaction_id)?;
    out.extend_from_slice(b",\"aggregate_type\":");
    serde_json::to_writer(&mut *out, event.aggregate_type)?;
    out.extend_from_slice(b",\"aggregate_id\":");
    serde_json::to_writer(&mut *out, event.aggregate_id)?;
    out.extend_from_slice(b",\"sequence\":");
    serde_json::to_writer(&mut *out, &event.sequence)?;
    out.extend_from_slice(b",\"event_type\":");
    serde_json::to_writer(&mut *out, event.event_type)?;
    out.extend_from_slice(b",\"event_version\":");
    serde_json::to_writer(&mut *out, event.event_version)?;
    out.extend_from_slice(b",\"recorded_at\":\"");
    write_rfc3339_micros(event.recorded_at, out);
    out.push(b'"');
    out.extend_from_slice(b",\"payload\":");
    write_canonical_text(event.payload, out, scratch)?;
    out.extend_from_slice(b",\"metadata\":");
    write_canonical_text(event.metadata, out, scratch)?;
    out.push(b'}');
    Ok(())
}

/// `at` as `to_rfc3339_opts(SecondsFormat::Micros, true)` writes it
/// (`2027-06-01T12:00:00.000000Z`, nothing to escape in it), without its `String`
/// and chrono's formatting machinery: this runs once per event of the log, in verify
/// and in the runner. Years outside 0 to 9999 and leap seconds, which chrono writes its
/// own way, go through chrono.
fn write_rfc3339_micros(at: DateTime<Utc>, out: &mut Vec<u8>) {
    use chrono::{Datelike, Timelike};
    let year = at.year();
    let nanos = at.nanosecond();
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        out.extend_from_slice(at.to_rfc3339_opts(SecondsFormat::Micros, true).as_bytes());
        return;
    }
    // Each field as its digits, most significant first (the year is at most 9999).
    let digits = |out: &mut Vec<u8>, value: u32, width: u32| {
        for place in (0..width).rev() {
            let digit = (value / 10_u32.pow(place)) % 10;
            out.push(b'0' + u8::try_from(digit).unwrap_or(0));
        }
    };
    let fields = [
        (year.unsigned_abs(), 4, b'-'),
        (at.month(), 2, b'-'),
        (at.day(), 2, b'T'),
        (at.hour(), 2, b':'),
        (at.minute(), 2, b':'),
        (at.second(), 2, b'.'),
        (nanos / 1_000, 6, b'Z'),
    ];
    for (value, width, then) in fields {
        digits(out, value, width);
        out.push(then);
    }
}

/// As [`write_canonical`] of the `Value` that `text` parses to, byte for byte, without
/// building it: objects are read as their keys and the raw text of each value, strings
/// borrowed from `text`; what cannot be borrowed (a key or string with an escape in it)
/// and every other scalar goes through `Value`, so numbers and escapes are written
/// exactly as the `Value` path writes them (the chain's first rows were hashed from
/// `Value`s; no reader builds one any more, see docs/scaling.md, `double-decode`).
///
/// Most payloads take a faster road first ([`Canonical`]): one pass over the bytes,
/// copying what is already canonical (strings without escapes, integers, literals) and
/// sorting object keys that need no decoding; anything else (an escape, a fraction, an
/// exponent, a repeated key) sends the whole text down the road above, so both write the
/// same bytes (a property test holds them to it).
fn write_canonical_text(
    text: &str,
    out: &mut Vec<u8>,
    scratch: &mut Scratch,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    // A text the faster road gave up on may have left members behind.
    scratch.members.clear();
    let mut fast = Canonical {
        bytes: text.as_bytes(),
        at: 0,
        scratch,
    };
    if fast.value(out).is_some() && fast.rest_is_blank() {
        return Ok(());
    }
    out.truncate(start);
    write_canonical_text_slowly(text, out)
}

/// The one-pass canonical writer of JSON text: `None` when the text needs the slower
/// road (see [`write_canonical_text`]).
struct Canonical<'t, 's> {
    bytes: &'t [u8],
    at: usize,
    scratch: &'s mut Scratch,
}

/// Buffers the one-pass writer keeps from one text to the next, so that writing an
/// event allocates nothing once they have grown to a payload's size (verify writes
/// every event of the log).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The members of the objects being written, innermost last: where each key is in
    /// the text and where its value, already canonical, was written in the output.
    members: Vec<Member>,
    /// An object's values while they are put in their keys' order.
    values: Vec<u8>,
}

/// One member of an object: its key (quotes included) in the text, its canonical value
/// in the output, both as byte ranges.
#[derive(Debug, Clone, Copy)]
struct Member {
    key: (usize, usize),
    value: (usize, usize),
}

impl<'t> Canonical<'t, '_> {
    fn skip_blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn rest_is_blank(&mut self) -> bool {
        self.skip_blank();
        self.at == self.bytes.len()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.skip_blank();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// A string without escapes or control characters, quotes included.
    fn string(&mut self) -> Option<&'t [u8]> {
        let start = self.at;
        if self.bytes.get(self.at) != Some(&b'"') {
            return None;
        }
        self.at += 1;
        loop {
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return self.bytes.get(start..self.at);
                }
                b'\\' => return None,
                c if c < 0x20 => return None,
                _ => self.at += 1,
            }
        }
    }

    /// An integer serde_json reads as one (an `i64` or a `u64`), written as it reads.
    fn integer(&mut self) -> Option<&'t [u8]> {
        let start = self.at;
        let negative = self.bytes.get(self.at) == Some(&b'-');
        if negative {
            self.at += 1;
        }
        let digits = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let number = self.bytes.get(start..self.at)?;
        let first = self.bytes.get(digits..self.at)?;
        let plain = match first {
            [] => false,
            [b'0'] => !negative,
            [b'0', ..] => false,
            _ => true,
        };
        let follows = self.bytes.get(self.at);
        if !plain || matches!(follows, Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let text = std::str::from_utf8(number).ok()?;
        let fits = if negative {
            text.parse::<i64>().is_ok()
        } else {
            text.parse::<u64>().is_ok()
        };
        fits.then_some(number)
    }

    fn value(&mut self, out: &mut Vec<u8>) -> Option<()> {
        self.skip_blank();
        match *self.bytes.get(self.at)? {
            b'{' => {
                self.at += 1;
                // Each value is written at the end of `out` as it comes; then the values
                // are set aside and written back behind their keys, in the keys' order.
                let base = self.scratch.members.len();
                let mark = out.len();
                if self.eat(b'}').is_none() {
                    loop {
                        self.skip_blank();
                        let key_start = self.at;
                        self.string()?;
                        let key = (key_start, self.at);
                        self.eat(b':')?;
                        let value_start = out.len() - mark;
                        self.value(out)?;
                        self.scratch.members.push(Member {
                            key,
                            value: (value_start, out.len() - mark),
                        });
                        if self.eat(b',').is_none() {
                            self.eat(b'}')?;
                            break;
                        }
                    }
                }
                let bytes = self.bytes;
                let key = |m: &Member| bytes.get(m.key.0..m.key.1).unwrap_or_default();
                let members = self.scratch.members.get_mut(base..)?;
                // Keys without escapes compare as their bytes (quotes alike on both).
                members.sort_unstable_by(|a, b| key(a).cmp(key(b)));
                if members
                    .windows(2)
                    .any(|pair| key(&pair[0]) == key(&pair[1]))
                {
                    return None;
                }
                let values = &mut self.scratch.values;
                values.clear();
                values.extend_from_slice(out.get(mark..)?);
                out.truncate(mark);
                out.push(b'{');
                for (i, member) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(key(member));
                    out.push(b':');
                    out.extend_from_slice(values.get(member.value.0..member.value.1)?);
                }
                out.push(b'}');
                self.scratch.members.truncate(base);
            }
            b'[' => {
                self.at += 1;
                out.push(b'[');
                if self.eat(b']').is_none() {
                    let mut first = true;
                    loop {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        self.value(out)?;
                        if self.eat(b',').is_none() {
                            self.eat(b']')?;
                            break;
                        }
                    }
                }
                out.push(b']');
            }
            b'"' => out.extend_from_slice(self.string()?),
            b't' | b'f' | b'n' => {
                let literal: &[u8] = [&b"true"[..], b"false", b"null"]
                    .into_iter()
                    .find(|l| self.bytes.get(self.at..self.at + l.len()) == Some(*l))?;
                self.at += literal.len();
                out.extend_from_slice(literal);
            }
            _ => out.extend_from_slice(self.integer()?),
        }
        Some(())
    }
}

/// [`write_canonical_text`] through serde: every case, and the reference the faster road
/// is held to.
fn write_canonical_text_slowly(text: &str, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match text.trim_start().as_bytes().first() {
        Some(b'{') => match serde_json::from_str::<BTreeMap<&str, &RawValue>>(text) {
            Ok(map) => {
                out.push(b'{');
                for (i, (key, item)) in map.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    serde_json::to_writer(&mut *out, key)?;
                    out.push(b':');
                    write_canonical_text(item.get(), out, &mut Scratch::default())?;
                }
                out.push(b'}');
                Ok(())
            }
            Err(_) => write_canonical(&serde_json::from_str(text)?, out),
        },
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text)?;
            out.push(b'[');
            for (i, item) in items.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical_text(item.get(), out, &mut Scratch::default())?;
            }
            out.push(b']');
            Ok(())
        }
        Some(b'"') => match serde_json::from_str::<&str>(text) {
            Ok(borrowed) => serde_json::to_writer(&mut *out, borrowed),
            Err(_) => serde_json::to_writer(&mut *out, &serde_json::from_str::<Value>(text)?),
        },
        _ => serde_json::to_writer(&mut *out, &serde_json::from_str::<Value>(text)?),
    }
}

/// Writes `value` as JSON with every object's keys in byte order.
fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Value::Object(map) => {
            // serde_json's default map is already sorted; only sort (allocating) when a
            // build enables `preserve_order`.
            let sorted = map
                .keys()
                .zip(map.keys().skip(1))
                .all(|(a, b)| a.as_bytes() < b.as_bytes());
            if sorted {
                write_object(map.iter(), out)?;
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                write_object(entries.into_iter(), out)?;
            }
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}

fn write_object<'v>(
    entries: impl Iterator<Item = (&'v String, &'v Value)>,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    out.push(b'{');
    for (i, (key, item)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        write_canonical(item, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// `SHA-256(prev_hash || canonical bytes)`.
pub fn chain_hash(
    prev_hash: &[u8],
    event: &EventFields<'_>,
) -> Result<[u8; 32], serde_json::Error> {
    ChainHasher::default().hash(prev_hash, event)
}

/// [`chain_hash`] for one event after another: it keeps its buffers, so hashing an
/// event allocates nothing once they have grown to an event's size.
#[derive(Debug, Default)]
pub struct ChainHasher {
    canonical: Vec<u8>,
    scratch: Scratch,
}

impl ChainHasher {
    /// `SHA-256(prev_hash || canonical bytes)`, as [`chain_hash`].
    pub fn hash(
        &mut self,
        prev_hash: &[u8],
        event: &EventFields<'_>,
    ) -> Result<[u8; 32], serde_json::Error> {
        self.canonical.clear();
        write_canonical_event(event, &mut self.canonical, &mut self.scratch)?;
        let mut hasher = Sha256::new();
        hasher.update(prev_hash);
        hasher.update(&self.canonical);
        Ok(hasher.finalize().into())
    }
}

/// Appends `batch` (commit order) to the audit log within the caller's transaction, and
/// returns how many rows it added. Events already in the log are skipped, so applying a
/// batch twice changes nothing.
pub async fn append(conn: &mut PgConnection, batch: &[StoredEvent]) -> anyhow::Result<usize> {
    if batch.is_empty() {
        return Ok(0);
    }
    // One appender at a time: two would both extend the same head (the primary key on
    // `seq` would refuse the second, but waiting is cheaper than a failed batch).
    // Readers are not blocked.
    sqlx::query("LOCK TABLE audit_log IN SHARE ROW EXCLUSIVE MODE")
        .execute(&mut *conn)
        .await?;
    let head: Option<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut *conn)
            .await?;
    let (mut seq, mut prev) = match head {
        None => (0_i64, GENESIS_HASH),
        Some((seq, hash)) => {
            let hash: [u8; 32] = hash
                .try_into()
                .map_err(|_| anyhow::anyhow!("the audit log's last row has a malformed hash"))?;
            (seq, hash)
        }
    };
    let positions: Vec<i64> = batch.iter().map(|e| e.position).collect();
    let present: HashSet<i64> =
        sqlx::query_scalar("SELECT position FROM audit_log WHERE position = ANY($1)")
            .bind(&positions)
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .collect();

    let mut rows = AuditRows::default();
    let mut seen = HashSet::with_capacity(batch.len());
    for event in batch {
        if present.contains(&event.position) || !seen.insert(event.position) {
            continue;
        }
        let hash = chain_hash(&prev, &EventFields::from(event))?;
        seq += 1;
        rows.push(seq, event, hash);
        prev = hash;
    }
    let added = rows.seq.len();
    if added > 0 {
        // The row names the event (its position and stream) and holds the chain hash of
        // the event as read: nothing of the payload (see the migration that made it so).
        let sets: [(&str, &dyn Columns); 1] = [("batch", &rows)];
        static SQL: OnceLock<String> = OnceLock::new();
        let sql = SQL.get_or_init(|| INSERT_AUDIT_ROWS.render(&sets));
        Statement::bind(sqlx::query(sql), &sets)
            .execute(&mut *conn)
            .await?;
    }
    Ok(added)
}

columns! {
    /// The rows to insert, as arrays for one insert.
    struct AuditRows<'a> {
        seq: i64 = "bigint",
        position: i64 = "bigint",
        transaction_id: i64 = "bigint",
        aggregate_type: &'a str = "text",
        aggregate_id: &'a str = "text",
        sequence: i64 = "bigint",
        event_type: &'a str = "text",
        hash: Vec<u8> = "bytea",
    }
}

const INSERT_AUDIT_ROWS: Statement = Statement::new(
    "INSERT INTO audit_log (seq, position, transaction_id, aggregate_type, aggregate_id,
            sequence, event_type, hash)
     SELECT batch.seq, batch.position, batch.transaction_id::text::xid8,
            batch.aggregate_type, batch.aggregate_id, batch.sequence, batch.event_type,
            batch.hash
       FROM {batch}",
);

impl<'a> AuditRows<'a> {
    fn push(&mut self, seq: i64, e: &'a StoredEvent, hash: [u8; 32]) {
        self.seq.push(seq);
        self.position.push(e.position);
        self.transaction_id.push(e.transaction_id);
        self.aggregate_type.push(&e.aggregate_type);
        self.aggregate_id.push(&e.aggregate_id);
        self.sequence.push(e.sequence);
        self.event_type.push(&e.event_type);
        self.hash.push(hash.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields<'a>(payload: &'a str, metadata: &'a str) -> EventFields<'a> {
        EventFields {
            position: 42,
            transaction_id: 7,
            aggregate_type: "room_night",
            aggregate_id: "812:3:2027-06-10",
            sequence: 3,
            event_type: "RoomsHeld",
            event_version: "1.0",
            payload,
            metadata,
            recorded_at: DateTime::parse_from_rfc3339("2027-06-01T12:00:00.123456Z")
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn canonical_bytes_do_not_depend_on_key_order() {
        let a = r#"{"RoomsHeld": {"rooms": 1, "reservation_id": "x", "nested": {"b": [1, {"z": 0, "a": 1}], "a": null}}}"#;
        let b = r#"{"RoomsHeld": {"nested": {"a": null, "b": [1, {"a": 1, "z": 0}]}, "reservation_id": "x", "rooms": 1}}"#;
        let metadata = r#"{"command": "hold_stay", "client": "web"}"#;
        let left = canonical_bytes(&fields(a, metadata)).unwrap_or_default();
        let right = canonical_bytes(&fields(b, metadata)).unwrap_or_default();
        assert!(!left.is_empty());
        assert_eq!(left, right);
        let text = String::from_utf8(left).unwrap_or_default();
        assert!(
            text.contains(
                r#""nested":{"a":null,"b":[1,{"a":1,"z":0}]},"reservation_id":"x","rooms":1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#""recorded_at":"2027-06-01T12:00:00.123456Z""#),
            "{text}"
        );
    }

    #[test]
    fn the_hash_covers_the_previous_hash_and_every_field() {
        let metadata = "{}";
        let base = fields(r#"{"RoomsHeld": {"rooms": 1}}"#, metadata);
        let hash = chain_hash(&GENESIS_HASH, &base).unwrap_or_default();
        assert_ne!(hash, [0; 32]);
        assert_ne!(chain_hash(&[1; 32], &base).unwrap_or_default(), hash);
        let changed = r#"{"RoomsHeld": {"rooms": 2}}"#;
        assert_ne!(
            chain_hash(&GENESIS_HASH, &fields(changed, metadata)).unwrap_or_default(),
            hash
        );
        let mut moved = base;
        moved.position = 43;
        assert_ne!(chain_hash(&GENESIS_HASH, &moved).unwrap_or_default(), hash);
        let mut later = base;
        later.recorded_at += chrono::Duration::microseconds(1);
        assert_ne!(chain_hash(&GENESIS_HASH, &later).unwrap_or_default(), hash);
    }

    fn canonical_of_text(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        write_canonical_text(text, &mut out, &mut Scratch::default()).unwrap_or_default();
        out
    }

    fn canonical_of_value(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let value: Value = serde_json::from_str(text).unwrap_or_default();
        write_canonical(&value, &mut out).unwrap_or_default();
        out
    }

    #[test]
    fn the_text_path_writes_what_the_value_path_writes_for_escapes_numbers_and_nesting() {
        for text in [
            r#"{"RoomsHeld": {"rooms": 1, "reservation_id": "x", "expires_at": "2027-06-01T12:00:00Z"}}"#,
            r#"{"b": 1.0, "a": 1e3, "c": -0, "d": 12345678901234567890, "e": 0.1, "f": -1.5e-7}"#,
            r#"{"k\u00e9y": "v\"al\\ue\n", "plain": "caf\u00e9 \ud83d\ude00", "t": "\t"}"#,
            r#"{"z": [3, {"y": null, "x": [true, false]}, "s"], "a": {}}"#,
            r#"{"dup": 1, "dup": 2}"#,
            r#"[1, "two", {"b": 2, "a": 1}]"#,
            r#""just a string""#,
            "42",
            "null",
        ] {
            let value_path = canonical_of_value(text);
            assert!(!value_path.is_empty(), "{text}");
            assert_eq!(
                String::from_utf8_lossy(&canonical_of_text(text)),
                String::from_utf8_lossy(&value_path),
                "{text}"
            );
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// JSON the faster road takes whole: plain strings and keys (no `:` or `,`, so the test
    /// can space it as PostgreSQL does by replacing them), integers, literals.
    fn plain_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            "[a-zA-Z0-9 _.é-]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("[a-zA-Z_é]{1,8}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// What the faster road alone writes of `text`, if it takes it.
    fn fast_road(text: &str) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut scratch = Scratch::default();
        let mut fast = Canonical {
            bytes: text.as_bytes(),
            at: 0,
            scratch: &mut scratch,
        };
        (fast.value(&mut out).is_some() && fast.rest_is_blank()).then_some(out)
    }

    #[test]
    fn a_payload_as_postgresql_prints_it_takes_the_faster_road() {
        let text = r#"{"RoomsHeld": {"rooms": 2, "expires_at": "2027-06-01T12:00:00Z", "reservation_id": "0193f3c6-aaaa", "guest": {"sealed": {"key": "k", "data": "QUJD=="}}, "list": [1, -7, true, null]}}"#;
        let fast = fast_road(text).expect("the faster road takes it");
        assert_eq!(fast, canonical_of_value(text));
        for slower in [
            r#"{"a": 1.5}"#,
            r#"{"a": "x\ny"}"#,
            r#"{"a": 1, "a": 2}"#,
            "-0",
            "01",
        ] {
            assert_eq!(fast_road(slower), None, "{slower}");
        }
    }

    proptest::proptest! {
        /// The timestamp is written as chrono writes it, whatever the instant (leap
        /// seconds and years past 9999 included).
        #[test]
        fn recorded_at_is_written_as_chrono_writes_it(
            seconds in -70_000_000_000_i64..300_000_000_000,
            nanos in 0_u32..2_000_000_000,
        ) {
            if let Some(at) = DateTime::<Utc>::from_timestamp(seconds, nanos) {
                let mut out = Vec::new();
                write_rfc3339_micros(at, &mut out);
                proptest::prop_assert_eq!(
                    String::from_utf8(out).unwrap_or_default(),
                    at.to_rfc3339_opts(SecondsFormat::Micros, true)
                );
            }
        }

        /// Plain JSON, compact, pretty or spaced as PostgreSQL prints it: the faster road
        /// takes it and writes what the `Value` path writes.
        #[test]
        fn the_faster_road_writes_what_the_value_path_writes(value in plain_json()) {
            let compact = serde_json::to_string(&value).unwrap_or_default();
            let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
            let spaced = compact.replace("\":", "\": ").replace(",\"", ", \"");
            let expected = canonical_of_value(&compact);
            for text in [&compact, &pretty, &spaced] {
                proptest::prop_assert_eq!(fast_road(text), Some(expected.clone()), "{}", text);
            }
        }

        /// Whatever JSON PostgreSQL could hand back, in any key order and spacing, the
        /// text path writes the bytes the `Value` path writes: a chain written by the
        /// runners verifies when verify reads the text.
        #[test]
        fn the_text_path_and_the_value_path_agree_on_any_json(value in json_value()) {
            let compact = serde_json::to_string(&value).unwrap_or_default();
            let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
            let expected = canonical_of_value(&compact);
            proptest::prop_assert!(!expected.is_empty());
            proptest::prop_assert_eq!(canonical_of_text(&compact), expected.clone());
            proptest::prop_assert_eq!(canonical_of_text(&pretty), expected);
        }

        /// One hasher kept from event to event (as verify keeps it) hashes each as a
        /// fresh one does, whatever the texts before it left in its buffers: a text
        /// the faster road gave up on halfway, or a larger one.
        #[test]
        fn a_hasher_kept_across_events_hashes_each_as_a_fresh_one(
            values in proptest::collection::vec(json_value(), 1..8),
        ) {
            let mut kept = ChainHasher::default();
            let mut prev = GENESIS_HASH;
            for value in &values {
                let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
                let event = fields(&pretty, r#"{"b": 1, "a": [1.5, "x\ny"]}"#);
                let fresh = chain_hash(&prev, &event).unwrap_or_default();
                proptest::prop_assert_eq!(kept.hash(&prev, &event).unwrap_or_default(), fresh);
                prev = fresh;
            }
        }
    }
}
