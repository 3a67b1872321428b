//! `loadgen ari`: a year of ARI (availability, rates and inventory) for every room type
//! of a set of hotels, as a channel manager sends it: bulk `PUT /v1/hotels/{h}/ari`
//! requests, as few as the server's limits allow (one hotel each, 1,000 ranges and
//! 40,000 nights at most). The hotels, room types and rate plans are created first and
//! are not timed; then the bulk requests are sent, `--concurrency` hotels at once, and
//! timed from the first request to the last answer. The events they wrote are counted
//! in PostgreSQL (`metadata->>'command' = 'update_ari'`, before and after), and the
//! time until every projection has applied them is reported too.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chrono::{Days, Utc};
use futures::{stream, StreamExt, TryStreamExt};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::postgres::PgPoolOptions;

use crate::plans;
use crate::setup::Admin;
use crate::stats::{self, Latency};
use crate::AriArgs;

/// The run, as printed with `--json` and appended to `--out`.
#[derive(Debug, Serialize)]
pub struct AriRecord {
    pub kind: &'static str,
    pub label: Option<String>,
    pub hotels: i64,
    pub room_types: i64,
    pub nights: u64,
    pub concurrency: u32,
    /// From the first bulk request sent to the last answer.
    pub seconds: f64,
    pub requests: u64,
    /// Ranges over all requests.
    pub ranges: u64,
    /// Nights the answers say were set (a night set by two ranges counts twice).
    pub nights_set: u64,
    /// Nights the server counted against its limit (each change of a range counts).
    pub nights_counted: u64,
    pub nights_per_second: f64,
    /// Latency of one bulk request.
    #[serde(flatten)]
    pub latency: Latency,
    /// Events with `metadata->>'command' = 'update_ari'` written meanwhile, in all and
    /// by type (`None`: no `--database-url`).
    pub events: Option<i64>,
    pub events_by_type: BTreeMap<String, i64>,
    /// From the last answer until every projection's lag was 0 (`None`: not waited for,
    /// or not within `--wait-seconds`).
    pub caught_up_seconds: Option<f64>,
    pub started_at: String,
}

async fn count_events(database_url: &str) -> anyhow::Result<BTreeMap<String, i64>> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(database_url)
        .await
        .context("connecting to PostgreSQL to count events")?;
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT event_type, count(*) FROM events
          WHERE metadata->>'command' = 'update_ari' GROUP BY event_type",
    )
    .fetch_all(&pool)
    .await
    .context("counting the update_ari events")?;
    pool.close().await;
    Ok(rows.into_iter().collect())
}

pub async fn ari(args: AriArgs) -> anyhow::Result<()> {
    let catalog = &args.catalog;
    let first = catalog.first_night()?;
    // Every date the requests name lies in this range.
    first
        .checked_add_days(Days::new(catalog.nights))
        .context("date out of range")?;
    let admin = Arc::new(Admin::new(&args.url, args.admin_token.clone())?);
    println!(
        "ari: {} hotels ({}..={}) x {} room types x {} nights from {first}: hotels, room types and {} plans first (not timed)",
        catalog.hotels,
        catalog.first_hotel,
        catalog.last_hotel(),
        catalog.room_types,
        catalog.nights,
        plans::PLANS.len()
    );
    let room_types = catalog.room_types;
    stream::iter(catalog.first_hotel..=catalog.last_hotel())
        .map(|hotel| {
            let admin = Arc::clone(&admin);
            async move {
                admin
                    .put(
                        &format!("/v1/hotels/{hotel}"),
                        json!({"name": format!("ARI Hotel {hotel}"), "city": "ARIville", "timezone": "UTC"}),
                    )
                    .await?;
                for room_type in 1..=room_types {
                    admin
                        .put(
                            &format!("/v1/hotels/{hotel}/room-types/{room_type}"),
                            json!({"name": format!("type {room_type}"), "max_occupancy": 2}),
                        )
                        .await?;
                }
                for (plan, body) in plans::plan_bodies(room_types) {
                    admin
                        .put(&format!("/v1/hotels/{hotel}/rate-plans/{plan}"), body)
                        .await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .try_collect::<()>()
        .await?;

    // Every hotel's requests, built before the clock starts.
    let mut work: Vec<(i64, Vec<Vec<Value>>)> = Vec::new();
    for hotel in catalog.first_hotel..=catalog.last_hotel() {
        let ranges: Vec<Value> = (1..=room_types)
            .flat_map(|room_type| {
                plans::year_ranges(
                    room_type,
                    first,
                    catalog.nights,
                    args.rooms,
                    args.rate_cents,
                    args.plan_rate_cents,
                )
            })
            .collect();
        work.push((hotel, plans::pack(ranges)));
    }
    let requests: u64 = work.iter().map(|(_, r)| r.len() as u64).sum();
    let ranges: u64 = work
        .iter()
        .flat_map(|(_, r)| r.iter().map(|r| r.len() as u64))
        .sum();
    let nights_counted: u64 = work
        .iter()
        .flat_map(|(_, r)| r.iter().flatten().map(plans::counted_nights))
        .sum();
    println!(
        "ari: {requests} bulk requests, {ranges} ranges, {nights_counted} nights as the server counts them (inventory, plan 1's rate every night; restrictions on Fridays and Saturdays), {} hotels at once",
        args.concurrency
    );

    let before = match &args.database_url {
        Some(url) => Some(count_events(url).await?),
        None => None,
    };
    let started_at = Utc::now();
    let started = Instant::now();
    let answers: Vec<(u64, Vec<u64>)> = stream::iter(work)
        .map(|(hotel, requests)| {
            let admin = Arc::clone(&admin);
            async move {
                let mut set = 0;
                let mut micros = Vec::new();
                for updates in requests {
                    let sent = Instant::now();
                    let (status, answer) = admin
                        .put_once(
                            &format!("/v1/hotels/{hotel}/ari"),
                            json!({ "updates": updates }),
                        )
                        .await?;
                    micros.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
                    if status != 200 {
                        bail!("PUT /v1/hotels/{hotel}/ari: {status} {answer}");
                    }
                    set += answer.get("nights").and_then(Value::as_u64).unwrap_or(0);
                }
                anyhow::Ok((set, micros))
            }
        })
        .buffer_unordered(args.concurrency as usize)
        .try_collect()
        .await?;
    let seconds = started.elapsed().as_secs_f64();
    let mut histogram = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let mut nights_set = 0;
    for (set, micros) in &answers {
        nights_set += set;
        for m in micros {
            histogram.saturating_record((*m).max(1));
        }
    }
    let after_answers = Instant::now();

    let (events, events_by_type) = match (&args.database_url, before) {
        (Some(url), Some(before)) => {
            let after = count_events(url).await?;
            let by_type: BTreeMap<String, i64> = after
                .iter()
                .map(|(t, n)| (t.clone(), n - before.get(t).copied().unwrap_or(0)))
                .filter(|(_, n)| *n != 0)
                .collect();
            (Some(by_type.values().sum()), by_type)
        }
        _ => (None, BTreeMap::new()),
    };

    let mut caught_up_seconds = None;
    if args.wait_seconds > 0 {
        // The lag gauge is refreshed every couple of seconds.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let mut zeros = 0;
        while after_answers.elapsed() < Duration::from_secs(args.wait_seconds) {
            if admin.projection_lag().await == Some(0.0) {
                zeros += 1;
                if zeros >= 2 {
                    caught_up_seconds = Some(stats::round2(after_answers.elapsed().as_secs_f64()));
                    break;
                }
            } else {
                zeros = 0;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    let record = AriRecord {
        kind: "ari",
        label: args.label.clone(),
        hotels: catalog.hotels,
        room_types,
        nights: catalog.nights,
        concurrency: args.concurrency,
        seconds: stats::round2(seconds),
        requests,
        ranges,
        nights_set,
        nights_counted,
        nights_per_second: stats::rate(nights_set, seconds),
        latency: Latency::of(&histogram),
        events,
        events_by_type,
        caught_up_seconds,
        started_at: started_at.to_rfc3339(),
    };
    println!(
        "ari: {} requests in {:.2} s ({:.0} nights/s); nights set {}; a request p50 {:.1} ms, max {:.1} ms",
        record.requests,
        record.seconds,
        record.nights_per_second,
        record.nights_set,
        record.latency.p50_ms,
        record.latency.max_ms
    );
    match record.events {
        Some(n) => println!(
            "ari: {n} events written ({})",
            record
                .events_by_type
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => println!("ari: events not counted (no --database-url)"),
    }
    match record.caught_up_seconds {
        Some(s) => println!("ari: every projection applied them {s:.1} s after the last answer"),
        None if args.wait_seconds > 0 => println!(
            "ari: the projections had not caught up {} s after the last answer",
            args.wait_seconds
        ),
        None => {}
    }
    stats::write_record(&record, args.json, args.out.as_deref())?;
    Ok(())
}
