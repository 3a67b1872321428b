//! The PostgreSQL read models for look-ups and analytics.
//!
//! - [`ReservationsView`] (`reservations_view`): one row per reservation, for look-ups by
//!   channel, by guest email, and by hotel and date, without touching the write side.
//! - [`Occupancy`] (`occupancy`): per (hotel, room type, night) the inventory, rooms
//!   confirmed and held, revenue, holds placed and lapsed, and cancellations.
//!
//! Both write through the transaction the runner saves the checkpoint in, so each event
//! is applied exactly once; on top of that every row remembers the sequence of the last
//! event of its stream it applied (`version`) and ignores anything at or below it, as the
//! design asks of every projection. A batch is applied in three steps — load the rows
//! the batch touches (one query per table), apply the events in memory in commit order
//! (so several events of one stream in one batch compose), write back what changed (one
//! statement per table) — rather than one round trip per event: a rebuild replays the
//! whole history in batches of hundreds. One shortcut for occupancy: a night whose
//! events in the batch are all new holds (most nights under a booking load) is updated
//! by their sums in one statement without being loaded, guarded by its `version`
//! standing exactly before the first of them; any night the guard refuses goes the
//! three-step way.
//!
//! Revenue is exact under rate changes: a confirmed room-night earns the night's rate at
//! the moment it is confirmed (`HoldConfirmed`) or booked (`RoomsBooked`), and the amount
//! is stored per (night, reservation) in `occupancy_confirmations`, so releasing it
//! subtracts exactly what was added, whatever the rate is by then.
//!
//! A release counts as a cancellation when the command that wrote it was a cancellation.
//! Night streams do not say why rooms came back (a cancel, a change of dates, a declined
//! payment all release), and the reservation's own `ReservationCancelled` may lie in
//! another batch than the releases it caused; but every event carries the metadata of the
//! command that wrote it (`{"command": "cancel", ...}`, the storage name of
//! [`aggregates::CommandName::Cancel`]), which is the same for all of a transaction's
//! events and does not depend on where batches are cut.
//!
//! Both read the typed events the log decoded ([`crate::log::StoredEvent::typed_for`])
//! and match on them without a wildcard: a new event fails to compile here until each
//! projection says what it does with it, and an event the build cannot read fails the
//! batch instead of being skipped.
//!
//! Each projection has its own file ([`reservations_view`], [`occupancy`]): they share
//! the runner, the typed events and the generation they serve, nothing else.

pub mod occupancy;
pub mod reservations_view;

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use sqlx::PgConnection;

pub use occupancy::Occupancy;
pub use reservations_view::{ReservationRow, ReservationsView, LOAD_VIEW_ROWS};

/// Name (and checkpoint row) of the reservations view.
pub const RESERVATIONS_VIEW: &str = "reservations_view";
/// Name (and checkpoint row) of the occupancy and revenue projection.
pub const OCCUPANCY: &str = "occupancy";

/// The generation a projection serves and when its checkpoint last moved (`None` before
/// it first ran), read on `conn`. Readers call this inside the read-only transaction
/// they then read the rows in: one snapshot sees the generation and its rows together,
/// so a rebuild that switches and deletes the old generation meanwhile cannot leave the
/// reader looking at an emptied generation.
pub async fn served_state(
    conn: &mut PgConnection,
    name: &str,
) -> Result<(i32, Option<DateTime<Utc>>), sqlx::Error> {
    let row: Option<(i32, DateTime<Utc>)> =
        sqlx::query_as("SELECT generation, updated_at FROM projection_checkpoints WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(match row {
        Some((generation, updated_at)) => (generation, Some(updated_at)),
        None => (1, None),
    })
}

pub(crate) fn to_i32(value: i64, what: &str) -> anyhow::Result<i32> {
    i32::try_from(value).map_err(|_| anyhow!("{what} = {value} does not fit an integer column"))
}
