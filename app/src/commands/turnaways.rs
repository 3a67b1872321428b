//! Turnaways: the holds the hotel refused because a night was sold out, a restriction
//! closed it, the room type could not take that many guests, or the group block they
//! were booked from had no rooms left. Demand the event log never sees (a refusal
//! appends nothing), kept for revenue analysis and the what-if replays.
//!
//! An analytics log, not the event log: no personal data (no guest, only the stay, the
//! rooms, the room type, the channel and the reason), and nothing reads it to decide
//! anything. So it is written off the request path: a refused hold hands its row to a
//! bounded channel (`try_send`, never waiting) and a task writes the rows in batches of
//! up to [`BATCH`], one statement each. An accepted hold pays nothing. When the channel
//! is full (the database away for long) rows are dropped and counted
//! (`turnaways_dropped_total`); a crash loses at most the batch being gathered.

use std::time::Duration;

use aggregates::booking::HoldRequest;
use aggregates::{HotelId, Rejection, RoomCount, RoomTypeId, StayDates};
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgPool;
use tokio::sync::mpsc;

/// Rows waiting to be written, at most.
const CAPACITY: usize = 10_000;
/// Rows per statement, at most.
const BATCH: usize = 500;
/// How long a batch gathers rows after its first.
const GATHER: Duration = Duration::from_millis(50);

/// Why a hold was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    SoldOut,
    Restricted,
    Occupancy,
    /// The group block the hold was booked from had no rooms left on a night: the
    /// block is full, not the hotel (general sale may have rooms).
    BlockExhausted,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::SoldOut => "sold_out",
            Reason::Restricted => "restricted",
            Reason::Occupancy => "occupancy",
            Reason::BlockExhausted => "block_exhausted",
        }
    }

    /// The turnaway a refusal is, if it is one: demand the hotel could not take, not a
    /// malformed or misdirected request.
    pub fn of(rejection: &Rejection) -> Option<Self> {
        match rejection {
            Rejection::SoldOut { .. } => Some(Reason::SoldOut),
            Rejection::BlockExhausted { .. } => Some(Reason::BlockExhausted),
            Rejection::Restricted { .. } => Some(Reason::Restricted),
            Rejection::OccupancyExceeded { .. } => Some(Reason::Occupancy),
            _ => None,
        }
    }
}

/// One refused request for one room type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turnaway {
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub rooms: i32,
    pub reason: Reason,
    pub channel: String,
    pub refused_at: DateTime<Utc>,
}

/// What a hold asked for, kept while it is decided: no guest, and nothing allocated for
/// a request of one room type (what every hold pays, refused or not).
#[derive(Debug, Clone)]
pub struct Demand {
    hotel_id: HotelId,
    stay: StayDates,
    lines: Vec<(RoomTypeId, RoomCount)>,
    first: (RoomTypeId, RoomCount),
}

impl Demand {
    pub fn of(request: &HoldRequest) -> Self {
        Self {
            hotel_id: request.hotel_id,
            stay: request.stay,
            first: (request.room_type_id, request.rooms),
            lines: request
                .more_lines
                .iter()
                .map(|l| (l.room_type_id, l.rooms))
                .collect(),
        }
    }
}

impl Turnaway {
    /// One row per room type the refused request asked for (a request of several is
    /// refused whole: each was turned away).
    pub fn of(demand: &Demand, reason: Reason, channel: &str, now: DateTime<Utc>) -> Vec<Self> {
        std::iter::once(demand.first)
            .chain(demand.lines.iter().copied())
            .map(|(room_type, rooms)| Turnaway {
                hotel_id: demand.hotel_id.get(),
                room_type_id: room_type.get(),
                start_date: demand.stay.start(),
                end_date: demand.stay.end(),
                rooms: i32::try_from(rooms.get()).unwrap_or(i32::MAX),
                reason,
                channel: channel.to_owned(),
                refused_at: now,
            })
            .collect()
    }
}

/// The sending end: cheap to clone, never waits.
#[derive(Clone, Debug)]
pub struct TurnawayLog {
    tx: mpsc::Sender<Turnaway>,
}

impl TurnawayLog {
    /// A log writing to `pool` from a task on the current runtime; `None` outside one
    /// (a service built without a runtime records no turnaways).
    pub fn start(pool: PgPool) -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = mpsc::channel(CAPACITY);
        runtime.spawn(write_batches(pool, rx));
        Some(Self { tx })
    }

    pub fn record(&self, rows: Vec<Turnaway>) {
        for row in rows {
            if self.tx.try_send(row).is_err() {
                metrics::counter!("turnaways_dropped_total").increment(1);
            }
        }
    }
}

/// Writes what arrives, in batches, until every sender is gone.
async fn write_batches(pool: PgPool, mut rx: mpsc::Receiver<Turnaway>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + GATHER;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(row)) => batch.push(row),
                Ok(None) | Err(_) => break,
            }
        }
        if let Err(e) = insert(&pool, &batch).await {
            tracing::warn!(error = %e, rows = batch.len(), "turnaways could not be written; dropped");
            metrics::counter!("turnaways_dropped_total").increment(batch.len() as u64);
        }
    }
}

async fn insert(pool: &PgPool, batch: &[Turnaway]) -> Result<(), sqlx::Error> {
    let column = |f: fn(&Turnaway) -> i64| batch.iter().map(f).collect::<Vec<_>>();
    sqlx::query(
        "INSERT INTO turnaways
             (hotel_id, room_type_id, start_date, end_date, rooms, reason, channel, refused_at)
         SELECT * FROM UNNEST($1::bigint[], $2::bigint[], $3::date[], $4::date[], $5::int[],
                              $6::text[], $7::text[], $8::timestamptz[])",
    )
    .bind(column(|t| t.hotel_id))
    .bind(column(|t| t.room_type_id))
    .bind(batch.iter().map(|t| t.start_date).collect::<Vec<_>>())
    .bind(batch.iter().map(|t| t.end_date).collect::<Vec<_>>())
    .bind(batch.iter().map(|t| t.rooms).collect::<Vec<_>>())
    .bind(batch.iter().map(|t| t.reason.as_str()).collect::<Vec<_>>())
    .bind(batch.iter().map(|t| t.channel.as_str()).collect::<Vec<_>>())
    .bind(batch.iter().map(|t| t.refused_at).collect::<Vec<_>>())
    .execute(pool)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_demand_the_hotel_could_not_take_is_a_turnaway() {
        let night = NaiveDate::from_ymd_opt(2027, 6, 1).expect("date");
        assert_eq!(
            Reason::of(&Rejection::SoldOut { night }),
            Some(Reason::SoldOut)
        );
        assert_eq!(
            Reason::of(&Rejection::OccupancyExceeded { max_occupancy: 2 }),
            Some(Reason::Occupancy)
        );
        // A full block is not a sold-out night: general sale may have rooms.
        assert_eq!(
            Reason::of(&Rejection::BlockExhausted {
                night,
                remaining: 0
            }),
            Some(Reason::BlockExhausted)
        );
        assert_eq!(Reason::BlockExhausted.as_str(), "block_exhausted");
        assert_eq!(Reason::of(&Rejection::UnknownHotel), None);
        assert_eq!(Reason::of(&Rejection::NoInventory { night }), None);
    }
}
