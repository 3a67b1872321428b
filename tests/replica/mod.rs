//! The read replica (`READ_DATABASE_URL`), on a primary and streaming replica of the
//! test's own: reads that may be as old as `as_of` go to the replica, a write's
//! `Consistency-Token` makes a read see that write, and a replica that dies mid-load
//! costs no failed request.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::sync::watch;

use crate::support::*;

/// A server on a fresh database of `pair`'s primary, reading `pair`'s replica.
async fn app_on(pair: &ReplicaPair) -> TestApp {
    let db = TestDb::on(&pair.primary_url()).await;
    let replica_url = pair.replica_url(&db.name);
    spawn_app_on(
        db,
        |settings| settings.read_database_url = Some(replica_url),
        test_gateway(),
    )
    .await
}

/// A pool on the replica's copy of `database`, once the replica has replayed its
/// creation (on a busy machine it may not have yet when the test gets here).
async fn replica_pool(pair: &ReplicaPair, database: &str) -> PgPool {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match PgPoolOptions::new()
            .max_connections(2)
            .connect(&pair.replica_url(database))
            .await
        {
            Ok(pool) => return pool,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the replica: {e}"),
        }
    }
}

/// Waits until the replica has replayed everything the primary has written.
async fn wait_replayed(app: &TestApp, replica: &PgPool) {
    let target: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&app.db.pool)
        .await
        .expect("primary position");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let caught_up: bool =
            sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn")
                .bind(&target)
                .fetch_one(replica)
                .await
                .expect("replica position");
        if caught_up {
            // And the server's monitor has seen it (it samples every 100 ms).
            tokio::time::sleep(Duration::from_millis(300)).await;
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replica never caught up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn hotel_name(reply: &Reply) -> String {
    reply.assert_status(200);
    reply.str("name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_go_to_the_replica_and_a_writes_consistency_token_sees_the_write() {
    // Arrange: a hotel on both; then the replica stops replaying.
    let pair = ReplicaPair::start();
    let app = app_on(&pair).await;
    app.seed_hotel(day(1), 10, 5).await;
    let replica = replica_pool(&pair, &app.db.name).await;
    wait_replayed(&app, &replica).await;
    sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&replica)
        .await
        .expect("pause replay");

    // Act: rename the hotel, then read it with and without the write's token.
    let renamed = app
        .put_hotel(
            HOTEL,
            &json!({"name": "Hotel Tejo Novo", "city": "Lisbon", "timezone": "Europe/Lisbon"}),
        )
        .await;
    let token = renamed
        .headers
        .get("consistency-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let without_token = app.get_hotel(WEB, HOTEL).await;
    let with_token = app
        .send(
            app.request(Method::GET, &format!("/v1/hotels/{HOTEL}"), Some(WEB))
                .header("Consistency-Token", token.clone().unwrap_or_default()),
        )
        .await;
    let availability = app.availability(WEB, HOTEL, day(2), day(4), Some(1)).await;
    // Nights and a hotel the paused replica has not replayed: unknown there, so the
    // primary answers them, not "0 left" or "no such hotel".
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(30), "end_date": day(40), "total_rooms": 4,
                "overbooking_allowance": 0, "rate_cents": RATE}),
    )
    .await
    .assert_status(200);
    let new_nights = app
        .availability(WEB, HOTEL, day(31), day(34), Some(1))
        .await;
    let new_nights_in_calendar = app
        .get(
            &format!(
                "/v1/hotels/{HOTEL}/calendar?start_date={}&end_date={}",
                day(31),
                day(34)
            ),
            Some(ADMIN),
        )
        .await;
    app.put_hotel(
        813,
        &json!({"name": "Hotel Douro", "city": "Porto", "timezone": "Europe/Lisbon"}),
    )
    .await
    .assert_status(200);
    let new_hotel = app.availability(WEB, 813, day(2), day(4), Some(1)).await;
    let bad_token = app
        .send(
            app.request(Method::GET, &format!("/v1/hotels/{HOTEL}"), Some(WEB))
                .header("Consistency-Token", "yesterday"),
        )
        .await;
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&replica)
        .await
        .expect("resume replay");
    wait_replayed(&app, &replica).await;
    let after_replay = app.get_hotel(WEB, HOTEL).await;
    let read = app.get(&format!("/v1/hotels/{HOTEL}"), Some(WEB)).await;

    // Assert
    renamed.assert_status(200);
    assert!(token.is_some(), "a write answers a consistency token");
    assert_eq!(
        hotel_name(&without_token),
        "Hotel Tejo",
        "read from the paused replica"
    );
    assert_eq!(
        hotel_name(&with_token),
        "Hotel Tejo Novo",
        "the token's write is seen"
    );
    availability.assert_status(200);
    assert_eq!(availability.json["source"], "replica");
    new_nights.assert_status(200);
    assert_eq!(new_nights.json["source"], "database", "{}", new_nights.text);
    let remaining: Vec<i64> = new_nights.json["room_types"][0]["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .filter_map(|n| n["remaining"].as_i64())
        .collect();
    assert_eq!(remaining, vec![4, 4, 4], "{}", new_nights.text);
    // The staff's calendar too: the primary's nights, not "no inventory".
    new_nights_in_calendar.assert_status(200);
    assert_eq!(
        new_nights_in_calendar.json["source"], "database",
        "{}",
        new_nights_in_calendar.text
    );
    let rooms: Vec<(bool, i64)> = new_nights_in_calendar.json["room_types"][0]["nights"]
        .as_array()
        .expect("calendar nights")
        .iter()
        .filter_map(|n| Some((n["has_inventory"].as_bool()?, n["total_rooms"].as_i64()?)))
        .collect();
    assert_eq!(
        rooms,
        vec![(true, 4), (true, 4), (true, 4)],
        "{}",
        new_nights_in_calendar.text
    );
    new_hotel.assert_status(200);
    assert_eq!(new_hotel.json["source"], "database", "{}", new_hotel.text);
    bad_token.assert_error(400, "invalid_consistency_token");
    assert_eq!(hotel_name(&after_replay), "Hotel Tejo Novo");
    assert!(
        read.headers.get("consistency-token").is_none(),
        "reads answer no token"
    );
    replica.close().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_load_costs_no_failed_request() {
    // Arrange
    let pair = ReplicaPair::start();
    let app = app_on(&pair).await;
    app.seed_hotel(day(1), 30, 50).await;
    let replica = replica_pool(&pair, &app.db.name).await;
    wait_replayed(&app, &replica).await;
    replica.close().await;
    let (stop, stopped) = watch::channel(false);
    let readers: Vec<_> = (0..8)
        .map(|n| {
            let stopped = stopped.clone();
            let client = app.client.clone();
            let base = app.address.clone();
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                let mut i = 0_u64;
                while !*stopped.borrow() {
                    i += 1;
                    let from = day(1 + (i + n) % 20);
                    let path = match i % 3 {
                        0 => format!("/v1/hotels/{HOTEL}"),
                        1 => format!(
                            "/v1/hotels/{HOTEL}/availability?start_date={from}&end_date={}",
                            plus_days(from, 2)
                        ),
                        _ => format!(
                            "/v1/availability?city=Lisbon&start_date={from}&end_date={}",
                            plus_days(from, 2)
                        ),
                    };
                    let status = client
                        .get(format!("{base}{path}"))
                        .bearer_auth(WEB)
                        .send()
                        .await
                        .map(|r| r.status().as_u16())
                        .unwrap_or(0);
                    statuses.push(status);
                }
                statuses
            })
        })
        .collect();

    // Act: the replica dies while they read, and holds are written meanwhile.
    tokio::time::sleep(Duration::from_millis(700)).await;
    pair.kill_replica();
    for n in 0..10 {
        app.hold(WEB, &format!("during-{n}"), &hold_body(day(3), day(5), 1))
            .await
            .assert_status(201);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let _ = stop.send(true);
    let mut statuses = Vec::new();
    for reader in readers {
        statuses.extend(reader.await.expect("reader"));
    }
    let metrics = app.get("/metrics", None).await;

    // Assert
    assert!(statuses.len() > 50, "{} reads", statuses.len());
    let failed: Vec<&u16> = statuses.iter().filter(|s| **s != 200).collect();
    assert!(
        failed.is_empty(),
        "{} of {} reads failed: {failed:?}",
        failed.len(),
        statuses.len()
    );
    // (The recorder is the process's: the other replica test only falls back behind
    // a token, never for a replica that is down.)
    let fallbacks = metrics
        .text
        .lines()
        .filter(|l| l.starts_with("replica_fallbacks_total"))
        .filter(|l| l.contains("reason=\"failed\"") || l.contains("reason=\"down\""))
        .count();
    assert!(fallbacks > 0, "falling back is counted:\n{}", metrics.text);
    assert!(
        metrics.text.contains("replica_reads_total"),
        "the replica served reads"
    );
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

/// What the Redis model says is left of the king rooms on day(20) and day(21), once it
/// answers and has been stable for half a second.
async fn model_left(keys: &projections::availability::Keys) -> Vec<i64> {
    use projections::availability::{self, Reader};
    let reader = Reader::new(keys.clone());
    let mut redis = availability::connect("redis://127.0.0.1:6379").expect("redis");
    let (mut left, mut same) = (Vec::new(), 0);
    for _ in 0..300 {
        let now: Vec<i64> = match reader
            .read(&mut redis, HOTEL, &[day(20), day(21)])
            .await
            .expect("read")
        {
            Some(cached) => cached
                .hotel
                .days
                .iter()
                .filter_map(|d| d.night(KING).map(|n| n.remaining()))
                .collect(),
            None => Vec::new(),
        };
        same = if !now.is_empty() && now == left {
            same + 1
        } else {
            0
        };
        left = now;
        if same >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_failover_the_redis_model_is_rebuilt_from_the_promoted_log() {
    use projections::availability::{self, Keys};
    use store::write::Strategy;
    // Arrange: the model in Redis follows the primary; the replica has replayed it all.
    let pair = ReplicaPair::start();
    let db = TestDb::on(&pair.primary_url()).await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(20), 4, 5).await;
    let keys = Keys::for_database(&db.name);
    let redis_url = "redis://127.0.0.1:6379";
    let follow = |pool: PgPool| {
        let (stop, stopped) = watch::channel(false);
        let runner = reservations::workers::spawn_availability_runner(
            pool,
            availability::connect(redis_url).expect("redis"),
            keys.clone(),
            fast_runners(),
            &projections::Tail::default(),
            stopped,
        );
        (stop, runner)
    };
    let (stop, runner) = follow(db.pool.clone());
    wait_checkpoints(&db.pool, &[availability::NAME]).await;
    let replica = replica_pool(&pair, &db.name).await;
    // The runners commit asynchronously: wait for the insert position, which covers
    // commits not yet written.
    let target: String = sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
        .fetch_one(&db.pool)
        .await
        .expect("position");
    let mut replayed = false;
    for _ in 0..300 {
        replayed = sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn")
            .bind(&target)
            .fetch_one(&replica)
            .await
            .expect("replay position");
        if replayed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(replayed, "the replica replays the primary");
    replica.close().await;

    // ... then the replica stops, and the primary commits two rooms held on two nights,
    // which the model takes and the replica never sees.
    pair.kill_replica();
    svc.hold(
        "web",
        "web",
        key("lost-on-failover"),
        hold_request(stay(day(20), day(22)), 2, 1),
    )
    .await
    .expect("held on the primary");
    wait_checkpoints(&db.pool, &[availability::NAME]).await;
    assert_eq!(model_left(&keys).await, [3, 3], "the model took the hold");
    let _ = stop.send(true);
    runner.await.expect("runner");

    // Act: the primary dies; the replica is promoted without the hold, and a runner
    // follows the promoted log with the model as the old primary left it.
    pair.kill_primary();
    pair.start_replica();
    pair.promote_replica();
    let promoted = PgPoolOptions::new()
        .max_connections(8)
        .connect(&pair.replica_url(&db.name))
        .await
        .expect("the promoted replica");
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM reservations")
        .fetch_one(&promoted)
        .await
        .expect("count");
    assert_eq!(held, 0, "the hold was lost with the old primary");
    let (stop, runner) = follow(promoted.clone());

    // Assert: the model is rebuilt from the promoted log: every night has its five
    // rooms again (resumed, it would still count the lost hold: 3 left).
    assert_eq!(
        model_left(&keys).await,
        [5, 5],
        "the model after the failover"
    );
    let _ = stop.send(true);
    runner.await.expect("runner");
    promoted.close().await;
    db.drop_database().await;
}
