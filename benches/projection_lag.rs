//! Projection lag under a sustained booking load: `cargo bench --bench projection_lag`.
//!
//! Runs the Redis availability projection (the one searches read) while CLIENTS tasks
//! keep holding 1-3 night stays through the command API for BENCH_SECONDS, and records,
//! for every event the projection applies, how long after its transaction started
//! (`recorded_at`) it reached Redis. Prints the booking rate and the lag's p50/p99/max.
//!
//! Uses the PostgreSQL at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1/postgres)
//! with a scratch database it drops at the end, and Redis at REDIS_URL.

#![allow(clippy::expect_used)] // only on inputs the benchmark generates itself

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aggregates::booking::InventoryUpdate;
use aggregates::{Guest, HotelDetails, HotelId, RoomCount, RoomTypeDetails, RoomTypeId, StayDates};
use app::commands::{CommandService, HoldRequest, WriteConfig};
use chrono::{Days, Utc};
use projections::availability::{self, AvailabilityProjection, Keys};
use projections::{Projection, RunnerConfig, StoredEvent};
use rand::Rng;
use sqlx::PgConnection;
use store::write::IdempotencyKey;
use tokio::sync::watch;

/// Wraps the real projection and notes each event's lag as it is applied.
struct Timed {
    inner: AvailabilityProjection,
    lags: Arc<Mutex<Vec<f64>>>,
}

impl Projection for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn apply(
        &mut self,
        tx: &mut PgConnection,
        generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        self.inner.apply(tx, generation, batch).await?;
        let now = Utc::now();
        if let Ok(mut lags) = self.lags.lock() {
            lags.extend(
                batch
                    .iter()
                    .map(|e| (now - e.recorded_at).num_microseconds().unwrap_or(0) as f64 / 1000.0),
            );
        }
        Ok(())
    }

    async fn clear(&mut self, conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        self.inner.clear(conn, generation).await
    }
}

mod support;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let redis_url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let seconds: u64 = support::env_or("BENCH_SECONDS", 10);
    let clients: usize = support::env_or("CLIENTS", 16);
    let scratch = support::Scratch::create(40).await?;
    let pool = scratch.pool.clone();
    let name = scratch.name.clone();
    let svc = CommandService::new(pool.clone(), WriteConfig::default());
    let first = Utc::now().date_naive() + Days::new(30);
    for h in 1..=20 {
        let hotel = HotelId::parse(h)?;
        svc.set_hotel(
            &app::commands::Caller::Staff("staff".into()),
            hotel,
            HotelDetails::parse("Bench", "Benchville", "UTC")?,
            None,
        )
        .await?;
        let room_type = RoomTypeId::parse(1)?;
        svc.set_room_type(
            &app::commands::Caller::Staff("staff".into()),
            hotel,
            room_type,
            RoomTypeDetails::parse("room", 2)?,
        )
        .await?;
        svc.set_inventory(
            &app::commands::Caller::Staff("staff".into()),
            hotel,
            room_type,
            StayDates::parse(first, first + Days::new(60))?,
            InventoryUpdate {
                total_rooms: Some(1_000_000),
                overbooking_allowance: Some(0),
                rate_cents: Some(aggregates::Cents::new(10_000)),
            },
        )
        .await?;
    }

    let lags = Arc::new(Mutex::new(Vec::new()));
    let keys = Keys::for_database(&name);
    let (stop, stopped) = watch::channel(false);
    let runner = tokio::spawn(projections::run(
        pool.clone(),
        Timed {
            inner: AvailabilityProjection::new(availability::connect(&redis_url)?, keys),
            lags: lags.clone(),
        },
        RunnerConfig::default(),
        stopped,
    ));
    // Let it catch up with the setup, then measure only the load.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Ok(mut l) = lags.lock() {
        l.clear();
    }

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let svc = svc.clone();
        tasks.push(tokio::spawn(async move {
            let mut held = 0_u64;
            let mut n = 0_u64;
            while Instant::now() < deadline {
                n += 1;
                let (hotel, offset, nights) = {
                    let mut rng = rand::thread_rng();
                    (
                        rng.gen_range(1..=20),
                        rng.gen_range(0..55),
                        rng.gen_range(1..=3),
                    )
                };
                let start = first + Days::new(offset);
                let request = HoldRequest {
                    hotel_id: HotelId::parse(hotel).expect("id"),
                    room_type_id: RoomTypeId::parse(1).expect("id"),
                    stay: StayDates::parse(start, start + Days::new(nights)).expect("stay"),
                    rooms: RoomCount::parse(1).expect("rooms"),
                    guest: Guest::parse("Bench", "bench@example.com").expect("guest"),
                    expected_total_cents: None,
                    rate_plan_id: None,
                    guests: aggregates::GuestCount::ONE,
                    more_lines: Vec::new(),
                    block_code: None,
                };
                let key = IdempotencyKey::parse(&format!("{c}-{n}")).expect("key");
                if svc.hold("bench", "bench", key, request).await.is_ok() {
                    held += 1;
                }
            }
            held
        }));
    }
    let mut held = 0;
    for task in tasks {
        held += task.await?;
    }
    // Give the projection time to drain what is left, then stop it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop.send(true);
    runner.await?;

    let mut lags = lags
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    lags.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        lags.get(((lags.len() as f64 * p) as usize).min(lags.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "projection lag under load: {clients} clients, {:.0} holds/s, {} events applied; lag ms p50 {:.1} p99 {:.1} max {:.1}",
        held as f64 / seconds as f64,
        lags.len(),
        pct(0.50),
        pct(0.99),
        lags.last().copied().unwrap_or(0.0)
    );

    scratch.drop().await?;
    Ok(())
}
