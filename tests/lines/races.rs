//! Families (a king and a twin in one reservation) racing guests who book one room type,
//! for the same last rooms, under every write strategy: each room type's nights are
//! never sold beyond their rooms, a family gets both rooms or neither, and the history
//! replays to the same state (`audit verify`).

use std::sync::Arc;

use aggregates::booking::{InventoryUpdate, LineRequest};
use aggregates::{Cents, GuestCount, HotelDetails, RoomCount, RoomTypeDetails, RoomTypeId};
use app::commands::{Caller, CommandService, HoldRequest};
use chrono::Days;
use store::error::CommandError;
use store::write::Strategy;
use tokio::sync::Barrier;

use crate::support::*;

const KINGS: u32 = 5;
const TWINS: u32 = 4;
const CLIENTS: usize = 36;

fn twin() -> RoomTypeId {
    RoomTypeId::parse(4).expect("id")
}

async fn family_hotel(svc: &CommandService) {
    let staff = Caller::Staff("staff".into());
    svc.set_hotel(
        &staff,
        hotel_id(),
        HotelDetails::parse("Casa", "Lisbon", "Europe/Lisbon").expect("details"),
        None,
    )
    .await
    .expect("hotel");
    let first = day(30);
    for (room_type, rooms) in [(king(), KINGS), (twin(), TWINS)] {
        svc.set_room_type(
            &staff,
            hotel_id(),
            room_type,
            RoomTypeDetails::parse("room", 2).expect("rt"),
        )
        .await
        .expect("room type");
        svc.set_inventory(
            &staff,
            hotel_id(),
            room_type,
            stay(first, first.checked_add_days(Days::new(3)).expect("date")),
            InventoryUpdate {
                total_rooms: Some(i64::from(rooms)),
                overbooking_allowance: Some(0),
                rate_cents: Some(Cents::new(18_000)),
            },
        )
        .await
        .expect("inventory");
    }
}

/// Client `n`'s request: a family (king + twin), a king alone or a twin alone.
fn request(n: usize) -> (HoldRequest, u32, u32) {
    let base = hold_request(stay(day(30), day(32)), 1, n);
    match n % 3 {
        0 => (
            HoldRequest {
                more_lines: vec![LineRequest {
                    room_type_id: twin(),
                    rooms: RoomCount::parse(1).expect("rooms"),
                    guests: GuestCount::ONE,
                    rate_plan_id: None,
                }],
                ..base
            },
            1,
            1,
        ),
        1 => (base, 1, 0),
        _ => (
            HoldRequest {
                room_type_id: twin(),
                ..base
            },
            0,
            1,
        ),
    }
}

async fn race(strategy: Strategy) {
    let db = TestDb::new().await;
    let svc = db.service(strategy);
    family_hotel(&svc).await;
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let mut clients = Vec::new();
    for n in 0..CLIENTS {
        let (svc, barrier) = (svc.clone(), barrier.clone());
        clients.push(tokio::spawn(async move {
            let (request, kings, twins) = request(n);
            barrier.wait().await;
            for attempt in 0..30 {
                let key = key(&format!("lines-{n}-{attempt}"));
                match svc.hold("web", "web", key, request.clone()).await {
                    Err(CommandError::Contention { .. }) => continue,
                    Ok(_) => return Some((kings, twins)),
                    Err(CommandError::Rejected(_)) => return None,
                    Err(e) => panic!("client {n}: {e:?}"),
                }
            }
            None
        }));
    }
    let (mut kings, mut twins, mut families) = (0, 0, 0);
    for client in clients {
        if let Some((k, t)) = client.await.expect("task") {
            kings += k;
            twins += t;
            families += u32::from(k == 1 && t == 1);
        }
    }
    eprintln!("{strategy:?}: {families} families, {kings} kings, {twins} twins held");
    for night in [day(30), day(31)] {
        let taken: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT room_type_id, (confirmed + held)::bigint FROM room_nights
              WHERE night = $1 ORDER BY room_type_id",
        )
        .bind(night)
        .fetch_all(&db.pool)
        .await
        .expect("nights");
        assert_eq!(
            taken,
            vec![(king().get(), i64::from(kings)), (4, i64::from(twins))],
            "{strategy:?} on {night}: what the holds were told is what the nights hold"
        );
    }
    assert!(
        kings <= KINGS && twins <= TWINS,
        "{strategy:?}: {kings} kings, {twins} twins"
    );
    if strategy != Strategy::Optimistic {
        // Demand is three times the rooms, and a locking strategy refuses only what is
        // sold out: every room is sold. (Optimistic clients may give up on contention.)
        assert_eq!(
            (kings, twins),
            (KINGS, TWINS),
            "{strategy:?}: every room sold"
        );
    }
    // A family holds both of its rooms or none (the invariant's allocation check).
    assert_invariants_and_verified(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn families_racing_single_room_bookings_under_group_commit_never_oversell_either_type() {
    race(Strategy::Group).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn families_racing_single_room_bookings_pessimistically_never_oversell_either_type() {
    race(Strategy::Pessimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn families_racing_single_room_bookings_optimistically_never_oversell_either_type() {
    race(Strategy::Optimistic).await;
}
