//! The invariant checks every race ends with: from `room_nights`, against the allocation
//! rows, and by replaying the event log through the aggregates.

use std::collections::{BTreeMap, HashMap};

use aggregates::{
    AggregateType, HotelId, Reservation, ReservationEvent, ReservationStatus, RoomNight,
    RoomNightEvent, RoomNightKey, RoomTypeId,
};
use chrono::{NaiveDate, Utc};
use sqlx::{PgPool, Row};

/// One row of `room_nights`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NightRow {
    pub total_rooms: i32,
    pub allowance: i32,
    pub confirmed: i32,
    pub held: i32,
    /// Rooms set aside for group blocks.
    pub blocked: i32,
    pub version: i64,
}

impl NightRow {
    /// What the night can still sell, by the domain's own rule.
    pub fn rooms_left(&self) -> i64 {
        aggregates::room_night::rooms_left(
            i64::from(self.total_rooms),
            i64::from(self.allowance),
            i64::from(self.confirmed),
            i64::from(self.held) + i64::from(self.blocked),
        )
    }
}

pub async fn night_rows(pool: &PgPool) -> BTreeMap<(i64, i64, NaiveDate), NightRow> {
    sqlx::query(
        "SELECT hotel_id, room_type_id, night, total_rooms, overbooking_allowance,
                confirmed, held, blocked, version FROM room_nights",
    )
    .fetch_all(pool)
    .await
    .expect("room_nights")
    .into_iter()
    .map(|r| {
        (
            (r.get("hotel_id"), r.get("room_type_id"), r.get("night")),
            NightRow {
                total_rooms: r.get("total_rooms"),
                allowance: r.get("overbooking_allowance"),
                confirmed: r.get("confirmed"),
                held: r.get("held"),
                blocked: r.get("blocked"),
                version: r.get("version"),
            },
        )
    })
    .collect()
}

/// Rooms taken (held + confirmed) per night, from `room_nights`.
pub async fn taken(pool: &PgPool, night: NaiveDate) -> i32 {
    sqlx::query_scalar(
        "SELECT coalesce(sum(confirmed + held), 0)::int FROM room_nights WHERE night = $1",
    )
    .bind(night)
    .fetch_one(pool)
    .await
    .expect("taken")
}

/// What a full replay of the event log says.
pub struct Replayed {
    pub nights: BTreeMap<String, RoomNight>,
    pub reservations: BTreeMap<String, Reservation>,
}

/// Replays every stream from the events table through the aggregates, checking that
/// each stream's sequence has no gap and that the invariant holds after every event.
pub async fn replay(pool: &PgPool) -> Replayed {
    let rows = sqlx::query(
        "SELECT aggregate_type, aggregate_id, sequence, payload FROM events
          ORDER BY aggregate_type, aggregate_id, sequence",
    )
    .fetch_all(pool)
    .await
    .expect("events");
    let mut replayed = Replayed {
        nights: BTreeMap::new(),
        reservations: BTreeMap::new(),
    };
    let mut last_sequence: HashMap<(String, String), i64> = HashMap::new();
    for row in rows {
        let kind: String = row.get("aggregate_type");
        let id: String = row.get("aggregate_id");
        let sequence: i64 = row.get("sequence");
        let previous = last_sequence.insert((kind.clone(), id.clone()), sequence);
        assert_eq!(
            previous.unwrap_or(0) + 1,
            sequence,
            "stream {kind}/{id} has a gap"
        );
        let payload: serde_json::Value = row.get("payload");
        match AggregateType::parse(&kind) {
            Some(AggregateType::RoomNight) => {
                let event: RoomNightEvent = serde_json::from_value(payload).expect("night event");
                let night = replayed.nights.entry(id.clone()).or_default();
                night.apply_event(&event);
                assert!(
                    night.invariant_holds(),
                    "replay: {id} oversold after event {sequence}: {night:?}"
                );
            }
            Some(AggregateType::Reservation) => {
                let event: ReservationEvent =
                    serde_json::from_value(payload).expect("reservation event");
                replayed
                    .reservations
                    .entry(id)
                    .or_default()
                    .apply_event(&event);
            }
            Some(AggregateType::Hotel | AggregateType::Block) | None => {}
        }
    }
    replayed
}

/// The invariant, checked three ways, plus "no partial hold":
/// - every `room_nights` row satisfies confirmed + held <= total + allowance, and its
///   counters are the sums of its allocation rows;
/// - replaying the events rebuilds exactly those counters, and never oversells a night
///   at any point of the history;
/// - every held or confirmed reservation has its allocation on every night of its stay,
///   and no other reservation holds anything.
pub async fn assert_invariants(pool: &PgPool) -> Replayed {
    assert_invariants_at(pool, Utc::now()).await
}

/// [`assert_invariants`], then `audit verify` over the whole log (the audit log caught up
/// first): every sale replayed against the terms in force where it stands.
pub async fn assert_invariants_and_verified(pool: &PgPool) {
    assert_invariants(pool).await;
    let progress = std::sync::Arc::new(projections::audit::VerifyProgress::default());
    let verified = projections::audit::catch_up_and_verify_with(
        pool,
        std::time::Duration::from_secs(30),
        std::sync::Arc::clone(&progress),
    )
    .await
    .expect("verify");
    assert!(verified.ok, "{:?}", verified.problems);
    // Its progress ends where the report does: every row walked by both walks.
    assert_eq!(
        (progress.total(), progress.done()),
        (verified.events_checked, verified.events_checked)
    );
}

/// As [`assert_invariants`], with holds judged lapsed or live at `now`.
pub async fn assert_invariants_at(pool: &PgPool, now: chrono::DateTime<Utc>) -> Replayed {
    let rows = night_rows(pool).await;
    for (key, row) in &rows {
        assert!(
            row.confirmed + row.held + row.blocked <= row.total_rooms + row.allowance,
            "room_nights oversold at {key:?}: {row:?}"
        );
    }
    let sums: Vec<(i64, i64, NaiveDate, i64, i64)> = sqlx::query_as(
        "SELECT n.hotel_id, n.room_type_id, n.night,
                coalesce(sum(a.rooms) FILTER (WHERE a.expires_at IS NULL), 0)::bigint,
                coalesce(sum(a.rooms) FILTER (WHERE a.expires_at IS NOT NULL), 0)::bigint
           FROM room_nights n
           LEFT JOIN room_night_allocations a USING (hotel_id, room_type_id, night)
          GROUP BY 1, 2, 3",
    )
    .fetch_all(pool)
    .await
    .expect("allocation sums");
    for (h, t, n, confirmed, held) in sums {
        let row = &rows[&(h, t, n)];
        assert_eq!(
            (i64::from(row.confirmed), i64::from(row.held)),
            (confirmed, held),
            "counters of {h}:{t}:{n} differ from its allocations"
        );
    }

    let replayed = replay(pool).await;
    for ((h, t, n), row) in &rows {
        let key = RoomNightKey::new(
            HotelId::parse(*h).expect("hotel id"),
            RoomTypeId::parse(*t).expect("room type id"),
            *n,
        );
        let stream = key.stream_id();
        let night = replayed
            .nights
            .get(&stream)
            .unwrap_or_else(|| panic!("no events for {stream}"));
        assert_eq!(
            (night.confirmed(), night.held(), night.blocked()),
            (row.confirmed as u32, row.held as u32, row.blocked as u32),
            "replayed {stream} differs from room_nights"
        );
    }
    assert_eq!(replayed.nights.len(), rows.len(), "streams without a row");

    for reservation in replayed.reservations.values() {
        let Some(details) = reservation.details() else {
            panic!("reservation stream without details");
        };
        // Every line on every night, each with its own rooms.
        for (line, night) in details.lines().into_iter().flat_map(|line| {
            details
                .stay
                .nights()
                .map(move |night| (line.clone(), night))
        }) {
            // A checked-out stay occupies the nights up to the day its guest left.
            let occupies = reservation.occupies(night);
            let stream = RoomNightKey::new(details.hotel_id, line.room_type_id, night).stream_id();
            let state = replayed.nights.get(&stream);
            let rooms = state.and_then(|n| {
                n.hold_of(&details.reservation_id)
                    .map(|h| h.rooms)
                    .or_else(|| n.confirmed_for(&details.reservation_id))
            });
            if let Some(rooms) = rooms {
                assert_eq!(
                    rooms,
                    line.rooms.get(),
                    "reservation {} on {night}: room type {} holds the line's rooms",
                    details.reservation_id,
                    line.room_type_id
                );
            }
            let holds = rooms.is_some();
            let lapsed = reservation.recorded_status() == Some(ReservationStatus::Held)
                && details.hold_expires_at <= now;
            if !lapsed {
                assert_eq!(
                    holds,
                    occupies,
                    "reservation {} ({:?}) on {night}: allocation present = {holds}",
                    details.reservation_id,
                    reservation.recorded_status()
                );
            }
        }
    }
    replayed
}

/// Streams whose events, read in commit order `(transaction_id, global_position)` as
/// projections read them, are not in sequence order. Must be zero: projections apply
/// each stream's events in the order they read them.
pub async fn streams_out_of_commit_order(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (
            SELECT sequence, lag(sequence) OVER (
                     PARTITION BY aggregate_type, aggregate_id
                     ORDER BY transaction_id, global_position) AS previous
              FROM events) s
          WHERE previous IS NOT NULL AND sequence <> previous + 1",
    )
    .fetch_one(pool)
    .await
    .expect("order check")
}
