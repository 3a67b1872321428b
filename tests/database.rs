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
    let stream = format!("{HOTEL}:{id}");
    let events = reservations_store
        .load_events(&stream)
        .await
        .expect("postgres-es loads the reservation stream");
    let night_events = nights_store
        .load_events(&format!("{HOTEL}:{KING}:{}", day(10).format("%Y-%m-%d")))
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
