//! Several `reservations serve` processes on one primary, each batching its own holds
//! (group commit), racing for the last rooms: the invariant holds across processes and
//! every hold a server acknowledged exists.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use store::write::Strategy;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_racing_for_the_last_rooms_sell_each_room_night_once() {
    // Arrange: 7 rooms on three overlapping nights, three servers.
    let db = TestDb::new().await;
    hotel_with_rooms(&db.service(Strategy::Group), day(1), 5, 7).await;
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(ServerProcess::start(&db, &[("WRITE_STRATEGY", "group".to_owned())]).await);
    }
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");

    // Act: 60 clients at once, twenty per server, each wanting one room on all nights
    // of an overlapping stay.
    let attempts = (0..60).map(|n| {
        let client = client.clone();
        let url = servers[n % 3].url("/v1/reservations");
        async move {
            let from = day(1 + (n % 2) as u64);
            let body = json!({
                "hotel_id": HOTEL, "room_type_id": KING,
                "start_date": from, "end_date": plus_days(from, 3), "rooms": 1,
                "guest": {"name": "Racer", "email": format!("racer{n}@example.com")},
            });
            let reply = client
                .post(url)
                .bearer_auth(WEB)
                .header("Idempotency-Key", format!("race-{n}"))
                .json(&body)
                .send()
                .await
                .expect("an answer");
            let status = reply.status().as_u16();
            let body: serde_json::Value = reply.json().await.unwrap_or_default();
            (status, body)
        }
    });
    let answers = futures::future::join_all(attempts).await;
    for server in &mut servers {
        server.kill();
    }

    // Assert: seven held (night day(2) and day(3) are in every stay), the rest sold
    // out, every acknowledged hold in the database, and the invariant.
    let held: BTreeSet<String> = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| body["reservation_id"].as_str().expect("an id").to_owned())
        .collect();
    let refused = answers
        .iter()
        .filter(|(status, body)| *status == 409 && body["error"] == "sold_out")
        .count();
    assert_eq!(held.len(), 7, "answers: {answers:?}");
    assert_eq!(refused, 53, "answers: {answers:?}");
    let stored: BTreeSet<String> =
        sqlx::query_scalar("SELECT reservation_id::text FROM reservations WHERE status = 'held'")
            .fetch_all(&db.pool)
            .await
            .expect("reservations")
            .into_iter()
            .collect();
    assert_eq!(stored, held);
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

/// `kill -9` of a server in the middle of its batches: every hold it answered 201 for
/// is in the log and the tables, a hold whose answer was lost to the kill is either
/// wholly there or wholly absent, the counters agree with the allocations and the
/// replay, and a retry of a lost hold with its key, on a second server, completes it
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_mid_batch_loses_no_acknowledged_hold() {
    // Arrange: plenty of rooms on 20 nights, one server batching holds.
    let db = TestDb::new().await;
    hotel_with_rooms(&db.service(Strategy::Group), day(1), 22, 10_000).await;
    let mut first = ServerProcess::start(&db, &[("WRITE_STRATEGY", "group".to_owned())]).await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let body = |client: usize, n: usize| {
        let from = day(1 + (n % 20) as u64);
        json!({
            "hotel_id": HOTEL, "room_type_id": KING,
            "start_date": from, "end_date": plus_days(from, 2), "rooms": 1,
            "guest": {"name": "Load", "email": format!("c{client}-{n}@example.com")},
        })
    };

    // Act: 16 clients hold without pause; the server is killed once 300 holds are in.
    let url = first.url("/v1/reservations");
    let tasks: Vec<_> = (0..16)
        .map(|c| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let (mut acknowledged, mut unanswered) = (Vec::new(), Vec::new());
                for n in 0.. {
                    let key = format!("chaos-{c}-{n}");
                    let sent = client
                        .post(&url)
                        .bearer_auth(WEB)
                        .header("Idempotency-Key", &key)
                        .json(&body(c, n))
                        .send()
                        .await;
                    match sent {
                        Ok(reply) if reply.status().as_u16() == 201 => {
                            let view: serde_json::Value = reply.json().await.expect("json");
                            let id = view["reservation_id"].as_str().expect("id").to_owned();
                            acknowledged.push(id);
                        }
                        Ok(reply) => panic!("unexpected {}", reply.status()),
                        // Killed: this request's answer is lost; so is every later one.
                        Err(_) => {
                            unanswered.push((key, body(c, n)));
                            break;
                        }
                    }
                }
                (acknowledged, unanswered)
            })
        })
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while reservations(&db.pool).await < 300 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the load never got going"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill();
    let mut acknowledged = BTreeSet::new();
    let mut unanswered = Vec::new();
    for task in tasks {
        let (ids, lost) = task.await.expect("client");
        acknowledged.extend(ids);
        unanswered.extend(lost);
    }

    // Assert: every acknowledged hold is there, in the row and in the log.
    let stored: BTreeSet<String> =
        sqlx::query_scalar("SELECT reservation_id::text FROM reservations")
            .fetch_all(&db.pool)
            .await
            .expect("rows")
            .into_iter()
            .collect();
    let logged: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE event_type = 'ReservationHeld'")
            .fetch_one(&db.pool)
            .await
            .expect("log");
    assert!(
        acknowledged.len() >= 100,
        "{} acknowledged",
        acknowledged.len()
    );
    assert!(!unanswered.is_empty(), "the kill cut no request short");
    let missing: Vec<&String> = acknowledged.difference(&stored).collect();
    assert!(missing.is_empty(), "acknowledged, then lost: {missing:?}");
    assert_eq!(
        logged as usize,
        stored.len(),
        "a row without its event or the reverse"
    );
    assert_invariants(&db.pool).await;

    // A client retries what it was not answered, with its key, on a second server:
    // each completes once (a hold that committed is replayed, one that did not is made).
    let second = ServerProcess::start(&db, &[("WRITE_STRATEGY", "group".to_owned())]).await;
    for (key, body) in &unanswered {
        let reply = second
            .call(
                reqwest::Method::POST,
                "/v1/reservations",
                WEB,
                Some(key),
                Some(body),
            )
            .await;
        reply.assert_status(201);
    }
    let after: i64 = reservations(&db.pool).await;
    assert!(
        after as usize <= stored.len() + unanswered.len(),
        "a retried hold was made twice: {after} rows"
    );
    let keys: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM idempotency_keys WHERE key LIKE 'chaos-%' AND state = 'completed'",
    )
    .fetch_one(&db.pool)
    .await
    .expect("keys");
    assert_eq!(keys, after, "one completed key per reservation");
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

async fn reservations(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM reservations")
        .fetch_one(pool)
        .await
        .expect("count")
}
