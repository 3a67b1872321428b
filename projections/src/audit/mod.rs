//! The audit log: an append-only hash chain over the event log, and `verify`, which
//! checks it and replays the whole history against every invariant.
//!
//! **Why.** Anyone with SQL access can change a row of `events`. The [`AuditLog`]
//! projection records every event, in commit order, in `audit_log` (a trigger refuses
//! UPDATE, DELETE and TRUNCATE there): what names it (position, commit, stream,
//! sequence, type) and a hash chaining it to the row before, `SHA-256(previous hash ||
//! canonical bytes of the event)`, from 32 zero bytes. The event itself is not copied
//! (that copy was the largest table; see docs/scaling.md): verify recomputes every hash
//! from the event as it is now, so changing, removing or inserting an event or an audit
//! row afterwards no longer matches, and [`verify()`] says where.
//!
//! **Canonical bytes.** A deterministic JSON document of the event's columns (see
//! [`canonical_bytes`]): fixed field order, and every JSON object inside the payload and
//! metadata written with its keys sorted. PostgreSQL's `jsonb` does not keep the key
//! order it was given, and serde_json's map order depends on a cargo feature
//! (`preserve_order`) any crate in the build may switch on, so the sorting is done here,
//! explicitly: an event read back from `jsonb` always gives the same bytes.
//!
//! **Verify** streams every table it reads (rows arrive through `fetch`, never all at
//! once) and keeps at most one stream's state in memory, besides the catalog and the
//! restrictions of the nights that carry any (check 4):
//! 1. the chain, by `seq`, merged with `events` in commit order up to the audit
//!    checkpoint: `seq` contiguous from 1, each row naming its event, each hash equal to
//!    the hash of the row before and the event as it is now;
//! 2. the streams of `events` (check 1 proved them to be what the chain recorded), in
//!    `(aggregate_type, aggregate_id, sequence)` order (the primary key, in the "C"
//!    collation): sequences contiguous from 1, every event legal in the state before it
//!    (see [`replay`]), the night invariant after every event;
//! 3. every replayed night against its `room_nights` row and its
//!    `room_night_allocations` rows, by merging sorted streams (both sides in byte order
//!    of the stream id), so rows missing on either side show up too;
//! 4. every sale (`ReservationHeld`, `DatesChanged`) against the terms it was sold on,
//!    in commit order: the restrictions of its nights, its hotel's rate plan and the
//!    room type's occupancy, as the transactions before its own left them (see
//!    [`replay::TermsReplay`]), fed by check 1's walk of the log;
//! 5. within check 1's merge: an event without its audit row, and an audit row without
//!    its event.
//!
//! All five read one database snapshot (exported from the first connection and shared
//! by the others), so a booking that commits while verify runs cannot make the tables
//! disagree with each other. Nights touched by events the audit log has not copied yet
//! (they committed after its checkpoint) are not compared with `room_nights`; callers
//! bring the log up to date first ([`crate::catch_up()`]) so that set is empty or tiny.
//!
//! The module is split along the two halves: [`chain`] writes the log (the canonical
//! form, the hash, the append), [`verify`](mod@verify) reads it back and checks it, and
//! [`replay`] holds the per-event rules verify replays the streams and the sales
//! against.

pub mod chain;
pub mod replay;
pub mod verify;

use sqlx::PgConnection;

use crate::log::StoredEvent;
use crate::runner::Projection;

pub use chain::{append, canonical_bytes, chain_hash, EventFields};
pub use verify::{
    catch_up_and_verify, catch_up_and_verify_with, verify, verify_with, VerifyProgress,
    VerifyReport,
};

/// The projection's name: its checkpoint row and its leadership lock.
pub const NAME: &str = "audit_log";

/// `prev_hash` of the first row.
pub const GENESIS_HASH: [u8; 32] = [0; 32];

/// At most this many problems are listed in a report (all are counted).
pub const MAX_PROBLEMS: usize = 100;

/// The audit log projection. Append-only: it cannot be cleared or rebuilt, because a
/// rebuilt log would hash whatever `events` holds *now*, which is exactly what the log
/// exists to check.
#[derive(Debug, Default, Clone, Copy)]
pub struct AuditLog;

impl AuditLog {
    pub fn new() -> Self {
        Self
    }
}

impl Projection for AuditLog {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn apply(
        &mut self,
        tx: &mut PgConnection,
        _generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        append(tx, batch).await?;
        Ok(())
    }

    async fn clear(&mut self, conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        if generation != 1 {
            anyhow::bail!(
                "the audit log is append-only and cannot be rebuilt (asked to fill generation \
                 {generation}): a rebuilt log would copy the event log as it is now, which is \
                 what the audit log exists to check"
            );
        }
        let empty: bool = sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM audit_log)")
            .fetch_one(&mut *conn)
            .await?;
        if !empty {
            anyhow::bail!(
                "the audit log is append-only and already holds rows; it cannot be cleared"
            );
        }
        Ok(())
    }
}
