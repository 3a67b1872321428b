//! The command API against a real PostgreSQL: one behaviour per test, each on a fresh
//! database, Arrange / Act / Assert.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: an unwrap is an assertion

mod common;

use std::sync::Arc;

use aggregates::booking::InventoryUpdate;
use aggregates::{
    HotelDetails, HotelId, Rejection, ReservationId, ReservationStatus, RoomTypeId, StayDates,
};
use chrono::{Days, Duration, Utc};
use common::*;
use reservations::clock::{Clock, ManualClock};
use reservations::commands::Caller;
use reservations::error::CommandError;
use reservations::write::Strategy;

const STRATEGIES: [Strategy; 3] = [Strategy::Optimistic, Strategy::Pessimistic, Strategy::Group];

fn web() -> Caller {
    Caller::Channel("web".to_owned())
}

#[tokio::test]
async fn a_stay_ending_on_the_twelfth_and_one_starting_on_the_twelfth_both_succeed() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 5, 1).await;

        let first = svc
            .hold("web", key("a"), hold_request(stay(day(10), day(12)), 1, 1))
            .await;
        let second = svc
            .hold("web", key("b"), hold_request(stay(day(12), day(14)), 1, 2))
            .await;

        assert!(first.is_ok(), "{first:?}");
        assert!(second.is_ok(), "{second:?}");
        for d in 10..14 {
            assert_eq!(taken(&db.pool, day(d)).await, 1, "night {d}");
        }
        assert_eq!(taken(&db.pool, day(14)).await, 0);
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[test]
fn zero_night_and_inverted_stays_are_rejected_at_the_boundary() {
    assert!(StayDates::parse(day(10), day(10)).is_err());
    assert!(StayDates::parse(day(11), day(10)).is_err());
}

#[tokio::test]
async fn holding_is_all_nights_or_none_and_sold_out_names_the_first_failing_night() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 1).await;
    svc.hold(
        "web",
        key("middle"),
        hold_request(stay(day(12), day(13)), 1, 1),
    )
    .await
    .expect("hold the middle night");

    let result = svc
        .hold(
            "web",
            key("span"),
            hold_request(stay(day(10), day(15)), 1, 2),
        )
        .await;

    match result {
        Err(CommandError::Rejected(Rejection::SoldOut { night })) => assert_eq!(night, day(12)),
        other => panic!("expected sold_out, got {other:?}"),
    }
    assert_eq!(taken(&db.pool, day(10)).await, 0, "no partial hold");
    assert_eq!(taken(&db.pool, day(11)).await, 0, "no partial hold");
    assert_eq!(taken(&db.pool, day(14)).await, 0, "no partial hold");
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test]
async fn the_price_is_the_sum_of_the_nightly_rates_and_a_stale_price_is_refused() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 3).await;
    svc.set_inventory(
        &reservations::commands::Caller::Staff("staff".into()),
        hotel_id(),
        king(),
        stay(day(11), day(12)),
        InventoryUpdate {
            total_rooms: 3,
            overbooking_allowance: None,
            rate_cents: Some(25_000),
        },
    )
    .await
    .expect("weekend rate");

    let mut stale = hold_request(stay(day(10), day(13)), 2, 1);
    stale.expected_total_cents = Some(3 * 18_000 * 2);
    let refused = svc.hold("web", key("stale"), stale).await;
    let held = svc
        .hold(
            "web",
            key("fresh"),
            hold_request(stay(day(10), day(13)), 2, 1),
        )
        .await
        .expect("hold");

    let expected = (18_000 + 25_000 + 18_000) * 2;
    match refused {
        Err(CommandError::Rejected(Rejection::PriceChanged { total_cents })) => {
            assert_eq!(total_cents, expected)
        }
        other => panic!("expected price_changed, got {other:?}"),
    }
    assert_eq!(held.total_cents, expected);
    assert_eq!(
        taken(&db.pool, day(10)).await,
        2,
        "only the fresh hold took rooms"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn cancelling_twice_releases_once() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 5, 2).await;
        let view = svc
            .hold("web", key("h"), hold_request(stay(day(10), day(13)), 1, 1))
            .await
            .expect("hold");
        svc.hold("web", key("h2"), hold_request(stay(day(10), day(13)), 1, 2))
            .await
            .expect("second guest");
        let id = ReservationId::from_uuid(view.reservation_id);

        let first = svc
            .cancel(&web(), Some(key("c1")), id, "change of plans".into())
            .await
            .expect("cancel");
        let second = svc
            .cancel(&web(), Some(key("c2")), id, "change of plans".into())
            .await;

        assert_eq!(first.status, ReservationStatus::Cancelled);
        match second {
            Err(CommandError::Rejected(Rejection::InvalidState { status })) => {
                assert_eq!(status, ReservationStatus::Cancelled)
            }
            other => panic!("expected invalid_state, got {other:?}"),
        }
        for d in 10..13 {
            assert_eq!(
                taken(&db.pool, day(d)).await,
                1,
                "the other guest keeps night {d}"
            );
        }
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn concurrent_cancels_of_one_reservation_release_its_nights_once() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 3, 3).await;
        for g in 0..2 {
            svc.hold(
                "web",
                key(&format!("other{g}")),
                hold_request(stay(day(10), day(13)), 1, g),
            )
            .await
            .expect("other guests");
        }
        let view = svc
            .hold(
                "web",
                key("mine"),
                hold_request(stay(day(10), day(13)), 1, 9),
            )
            .await
            .expect("hold");
        let id = ReservationId::from_uuid(view.reservation_id);

        let mut calls = Vec::new();
        for n in 0..16 {
            let svc = svc.clone();
            calls.push(tokio::spawn(async move {
                svc.cancel(&web(), Some(key(&format!("cancel{n}"))), id, "x".into())
                    .await
            }));
        }
        let mut cancelled = 0;
        for call in calls {
            match call.await.expect("task") {
                Ok(_) => cancelled += 1,
                Err(CommandError::Rejected(Rejection::InvalidState { .. })) => {}
                Err(CommandError::Contention { .. }) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }

        assert_eq!(cancelled, 1);
        for d in 10..13 {
            assert_eq!(taken(&db.pool, day(d)).await, 2);
        }
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn change_dates_moves_the_stay_in_one_step() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 10, 1).await;
        let view = svc
            .hold("web", key("h"), hold_request(stay(day(10), day(13)), 1, 1))
            .await
            .expect("hold");
        let id = ReservationId::from_uuid(view.reservation_id);

        let moved = svc
            .change_dates(&web(), Some(key("m")), id, stay(day(11), day(15)), None)
            .await
            .expect("change dates");

        assert_eq!((moved.start_date, moved.end_date), (day(11), day(15)));
        assert_eq!(moved.total_cents, 4 * 18_000);
        assert_eq!(taken(&db.pool, day(10)).await, 0, "left night released");
        for d in 11..15 {
            assert_eq!(taken(&db.pool, day(d)).await, 1, "night {d} taken");
        }
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn change_dates_onto_a_sold_out_night_changes_nothing() {
    for strategy in STRATEGIES {
        let db = TestDb::new().await;
        let svc = db.service(strategy);
        hotel_with_rooms(&svc, day(10), 10, 1).await;
        let view = svc
            .hold("web", key("h"), hold_request(stay(day(10), day(13)), 1, 1))
            .await
            .expect("hold");
        svc.hold(
            "web",
            key("blocker"),
            hold_request(stay(day(14), day(15)), 1, 2),
        )
        .await
        .expect("blocker");
        let id = ReservationId::from_uuid(view.reservation_id);
        let before = night_rows(&db.pool).await;

        let result = svc
            .change_dates(&web(), Some(key("m")), id, stay(day(12), day(16)), None)
            .await;

        match result {
            Err(CommandError::Rejected(Rejection::SoldOut { night })) => {
                assert_eq!(night, day(14))
            }
            other => panic!("expected sold_out, got {other:?}"),
        }
        assert_eq!(night_rows(&db.pool).await, before, "nothing changed");
        let still = svc.reservation(id).await.expect("read").expect("exists");
        assert_eq!((still.start_date, still.end_date), (day(10), day(13)));
        assert_invariants(&db.pool).await;
        db.drop_database().await;
    }
}

#[tokio::test]
async fn a_lapsed_hold_does_not_count_and_is_dropped_when_the_room_is_needed() {
    let db = TestDb::new().await;
    let clock = ManualClock::new(Utc::now());
    let svc = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock.clone()));
    hotel_with_rooms(&svc, day(10), 3, 1).await;
    let lapsing = svc
        .hold(
            "web",
            key("slow"),
            hold_request(stay(day(10), day(12)), 1, 1),
        )
        .await
        .expect("hold");

    clock.advance(Duration::seconds(901));
    let as_read = svc
        .reservation(ReservationId::from_uuid(lapsing.reservation_id))
        .await
        .expect("read")
        .expect("exists");
    let taker = svc
        .hold(
            "web",
            key("fast"),
            hold_request(stay(day(10), day(11)), 1, 2),
        )
        .await;

    assert_eq!(
        as_read.status,
        ReservationStatus::Expired,
        "read as expired at once"
    );
    assert!(
        taker.is_ok(),
        "the lapsed hold did not block the sale: {taker:?}"
    );
    let lapsed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE event_type = 'HoldLapsed'")
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(
        lapsed, 1,
        "dropped with its own event, on the night that needed it"
    );
    assert_eq!(taken(&db.pool, day(10)).await, 1);
    assert_eq!(
        taken(&db.pool, day(11)).await,
        1,
        "still carried until expired"
    );
    assert_invariants_at(&db.pool, clock.now()).await;

    let expired = svc
        .expire_hold(ReservationId::from_uuid(lapsing.reservation_id))
        .await
        .expect("expire");
    assert_eq!(expired.status, ReservationStatus::Expired);
    assert_eq!(
        taken(&db.pool, day(11)).await,
        0,
        "expiry released the other night"
    );
    assert_invariants_at(&db.pool, clock.now()).await;
    db.drop_database().await;
}

#[tokio::test]
async fn expiring_a_live_hold_is_refused() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Optimistic);
    hotel_with_rooms(&svc, day(10), 3, 1).await;
    let view = svc
        .hold("web", key("h"), hold_request(stay(day(10), day(12)), 1, 1))
        .await
        .expect("hold");

    let result = svc
        .expire_hold(ReservationId::from_uuid(view.reservation_id))
        .await;

    assert!(matches!(
        result,
        Err(CommandError::Rejected(Rejection::HoldStillLive))
    ));
    assert_eq!(taken(&db.pool, day(10)).await, 1);
    db.drop_database().await;
}

#[tokio::test]
async fn confirming_a_hold_moves_its_rooms_to_confirmed() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 3, 2).await;
    let view = svc
        .hold("web", key("h"), hold_request(stay(day(10), day(12)), 2, 1))
        .await
        .expect("hold");
    let id = ReservationId::from_uuid(view.reservation_id);

    let confirmed = svc
        .confirm(&web(), Some(key("c")), id)
        .await
        .expect("confirm");
    let again = svc
        .confirm(&web(), Some(key("c2")), id)
        .await
        .expect("again");

    assert_eq!(confirmed.status, ReservationStatus::Confirmed);
    assert_eq!(again.status, ReservationStatus::Confirmed);
    let rows = night_rows(&db.pool).await;
    let night = &rows[&(HOTEL, KING, day(10))];
    assert_eq!((night.confirmed, night.held), (2, 0));
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}

#[tokio::test]
async fn setting_inventory_below_what_is_sold_is_rejected_and_changes_nothing() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 3).await;
    svc.hold("web", key("h"), hold_request(stay(day(12), day(13)), 2, 1))
        .await
        .expect("hold");
    let before = night_rows(&db.pool).await;

    let result = svc
        .set_inventory(
            &reservations::commands::Caller::Staff("staff".into()),
            hotel_id(),
            king(),
            stay(day(10), day(15)),
            InventoryUpdate {
                total_rooms: 1,
                overbooking_allowance: None,
                rate_cents: None,
            },
        )
        .await;

    match result {
        Err(CommandError::Rejected(Rejection::InventoryBelowReserved { night, reserved })) => {
            assert_eq!((night, reserved), (day(12), 2))
        }
        other => panic!("expected inventory_below_reserved, got {other:?}"),
    }
    assert_eq!(night_rows(&db.pool).await, before);
    db.drop_database().await;
}

#[tokio::test]
async fn the_overbooking_allowance_sells_exactly_that_many_more() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Optimistic);
    hotel_with_rooms(&svc, day(10), 1, 2).await;
    svc.set_inventory(
        &reservations::commands::Caller::Staff("staff".into()),
        hotel_id(),
        king(),
        stay(day(10), day(11)),
        InventoryUpdate {
            total_rooms: 2,
            overbooking_allowance: Some(1),
            rate_cents: None,
        },
    )
    .await
    .expect("allowance");

    let mut outcomes = Vec::new();
    for g in 0..4 {
        outcomes.push(
            svc.hold(
                "web",
                key(&format!("g{g}")),
                hold_request(stay(day(10), day(11)), 1, g),
            )
            .await
            .is_ok(),
        );
    }

    assert_eq!(outcomes, vec![true, true, true, false]);
    assert_eq!(taken(&db.pool, day(10)).await, 3);
    db.drop_database().await;
}

#[tokio::test]
async fn a_replayed_request_returns_the_first_outcome_even_a_rejection() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 2, 1).await;
    let request = hold_request(stay(day(10), day(12)), 1, 1);
    let first = svc
        .hold("web", key("k"), request.clone())
        .await
        .expect("hold");

    let replay = svc
        .hold("web", key("k"), request.clone())
        .await
        .expect("replay");
    let other_client = svc.hold("mobile", key("k"), request.clone()).await;
    let reused = svc
        .hold("web", key("k"), hold_request(stay(day(10), day(11)), 1, 1))
        .await;
    let sold_out = svc.hold("mobile", key("k2"), request.clone()).await;
    let sold_out_replay = {
        // Free the rooms: the replay must still say sold_out, as the first answer did.
        svc.cancel(
            &web(),
            Some(key("free")),
            ReservationId::from_uuid(first.reservation_id),
            "free".into(),
        )
        .await
        .expect("cancel");
        svc.hold("mobile", key("k2"), request.clone()).await
    };

    assert_eq!(replay, first, "the same answer, the same reservation");
    assert!(
        matches!(
            other_client,
            Err(CommandError::Rejected(Rejection::SoldOut { .. }))
        ),
        "keys are scoped per client: {other_client:?}"
    );
    assert!(matches!(reused, Err(CommandError::KeyReused)));
    assert!(matches!(
        sold_out,
        Err(CommandError::Rejected(Rejection::SoldOut { .. }))
    ));
    assert!(matches!(
        sold_out_replay,
        Err(CommandError::Rejected(Rejection::SoldOut { .. }))
    ));
    let key_on_first_event: Option<String> = sqlx::query_scalar(
        "SELECT metadata->>'idempotency_key' FROM events
          WHERE aggregate_type = 'reservation' AND sequence = 1",
    )
    .fetch_one(&db.pool)
    .await
    .expect("metadata");
    assert_eq!(key_on_first_event.as_deref(), Some("k"));
    db.drop_database().await;
}

#[tokio::test]
async fn a_channel_cannot_act_on_another_channels_reservation() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 2, 1).await;
    let view = svc
        .hold("web", key("k"), hold_request(stay(day(10), day(12)), 1, 1))
        .await
        .expect("hold");
    let id = ReservationId::from_uuid(view.reservation_id);

    let result = svc
        .cancel(
            &Caller::Channel("mobile".into()),
            Some(key("c")),
            id,
            "x".into(),
        )
        .await;

    assert!(matches!(result, Err(CommandError::Forbidden)));
    assert_eq!(taken(&db.pool, day(10)).await, 1);
    let by_staff = svc
        .cancel(
            &Caller::Staff("admin".into()),
            None,
            id,
            "overbooked".into(),
        )
        .await
        .expect("staff may cancel");
    assert_eq!(by_staff.status, ReservationStatus::Cancelled);
    db.drop_database().await;
}

#[tokio::test]
async fn holding_an_unknown_hotel_or_room_type_or_past_dates_is_rejected() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 2, 1).await;

    let mut unknown_hotel = hold_request(stay(day(10), day(11)), 1, 1);
    unknown_hotel.hotel_id = HotelId::parse(999).expect("id");
    let mut unknown_type = hold_request(stay(day(10), day(11)), 1, 1);
    unknown_type.room_type_id = RoomTypeId::parse(77).expect("id");
    let yesterday = Utc::now()
        .date_naive()
        .checked_sub_days(Days::new(2))
        .expect("date");
    let past = hold_request(stay(yesterday, day(11)), 1, 1);

    assert!(matches!(
        svc.hold("web", key("a"), unknown_hotel).await,
        Err(CommandError::Rejected(Rejection::UnknownHotel))
    ));
    assert!(matches!(
        svc.hold("web", key("b"), unknown_type).await,
        Err(CommandError::Rejected(Rejection::UnknownRoomType))
    ));
    assert!(matches!(
        svc.hold("web", key("c"), past).await,
        Err(CommandError::Rejected(Rejection::Invalid(_)))
    ));
    assert_eq!(taken(&db.pool, day(10)).await, 0);
    db.drop_database().await;
}

#[tokio::test]
async fn catalog_writes_are_idempotent_puts() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    let details = HotelDetails::parse("Hotel Tejo", "Lisbon", "Europe/Lisbon").expect("details");

    svc.set_hotel(
        &reservations::commands::Caller::Staff("staff".into()),
        hotel_id(),
        details.clone(),
    )
    .await
    .expect("first");
    svc.set_hotel(
        &reservations::commands::Caller::Staff("staff".into()),
        hotel_id(),
        details,
    )
    .await
    .expect("second");
    let renamed = svc
        .set_hotel(
            &reservations::commands::Caller::Staff("staff".into()),
            hotel_id(),
            HotelDetails::parse("Hotel Tejo Riverside", "Lisbon", "Europe/Lisbon")
                .expect("details"),
        )
        .await
        .expect("rename");

    assert_eq!(
        renamed.details().map(|d| d.name().to_owned()).as_deref(),
        Some("Hotel Tejo Riverside")
    );
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE aggregate_type = 'hotel'")
            .fetch_one(&db.pool)
            .await
            .expect("count");
    assert_eq!(events, 2, "repeating the same PUT records nothing");
    let room_type = svc
        .set_room_type(
            &reservations::commands::Caller::Staff("staff".into()),
            HotelId::parse(5).expect("id"),
            king(),
            aggregates::RoomTypeDetails::parse("king", 2).expect("details"),
        )
        .await;
    assert!(matches!(
        room_type,
        Err(CommandError::Rejected(Rejection::UnknownHotel))
    ));
    db.drop_database().await;
}

#[tokio::test]
async fn an_absurdly_long_stay_is_refused_before_the_database_is_touched() {
    // A pool that cannot reach any database: only a refusal that happens before loading
    // anything can come back as a rejection rather than a database error.
    let unreachable = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(200))
        .connect_lazy("postgres://nobody@127.0.0.1:1/none")
        .expect("lazy pool");
    let svc =
        reservations::commands::CommandService::new(unreachable, config(Strategy::Optimistic));
    let millennia = stay(
        chrono::NaiveDate::from_ymd_opt(1900, 1, 1).expect("date"),
        chrono::NaiveDate::from_ymd_opt(9999, 12, 31).expect("date"),
    );

    let held = svc
        .hold("web", key("k"), hold_request(millennia, 1, 1))
        .await;
    let moved = svc
        .change_dates(
            &web(),
            Some(key("m")),
            ReservationId::from_uuid(uuid::Uuid::nil()),
            millennia,
            None,
        )
        .await;

    for result in [held.map(|_| ()), moved.map(|_| ())] {
        match result {
            Err(CommandError::Rejected(Rejection::Invalid(invalid))) => {
                assert_eq!(invalid.field, "end_date")
            }
            other => panic!("expected a refusal before any IO, got {other:?}"),
        }
    }
}

/// A batch of holds is one transaction; when one of them cannot be written, the batch
/// is run again one hold at a time, so only that hold fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hold_that_cannot_be_written_fails_alone_not_its_batch() {
    // Arrange: one lane, so every hold goes through the same queue; a trigger that
    // refuses one guest's reservation, as a database failure the domain cannot foresee.
    let db = TestDb::new().await;
    let svc = reservations::commands::CommandService::new(
        db.pool.clone(),
        reservations::commands::WriteConfig {
            group_lanes: 1,
            ..config(Strategy::Group)
        },
    );
    hotel_with_rooms(&svc, day(30), 3, 50).await;
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
         CREATE TRIGGER refuse_poison BEFORE INSERT ON reservations FOR EACH ROW
           WHEN (NEW.guest_email = 'guest7@example.com') EXECUTE FUNCTION refuse_poison();",
    )
    .execute(&db.pool)
    .await
    .expect("trigger");
    assert_eq!(guest(7).email(), "guest7@example.com", "the poisoned guest");
    // Hold the room's lock elsewhere, so the first hold's batch waits on it while the
    // others queue behind it, and are then decided together in the next batch.
    let mut blocker = db.pool.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
        .bind(HOTEL as i32)
        .bind(KING as i32)
        .execute(&mut *blocker)
        .await
        .expect("lock the room");

    // Act
    let mut calls = Vec::new();
    for n in 0..12 {
        let svc = svc.clone();
        calls.push(tokio::spawn(async move {
            svc.hold(
                "web",
                key(&format!("batch-{n}")),
                hold_request(stay(day(30), day(32)), 1, n),
            )
            .await
        }));
        if n == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    blocker.rollback().await.expect("release the room");
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.expect("task"));
    }

    // Assert: the poisoned hold failed, every other one was placed.
    for (n, outcome) in outcomes.iter().enumerate() {
        if n == 7 {
            assert!(
                matches!(outcome, Err(CommandError::Database(_))),
                "the poisoned hold: {outcome:?}"
            );
        } else {
            assert!(outcome.is_ok(), "hold {n}: {outcome:?}");
        }
    }
    let (reservations,): (i64,) = sqlx::query_as("SELECT count(*) FROM reservations")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(reservations, 11);
    assert_eq!(taken(&db.pool, day(30)).await, 11);
    assert_invariants(&db.pool).await;
    db.drop_database().await;
}
