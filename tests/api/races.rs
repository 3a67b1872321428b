//! A hundred HTTP clients race for the last rooms; the invariant holds afterwards, and
//! what the clients were told adds up to what the database holds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use rand::{Rng, SeedableRng};

use crate::support::*;

const CLIENTS: usize = 100;
const ROOMS: i64 = 5;
const NIGHTS: u64 = 3;

enum Outcome {
    Held { nights: i64, rooms: i64 },
    SoldOut { night: NaiveDate, rooms: i64 },
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_clients_racing_for_five_rooms_never_oversell_and_every_answer_adds_up() {
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
