//! Hotels and room types: defining them (admin PUTs, which are idempotent), looking a
//! hotel up and searching by city.

use aggregates::{HotelDetails, HotelId, Rejection};
use serde_json::{json, Value};
use store::error::CommandError;
use store::write::Strategy;

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
        json!([{"room_type_id": KING, "name": "king", "max_occupancy": 2,
                 "base_occupancy": 2, "extra_guest_cents": 0}])
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
async fn catalog_writes_are_idempotent_puts() {
    let db = TestDb::new().await;
    let svc = db.service(Strategy::Pessimistic);
    let details = HotelDetails::parse("Hotel Tejo", "Lisbon", "Europe/Lisbon").expect("details");

    svc.set_hotel(
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        details.clone(),
        None,
    )
    .await
    .expect("first");
    svc.set_hotel(
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        details,
        None,
    )
    .await
    .expect("second");
    let renamed = svc
        .set_hotel(
            &app::commands::Caller::Staff("staff".into()),
            hotel_id(),
            HotelDetails::parse("Hotel Tejo Riverside", "Lisbon", "Europe/Lisbon")
                .expect("details"),
            None,
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
            &app::commands::Caller::Staff("staff".into()),
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
async fn catalog_and_inventory_events_record_the_admin_who_made_them() {
    // Arrange: an admin token named after the person holding it.
    let app =
        spawn_app_with(|s| s.api_tokens = Some(format!("{TOKENS},ana-token:admin:ana"))).await;
    let first = plus_days(app.now().date_naive(), 10);

    // Act: each kind of staff change, through that token.
    app.put_json(&format!("/v1/hotels/{HOTEL}"), Some("ana-token"), &tejo())
        .await
        .assert_status(200);
    app.put_json(
        &format!("/v1/hotels/{HOTEL}/room-types/{KING}"),
        Some("ana-token"),
        &json!({"name": "king", "max_occupancy": 2}),
    )
    .await
    .assert_status(200);
    app.put_json(
        &format!("/v1/hotels/{HOTEL}/room-types/{KING}/inventory"),
        Some("ana-token"),
        &json!({"start_date": first, "end_date": plus_days(first, 2), "total_rooms": 4,
                "rate_cents": RATE}),
    )
    .await
    .assert_status(200);

    // Assert: every event names her and the command, none the role.
    let recorded: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT event_type, metadata->>'client', metadata->>'command' FROM events
          ORDER BY global_position",
    )
    .fetch_all(&app.db.pool)
    .await
    .expect("events");
    let types: Vec<&str> = recorded.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        types,
        [
            "HotelDetailsSet",
            "RoomTypeSet",
            "InventorySet",
            "InventorySet"
        ],
        "{recorded:?}"
    );
    for (event_type, client, _) in &recorded {
        assert_eq!(client, "ana", "{event_type}");
    }
    let commands: Vec<&str> = recorded.iter().map(|(_, _, c)| c.as_str()).collect();
    assert_eq!(
        commands,
        [
            "set_hotel",
            "set_room_type",
            "set_inventory",
            "set_inventory"
        ]
    );
    app.finish().await;
}
