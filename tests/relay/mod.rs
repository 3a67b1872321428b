//! The JetStream relay, against the machine's NATS server (`NATS_URL`, by default
//! 127.0.0.1:4222): every committed event in the stream once, in commit order, as its
//! feed item; a batch published but never checkpointed is not stored twice; a server
//! killed mid-load leaves the stream whole; two servers racing many group-commit
//! batches (which commit in another order than their positions) leave every position
//! of the log in the stream; and occupancy rebuilt from the stream alone equals the
//! PostgreSQL projection.
//!
//! Each test publishes to a stream and subjects of its own (the relay's `NATS_STREAM`
//! and `NATS_SUBJECT_PREFIX` settings) and deletes the stream when it passes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use app::clock::ManualClock;
use app::commands::CommandService;
use app::relay::{JetStreamRelay, RelayTarget, RELAY};
use async_nats::jetstream;
use chrono::NaiveDate;
use projections::analytics::OCCUPANCY;
use projections::feed::EventOut;
use projections::{Checkpoint, Projection, StoredEvent};
use serde_json::json;
use sqlx::PgPool;
use store::write::Strategy;
use tokio::sync::watch;

use crate::support::*;

fn nats_url() -> String {
    std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// A stream and subject prefix no other test uses.
fn own_target() -> RelayTarget {
    let tag = uuid::Uuid::new_v4().simple().to_string();
    RelayTarget::parse(
        &format!("RSV_TEST_{tag}"),
        &format!("rsv_test_{tag}.events"),
    )
    .expect("target")
}

async fn delete_stream(context: &jetstream::Context, target: &RelayTarget) {
    context
        .delete_stream(target.stream())
        .await
        .expect("delete the test's stream");
}

async fn jetstream_context() -> jetstream::Context {
    let client = async_nats::connect(nats_url())
        .await
        .expect("NATS is running");
    jetstream::new(client)
}

/// The relay's runner, as `serve` runs it, until stopped.
struct RelayRunner {
    stop: watch::Sender<bool>,
    handle: tokio::task::JoinHandle<()>,
}

impl RelayRunner {
    async fn start(pool: &PgPool, target: &RelayTarget) -> Self {
        let relay = JetStreamRelay::new(jetstream_context().await, target.clone());
        let (stop, shutdown) = watch::channel(false);
        let handle = tokio::spawn(projections::run(
            pool.clone(),
            relay,
            fast_runners(),
            shutdown,
        ));
        Self { stop, handle }
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .expect("relay stops")
            .expect("relay task");
    }
}

/// The log in commit order, each event as its feed item.
async fn log_items(pool: &PgPool) -> Vec<EventOut> {
    let sql = format!(
        "SELECT {} FROM events ORDER BY transaction_id, global_position",
        projections::log::EVENT_COLUMNS
    );
    sqlx::query(&sql)
        .fetch_all(pool)
        .await
        .expect("events")
        .iter()
        .map(|row| EventOut::from(StoredEvent::from_row(row).expect("event")))
        .collect()
}

/// One stored message: subject, `Nats-Msg-Id`, body.
#[derive(Debug)]
struct Message {
    subject: String,
    msg_id: Option<String>,
    item: EventOut,
}

/// Every message the stream holds, in stream order.
async fn stream_messages(context: &jetstream::Context, target: &RelayTarget) -> Vec<Message> {
    let stream = context.get_stream(target.stream()).await.expect("stream");
    let info = stream.get_info().await.expect("info");
    assert_eq!(
        info.state.first_sequence.max(1),
        1,
        "the stream lost messages"
    );
    let mut messages = Vec::new();
    for sequence in 1..=info.state.last_sequence {
        let message = stream.get_raw_message(sequence).await.expect("message");
        messages.push(Message {
            subject: message.subject.to_string(),
            msg_id: message
                .headers
                .get(async_nats::header::NATS_MESSAGE_ID)
                .map(|id| id.as_str().to_owned()),
            item: serde_json::from_slice(&message.payload).expect("an event item"),
        });
    }
    messages
}

/// Waits until the relay's checkpoint stands on the last event of the log.
async fn wait_relayed(pool: &PgPool) {
    wait_checkpoints(pool, &[RELAY]).await;
}

/// The stream holds every event of the log exactly once, in commit order, each on its
/// hotel's subject with its position as message id and its feed item as body.
async fn assert_stream_is_the_log(
    pool: &PgPool,
    context: &jetstream::Context,
    target: &RelayTarget,
) {
    let log = log_items(pool).await;
    let messages = stream_messages(context, target).await;
    let published: BTreeSet<String> = messages.iter().filter_map(|m| m.msg_id.clone()).collect();
    let missing: Vec<i64> = log
        .iter()
        .map(|event| event.position)
        .filter(|position| !published.contains(&position.to_string()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} events are not in the stream; positions {missing:?}",
        missing.len(),
        log.len()
    );
    assert_eq!(messages.len(), log.len(), "messages against events");
    for (message, event) in messages.iter().zip(&log) {
        assert_eq!(&message.item, event);
        assert_eq!(message.msg_id, Some(event.position.to_string()));
        let hotel = event
            .stream_parts()
            .and_then(|(_, id)| id.split(':').next())
            .expect("a hotel id");
        assert_eq!(
            message.subject,
            target.subject(hotel.parse().expect("hotel"))
        );
    }
}

/// Holds, confirmations, a cancellation, an expiry and an inventory change, some of
/// them racing, at hotel 812.
async fn workload(svc: &CommandService, clock: &ManualClock) {
    hotel_with_rooms(svc, day(1), 6, 12).await;
    let holds = (0..16).map(|n| {
        let svc = svc.clone();
        async move {
            let from = day(1 + (n % 4));
            let request = hold_request(stay(from, plus_days(from, 2)), 1, n as usize);
            svc.hold("web", "web", key(&format!("relay-{n}")), request)
                .await
                .map(|view| view.reservation_id)
        }
    });
    let ids: Vec<uuid::Uuid> = futures::future::join_all(holds)
        .await
        .into_iter()
        .filter_map(Result::ok)
        .collect();
    assert!(ids.len() >= 10, "most holds succeed: {}", ids.len());
    let id = aggregates::ReservationId::from_uuid;
    for reservation in &ids[..8] {
        svc.confirm(&web(), None, id(*reservation))
            .await
            .expect("confirm");
    }
    svc.cancel(
        &web(),
        web().name(),
        None,
        id(ids[0]),
        "plans changed".into(),
    )
    .await
    .expect("cancel");
    clock.advance(chrono::Duration::seconds(HOLD_TTL_SECONDS + 1));
    svc.expire_hold(id(ids[9])).await.expect("expire");
}

async fn occupancy_of(pool: &PgPool) -> BTreeMap<(i64, i64, NaiveDate), Vec<i64>> {
    let generation = projections::runner::served_generation(pool, OCCUPANCY)
        .await
        .expect("generation");
    let rows: Vec<(i64, i64, NaiveDate, Vec<i64>)> = sqlx::query_as(
        "SELECT hotel_id, room_type_id, night,
                ARRAY[total_rooms, overbooking_allowance, rate_cents, confirmed, held,
                      revenue_cents, holds_placed, holds_lapsed, cancellations]::bigint[]
           FROM occupancy_daily WHERE generation = $1",
    )
    .bind(generation)
    .fetch_all(pool)
    .await
    .expect("occupancy");
    rows.into_iter()
        .map(|(hotel, room_type, night, row)| ((hotel, room_type, night), row))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_committed_event_reaches_jetstream_once_in_commit_order_and_rebuilds_occupancy() {
    // Arrange
    let db = TestDb::new().await;
    let clock = ManualClock::new(chrono::Utc::now());
    let svc = db.service_with_clock(Strategy::Group, Arc::new(clock.clone()));
    let target = own_target();
    let context = jetstream_context().await;
    let relay = RelayRunner::start(&db.pool, &target).await;
    let analytics = Runners::start(&db.pool);

    // Act: the workload runs while the relay follows.
    workload(&svc, &clock).await;
    wait_visible(&db.pool).await;
    wait_relayed(&db.pool).await;
    wait_caught_up(&db.pool).await;
    relay.stop().await;
    analytics.stop().await;
    let downstream = TestDb::new().await;
    let consumed = app::relay::occupancy_from_stream(&context, &target, &downstream.pool)
        .await
        .expect("occupancy from the stream");

    // Assert
    assert_stream_is_the_log(&db.pool, &context, &target).await;
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(consumed.messages, events as u64);
    let expected = occupancy_of(&db.pool).await;
    assert!(
        expected.values().any(|row| row[3] > 0) && expected.values().any(|row| row[8] > 0),
        "the workload confirmed and cancelled rooms: {expected:?}"
    );
    assert_eq!(occupancy_of(&downstream.pool).await, expected);
    delete_stream(&context, &target).await;
    downstream.drop_database().await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_published_but_never_checkpointed_is_not_stored_twice() {
    // Arrange: a stream whose duplicate window is over before the relay starts again,
    // so only the relay's own skip can keep the copies out.
    let db = TestDb::new().await;
    let clock = ManualClock::new(chrono::Utc::now());
    let svc = db.service_with_clock(Strategy::Group, Arc::new(clock.clone()));
    workload(&svc, &clock).await;
    wait_visible(&db.pool).await;
    let target = own_target();
    let context = jetstream_context().await;
    context
        .create_stream(jetstream::stream::Config {
            duplicate_window: Duration::from_secs(1),
            ..target.stream_config()
        })
        .await
        .expect("stream");
    let mut conn = db.pool.acquire().await.expect("connection");
    let batch = projections::log::read_after(&mut conn, Checkpoint::START, 25)
        .await
        .expect("first events");
    drop(conn);
    assert_eq!(batch.len(), 25);

    // Act: a relay publishes the batch and dies before its checkpoint commits...
    let mut crashed = JetStreamRelay::new(jetstream_context().await, target.clone());
    let mut tx = db.pool.begin().await.expect("tx");
    crashed.apply(&mut tx, 1, &batch).await.expect("published");
    drop(tx);
    drop(crashed);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // ...and the next one starts from the checkpoint, which never moved.
    let relay = RelayRunner::start(&db.pool, &target).await;
    wait_relayed(&db.pool).await;
    relay.stop().await;

    // Assert
    assert_stream_is_the_log(&db.pool, &context, &target).await;
    delete_stream(&context, &target).await;
    db.drop_database().await;
}

/// A `reservations serve` process relaying to `target`.
async fn serve(db: &TestDb, target: &RelayTarget) -> ServerProcess {
    ServerProcess::start(
        db,
        &[
            ("NATS_URL", nats_url()),
            ("NATS_STREAM", target.stream().to_owned()),
            ("NATS_SUBJECT_PREFIX", target.subject_prefix().to_owned()),
            ("PROJECTION_GATHER_MS", "5".to_owned()),
        ],
    )
    .await
}

/// Holds posted by `clients` tasks to the server at `port` until `stop`, each of one
/// night of one of `room_types` of hotel 812, in turn; the number acknowledged.
async fn hold_load(
    port: u16,
    room_types: Vec<i64>,
    clients: usize,
    stop: watch::Receiver<bool>,
) -> usize {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let tasks = (0..clients).map(|client| {
        let http = http.clone();
        let stop = stop.clone();
        let room_types = room_types.clone();
        async move {
            let mut acknowledged = 0;
            let mut n = 0;
            while !*stop.borrow() {
                n += 1;
                let from = day(1 + (n % 20) as u64);
                let room_type = room_types[(client + n) % room_types.len()];
                let body = json!({
                    "hotel_id": HOTEL, "room_type_id": room_type,
                    "start_date": from, "end_date": plus_days(from, 1), "rooms": 1,
                    "guest": {"name": "Load", "email": format!("c{client}-{n}@example.com")},
                });
                let sent = http
                    .post(format!("http://127.0.0.1:{port}/v1/reservations"))
                    .bearer_auth(WEB)
                    .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
                    .json(&body)
                    .send()
                    .await;
                match sent {
                    Ok(reply) if reply.status().is_success() => acknowledged += 1,
                    Ok(_) => {}
                    // The server is down (killed, or not up yet).
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            acknowledged
        }
    });
    futures::future::join_all(tasks).await.into_iter().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relaying_server_killed_mid_load_leaves_every_event_in_the_stream_once() {
    // Arrange
    let db = TestDb::new().await;
    hotel_with_rooms(&db.service(Strategy::Group), day(1), 22, 10_000).await;
    let target = own_target();
    let context = jetstream_context().await;
    let mut first = serve(&db, &target).await;
    let (stop, stopped) = watch::channel(false);
    let load = tokio::spawn(hold_load(first.port, vec![KING], 8, stopped));

    // Act: kill -9 while holds are committed and relayed, then a second server.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let relayed: Option<i64> = sqlx::query_scalar(
            "SELECT global_position FROM projection_checkpoints WHERE name = $1",
        )
        .bind(RELAY)
        .fetch_optional(&db.pool)
        .await
        .expect("checkpoint");
        if relayed.unwrap_or(0) > 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first server never relayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill();
    let _ = stop.send(true);
    let before_kill = load.await.expect("load");
    let mut second = serve(&db, &target).await;
    let (stop, stopped) = watch::channel(false);
    let load = tokio::spawn(hold_load(second.port, vec![KING], 8, stopped));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop.send(true);
    let after_kill = load.await.expect("load");
    wait_visible(&db.pool).await;
    wait_relayed(&db.pool).await;
    second.kill();

    // Assert: every acknowledged hold is in the log, and the log in the stream once.
    let held: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE event_type = 'ReservationHeld'")
            .fetch_one(&db.pool)
            .await
            .expect("holds");
    assert!(
        before_kill > 0 && after_kill > 0,
        "{before_kill} / {after_kill}"
    );
    assert!(
        held >= (before_kill + after_kill) as i64,
        "{held} holds in the log"
    );
    assert_stream_is_the_log(&db.pool, &context, &target).await;
    delete_stream(&context, &target).await;
    db.drop_database().await;
}

/// Events of the log read (in commit order) after one with a greater position.
async fn committed_out_of_position_order(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (
           SELECT global_position < max(global_position) OVER (
                    ORDER BY transaction_id, global_position
                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS behind
             FROM events) e
          WHERE behind",
    )
    .fetch_one(pool)
    .await
    .expect("order")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_racing_many_batches_leave_every_position_of_the_log_in_the_stream() {
    // Arrange: two servers on one database, one of them relaying (whichever holds the
    // lock), each committing its own group-commit batches. Concurrent batches take
    // their positions in one order and commit in another: the log's commit order is
    // not its position order, which is what a relay that skips by position loses.
    // Each server books room types of its own: a batch locks the room types it books,
    // so batches of the two servers never wait for each other and run side by side.
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Group);
    hotel_with_rooms(&svc, day(1), 22, 10_000).await;
    let room_types: Vec<i64> = (KING..KING + 16).collect();
    for room_type in &room_types[1..] {
        room_type_with_rooms(&svc, *room_type, day(1), 22, 10_000).await;
    }
    let target = own_target();
    let context = jetstream_context().await;
    let first = serve(&db, &target).await;
    let second = serve(&db, &target).await;

    // Act: 24 clients, twelve per server, holding one night each of eight room types on
    // twenty nights, until the log has events committed out of position order (at
    // least five seconds, at most thirty).
    let (stop, stopped) = watch::channel(false);
    let (own_first, own_second) = room_types.split_at(8);
    let loads = [(first.port, own_first), (second.port, own_second)]
        .map(|(port, types)| tokio::spawn(hold_load(port, types.to_vec(), 12, stopped.clone())));
    let started = tokio::time::Instant::now();
    let mut out_of_order = 0;
    while started.elapsed() < Duration::from_secs(30)
        && (out_of_order == 0 || started.elapsed() < Duration::from_secs(5))
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
        out_of_order = committed_out_of_position_order(&db.pool).await;
    }
    let _ = stop.send(true);
    let mut acknowledged = 0;
    for load in loads {
        acknowledged += load.await.expect("load");
    }
    wait_visible(&db.pool).await;
    wait_relayed(&db.pool).await;
    drop((first, second));

    // Assert: the batches did commit out of position order (else this test proves
    // nothing), and every position of the log is in the stream once, in commit order.
    assert!(acknowledged > 100, "{acknowledged} holds acknowledged");
    assert!(
        out_of_order > 0,
        "no event committed after one with a greater position"
    );
    assert_stream_is_the_log(&db.pool, &context, &target).await;
    delete_stream(&context, &target).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_that_ends_with_an_event_the_log_does_not_hold_stops_the_relay() {
    // Arrange: the stream ends with an event of another history (as after an
    // asynchronous failover that lost the old primary's last commits).
    let db = TestDb::new().await;
    let clock = ManualClock::new(chrono::Utc::now());
    workload(
        &db.service_with_clock(Strategy::Group, Arc::new(clock.clone())),
        &clock,
    )
    .await;
    wait_visible(&db.pool).await;
    let target = own_target();
    let context = jetstream_context().await;
    context
        .create_stream(target.stream_config())
        .await
        .expect("stream");
    let mut foreign = log_items(&db.pool).await.remove(0);
    foreign.recorded_at += chrono::Duration::seconds(1);
    let position = foreign.position;
    context
        .send_publish(
            target.subject(HOTEL),
            jetstream::message::PublishMessage::build()
                .payload(serde_json::to_vec(&foreign).expect("body").into())
                .message_id(position.to_string()),
        )
        .await
        .expect("publish")
        .await
        .expect("stored");

    // Act
    let relay = RelayRunner::start(&db.pool, &target).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    relay.stop().await;

    // Assert: nothing more was published, and the checkpoint did not move.
    let messages = stream_messages(&context, &target).await;
    assert_eq!(messages.len(), 1);
    let checkpoint: Option<i64> =
        sqlx::query_scalar("SELECT global_position FROM projection_checkpoints WHERE name = $1")
            .bind(RELAY)
            .fetch_optional(&db.pool)
            .await
            .expect("checkpoint");
    assert_eq!(checkpoint.unwrap_or(0), 0);
    delete_stream(&context, &target).await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relay_that_cannot_create_its_stream_says_why_on_readyz_until_it_can() {
    // Arrange: another stream owns the relay's subjects, so JetStream refuses to create
    // the relay's own.
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 1).await;
    let target = own_target();
    let context = jetstream_context().await;
    let squatter = RelayTarget::parse(
        &format!("{}_OTHER", target.stream()),
        target.subject_prefix(),
    )
    .expect("target");
    context
        .create_stream(squatter.stream_config())
        .await
        .expect("the other stream");

    // Act
    let relay = RelayRunner::start(&app.db.pool, &target).await;
    let mut failing = serde_json::Value::Null;
    for _ in 0..100 {
        failing = app.get("/readyz", None).await.json["failing"].clone();
        if failing.as_array().is_some_and(|f| !f.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ...then the other stream goes, and the relay creates its own.
    delete_stream(&context, &squatter).await;
    wait_relayed(&app.db.pool).await;
    let mut recovered = serde_json::Value::Null;
    for _ in 0..200 {
        recovered = app.get("/readyz", None).await.json.clone();
        if recovered["failing"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    relay.stop().await;

    // Assert: the reason is NATS's own, not only what the relay was doing.
    assert_eq!(failing[0]["name"], RELAY, "{failing}");
    let error = failing[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("creating JetStream stream {}", target.stream())),
        "{error}"
    );
    assert!(error.to_lowercase().contains("overlap"), "{error}");
    assert!(failing[0]["since"].is_string(), "{failing}");
    assert_eq!(recovered["status"], "ready");
    assert_eq!(recovered["failing"], serde_json::json!([]), "{recovered}");
    delete_stream(&context, &target).await;
    app.finish().await;
}
