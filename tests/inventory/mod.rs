//! Rooms by the night: setting inventory and its overbooking allowance, availability,
//! and the invariant itself — no night is ever sold beyond its rooms and allowance,
//! whatever writes to the table (the database's CHECK), and however many race for the
//! last rooms (`races`).

mod races;

use aggregates::booking::InventoryUpdate;
use aggregates::Rejection;
use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use serde_json::{json, Value};
use store::error::CommandError;
use store::write::Strategy;

use crate::support::*;

#[tokio::test]
async fn inventory_sets_every_night_of_the_range_and_an_omitted_rate_is_kept() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;

    let update = app
        .put_inventory(
            HOTEL,
            KING,
            &json!({"start_date": day(10), "end_date": day(13), "total_rooms": 7}),
        )
        .await;

    assert_eq!(update.assert_status(200), &json!({"nights": 3}));
    let rows: Vec<(i32, i64)> =
        sqlx::query_as("SELECT total_rooms, rate_cents FROM room_nights ORDER BY night")
            .fetch_all(&app.db.pool)
            .await
            .expect("nights");
    assert_eq!(rows, vec![(7, RATE); 3]);
    app.finish().await;
}

#[tokio::test]
async fn lowering_inventory_below_what_is_held_is_409_naming_the_night_and_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;
    app.hold_ok(WEB, "hold-2", &hold_body(day(11), day(12), 2))
        .await;
    let before = app.snapshot().await;

    let lowered = app
        .put_inventory(
            HOTEL,
            KING,
            &json!({"start_date": day(10), "end_date": day(13), "total_rooms": 1}),
        )
        .await;

    let body = lowered.assert_error(409, "inventory_below_reserved");
    assert_eq!(body["night"], date(11));
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn availability_reports_each_nights_remaining_rooms_and_rate_and_the_total() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(11), "end_date": day(12), "total_rooms": 5, "rate_cents": 20_000}),
    )
    .await
    .assert_status(200);
    app.hold_ok(WEB, "two-rooms", &hold_body(day(11), day(12), 2))
        .await;

    let reply = app
        .availability(MOBILE, HOTEL, day(10), day(13), Some(2))
        .await;

    let body = reply.assert_status(200);
    assert_eq!(body["hotel_id"], HOTEL);
    assert_eq!(body["start_date"], date(10));
    assert_eq!(body["end_date"], date(13));
    assert_eq!(body["source"], "database");
    let as_of: DateTime<Utc> = body["as_of"]
        .as_str()
        .expect("as_of")
        .parse()
        .expect("RFC 3339");
    assert_eq!(as_of, app.now(), "as_of is the server's clock");
    let king = &body["room_types"][0];
    assert_eq!(king["room_type_id"], KING);
    assert_eq!(king["name"], "king");
    assert_eq!(
        king["nights"],
        json!([
            {"date": date(10), "remaining": 5, "rate_cents": RATE, "restrictions": {},
             "prices": [{"rate_plan_id": null, "rate_cents": RATE}]},
            {"date": date(11), "remaining": 3, "rate_cents": 20_000, "restrictions": {},
             "prices": [{"rate_plan_id": null, "rate_cents": 20_000}]},
            {"date": date(12), "remaining": 5, "rate_cents": RATE, "restrictions": {},
             "prices": [{"rate_plan_id": null, "rate_cents": RATE}]},
        ])
    );
    assert_eq!(king["remaining"], 3, "the minimum over the nights");
    assert_eq!(king["total_cents"], (RATE + 20_000 + RATE) * 2);
    assert_eq!(king["available"], true);
    app.finish().await;
}

#[tokio::test]
async fn availability_is_false_when_more_rooms_are_asked_than_remain_or_a_night_has_no_inventory() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;
    app.hold_ok(WEB, "three-rooms", &hold_body(day(10), day(13), 3))
        .await;

    let exactly = app
        .availability(WEB, HOTEL, day(10), day(13), Some(2))
        .await;
    let too_many = app
        .availability(WEB, HOTEL, day(10), day(13), Some(3))
        .await;
    let past_inventory = app.availability(WEB, HOTEL, day(12), day(14), None).await;

    let exactly = &exactly.assert_status(200)["room_types"][0];
    assert_eq!(
        (exactly["remaining"].clone(), exactly["available"].clone()),
        (json!(2), json!(true))
    );
    let too_many = &too_many.assert_status(200)["room_types"][0];
    assert_eq!(
        (too_many["remaining"].clone(), too_many["available"].clone()),
        (json!(2), json!(false))
    );
    let past = &past_inventory.assert_status(200)["room_types"][0];
    assert_eq!(past["available"], false);
    assert_eq!(past["remaining"], 0);
    assert_eq!(past["total_cents"], Value::Null);
    assert_eq!(
        past["nights"][1],
        json!({"date": date(13), "remaining": 0, "rate_cents": null, "restrictions": {},
               "prices": []})
    );
    app.finish().await;
}

#[tokio::test]
async fn availability_does_not_count_holds_that_have_lapsed() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 4).await;
    app.hold_ok(WEB, "lapsing", &hold_body(day(10), day(12), 3))
        .await;
    let while_held = app.availability(WEB, HOTEL, day(10), day(12), None).await;

    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));
    let after = app.availability(WEB, HOTEL, day(10), day(12), None).await;

    assert_eq!(
        while_held.assert_status(200)["room_types"][0]["remaining"],
        1
    );
    let after = after.assert_status(200);
    assert_eq!(after["room_types"][0]["remaining"], 4);
    assert_eq!(after["room_types"][0]["nights"][0]["remaining"], 4);
    assert_eq!(after["room_types"][0]["nights"][1]["remaining"], 4);
    let as_of: DateTime<Utc> = after["as_of"]
        .as_str()
        .expect("as_of")
        .parse()
        .expect("time");
    assert_eq!(as_of, app.now());
    app.finish().await;
}

#[tokio::test]
async fn availability_of_an_unknown_hotel_is_404_and_of_a_too_long_stay_is_422() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 5).await;

    let unknown = app.availability(WEB, 4242, day(10), day(12), None).await;
    let too_long = app.availability(WEB, HOTEL, day(10), day(41), None).await;
    let inverted = app.availability(WEB, HOTEL, day(12), day(10), None).await;
    let too_many_rooms = app
        .availability(WEB, HOTEL, day(10), day(12), Some(11))
        .await;

    unknown.assert_error(404, "not_found");
    too_long.assert_error(422, "invalid_request");
    inverted.assert_error(422, "invalid_request");
    too_many_rooms.assert_error(422, "invalid_request");
    app.finish().await;
}

#[tokio::test]
async fn the_overbooking_allowance_is_sold_on_top_of_the_physical_rooms() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 1, 1).await;
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(10), "end_date": day(11), "total_rooms": 1, "overbooking_allowance": 1}),
    )
    .await
    .assert_status(200);

    let first = app.hold(WEB, "a", &hold_body(day(10), day(11), 1)).await;
    let second = app.hold(WEB, "b", &hold_body(day(10), day(11), 1)).await;
    let third = app.hold(WEB, "c", &hold_body(day(10), day(11), 1)).await;

    first.assert_status(201);
    second.assert_status(201);
    third.assert_error(409, "sold_out");
    assert_eq!(app.taken(day(10)).await, 2);
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn setting_inventory_below_what_is_sold_is_rejected_and_changes_nothing() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 5, 3).await;
    svc.hold(
        "web",
        "web",
        key("h"),
        hold_request(stay(day(12), day(13)), 2, 1),
    )
    .await
    .expect("hold");
    let before = night_rows(&db.pool).await;

    let result = svc
        .set_inventory(
            &app::commands::Caller::Staff("staff".into()),
            hotel_id(),
            king(),
            stay(day(10), day(15)),
            InventoryUpdate {
                total_rooms: Some(1),
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
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        king(),
        stay(day(10), day(11)),
        InventoryUpdate {
            total_rooms: Some(2),
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
async fn an_oversell_written_behind_the_aggregates_back_is_refused_by_the_check() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    hotel_with_rooms(&svc, day(10), 1, 2).await;
    svc.hold(
        "web",
        "web",
        key("h"),
        hold_request(stay(day(10), day(11)), 2, 1),
    )
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
        "ARRAY[{hotels}]::bigint[], ARRAY[{types}]::bigint[], ARRAY[{nights}]::date[], now(), \
         ARRAY[{peeks}]::bool[]",
        hotels = vec![hotel_id().get().to_string(); nights.len()].join(","),
        types = vec![king().get().to_string(); nights.len()].join(","),
        nights = nights.join(","),
        peeks = vec!["false"; nights.len()].join(","),
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
                    "bigint[], bigint[], date[], timestamptz, bool[], uuid",
                    format!("{arguments}, gen_random_uuid()"),
                )
            } else {
                (
                    "bigint[], bigint[], date[], timestamptz, bool[]",
                    arguments.clone(),
                )
            };
            sqlx::query(&format!(
                "PREPARE {name}({parameters}) AS {}",
                store::write::nights_sql(true, reservation)
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
async fn the_horizon_job_carries_each_weekday_of_the_last_week_forward_once() {
    // Arrange: a week on sale from ten days on, its Friday and Saturday dearer and
    // with a two-night minimum
    let app = spawn_app().await;
    let first = day(10);
    app.seed_hotel(first, 7, 4).await;
    let weekend: Vec<NaiveDate> = (0..7)
        .map(|d| plus_days(first, d))
        .filter(|d| matches!(d.weekday().num_days_from_monday(), 4 | 5))
        .collect();
    for night in &weekend {
        app.put_inventory(
            HOTEL,
            KING,
            &json!({"start_date": night, "end_date": plus_days(*night, 1),
                    "total_rooms": 4, "overbooking_allowance": 1, "rate_cents": 2 * RATE}),
        )
        .await
        .assert_status(200);
        app.put_restrictions(
            HOTEL,
            KING,
            &json!({"start_date": night, "end_date": plus_days(*night, 1), "min_stay": 2}),
        )
        .await
        .assert_status(200);
    }

    // Act: keep 40 days on sale, twice (as two servers would)
    let commands = app.payments.commands();
    let extended = commands.extend_horizon(40).await.expect("extended");
    let again = commands.extend_horizon(40).await.expect("again");

    // Assert: every night to the 39th day is for sale, each as its weekday was
    assert_eq!(extended.room_types, 1);
    assert_eq!(extended.nights, 40 - 17, "{extended:?}");
    assert_eq!(again, Default::default());
    let rows: Vec<(NaiveDate, i32, i32, i64, Option<serde_json::Value>)> = sqlx::query_as(
        "SELECT night, total_rooms, overbooking_allowance, rate_cents, restrictions
           FROM room_nights ORDER BY night",
    )
    .fetch_all(&app.db.pool)
    .await
    .expect("nights");
    assert_eq!(rows.len(), 30, "the 10th to the 39th day");
    assert_eq!(rows.last().map(|r| r.0), Some(day(39)));
    for (night, rooms, allowance, rate, restrictions) in &rows {
        let is_weekend = matches!(night.weekday().num_days_from_monday(), 4 | 5);
        let min_stay = restrictions
            .as_ref()
            .and_then(|r| r.pointer("/all/min_stay"))
            .and_then(serde_json::Value::as_i64);
        if is_weekend {
            assert_eq!(
                (*rooms, *allowance, *rate, min_stay),
                (4, 1, 2 * RATE, Some(2)),
                "{night}"
            );
        } else {
            assert_eq!(
                (*rooms, *allowance, *rate, min_stay),
                (4, 0, RATE, None),
                "{night}"
            );
        }
    }
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}
