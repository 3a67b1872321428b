//! The search across a city's hotels (`GET /v1/availability`) and what a hotel's own
//! availability shows of restrictions and plans: a city where some hotels cannot sell
//! the stay (sold out, stopped, closed to arrival, too small for the guests) and others
//! can under their plans. The same city is asked of the Redis read model once it has
//! caught up, and of PostgreSQL when Redis cannot be used, and both must list exactly
//! the bookable offers at the prices a hold charges.

use chrono::{DateTime, NaiveDate, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

const TWIN: i64 = 4;
const SINGLE: i64 = 5;

/// The hotels of the city, by what makes them bookable or not.
const TEJO: i64 = 801; // two plans, one derived -10% and non-refundable
const SOLD_OUT: i64 = 802;
const STOPPED: i64 = 803;
const CLOSED_TO_ARRIVAL: i64 = 804;
const TOO_SMALL: i64 = 805;
const BARATA: i64 = 806; // no plan: the base rate
const RIO: i64 = 807; // one plan over two room types, extra guests charged
const PORTO: i64 = 901; // bookable, but another city

/// The stay every search asks for: three nights, 20 days ahead.
fn arrival() -> NaiveDate {
    day(20)
}

fn departure() -> NaiveDate {
    day(23)
}

async fn hotel(app: &TestApp, id: i64, name: &str, city: &str) {
    app.put_hotel(
        id,
        &json!({"name": name, "city": city, "timezone": "Europe/Lisbon"}),
    )
    .await
    .assert_status(200);
}

async fn room_type(app: &TestApp, hotel: i64, room_type: i64, body: Value) {
    app.put_room_type(hotel, room_type, &body)
        .await
        .assert_status(200);
}

/// `rooms` rooms at `rate` from the arrival to a day after the departure.
async fn inventory(app: &TestApp, hotel: i64, room_type: i64, rooms: i64, rate: i64) {
    app.put_inventory(
        hotel,
        room_type,
        &json!({"start_date": arrival(), "end_date": plus_days(departure(), 1),
                "total_rooms": rooms, "overbooking_allowance": 0, "rate_cents": rate}),
    )
    .await
    .assert_status(200);
}

async fn restrict(app: &TestApp, hotel: i64, night: NaiveDate, rules: Value) {
    let mut body = json!({"start_date": night, "end_date": plus_days(night, 1)});
    if let (Some(body), Some(rules)) = (body.as_object_mut(), rules.as_object()) {
        body.extend(rules.clone());
    }
    app.put_restrictions(hotel, KING, &body)
        .await
        .assert_status(200);
}

/// Lisbon: seven hotels, three of which can sell the stay for two guests; and one
/// hotel in Porto.
async fn lisbon(app: &TestApp) {
    // Tejo: king at 170.00, its flexible plan at 180.05 of its own, and a plan 10%
    // under flexible (162.045, rounded halves up to 162.05), non-refundable. On the
    // arrival night, stays may last at most 10 nights, and the non-refundable plan
    // needs two.
    hotel(app, TEJO, "Hotel Tejo", "Lisbon").await;
    room_type(app, TEJO, KING, json!({"name": "king", "max_occupancy": 2})).await;
    inventory(app, TEJO, KING, 4, 17_000).await;
    app.two_plans(TEJO, KING).await;
    app.put_plan_rates(
        TEJO,
        FLEXIBLE,
        &json!({"room_type_id": KING, "start_date": arrival(),
                "end_date": plus_days(departure(), 1), "rate_cents": 18_005}),
    )
    .await
    .assert_status(200);
    restrict(app, TEJO, arrival(), json!({"max_stay": 10})).await;
    restrict(
        app,
        TEJO,
        arrival(),
        json!({"rate_plan_id": NON_REFUNDABLE, "min_stay": 2}),
    )
    .await;

    // Sold out on the middle night: its one room is held.
    hotel(app, SOLD_OUT, "Casa Cheia", "Lisbon").await;
    room_type(
        app,
        SOLD_OUT,
        KING,
        json!({"name": "king", "max_occupancy": 2}),
    )
    .await;
    inventory(app, SOLD_OUT, KING, 1, 9_000).await;
    app.hold(
        WEB,
        "sold-out",
        &json!({"hotel_id": SOLD_OUT, "room_type_id": KING,
                "start_date": day(21), "end_date": day(22), "rooms": 1,
                "guest": {"name": "Ana Lima", "email": "ana@example.com"}}),
    )
    .await
    .assert_status(201);

    // Stop-sold on the middle night, for every plan.
    hotel(app, STOPPED, "Casa Parada", "Lisbon").await;
    room_type(
        app,
        STOPPED,
        KING,
        json!({"name": "king", "max_occupancy": 2}),
    )
    .await;
    inventory(app, STOPPED, KING, 5, 9_000).await;
    restrict(app, STOPPED, day(21), json!({"stop_sell": true})).await;

    // Closed to arrival on the stay's first night.
    hotel(app, CLOSED_TO_ARRIVAL, "Casa Fechada", "Lisbon").await;
    room_type(
        app,
        CLOSED_TO_ARRIVAL,
        KING,
        json!({"name": "king", "max_occupancy": 2}),
    )
    .await;
    inventory(app, CLOSED_TO_ARRIVAL, KING, 5, 9_000).await;
    restrict(
        app,
        CLOSED_TO_ARRIVAL,
        arrival(),
        json!({"closed_to_arrival": true}),
    )
    .await;

    // Rooms for one guest only.
    hotel(app, TOO_SMALL, "Casa Pequena", "Lisbon").await;
    room_type(
        app,
        TOO_SMALL,
        KING,
        json!({"name": "single", "max_occupancy": 1}),
    )
    .await;
    inventory(app, TOO_SMALL, KING, 5, 9_000).await;

    // No plan: sold at its base rate. Its city is written in lower case.
    hotel(app, BARATA, "Casa Barata", "lisbon").await;
    room_type(
        app,
        BARATA,
        KING,
        json!({"name": "king", "max_occupancy": 2}),
    )
    .await;
    inventory(app, BARATA, KING, 5, 15_000).await;

    // One plan selling king and twin; twin's rate covers one guest, 25.00 per extra
    // guest; single sleeps one and no plan sells it.
    hotel(app, RIO, "Hotel Rio", "Lisbon").await;
    room_type(app, RIO, KING, json!({"name": "king", "max_occupancy": 2})).await;
    room_type(
        app,
        RIO,
        TWIN,
        json!({"name": "twin", "max_occupancy": 3, "base_occupancy": 1,
               "extra_guest_cents": 2_500}),
    )
    .await;
    room_type(
        app,
        RIO,
        SINGLE,
        json!({"name": "single", "max_occupancy": 1}),
    )
    .await;
    inventory(app, RIO, KING, 3, 20_000).await;
    inventory(app, RIO, TWIN, 3, 19_000).await;
    inventory(app, RIO, SINGLE, 3, 5_000).await;
    app.put_rate_plan(
        RIO,
        FLEXIBLE,
        &json!({"name": "Flexible", "room_type_ids": [KING, TWIN]}),
    )
    .await
    .assert_status(200);

    hotel(app, PORTO, "Hotel Douro", "Porto").await;
    room_type(
        app,
        PORTO,
        KING,
        json!({"name": "king", "max_occupancy": 2}),
    )
    .await;
    inventory(app, PORTO, KING, 5, 1_000).await;
}

fn offer(room_type: i64, plan: Option<i64>, total: i64, remaining: u32, refundable: bool) -> Value {
    json!({"room_type_id": room_type, "rate_plan_id": plan, "total_cents": total,
           "remaining": remaining, "refundable": refundable, "currency": "EUR",
           "taxes": [], "total_due_cents": total})
}

/// What Lisbon can sell for the stay to two guests in one room, cheapest hotel first.
fn lisbon_offers() -> Value {
    json!([
        {"hotel_id": BARATA, "name": "Casa Barata", "city": "lisbon", "currency": "EUR",
         "offers": [offer(KING, None, 3 * 15_000, 5, true)]},
        {"hotel_id": TEJO, "name": "Hotel Tejo", "city": "Lisbon", "currency": "EUR",
         "offers": [offer(KING, Some(NON_REFUNDABLE), 3 * 16_205, 4, false),
                    offer(KING, Some(FLEXIBLE), 3 * 18_005, 4, true)]},
        {"hotel_id": RIO, "name": "Hotel Rio", "city": "Lisbon", "currency": "EUR",
         "offers": [offer(KING, Some(FLEXIBLE), 3 * 20_000, 3, true),
                    offer(TWIN, Some(FLEXIBLE), 3 * (19_000 + 2_500), 3, true)]},
    ])
}

async fn search(app: &TestApp, query: &[(&str, String)]) -> Reply {
    app.send(
        app.request(Method::GET, "/v1/availability", Some(WEB))
            .query(query),
    )
    .await
}

/// The stay for two guests in `city`, with any further parameters.
fn stay_in(city: &str, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut query = vec![
        ("city", city.to_owned()),
        ("start_date", arrival().to_string()),
        ("end_date", departure().to_string()),
        ("guests", "2".to_owned()),
    ];
    query.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    query
}

async fn hotel_availability(app: &TestApp, hotel: i64, guests: &str) -> Reply {
    app.send(
        app.request(
            Method::GET,
            &format!("/v1/hotels/{hotel}/availability"),
            Some(WEB),
        )
        .query(&[
            ("start_date", arrival().to_string()),
            ("end_date", departure().to_string()),
            ("guests", guests.to_owned()),
        ]),
    )
    .await
}

/// A search answered by the read model, once it reflects everything committed before
/// `since`.
async fn from_cache(app: &TestApp, query: &[(&str, String)], since: DateTime<Utc>) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        let reply = search(app, query).await;
        let body = reply.assert_status(200).clone();
        let as_of = body["as_of"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok());
        if body["source"] == "cache" && as_of.is_some_and(|t| t >= since) {
            return body;
        }
        last = body;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the read model never answered after {since}: {last}");
}

/// What Tejo's own availability must show: per night the restrictions for every plan
/// and each plan's price (with the plan's own restrictions), and the same offers as
/// the search.
fn assert_tejo_shows_its_terms(body: &Value) {
    let king = &body["room_types"][0];
    assert_eq!(king["room_type_id"], KING, "{body}");
    assert_eq!(king["available"], true);
    assert_eq!(king["total_cents"], 3 * 17_000, "the base rate, as before");
    let first = &king["nights"][0];
    assert_eq!(first["date"], arrival().to_string());
    assert_eq!(first["remaining"], 4);
    assert_eq!(first["rate_cents"], 17_000);
    assert_eq!(first["restrictions"], json!({"max_stay": 10}));
    assert_eq!(
        first["prices"],
        json!([{"rate_plan_id": FLEXIBLE, "rate_cents": 18_005},
               {"rate_plan_id": NON_REFUNDABLE, "rate_cents": 16_205,
                "restrictions": {"min_stay": 2}}])
    );
    let second = &king["nights"][1];
    assert_eq!(second["restrictions"], json!({}));
    assert_eq!(
        second["prices"],
        json!([{"rate_plan_id": FLEXIBLE, "rate_cents": 18_005},
               {"rate_plan_id": NON_REFUNDABLE, "rate_cents": 16_205}])
    );
    assert_eq!(king["offers"], lisbon_offers()[1]["offers"]);
}

/// Rio for two guests: single cannot sleep them, so it is unavailable with no prices
/// and no offers; twin's prices carry the extra guest.
fn assert_rio_leaves_out_the_room_too_small(body: &Value) {
    let room_types = body["room_types"].as_array().expect("room types");
    let single = room_types
        .iter()
        .find(|rt| rt["room_type_id"] == SINGLE)
        .expect("single listed");
    assert_eq!(single["available"], false, "{single}");
    assert_eq!(single["remaining"], 3);
    assert_eq!(single["offers"], json!([]));
    assert_eq!(single["nights"][0]["prices"], json!([]));
    let twin = room_types
        .iter()
        .find(|rt| rt["room_type_id"] == TWIN)
        .expect("twin listed");
    assert_eq!(
        twin["nights"][0]["prices"],
        json!([{"rate_plan_id": FLEXIBLE, "rate_cents": 21_500}])
    );
}

#[tokio::test]
async fn the_database_lists_exactly_the_bookable_offers_when_redis_cannot_be_used() {
    // Arrange: nothing listens on port 1, so every read of the model fails.
    let app = spawn_app_with(|settings| settings.redis_url = "redis://127.0.0.1:1".into()).await;
    lisbon(&app).await;

    // Act
    let all = search(&app, &stay_in("Lisbon", &[])).await;
    let two = search(&app, &stay_in("LISBON", &[("limit", "2")])).await;
    let one_night = search(
        &app,
        &[
            ("city", "Lisbon".to_owned()),
            ("start_date", arrival().to_string()),
            ("end_date", day(21).to_string()),
            ("guests", "2".to_owned()),
        ],
    )
    .await;
    let porto = search(&app, &stay_in("porto", &[])).await;
    let nowhere = search(&app, &stay_in("Atlantis", &[])).await;
    let tejo = hotel_availability(&app, TEJO, "2").await;
    let rio = hotel_availability(&app, RIO, "2").await;

    // Assert
    let all = all.assert_status(200);
    assert_eq!(all["source"], "database");
    assert_eq!(all["start_date"], arrival().to_string());
    assert_eq!(all["end_date"], departure().to_string());
    assert_eq!(all["hotels"], lisbon_offers(), "{all}");
    let two = two.assert_status(200);
    let first_two: Vec<Value> = lisbon_offers()
        .as_array()
        .expect("hotels")
        .iter()
        .take(2)
        .cloned()
        .collect();
    assert_eq!(two["hotels"], json!(first_two));
    // One night: the non-refundable plan's minimum stay of two leaves Tejo flexible only.
    let one_night = one_night.assert_status(200);
    let tejo_alone = one_night["hotels"]
        .as_array()
        .expect("hotels")
        .iter()
        .find(|h| h["hotel_id"] == TEJO)
        .expect("Tejo listed")
        .clone();
    assert_eq!(
        tejo_alone["offers"],
        json!([offer(KING, Some(FLEXIBLE), 18_005, 4, true)])
    );
    assert_eq!(
        porto.assert_status(200)["hotels"],
        json!([{"hotel_id": PORTO, "name": "Hotel Douro", "city": "Porto", "currency": "EUR",
                "offers": [offer(KING, None, 3_000, 5, true)]}])
    );
    assert_eq!(nowhere.assert_status(200)["hotels"], json!([]));
    let tejo = tejo.assert_status(200);
    assert_eq!(tejo["source"], "database");
    assert_tejo_shows_its_terms(tejo);
    assert_rio_leaves_out_the_room_too_small(rio.assert_status(200));

    // And every offer listed is a hold the write side accepts at that total.
    for (n, hotel) in lisbon_offers()
        .as_array()
        .expect("hotels")
        .iter()
        .enumerate()
    {
        let cheapest = &hotel["offers"][0];
        let held = app
            .hold(
                WEB,
                &format!("offer-{n}"),
                &json!({"hotel_id": hotel["hotel_id"], "room_type_id": cheapest["room_type_id"],
                        "rate_plan_id": cheapest["rate_plan_id"], "guests": 2,
                        "start_date": arrival(), "end_date": departure(), "rooms": 1,
                        "expected_total_cents": cheapest["total_cents"],
                        "guest": {"name": "Rui Costa", "email": "rui@example.com"}}),
            )
            .await;
        held.assert_status(201);
    }
    app.finish().await;
}

#[tokio::test]
async fn the_read_model_answers_the_same_once_caught_up_and_follows_a_hotel_moving_city() {
    // Arrange: the projections run against the machine's Redis (keys named after this
    // test's database).
    let app = spawn_app_with(|settings| settings.run_projections = true).await;
    lisbon(&app).await;
    let set_up = Utc::now();

    // Act
    let all = from_cache(&app, &stay_in("Lisbon", &[]), set_up).await;
    let two = from_cache(&app, &stay_in("lisbon", &[("limit", "2")]), set_up).await;
    let tejo = hotel_availability(&app, TEJO, "2").await;
    let rio = hotel_availability(&app, RIO, "2").await;

    // Assert: the same offers as the database lists (see the test above).
    assert_eq!(all["hotels"], lisbon_offers(), "{all}");
    assert_eq!(
        two["hotels"].as_array().map(Vec::len),
        Some(2),
        "limit: {two}"
    );
    assert_eq!(two["hotels"][0]["hotel_id"], BARATA);
    assert_eq!(two["hotels"][1]["hotel_id"], TEJO);
    let tejo = tejo.assert_status(200);
    assert_eq!(tejo["source"], "cache", "{tejo}");
    assert_tejo_shows_its_terms(tejo);
    let rio = rio.assert_status(200);
    assert_eq!(rio["source"], "cache", "{rio}");
    assert_rio_leaves_out_the_room_too_small(rio);

    // Act 2: Casa Barata moves to Porto, and Tejo stops selling on the middle night.
    hotel(&app, BARATA, "Casa Barata", "Porto").await;
    restrict(&app, TEJO, day(21), json!({"stop_sell": true})).await;
    let moved = Utc::now();
    let lisbon_now = from_cache(&app, &stay_in("Lisbon", &[]), moved).await;
    let porto_now = from_cache(&app, &stay_in("Porto", &[]), moved).await;

    // Assert 2: it left Lisbon's set for Porto's, and Tejo has no offer left.
    let ids = |body: &Value| -> Vec<i64> {
        body["hotels"]
            .as_array()
            .expect("hotels")
            .iter()
            .filter_map(|h| h["hotel_id"].as_i64())
            .collect()
    };
    assert_eq!(ids(&lisbon_now), vec![RIO], "{lisbon_now}");
    assert_eq!(ids(&porto_now), vec![PORTO, BARATA], "{porto_now}");
    app.finish().await;
}

/// A server following the log into Redis, with one hotel in Lisbon: Casa Barata,
/// `rooms` king rooms at 150.00 over the stay.
async fn barata_alone(rooms: i64) -> TestApp {
    let app = spawn_app_with(|settings| settings.run_projections = true).await;
    hotel(&app, BARATA, "Casa Barata", "Lisbon").await;
    room_type(
        &app,
        BARATA,
        KING,
        json!({"name": "king", "max_occupancy": 2}),
    )
    .await;
    inventory(&app, BARATA, KING, rooms, 15_000).await;
    app
}

/// Holds `rooms` of Casa Barata's kings over the whole stay.
async fn hold_at_barata(app: &TestApp, key: &str, rooms: i64) {
    app.hold(
        WEB,
        key,
        &json!({"hotel_id": BARATA, "room_type_id": KING,
                "start_date": arrival(), "end_date": departure(), "rooms": rooms,
                "guest": {"name": "Ana Lima", "email": "ana@example.com"}}),
    )
    .await
    .assert_status(201);
}

#[tokio::test]
async fn a_search_asked_again_after_a_booking_shows_the_rooms_it_took() {
    // Arrange: one hotel with five rooms, searched twice (the second answer is the
    // offers judged for the first, the nights reading the same)
    let app = barata_alone(5).await;
    let first = from_cache(&app, &stay_in("Lisbon", &[]), Utc::now()).await;
    let again = from_cache(&app, &stay_in("Lisbon", &[]), Utc::now()).await;
    assert_eq!(first["hotels"], again["hotels"]);
    assert_eq!(first["hotels"][0]["offers"][0]["remaining"], 5, "{first}");

    // Act: two of the rooms are held on every night of the stay
    hold_at_barata(&app, "two-of-five", 2).await;
    let after = from_cache(&app, &stay_in("Lisbon", &[]), Utc::now()).await;

    // Assert: the same question now shows what is left
    assert_eq!(after["hotels"][0]["offers"][0]["remaining"], 3, "{after}");
    app.finish().await;
}

#[tokio::test]
async fn a_search_whose_offer_takes_the_last_room_is_answered_by_the_database() {
    // Arrange: one hotel with two rooms on every night, one of them then held.
    let app = barata_alone(2).await;
    let roomy = from_cache(&app, &stay_in("Lisbon", &[]), Utc::now()).await;
    hold_at_barata(&app, "one-of-two", 1).await;

    // Act: ask until the read model has seen the hold (it would then list 1 left).
    let mut tight = Value::Null;
    for _ in 0..100 {
        tight = search(&app, &stay_in("Lisbon", &[]))
            .await
            .assert_status(200)
            .clone();
        if tight["hotels"][0]["offers"][0]["remaining"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Assert
    assert_eq!(roomy["hotels"][0]["offers"][0]["remaining"], 2);
    assert_eq!(tight["hotels"][0]["offers"][0]["remaining"], 1, "{tight}");
    assert_eq!(
        tight["source"], "database",
        "the last room is PostgreSQL's to say"
    );
    app.finish().await;
}

#[tokio::test]
async fn bad_search_parameters_are_refused_in_the_error_shape() {
    let app = spawn_app().await;
    let base = |extra: &[(&'static str, &str)]| {
        let mut query: Vec<(&'static str, String)> = vec![
            ("city", "Lisbon".to_owned()),
            ("start_date", arrival().to_string()),
            ("end_date", departure().to_string()),
        ];
        for (key, value) in extra {
            query.retain(|(k, _)| k != key);
            query.push((key, (*value).to_owned()));
        }
        query
    };
    let without_city: Vec<(&str, String)> = base(&[])
        .into_iter()
        .filter(|(k, _)| *k != "city")
        .collect();
    let too_long = plus_days(arrival(), 31).to_string();
    // (query, status, error code, field named)
    type Case = (
        Vec<(&'static str, String)>,
        u16,
        &'static str,
        Option<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (without_city, 422, "invalid_request", Some("city")),
        (
            base(&[("city", "   ")]),
            422,
            "invalid_request",
            Some("city"),
        ),
        (
            base(&[("start_date", "2027-13-01")]),
            422,
            "invalid_request",
            Some("start_date"),
        ),
        (
            base(&[("end_date", "soon")]),
            422,
            "invalid_request",
            Some("end_date"),
        ),
        (
            base(&[("end_date", &arrival().to_string())]),
            422,
            "invalid_request",
            None,
        ),
        (
            base(&[("end_date", &too_long)]),
            422,
            "invalid_request",
            Some("end_date"),
        ),
        (
            base(&[("rooms", "0")]),
            422,
            "invalid_request",
            Some("rooms"),
        ),
        (
            base(&[("rooms", "11")]),
            422,
            "invalid_request",
            Some("rooms"),
        ),
        (
            base(&[("rooms", "two")]),
            422,
            "invalid_request",
            Some("rooms"),
        ),
        (
            base(&[("guests", "0")]),
            422,
            "invalid_request",
            Some("guests"),
        ),
        (
            base(&[("guests", "51")]),
            422,
            "invalid_request",
            Some("guests"),
        ),
        (
            base(&[("limit", "0")]),
            422,
            "invalid_request",
            Some("limit"),
        ),
        (
            base(&[("limit", "101")]),
            422,
            "invalid_request",
            Some("limit"),
        ),
        (
            base(&[("limit", "99999999999999999999")]),
            422,
            "invalid_request",
            Some("limit"),
        ),
    ];
    for (query, status, code, field) in cases {
        let reply = search(&app, &query).await;
        let body = reply.assert_error(status, code);
        if let Some(field) = field {
            assert_eq!(body["field"], field, "{query:?}: {body}");
        }
    }
    let anonymous = app
        .send(
            app.request(Method::GET, "/v1/availability", None)
                .query(&base(&[])),
        )
        .await;
    anonymous.assert_error(401, "unauthorized");
    // Every role may search.
    for token in [ADMIN, WEB, AUDITOR] {
        let reply = app
            .send(
                app.request(Method::GET, "/v1/availability", Some(token))
                    .query(&base(&[])),
            )
            .await;
        assert_eq!(reply.assert_status(200)["hotels"], json!([]));
    }
    app.finish().await;
}

#[tokio::test]
async fn more_guests_than_any_room_sleeps_is_occupancy_exceeded_on_a_hotels_availability() {
    let app = spawn_app().await;
    app.seed_hotel(arrival(), 5, 3).await;

    let three = hotel_availability(&app, HOTEL, "3").await;
    let two = hotel_availability(&app, HOTEL, "2").await;
    let zero = hotel_availability(&app, HOTEL, "0").await;
    let plain = app
        .availability(WEB, HOTEL, arrival(), departure(), None)
        .await;

    let body = three.assert_error(422, "occupancy_exceeded");
    assert_eq!(body["max_occupancy"], 2);
    let two = two.assert_status(200);
    assert_eq!(
        two["room_types"][0]["offers"],
        json!([offer(KING, None, 3 * RATE, 3, true)])
    );
    zero.assert_error(422, "invalid_request");
    // Without guests: one, and the answer keeps every field it had.
    let plain = plain.assert_status(200);
    let king = &plain["room_types"][0];
    assert_eq!(king["available"], true);
    assert_eq!(king["remaining"], 3);
    assert_eq!(king["total_cents"], 3 * RATE);
    assert_eq!(king["name"], "king");
    assert_eq!(
        king["nights"][0],
        json!({"date": arrival(), "remaining": 3, "rate_cents": RATE,
               "restrictions": {}, "prices": [{"rate_plan_id": null, "rate_cents": RATE}]})
    );
    app.finish().await;
}
