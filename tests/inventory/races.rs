//! Real concurrency racing for the last rooms: 64 tasks on one or two independent
//! "servers" (pools + command services) in every write strategy, and a hundred HTTP
//! clients. Every race ends by checking the invariant in the database, from the events
//! and by replay, and that what the clients were told adds up to what the database holds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aggregates::booking::InventoryUpdate;
use aggregates::{HotelDetails, HotelId, Rejection, RoomTypeDetails, RoomTypeId};
use app::commands::shards::ShardMap;
use app::commands::{CommandService, HoldRequest, WriteConfig};
use chrono::{Days, NaiveDate};
use rand::{Rng, SeedableRng};
use store::error::CommandError;
use store::write::Strategy;

use crate::support::*;

const ROOMS: i64 = 5;
const NIGHTS: u64 = 8;
const TASKS: usize = 64;
const HOLDS: usize = 300;

type Room = (HotelId, RoomTypeId);

#[derive(Default)]
struct Tally {
    held: AtomicUsize,
    held_room_nights: AtomicUsize,
    sold_out: AtomicUsize,
    gave_up: AtomicUsize,
}

/// 64 tasks race 300 holds of 1-3 nights over `services` (round robin), each hold for
/// one of `rooms` at random.
async fn race(services: Vec<CommandService>, seed: u64, rooms: &[Room]) -> Arc<Tally> {
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicUsize::new(0));
    let first = day(30);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let svc = services[task % services.len()].clone();
        let tally = tally.clone();
        let next = next.clone();
        let rooms = rooms.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed + task as u64);
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= HOLDS {
                    break;
                }
                let start = rng.gen_range(0..NIGHTS);
                let len = rng.gen_range(1..=3).min(NIGHTS - start);
                let from = first.checked_add_days(Days::new(start)).expect("date");
                let to = from.checked_add_days(Days::new(len)).expect("date");
                let (hotel_id, room_type_id) = rooms[rng.gen_range(0..rooms.len())];
                let request = HoldRequest {
                    hotel_id,
                    room_type_id,
                    ..hold_request(stay(from, to), 1, n)
                };
                let idem = key(&format!("race-{seed}-{n}"));
                // A client retries "try again" with the same key; give it a few tries.
                let mut outcome = None;
                for _ in 0..20 {
                    match svc.hold("web", "web", idem.clone(), request.clone()).await {
                        Err(CommandError::Contention { .. }) | Err(CommandError::InFlight) => {
                            continue
                        }
                        other => {
                            outcome = Some(other);
                            break;
                        }
                    }
                }
                match outcome {
                    Some(Ok(view)) => {
                        tally.held.fetch_add(1, Ordering::SeqCst);
                        tally
                            .held_room_nights
                            .fetch_add(view.nights as usize, Ordering::SeqCst);
                    }
                    Some(Err(CommandError::Rejected(Rejection::SoldOut { night }))) => {
                        assert!(
                            night >= from && night < to,
                            "sold_out names a night of the stay"
                        );
                        tally.sold_out.fetch_add(1, Ordering::SeqCst);
                    }
                    Some(Err(e)) => panic!("unexpected outcome: {e:?}"),
                    None => {
                        tally.gave_up.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task panicked");
    }
    tally
}

async fn check_after_race(db: &TestDb, tally: &Tally, rooms: usize) {
    eprintln!(
        "held {} ({} room-nights), sold out {}, gave up {}",
        tally.held.load(Ordering::SeqCst),
        tally.held_room_nights.load(Ordering::SeqCst),
        tally.sold_out.load(Ordering::SeqCst),
        tally.gave_up.load(Ordering::SeqCst)
    );
    let replayed = assert_invariants(&db.pool).await;
    let rows = night_rows(&db.pool).await;
    // Every acknowledged hold exists, and nothing else does.
    let held: i32 = rows.values().map(|r| r.held + r.confirmed).sum();
    assert_eq!(held as usize, tally.held_room_nights.load(Ordering::SeqCst));
    assert_eq!(
        replayed.reservations.len(),
        tally.held.load(Ordering::SeqCst),
        "one reservation stream per acknowledged hold"
    );
    let capacity = (ROOMS as usize) * (NIGHTS as usize) * rooms;
    assert!(held as usize <= capacity);
    assert_eq!(
        tally.held.load(Ordering::SeqCst)
            + tally.sold_out.load(Ordering::SeqCst)
            + tally.gave_up.load(Ordering::SeqCst),
        HOLDS
    );
    // The race was real: demand far exceeded supply.
    assert!(
        tally.sold_out.load(Ordering::SeqCst) > 0,
        "nothing sold out"
    );
    let (reservations,): (i64,) = sqlx::query_as("SELECT count(*) FROM reservations")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(reservations as usize, tally.held.load(Ordering::SeqCst));
    assert_eq!(
        streams_out_of_commit_order(&db.pool).await,
        0,
        "read in commit order, some stream's events are out of sequence"
    );
}

async fn race_one_server(strategy: Strategy) {
    let db = TestDb::new().await;
    let svc = db.service(strategy);
    hotel_with_rooms(&svc, day(30), NIGHTS, ROOMS).await;

    let tally = race(vec![svc], 7, &[(hotel_id(), king())]).await;

    check_after_race(&db, &tally, 1).await;
    if strategy == Strategy::Group {
        // The holds really were decided in batches: some transaction placed several.
        let (largest,): (i64,) = sqlx::query_as(
            "SELECT coalesce(max(n), 0) FROM (
                 SELECT count(*) AS n FROM events
                  WHERE event_type = 'ReservationHeld' GROUP BY transaction_id) t",
        )
        .fetch_one(&db.pool)
        .await
        .expect("batch sizes");
        assert!(largest > 1, "no transaction held more than one stay");
    }
    db.drop_database().await;
}

async fn race_two_servers(strategy: Strategy) {
    let db = TestDb::new().await;
    let first = db.service(strategy);
    hotel_with_rooms(&first, day(30), NIGHTS, ROOMS).await;
    let second = CommandService::new(
        db.another_pool().await,
        WriteConfig {
            strategy,
            ..WriteConfig::default()
        },
    );

    let tally = race(vec![first, second], 99, &[(hotel_id(), king())]).await;

    check_after_race(&db, &tally, 1).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_racing_optimistically_never_oversell() {
    race_one_server(Strategy::Optimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_racing_pessimistically_never_oversell() {
    race_one_server(Strategy::Pessimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_racing_optimistically_never_oversell() {
    race_two_servers(Strategy::Optimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_racing_pessimistically_never_oversell() {
    race_two_servers(Strategy::Pessimistic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_tasks_racing_in_group_commits_never_oversell() {
    race_one_server(Strategy::Group).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_racing_in_group_commits_never_oversell() {
    race_two_servers(Strategy::Group).await;
}

/// Three hotels with two room types each, `ROOMS` rooms on each of `NIGHTS` nights.
async fn three_hotels(svc: &CommandService) -> Vec<Room> {
    let mut rooms = Vec::new();
    let last = day(30).checked_add_days(Days::new(NIGHTS)).expect("date");
    for hotel in [HOTEL, HOTEL + 1, HOTEL + 2] {
        let hotel = HotelId::parse(hotel).expect("hotel id");
        svc.set_hotel(
            &app::commands::Caller::Staff("staff".into()),
            hotel,
            HotelDetails::parse("Hotel", "Porto", "Europe/Lisbon").expect("details"),
            None,
        )
        .await
        .expect("set hotel");
        for room_type in [KING, KING + 1] {
            let room_type = RoomTypeId::parse(room_type).expect("room type id");
            svc.set_room_type(
                &app::commands::Caller::Staff("staff".into()),
                hotel,
                room_type,
                RoomTypeDetails::parse("double", 2).expect("room type"),
            )
            .await
            .expect("set room type");
            svc.set_inventory(
                &app::commands::Caller::Staff("staff".into()),
                hotel,
                room_type,
                stay(day(30), last),
                InventoryUpdate {
                    total_rooms: Some(ROOMS),
                    overbooking_allowance: Some(0),
                    rate_cents: Some(aggregates::Cents::new(9_000)),
                },
            )
            .await
            .expect("set inventory");
            rooms.push((hotel, room_type));
        }
    }
    rooms
}

/// Group commit batches holds of a shard's hotels and rooms into one transaction, each
/// lane locking its batch's rooms in one order, and never puts two shards in one
/// transaction. Here the first hotel is a shard of its own and the other two share
/// `main`. Two servers with different lane counts map the same hotels to different
/// lanes, so their batches meet on shared rooms in every combination: they must queue
/// (never deadlock), and never oversell.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_batching_holds_of_six_rooms_never_oversell() {
    let db = TestDb::new().await;
    let lanes = |group_lanes| WriteConfig {
        strategy: Strategy::Group,
        group_lanes,
        ..WriteConfig::default()
    };
    let shards = || ShardMap::parse(&format!("{HOTEL}:alone")).expect("shard map");
    let first = CommandService::new(db.pool.clone(), lanes(1)).with_shards(shards());
    let second = CommandService::new(db.another_pool().await, lanes(3)).with_shards(shards());
    let rooms = three_hotels(&first).await;

    let tally = race(vec![first, second], 2024, &rooms).await;

    check_after_race(&db, &tally, rooms.len()).await;
    // Per transaction, the rooms and hotels whose stays it held.
    let per_transaction: Vec<(i64, i64, bool)> = sqlx::query_as(
        "SELECT count(DISTINCT split_part(aggregate_id, ':', 1) || ':'
                             || split_part(aggregate_id, ':', 2)),
                count(DISTINCT split_part(aggregate_id, ':', 1)),
                bool_or(split_part(aggregate_id, ':', 1) = $1)
                    AND bool_or(split_part(aggregate_id, ':', 1) <> $1)
           FROM events WHERE event_type = 'RoomsHeld' GROUP BY transaction_id",
    )
    .bind(HOTEL.to_string())
    .fetch_all(&db.pool)
    .await
    .expect("rooms per transaction");
    // Some transaction really decided holds of more than one room, and of two hotels...
    assert!(
        per_transaction.iter().any(|(rooms, _, _)| *rooms > 1),
        "no transaction held stays of two rooms"
    );
    assert!(
        per_transaction.iter().any(|(_, hotels, _)| *hotels > 1),
        "no transaction held stays of two hotels of one shard"
    );
    // ... and none joined the hotel that is a shard of its own with another.
    assert!(
        per_transaction.iter().all(|(_, _, mixed)| !mixed),
        "a transaction held stays of two shards"
    );
    db.drop_database().await;
}

enum Outcome {
    Held { nights: i64, rooms: i64 },
    SoldOut { night: NaiveDate, rooms: i64 },
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_clients_racing_for_five_rooms_never_oversell_and_every_answer_adds_up() {
    // This race's own sizes (the module's constants are the task races').
    const CLIENTS: usize = 100;
    const ROOMS: i64 = 5;
    const NIGHTS: u64 = 3;
    let app = Arc::new(spawn_app().await);
    let first = day(20);
    app.seed_hotel(first, NIGHTS, ROOMS).await;
    let capacity = ROOMS * NIGHTS as i64;

    let mut rng = rand::rngs::StdRng::seed_from_u64(20_240_601);
    let mut clients = Vec::new();
    for n in 0..CLIENTS {
        let start = rng.gen_range(0..NIGHTS);
        let len = rng.gen_range(1..=2).min(NIGHTS - start);
        let rooms = rng.gen_range(1..=2);
        let from = plus_days(first, start);
        let to = plus_days(from, len);
        let app = app.clone();
        clients.push(tokio::spawn(async move {
            let body = hold_body(from, to, rooms);
            for _ in 0..200 {
                let reply = app.hold(WEB, &format!("race-{n}"), &body).await;
                match (reply.status.as_u16(), reply.json["error"].as_str()) {
                    (201, _) => {
                        assert_eq!(reply.json["nights"], len);
                        assert_eq!(reply.json["rooms"], rooms);
                        return Outcome::Held {
                            nights: len as i64,
                            rooms,
                        };
                    }
                    (409, Some("sold_out")) => {
                        let night: NaiveDate = reply.str("night").parse().expect("a date");
                        assert!(from <= night && night < to, "names a night of the stay");
                        return Outcome::SoldOut { night, rooms };
                    }
                    (409, Some("try_again" | "request_in_flight")) => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    _ => panic!("client {n}: unexpected {} {}", reply.status, reply.text),
                }
            }
            panic!("client {n} never got an answer");
        }));
    }
    let mut held = 0;
    let mut sold_out = 0;
    let mut promised_room_nights = 0;
    let mut sold_out_nights = BTreeMap::new();
    for client in clients {
        match client.await.expect("client task") {
            Outcome::Held { nights, rooms } => {
                held += 1;
                promised_room_nights += nights * rooms;
            }
            Outcome::SoldOut { night, rooms } => {
                sold_out += 1;
                let fewest = sold_out_nights.entry(night).or_insert(rooms);
                *fewest = rooms.min(*fewest);
            }
        }
    }

    println!("{held} held ({promised_room_nights} room-nights), {sold_out} sold out");
    assert_eq!(held + sold_out, CLIENTS);
    assert!(held > 0, "someone got a room");
    assert!(sold_out > 0, "demand exceeded supply");
    assert_invariants(&app.db.pool).await;
    let taken = app.taken_by_night().await;
    let taken_total: i64 = taken.values().sum();
    assert_eq!(
        taken_total, promised_room_nights,
        "room-nights in the database = room-nights promised in 201s"
    );
    assert!(taken_total <= capacity);
    for (night, rooms) in &taken {
        assert!(*rooms <= ROOMS, "{night} oversold: {rooms}");
    }
    // Nothing was released during the race, so a night refused as sold out stayed too
    // full for the rooms that were asked.
    for (night, rooms) in &sold_out_nights {
        let left = ROOMS - taken.get(night).copied().unwrap_or(0);
        assert!(
            left < *rooms,
            "{night} refused {rooms} rooms but ended with {left} free"
        );
    }
    assert_eq!(app.count("reservations").await, held as i64);
    let app = Arc::into_inner(app).expect("every client finished");
    app.finish().await;
}

/// Two servers batching holds of one room whose holds lapse within milliseconds: each
/// batch drops the lapsed holds it needs room from, while the other server's batches on
/// the same room commit around it. A batch that read a hold another had just dropped
/// would drop it again and count its rooms free twice; the counters, the allocations
/// and the replay agree only if every lapsed hold was dropped once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_batching_holds_that_lapse_as_they_race_drop_each_lapsed_hold_once() {
    let db = TestDb::new().await;
    let config = WriteConfig {
        strategy: Strategy::Group,
        hold_ttl: chrono::Duration::milliseconds(20),
        ..WriteConfig::default()
    };
    let first = CommandService::new(db.pool.clone(), config);
    hotel_with_rooms(&first, day(30), NIGHTS, ROOMS).await;
    let second = CommandService::new(db.another_pool().await, config);

    race(vec![first, second], 23, &[(hotel_id(), king())]).await;

    assert_invariants(&db.pool).await;
    assert_eq!(streams_out_of_commit_order(&db.pool).await, 0);
    let (lapsed, twice): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) - count(DISTINCT (aggregate_id, payload -> 'HoldLapsed' ->> 'reservation_id'))
           FROM events WHERE event_type = 'HoldLapsed'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("lapses");
    assert!(
        lapsed > 0,
        "no batch dropped a lapsed hold: the race did not happen"
    );
    assert_eq!(twice, 0, "a lapsed hold was dropped twice from a night");
    db.drop_database().await;
}
