//! Reservations of several room types (`lines`): a family's double and twin held
//! together or not at all, each line on its own nights, restrictions, occupancy and
//! plan; confirm, cancel, date changes, check-in, check-out and no-show acting on
//! every line; the answers of the write side and the read side alike; refusals that
//! change nothing.

mod races;

use chrono::NaiveDate;
use serde_json::{json, Value};

use crate::support::*;

const TWIN: i64 = 4;
const TWIN_RATE: i64 = 9_000;

/// Hotel 812 with 3 king rooms at 180.00 and 2 twin rooms at 90.00, on 5 nights from
/// `day(10)`.
async fn family_hotel(app: &TestApp) {
    app.seed_hotel(day(10), 5, 3).await;
    app.put_room_type(HOTEL, TWIN, &json!({"name": "twin", "max_occupancy": 2}))
        .await
        .assert_status(200);
    app.put_inventory(
        HOTEL,
        TWIN,
        &json!({"start_date": day(10), "end_date": day(15), "total_rooms": 2,
                "overbooking_allowance": 0, "rate_cents": TWIN_RATE}),
    )
    .await
    .assert_status(200);
}

/// A king room for two and `twins` twin rooms for one each, `[start, end)`.
fn family(start: NaiveDate, end: NaiveDate, twins: i64) -> Value {
    json!({
        "hotel_id": HOTEL,
        "start_date": start,
        "end_date": end,
        "guest": {"name": "Ana Lima", "email": "ana@example.com"},
        "lines": [{"room_type_id": KING, "rooms": 1, "guests": 2},
                  {"room_type_id": TWIN, "rooms": twins}],
    })
}

#[tokio::test]
async fn a_family_books_a_double_and_a_twin_together_and_every_answer_lists_both_lines() {
    let app = spawn_app().await;
    family_hotel(&app).await;

    let held = app
        .hold(WEB, "family-1", &family(day(10), day(12), 2))
        .await;

    let held = held.assert_status(201).clone();
    let house = held["cancellation_policy"].clone();
    assert_eq!(house["refundable"], true, "the base rate: the house policy");
    let lines = json!([
        {"room_type_id": KING, "rooms": 1, "guests": 2, "rate_plan_id": null,
         "cancellation_policy": house, "total_cents": 2 * RATE},
        {"room_type_id": TWIN, "rooms": 2, "guests": 1, "rate_plan_id": null,
         "cancellation_policy": house, "total_cents": 2 * 2 * TWIN_RATE},
    ]);
    assert_eq!(held["lines"], lines);
    assert_eq!(held["total_cents"], 2 * RATE + 4 * TWIN_RATE);
    assert_eq!(held["total_due_cents"], 2 * RATE + 4 * TWIN_RATE);
    assert_eq!(held["rooms"], 3, "every line's rooms");
    assert_eq!(held["room_type_id"], KING, "the first line's");
    for night in [day(10), day(11)] {
        assert_eq!(app.taken_of(KING, night).await, 1);
        assert_eq!(app.taken_of(TWIN, night).await, 2);
    }
    let id = held["reservation_id"].as_str().expect("id");
    let looked_up = app.get_reservation(WEB, id).await;
    assert_eq!(looked_up.assert_status(200)["lines"], lines);
    // Availability counts each line's rooms under its own room type.
    let availability = app.availability(WEB, HOTEL, day(10), day(12), None).await;
    let remaining = |room_type: i64| {
        availability.json["room_types"]
            .as_array()
            .and_then(|rts| rts.iter().find(|rt| rt["room_type_id"] == room_type))
            .map(|rt| rt["nights"][0]["remaining"].clone())
    };
    assert_eq!(remaining(KING), Some(json!(2)));
    assert_eq!(remaining(TWIN), Some(json!(0)));

    // The read side's look-up answers the same lines, rooms and money.
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let listed = app
        .get(
            &format!("/v1/reservations?hotel_id={HOTEL}&date={}", day(10)),
            Some(ADMIN),
        )
        .await;
    let listed = listed.assert_status(200)["reservations"][0].clone();
    for field in [
        "lines",
        "rooms",
        "total_cents",
        "total_due_cents",
        "room_type_id",
    ] {
        assert_eq!(listed[field], held[field], "{field}");
    }
    runners.stop().await;
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn a_line_that_cannot_be_held_refuses_the_whole_reservation_naming_its_room_type_and_night() {
    let app = spawn_app().await;
    family_hotel(&app).await;
    // The 11th's twin rooms are closed.
    app.put_restrictions(
        HOTEL,
        TWIN,
        &json!({"start_date": day(11), "end_date": day(12), "stop_sell": true}),
    )
    .await
    .assert_status(200);
    let before = app.snapshot().await;

    let three_twins = app
        .hold(WEB, "family-3", &family(day(12), day(14), 3))
        .await;
    let closed = app
        .hold(WEB, "family-closed", &family(day(10), day(12), 1))
        .await;
    let mut crowded_body = family(day(12), day(14), 1);
    crowded_body["lines"][1]["guests"] = json!(3);
    let crowded = app.hold(WEB, "family-crowded", &crowded_body).await;

    let sold_out = three_twins.assert_error(409, "sold_out");
    assert_eq!(
        (
            &sold_out["line"],
            &sold_out["room_type_id"],
            &sold_out["night"]
        ),
        (&json!(1), &json!(TWIN), &json!(day(12))),
        "{sold_out}"
    );
    let restricted = closed.assert_error(409, "restricted");
    assert_eq!(
        (&restricted["line"], &restricted["room_type_id"]),
        (&json!(1), &json!(TWIN))
    );
    assert_eq!(restricted["restriction"], "stop_sell");
    assert_eq!(restricted["night"], json!(day(11)));
    let crowded = crowded.assert_error(422, "occupancy_exceeded");
    assert_eq!(crowded["line"], 1);
    // Nothing held: not even the king room the first line could have had.
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn malformed_lines_are_refused_with_422_naming_the_field_and_change_nothing() {
    let app = spawn_app().await;
    family_hotel(&app).await;
    let before = app.snapshot().await;
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut body = family(day(10), day(12), 1);
        edit(&mut body);
        body
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&|b| b["room_type_id"] = json!(KING)), "room_type_id"),
        (with(&|b| b["rooms"] = json!(2)), "rooms"),
        (with(&|b| b["rate_plan_id"] = json!(1)), "rate_plan_id"),
        (with(&|b| b["lines"] = json!([])), "lines"),
        (
            with(&|b| {
                b["lines"] = json!([1, 2, 5, 6, 7]
                    .iter()
                    .map(|t| json!({"room_type_id": t}))
                    .collect::<Vec<_>>())
            }),
            "lines",
        ),
        (
            with(&|b| b["lines"][1]["room_type_id"] = json!(KING)),
            "lines[1].room_type_id",
        ),
        (
            with(&|b| b["lines"][1]["rooms"] = json!(0)),
            "lines[1].rooms",
        ),
        (
            with(&|b| b["lines"][1]["rooms"] = json!(11)),
            "lines[1].rooms",
        ),
        (
            with(&|b| b["lines"][0]["guests"] = json!(0)),
            "lines[0].guests",
        ),
        (
            with(&|b| b["lines"][0]["room_type_id"] = json!(0)),
            "lines[0].room_type_id",
        ),
        (
            with(&|b| {
                b.as_object_mut().map(|o| o.remove("lines"));
            }),
            "room_type_id",
        ),
    ];

    for (body, field) in cases {
        let reply = app.hold(WEB, "bad-lines", &body).await;
        let error = reply.assert_error(422, "invalid_request");
        assert_eq!(error["field"], field, "{body}: {error}");
    }

    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn confirm_cancel_and_date_changes_act_on_every_line_each_refunded_by_its_own_policy() {
    let app = spawn_app().await;
    family_hotel(&app).await;
    // Flexible (the house policy) and non-refundable (10% less) sell both room types.
    app.put_rate_plan(
        HOTEL,
        FLEXIBLE,
        &json!({"name": "Flexible", "room_type_ids": [KING, TWIN]}),
    )
    .await
    .assert_status(200);
    app.put_rate_plan(
        HOTEL,
        NON_REFUNDABLE,
        &json!({"name": "Non-refundable", "room_type_ids": [KING, TWIN],
                "cancellation_policy": {"refundable": false},
                "derived_from": {"rate_plan_id": FLEXIBLE, "adjust_percent": -10}}),
    )
    .await
    .assert_status(200);
    let mut body = family(day(10), day(12), 1);
    body["lines"][0]["rate_plan_id"] = json!(NON_REFUNDABLE);
    body["lines"][1]["rate_plan_id"] = json!(FLEXIBLE);
    let id = app.hold_ok(WEB, "mixed", &body).await;

    // Both lines move two nights on, each repriced (the same rates: same totals).
    let moved = app
        .change_dates(
            WEB,
            "mixed-move",
            &id,
            &json!({"start_date": day(12), "end_date": day(14)}),
        )
        .await;
    let moved = moved.assert_status(200).clone();
    // King non-refundable: 2 x 162.00; twin flexible: 2 x 90.00.
    let (king_total, twin_total) = (2 * 16_200, 2 * TWIN_RATE);
    assert_eq!(
        moved["lines"].as_array().map(|ls| ls
            .iter()
            .map(|l| l["total_cents"].clone())
            .collect::<Vec<_>>()),
        Some(vec![json!(king_total), json!(twin_total)])
    );
    for (room_type, rooms) in [(KING, 1), (TWIN, 1)] {
        assert_eq!(app.taken_of(room_type, day(10)).await, 0);
        assert_eq!(app.taken_of(room_type, day(12)).await, rooms);
        assert_eq!(app.taken_of(room_type, day(13)).await, rooms);
    }
    // A non-refundable line: the card is captured at once, the whole reservation.
    let confirmed = app.confirm(WEB, "mixed-pay", &id, "tok_ok").await;
    let confirmed = confirmed.assert_status(200);
    assert_eq!(
        confirmed["payment"]["captured_cents"],
        king_total + twin_total
    );

    // The guest cancels days ahead: the flexible line is refunded, the other kept.
    let cancelled = app
        .cancel(WEB, "mixed-cancel", &id, &json!({"reason": "plans"}))
        .await;

    let cancelled = cancelled.assert_status(200);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["refund_cents"], twin_total, "{cancelled}");
    for room_type in [KING, TWIN] {
        assert_eq!(app.taken_of(room_type, day(12)).await, 0);
    }
    app.deliver_payments().await;
    assert_eq!(app.gateway.totals(&id).refunded_cents, twin_total);
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn a_no_show_keeps_each_lines_first_night_and_a_check_out_releases_every_line() {
    let app = spawn_app().await;
    family_hotel(&app).await;
    let lisbon = aggregates::types::TimeZone::parse("Europe/Lisbon").expect("valid");
    let stays = [("no-show", day(10)), ("in-house", day(11))];
    let mut ids = Vec::new();
    for (name, start) in stays {
        let id = app
            .hold_ok(WEB, name, &family(start, plus_days(start, 3), 1))
            .await;
        app.confirm(WEB, &format!("{name}-pay"), &id, "tok_ok")
            .await
            .assert_status(200);
        ids.push(id);
    }
    let arrival = aggregates::booking::check_in_instant(day(11), lisbon);
    app.clock.set(arrival + chrono::Duration::hours(1));

    let no_show = app.no_show(ADMIN, "ns", &ids[0]).await;
    let checked_in = app.check_in(ADMIN, "in", &ids[1]).await;
    app.clock.set(arrival + chrono::Duration::days(1));
    let checked_out = app.check_out(ADMIN, "out", &ids[1]).await;

    // The first night of each line is the fee: 180.00 + 90.00.
    let no_show = no_show.assert_status(200);
    assert_eq!(no_show["status"], "no_show");
    assert_eq!(no_show["payment"]["captured_cents"], RATE + TWIN_RATE);
    checked_in.assert_status(200);
    assert_eq!(checked_out.assert_status(200)["status"], "checked_out");
    // The no-show released every night after its first, of both lines; the guest
    // who left on the 12th released the nights after it (the 13th) of both lines.
    for room_type in [KING, TWIN] {
        assert_eq!(app.taken_of(room_type, day(10)).await, 1, "no-show's first");
        assert_eq!(app.taken_of(room_type, day(11)).await, 1, "in house");
        assert_eq!(app.taken_of(room_type, day(12)).await, 1, "in house");
        assert_eq!(app.taken_of(room_type, day(13)).await, 0);
    }
    // The stays report counts each line's rooms under its own room type.
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let stays = app
        .get(
            &format!(
                "/v1/hotels/{HOTEL}/stays?start_date={}&end_date={}",
                day(10),
                day(12)
            ),
            Some(ADMIN),
        )
        .await;
    runners.stop().await;
    let stays = stays.assert_status(200);
    let totals = |room_type: i64| {
        stays["room_types"]
            .as_array()
            .and_then(|rts| rts.iter().find(|rt| rt["room_type_id"] == room_type))
            .map(|rt| (rt["arrivals"].clone(), rt["no_shows"].clone()))
    };
    assert_eq!(totals(KING), Some((json!(1), json!(1))), "{stays}");
    assert_eq!(totals(TWIN), Some((json!(1), json!(1))), "{stays}");
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}
