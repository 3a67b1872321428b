//! Several `reservations serve` processes on one primary, each batching its own holds
//! (group commit), racing for the last rooms: the invariant holds across processes and
//! every hold a server acknowledged exists.

use std::collections::BTreeSet;
use std::time::Duration;

use reservations::write::Strategy;
use serde_json::json;

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
