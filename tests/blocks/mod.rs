//! Group blocks: a block's rooms leave general sale on every night, its people book from
//! it at its rate, a cancelled booking gives its rooms back to the block, and at the end
//! of its release date (or when staff release it) the unpicked rooms go back to general
//! sale. Refusals change nothing.

mod races;

use chrono::NaiveDate;
use serde_json::{json, Value};

use crate::support::*;

const BLOCK_RATE: i64 = 15_000;

fn block_path(code: &str) -> String {
    format!("/v1/hotels/{HOTEL}/blocks/{code}")
}

/// The ACME block: `rooms` king rooms on `day(10)..day(13)`, released at the end of
/// `day(5)`.
fn acme(rooms: i64) -> Value {
    json!({"name": "Acme offsite", "room_type_id": KING, "start_date": day(10),
           "end_date": day(13), "rooms": rooms, "rate_cents": BLOCK_RATE,
           "release_date": day(5)})
}

/// A booking of `rooms` king rooms `[start, end)` from `block`.
fn from_block(block: &str, start: NaiveDate, end: NaiveDate, rooms: i64) -> Value {
    let mut body = hold_body(start, end, rooms);
    body["block_code"] = json!(block);
    body
}

/// `(rooms, picked_up, remaining)` of the block on each of its nights.
fn pickup(block: &Value) -> Vec<(u64, u64, u64)> {
    block["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| {
            (
                n["rooms"].as_u64().expect("rooms"),
                n["picked_up"].as_u64().expect("picked_up"),
                n["remaining"].as_u64().expect("remaining"),
            )
        })
        .collect()
}

async fn remaining_on(app: &TestApp, night: NaiveDate) -> i64 {
    let reply = app
        .availability(WEB, HOTEL, night, plus_days(night, 1), None)
        .await;
    reply.assert_status(200)["room_types"][0]["nights"][0]["remaining"]
        .as_i64()
        .expect("remaining")
}

#[tokio::test]
async fn a_blocks_people_book_from_it_at_its_rate_and_general_sale_never_reaches_its_rooms() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 10).await;

    // Given a block of 4 of the 10 king rooms on three nights
    let block = app
        .put_json(&block_path("ACME"), Some(ADMIN), &acme(4))
        .await;
    let block = block.assert_status(200).clone();
    assert_eq!(block["status"], "open");
    assert_eq!(block["currency"], "EUR");
    assert_eq!(pickup(&block), vec![(4, 0, 4); 3]);
    assert_eq!(
        remaining_on(&app, day(10)).await,
        6,
        "block rooms are not for sale"
    );

    // When a guest books 2 rooms from it for two nights
    let held = app
        .hold(WEB, "acme-1", &from_block("ACME", day(10), day(12), 2))
        .await;
    let held = held.assert_status(201).clone();
    assert_eq!(held["block_code"], "ACME");
    assert_eq!(held["total_cents"], 2 * 2 * BLOCK_RATE, "the block's rate");
    let id = held["reservation_id"].as_str().expect("id").to_owned();
    let block = app.get(&block_path("ACME"), Some(ADMIN)).await;
    assert_eq!(
        pickup(block.assert_status(200)),
        vec![(4, 2, 2), (4, 2, 2), (4, 0, 4)]
    );
    assert_eq!(
        remaining_on(&app, day(10)).await,
        6,
        "taken from the block, not from sale"
    );
    let looked_up = app.get_reservation(WEB, &id).await;
    assert_eq!(looked_up.assert_status(200)["block_code"], "ACME");

    // General sale sells its 6 rooms and no more
    app.hold_ok(WEB, "public-1", &hold_body(day(10), day(11), 6))
        .await;
    let before = app.snapshot().await;
    app.hold(WEB, "public-2", &hold_body(day(10), day(11), 1))
        .await
        .assert_error(409, "sold_out");
    // The block has 2 left: asking 3 is refused, naming the night
    let exhausted = app
        .hold(WEB, "acme-2", &from_block("ACME", day(10), day(11), 3))
        .await;
    let error = exhausted.assert_error(409, "block_exhausted");
    assert_eq!(error["night"], json!(day(10)));
    assert_eq!(error["remaining"], 2);
    // It cannot shrink below its pickup, nor grow where general sale has nothing left
    let shrink = app
        .put_json(&block_path("ACME"), Some(ADMIN), &acme(1))
        .await;
    assert_eq!(shrink.assert_error(409, "below_pickup")["picked_up"], 2);
    let grow = app
        .put_json(&block_path("ACME"), Some(ADMIN), &acme(5))
        .await;
    assert_eq!(grow.assert_error(409, "sold_out")["night"], json!(day(10)));
    assert_eq!(app.snapshot().await, before, "refusals change nothing");

    // A cancelled booking gives its rooms back to the block
    app.cancel(WEB, "acme-cancel", &id, &json!({}))
        .await
        .assert_status(200);
    let block = app.get(&block_path("ACME"), Some(ADMIN)).await;
    assert_eq!(pickup(block.assert_status(200)), vec![(4, 0, 4); 3]);
    assert_eq!(remaining_on(&app, day(10)).await, 0, "not to general sale");

    // Released, its rooms go back to sale and it takes no more bookings
    let released = app
        .send(app.request(reqwest::Method::DELETE, &block_path("ACME"), Some(ADMIN)))
        .await;
    let released = released.assert_status(200).clone();
    assert_eq!(released["status"], "released");
    assert_eq!(released["released_by"], "staff");
    assert_eq!(pickup(&released), vec![(0, 0, 0); 3]);
    assert_eq!(remaining_on(&app, day(10)).await, 4);
    assert_eq!(remaining_on(&app, day(12)).await, 10);
    let late = app
        .hold(WEB, "acme-3", &from_block("ACME", day(11), day(12), 1))
        .await;
    late.assert_error(409, "block_released");
    app.put_json(&block_path("ACME"), Some(ADMIN), &acme(4))
        .await
        .assert_error(409, "block_released");

    assert_invariants_and_verified(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn the_worker_releases_a_block_at_the_end_of_its_release_date_and_its_bookings_stay() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 10).await;
    app.put_json(&block_path("ACME"), Some(ADMIN), &acme(4))
        .await
        .assert_status(200);
    let id = app
        .hold_ok(WEB, "acme-1", &from_block("ACME", day(10), day(13), 1))
        .await;
    app.confirm(WEB, "acme-pay", &id, "tok_visa")
        .await
        .assert_status(200);

    // Before the release date ends, a pass releases nothing
    let swept =
        app::sweeper::sweep_once(app.payments.commands(), 100, chrono::Duration::minutes(5))
            .await
            .expect("sweep");
    assert_eq!(swept.blocks_released, 0);

    // After it (Lisbon's midnight after day(5)), the unpicked rooms go back to sale
    app.clock.advance(chrono::Duration::days(7));
    let swept =
        app::sweeper::sweep_once(app.payments.commands(), 100, chrono::Duration::minutes(5))
            .await
            .expect("sweep");
    assert_eq!(swept.blocks_released, 1);
    let block = app.get(&block_path("ACME"), Some(ADMIN)).await;
    let block = block.assert_status(200).clone();
    assert_eq!(block["status"], "released");
    assert_eq!(block["released_by"], "release_date");
    assert_eq!(
        pickup(&block),
        vec![(1, 1, 0); 3],
        "its booking stays picked up"
    );
    assert_eq!(remaining_on(&app, day(10)).await, 9);

    // A cancellation after the release gives the room to general sale
    app.cancel(WEB, "acme-cancel", &id, &json!({}))
        .await
        .assert_status(200);
    assert_eq!(remaining_on(&app, day(10)).await, 10);

    assert_invariants_and_verified(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn bad_blocks_and_bad_block_bookings_are_refused_naming_the_field_and_change_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 10).await;
    app.put_json(&block_path("ACME"), Some(ADMIN), &acme(2))
        .await
        .assert_status(200);
    let id = app
        .hold_ok(WEB, "acme-1", &from_block("ACME", day(10), day(11), 1))
        .await;

    let with = |field: &str, value: Value| {
        let mut body = acme(2);
        body[field] = value;
        body
    };
    for (code, body, field) in [
        ("acme", acme(2), "code"),
        ("ACME_1", acme(2), "code"),
        ("NEW", with("rooms", json!(0)), "rooms"),
        ("NEW", with("release_date", json!(day(13))), "release_date"),
        ("NEW", with("name", json!(" ")), "name"),
        ("NEW", with("rate_cents", json!(-1)), "rate_cents"),
        ("NEW", with("end_date", json!(day(200))), "end_date"),
    ] {
        let reply = app.put_json(&block_path(code), Some(ADMIN), &body).await;
        assert_eq!(
            reply.assert_error(422, "invalid_request")["field"],
            field,
            "{code} {body}"
        );
    }
    app.put_json(
        &block_path("NEW"),
        Some(ADMIN),
        &with("room_type_id", json!(99)),
    )
    .await
    .assert_error(422, "unknown_room_type");
    // A night without inventory refuses the whole block
    let beyond = with("end_date", json!(day(16)));
    let reply = app.put_json(&block_path("NEW"), Some(ADMIN), &beyond).await;
    assert_eq!(
        reply.assert_error(409, "no_inventory")["night"],
        json!(day(15))
    );
    app.put_room_type(HOTEL, 4, &json!({"name": "twin", "max_occupancy": 2}))
        .await
        .assert_status(200);
    let before = app.snapshot().await;
    let moved = app
        .put_json(
            &block_path("ACME"),
            Some(ADMIN),
            &with("room_type_id", json!(4)),
        )
        .await;
    assert_eq!(
        moved.assert_error(422, "invalid_request")["field"],
        "room_type_id"
    );
    app.put_json(&block_path("NEW"), Some(WEB), &acme(2))
        .await
        .assert_status(403);
    app.get(&block_path("NONE"), Some(ADMIN))
        .await
        .assert_status(404);

    // Bookings: a plan with a block, a malformed code, a stay outside the block, a
    // block booking moved
    let mut planned = from_block("ACME", day(10), day(11), 1);
    planned["rate_plan_id"] = json!(FLEXIBLE);
    let reply = app.hold(WEB, "acme-2", &planned).await;
    assert_eq!(
        reply.assert_error(422, "invalid_request")["field"],
        "rate_plan_id"
    );
    let reply = app
        .hold(WEB, "acme-3", &from_block("acme", day(10), day(11), 1))
        .await;
    assert_eq!(
        reply.assert_error(422, "invalid_request")["field"],
        "block_code"
    );
    let reply = app
        .hold(WEB, "acme-4", &from_block("ACME", day(12), day(14), 1))
        .await;
    assert_eq!(
        reply.assert_error(422, "invalid_request")["field"],
        "block_code"
    );
    let moved = app
        .change_dates(
            WEB,
            "acme-move",
            &id,
            &json!({"start_date": day(11), "end_date": day(12)}),
        )
        .await;
    moved.assert_error(409, "block_booking_dates");

    assert_eq!(app.snapshot().await, before, "refusals change nothing");
    app.finish().await;
}

#[tokio::test]
async fn a_cancelled_booking_from_a_block_takes_its_revenue_back_and_an_open_block_keeps_the_currency(
) {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 10).await;
    app.put_json(&block_path("ACME"), Some(ADMIN), &acme(4))
        .await
        .assert_status(200);
    let id = app
        .hold_ok(WEB, "acme-1", &from_block("ACME", day(10), day(11), 2))
        .await;
    app.confirm(WEB, "acme-pay", &id, "tok_ok")
        .await
        .assert_status(200);
    app.cancel(WEB, "acme-cancel", &id, &json!({}))
        .await
        .assert_status(200);

    // The occupancy read model takes back what the confirmation added.
    wait_visible(&app.db.pool).await;
    let mut occupancy = projections::analytics::Occupancy;
    projections::catch_up(
        &app.db.pool,
        &mut occupancy,
        7,
        std::time::Duration::from_secs(20),
    )
    .await
    .expect("occupancy caught up");
    let (confirmed, revenue): (i32, i64) =
        sqlx::query_as("SELECT confirmed, revenue_cents FROM occupancy_daily WHERE night = $1")
            .bind(day(10))
            .fetch_one(&app.db.pool)
            .await
            .expect("the night's row");
    assert_eq!((confirmed, revenue), (0, 0));

    // The hotel's currency waits for its open block (its rate is in euros).
    let before = app.snapshot().await;
    let francs = json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
                        "currency": "CHF"});
    let refused = app.put_hotel(HOTEL, &francs).await;
    assert_eq!(
        refused.assert_error(409, "currency_in_use")["block_code"],
        "ACME"
    );
    assert_eq!(app.snapshot().await, before);
    app.send(app.request(reqwest::Method::DELETE, &block_path("ACME"), Some(ADMIN)))
        .await
        .assert_status(200);
    app.put_hotel(HOTEL, &francs).await.assert_status(200);

    assert_invariants_and_verified(&app.db.pool).await;
    app.finish().await;
}
