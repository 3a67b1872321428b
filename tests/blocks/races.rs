//! Many clients booking from one block and from general sale on the same nights, under
//! every write strategy, with staff releasing the block midway: neither side is ever
//! sold beyond its rooms, every room is counted once (confirmed, held or set aside), and
//! the history replays to the same state (`audit verify`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use aggregates::{BlockCode, BlockTerms, Cents, RoomCount};
use app::commands::{Caller, HoldRequest};
use store::error::CommandError;
use store::write::Strategy;
use tokio::sync::Barrier;

use crate::support::*;

const ROOMS: i64 = 12;
const BLOCKED: u32 = 5;
const CLIENTS: usize = 30;

fn acme() -> BlockCode {
    BlockCode::parse("ACME").expect("code")
}

fn request(n: usize) -> HoldRequest {
    let base = hold_request(stay(day(30), day(32)), 1, n);
    if n % 2 == 0 {
        HoldRequest {
            block_code: Some(acme()),
            ..base
        }
    } else {
        base
    }
}

async fn race(strategy: Strategy) {
    let db = TestDb::new().await;
    let svc = db.service(strategy);
    hotel_with_rooms(&svc, day(30), 3, ROOMS).await;
    let staff = Caller::Staff("staff".into());
    let terms = BlockTerms::parse(
        "Acme offsite",
        king(),
        stay(day(30), day(33)),
        RoomCount::parse(i64::from(BLOCKED)).expect("rooms"),
        Cents::new(15_000),
        day(20),
    )
    .expect("terms");
    svc.set_block(&staff, hotel_id(), acme(), terms)
        .await
        .expect("block");

    let barrier = Arc::new(Barrier::new(CLIENTS + 1));
    // Bookings from the block that have succeeded: the release waits for the first, so
    // it lands among the bookings rather than before them all.
    let picked = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for n in 0..CLIENTS {
        let (svc, barrier, picked) = (svc.clone(), barrier.clone(), picked.clone());
        clients.push(tokio::spawn(async move {
            let request = request(n);
            barrier.wait().await;
            for attempt in 0..30 {
                let key = key(&format!("block-{n}-{attempt}"));
                match svc.hold("web", "web", key, request.clone()).await {
                    Err(CommandError::Contention { .. }) => continue,
                    Ok(_) => {
                        if n % 2 == 0 {
                            picked.fetch_add(1, Ordering::SeqCst);
                        }
                        return Some(n % 2 == 0);
                    }
                    Err(CommandError::Rejected(_)) => return None,
                    Err(e) => panic!("client {n}: {e:?}"),
                }
            }
            None
        }));
    }
    // Staff release the block while the clients book.
    let releaser = {
        let (svc, barrier, picked) = (svc.clone(), barrier.clone(), picked.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            for _ in 0..2_000 {
                if picked.load(Ordering::SeqCst) > 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            for _ in 0..30 {
                match svc.release_block(&staff, hotel_id(), acme()).await {
                    Err(CommandError::Contention { .. }) => continue,
                    other => return other.expect("release"),
                }
            }
            panic!("the release never went through");
        })
    };
    let (mut from_block, mut from_sale) = (0u32, 0u32);
    for client in clients {
        match client.await.expect("task") {
            Some(true) => from_block += 1,
            Some(false) => from_sale += 1,
            None => {}
        }
    }
    let released = releaser.await.expect("releaser");
    assert!(released.released.is_some());
    eprintln!("{strategy:?}: {from_block} from the block, {from_sale} from general sale");
    assert!(
        (1..=BLOCKED).contains(&from_block),
        "{strategy:?}: {from_block} booked from the block"
    );
    for night in [day(30), day(31)] {
        let (taken, blocked): (i64, i64) = sqlx::query_as(
            "SELECT (confirmed + held)::bigint, blocked::bigint FROM room_nights
              WHERE night = $1",
        )
        .bind(night)
        .fetch_one(&db.pool)
        .await
        .expect("night");
        assert_eq!(
            taken,
            i64::from(from_block + from_sale),
            "{strategy:?} on {night}: what the holds were told is what the night holds"
        );
        assert_eq!(blocked, 0, "released: nothing set aside any more");
        assert!(taken <= ROOMS, "{strategy:?} on {night}: {taken} taken");
    }
    // Each pickup stays counted as the block's.
    let view = svc
        .block(hotel_id(), acme())
        .await
        .expect("block")
        .expect("exists");
    assert!(view
        .nights
        .iter()
        .take(2)
        .all(|n| n.picked_up == from_block && n.remaining == 0));
    assert_invariants_and_verified(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn block_and_general_sale_bookings_racing_a_release_under_group_commit_count_every_room_once()
{
    race(Strategy::Group).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn block_and_general_sale_bookings_racing_a_release_pessimistically_count_every_room_once() {
    race(Strategy::Pessimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn block_and_general_sale_bookings_racing_a_release_optimistically_count_every_room_once() {
    race(Strategy::Optimistic).await;
}
