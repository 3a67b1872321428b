//! What the database itself guarantees, whatever the application does, and that the
//! event log stays readable by postgres-es.

mod common;

use aggregates::{Reservation, ReservationEvent, ReservationId, RoomNight};
use common::*;
use cqrs_es::persist::PersistedEventStore;
use cqrs_es::EventStore;
use postgres_es::PostgresEventRepository;
use reservations::write::Strategy;

#[tokio::test]
async fn an_oversell_written_behind_the_aggregates_back_is_refused_by_the_check() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 1, 2).await;
    svc.hold("web", key("h"), hold_request(stay(day(10), day(11)), 2, 1))
        .await
        .expect("hold both rooms");

    let oversell =
        sqlx::query("UPDATE room_nights SET held = held + 1 WHERE hotel_id = $1 AND night = $2")
            .bind(HOTEL)
            .bind(day(10))
            .execute(&db.pool)
            .await;
    let negative = sqlx::query("UPDATE room_nights SET confirmed = -1 WHERE hotel_id = $1")
        .bind(HOTEL)
        .execute(&db.pool)
        .await;
    let shrink = sqlx::query("UPDATE room_nights SET total_rooms = 1 WHERE hotel_id = $1")
        .bind(HOTEL)
        .execute(&db.pool)
        .await;

    for (what, result) in [
        ("oversell", oversell),
        ("negative", negative),
        ("shrink", shrink),
    ] {
        let code = result
            .expect_err(what)
            .as_database_error()
            .and_then(|e| e.code().map(|c| c.into_owned()));
        assert_eq!(code.as_deref(), Some("23514"), "{what}: check_violation");
    }
    assert_eq!(taken(&db.pool, day(10)).await, 2);
    db.drop_database().await;
}

#[tokio::test]
async fn postgres_es_reads_the_streams_the_unit_of_work_writes() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Optimistic);
    hotel_with_rooms(&svc, day(10), 3, 2).await;
    let view = svc
        .hold("web", key("h"), hold_request(stay(day(10), day(12)), 1, 1))
        .await
        .expect("hold");
    let id = ReservationId::from_uuid(view.reservation_id);
    svc.cancel(
        &reservations::commands::Caller::Channel("web".into()),
        Some(key("c")),
        id,
        "x".into(),
    )
    .await
    .expect("cancel");

    let reservations_store: PersistedEventStore<PostgresEventRepository, Reservation> =
        PersistedEventStore::new_event_store(PostgresEventRepository::new(db.pool.clone()));
    let nights_store: PersistedEventStore<PostgresEventRepository, RoomNight> =
        PersistedEventStore::new_event_store(PostgresEventRepository::new(db.pool.clone()));
    let stream = aggregates::contract::reservation_stream_id(hotel_id(), id);
    let events = reservations_store
        .load_events(&stream)
        .await
        .expect("postgres-es loads the reservation stream");
    let night_events = nights_store
        .load_events(&aggregates::RoomNightKey::new(hotel_id(), king(), day(10)).stream_id())
        .await
        .expect("postgres-es loads a night stream");

    assert_eq!(events.len(), 2);
    assert!(matches!(
        events[0].payload,
        ReservationEvent::ReservationHeld(_)
    ));
    assert!(matches!(
        events[1].payload,
        ReservationEvent::ReservationCancelled { .. }
    ));
    assert_eq!(
        events[0]
            .metadata
            .get("idempotency_key")
            .map(String::as_str),
        Some("h")
    );
    let mut night = RoomNight::default();
    for envelope in &night_events {
        night.apply_event(&envelope.payload);
    }
    assert_eq!(night_events.len(), 3, "inventory set, held, released");
    assert_eq!((night.held(), night.confirmed()), (0, 0));
    db.drop_database().await;
}

#[tokio::test]
async fn the_nights_read_probes_the_allocations_by_night_on_a_table_never_analyzed() {
    // Arrange: 30 nights, and an allocation table that no ANALYZE has seen (a young
    // database, or one whose autovacuum is off or behind); a connection keeps the generic
    // plan it made first, while the table was empty, for as long as it lives.
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 30, 500).await;
    let mut conn = db.pool.acquire().await.expect("connection");
    sqlx::query("ALTER TABLE room_night_allocations SET (autovacuum_enabled = false)")
        .execute(&mut *conn)
        .await
        .expect("keep autovacuum away");
    let nights: Vec<String> = (10..20).map(|d| format!("'{}'", day(d))).collect();
    let arguments = format!(
        "ARRAY[{hotels}]::bigint[], ARRAY[{types}]::bigint[], ARRAY[{nights}]::date[], now()",
        hotels = vec![hotel_id().get().to_string(); nights.len()].join(","),
        types = vec![king().get().to_string(); nights.len()].join(","),
        nights = nights.join(","),
    );

    // Act: the plans PostgreSQL would use for each form of the statement, generic (after
    // a few calls) and custom, on the empty table and again with 5,000 allocations.
    let mut plans = Vec::new();
    for filled in [false, true] {
        if filled {
            sqlx::query(
                "INSERT INTO room_night_allocations
                      (hotel_id, room_type_id, night, reservation_id, rooms, expires_at)
                 SELECT hotel_id, room_type_id, night, gen_random_uuid(), 1,
                        now() + interval '1 hour'
                   FROM room_nights CROSS JOIN generate_series(1, 5000 / 30)",
            )
            .execute(&mut *conn)
            .await
            .expect("fill the allocations");
            for name in ["hold", "of_reservation"] {
                sqlx::query(&format!("DEALLOCATE {name}"))
                    .execute(&mut *conn)
                    .await
                    .expect("forget the plans");
            }
        }
        for (name, reservation) in [("hold", false), ("of_reservation", true)] {
            let (parameters, arguments) = if reservation {
                (
                    "bigint[], bigint[], date[], timestamptz, uuid",
                    format!("{arguments}, gen_random_uuid()"),
                )
            } else {
                ("bigint[], bigint[], date[], timestamptz", arguments.clone())
            };
            sqlx::query(&format!(
                "PREPARE {name}({parameters}) AS {}",
                reservations::write::nights_sql(true, reservation)
            ))
            .execute(&mut *conn)
            .await
            .expect("prepare the read");
            for (mode, plan) in generic_and_custom_plans(&mut conn, name, &arguments).await {
                plans.push((filled, name, mode, plan));
            }
        }
    }

    // Assert: every read of the allocations is an index probe keyed by the night, never
    // a scan of the table or of a whole index (as a join, the reservation's own
    // allocations were read by a bitmap scan of the primary key on `reservation_id`).
    for (filled, name, mode, plan) in &plans {
        let lines: Vec<&str> = plan.lines().collect();
        let scans: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains("on room_night_allocations"))
            .collect();
        let expected = if *name == "hold" { 1 } else { 2 };
        let context = format!("filled: {filled}, {name}, {mode}:\n{plan}");
        assert_eq!(scans.len(), expected, "{context}");
        for i in scans {
            let condition = lines.get(i + 1).copied().unwrap_or_default();
            assert!(
                lines[i].contains("Index Scan using")
                    && condition.contains("Index Cond: ((hotel_id = w"),
                "{context}"
            );
        }
    }
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn a_connection_that_died_while_idle_is_replaced_not_handed_out() {
    // Arrange: the service's pool with one connection, which then sits idle while its
    // backend is terminated (as by a database restart or an idle-session timeout).
    let db = TestDb::new().await;
    let pool = reservations::db::write_pool(&db.url, 1)
        .await
        .expect("pool");
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .expect("pid");
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(backend)
        .fetch_one(&db.pool)
        .await
        .expect("terminate");
    assert!(terminated);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;

    // Act: the next statement through the pool.
    let answer: Result<i32, _> = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await;

    // Assert: it ran, on a new connection.
    let new_backend = answer.expect("the dead connection is checked and replaced");
    assert_ne!(new_backend, backend);
    pool.close().await;
    db.drop_database().await;
}
