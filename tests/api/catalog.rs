//! Catalog and inventory (admin), hotel look-ups and availability (any role).

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use crate::support::*;

fn tejo() -> Value {
    json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon"})
}

#[tokio::test]
async fn put_hotel_creates_a_hotel_that_get_hotel_returns_with_its_room_types() {
    let app = spawn_app().await;

    let put = app.put_hotel(HOTEL, &tejo()).await;
    let room_type = app
        .put_room_type(HOTEL, KING, &json!({"name": "king", "max_occupancy": 2}))
        .await;
    let got = app.get_hotel(WEB, HOTEL).await;

    let put = put.assert_status(200);
    assert_eq!(put["hotel_id"], HOTEL);
    assert_eq!(put["name"], "Hotel Tejo");
    assert_eq!(put["city"], "Lisbon");
    assert_eq!(put["timezone"], "Europe/Lisbon");
    assert_eq!(put["room_types"], json!([]));
    let room_type = room_type.assert_status(200);
    assert_eq!(
        room_type["room_types"],
        json!([{"room_type_id": KING, "name": "king", "max_occupancy": 2}])
    );
    let got = got.assert_status(200);
    assert_eq!(got, room_type, "GET answers what the last PUT answered");
    app.finish().await;
}

#[tokio::test]
async fn putting_a_hotel_again_updates_its_details_and_keeps_its_room_types() {
    let app = spawn_app().await;
    app.put_hotel(HOTEL, &tejo()).await.assert_status(200);
    app.put_room_type(HOTEL, KING, &json!({"name": "king", "max_occupancy": 2}))
        .await
        .assert_status(200);

    let put = app
        .put_hotel(
            HOTEL,
            &json!({"name": "Hotel Douro", "city": "Porto", "timezone": "Europe/Lisbon"}),
        )
        .await;

    put.assert_status(200);
    let got = app.get_hotel(AUDITOR, HOTEL).await;
    let got = got.assert_status(200);
    assert_eq!(got["name"], "Hotel Douro");
    assert_eq!(got["city"], "Porto");
    assert_eq!(got["room_types"][0]["room_type_id"], KING);
    app.finish().await;
}

#[tokio::test]
async fn a_room_type_or_inventory_for_an_unknown_hotel_or_room_type_is_refused_with_422() {
    let app = spawn_app().await;
    app.put_hotel(HOTEL, &tejo()).await.assert_status(200);

    let room_type_of_unknown_hotel = app
        .put_room_type(999, KING, &json!({"name": "king", "max_occupancy": 2}))
        .await;
    let inventory_of_unknown_room_type = app
        .put_inventory(
            HOTEL,
            77,
            &json!({"start_date": day(10), "end_date": day(12), "total_rooms": 3, "rate_cents": RATE}),
        )
        .await;

    room_type_of_unknown_hotel.assert_error(422, "unknown_hotel");
    inventory_of_unknown_room_type.assert_error(422, "unknown_room_type");
    assert_eq!(app.count("room_nights").await, 0);
    app.get_hotel(ADMIN, 999)
        .await
        .assert_error(404, "not_found");
    app.finish().await;
}

#[tokio::test]
async fn get_hotel_of_an_unknown_or_non_positive_id_is_404() {
    let app = spawn_app().await;

    let unknown = app.get_hotel(WEB, 4242).await;
    let zero = app.get_hotel(WEB, 0).await;

    unknown.assert_error(404, "not_found");
    zero.assert_error(404, "not_found");
    app.finish().await;
}

#[tokio::test]
async fn searching_by_city_is_case_insensitive_and_lists_only_that_citys_hotels() {
    let app = spawn_app().await;
    app.put_hotel(HOTEL, &tejo()).await.assert_status(200);
    app.put_hotel(
        900,
        &json!({"name": "Hotel Alfama", "city": "Lisbon", "timezone": "Europe/Lisbon"}),
    )
    .await
    .assert_status(200);
    app.put_hotel(
        901,
        &json!({"name": "Hotel Ribeira", "city": "Porto", "timezone": "Europe/Lisbon"}),
    )
    .await
    .assert_status(200);

    let lisbon = app.search(WEB, "lisbon").await;
    let nowhere = app.search(AUDITOR, "Atlantis").await;

    let ids: Vec<i64> = lisbon.assert_status(200)["hotels"]
        .as_array()
        .expect("hotels")
        .iter()
        .map(|h| h["hotel_id"].as_i64().expect("id"))
        .collect();
    assert_eq!(ids, vec![HOTEL, 900]);
    assert_eq!(nowhere.assert_status(200)["hotels"], json!([]));
    app.finish().await;
}

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
            {"date": date(10), "remaining": 5, "rate_cents": RATE},
            {"date": date(11), "remaining": 3, "rate_cents": 20_000},
            {"date": date(12), "remaining": 5, "rate_cents": RATE},
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
        json!({"date": date(13), "remaining": 0, "rate_cents": null})
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
