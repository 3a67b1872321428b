//! The read side against real PostgreSQL and Redis: the runner reads the log in commit
//! order and never skips, the Redis availability model converges to `room_nights`
//! under a booking storm, and availability survives Redis going away and coming back
//! empty.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aggregates::ReservationId;
use app::commands::Caller;
use chrono::Days;
use projections::availability::{self, Keys};
use projections::{Checkpoint, Projection, RunnerConfig, StoredEvent, Tail};
use rand::{Rng, SeedableRng};
use sqlx::{PgConnection, PgPool};
use store::write::Strategy;
use tokio::sync::watch;

use crate::support::*;

fn fast() -> RunnerConfig {
    RunnerConfig {
        poll_interval: Duration::from_millis(50),
        lag_interval: Duration::from_millis(200),
        ..RunnerConfig::default()
    }
}

/// A projection that only records what it was given, in order, and in which batches.
#[derive(Clone)]
struct Recorder {
    name: &'static str,
    seen: Arc<Mutex<Vec<i64>>>,
    batches: Arc<Mutex<usize>>,
    /// Reads that found nothing new (the runner checks its storage after each).
    empty_reads: Arc<std::sync::atomic::AtomicUsize>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::named("recorder")
    }
}

impl Recorder {
    fn named(name: &'static str) -> Self {
        Self {
            name,
            seen: Arc::default(),
            batches: Arc::default(),
            empty_reads: Arc::default(),
        }
    }

    fn seen(&self) -> Vec<i64> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn batches(&self) -> usize {
        self.batches.lock().map(|b| *b).unwrap_or_default()
    }
}

impl Projection for Recorder {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn apply(
        &mut self,
        _tx: &mut PgConnection,
        _generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let mut seen = self.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        seen.extend(batch.iter().map(|e| e.position));
        *self
            .batches
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))? += 1;
        Ok(())
    }

    async fn clear(&mut self, _conn: &mut PgConnection, _generation: i32) -> anyhow::Result<()> {
        Ok(())
    }

    async fn storage_intact(
        &mut self,
        _conn: &mut PgConnection,
        _generation: i32,
        _checkpoint: Checkpoint,
    ) -> anyhow::Result<bool> {
        self.empty_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(true)
    }
}

async fn insert_test_event(conn: &mut PgConnection, stream: &str) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                             payload, metadata)
         VALUES ('test', $1, 1, 'Tested', '1.0', '{}', '{}') RETURNING global_position",
    )
    .bind(stream)
    .fetch_one(&mut *conn)
    .await
    .expect("insert event")
}

async fn wait_for<F: Fn() -> bool>(what: &str, condition: F) {
    for _ in 0..200 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A runner of a fresh [`Recorder`] with `config` on `pool`; sending `true` stops it.
fn spawn_recording(
    pool: &PgPool,
    config: RunnerConfig,
) -> (Recorder, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let recorder = Recorder::default();
    let (stop, stopped) = watch::channel(false);
    let runner = tokio::spawn(projections::run(
        pool.clone(),
        recorder.clone(),
        config,
        stopped,
    ));
    (recorder, stop, runner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_committed_out_of_order_are_delivered_in_commit_order_and_never_skipped() {
    // Arrange: a runner following an empty log.
    let db = TestDb::new().await;
    let (recorder, stop, runner) = spawn_recording(&db.pool, fast());

    // Act: the first transaction takes the earlier position but commits last.
    let mut first = db.pool.begin().await.expect("begin");
    let early = insert_test_event(&mut first, "a").await;
    let mut second = db.pool.begin().await.expect("begin");
    let late = insert_test_event(&mut second, "b").await;
    second
        .commit()
        .await
        .expect("commit the later position first");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before_first_commits = recorder.seen.lock().expect("lock").clone();
    first.commit().await.expect("commit");
    let seen = recorder.seen.clone();
    wait_for("both events", || {
        seen.lock().map(|s| s.len() >= 2).unwrap_or(false)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Assert: nothing was delivered past the running transaction; then both, once each.
    assert!(early < late);
    assert!(
        before_first_commits.is_empty(),
        "delivered {before_first_commits:?} while an earlier transaction was running"
    );
    assert_eq!(*recorder.seen.lock().expect("lock"), vec![early, late]);
    let _ = stop.send(true);
    runner.await.expect("runner");
    db.drop_database().await;
}

/// Waits until the log's first `events` are readable: the log is read below the oldest
/// transaction still running, and that is the PostgreSQL server's, so another test's
/// transaction in another database can hold a read back for a moment.
async fn wait_until_readable(pool: &PgPool, events: usize) {
    for _ in 0..200 {
        let readable: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM events
              WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())",
        )
        .fetch_one(pool)
        .await
        .expect("readable events");
        if usize::try_from(readable).is_ok_and(|n| n >= events) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the log's {events} events never became readable");
}

/// Every event of the log, in commit order, as a reader must deliver them.
async fn log_in_commit_order(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT global_position FROM events ORDER BY transaction_id, global_position",
    )
    .fetch_all(pool)
    .await
    .expect("read the log")
}

#[tokio::test]
async fn a_tail_serves_a_read_it_has_made_from_memory_and_reads_on_from_the_database() {
    // Arrange: five events, each committed on its own.
    let db = TestDb::new().await;
    let mut conn = db.pool.acquire().await.expect("connection");
    for stream in ["a", "b", "c", "d", "e"] {
        insert_test_event(&mut conn, stream).await;
    }
    let log = log_in_commit_order(&db.pool).await;
    wait_until_readable(&db.pool, log.len()).await;
    let tail = Tail::default();

    // Act: a first reader takes three; a second asks from the start; the first goes on.
    let first = tail
        .read_after(&mut conn, Checkpoint::START, 3)
        .await
        .expect("first read");
    let again = tail
        .read_after(&mut conn, Checkpoint::START, 500)
        .await
        .expect("second reader");
    let after_first = first
        .last()
        .map(StoredEvent::checkpoint)
        .expect("three events");
    let rest = tail
        .read_after(&mut conn, after_first, 500)
        .await
        .expect("read on");
    let inside = tail
        .read_after(&mut conn, first[0].checkpoint(), 500)
        .await
        .expect("a reader one event in");

    // Assert: the same events as the log, whoever asked; only two database reads.
    let positions = |batch: &[StoredEvent]| batch.iter().map(|e| e.position).collect::<Vec<_>>();
    assert_eq!(positions(&first), log[..3]);
    assert_eq!(positions(&again), log[..3]);
    assert_eq!(positions(&rest), log[3..]);
    assert_eq!(positions(&inside), log[1..3]);
    assert_eq!(tail.reads(), (2, 2), "(from memory, from the database)");
    drop(conn);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runners_sharing_a_tail_each_apply_every_event_once_in_commit_order() {
    // Arrange: two projections' runners reading through one tail.
    let db = TestDb::new().await;
    let (a, b) = (Recorder::named("shared-a"), Recorder::named("shared-b"));
    let tail = Tail::default();
    let (stop, stopped) = watch::channel(false);
    let runners = [
        tokio::spawn(projections::run_sharing(
            db.pool.clone(),
            a.clone(),
            fast(),
            tail.clone(),
            stopped.clone(),
        )),
        tokio::spawn(projections::run_sharing(
            db.pool.clone(),
            b.clone(),
            fast(),
            tail.clone(),
            stopped,
        )),
    ];

    // Act: events from many transactions, one of which holds an early position open
    // while later ones commit.
    let mut early = db.pool.begin().await.expect("begin");
    insert_test_event(&mut early, "early").await;
    let mut conn = db.pool.acquire().await.expect("connection");
    for n in 0..60 {
        insert_test_event(&mut conn, &format!("s{n}")).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    early
        .commit()
        .await
        .expect("commit the early position last");
    for n in 60..120 {
        insert_test_event(&mut conn, &format!("s{n}")).await;
    }
    let (seen_a, seen_b) = (a.seen.clone(), b.seen.clone());
    wait_for("both runners to apply all 121 events", || {
        let len = |seen: &Arc<Mutex<Vec<i64>>>| seen.lock().map(|s| s.len()).unwrap_or(0);
        len(&seen_a) >= 121 && len(&seen_b) >= 121
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Assert: each saw the log exactly, in commit order; and they shared reads.
    let log = log_in_commit_order(&db.pool).await;
    assert_eq!(a.seen(), log);
    assert_eq!(b.seen(), log);
    let (from_memory, _) = tail.reads();
    assert!(
        from_memory > 0,
        "no batch was served from memory: {:?}",
        tail.reads()
    );
    let _ = stop.send(true);
    for runner in runners {
        runner.await.expect("runner");
    }
    drop(conn);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_keeping_up_with_a_steady_load_applies_it_in_batches() {
    // Arrange: a runner that lets 250 ms of commits gather at the head of the log.
    let db = TestDb::new().await;
    let config = RunnerConfig {
        gather: Duration::from_millis(250),
        ..fast()
    };
    let (recorder, stop, runner) = spawn_recording(&db.pool, config);

    // Act: an event committed every few milliseconds for about a second and a half.
    let mut conn = db.pool.acquire().await.expect("connection");
    let started = std::time::Instant::now();
    let mut written = 0;
    while started.elapsed() < Duration::from_millis(1_500) {
        insert_test_event(&mut conn, &format!("steady{written}")).await;
        written += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let seen = recorder.seen.clone();
    wait_for("every event", || {
        seen.lock().map(|s| s.len() >= written).unwrap_or(false)
    })
    .await;

    // Assert: everything, in order, in about one batch per 250 ms (a runner that read
    // again as soon as it had applied made 41 batches of this load).
    assert_eq!(recorder.seen(), log_in_commit_order(&db.pool).await);
    let batches = recorder.batches();
    assert!(written >= 100, "only {written} events written");
    assert!(
        batches <= 12,
        "{batches} batches for {written} events over 1.5 s"
    );
    let _ = stop.send(true);
    runner.await.expect("runner");
    drop(conn);
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_runner_spends_a_burst_of_wake_ups_at_once() {
    // Arrange: an idle runner that polls once a second.
    let db = TestDb::new().await;
    let config = RunnerConfig {
        poll_interval: Duration::from_secs(1),
        gather: Duration::from_millis(20),
        ..fast()
    };
    let (recorder, stop, runner) = spawn_recording(&db.pool, config);
    let empty_reads = recorder.empty_reads.clone();
    wait_for("the runner to go idle", || {
        empty_reads.load(std::sync::atomic::Ordering::Relaxed) > 0
    })
    .await;

    // Act: 300 announcements arrive at once (as they pile up while a runner is busy
    // with a load), then two seconds pass.
    sqlx::query("SELECT pg_notify('events', n::text) FROM generate_series(1, 300) AS n")
        .execute(&db.pool)
        .await
        .expect("notify");
    let before = recorder
        .empty_reads
        .load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Assert: a read or two for the burst and the polls, not one per announcement
    // (taken one at a time, they kept it reading every 20 ms: ~100 reads here).
    let reads = recorder
        .empty_reads
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    assert!(reads <= 6, "{reads} empty reads in 2 s after the burst");
    let _ = stop.send(true);
    runner.await.expect("runner");
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_runner_of_a_projection_is_active_at_a_time() {
    let db = TestDb::new().await;
    let (a, b) = (Recorder::default(), Recorder::default());
    let (stop, stopped) = watch::channel(false);
    let runners = [
        tokio::spawn(projections::run(
            db.pool.clone(),
            a.clone(),
            fast(),
            stopped.clone(),
        )),
        tokio::spawn(projections::run(
            db.pool.clone(),
            b.clone(),
            fast(),
            stopped,
        )),
    ];

    let mut conn = db.pool.acquire().await.expect("conn");
    let mut positions = Vec::new();
    for n in 0..20 {
        positions.push(insert_test_event(&mut conn, &format!("s{n}")).await);
    }
    let (sa, sb) = (a.seen.clone(), b.seen.clone());
    wait_for("all events", || {
        sa.lock().map(|s| s.len()).unwrap_or(0) + sb.lock().map(|s| s.len()).unwrap_or(0) >= 20
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (seen_a, seen_b) = (
        a.seen.lock().expect("a").clone(),
        b.seen.lock().expect("b").clone(),
    );
    assert!(
        seen_a.is_empty() || seen_b.is_empty(),
        "both runners applied events: {seen_a:?} / {seen_b:?}"
    );
    let mut all = [seen_a, seen_b].concat();
    all.sort_unstable();
    assert_eq!(all, positions, "every event exactly once");
    let _ = stop.send(true);
    for runner in runners {
        runner.await.expect("runner");
    }
    db.drop_database().await;
}

/// Every `room_nights` row next to what the Redis model says of it.
/// `reader` carries the generation one read found to the next, as the API's reads share it.
async fn compare_with_redis(
    pool: &PgPool,
    redis_url: &str,
    reader: &availability::Reader,
) -> Vec<String> {
    let rows = night_rows(pool).await;
    let mut redis = availability::connect(redis_url).expect("redis");
    let mut differences = Vec::new();
    let by_hotel_type: std::collections::BTreeMap<(i64, i64), Vec<chrono::NaiveDate>> =
        rows.keys().fold(Default::default(), |mut acc, (h, t, n)| {
            acc.entry((*h, *t)).or_default().push(*n);
            acc
        });
    for ((hotel, room_type), nights) in by_hotel_type {
        // A freshly switched generation is marked ready by the runner's next poll.
        let mut cached = None;
        for _ in 0..200 {
            cached = reader
                .read(&mut redis, hotel, &nights)
                .await
                .expect("read redis");
            if cached.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let cached = cached.expect("cache ready");
        assert!(
            cached
                .hotel
                .hotel
                .room_type(aggregates::RoomTypeId::parse(room_type).expect("id"))
                .is_some(),
            "room type {room_type} in the cached catalog"
        );
        for day in &cached.hotel.days {
            let (night, value) = (&day.date, day.night(room_type));
            let row = &rows[&(hotel, room_type, *night)];
            let expected = (
                i64::from(row.total_rooms),
                i64::from(row.allowance),
                i64::from(row.confirmed),
                i64::from(row.held),
                i64::from(row.blocked),
            );
            let got = value.map(|v| {
                (
                    v.total_rooms,
                    v.overbooking_allowance,
                    v.confirmed,
                    v.held,
                    v.blocked,
                )
            });
            if got != Some(expected) {
                differences.push(format!("{night}: db {expected:?} redis {got:?}"));
            }
        }
    }
    differences
}

async fn projection_caught_up(pool: &PgPool, name: &str) -> bool {
    let (_, checkpoint) = {
        let mut conn = pool.acquire().await.expect("conn");
        projections::runner::load_checkpoint(&mut conn, name)
            .await
            .expect("checkpoint")
    };
    let last: Option<(i64, i64)> = sqlx::query_as(
        "SELECT transaction_id::text::bigint, global_position FROM events
          ORDER BY transaction_id DESC, global_position DESC LIMIT 1",
    )
    .fetch_optional(pool)
    .await
    .expect("last event");
    last.is_none_or(|(t, p)| {
        Checkpoint {
            transaction_id: t,
            position: p,
        } <= checkpoint
    })
}

async fn wait_caught_up(pool: &PgPool, name: &str) {
    for _ in 0..400 {
        if projection_caught_up(pool, name).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} did not catch up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redis_model_converges_to_room_nights_after_a_booking_storm() {
    // Arrange: inventory, and the availability runner following the log.
    let db = TestDb::new().await;
    let redis = PrivateRedis::start();
    redis.wait_ready().await;
    let keys = Keys::for_database(&db.name);
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(20), 10, 6).await;
    // A group block of 2 rooms on nights 22..26, booked from while it holds.
    let acme = aggregates::BlockCode::parse("ACME").expect("code");
    let terms = aggregates::BlockTerms::parse(
        "Acme",
        king(),
        stay(day(22), day(26)),
        aggregates::RoomCount::parse(2).expect("rooms"),
        aggregates::Cents::new(15_000),
        day(5),
    )
    .expect("terms");
    svc.set_block(&Caller::Staff("staff".into()), hotel_id(), acme, terms)
        .await
        .expect("block");
    let (stop, stopped) = watch::channel(false);
    let runner = reservations::workers::spawn_availability_runner(
        db.pool.clone(),
        availability::connect(&redis.url()).expect("redis"),
        keys.clone(),
        fast(),
        &projections::Tail::default(),
        stopped,
    );

    // Act: 32 tasks hold (a third of them from the block), and cancel some of what they
    // got, while the runner runs and staff release the block midway.
    let mut tasks = Vec::new();
    let releaser = {
        let svc = svc.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            for _ in 0..30 {
                match svc
                    .release_block(&Caller::Staff("staff".into()), hotel_id(), acme)
                    .await
                {
                    Err(store::error::CommandError::Contention { .. }) => continue,
                    other => return other.expect("release"),
                }
            }
            panic!("the release never went through");
        })
    };
    for task in 0..32_u64 {
        let svc = svc.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(task);
            for n in 0..8 {
                let start = day(20) + Days::new(rng.gen_range(0..8));
                let end = start + Days::new(rng.gen_range(1..=2));
                let mut request = hold_request(stay(start, end), rng.gen_range(1..=2), n);
                if n % 3 == 0 {
                    let start = day(22) + Days::new(rng.gen_range(0..3));
                    request.stay = stay(start, start + Days::new(1));
                    request.rooms = aggregates::RoomCount::parse(1).expect("rooms");
                    request.block_code = Some(acme);
                }
                let held = svc
                    .hold("web", "web", key(&format!("storm-{task}-{n}")), request)
                    .await;
                if let Ok(view) = held {
                    if rng.gen_bool(0.3) {
                        let _ = svc
                            .cancel(
                                &Caller::Channel("web".into()),
                                "web",
                                Some(key(&format!("storm-cancel-{task}-{n}"))),
                                ReservationId::from_uuid(view.reservation_id),
                                "storm".into(),
                            )
                            .await;
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    releaser.await.expect("releaser");
    wait_caught_up(&db.pool, availability::NAME).await;

    // Assert: Redis says exactly what room_nights says, night by night.
    let reader = availability::Reader::new(keys.clone());
    let differences = compare_with_redis(&db.pool, &redis.url(), &reader).await;
    assert!(differences.is_empty(), "{differences:#?}");
    assert_invariants(&db.pool).await;

    // And a rebuild from position zero, while the runner still runs, serves the same.
    let generation = reservations::workers::rebuild(
        &db.pool,
        Some(reservations::workers::RedisModel {
            redis: availability::connect(&redis.url()).expect("redis"),
            keys: keys.clone(),
        }),
        reservations::workers::ProjectionName::Availability,
        50,
        |_, _| {},
    )
    .await
    .expect("rebuild");
    assert_eq!(generation, 2);
    wait_caught_up(&db.pool, availability::NAME).await;
    // Read with the reader of the first generation, now deleted: each read must find
    // the switch and answer from the new generation.
    let differences = compare_with_redis(&db.pool, &redis.url(), &reader).await;
    assert!(
        differences.is_empty(),
        "after the rebuild: {differences:#?}"
    );
    let _ = stop.send(true);
    runner.await.expect("runner");
    db.drop_database().await;
}

/// Every key of the deployment on `db` in `redis`, dumped (`DUMP`), to restore later.
async fn snapshot_keys(
    redis: &mut projections::redis_conn::RedisConn,
    db: &str,
) -> Vec<(String, Vec<u8>)> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("rsv:{db}:*"))
        .query_async(redis)
        .await
        .expect("keys");
    let mut dumped = Vec::new();
    for key in keys {
        let value: Vec<u8> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(redis)
            .await
            .expect("dump");
        dumped.push((key, value));
    }
    dumped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_restored_from_an_older_snapshot_is_rebuilt_not_resumed() {
    // Arrange: the runner follows some holds; Redis is snapshotted; more holds follow.
    let db = TestDb::new().await;
    let redis = PrivateRedis::start();
    redis.wait_ready().await;
    let keys = Keys::for_database(&db.name);
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(20), 4, 8).await;
    let run = || {
        let (stop, stopped) = watch::channel(false);
        let runner = reservations::workers::spawn_availability_runner(
            db.pool.clone(),
            availability::connect(&redis.url()).expect("redis"),
            keys.clone(),
            fast(),
            &projections::Tail::default(),
            stopped,
        );
        (stop, runner)
    };
    let hold = |n: usize| {
        let svc = svc.clone();
        async move {
            svc.hold(
                "web",
                "web",
                key(&format!("snapshot-{n}")),
                hold_request(stay(day(20), day(23)), 1, n),
            )
            .await
            .expect("hold");
        }
    };
    let (stop, runner) = run();
    hold(0).await;
    wait_caught_up(&db.pool, availability::NAME).await;
    let mut conn = availability::connect(&redis.url()).expect("redis");
    let snapshot = snapshot_keys(&mut conn, &db.name).await;
    assert!(!snapshot.is_empty());
    for n in 1..4 {
        hold(n).await;
    }
    wait_caught_up(&db.pool, availability::NAME).await;
    let _ = stop.send(true);
    runner.await.expect("runner");

    // Act: Redis goes back to the snapshot (its model one hold behind the checkpoint,
    // three holds short), and the runner starts again.
    let _: () = redis::cmd("FLUSHALL")
        .query_async(&mut conn)
        .await
        .expect("flush");
    for (key, value) in &snapshot {
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(value.as_slice())
            .query_async(&mut conn)
            .await
            .expect("restore");
    }
    let (stop, runner) = run();

    // Assert: the model converges to room_nights (resumed from the checkpoint, it would
    // miss the three holds for good).
    let reader = availability::Reader::new(keys.clone());
    let mut differences = Vec::new();
    for _ in 0..100 {
        wait_caught_up(&db.pool, availability::NAME).await;
        differences = compare_with_redis(&db.pool, &redis.url(), &reader).await;
        if differences.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(differences.is_empty(), "{differences:#?}");
    let _ = stop.send(true);
    runner.await.expect("runner");
    db.drop_database().await;
}

/// A running app on `db` whose read model lives in the Redis at `redis_url`.
struct RunningApp {
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RunningApp {
    async fn start(db: &TestDb, redis_url: &str, tokens: &str) -> Self {
        let mut settings = reservations::startup::Settings::for_database(&db.url);
        settings.listen_addr = "127.0.0.1:0".into();
        settings.redis_url = redis_url.to_owned();
        settings.api_tokens = Some(tokens.into());
        let app = reservations::startup::Application::build(settings)
            .await
            .expect("build");
        let base = format!("http://127.0.0.1:{}", app.port());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(app.run_until(async move {
            let _ = stopped.await;
        }));
        Self { base, stop, server }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.server
            .await
            .expect("server task")
            .expect("clean shutdown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn availability_survives_redis_stopping_and_the_model_is_rebuilt_when_it_returns_empty() {
    // Arrange: a running app whose Redis is a private server we can stop.
    let db = TestDb::new().await;
    let mut redis = PrivateRedis::start();
    redis.wait_ready().await;
    let app = RunningApp::start(&db, &redis.url(), "web-token-1:channel:web").await;
    let base = app.base.clone();
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(20), 5, 5).await;
    let client = reqwest::Client::new();
    let availability = || {
        client
            .get(format!(
                "{base}/v1/hotels/{HOTEL}/availability?start_date={}&end_date={}",
                day(20),
                day(23)
            ))
            .bearer_auth("web-token-1")
            .send()
    };
    let source = |body: &serde_json::Value| body["source"].as_str().unwrap_or("").to_owned();
    wait_caught_up(&db.pool, availability::NAME).await;
    let mut cached = None;
    for _ in 0..100 {
        let body: serde_json::Value = availability()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        if source(&body) == "cache" {
            cached = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cached = cached.expect("the cache answers once caught up");
    assert_eq!(cached["room_types"][0]["remaining"], 5);

    // Act 1: Redis goes away.
    redis.stop();
    let during = availability().await.expect("get");
    let during_status = during.status();
    let during: serde_json::Value = during.json().await.expect("json");
    let hold = client
        .post(format!("{base}/v1/reservations"))
        .bearer_auth("web-token-1")
        .header("Idempotency-Key", "while-redis-is-down")
        .json(&serde_json::json!({
            "hotel_id": HOTEL, "room_type_id": KING,
            "start_date": day(20), "end_date": day(22), "rooms": 1,
            "guest": {"name": "Ana", "email": "ana@example.com"}
        }))
        .send()
        .await
        .expect("hold");

    // Assert 1: PostgreSQL answers availability and holds still work.
    assert_eq!(during_status, 200);
    assert_eq!(source(&during), "database");
    assert_eq!(hold.status(), 201);
    let held_at = chrono::Utc::now();

    // Act 2: Redis comes back, empty.
    let redis = PrivateRedis::start_on(redis.port);
    redis.wait_ready().await;
    let mut rebuilt = None;
    for _ in 0..400 {
        let body: serde_json::Value = availability()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        // The cache may lag (as_of says how much); wait for an answer that claims to
        // reflect the hold's commit.
        let as_of = body["as_of"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        if source(&body) == "cache" && as_of.is_some_and(|t| t >= held_at) {
            rebuilt = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Assert 2: the model was rebuilt, including the hold made while Redis was down.
    let rebuilt = rebuilt.expect("the cache answers again after the rebuild");
    let nights = rebuilt["room_types"][0]["nights"]
        .as_array()
        .expect("nights")
        .clone();
    let remaining: Vec<i64> = nights
        .iter()
        .filter_map(|n| n["remaining"].as_i64())
        .collect();
    assert_eq!(remaining, vec![4, 4, 5]);
    wait_caught_up(&db.pool, availability::NAME).await;
    let differences = compare_with_redis(
        &db.pool,
        &redis.url(),
        &availability::Reader::new(Keys::for_database(&db.name)),
    )
    .await;
    assert!(differences.is_empty(), "{differences:#?}");
    app.stop().await;
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_night_down_to_its_last_room_is_read_from_postgresql() {
    let db = TestDb::new().await;
    let redis = PrivateRedis::start();
    redis.wait_ready().await;
    let app = RunningApp::start(&db, &redis.url(), "web-token-1:channel:web").await;
    let base = app.base.clone();
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(20), 3, 2).await;
    svc.hold(
        "web",
        "web",
        key("one"),
        hold_request(stay(day(21), day(22)), 1, 1),
    )
    .await
    .expect("hold");
    wait_caught_up(&db.pool, availability::NAME).await;
    let client = reqwest::Client::new();
    let ask = |from: u64, to: u64| {
        client
            .get(format!(
                "{base}/v1/hotels/{HOTEL}/availability?start_date={}&end_date={}",
                day(from),
                day(to)
            ))
            .bearer_auth("web-token-1")
            .send()
    };
    let mut roomy = serde_json::Value::Null;
    for _ in 0..100 {
        roomy = ask(20, 21).await.expect("get").json().await.expect("json");
        if roomy["source"] == "cache" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let tight: serde_json::Value = ask(20, 22).await.expect("get").json().await.expect("json");

    assert_eq!(roomy["source"], "cache", "{roomy}");
    assert_eq!(
        tight["source"], "database",
        "the last room is answered by PostgreSQL"
    );
    assert_eq!(tight["room_types"][0]["remaining"], 1);
    app.stop().await;
    db.drop_database().await;
}

/// Runners are woken after a command commits, by the process that committed it (there
/// is no trigger in the writing transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_hold_wakes_the_listeners_of_events() {
    // Arrange: a listener, as a runner has, and the announcing task an application runs.
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Group);
    hotel_with_rooms(&svc, day(30), 3, 5).await;
    let mut listener = sqlx::postgres::PgListener::connect_with(&db.pool)
        .await
        .expect("listener");
    listener.listen("events").await.expect("listen");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let announcer = tokio::spawn(store::write::announce::notify_commits(
        db.pool.clone(),
        stopped,
    ));
    // The announcer's first wake-up covers the commits before it started.
    tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("the first announcement")
        .expect("notification");
    tokio::time::sleep(store::write::announce::SPACING * 3).await;
    while listener.next_buffered().is_some() {}

    // Act
    svc.hold(
        "web",
        "web",
        key("wake"),
        hold_request(stay(day(30), day(31)), 1, 1),
    )
    .await
    .expect("hold");

    // Assert
    let woken = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a wake-up after the commit")
        .expect("notification");
    assert_eq!(woken.channel(), "events");
    let (triggers,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'events'::regclass AND NOT tgisinternal AND tgname = 'events_appended'")
            .fetch_one(&db.pool)
            .await
            .expect("triggers");
    assert_eq!(triggers, 0, "no NOTIFY inside the writing transaction");
    let _ = stop.send(true);
    announcer.await.expect("announcer");
    // The listener holds one of the pool's connections, and closing the pool waits for
    // every connection to come back: it must go first.
    drop(listener);
    db.drop_database().await;
}

/// Holds the availability projection's checkpoint row, so its runner cannot commit a
/// batch (it locks the row first): the model is paused until [`Paused::resume`].
struct Paused(sqlx::Transaction<'static, sqlx::Postgres>);

impl Paused {
    async fn availability(pool: &PgPool) -> Self {
        let mut tx = pool.begin().await.expect("tx");
        sqlx::query("SELECT 1 FROM projection_checkpoints WHERE name = $1 FOR UPDATE")
            .bind(availability::NAME)
            .execute(&mut *tx)
            .await
            .expect("lock the checkpoint");
        Self(tx)
    }

    async fn resume(self) {
        self.0.rollback().await.expect("rollback");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nights_and_room_types_the_model_has_not_seen_are_read_from_postgresql_not_sold_out() {
    // Arrange: the model serves hotel 812 (king, five rooms on day 20 to 24), then is
    // paused.
    let db = TestDb::new().await;
    let redis = PrivateRedis::start();
    redis.wait_ready().await;
    let app = RunningApp::start(
        &db,
        &redis.url(),
        "web-token-1:channel:web,admin-token-1:admin:staff",
    )
    .await;
    let base = app.base.clone();
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(20), 5, 5).await;
    wait_caught_up(&db.pool, availability::NAME).await;
    let client = reqwest::Client::new();
    let get_with = |path: String, token: Option<&'static str>| {
        let client = client.clone();
        let base = base.clone();
        async move {
            let mut request = client
                .get(format!("{base}{path}"))
                .bearer_auth("web-token-1");
            if let Some(token) = token {
                request = request.header("Consistency-Token", token);
            }
            request
                .send()
                .await
                .expect("get")
                .json::<serde_json::Value>()
                .await
                .expect("json")
        }
    };
    let get = |path: String| get_with(path, None);
    let hotel = |from: u64, to: u64| {
        format!(
            "/v1/hotels/{HOTEL}/availability?start_date={}&end_date={}",
            day(from),
            day(to)
        )
    };
    let city = |from: u64, to: u64| {
        format!(
            "/v1/availability?city=Lisbon&start_date={}&end_date={}",
            day(from),
            day(to)
        )
    };
    let mut known = serde_json::Value::Null;
    for _ in 0..100 {
        known = get(hotel(20, 22)).await;
        if known["source"] == "cache" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(known["source"], "cache", "{known}");
    let paused = Paused::availability(&db.pool).await;

    // Act: thirty new nights, then the questions at once; then a new room type on the
    // nights the model knows, asked by a reader that just wrote.
    svc.set_inventory(
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        king(),
        stay(day(40), day(70)),
        aggregates::booking::InventoryUpdate {
            total_rooms: Some(7),
            overbooking_allowance: Some(0),
            rate_cents: Some(aggregates::Cents::new(15_000)),
        },
    )
    .await
    .expect("set inventory");
    let new_nights = get(hotel(41, 44)).await;
    let new_nights_in_city = get(city(41, 44)).await;
    // The console's calendar, which staff poll: the same nights, not "no inventory".
    let new_nights_in_calendar = client
        .get(format!(
            "{base}/v1/hotels/{HOTEL}/calendar?start_date={}&end_date={}",
            day(41),
            day(44)
        ))
        .bearer_auth("admin-token-1")
        .send()
        .await
        .expect("calendar")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    room_type_with_rooms(&svc, 4, day(20), 5, 2).await;
    // A room type the model has not seen is not in its catalog: only a read that
    // presents a write's token (any token) can say it needs it.
    let new_room_type = get_with(hotel(20, 22), Some("0/1")).await;
    let new_room_type_in_city = get_with(city(20, 22), Some("0/1")).await;

    // Assert: PostgreSQL answered each, with the rooms that are there.
    assert_eq!(new_nights["source"], "database", "{new_nights}");
    let nights = &new_nights["room_types"][0]["nights"];
    for night in nights.as_array().expect("nights") {
        assert_eq!(night["remaining"], 7, "{new_nights}");
        assert_eq!(night["rate_cents"], 15_000, "{new_nights}");
    }
    assert_eq!(
        new_nights["room_types"][0]["available"], true,
        "{new_nights}"
    );
    assert_eq!(
        new_nights_in_city["source"], "database",
        "{new_nights_in_city}"
    );
    assert_eq!(
        new_nights_in_city["hotels"][0]["hotel_id"], HOTEL,
        "{new_nights_in_city}"
    );
    assert_eq!(
        new_nights_in_calendar["source"], "database",
        "{new_nights_in_calendar}"
    );
    for night in new_nights_in_calendar["room_types"][0]["nights"]
        .as_array()
        .expect("calendar nights")
    {
        assert_eq!(night["total_rooms"], 7, "{new_nights_in_calendar}");
        assert_eq!(night["remaining"], 7, "{new_nights_in_calendar}");
    }
    assert_eq!(new_room_type["source"], "database", "{new_room_type}");
    let types: Vec<i64> = new_room_type["room_types"]
        .as_array()
        .expect("room types")
        .iter()
        .filter_map(|t| t["room_type_id"].as_i64())
        .collect();
    assert_eq!(types, vec![KING, 4], "{new_room_type}");
    assert_eq!(
        new_room_type["room_types"][1]["remaining"], 2,
        "{new_room_type}"
    );
    assert_eq!(new_room_type_in_city["source"], "database");

    // And once the model has seen them, it answers them itself, with the same rooms.
    // (Days 41 to 43 stay with PostgreSQL: type 4 has no inventory there, which only
    // the database can tell from "not seen yet".)
    paused.resume().await;
    wait_caught_up(&db.pool, availability::NAME).await;
    let mut cached = serde_json::Value::Null;
    for _ in 0..100 {
        cached = get(hotel(20, 22)).await;
        if cached["source"] == "cache" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cached["source"], "cache", "{cached}");
    assert_eq!(cached["room_types"], new_room_type["room_types"]);
    assert_eq!(get(hotel(41, 44)).await["source"], "database");
    app.stop().await;
    db.drop_database().await;
}
