//! `loadgen setup`: the benchmark catalog through the admin API — for every hotel its
//! PUT, its room types and one inventory range per room type — a bounded number of
//! hotels in flight at once. Every write is idempotent, so running it twice is harmless.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{Days, NaiveDate};
use futures::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use crate::{prom, SetupArgs};

struct Setup {
    http: reqwest::Client,
    url: String,
    token: String,
    first: NaiveDate,
    last: NaiveDate,
    room_types: i64,
    rooms: i64,
    hot_rooms: i64,
    rate_cents: i64,
}

pub async fn setup(args: SetupArgs) -> anyhow::Result<()> {
    let first = args.catalog.first_night()?;
    let last = first
        .checked_add_days(Days::new(args.catalog.nights))
        .context("date out of range")?;
    let url = args.url.trim_end_matches('/').to_owned();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .build()?;
    let setup = Arc::new(Setup {
        http,
        url: url.clone(),
        token: args.admin_token,
        first,
        last,
        room_types: args.catalog.room_types,
        rooms: args.rooms,
        hot_rooms: args.hot_rooms.unwrap_or(args.rooms),
        rate_cents: args.rate_cents,
    });
    let hotels = args.catalog.hotels;
    println!(
        "setup: {hotels} hotels x {} room types x {} nights from {first} ({} rooms, hot room type {}), {} in flight",
        args.catalog.room_types, args.catalog.nights, setup.rooms, setup.hot_rooms, args.concurrency
    );
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let step = (hotels as u64 / 20).max(1);
    stream::iter(1..=hotels)
        .map(|hotel| {
            let setup = Arc::clone(&setup);
            let done = Arc::clone(&done);
            async move {
                setup
                    .hotel(hotel)
                    .await
                    .with_context(|| format!("setting up hotel {hotel}"))?;
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n % step == 0 || n == hotels as u64 {
                    eprintln!(
                        "  {n}/{hotels} hotels ({:.0} s)",
                        started.elapsed().as_secs_f64()
                    );
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.concurrency as usize)
        .try_collect::<()>()
        .await?;
    let requests = hotels * (1 + 2 * args.catalog.room_types);
    println!(
        "setup: {requests} requests in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if args.wait_seconds > 0 {
        wait_for_read_model(&setup, hotels, Duration::from_secs(args.wait_seconds)).await?;
    }
    Ok(())
}

impl Setup {
    async fn hotel(&self, hotel: i64) -> anyhow::Result<()> {
        self.put(
            &format!("/v1/hotels/{hotel}"),
            json!({"name": format!("Bench Hotel {hotel}"),
                   "city": format!("Benchville {}", hotel % 50),
                   "timezone": "UTC"}),
        )
        .await?;
        for room_type in 1..=self.room_types {
            self.put(
                &format!("/v1/hotels/{hotel}/room-types/{room_type}"),
                json!({"name": format!("type {room_type}"), "max_occupancy": 2}),
            )
            .await?;
        }
        for room_type in 1..=self.room_types {
            let rooms = if (hotel, room_type) == (1, 1) {
                self.hot_rooms
            } else {
                self.rooms
            };
            self.put(
                &format!("/v1/hotels/{hotel}/room-types/{room_type}/inventory"),
                json!({"start_date": self.first, "end_date": self.last,
                       "total_rooms": rooms, "overbooking_allowance": 0,
                       "rate_cents": self.rate_cents}),
            )
            .await?;
        }
        Ok(())
    }

    /// PUT with a few retries for what a busy server may answer (contention, overload,
    /// a dropped connection); anything else is an error.
    async fn put(&self, path: &str, body: Value) -> anyhow::Result<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .http
                .put(format!("{}{path}", self.url))
                .bearer_auth(&self.token)
                .json(&body)
                .send()
                .await;
            let retry = match result {
                Ok(response) if response.status().is_success() => return Ok(()),
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    if !(status.as_u16() == 409 || status.as_u16() == 503) {
                        bail!("PUT {path}: {status} {text}");
                    }
                    format!("{status} {text}")
                }
                Err(e) => e.to_string(),
            };
            if attempt >= 6 {
                bail!("PUT {path}: gave up after {attempt} attempts: {retry}");
            }
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
    }
}

/// Waits until every projection has applied the whole catalog, so the reads scenario
/// measures the read model rather than the fallback to PostgreSQL (a sample search is
/// answered from the cache) and no projection is still catching up during the runs.
async fn wait_for_read_model(setup: &Setup, hotels: i64, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    // The lag gauge is refreshed every couple of seconds: a reading taken right after
    // the last write may predate it.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let mut last_print = Instant::now() - Duration::from_secs(60);
    let end = setup
        .first
        .checked_add_days(Days::new(3))
        .context("date out of range")?;
    loop {
        let lag = match setup
            .http
            .get(format!("{}/metrics", setup.url))
            .send()
            .await
        {
            Ok(response) => {
                let text = response.text().await.unwrap_or_default();
                // Every projection, not only availability: one still catching up on the
                // catalog (the audit log hashes every event) would take CPU from the runs.
                let lags: Vec<f64> = [
                    "availability",
                    "reservations_view",
                    "occupancy",
                    "audit_log",
                ]
                .iter()
                .filter_map(|p| prom::gauge_with_label(&text, "projection_lag_events", p))
                .collect();
                (!lags.is_empty()).then(|| lags.iter().sum())
            }
            Err(_) => None,
        };
        let source = setup
            .http
            .get(format!(
                "{}/v1/hotels/{hotels}/availability?start_date={}&end_date={end}&rooms=1",
                setup.url, setup.first
            ))
            .bearer_auth(&setup.token)
            .send()
            .await
            .ok()
            .map(|r| r.json::<Value>());
        // The last hotel written, answered from the cache with all its room types.
        let source = match source {
            Some(body) => body.await.ok().and_then(|v| {
                let types = v.get("room_types").and_then(Value::as_array)?;
                let source = v.get("source").and_then(Value::as_str)?;
                let complete = types.len() == setup.room_types as usize
                    && types
                        .iter()
                        .all(|t| t.get("available") == Some(&Value::Bool(true)));
                Some(if complete {
                    source.to_owned()
                } else {
                    format!("{source} (incomplete)")
                })
            }),
            None => None,
        };
        if lag == Some(0.0) && source.as_deref() == Some("cache") {
            println!(
                "setup: read models caught up ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if started.elapsed() > limit {
            println!(
                "setup: WARNING the availability read model did not catch up within {} s (lag {lag:?}, source {source:?}); reads may be served by PostgreSQL",
                limit.as_secs()
            );
            return Ok(());
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            eprintln!(
                "  waiting for the read models: lag {} events, searches from {}",
                lag.map_or("?".to_owned(), |l| format!("{l:.0}")),
                source.as_deref().unwrap_or("?")
            );
            last_print = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
