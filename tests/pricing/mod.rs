//! Selling in a hotel's currency with its taxes: the currency a hotel prices in and the
//! answers that carry it, a currency change refused while a stay in the old one is
//! live, taxes set and shown, the total due authorized and captured, what a
//! cancellation gives back of the taxes, and the snapshot a reservation keeps.

mod races;

use serde_json::{json, Value};

use crate::support::*;

/// Lisbon's taxes: VAT 6% in the price, a city tax of 2.00 per guest and night (at
/// most 7 nights) and a cleaning fee of 25.00 per stay.
fn lisbon_taxes() -> Value {
    json!({"taxes": [
        {"code": "VAT", "kind": "percent", "percent": 6.0, "included": true},
        {"code": "CITY", "kind": "per_person_night", "amount_cents": 200, "max_nights": 7},
        {"code": "CLEAN", "kind": "per_stay", "amount_cents": 2500},
    ]})
}

async fn put_taxes(app: &TestApp, hotel_id: i64, body: &Value) -> Reply {
    app.put_json(&format!("/v1/hotels/{hotel_id}/taxes"), Some(ADMIN), body)
        .await
}

/// Two guests in one king room over two nights.
fn two_guests(start: chrono::NaiveDate) -> Value {
    let mut body = hold_body(start, plus_days(start, 2), 1);
    body["guests"] = json!(2);
    body
}

#[tokio::test]
async fn a_hotel_prices_in_its_currency_and_every_answer_about_it_says_which() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;

    let put = app
        .put_hotel(
            HOTEL,
            &json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
                    "currency": "CHF"}),
        )
        .await;
    // A PUT without a currency keeps the one the hotel has.
    let renamed = app
        .put_hotel(
            HOTEL,
            &json!({"name": "Hotel Tejo II", "city": "Lisbon", "timezone": "Europe/Lisbon"}),
        )
        .await;
    let availability = app.availability(WEB, HOTEL, day(10), day(12), None).await;
    let held = app
        .hold(WEB, "chf-1", &hold_body(day(10), day(12), 1))
        .await;
    let calendar = app
        .send(
            app.request(
                reqwest::Method::GET,
                &format!("/v1/hotels/{HOTEL}/calendar"),
                Some(ADMIN),
            )
            .query(&[
                ("start_date", day(10).to_string()),
                ("end_date", day(12).to_string()),
            ]),
        )
        .await;

    assert_eq!(put.assert_status(200)["currency"], "CHF");
    assert_eq!(renamed.assert_status(200)["currency"], "CHF");
    assert_eq!(
        app.get_hotel(WEB, HOTEL).await.assert_status(200)["currency"],
        "CHF"
    );
    let availability = availability.assert_status(200);
    assert_eq!(availability["currency"], "CHF");
    let offer = &availability["room_types"][0]["offers"][0];
    assert_eq!(offer["currency"], "CHF");
    assert_eq!(offer["total_cents"], 2 * RATE);
    assert_eq!(
        offer["total_due_cents"],
        2 * RATE,
        "no taxes: the price is due"
    );
    assert_eq!(offer["taxes"], json!([]));
    assert_eq!(calendar.assert_status(200)["currency"], "CHF");
    let held = held.assert_status(201);
    assert_eq!(held["currency"], "CHF");
    assert_eq!(held["total_due_cents"], 2 * RATE);
    let id = held["reservation_id"].as_str().expect("id");
    assert_eq!(
        app.get_reservation(WEB, id).await.assert_status(200)["currency"],
        "CHF"
    );
    app.finish().await;
}

#[tokio::test]
async fn an_unknown_currency_is_refused_with_422_naming_the_field_and_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 3).await;
    let before = app.snapshot().await;

    for code in ["XYZ", "chf", "EURO", "XAU", ""] {
        let reply = app
            .put_hotel(
                HOTEL,
                &json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
                        "currency": code}),
            )
            .await;
        let body = reply.assert_error(422, "invalid_request");
        assert_eq!(body["field"], "currency", "{code}: {body}");
    }

    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_currency_change_is_refused_while_a_stay_in_the_old_one_is_live_and_taken_once_it_ended()
{
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let id = app
        .hold_ok(WEB, "eur-1", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;
    let in_francs = json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
               "currency": "CHF"});

    let refused = app.put_hotel(HOTEL, &in_francs).await;
    let after_refusal = app.snapshot().await;
    app.cancel(WEB, "cancel-1", &id, &json!({"reason": "plans"}))
        .await
        .assert_status(200);
    let taken = app.put_hotel(HOTEL, &in_francs).await;

    let refused = refused.assert_error(409, "currency_in_use");
    assert_eq!(refused["currency"], "EUR");
    assert_eq!(refused["reservation_id"], id.as_str());
    assert_eq!(after_refusal, before, "a refused change changes nothing");
    assert_eq!(taken.assert_status(200)["currency"], "CHF");
    // The cancelled stay still reads in the currency it was sold in.
    assert_eq!(
        app.get_reservation(WEB, &id).await.assert_status(200)["currency"],
        "EUR"
    );
    app.finish().await;
}

#[tokio::test]
async fn taxes_are_set_shown_on_offers_and_reservations_and_the_total_due_is_authorized() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;

    let put = put_taxes(&app, HOTEL, &lisbon_taxes()).await;
    let got = app
        .get(&format!("/v1/hotels/{HOTEL}/taxes"), Some(WEB))
        .await;
    let availability = app
        .send(
            app.request(
                reqwest::Method::GET,
                &format!("/v1/hotels/{HOTEL}/availability"),
                Some(WEB),
            )
            .query(&[
                ("start_date", day(10).to_string()),
                ("end_date", day(12).to_string()),
                ("guests", "2".to_owned()),
            ]),
        )
        .await;
    let held = app.hold(WEB, "taxed-1", &two_guests(day(10))).await;

    let put = put.assert_status(200);
    assert_eq!(put["currency"], "EUR");
    assert_eq!(put["taxes"], lisbon_taxes()["taxes"]);
    assert_eq!(got.assert_status(200), put);
    // 360.00 for two nights: VAT is its 6% share (20.38); the city tax 2 guests x 2
    // nights x 2.00; the cleaning fee once.
    let taxes = json!([
        {"code": "VAT", "amount_cents": 2038, "included": true},
        {"code": "CITY", "amount_cents": 800, "included": false},
        {"code": "CLEAN", "amount_cents": 2500, "included": false},
    ]);
    let offer = &availability.assert_status(200)["room_types"][0]["offers"][0];
    assert_eq!(offer["total_cents"], 36_000);
    assert_eq!(offer["taxes"], taxes);
    assert_eq!(offer["total_due_cents"], 39_300);
    let held = held.assert_status(201).clone();
    assert_eq!(held["total_cents"], 36_000);
    assert_eq!(held["taxes"], taxes);
    assert_eq!(held["total_due_cents"], 39_300);
    // One room type: one line, the whole price.
    assert_eq!(
        held["lines"],
        json!([{"room_type_id": KING, "rooms": 1, "guests": 2, "rate_plan_id": null,
                "cancellation_policy": held["cancellation_policy"], "total_cents": 36_000}])
    );

    let id = held["reservation_id"].as_str().expect("id");
    let confirmed = app.confirm(WEB, "pay-1", id, "tok_ok").await;
    let confirmed = confirmed.assert_status(200);
    assert_eq!(confirmed["status"], "confirmed");
    assert_eq!(confirmed["payment"]["authorized_cents"], 39_300);
    assert_eq!(confirmed["payment"]["to_capture_cents"], 39_300);
    let totals = app.gateway.totals(id);
    assert_eq!(totals.authorized_cents, 39_300);
    assert!(
        app.gateway
            .ledger()
            .iter()
            .any(|e| e.reference == id && e.currency == "EUR"),
        "the provider was asked in euros"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_cancellation_keeps_the_policys_share_of_the_room_and_gives_back_the_taxes_of_nights_not_stayed(
) {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    app.two_plans(HOTEL, KING).await;
    put_taxes(&app, HOTEL, &lisbon_taxes())
        .await
        .assert_status(200);
    let mut body = two_guests(day(10));
    body["rate_plan_id"] = json!(NON_REFUNDABLE);
    let id = app.hold_ok(WEB, "nr-1", &body).await;
    // Non-refundable: captured at once. 324.00 of room (VAT inside), 8.00 city tax,
    // 25.00 cleaning.
    let confirmed = app.confirm(WEB, "pay-nr", &id, "tok_ok").await;
    assert_eq!(
        confirmed.assert_status(200)["payment"]["captured_cents"],
        35_700
    );

    let cancelled = app
        .cancel(WEB, "cancel-nr", &id, &json!({"reason": "plans"}))
        .await;

    let cancelled = cancelled.assert_status(200);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["refund_cents"], 3_300, "{cancelled}");
    assert_eq!(cancelled["payment"]["refunded_cents"], 3_300);
    app.deliver_payments().await;
    let totals = app.gateway.totals(&id);
    assert_eq!(totals.captured_cents, 35_700);
    assert_eq!(totals.refunded_cents, 3_300);
    app.finish().await;
}

#[tokio::test]
async fn a_reservation_keeps_the_taxes_it_was_sold_with_when_the_hotel_changes_them() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    put_taxes(&app, HOTEL, &lisbon_taxes())
        .await
        .assert_status(200);
    let id = app.hold_ok(WEB, "kept-1", &two_guests(day(10))).await;

    let cleared = put_taxes(&app, HOTEL, &json!({"taxes": []})).await;
    let later = app.hold(WEB, "kept-2", &two_guests(day(10))).await;

    assert_eq!(cleared.assert_status(200)["taxes"], json!([]));
    let kept = app.get_reservation(WEB, &id).await;
    let kept = kept.assert_status(200);
    assert_eq!(kept["total_due_cents"], 39_300);
    assert_eq!(kept["taxes"].as_array().map(Vec::len), Some(3));
    let later = later.assert_status(201);
    assert_eq!(later["taxes"], json!([]));
    assert_eq!(later["total_due_cents"], 36_000);
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn invalid_taxes_are_refused_with_422_naming_the_tax_and_field_and_change_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 3).await;
    put_taxes(&app, HOTEL, &lisbon_taxes())
        .await
        .assert_status(200);
    let before = app.snapshot().await;
    let eleven: Vec<Value> = (0..11)
        .map(|i| json!({"code": format!("F{i}"), "kind": "per_stay", "amount_cents": 100}))
        .collect();
    let cases = [
        (
            json!({"taxes": [{"code": "VAT", "kind": "percent", "percent": 6.0},
                             {"code": "VAT", "kind": "per_stay", "amount_cents": 1}]}),
            "taxes[1].code",
        ),
        (
            json!({"taxes": [{"code": "VAT", "kind": "percent", "percent": 6.0,
                              "amount_cents": 5}]}),
            "taxes[0].amount_cents",
        ),
        (
            json!({"taxes": [{"code": "VAT", "kind": "percent", "percent": 0}]}),
            "taxes[0].percent",
        ),
        (
            json!({"taxes": [{"code": "VAT", "kind": "percent", "percent": 6.125}]}),
            "taxes[0].percent",
        ),
        (
            json!({"taxes": [{"code": "CITY", "kind": "per_person_night", "amount_cents": 0}]}),
            "taxes[0].amount_cents",
        ),
        (
            json!({"taxes": [{"code": "CITY", "kind": "per_person_night", "amount_cents": 200,
                              "max_nights": 0}]}),
            "taxes[0].max_nights",
        ),
        (
            json!({"taxes": [{"code": "city tax", "kind": "per_stay", "amount_cents": 200}]}),
            "taxes[0].code",
        ),
        (
            json!({"taxes": [{"code": "X", "kind": "per_minute", "amount_cents": 200}]}),
            "taxes[0].kind",
        ),
        (
            json!({"taxes": [{"code": "CLEAN", "kind": "per_stay", "amount_cents": 200,
                              "included": true}]}),
            "taxes[0].included",
        ),
        (json!({"taxes": eleven}), "taxes"),
    ];
    for (body, field) in &cases {
        let reply = put_taxes(&app, HOTEL, body).await;
        let error = reply.assert_error(422, "invalid_request");
        assert_eq!(error["field"], *field, "{body}: {error}");
    }
    let unknown_hotel = put_taxes(&app, 999, &lisbon_taxes()).await;
    let channel = app
        .put_json(
            &format!("/v1/hotels/{HOTEL}/taxes"),
            Some(WEB),
            &lisbon_taxes(),
        )
        .await;
    let malformed = put_taxes(&app, HOTEL, &json!({"taxes": "VAT"})).await;

    unknown_hotel.assert_error(422, "unknown_hotel");
    channel.assert_error(403, "forbidden");
    assert_eq!(
        malformed.assert_error(422, "invalid_request")["field"],
        "taxes"
    );
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn the_city_search_never_ranks_amounts_of_two_currencies_against_each_other() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 3, 3).await;
    // A second Lisbon hotel pricing in francs, cheaper in number than the first.
    app.put_hotel(
        900,
        &json!({"name": "Casa Suíça", "city": "Lisbon", "timezone": "Europe/Lisbon",
                "currency": "CHF"}),
    )
    .await
    .assert_status(200);
    app.put_room_type(900, KING, &json!({"name": "king", "max_occupancy": 2}))
        .await
        .assert_status(200);
    app.put_inventory(
        900,
        KING,
        &json!({"start_date": day(10), "end_date": day(13), "total_rooms": 3,
                "overbooking_allowance": 0, "rate_cents": 100}),
    )
    .await
    .assert_status(200);
    let search = |currency: Option<&'static str>| {
        let mut query = vec![
            ("city", "Lisbon".to_owned()),
            ("start_date", day(10).to_string()),
            ("end_date", day(12).to_string()),
        ];
        if let Some(c) = currency {
            query.push(("currency", c.to_owned()));
        }
        app.send(
            app.request(reqwest::Method::GET, "/v1/availability", Some(WEB))
                .query(&query),
        )
    };

    let all = search(None).await;
    let euros = search(Some("EUR")).await;
    let bad = search(Some("eur")).await;

    let hotels = |reply: &Reply| -> Vec<(i64, String)> {
        reply.assert_status(200)["hotels"]
            .as_array()
            .expect("hotels")
            .iter()
            .map(|h| {
                (
                    h["hotel_id"].as_i64().expect("id"),
                    h["currency"].as_str().expect("currency").to_owned(),
                )
            })
            .collect()
    };
    // By currency code first (CHF before EUR), never by comparing 2.00 francs with
    // 360.00 euros.
    assert_eq!(
        hotels(&all),
        [(900, "CHF".to_owned()), (HOTEL, "EUR".to_owned())]
    );
    assert_eq!(hotels(&euros), [(HOTEL, "EUR".to_owned())]);
    assert_eq!(
        euros.assert_status(200)["hotels"][0]["offers"][0]["currency"],
        "EUR"
    );
    assert_eq!(
        bad.assert_error(422, "invalid_request")["field"],
        "currency"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_guest_in_house_keeps_the_currency_until_checked_out() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let id = app
        .hold_ok(WEB, "in-house", &hold_body(day(10), day(13), 1))
        .await;
    app.confirm(WEB, "in-house-pay", &id, "tok_ok")
        .await
        .assert_status(200);
    // 16:00 in Lisbon on the arrival date, then the guest leaves a day early and the
    // clock moves a week on (the stay's nights are long past).
    let lisbon = aggregates::types::TimeZone::parse("Europe/Lisbon").expect("valid");
    let arrival = aggregates::booking::check_in_instant(day(10), lisbon);
    app.clock.set(arrival + chrono::Duration::hours(1));
    app.check_in(ADMIN, "in-house-in", &id)
        .await
        .assert_status(200);
    let in_francs = json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
               "currency": "CHF"});

    app.clock.set(arrival + chrono::Duration::days(7));
    let still_in_house = app.put_hotel(HOTEL, &in_francs).await;
    app.check_out(ADMIN, "in-house-out", &id)
        .await
        .assert_status(200);
    let after_check_out = app.put_hotel(HOTEL, &in_francs).await;

    // Its nights ended days ago, but it has not checked out: still live.
    assert_eq!(
        still_in_house.assert_error(409, "currency_in_use")["reservation_id"],
        id.as_str()
    );
    assert_eq!(after_check_out.assert_status(200)["currency"], "CHF");
    app.finish().await;
}
