//! Optimistic vs pessimistic on the write path, in process (no HTTP): `cargo bench
//! --bench strategies`. Prints goodput, p50/p99 latency, lost races and give-ups for a
//! flash sale (every client holds the same 3 nights) and a spread load (3-night holds
//! over 50 hotels x 5 room types x 60 nights), at 1, 8, 32 and 64 concurrent clients.
//!
//! Uses the PostgreSQL at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1/postgres)
//! and a scratch database it drops at the end. BENCH_SECONDS sets each run's length.

#![allow(clippy::expect_used)] // only on inputs the benchmark generates itself

use std::time::{Duration, Instant};

use aggregates::booking::InventoryUpdate;
use aggregates::{Guest, HotelDetails, HotelId, RoomCount, RoomTypeDetails, RoomTypeId, StayDates};
use app::commands::{CommandService, HoldRequest, WriteConfig};
use chrono::{Days, Utc};
use rand::Rng;
use store::write::{contention_totals, IdempotencyKey, Strategy};

const HOTELS: i64 = 50;
const ROOM_TYPES: i64 = 5;
const NIGHTS: u64 = 60;

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    Hot,
    Spread,
}

mod support;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = support::env_or("BENCH_SECONDS", 5);
    let scratch = support::Scratch::create(70).await?;
    let pool = scratch.pool.clone();
    let setup = CommandService::new(pool.clone(), WriteConfig::default());
    let first = Utc::now().date_naive() + Days::new(30);
    let last = first + Days::new(NIGHTS);
    for h in 1..=HOTELS {
        let hotel = HotelId::parse(h)?;
        setup
            .set_hotel(
                &app::commands::Caller::Staff("staff".into()),
                hotel,
                HotelDetails::parse("Bench", "Benchville", "UTC")?,
                None,
            )
            .await?;
        for t in 1..=ROOM_TYPES {
            let room_type = RoomTypeId::parse(t)?;
            setup
                .set_room_type(
                    &app::commands::Caller::Staff("staff".into()),
                    hotel,
                    room_type,
                    RoomTypeDetails::parse("room", 2)?,
                )
                .await?;
            setup
                .set_inventory(
                    &app::commands::Caller::Staff("staff".into()),
                    hotel,
                    room_type,
                    StayDates::parse(first, last)?,
                    InventoryUpdate {
                        total_rooms: Some(1_000_000),
                        overbooking_allowance: Some(0),
                        rate_cents: Some(aggregates::Cents::new(10_000)),
                    },
                )
                .await?;
        }
    }

    // SCENARIOS=hot,spread STRATEGIES=optimistic,pessimistic,group CLIENTS=1,8,32,64
    // narrow a run.
    let wanted = |var: &str, name: &str| {
        std::env::var(var).map_or(true, |v| v.split(',').any(|w| w.trim() == name))
    };
    let clients_list: Vec<usize> = std::env::var("CLIENTS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 8, 32, 64]);
    println!("scenario  strategy     clients  holds/s   p50 ms   p99 ms  lost races  gave up");
    for scenario in [Scenario::Hot, Scenario::Spread] {
        let scenario_name = if scenario == Scenario::Hot {
            "hot"
        } else {
            "spread"
        };
        if !wanted("SCENARIOS", scenario_name) {
            continue;
        }
        for strategy in [Strategy::Optimistic, Strategy::Pessimistic, Strategy::Group] {
            if !wanted("STRATEGIES", &format!("{strategy:?}").to_lowercase()) {
                continue;
            }
            for clients in clients_list.iter().copied() {
                let svc = CommandService::new(
                    pool.clone(),
                    WriteConfig {
                        strategy,
                        ..WriteConfig::default()
                    },
                );
                let (conflicts_before, exhausted_before) = contention_totals();
                let deadline = Instant::now() + Duration::from_secs(seconds);
                let mut tasks = Vec::new();
                for c in 0..clients {
                    let svc = svc.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut latencies = Vec::new();
                        let mut n = 0_u64;
                        while Instant::now() < deadline {
                            n += 1;
                            let (hotel, room_type, offset) = match scenario {
                                Scenario::Hot => (1, 1, 10),
                                Scenario::Spread => {
                                    let mut rng = rand::thread_rng();
                                    (
                                        rng.gen_range(1..=HOTELS),
                                        rng.gen_range(1..=ROOM_TYPES),
                                        rng.gen_range(0..NIGHTS - 3),
                                    )
                                }
                            };
                            let start = first + Days::new(offset);
                            let request = HoldRequest {
                                hotel_id: HotelId::parse(hotel).expect("id"),
                                room_type_id: RoomTypeId::parse(room_type).expect("id"),
                                stay: StayDates::parse(start, start + Days::new(3)).expect("stay"),
                                rooms: RoomCount::parse(1).expect("rooms"),
                                guest: Guest::parse("Bench", "bench@example.com").expect("guest"),
                                expected_total_cents: None,
                                rate_plan_id: None,
                                guests: aggregates::GuestCount::ONE,
                                more_lines: Vec::new(),
                                block_code: None,
                            };
                            let key =
                                IdempotencyKey::parse(&format!("{c}-{n}-{}", uuid::Uuid::new_v4()))
                                    .expect("key");
                            let started = Instant::now();
                            let result = svc.hold("bench", "bench", key, request).await;
                            if result.is_ok() {
                                latencies.push(started.elapsed());
                            }
                        }
                        latencies
                    }));
                }
                let mut latencies = Vec::new();
                for task in tasks {
                    latencies.extend(task.await?);
                }
                latencies.sort();
                let (conflicts, exhausted) = contention_totals();
                let pct = |p: f64| {
                    latencies
                        .get(
                            ((latencies.len() as f64 * p) as usize)
                                .min(latencies.len().saturating_sub(1)),
                        )
                        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
                };
                println!(
                    "{:<9} {:<12} {:>7} {:>8.0} {:>8.1} {:>8.1} {:>11} {:>8}",
                    if scenario == Scenario::Hot {
                        "hot"
                    } else {
                        "spread"
                    },
                    format!("{strategy:?}").to_lowercase(),
                    clients,
                    latencies.len() as f64 / seconds as f64,
                    pct(0.50),
                    pct(0.99),
                    conflicts - conflicts_before,
                    exhausted - exhausted_before,
                );
            }
        }
    }
    scratch.drop().await?;
    Ok(())
}
