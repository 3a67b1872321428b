//! The deployment beyond one machine, all of it at once: two `reservations serve`
//! processes on a PostgreSQL primary with a streaming replica, a Redis Cluster (three
//! masters, a replica each) and NATS JetStream, each of their own. A client walks the
//! contract, every write on one server and the read that follows on the other (with the
//! write's consistency token): the catalog, availability and the city search, a hold
//! and its replay, a date change, the payment, a cancellation, the histories, a race
//! for the last rooms across both servers, the hold limit shared through the cluster,
//! the analytics, the audit. Then the stream holds every event of the log once, the
//! model in the cluster says what PostgreSQL says, and the invariant holds.

use std::time::Duration;

use async_nats::jetstream;
use chrono::NaiveDate;
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

use crate::support::*;

const CITY: &str = "Deployville";
const TEJO: i64 = 812;
const DOURO: i64 = 813;

fn first_night() -> NaiveDate {
    NaiveDate::parse_from_str(&date(30), "%Y-%m-%d").expect("date")
}

/// A client of both servers that carries each write's consistency token to the next
/// request, as a browser session moving between servers behind a load balancer would.
struct Client {
    http: reqwest::Client,
    servers: [String; 2],
    token: Option<String>,
}

impl Client {
    fn url(&self, server: usize, path: &str) -> String {
        format!("{}{path}", self.servers[server % 2])
    }

    async fn send(&mut self, builder: RequestBuilder) -> (u16, Value) {
        let builder = match &self.token {
            Some(token) => builder.header("Consistency-Token", token),
            None => builder,
        };
        let response = builder.send().await.expect("an answer");
        let status = response.status().as_u16();
        if let Some(token) = response.headers().get("consistency-token") {
            self.token = token.to_str().ok().map(str::to_owned);
        }
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn call(
        &mut self,
        server: usize,
        method: Method,
        path: &str,
        token: &str,
        body: Option<(&str, &Value)>,
    ) -> (u16, Value) {
        let mut builder = self
            .http
            .request(method, self.url(server, path))
            .bearer_auth(token);
        if let Some((key, body)) = body {
            if !key.is_empty() {
                builder = builder.header("Idempotency-Key", key);
            }
            builder = builder.json(body);
        }
        self.send(builder).await
    }

    async fn put(&mut self, server: usize, path: &str, body: &Value) -> Value {
        let (status, reply) = self
            .call(server, Method::PUT, path, ADMIN, Some(("", body)))
            .await;
        assert_eq!(status, 200, "PUT {path}: {reply}");
        reply
    }

    async fn get(&mut self, server: usize, path: &str, token: &str) -> (u16, Value) {
        self.call(server, Method::GET, path, token, None).await
    }

    async fn post(
        &mut self,
        server: usize,
        path: &str,
        token: &str,
        key: &str,
        body: &Value,
    ) -> (u16, Value) {
        self.call(server, Method::POST, path, token, Some((key, body)))
            .await
    }
}

fn hold_body(hotel: i64, start: NaiveDate, nights: u64, guest: &str) -> Value {
    json!({"hotel_id": hotel, "room_type_id": KING, "start_date": start,
           "end_date": plus_days(start, nights), "rooms": 1,
           "guest": {"name": "Guest", "email": guest}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_contract_holds_on_two_servers_over_a_replica_a_redis_cluster_and_jetstream() {
    // Arrange: the deployment.
    let pair = ReplicaPair::start();
    let cluster = RedisCluster::start().await;
    let db = TestDb::on(&pair.primary_url()).await;
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let stream = format!("RSV_TEST_{tag}");
    let nats = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let env = [
        ("READ_DATABASE_URL", pair.replica_url(&db.name)),
        ("REDIS_URL", cluster.url()),
        ("NATS_URL", nats.clone()),
        ("NATS_STREAM", stream.clone()),
        ("NATS_SUBJECT_PREFIX", format!("rsv_test_{tag}.events")),
        ("RUN_PROJECTIONS", "true".to_owned()),
        ("WRITE_STRATEGY", "group".to_owned()),
        ("HOLD_LIMIT_PER_GUEST", "3".to_owned()),
        ("PAYMENT_WEBHOOK_SECRET", "whsec-deployment".to_owned()),
    ];
    let a = ServerProcess::start(&db, &env).await;
    let b = ServerProcess::start(&db, &env).await;
    let mut client = Client {
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client"),
        servers: [a.url(""), b.url("")],
        token: None,
    };
    let first = first_night();

    // The catalog: written on one server, read back on the other.
    for (n, hotel) in [TEJO, DOURO].into_iter().enumerate() {
        client
            .put(n, &format!("/v1/hotels/{hotel}"), &json!({"name": format!("Hotel {hotel}"), "city": CITY, "timezone": "Europe/Lisbon"}))
            .await;
        client
            .put(
                n + 1,
                &format!("/v1/hotels/{hotel}/room-types/{KING}"),
                &json!({"name": "king", "max_occupancy": 2}),
            )
            .await;
        let rooms = if hotel == TEJO { 20 } else { 3 };
        client
            .put(
                n,
                &format!("/v1/hotels/{hotel}/room-types/{KING}/inventory"),
                &json!({"start_date": first, "end_date": plus_days(first, 10), "total_rooms": rooms,
                         "overbooking_allowance": 0, "rate_cents": RATE}),
            )
            .await;
    }
    client
        .put(
            0,
            &format!("/v1/hotels/{TEJO}/rate-plans/{FLEXIBLE}"),
            &json!({"name": "Flexible", "room_type_ids": [KING]}),
        )
        .await;
    client
        .put(1, &format!("/v1/hotels/{TEJO}/room-types/{KING}/restrictions"),
             &json!({"start_date": plus_days(first, 9), "end_date": plus_days(first, 10), "stop_sell": true}))
        .await;
    let (status, hotel) = client.get(1, &format!("/v1/hotels/{TEJO}"), WEB).await;
    assert_eq!(status, 200, "{hotel}");
    assert_eq!(hotel["rate_plans"][0]["name"], "Flexible");
    let (status, listed) = client.get(0, &format!("/v1/hotels?city={CITY}"), WEB).await;
    assert_eq!(status, 200);
    assert_eq!(
        listed["hotels"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );

    // Availability and the city search, answered by the cluster once it has caught up
    // with the whole catalog (the model trails the log: a search read before then may
    // not show a hotel just written yet).
    wait_checkpoints(&db.pool, &["availability"]).await;
    // A read presenting the staff's last write's token would be answered by PostgreSQL
    // (the model cannot say it holds that write): a guest's browser has none.
    client.token = None;
    let availability = format!(
        "/v1/hotels/{TEJO}/availability?start_date={first}&end_date={}",
        plus_days(first, 3)
    );
    let mut cached = Value::Null;
    for _ in 0..300 {
        let (status, body) = client.get(1, &availability, WEB).await;
        assert_eq!(status, 200, "{body}");
        if body["source"] == "cache" {
            cached = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cached["room_types"][0]["remaining"], 20, "{cached}");
    let (status, search) = client
        .get(
            0,
            &format!(
                "/v1/availability?city={CITY}&start_date={first}&end_date={}",
                plus_days(first, 2)
            ),
            WEB,
        )
        .await;
    assert_eq!(status, 200, "{search}");
    assert_eq!(
        search["hotels"].as_array().map(Vec::len),
        Some(2),
        "{search}"
    );

    // A hold on one server, its replay on the other, read back with the token.
    let hold = hold_body(TEJO, first, 3, "ana@example.com");
    let (status, held) = client
        .post(0, "/v1/reservations", WEB, "ana-1", &hold)
        .await;
    assert_eq!(status, 201, "{held}");
    let id = held["reservation_id"].as_str().expect("an id").to_owned();
    let (status, replayed) = client
        .post(1, "/v1/reservations", WEB, "ana-1", &hold)
        .await;
    assert_eq!(
        (status, &replayed["reservation_id"]),
        (201, &held["reservation_id"])
    );
    let (status, read) = client.get(1, &format!("/v1/reservations/{id}"), WEB).await;
    assert_eq!(
        (status, read["status"].as_str()),
        (200, Some("held")),
        "{read}"
    );
    // A stop-sold night refuses, naming the restriction.
    let (status, refused) = client
        .post(
            0,
            "/v1/reservations",
            WEB,
            "ana-stop",
            &hold_body(TEJO, plus_days(first, 9), 1, "bo@example.com"),
        )
        .await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (409, Some("restricted")),
        "{refused}"
    );

    // Its life: a move, the payment, a cancellation, across both servers.
    let (status, moved) = client
        .post(
            1,
            &format!("/v1/reservations/{id}/change-dates"),
            WEB,
            "ana-move",
            &json!({"start_date": plus_days(first, 1), "end_date": plus_days(first, 4)}),
        )
        .await;
    assert_eq!(status, 200, "{moved}");
    let (status, confirmed) = client
        .post(
            0,
            &format!("/v1/reservations/{id}/confirm"),
            WEB,
            "ana-pay",
            &json!({"payment_token": "tok_ok"}),
        )
        .await;
    assert_eq!(
        (status, confirmed["status"].as_str()),
        (200, Some("confirmed")),
        "{confirmed}"
    );
    let (status, cancelled) = client
        .post(
            1,
            &format!("/v1/reservations/{id}/cancel"),
            WEB,
            "ana-cancel",
            &json!({"reason": "plans"}),
        )
        .await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled")),
        "{cancelled}"
    );
    let (status, history) = client
        .get(0, &format!("/v1/reservations/{id}/events"), WEB)
        .await;
    assert_eq!(status, 200, "{history}");
    let types: Vec<&str> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    let life: Vec<&str> = types
        .iter()
        .copied()
        .filter(|t| {
            matches!(
                *t,
                "ReservationHeld"
                    | "DatesChanged"
                    | "ReservationConfirmed"
                    | "ReservationCancelled"
            )
        })
        .collect();
    assert_eq!(
        life,
        [
            "ReservationHeld",
            "DatesChanged",
            "ReservationConfirmed",
            "ReservationCancelled"
        ],
        "{types:?}"
    );

    // The last three rooms of the Douro hotel, raced for through both servers at once.
    let racers = (0..12).map(|n| {
        let http = client.http.clone();
        let url = client.url(n, "/v1/reservations");
        async move {
            http.post(url)
                .bearer_auth(WEB)
                .header("Idempotency-Key", format!("race-{n}"))
                .json(&hold_body(
                    DOURO,
                    first,
                    2,
                    &format!("racer{n}@example.com"),
                ))
                .send()
                .await
                .expect("an answer")
                .status()
                .as_u16()
        }
    });
    let mut statuses = futures::future::join_all(racers).await;
    statuses.sort_unstable();
    assert_eq!(statuses, [vec![201; 3], vec![409; 9]].concat());

    // The hold limit is one count for the deployment: the guest's fourth hold, on the
    // other server, is refused.
    for n in 0..3 {
        let (status, body) = client
            .post(
                n,
                "/v1/reservations",
                WEB,
                &format!("eve-{n}"),
                &hold_body(TEJO, plus_days(first, 5), 1, "eve@example.com"),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, limited) = client
        .post(
            1,
            "/v1/reservations",
            WEB,
            "eve-3",
            &hold_body(TEJO, plus_days(first, 5), 1, "eve@example.com"),
        )
        .await;
    assert_eq!(
        (status, limited["error"].as_str()),
        (429, Some("rate_limited")),
        "{limited}"
    );

    // The read side: the reservation list, the occupancy, the feed, the audit.
    // (The read models follow the log: they may trail a write by a moment.)
    let mut listed = 0;
    for _ in 0..300 {
        let (status, list) = client
            .get(1, "/v1/reservations?guest_email=eve@example.com", WEB)
            .await;
        assert_eq!(status, 200, "{list}");
        listed = list["reservations"].as_array().map_or(0, Vec::len);
        if listed == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed, 3, "the guest's reservations listed");
    let mut occupancy = Value::Null;
    for _ in 0..300 {
        let (status, body) = client
            .get(
                0,
                &format!(
                    "/v1/hotels/{DOURO}/occupancy?start_date={first}&end_date={}",
                    plus_days(first, 2)
                ),
                ADMIN,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        if body["room_types"][0]["nights"][0]["held"] == 3 {
            occupancy = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        occupancy["room_types"][0]["nights"][1]["held"], 3,
        "{occupancy}"
    );
    let (status, feed) = client.get(1, "/v1/events?limit=1000", AUDITOR).await;
    assert_eq!(status, 200, "{feed}");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(
        feed["events"].as_array().map(Vec::len),
        Some(events as usize),
        "the feed on the replica, with the token"
    );
    let (status, verified) = client.get(0, "/v1/audit/verify", AUDITOR).await;
    assert_eq!(
        (status, verified["ok"].as_bool()),
        (200, Some(true)),
        "{verified}"
    );

    // Assert: JetStream holds every event of the log once ...
    let context = jetstream::new(async_nats::connect(&nats).await.expect("NATS"));
    let mut relayed = 0;
    for _ in 0..300 {
        let mut stream = context
            .get_stream(&stream)
            .await
            .expect("the relay's stream");
        let info = stream.info().await.expect("stream info");
        relayed = info.state.messages;
        if relayed >= events as u64 {
            assert_eq!(info.state.first_sequence, 1);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(relayed, events as u64, "every event once in the stream");
    // ... the cluster's model says what PostgreSQL says ...
    wait_checkpoints(
        &db.pool,
        &["availability", "reservations_view", "occupancy"],
    )
    .await;
    let rows = night_rows(&db.pool).await;
    client.token = None;
    let mut model = String::new();
    for _ in 0..300 {
        let (_, body) = client.get(0, &availability, WEB).await;
        let left: Vec<i64> = body["room_types"][0]["nights"]
            .as_array()
            .map(|nights| {
                nights
                    .iter()
                    .filter_map(|n| n["remaining"].as_i64())
                    .collect()
            })
            .unwrap_or_default();
        let expected: Vec<i64> = (0..3)
            .map(|d| {
                let row = &rows[&(TEJO, KING, plus_days(first, d))];
                row.rooms_left()
            })
            .collect();
        if body["source"] == "cache" && left == expected {
            model.clear();
            break;
        }
        model = format!("{}: {left:?}, database {expected:?}", body["source"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(model.is_empty(), "the cluster's model: {model}");
    // ... and every night is sold at most once.
    assert_invariants(&db.pool).await;
    context
        .delete_stream(&stream)
        .await
        .expect("delete the stream");
}
