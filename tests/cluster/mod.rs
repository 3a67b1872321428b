//! The availability model and the hold limit on a Redis Cluster of the test's own (three
//! masters, a replica each): hotels spread over the cluster's slots read as PostgreSQL
//! says, a city search fans out and merges, a rebuild fills a new generation across
//! every node, a master killed under load costs reads from PostgreSQL for a moment but
//! no failed request and no wrong answer, and a master that comes back empty is noticed
//! and the model rebuilt.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use projections::availability::{self, Keys};
use serde_json::{json, Value};

use crate::support::*;

const CITY: &str = "Clusterville";
const NIGHTS: u64 = 4;
/// Enough that the load of the failover test never takes a night down to its last
/// rooms (which PostgreSQL answers, by design).
const ROOMS: i64 = 5_000;

/// Hotels in consecutive buckets, so spread over the cluster's masters.
fn hotels(count: i64) -> Vec<i64> {
    (0..count).map(|i| 900 + i).collect()
}

fn first_night() -> NaiveDate {
    NaiveDate::parse_from_str(&date(20), "%Y-%m-%d").expect("date")
}

/// An app on `cluster` that runs the projections, the hold limit at 2 per guest.
async fn app_on(cluster: &RedisCluster) -> TestApp {
    let url = cluster.url();
    spawn_app_with(move |settings| {
        settings.redis_url = url;
        settings.run_projections = true;
        settings.hold_limit_per_guest = 2;
    })
    .await
}

async fn seed(app: &TestApp, hotels: &[i64]) {
    let first = first_night();
    for hotel in hotels {
        app.put_hotel(
            *hotel,
            &json!({"name": format!("Hotel {hotel}"), "city": CITY, "timezone": "Europe/Lisbon"}),
        )
        .await
        .assert_status(200);
        app.put_room_type(*hotel, KING, &json!({"name": "king", "max_occupancy": 2}))
            .await
            .assert_status(200);
        app.put_inventory(
            *hotel,
            KING,
            &json!({"start_date": first, "end_date": plus_days(first, NIGHTS),
                    "total_rooms": ROOMS, "overbooking_allowance": 0, "rate_cents": RATE}),
        )
        .await
        .assert_status(200);
    }
}

fn hold_at(hotel: i64, night: u64, guest: &str) -> Value {
    let start = plus_days(first_night(), night);
    json!({"hotel_id": hotel, "room_type_id": KING, "start_date": start,
           "end_date": plus_days(start, 1), "rooms": 1,
           "guest": {"name": "Guest", "email": guest}})
}

/// What PostgreSQL says is left of the king rooms of `hotel`, night by night.
async fn left_in_database(app: &TestApp, hotel: i64) -> Vec<i64> {
    night_rows(&app.db.pool)
        .await
        .into_iter()
        .filter(|((h, t, _), _)| *h == hotel && *t == KING)
        .map(|(_, row)| row.rooms_left())
        .collect()
}

/// The hotel's availability: its source and what is left night by night.
async fn availability_of(app: &TestApp, hotel: i64) -> (u16, String, Vec<i64>) {
    let first = first_night();
    let reply = app
        .availability(WEB, hotel, first, plus_days(first, NIGHTS), None)
        .await;
    let left = reply.json["room_types"][0]["nights"]
        .as_array()
        .map(|nights| {
            nights
                .iter()
                .filter_map(|n| n["remaining"].as_i64())
                .collect()
        })
        .unwrap_or_default();
    let source = reply.json["source"].as_str().unwrap_or_default().to_owned();
    (reply.status.as_u16(), source, left)
}

/// Waits until every hotel's availability is answered by the model and says what
/// PostgreSQL says; fails with the differences when it does not within 30 s.
async fn assert_model_matches_database(app: &TestApp, hotels: &[i64]) {
    wait_checkpoints(&app.db.pool, &[availability::NAME]).await;
    let mut differences = BTreeMap::new();
    for _ in 0..300 {
        differences.clear();
        for hotel in hotels {
            let expected = left_in_database(app, *hotel).await;
            let (_, source, left) = availability_of(app, *hotel).await;
            if source != "cache" || left != expected {
                differences.insert(*hotel, format!("{source}: {left:?}, database {expected:?}"));
            }
        }
        if differences.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the model does not match PostgreSQL: {differences:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_model_on_a_redis_cluster_answers_as_postgresql_does_and_rebuilds_across_its_nodes() {
    // Arrange: twelve hotels of one city, in twelve buckets over three masters.
    let cluster = RedisCluster::start().await;
    let app = app_on(&cluster).await;
    let hotels = hotels(12);
    seed(&app, &hotels).await;

    // Act: 24 clients hold rooms across the hotels at once, each as its own guest.
    let mut tasks = Vec::new();
    for client in 0..24_u64 {
        let (app_url, http) = (app.address.clone(), app.client.clone());
        let hotel = hotels[client as usize % hotels.len()];
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for n in 0..3_u64 {
                let response = http
                    .post(format!("{app_url}/v1/reservations"))
                    .bearer_auth(WEB)
                    .header("Idempotency-Key", format!("cluster-{client}-{n}"))
                    .json(&hold_at(
                        hotel,
                        n % NIGHTS,
                        &format!("g{client}-{n}@example.com"),
                    ))
                    .send()
                    .await
                    .expect("hold");
                statuses.push(response.status().as_u16());
            }
            statuses
        }));
    }
    for task in tasks {
        assert_eq!(task.await.expect("client"), vec![201, 201, 201]);
    }

    // Assert: every hotel reads from the model as PostgreSQL says ...
    assert_model_matches_database(&app, &hotels).await;
    // ... the city search fans out over the slots and merges every hotel, in one answer
    let first = first_night();
    let search = app
        .get(
            &format!(
                "/v1/availability?city={CITY}&start_date={first}&end_date={}&limit=100",
                plus_days(first, 2)
            ),
            Some(WEB),
        )
        .await;
    let body = search.assert_status(200);
    assert_eq!(body["source"], "cache", "{body}");
    let mut found: Vec<i64> = body["hotels"]
        .as_array()
        .expect("hotels")
        .iter()
        .filter_map(|h| h["hotel_id"].as_i64())
        .collect();
    found.sort_unstable();
    assert_eq!(found, hotels);
    // ... and the hold limit counts on the cluster: a guest's third hold is refused.
    for n in 0..2 {
        app.hold(
            WEB,
            &format!("same-guest-{n}"),
            &hold_at(hotels[0], 3, "same@example.com"),
        )
        .await
        .assert_status(201);
    }
    app.hold(
        WEB,
        "same-guest-2",
        &hold_at(hotels[0], 3, "same@example.com"),
    )
    .await
    .assert_error(429, "rate_limited");

    // And a rebuild from position zero fills a new generation on every node, which the
    // running server then reads from.
    let generation = reservations::workers::rebuild(
        &app.db.pool,
        Some(reservations::workers::RedisModel {
            redis: availability::connect(&cluster.url()).expect("cluster"),
            keys: Keys::for_database(&app.db.name),
        }),
        reservations::workers::ProjectionName::Availability,
        7,
        |_, _| {},
    )
    .await
    .expect("rebuild");
    assert_eq!(generation, 2);
    assert_model_matches_database(&app, &hotels).await;
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_master_killed_under_load_costs_reads_from_postgresql_but_no_failed_request() {
    // Arrange: hotels over every master, a server reading and projecting through them.
    let mut cluster = RedisCluster::start().await;
    let app = app_on(&cluster).await;
    let hotels = hotels(9);
    seed(&app, &hotels).await;
    assert_model_matches_database(&app, &hotels).await;
    let victim = cluster
        .master_of(&format!("{{b{}}}", availability::bucket(hotels[0])))
        .expect("the master of the first hotel's slot");

    // Act: readers and holders run for six seconds; the master serving the first
    // hotel is killed after two.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let from_database = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for client in 0..12_usize {
        let (url, http, stop) = (app.address.clone(), app.client.clone(), stop.clone());
        let from_database = from_database.clone();
        let hotel = hotels[client % hotels.len()];
        tasks.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut n = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let first = first_night();
                let response = if client % 3 == 0 {
                    http.post(format!("{url}/v1/reservations"))
                        .bearer_auth(WEB)
                        .header("Idempotency-Key", format!("load-{client}-{n}"))
                        .json(&hold_at(
                            hotel,
                            n % NIGHTS,
                            &format!("l{client}-{n}@example.com"),
                        ))
                        .send()
                        .await
                } else {
                    http.get(format!(
                        "{url}/v1/hotels/{hotel}/availability?start_date={first}&end_date={}",
                        plus_days(first, NIGHTS)
                    ))
                    .bearer_auth(WEB)
                    .send()
                    .await
                };
                match response {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let body: Value = response.json().await.unwrap_or(Value::Null);
                        if body["source"] == "database" {
                            from_database.fetch_add(1, Ordering::Relaxed);
                        }
                        if !matches!(status, 200 | 201 | 409) {
                            failures.push(format!("{status} {body}"));
                        }
                    }
                    Err(e) => failures.push(e.to_string()),
                }
            }
            failures
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = from_database.load(Ordering::Relaxed);
    cluster.kill(victim);
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let mut failures = Vec::new();
    for task in tasks {
        failures.extend(task.await.expect("client"));
    }

    // Assert: no request failed; PostgreSQL answered reads while the slot had no
    // master; the cluster promoted the replica, and the model, caught up, says exactly
    // what PostgreSQL says (no write the checkpoint counts was lost in the failover).
    assert!(
        failures.is_empty(),
        "{} failed: {failures:#?}",
        failures.len()
    );
    assert!(
        from_database.load(Ordering::Relaxed) > before,
        "reads of the killed master's hotels fell back to PostgreSQL"
    );
    cluster.wait_healthy(3, 2).await;
    assert_model_matches_database(&app, &hotels).await;
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_master_that_loses_its_data_is_noticed_and_the_model_rebuilt() {
    // Arrange: the model caught up over the cluster.
    let cluster = RedisCluster::start().await;
    let app = app_on(&cluster).await;
    let hotels = hotels(6);
    seed(&app, &hotels).await;
    for (n, hotel) in hotels.iter().enumerate() {
        app.hold_ok(
            WEB,
            &format!("before-{n}"),
            &hold_at(*hotel, 1, &format!("b{n}@example.com")),
        )
        .await;
    }
    assert_model_matches_database(&app, &hotels).await;

    // Act: one master (and so its replica) loses everything, and a hold follows.
    let victim = cluster
        .master_of(&format!("{{b{}}}", availability::bucket(hotels[0])))
        .expect("a master");
    assert_eq!(cluster.on_node(victim, &["FLUSHALL"]).trim(), "OK");
    app.hold_ok(WEB, "after", &hold_at(hotels[0], 2, "after@example.com"))
        .await;

    // Assert: the runner notices the missing buckets, rebuilds from position zero, and
    // the model reads as PostgreSQL again, the lost hotels and the later hold included.
    assert_model_matches_database(&app, &hotels).await;
    app.finish().await;
}
