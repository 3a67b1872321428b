//! Rate plans, restrictions, occupancy and bulk ARI updates over HTTP: what a revenue
//! manager sets up, what a guest is sold under it, and every refusal of the contract
//! (each of which changes nothing).

mod races;

use chrono::{Datelike, NaiveDate, Weekday};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

/// The next `weekday` at least `after` days from today.
fn next(weekday: Weekday, after: u64) -> NaiveDate {
    let mut date = day(after);
    while date.weekday() != weekday {
        date = plus_days(date, 1);
    }
    date
}

/// The two plans of hotel 812 (see [`TestApp::two_plans`]).
async fn two_plans(app: &TestApp) {
    app.two_plans(HOTEL, KING).await;
}

fn plan_hold(start: NaiveDate, end: NaiveDate, plan: i64) -> Value {
    let mut body = hold_body(start, end, 1);
    body["rate_plan_id"] = json!(plan);
    body
}

#[tokio::test]
async fn a_derived_non_refundable_plan_sells_at_its_rounded_price_and_keeps_its_policy() {
    // Arrange: nights at 180.05 on the flexible plan's own rate: 10% off is 162.045,
    // which rounds (halves up) to 162.05.
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    two_plans(&app).await;
    app.put_plan_rates(
        HOTEL,
        FLEXIBLE,
        &json!({"room_type_id": KING, "start_date": day(10), "end_date": day(20),
                "rate_cents": 18_005}),
    )
    .await
    .assert_status(200);

    // Act
    let held = app
        .hold(WEB, "nr-1", &plan_hold(day(12), day(15), NON_REFUNDABLE))
        .await;
    let id = held.str("reservation_id");
    // Later the plan becomes refundable: the sold stay keeps what it was sold under.
    app.put_rate_plan(
        HOTEL,
        NON_REFUNDABLE,
        &json!({"name": "Non-refundable", "room_type_ids": [KING],
                "cancellation_policy": {"refundable": true},
                "derived_from": {"rate_plan_id": FLEXIBLE, "adjust_percent": -10}}),
    )
    .await
    .assert_status(200);
    let later = app.get_reservation(WEB, &id).await;
    app.confirm(WEB, "nr-pay", &id, "tok_ok")
        .await
        .assert_status(200);
    let cancelled = app
        .cancel(WEB, "nr-cancel", &id, &json!({"reason": "plans changed"}))
        .await;

    // Assert
    let held = held.assert_status(201);
    assert_eq!(held["total_cents"], 3 * 16_205);
    assert_eq!(held["rate_plan_id"], NON_REFUNDABLE);
    assert_eq!(held["cancellation_policy"], json!({"refundable": false}));
    let later = later.assert_status(200);
    assert_eq!(later["cancellation_policy"], json!({"refundable": false}));
    assert_eq!(later["total_cents"], 3 * 16_205);
    let cancelled = cancelled.assert_status(200);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["refund_cents"], 0, "non-refundable: nothing back");
    app.finish().await;
}

#[tokio::test]
async fn a_stay_without_a_plan_is_sold_at_the_base_rate_under_the_house_policy() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    two_plans(&app).await;

    let held = app
        .hold(WEB, "base-1", &hold_body(day(12), day(14), 1))
        .await;

    let held = held.assert_status(201);
    assert_eq!(held["total_cents"], 2 * RATE);
    assert_eq!(held["rate_plan_id"], Value::Null);
    assert_eq!(
        held["cancellation_policy"],
        json!({"refundable": true, "full_refund_hours": 72, "partial_refund_hours": 24,
               "partial_refund_percent": 50})
    );
    app.finish().await;
}

#[tokio::test]
async fn the_hotel_lists_its_rate_plans_beside_its_room_types() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 5).await;
    two_plans(&app).await;

    let hotel = app.get_hotel(WEB, HOTEL).await;

    let hotel = hotel.assert_status(200);
    assert_eq!(
        hotel["rate_plans"],
        json!([
            {"rate_plan_id": FLEXIBLE, "name": "Flexible", "room_type_ids": [KING],
             "cancellation_policy": {"refundable": true, "full_refund_hours": 72,
                                     "partial_refund_hours": 24, "partial_refund_percent": 50}},
            {"rate_plan_id": NON_REFUNDABLE, "name": "Non-refundable", "room_type_ids": [KING],
             "cancellation_policy": {"refundable": false},
             "derived_from": {"rate_plan_id": FLEXIBLE, "adjust_percent": -10}},
        ])
    );
    app.finish().await;
}

#[tokio::test]
async fn every_rate_plan_refusal_of_the_contract_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    two_plans(&app).await;
    let before = app.snapshot().await;

    // A cycle: the flexible plan derived from the non-refundable one derived from it.
    let cycle = app
        .put_rate_plan(
            HOTEL,
            FLEXIBLE,
            &json!({"name": "Flexible", "room_type_ids": [KING],
                    "derived_from": {"rate_plan_id": NON_REFUNDABLE, "adjust_percent": 5}}),
        )
        .await;
    let unknown_parent = app
        .put_rate_plan(
            HOTEL,
            7,
            &json!({"name": "Corporate", "room_type_ids": [KING],
                    "derived_from": {"rate_plan_id": 99, "adjust_percent": -5}}),
        )
        .await;
    let unknown_room_type = app
        .put_rate_plan(
            HOTEL,
            7,
            &json!({"name": "Suite", "room_type_ids": [KING, 44]}),
        )
        .await;
    let derived_rates = app
        .put_plan_rates(
            HOTEL,
            NON_REFUNDABLE,
            &json!({"room_type_id": KING, "start_date": day(10), "end_date": day(12),
                    "rate_cents": 100}),
        )
        .await;
    let rates_of_unknown_plan = app
        .put_plan_rates(
            HOTEL,
            99,
            &json!({"room_type_id": KING, "start_date": day(10), "end_date": day(12),
                    "rate_cents": 100}),
        )
        .await;
    let rates_without_inventory = app
        .put_plan_rates(
            HOTEL,
            FLEXIBLE,
            &json!({"room_type_id": KING, "start_date": day(13), "end_date": day(20),
                    "rate_cents": 100}),
        )
        .await;
    let hold_unknown_plan = app
        .hold(WEB, "unknown-plan", &plan_hold(day(10), day(12), 99))
        .await;
    let unknown_hotel = app
        .put_rate_plan(999, 1, &json!({"name": "X", "room_type_ids": [KING]}))
        .await;

    let cycle = cycle.assert_error(422, "rate_plan_cycle");
    assert!(cycle["rate_plan_id"].is_i64(), "{cycle}");
    unknown_parent.assert_error(422, "unknown_rate_plan");
    unknown_room_type.assert_error(422, "unknown_room_type");
    derived_rates.assert_error(409, "derived_rate_plan");
    rates_of_unknown_plan.assert_error(422, "unknown_rate_plan");
    let no_inventory = rates_without_inventory.assert_error(409, "no_inventory");
    assert_eq!(no_inventory["night"], day(15).to_string());
    hold_unknown_plan.assert_error(422, "unknown_rate_plan");
    unknown_hotel.assert_error(422, "unknown_hotel");
    assert_eq!(app.snapshot().await, before, "a refusal changes nothing");
    app.finish().await;
}

#[tokio::test]
async fn a_plan_that_does_not_sell_the_room_type_is_an_unknown_rate_plan_for_it() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    app.put_room_type(HOTEL, 4, &json!({"name": "twin", "max_occupancy": 2}))
        .await
        .assert_status(200);
    app.put_inventory(
        HOTEL,
        4,
        &json!({"start_date": day(10), "end_date": day(15), "total_rooms": 2,
                "overbooking_allowance": 0, "rate_cents": RATE}),
    )
    .await
    .assert_status(200);
    app.put_rate_plan(
        HOTEL,
        5,
        &json!({"name": "Twin only", "room_type_ids": [4]}),
    )
    .await
    .assert_status(200);
    let before = app.snapshot().await;

    let held = app
        .hold(WEB, "twin-plan", &plan_hold(day(10), day(12), 5))
        .await;
    // A rate for the plan over two room types, one it does not sell (as the console
    // sends a selection of several types).
    let rated = app
        .put_ari(
            HOTEL,
            &json!({"updates": [
                {"room_type_id": 4, "start_date": day(10), "end_date": day(12),
                 "rates": [{"rate_plan_id": 5, "rate_cents": 9_000}]},
                {"room_type_id": KING, "start_date": day(10), "end_date": day(12),
                 "rates": [{"rate_plan_id": 5, "rate_cents": 9_000}]}]}),
        )
        .await;

    held.assert_error(422, "unknown_rate_plan");
    let rated = rated.assert_error(422, "unknown_rate_plan");
    assert_eq!(rated["room_type_id"], KING, "{rated}");
    assert_eq!(rated["rate_plan_id"], 5, "{rated}");
    assert!(
        rated["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("room type {KING}"))),
        "{rated}"
    );
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn each_restriction_refuses_the_stay_it_forbids_naming_itself_and_the_night() {
    // Arrange: a fortnight of inventory from next week's Monday.
    let app = spawn_app().await;
    let monday = next(Weekday::Mon, 7);
    app.seed_hotel(monday, 21, 5).await;
    let friday = plus_days(monday, 4);
    let restrict = |start: NaiveDate, end: NaiveDate, rules: Value| {
        let mut body = rules;
        body["start_date"] = json!(start);
        body["end_date"] = json!(end);
        body
    };
    // Weekends: at least two nights from Friday and Saturday arrivals.
    app.put_restrictions(
        HOTEL,
        KING,
        &restrict(
            monday,
            plus_days(monday, 21),
            json!({"min_stay": 2, "days": ["fri", "sat"]}),
        ),
    )
    .await
    .assert_status(200);
    // The second Wednesday is stopped; the second Monday closed to arrival; no stay may
    // end on the first Thursday.
    let stopped = plus_days(monday, 9);
    let closed = plus_days(monday, 7);
    let no_departure = plus_days(monday, 3);
    for (date, rules) in [
        (stopped, json!({"stop_sell": true})),
        (closed, json!({"closed_to_arrival": true})),
        (no_departure, json!({"closed_to_departure": true})),
    ] {
        app.put_restrictions(HOTEL, KING, &restrict(date, plus_days(date, 1), rules))
            .await
            .assert_status(200);
    }
    let before = app.snapshot().await;

    // Act
    let one_weekend_night = app
        .hold(
            WEB,
            "weekend-1",
            &hold_body(friday, plus_days(friday, 1), 1),
        )
        .await;
    let through_stopped = app
        .hold(
            WEB,
            "stopped",
            &hold_body(plus_days(monday, 8), plus_days(stopped, 1), 1),
        )
        .await;
    let arriving_closed = app
        .hold(WEB, "cta", &hold_body(closed, plus_days(closed, 1), 1))
        .await;
    let leaving_closed = app
        .hold(
            WEB,
            "ctd",
            &hold_body(plus_days(monday, 1), no_departure, 1),
        )
        .await;
    let after_refusals = app.snapshot().await;
    let two_weekend_nights = app
        .hold(
            WEB,
            "weekend-2",
            &hold_body(friday, plus_days(friday, 2), 1),
        )
        .await;

    // Assert
    let refused = [
        (one_weekend_night, "min_stay", friday),
        (through_stopped, "stop_sell", stopped),
        (arriving_closed, "closed_to_arrival", closed),
        (leaving_closed, "closed_to_departure", no_departure),
    ];
    for (reply, restriction, night) in refused {
        let body = reply.assert_error(409, "restricted");
        assert_eq!(body["restriction"], restriction, "{body}");
        assert_eq!(body["night"], night.to_string(), "{body}");
    }
    assert_eq!(after_refusals, before, "a refusal changes nothing");
    two_weekend_nights.assert_status(201);
    app.finish().await;
}

#[tokio::test]
async fn a_restriction_set_to_null_is_cleared_and_a_left_out_one_is_kept() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    let range = json!({"start_date": day(10), "end_date": day(20)});
    let with = |rules: Value| {
        let mut body = range.clone();
        for (k, v) in rules.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    app.put_restrictions(HOTEL, KING, &with(json!({"min_stay": 3, "max_stay": 5})))
        .await
        .assert_status(200);

    // Left out: max_stay stays 5; null: min_stay is cleared.
    let cleared = app
        .put_restrictions(HOTEL, KING, &with(json!({"min_stay": null})))
        .await;
    let short = app
        .hold(WEB, "short", &hold_body(day(11), day(12), 1))
        .await;
    let long = app.hold(WEB, "long", &hold_body(day(11), day(17), 1)).await;

    assert_eq!(cleared.assert_status(200)["nights"], 10);
    short.assert_status(201);
    let long = long.assert_error(409, "restricted");
    assert_eq!(long["restriction"], "max_stay");
    app.finish().await;
}

#[tokio::test]
async fn a_plan_only_restriction_binds_that_plan_and_not_the_others() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    two_plans(&app).await;
    app.put_restrictions(
        HOTEL,
        KING,
        &json!({"start_date": day(10), "end_date": day(20), "rate_plan_id": NON_REFUNDABLE,
                "min_advance_days": 14}),
    )
    .await
    .assert_status(200);

    let non_refundable = app
        .hold(WEB, "nr", &plan_hold(day(11), day(12), NON_REFUNDABLE))
        .await;
    let flexible = app
        .hold(WEB, "flex", &plan_hold(day(11), day(12), FLEXIBLE))
        .await;
    let base = app.hold(WEB, "base", &hold_body(day(11), day(12), 1)).await;

    let refused = non_refundable.assert_error(409, "restricted");
    assert_eq!(refused["restriction"], "min_advance_days");
    flexible.assert_status(201);
    base.assert_status(201);
    app.finish().await;
}

#[tokio::test]
async fn a_date_change_into_a_restricted_stay_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    let id = app
        .hold_ok(WEB, "move-me", &hold_body(day(11), day(13), 1))
        .await;
    app.put_restrictions(
        HOTEL,
        KING,
        &json!({"start_date": day(15), "end_date": day(16), "closed_to_arrival": true}),
    )
    .await
    .assert_status(200);
    let before = app.snapshot().await;

    let moved = app
        .change_dates(
            WEB,
            "move-1",
            &id,
            &json!({"start_date": day(15), "end_date": day(17)}),
        )
        .await;

    let moved = moved.assert_error(409, "restricted");
    assert_eq!(moved["restriction"], "closed_to_arrival");
    assert_eq!(moved["night"], day(15).to_string());
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn guests_beyond_the_base_occupancy_pay_the_extra_guest_charge_and_beyond_the_maximum_are_refused(
) {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    let room_type = app
        .put_room_type(
            HOTEL,
            KING,
            &json!({"name": "king", "max_occupancy": 3, "base_occupancy": 1,
                    "extra_guest_cents": 2_500}),
        )
        .await;
    let before = app.snapshot().await;

    let mut three = hold_body(day(11), day(13), 2);
    three["guests"] = json!(4);
    let too_many = app.hold(WEB, "four", &three).await;
    let after_refusal = app.snapshot().await;
    three["guests"] = json!(3);
    let held = app.hold(WEB, "three", &three).await;

    let room_type = room_type.assert_status(200);
    assert_eq!(room_type["room_types"][0]["base_occupancy"], 1);
    assert_eq!(room_type["room_types"][0]["extra_guest_cents"], 2_500);
    let too_many = too_many.assert_error(422, "occupancy_exceeded");
    assert_eq!(too_many["max_occupancy"], 3);
    assert_eq!(after_refusal, before);
    let held = held.assert_status(201);
    // Two rooms, two nights, two guests over the base in each room.
    assert_eq!(held["total_cents"], 2 * 2 * (RATE + 2 * 2_500));
    assert_eq!(held["guests"], 3);
    app.finish().await;
}

#[tokio::test]
async fn a_room_types_total_prices_the_guests_asked_as_its_nights_and_its_offer_do() {
    // Arrange: 180.00 a night for two, 20.00 for each guest beyond.
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    app.put_room_type(
        HOTEL,
        KING,
        &json!({"name": "king", "max_occupancy": 3, "base_occupancy": 2,
                "extra_guest_cents": 2_000}),
    )
    .await
    .assert_status(200);

    // Act: two nights for three guests.
    let reply = app
        .send(
            app.request(
                Method::GET,
                &format!("/v1/hotels/{HOTEL}/availability"),
                Some(WEB),
            )
            .query(&[
                ("start_date", day(11).to_string()),
                ("end_date", day(13).to_string()),
                ("guests", "3".to_owned()),
            ]),
        )
        .await;
    let held = app
        .hold(WEB, "three", &{
            let mut body = hold_body(day(11), day(13), 1);
            body["guests"] = json!(3);
            body
        })
        .await;

    // Assert: one price per night, one total, everywhere.
    let answer = reply.assert_status(200);
    let king = &answer["room_types"][0];
    for night in king["nights"].as_array().expect("nights") {
        assert_eq!(night["prices"][0]["rate_cents"], RATE + 2_000, "{king}");
    }
    assert_eq!(king["offers"][0]["total_cents"], 2 * (RATE + 2_000));
    assert_eq!(king["total_cents"], 2 * (RATE + 2_000), "{king}");
    assert_eq!(held.assert_status(201)["total_cents"], king["total_cents"]);
    app.finish().await;
}

#[tokio::test]
async fn available_is_true_exactly_when_a_hold_would_be_accepted_now() {
    // Arrange: rooms on every night; day 12 stop-sold, day 15 a minimum stay of 3.
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    app.put_restrictions(
        HOTEL,
        KING,
        &json!({"start_date": day(12), "end_date": day(13), "stop_sell": true}),
    )
    .await
    .assert_status(200);
    app.put_restrictions(
        HOTEL,
        KING,
        &json!({"start_date": day(15), "end_date": day(16), "min_stay": 3}),
    )
    .await
    .assert_status(200);
    let cases = [
        ("open", day(17), day(19)),
        ("over the stop-sell", day(11), day(13)),
        ("too short from day 15", day(15), day(17)),
        ("long enough from day 15", day(15), day(18)),
    ];

    for (n, (case, from, to)) in cases.into_iter().enumerate() {
        // Act: ask, then try.
        let asked = app.availability(WEB, HOTEL, from, to, Some(1)).await;
        let held = app
            .hold(WEB, &format!("case-{n}"), &hold_body(from, to, 1))
            .await;

        // Assert: the answer foretold the hold's fate.
        let asked = asked.assert_status(200);
        let king = &asked["room_types"][0];
        assert!(
            king["remaining"].as_i64() >= Some(4),
            "{case}: rooms on every night"
        );
        assert_eq!(
            king["available"],
            held.status.is_success(),
            "{case}: {king} / {}",
            held.text
        );
        assert_eq!(
            king["available"],
            !king["offers"].as_array().expect("offers").is_empty(),
            "{case}"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn a_rate_only_bulk_change_keeps_each_nights_rooms_and_a_night_never_on_sale_needs_them() {
    // Arrange: 5 rooms on days 10 to 11, 9 on days 12 to 13.
    let app = spawn_app().await;
    app.seed_hotel(day(10), 2, 5).await;
    app.put_inventory(
        HOTEL,
        KING,
        &json!({"start_date": day(12), "end_date": day(14), "total_rooms": 9,
                "overbooking_allowance": 1, "rate_cents": RATE}),
    )
    .await
    .assert_status(200);
    let before = app.snapshot().await;

    // Act: a new rate over all four nights, rooms left out; then over a night that was
    // never on sale.
    let rated = app
        .put_ari(
            HOTEL,
            &json!({"updates": [{"room_type_id": KING, "start_date": day(10), "end_date": day(14),
                                 "inventory": {"rate_cents": 19_900}}]}),
        )
        .await;
    let rows = night_rows(&app.db.pool).await;
    let after_rate = app.snapshot().await;
    let unknown = app
        .put_ari(
            HOTEL,
            &json!({"updates": [{"room_type_id": KING, "start_date": day(20), "end_date": day(21),
                                 "inventory": {"rate_cents": 19_900}}]}),
        )
        .await;

    // Assert
    assert_eq!(rated.assert_status(200)["nights"], 4);
    let rooms: Vec<(i32, i32)> = (10..14)
        .map(|d| {
            let row = &rows[&(HOTEL, KING, day(d))];
            (row.total_rooms, row.allowance)
        })
        .collect();
    assert_eq!(rooms, vec![(5, 0), (5, 0), (9, 1), (9, 1)]);
    for d in 10..14 {
        let night = app.availability(WEB, HOTEL, day(d), day(d + 1), None).await;
        assert_eq!(
            night.json["room_types"][0]["nights"][0]["rate_cents"],
            19_900
        );
    }
    assert_ne!(after_rate, before);
    let unknown = unknown.assert_error(422, "invalid_request");
    // The refusal is decided on the night, past the boundary: it names the field and
    // the night that needs it.
    assert_eq!(unknown["field"], "total_rooms", "{unknown}");
    let message = unknown["message"].as_str().unwrap_or_default();
    assert!(message.contains(&day(20).to_string()), "{unknown}");
    assert_eq!(app.snapshot().await, after_rate);
    app.finish().await;
}

#[tokio::test]
async fn one_bulk_update_sets_a_year_of_inventory_weekend_restrictions_and_plan_rates() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 1, 5).await;
    two_plans(&app).await;
    let start = next(Weekday::Mon, 20);
    let end = plus_days(start, 364);

    let set = app
        .put_ari(
            HOTEL,
            &json!({"updates": [
                {"room_type_id": KING, "start_date": start, "end_date": end,
                 "inventory": {"total_rooms": 8, "rate_cents": 20_000}},
                {"room_type_id": KING, "start_date": start, "end_date": end,
                 "days": ["fri", "sat"],
                 "restrictions": {"min_stay": 2},
                 "rates": [{"rate_plan_id": FLEXIBLE, "rate_cents": 25_000}]},
            ]}),
        )
        .await;
    let friday = plus_days(start, 4);
    let weekend = app
        .hold(
            WEB,
            "weekend",
            &plan_hold(friday, plus_days(friday, 2), FLEXIBLE),
        )
        .await;
    let midweek = app
        .hold(
            WEB,
            "midweek",
            &plan_hold(start, plus_days(start, 1), FLEXIBLE),
        )
        .await;
    let lone_saturday = app
        .hold(
            WEB,
            "saturday",
            &hold_body(plus_days(friday, 8), plus_days(friday, 9), 1),
        )
        .await;

    let set = set.assert_status(200);
    // 52 weeks: 52 Fridays and 52 Saturdays in the second range.
    assert_eq!(set["updates"], json!([{"nights": 364}, {"nights": 104}]));
    assert_eq!(set["nights"], 364 + 104);
    assert_eq!(weekend.assert_status(201)["total_cents"], 2 * 25_000);
    assert_eq!(midweek.assert_status(201)["total_cents"], 20_000);
    let lone = lone_saturday.assert_error(409, "restricted");
    assert_eq!(lone["restriction"], "min_stay");
    app.finish().await;
}

#[tokio::test]
async fn bulk_updates_larger_and_smaller_than_the_write_budget_all_finish_exactly() {
    // A budget of 50 nights: the 120-night updates run alone, the 30-night ones two at
    // a time; none may wait for ever or be lost.
    let app = spawn_app_with(|s| s.bulk_write_nights = 50).await;
    app.seed_hotel(day(10), 1, 5).await;
    let ranges: Vec<(u64, u64, i32)> = (0..8_u16)
        .map(|n| {
            let length = if n % 2 == 0 { 120 } else { 30 };
            let start = 20 + u64::from(n) * 125;
            (start, start + length, i32::from(10 + n))
        })
        .collect();

    let answers = futures::future::join_all(ranges.iter().map(|&(start, end, rooms)| {
        let app = &app;
        async move {
            app.put_ari(
                HOTEL,
                &json!({"updates": [{"room_type_id": KING, "start_date": day(start),
                                     "end_date": day(end),
                                     "inventory": {"total_rooms": rooms,
                                                   "rate_cents": 10_000}}]}),
            )
            .await
        }
    }))
    .await;

    for (answer, &(start, end, _)) in answers.into_iter().zip(&ranges) {
        assert_eq!(answer.assert_status(200)["nights"], end - start);
    }
    for &(start, end, rooms) in &ranges {
        let set: Vec<(i32, i64)> = sqlx::query_as(
            "SELECT total_rooms, count(*) FROM room_nights
              WHERE night >= $1 AND night < $2 GROUP BY total_rooms",
        )
        .bind(day(start))
        .bind(day(end))
        .fetch_all(&app.db.pool)
        .await
        .expect("room nights");
        let nights = i64::try_from(end - start).expect("nights");
        assert_eq!(set, vec![(rooms, nights)]);
    }
    app.finish().await;
}

#[tokio::test]
async fn a_bulk_update_with_one_bad_range_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    let before = app.snapshot().await;

    let unknown_room_type = app
        .put_ari(
            HOTEL,
            &json!({"updates": [
                {"room_type_id": KING, "start_date": day(10), "end_date": day(20),
                 "inventory": {"total_rooms": 9}},
                {"room_type_id": 44, "start_date": day(10), "end_date": day(20),
                 "inventory": {"total_rooms": 9, "rate_cents": 100}},
            ]}),
        )
        .await;
    let restriction_without_inventory = app
        .put_ari(
            HOTEL,
            &json!({"updates": [
                {"room_type_id": KING, "start_date": day(10), "end_date": day(20),
                 "restrictions": {"stop_sell": true}},
                {"room_type_id": KING, "start_date": day(18), "end_date": day(25),
                 "restrictions": {"stop_sell": true}},
            ]}),
        )
        .await;
    let bad_day = app
        .put_ari(
            HOTEL,
            &json!({"updates": [
                {"room_type_id": KING, "start_date": day(10), "end_date": day(20),
                 "restrictions": {"stop_sell": true}},
                {"room_type_id": KING, "start_date": day(10), "end_date": day(20),
                 "days": ["friday"], "restrictions": {"stop_sell": true}},
            ]}),
        )
        .await;

    unknown_room_type.assert_error(422, "unknown_room_type");
    let no_inventory = restriction_without_inventory.assert_error(409, "no_inventory");
    assert_eq!(no_inventory["night"], day(20).to_string());
    let bad_day = bad_day.assert_error(422, "invalid_request");
    assert_eq!(bad_day["field"], "updates[1].days");
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn bad_input_for_every_new_field_is_a_4xx_and_changes_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 5).await;
    two_plans(&app).await;
    let before = app.snapshot().await;
    let range = |extra: Value| {
        let mut body = json!({"start_date": day(10), "end_date": day(12)});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };
    let plan = |extra: Value| {
        let mut body = json!({"name": "Corporate", "room_type_ids": [KING]});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        body
    };

    let mut replies = Vec::new();
    for body in [
        plan(json!({"name": ""})),
        plan(json!({"room_type_ids": []})),
        plan(json!({"room_type_ids": [KING, KING]})),
        plan(json!({"room_type_ids": [0]})),
        plan(json!({"room_type_ids": "3"})),
        plan(json!({"cancellation_policy": {"refundable": true, "partial_refund_percent": 101}})),
        plan(json!({"cancellation_policy": {"refundable": true, "full_refund_hours": -1}})),
        plan(
            json!({"cancellation_policy": {"refundable": true, "full_refund_hours": 10, "partial_refund_hours": 20}}),
        ),
        plan(json!({"cancellation_policy": {"refundable": false, "full_refund_hours": 72}})),
        plan(json!({"cancellation_policy": {"refundable": "no"}})),
        plan(json!({"cancellation_policy": {"refundable": true, "penalty": 5}})),
        plan(json!({"derived_from": {"rate_plan_id": FLEXIBLE, "adjust_percent": -101}})),
        plan(json!({"derived_from": {"rate_plan_id": FLEXIBLE, "adjust_percent": 1001}})),
        plan(json!({"derived_from": {"rate_plan_id": 0, "adjust_percent": 5}})),
        plan(json!({"derived_from": {"rate_plan_id": FLEXIBLE}})),
    ] {
        replies.push((
            "plan",
            body.clone(),
            app.put_rate_plan(HOTEL, 9, &body).await,
        ));
    }
    replies.push((
        "plan id 0",
        plan(json!({})),
        app.put_rate_plan(HOTEL, 0, &plan(json!({}))).await,
    ));
    for body in [
        range(json!({"min_stay": 0})),
        range(json!({"min_stay": 1001})),
        range(json!({"min_stay": "2"})),
        range(json!({"max_stay": -1})),
        range(json!({"min_stay": 5, "max_stay": 2})),
        range(json!({"min_advance_days": -1})),
        range(json!({"min_advance_days": 9, "max_advance_days": 3})),
        range(json!({"stop_sell": "yes"})),
        range(json!({"rate_plan_id": 0, "stop_sell": true})),
        range(json!({"rate_plan_id": 99, "stop_sell": true})),
        range(json!({"min_stya": 2})),
        range(json!({})),
        range(json!({"days": [], "stop_sell": true})),
        range(json!({"days": ["fri", "fri"], "stop_sell": true})),
        range(json!({"days": ["someday"], "stop_sell": true})),
        json!({"start_date": day(12), "end_date": day(12), "stop_sell": true}),
    ] {
        replies.push((
            "restrictions",
            body.clone(),
            app.put_restrictions(HOTEL, KING, &body).await,
        ));
    }
    for body in [
        json!({"room_type_id": KING, "start_date": day(10), "end_date": day(12), "rate_cents": -1}),
        json!({"room_type_id": KING, "start_date": day(10), "end_date": day(12)}),
        json!({"room_type_id": 0, "start_date": day(10), "end_date": day(12), "rate_cents": 1}),
    ] {
        replies.push((
            "rates",
            body.clone(),
            app.put_plan_rates(HOTEL, FLEXIBLE, &body).await,
        ));
    }
    for body in [
        json!({"updates": []}),
        json!({"updates": [{"room_type_id": KING, "start_date": day(10), "end_date": day(12)}]}),
        json!({"updates": [{"room_type_id": KING, "start_date": day(10), "end_date": day(12),
                            "inventory": {"total_rooms": -3}}]}),
        json!({"updates": [{"room_type_id": KING, "start_date": day(10), "end_date": day(12),
                            "rates": [{"rate_plan_id": FLEXIBLE}]}]}),
        json!({"updates": {"room_type_id": KING}}),
    ] {
        replies.push(("ari", body.clone(), app.put_ari(HOTEL, &body).await));
    }
    for (field, value) in [
        ("guests", json!(0)),
        ("guests", json!(51)),
        ("guests", json!("2")),
        ("rate_plan_id", json!(0)),
        ("rate_plan_id", json!(-4)),
        ("rate_plan_id", json!("flex")),
    ] {
        let mut body = hold_body(day(10), day(12), 1);
        body[field] = value;
        let key = format!("bad-{field}-{body}");
        replies.push(("hold", body.clone(), app.hold(WEB, &key, &body).await));
    }

    for (what, body, reply) in &replies {
        assert!(
            (400..500).contains(&reply.status.as_u16()),
            "{what} {body}: {} {}",
            reply.status,
            reply.text
        );
        assert_error_shape(reply);
    }
    assert_eq!(app.snapshot().await, before, "nothing changed");
    app.finish().await;
}
