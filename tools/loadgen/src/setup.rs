//! `loadgen setup`: the benchmark catalog through the admin API — for every hotel its
//! PUT, its room types and one inventory range per room type (or, with `--plans`, its
//! three rate plans and one bulk ARI request with inventory, plan rates and
//! restrictions) — a bounded number of hotels in flight at once. Every write is
//! idempotent, so running it twice is harmless.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{Days, NaiveDate};
use futures::{stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};

use crate::plans::{self, PlanSet};
use crate::{prom, SetupArgs};

/// The admin API: PUTs with retries, the projections' lag.
pub struct Admin {
    pub http: reqwest::Client,
    pub url: String,
    pub token: String,
}

impl Admin {
    pub fn new(url: &str, token: String) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .tcp_nodelay(true)
                .build()?,
            url: url.trim_end_matches('/').to_owned(),
            token,
        })
    }
}

struct Setup {
    admin: Admin,
    first: NaiveDate,
    last: NaiveDate,
    first_hotel: i64,
    room_types: i64,
    rooms: i64,
    hot_rooms: i64,
    rate_cents: i64,
    plans: Option<PlanSet>,
    city: Option<String>,
    plan_rate_cents: i64,
}

pub async fn setup(args: SetupArgs) -> anyhow::Result<()> {
    let first = args.catalog.first_night()?;
    let last = first
        .checked_add_days(Days::new(args.catalog.nights))
        .context("date out of range")?;
    let setup = Arc::new(Setup {
        admin: Admin::new(&args.url, args.admin_token)?,
        first,
        last,
        first_hotel: args.catalog.first_hotel,
        room_types: args.catalog.room_types,
        rooms: args.rooms,
        hot_rooms: args.hot_rooms.unwrap_or(args.rooms),
        rate_cents: args.rate_cents,
        plans: args.plans,
        city: args.city,
        plan_rate_cents: args.plan_rate_cents,
    });
    let hotels = args.catalog.hotels;
    println!(
        "setup: {hotels} hotels ({}..={}) x {} room types x {} nights from {first} ({} rooms, hot room type {}){}, {} in flight",
        args.catalog.first_hotel,
        args.catalog.last_hotel(),
        args.catalog.room_types,
        args.catalog.nights,
        setup.rooms,
        setup.hot_rooms,
        match setup.plans {
            Some(set) => format!(", {} rate plans and {set:?} restrictions by bulk ARI", plans::PLANS.len()),
            None => String::new(),
        },
        args.concurrency
    );
    let started = Instant::now();
    let done = Arc::new(AtomicU64::new(0));
    let step = (hotels as u64 / 20).max(1);
    stream::iter(args.catalog.first_hotel..=args.catalog.last_hotel())
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
    let requests = match setup.plans {
        None => hotels * (1 + 2 * args.catalog.room_types),
        Some(_) => hotels * (2 + args.catalog.room_types + plans::PLANS.len() as i64),
    };
    println!(
        "setup: {requests} requests in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if args.wait_seconds > 0 {
        wait_for_read_model(
            &setup,
            args.catalog.last_hotel(),
            Duration::from_secs(args.wait_seconds),
        )
        .await?;
    }
    Ok(())
}

impl Setup {
    async fn hotel(&self, hotel: i64) -> anyhow::Result<()> {
        let city = match &self.city {
            Some(city) => city.clone(),
            None => format!("Benchville {}", hotel % 50),
        };
        let admin = &self.admin;
        admin
            .put(
                &format!("/v1/hotels/{hotel}"),
                json!({"name": format!("Bench Hotel {hotel}"), "city": city, "timezone": "UTC"}),
            )
            .await?;
        for room_type in 1..=self.room_types {
            admin
                .put(
                    &format!("/v1/hotels/{hotel}/room-types/{room_type}"),
                    json!({"name": format!("type {room_type}"), "max_occupancy": 2}),
                )
                .await?;
        }
        if let Some(set) = self.plans {
            for (plan, body) in plans::plan_bodies(self.room_types) {
                admin
                    .put(&format!("/v1/hotels/{hotel}/rate-plans/{plan}"), body)
                    .await?;
            }
            let nights = plans::Nights {
                first: self.first,
                last: self.last,
                rooms: self.rooms,
                rate_cents: self.rate_cents,
                plan_rate_cents: self.plan_rate_cents,
            };
            let ranges: Vec<Value> = (1..=self.room_types)
                .flat_map(|room_type| plans::setup_ranges(set, hotel, room_type, &nights))
                .collect();
            for updates in plans::pack(ranges) {
                admin
                    .put(
                        &format!("/v1/hotels/{hotel}/ari"),
                        json!({ "updates": updates }),
                    )
                    .await?;
            }
            return Ok(());
        }
        for room_type in 1..=self.room_types {
            let rooms = if (hotel, room_type) == (self.first_hotel, 1) {
                self.hot_rooms
            } else {
                self.rooms
            };
            admin
                .put(
                    &format!("/v1/hotels/{hotel}/room-types/{room_type}/inventory"),
                    json!({"start_date": self.first, "end_date": self.last,
                           "total_rooms": rooms, "overbooking_allowance": 0,
                           "rate_cents": self.rate_cents}),
                )
                .await?;
        }
        Ok(())
    }
}

impl Admin {
    /// The sum of every projection's lag in events (`None`: `/metrics` did not answer,
    /// or had no lag gauge). Every projection, not only availability: one still catching
    /// up (the audit log hashes every event) would take CPU from the runs.
    pub async fn projection_lag(&self) -> Option<f64> {
        let response = self
            .http
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .ok()?;
        let text = response.text().await.unwrap_or_default();
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

    /// One PUT, no retry (a timed request): its status and JSON answer (`null` if it
    /// had none).
    pub async fn put_once(&self, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
        let response = self
            .http
            .put(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("PUT {path}"))?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    /// PUT with a few retries for what a busy server may answer (contention, overload,
    /// a dropped connection); anything else is an error. Returns the answer's JSON
    /// (`null` if it had none).
    pub async fn put(&self, path: &str, body: Value) -> anyhow::Result<Value> {
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
                Ok(response) if response.status().is_success() => {
                    return Ok(response.json().await.unwrap_or(Value::Null));
                }
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
async fn wait_for_read_model(
    setup: &Setup,
    last_hotel: i64,
    limit: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    // The lag gauge is refreshed every couple of seconds: a reading taken right after
    // the last write may predate it.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let mut last_print = Instant::now() - Duration::from_secs(60);
    let end = setup
        .first
        .checked_add_days(Days::new(3))
        .context("date out of range")?;
    let admin = &setup.admin;
    loop {
        let lag = admin.projection_lag().await;
        let source = admin
            .http
            .get(format!(
                "{}/v1/hotels/{last_hotel}/availability?start_date={}&end_date={end}&rooms=1",
                admin.url, setup.first
            ))
            .bearer_auth(&admin.token)
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
