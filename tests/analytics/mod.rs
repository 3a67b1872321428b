//! The analytics read side end to end, against real PostgreSQL: the reservations view and
//! the daily occupancy projection, followed by their real runners (`projections::run`),
//! served over HTTP, and rebuilt from position zero while the runners keep going.
//!
//! Most tests run one booking workload (holds, confirmations, a rate change between
//! confirmations, cancellations of a confirmed and of a held stay, a change of dates, a
//! hold that lapses) whose every expected number is worked out by hand below.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aggregates::booking::InventoryUpdate;
use aggregates::{Rejection, ReservationId};
use app::clock::ManualClock;
use app::commands::{Caller, CommandService};
use chrono::{Duration, NaiveDate};
use projections::analytics::{
    Occupancy, ReservationsView, LOAD_VIEW_ROWS, OCCUPANCY, RESERVATIONS_VIEW,
};
use projections::runner::served_generation;
use projections::Projection;
use reservations::workers::{self, ProjectionName};
use serde_json::Value;
use sqlx::PgPool;
use store::error::CommandError;
use store::write::Strategy;
use uuid::Uuid;

use crate::support::*;

fn d(n: u64) -> NaiveDate {
    day(10 + n)
}

fn mobile() -> Caller {
    Caller::Channel("mobile".into())
}

/// The reservations of the workload.
struct Workload {
    /// Web, guest 1, nights d0..d3, confirmed at 180.00, then cancelled after the rate
    /// went up to 200.00.
    a: Uuid,
    /// Mobile, guest 2, 2 rooms on d1..d3, confirmed at 200.00.
    b: Uuid,
    /// Web, guest 1, d5..d7, cancelled while held.
    c: Uuid,
    /// Mobile, guest 3, d3..d5 confirmed, then moved to d6..d8 (booked at 200.00).
    d: Uuid,
    /// Web, guest 5, d8..d10, a hold that lapsed and was expired.
    e: Uuid,
    /// Mobile, guest 6, d0..d2, still held.
    f: Uuid,
}

/// Runs the workload through the command API (channels "web" and "mobile", as the
/// HTTP harness's tokens are named), one second of `clock` between steps so that
/// "newest first" is well defined.
async fn booking_workload(svc: &CommandService, clock: &ManualClock) -> Workload {
    let tick = || clock.advance(Duration::seconds(1));
    hotel_with_rooms(svc, d(0), 11, 5).await;
    let hold = |channel: &'static str, k: &'static str, from, to, rooms, guest| {
        let request = hold_request(stay(d(from), d(to)), rooms, guest);
        async move {
            svc.hold(channel, channel, key(k), request)
                .await
                .unwrap_or_else(|e| panic!("hold {k}: {e}"))
                .reservation_id
        }
    };
    let id = ReservationId::from_uuid;

    let e = hold("web", "e", 8, 10, 1, 5).await;
    clock.advance(Duration::seconds(901));
    svc.expire_hold(id(e)).await.expect("expire e");
    tick();

    let a = hold("web", "a", 0, 3, 1, 1).await;
    svc.confirm(&web(), None, id(a)).await.expect("confirm a");
    tick();

    svc.set_inventory(
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        king(),
        stay(d(0), d(11)),
        InventoryUpdate {
            total_rooms: Some(5),
            overbooking_allowance: None,
            rate_cents: Some(aggregates::Cents::new(20_000)),
        },
    )
    .await
    .expect("raise the rate");
    tick();

    let b = hold("mobile", "b", 1, 3, 2, 2).await;
    svc.confirm(&mobile(), None, id(b))
        .await
        .expect("confirm b");
    tick();

    svc.cancel(&web(), web().name(), None, id(a), "plans changed".into())
        .await
        .expect("cancel a");
    tick();

    let c = hold("web", "c", 5, 7, 1, 1).await;
    svc.cancel(&web(), web().name(), None, id(c), "found cheaper".into())
        .await
        .expect("cancel c");
    tick();

    let d_ = hold("mobile", "d", 3, 5, 1, 3).await;
    svc.confirm(&mobile(), None, id(d_))
        .await
        .expect("confirm d");
    svc.change_dates(
        &mobile(),
        mobile().name(),
        None,
        id(d_),
        stay(d(6), d(8)),
        None,
        None,
    )
    .await
    .expect("move d");
    tick();

    let f = hold("mobile", "f", 0, 2, 1, 6).await;
    Workload {
        a,
        b,
        c,
        d: d_,
        e,
        f,
    }
}

/// What the workload must leave on each night, worked out by hand (every night has 5
/// rooms at 200.00 by the end):
/// (confirmed, held, revenue_cents, holds_placed, holds_lapsed, cancellations).
fn expected_nights() -> BTreeMap<NaiveDate, (i64, i64, i64, i64, i64, i64)> {
    BTreeMap::from([
        // A (cancelled) and F (held). A's 180.00 comes back out exactly, although the
        // rate is 200.00 by then.
        (d(0), (0, 1, 0, 2, 0, 1)),
        // A (cancelled), B (2 rooms at 200.00), F (held).
        (d(1), (2, 1, 40_000, 4, 0, 1)),
        (d(2), (2, 0, 40_000, 3, 0, 1)),
        // D confirmed here, then moved away: not a cancellation.
        (d(3), (0, 0, 0, 1, 0, 0)),
        (d(4), (0, 0, 0, 1, 0, 0)),
        // C held, then cancelled.
        (d(5), (0, 0, 0, 1, 0, 1)),
        // C cancelled; D booked at 200.00.
        (d(6), (1, 0, 20_000, 1, 0, 1)),
        (d(7), (1, 0, 20_000, 0, 0, 0)),
        // E lapsed.
        (d(8), (0, 0, 0, 1, 1, 0)),
        (d(9), (0, 0, 0, 1, 1, 0)),
        (d(10), (0, 0, 0, 0, 0, 0)),
    ])
}

async fn workload_app() -> (TestApp, Workload) {
    let app = spawn_app().await;
    let svc = CommandService::with_clock(
        app.db.pool.clone(),
        config(Strategy::Pessimistic),
        Arc::new(app.clock.clone()),
    );
    let workload = booking_workload(&svc, &app.clock).await;
    (app, workload)
}

#[derive(Debug, PartialEq, Eq, sqlx::FromRow)]
struct OccupancyRow {
    night: NaiveDate,
    total_rooms: i32,
    overbooking_allowance: i32,
    rate_cents: i64,
    confirmed: i32,
    held: i32,
    revenue_cents: i64,
    holds_placed: i64,
    holds_lapsed: i64,
    cancellations: i64,
}

async fn occupancy_rows(pool: &PgPool) -> BTreeMap<NaiveDate, OccupancyRow> {
    let generation = served_generation(pool, OCCUPANCY)
        .await
        .expect("generation");
    sqlx::query_as::<_, OccupancyRow>(
        "SELECT night, total_rooms, overbooking_allowance, rate_cents, confirmed, held,
                revenue_cents, holds_placed, holds_lapsed, cancellations
           FROM occupancy_daily
          WHERE generation = $1 AND hotel_id = $2 AND room_type_id = $3",
    )
    .bind(generation)
    .bind(HOTEL)
    .bind(KING)
    .fetch_all(pool)
    .await
    .expect("occupancy rows")
    .into_iter()
    .map(|r| (r.night, r))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn occupancy_follows_a_booking_workload_and_agrees_with_room_nights() {
    let (app, _) = workload_app().await;
    let pool = app.db.pool.clone();
    let runners = Runners::start(&pool);

    wait_caught_up(&pool).await;
    let rows = occupancy_rows(&pool).await;
    let nights = night_rows(&pool).await;

    // The write side's own counters, night by night.
    assert_eq!(rows.len(), nights.len(), "one occupancy row per room-night");
    for ((_, _, night), written) in &nights {
        let row = &rows[night];
        assert_eq!(
            (
                row.total_rooms,
                row.overbooking_allowance,
                row.confirmed,
                row.held
            ),
            (
                written.total_rooms,
                written.allowance,
                written.confirmed,
                written.held
            ),
            "occupancy of {night} differs from room_nights"
        );
        assert_eq!(row.rate_cents, 20_000, "current rate of {night}");
    }
    // And what the workload did, by hand.
    let actual: BTreeMap<NaiveDate, _> = rows
        .iter()
        .map(|(night, r)| {
            (
                *night,
                (
                    i64::from(r.confirmed),
                    i64::from(r.held),
                    r.revenue_cents,
                    r.holds_placed,
                    r.holds_lapsed,
                    r.cancellations,
                ),
            )
        })
        .collect();
    assert_eq!(actual, expected_nights());

    runners.stop().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_occupancy_endpoint_reports_every_night_with_totals() {
    let (app, _) = workload_app().await;
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let checkpoint_time: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "SELECT updated_at FROM projection_checkpoints WHERE name = 'occupancy'",
    )
    .fetch_one(&app.db.pool)
    .await
    .expect("checkpoint");

    // One night before the inventory starts, so an empty night shows too.
    let path = format!(
        "/v1/hotels/{HOTEL}/occupancy?start_date={}&end_date={}",
        day(9),
        d(11)
    );
    let reply = app.get(&path, Some(ADMIN)).await;

    let body = reply.assert_status(200);
    assert_eq!(body["hotel_id"], HOTEL);
    let as_of: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(body["as_of"].clone()).expect("as_of is a timestamp");
    assert_eq!(as_of, checkpoint_time);
    let room_types = body["room_types"].as_array().expect("room types");
    assert_eq!(room_types.len(), 1);
    let king = &room_types[0];
    assert_eq!(
        (king["room_type_id"].as_i64(), king["name"].as_str()),
        (Some(3), Some("king"))
    );
    let nights = king["nights"].as_array().expect("nights");
    assert_eq!(nights.len(), 12, "every night of the range, empty ones too");
    assert_eq!(nights[0]["date"], day(9).to_string());
    assert_eq!(nights[0]["total_rooms"], 0);
    assert_eq!(
        nights[0]["occupancy"],
        Value::Null,
        "no rooms: no occupancy ratio"
    );
    let n = |v: &Value, field: &str| {
        v[field]
            .as_i64()
            .unwrap_or_else(|| panic!("{field} in {v}"))
    };
    for (i, (date, expected)) in expected_nights().into_iter().enumerate() {
        let night = &nights[i + 1];
        assert_eq!(night["date"], date.to_string());
        let got = (
            n(night, "confirmed"),
            n(night, "held"),
            n(night, "revenue_cents"),
            n(night, "holds_placed"),
            n(night, "holds_lapsed"),
            n(night, "cancellations"),
        );
        assert_eq!(got, expected, "night {date}");
        assert_eq!(
            (n(night, "total_rooms"), n(night, "overbooking_allowance")),
            (5, 0)
        );
        let occupancy = night["occupancy"].as_f64().expect("occupancy");
        assert!(
            (occupancy - expected.0 as f64 / 5.0).abs() < 1e-9,
            "{date}: {occupancy}"
        );
    }
    let totals = &king["totals"];
    assert_eq!(
        (
            n(totals, "total_rooms"),
            n(totals, "confirmed"),
            n(totals, "held"),
            n(totals, "revenue_cents"),
            n(totals, "holds_placed"),
            n(totals, "holds_lapsed"),
            n(totals, "cancellations"),
        ),
        (55, 6, 2, 120_000, 15, 2, 5)
    );
    let ratio = totals["occupancy"].as_f64().expect("total occupancy");
    assert!((ratio - 6.0 / 55.0).abs() < 1e-9, "{ratio}");
    assert_eq!(body["currency"], "EUR");
    assert_eq!(totals["currency"], "EUR");
    assert!(nights.iter().all(|n| n["currency"] == "EUR"));

    runners.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn each_night_of_the_occupancy_report_says_the_currency_it_was_priced_in() {
    // A hotel in euros until today, in francs from today.
    let app = spawn_app().await;
    app.seed_hotel(day(1), 5, 5).await;
    let francs = serde_json::json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
                        "currency": "CHF"});
    app.put_hotel(HOTEL, &francs).await.assert_status(200);
    let today = app.now().date_naive();
    let path = format!(
        "/v1/hotels/{HOTEL}/occupancy?start_date={}&end_date={}",
        today - chrono::Days::new(2),
        today + chrono::Days::new(3)
    );

    let reply = app.get(&path, Some(ADMIN)).await;

    let body = reply.assert_status(200);
    assert_eq!(body["currency"], "CHF");
    let king = &body["room_types"][0];
    let currencies: Vec<&str> = king["nights"]
        .as_array()
        .expect("nights")
        .iter()
        .map(|n| n["currency"].as_str().expect("currency"))
        .collect();
    assert_eq!(currencies, ["EUR", "EUR", "CHF", "CHF", "CHF"]);
    // Amounts in two currencies are not added.
    assert_eq!(king["totals"]["revenue_cents"], Value::Null);
    assert_eq!(king["totals"]["currency"], Value::Null);
    app.finish().await;
}

#[tokio::test]
async fn the_occupancy_endpoint_is_for_admins_and_auditors_and_checks_its_range() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let range = |from: NaiveDate, to: NaiveDate| {
        format!("/v1/hotels/{HOTEL}/occupancy?start_date={from}&end_date={to}")
    };
    let ok = range(day(10), day(15));

    let admin = app.get(&ok, Some(ADMIN)).await;
    let auditor = app.get(&ok, Some(AUDITOR)).await;
    let channel = app.get(&ok, Some(WEB)).await;
    let anonymous = app.get(&ok, None).await;
    let unknown_hotel = app
        .get(
            &format!(
                "/v1/hotels/999/occupancy?start_date={}&end_date={}",
                day(10),
                day(15)
            ),
            Some(ADMIN),
        )
        .await;
    let inverted = app.get(&range(day(15), day(10)), Some(ADMIN)).await;
    let empty = app.get(&range(day(10), day(10)), Some(AUDITOR)).await;
    let too_long = app.get(&range(day(10), day(411)), Some(ADMIN)).await;
    let longest = app.get(&range(day(10), day(410)), Some(ADMIN)).await;
    let missing_end = app
        .get(
            &format!("/v1/hotels/{HOTEL}/occupancy?start_date={}", day(10)),
            Some(ADMIN),
        )
        .await;

    let body = admin.assert_status(200);
    // The projection has not run in this test: the report says so, and shows nothing sold.
    assert_eq!(body["as_of"], Value::Null);
    assert_eq!(
        body["room_types"][0]["nights"].as_array().map(Vec::len),
        Some(5)
    );
    assert_eq!(auditor.assert_status(200), body);
    channel.assert_error(403, "forbidden");
    anonymous.assert_error(401, "unauthorized");
    unknown_hotel.assert_error(404, "not_found");
    inverted.assert_error(422, "invalid_request");
    empty.assert_error(422, "invalid_request");
    too_long.assert_error(422, "invalid_request");
    assert_eq!(
        longest.assert_status(200)["room_types"][0]["nights"]
            .as_array()
            .map(Vec::len),
        Some(400)
    );
    assert_eq!(
        missing_end.assert_error(422, "invalid_request")["field"],
        "end_date"
    );
    app.finish().await;
}

/// The reservation ids of a list reply, in order.
fn ids(reply: &Reply) -> Vec<Uuid> {
    reply.json["reservations"]
        .as_array()
        .unwrap_or_else(|| panic!("no reservations in {}", reply.text))
        .iter()
        .map(|r| {
            r["reservation_id"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .expect("id")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reservations_view_answers_by_channel_guest_email_and_hotel_and_date() {
    let (app, w) = workload_app().await;
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let list = |token: &'static str, query: String| {
        let app = &app;
        async move {
            app.get(&format!("/v1/reservations{query}"), Some(token))
                .await
        }
    };

    let web_own = list(WEB, String::new()).await;
    let web_naming_itself = list(WEB, "?channel=web".into()).await;
    let web_naming_mobile = list(WEB, "?channel=mobile".into()).await;
    let mobile_own = list(MOBILE, String::new()).await;
    let admin_all = list(ADMIN, String::new()).await;
    let auditor_mobile = list(AUDITOR, "?channel=mobile".into()).await;
    let by_email = list(ADMIN, "?guest_email=%20Guest1@Example.com".into()).await;
    let by_email_as_mobile = list(MOBILE, "?guest_email=guest1@example.com".into()).await;
    let on_d1 = list(AUDITOR, format!("?hotel_id={HOTEL}&date={}", d(1))).await;
    let on_d3 = list(ADMIN, format!("?hotel_id={HOTEL}&date={}", d(3))).await;
    let on_d6 = list(ADMIN, format!("?hotel_id={HOTEL}&date={}", d(6))).await;
    let other_hotel = list(ADMIN, format!("?hotel_id=813&date={}", d(1))).await;
    let newest_two = list(ADMIN, "?limit=2".into()).await;
    let bad_limit = list(ADMIN, "?limit=501".into()).await;

    // Newest first; the workload made them in the order e, a, b, c, d, f.
    assert_eq!(ids(&web_own), vec![w.c, w.a, w.e]);
    assert_eq!(ids(&web_naming_itself), ids(&web_own));
    web_naming_mobile.assert_error(403, "forbidden");
    assert_eq!(ids(&mobile_own), vec![w.f, w.d, w.b]);
    assert_eq!(ids(&admin_all), vec![w.f, w.d, w.c, w.b, w.a, w.e]);
    assert_eq!(ids(&auditor_mobile), ids(&mobile_own));
    assert_eq!(
        ids(&by_email),
        vec![w.c, w.a],
        "case and spaces do not matter"
    );
    assert_eq!(
        ids(&by_email_as_mobile),
        Vec::<Uuid>::new(),
        "guest 1 booked through web only"
    );
    // D moved away from d3..d5 and A's stay ends before d3.
    assert_eq!(ids(&on_d1), vec![w.f, w.b, w.a]);
    assert_eq!(ids(&on_d3), Vec::<Uuid>::new());
    assert_eq!(ids(&on_d6), vec![w.d, w.c]);
    assert_eq!(ids(&other_hotel), Vec::<Uuid>::new());
    assert_eq!(ids(&newest_two), vec![w.f, w.d]);
    bad_limit.assert_error(422, "invalid_request");

    // Each row says what happened to it.
    let row = |id: Uuid| {
        admin_all.json["reservations"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["reservation_id"] == id.to_string()))
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed"))
    };
    let status = |id| row(id)["status"].as_str().map(str::to_owned);
    assert_eq!(status(w.a).as_deref(), Some("cancelled"));
    assert_eq!(status(w.b).as_deref(), Some("confirmed"));
    assert_eq!(status(w.c).as_deref(), Some("cancelled"));
    assert_eq!(status(w.e).as_deref(), Some("expired"));
    assert_eq!(status(w.f).as_deref(), Some("held"));
    let moved = row(w.d);
    assert_eq!(
        (
            moved["status"].as_str(),
            moved["start_date"].as_str(),
            moved["end_date"].as_str()
        ),
        (
            Some("confirmed"),
            Some(d(6).to_string().as_str()),
            Some(d(8).to_string().as_str())
        )
    );
    assert_eq!(moved["total_cents"], 40_000);
    assert_eq!(row(w.b)["rooms"], 2);
    assert_eq!(row(w.b)["guest"]["email"], "guest2@example.com");
    assert!(admin_all.json["as_of"].is_string());
    // Each listed reservation reads as the write side shows it.
    for id in [w.a, w.b, w.c, w.d, w.e, w.f] {
        let direct = app.get_reservation(ADMIN, &id.to_string()).await;
        let listed = row(id);
        for field in ["status", "start_date", "end_date", "total_cents", "channel"] {
            assert_eq!(listed[field], direct.json[field], "{field} of {id}");
        }
        // PostgreSQL keeps microseconds; the write side's JSON state keeps nanoseconds.
        let at = |v: &Value| -> chrono::DateTime<chrono::Utc> {
            serde_json::from_value(v["hold_expires_at"].clone()).expect("timestamp")
        };
        let gap = (at(&listed) - at(&direct.json))
            .num_nanoseconds()
            .map(i64::abs);
        assert!(gap.is_some_and(|g| g < 1_000), "hold_expires_at of {id}");
    }

    // F's hold lapses: it reads as expired at once, before anyone records it.
    app.clock.advance(Duration::seconds(901));
    let later = list(MOBILE, String::new()).await;
    assert_eq!(
        later.json["reservations"][0]["reservation_id"],
        w.f.to_string()
    );
    assert_eq!(later.json["reservations"][0]["status"], "expired");

    runners.stop().await;
    app.finish().await;
}

/// Every row of the analytics tables in `generation`, without the generation column.
async fn generation_rows(pool: &PgPool, generation: i32) -> BTreeMap<&'static str, Vec<String>> {
    let mut out = BTreeMap::new();
    for (table, columns) in [
        (
            "reservations_view",
            "reservation_id, hotel_id, room_type_id, start_date, end_date, rooms, status,
             guest_name, guest_email, guest, guest_id, channel, total_cents,
             hold_expires_at, created_at, updated_at, version, rate_plan_id, guests,
             cancellation_policy",
        ),
        (
            "occupancy_daily",
            "hotel_id, room_type_id, night, total_rooms, overbooking_allowance, rate_cents,
             confirmed, held, revenue_cents, holds_placed, holds_lapsed, cancellations, version",
        ),
        (
            "occupancy_confirmations",
            "hotel_id, room_type_id, night, reservation_id, rooms, revenue_cents",
        ),
    ] {
        let rows: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT ({columns})::text FROM {table} WHERE generation = $1 ORDER BY 1"
        ))
        .bind(generation)
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"));
        out.insert(table, rows);
    }
    out
}

/// Bookings from several clients at once on a small hotel, so some sell out: holds,
/// confirmations, cancellations and changes of dates, with rate changes in between.
async fn concurrent_bookings(svc: &CommandService, round: usize) {
    let mut tasks = Vec::new();
    for client in 0..6_usize {
        let svc = svc.clone();
        tasks.push(tokio::spawn(async move {
            let channel = if client % 2 == 0 { "web" } else { "mobile" };
            let caller = Caller::Channel(channel.into());
            for step in 0..8_usize {
                let from = ((client * 3 + step * 5 + round) % 12) as u64;
                let nights = 1 + (step % 3) as u64;
                let request = hold_request(
                    stay(d(from), d(from + nights)),
                    1 + (step % 2) as i64,
                    client * 100 + step,
                );
                let k = format!("r{round}-c{client}-s{step}");
                let id = match svc.hold(channel, channel, key(&k), request).await {
                    Ok(view) => ReservationId::from_uuid(view.reservation_id),
                    Err(e) => {
                        expected_failure(&e, &k);
                        continue;
                    }
                };
                let outcome = match step % 4 {
                    0 => svc.confirm(&caller, None, id).await.map(drop),
                    1 => svc
                        .cancel(&caller, caller.name(), None, id, "no".into())
                        .await
                        .map(drop),
                    2 => match svc.confirm(&caller, None, id).await {
                        Ok(_) => svc
                            .change_dates(
                                &caller,
                                caller.name(),
                                None,
                                id,
                                stay(d(from + 1), d(from + 1 + nights)),
                                None,
                                None,
                            )
                            .await
                            .map(drop),
                        Err(e) => Err(e),
                    },
                    // Left held (it lapses when the test moves the clock).
                    _ => Ok(()),
                };
                if let Err(e) = outcome {
                    expected_failure(&e, &k);
                }
                if client == 0 && step == 4 {
                    svc.set_inventory(
                        &app::commands::Caller::Staff("staff".into()),
                        hotel_id(),
                        king(),
                        stay(d(0), d(16)),
                        InventoryUpdate {
                            total_rooms: Some(4),
                            overbooking_allowance: Some(1),
                            rate_cents: Some(aggregates::Cents::new(15_000 + 1_000 * round as i64)),
                        },
                    )
                    .await
                    .unwrap_or_else(|e| panic!("rate change: {e}"));
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("client task");
    }
}

/// Sold-out nights and moves onto them are part of the workload; anything else is not.
fn expected_failure(e: &CommandError, what: &str) {
    assert!(
        matches!(
            e,
            CommandError::Rejected(Rejection::SoldOut { .. }) | CommandError::Contention { .. }
        ),
        "{what}: {e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebuilt_projection_equals_the_incrementally_built_one() {
    let db = TestDb::new().await;
    let clock = ManualClock::new(chrono::Utc::now());
    let svc = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock.clone()));
    hotel_with_rooms(&svc, d(0), 16, 4).await;
    // The runners follow the log while the bookings happen, in batches of three.
    let runners = Runners::start(&db.pool);
    concurrent_bookings(&svc, 0).await;
    // Holds left open lapse; the next round's holds drop them, and the sweeper expires one.
    clock.advance(Duration::seconds(901));
    concurrent_bookings(&svc, 1).await;
    let held: Option<Uuid> = sqlx::query_scalar(
        "SELECT reservation_id FROM reservations WHERE status = 'held' ORDER BY 1 LIMIT 1",
    )
    .fetch_optional(&db.pool)
    .await
    .expect("a held reservation");
    clock.advance(Duration::seconds(901));
    if let Some(held) = held {
        svc.expire_hold(ReservationId::from_uuid(held))
            .await
            .expect("expire");
    }
    wait_caught_up(&db.pool).await;

    assert_eq!(
        served_generation(&db.pool, RESERVATIONS_VIEW)
            .await
            .expect("gen"),
        1
    );
    assert_eq!(
        served_generation(&db.pool, OCCUPANCY).await.expect("gen"),
        1
    );
    let incremental = generation_rows(&db.pool, 1).await;
    // The workload really did each kind of thing.
    let events: Vec<String> = sqlx::query_scalar("SELECT DISTINCT event_type FROM events")
        .fetch_all(&db.pool)
        .await
        .expect("event types");
    for kind in [
        "HoldConfirmed",
        "RoomsBooked",
        "RoomsReleased",
        "HoldLapsed",
        "ReservationCancelled",
        "DatesChanged",
        "HoldExpired",
    ] {
        assert!(
            events.iter().any(|e| e == kind),
            "no {kind} in the workload: {events:?}"
        );
    }
    assert!(incremental["reservations_view"].len() > 20);
    assert!(!incremental["occupancy_confirmations"].is_empty());
    // The incremental occupancy agrees with the write side.
    let occupancy = occupancy_rows(&db.pool).await;
    for ((_, _, night), written) in night_rows(&db.pool).await {
        let row = &occupancy[&night];
        assert_eq!(
            (row.confirmed, row.held),
            (written.confirmed, written.held),
            "{night}"
        );
    }

    // Rebuild both from position zero, in one big batch each (several events of each
    // stream per batch), while the runners keep running.
    let total_events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    for name in [ProjectionName::ReservationsView, ProjectionName::Occupancy] {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        let generation = workers::rebuild(&db.pool, None, name, 1_000, move |applied, total| {
            seen.lock().expect("progress").push((applied, total));
        })
        .await
        .unwrap_or_else(|e| panic!("rebuild {name}: {e:#}"));
        assert_eq!(generation, 2, "{name}");
        assert_eq!(
            served_generation(&db.pool, name.as_str())
                .await
                .expect("gen"),
            2
        );
        let calls = calls.lock().expect("progress").clone();
        let last = calls.last().copied().expect("progress was reported");
        assert_eq!(
            last,
            (total_events as u64, total_events as u64),
            "{name} progress"
        );
    }
    let rebuilt = generation_rows(&db.pool, 2).await;
    for (table, rows) in &incremental {
        assert_eq!(
            &rebuilt[table], rows,
            "{table}: the rebuilt generation differs from the incremental one"
        );
    }
    let old = generation_rows(&db.pool, 1).await;
    assert!(
        old.values().all(Vec::is_empty),
        "the old generation is cleared"
    );

    // The running runners moved to the new generation and keep it current.
    let late = svc
        .hold(
            "web",
            "web",
            key("after the rebuild"),
            hold_request(stay(d(14), d(15)), 1, 999),
        )
        .await
        .expect("hold after rebuild");
    wait_caught_up(&db.pool).await;
    let in_view: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM reservations_view WHERE generation = 2 AND reservation_id = $1)",
    )
    .bind(late.reservation_id)
    .fetch_one(&db.pool)
    .await
    .expect("view");
    assert!(
        in_view,
        "the runner applies new events to the rebuilt generation"
    );
    let occupancy = occupancy_rows(&db.pool).await;
    for ((_, _, night), written) in night_rows(&db.pool).await {
        let row = &occupancy[&night];
        assert_eq!(
            (row.confirmed, row.held),
            (written.confirmed, written.held),
            "{night}"
        );
    }
    assert!(generation_rows(&db.pool, 1)
        .await
        .values()
        .all(Vec::is_empty));

    runners.stop().await;
    db.drop_database().await;
}

/// The whole log of [`booking_workload`] on `db`, in one read.
async fn workload_log(db: &TestDb) -> Vec<projections::StoredEvent> {
    let clock = ManualClock::new(chrono::Utc::now());
    let svc = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock.clone()));
    booking_workload(&svc, &clock).await;
    wait_visible(&db.pool).await;
    let mut conn = db.pool.acquire().await.expect("connection");
    let events = projections::log::read_after(&mut conn, projections::Checkpoint::START, 10_000)
        .await
        .expect("the log");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(events.len() as i64, stored, "the whole log in one batch");
    events
}

#[tokio::test]
async fn occupancy_applied_event_by_event_equals_occupancy_applied_at_once() {
    // Arrange: the whole log of a workload with holds, confirmations, lapses and
    // cancellations. Batches of one event send every hold down the path that adds it
    // to its night's row without reading it; one batch of everything folds them.
    let db = TestDb::new().await;
    let events = workload_log(&db).await;
    let apply = |generation: i32, batch: &[projections::StoredEvent]| {
        let pool = db.pool.clone();
        let batch = batch.to_vec();
        async move {
            let mut tx = pool.begin().await.expect("tx");
            Occupancy
                .apply(&mut tx, generation, &batch)
                .await
                .expect("occupancy");
            tx.commit().await.expect("commit");
        }
    };

    // Act
    apply(11, &events).await;
    for event in &events {
        apply(12, std::slice::from_ref(event)).await;
    }
    // And the holds of the second half again, one by one: already applied.
    for event in &events[events.len() / 2..] {
        apply(12, std::slice::from_ref(event)).await;
    }

    // Assert
    let at_once = generation_rows(&db.pool, 11).await;
    let one_by_one = generation_rows(&db.pool, 12).await;
    assert!(!at_once["occupancy_daily"].is_empty());
    assert_eq!(at_once["occupancy_daily"], one_by_one["occupancy_daily"]);
    assert_eq!(
        at_once["occupancy_confirmations"],
        one_by_one["occupancy_confirmations"]
    );
    let held: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(holds_placed), 0)::bigint FROM occupancy_daily WHERE generation = 12",
    )
    .fetch_one(&db.pool)
    .await
    .expect("sum");
    assert!(held > 0, "the workload placed holds");
    db.drop_database().await;
}

#[tokio::test]
async fn applying_a_batch_again_changes_nothing() {
    let db = TestDb::new().await;
    let events = workload_log(&db).await;
    let generation = 7;
    let apply = |batch: Vec<projections::StoredEvent>| {
        let pool = db.pool.clone();
        async move {
            let mut tx = pool.begin().await.expect("tx");
            ReservationsView
                .apply(&mut tx, generation, &batch)
                .await
                .expect("view");
            Occupancy
                .apply(&mut tx, generation, &batch)
                .await
                .expect("occupancy");
            tx.commit().await.expect("commit");
        }
    };

    apply(events.clone()).await;
    let once = generation_rows(&db.pool, generation).await;
    // The whole log again, and then its second half again.
    apply(events.clone()).await;
    apply(events[events.len() / 2..].to_vec()).await;
    let again = generation_rows(&db.pool, generation).await;

    assert!(!once["occupancy_daily"].is_empty());
    assert_eq!(once, again);
    // What one pass produced is what the workload did.
    let nights: BTreeMap<NaiveDate, (i64, i64, i64)> =
        sqlx::query_as::<_, (NaiveDate, i64, i64, i64)>(
            "SELECT night, revenue_cents, holds_lapsed, cancellations FROM occupancy_daily
          WHERE generation = $1",
        )
        .bind(generation)
        .fetch_all(&db.pool)
        .await
        .expect("rows")
        .into_iter()
        .map(|(n, r, l, c)| (n, (r, l, c)))
        .collect();
    let expected: BTreeMap<NaiveDate, (i64, i64, i64)> = expected_nights()
        .into_iter()
        .map(|(n, e)| (n, (e.2, e.4, e.5)))
        .collect();
    assert_eq!(nights, expected);
    // Clearing a generation removes exactly its rows.
    ReservationsView
        .clear(&mut db.pool.acquire().await.expect("conn"), generation)
        .await
        .expect("clear");
    Occupancy
        .clear(&mut db.pool.acquire().await.expect("conn"), generation)
        .await
        .expect("clear");
    assert!(generation_rows(&db.pool, generation)
        .await
        .values()
        .all(Vec::is_empty));
    db.drop_database().await;
}

#[tokio::test]
async fn the_cli_rebuilds_a_projection_and_reports_status() {
    let db = TestDb::new().await;
    let clock = ManualClock::new(chrono::Utc::now());
    let svc = db.service_with_clock(Strategy::Pessimistic, Arc::new(clock.clone()));
    booking_workload(&svc, &clock).await;
    wait_visible(&db.pool).await;
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_reservations"))
            .args(args)
            .env("DATABASE_URL", &db.url)
            .output()
            .expect("run the binary")
    };

    let rebuilt = cli(&["projections", "rebuild", "occupancy", "--batch-size", "4"]);
    let status = cli(&["projections", "status"]);
    let unknown = cli(&["projections", "rebuild", "nonsense"]);

    let stdout = String::from_utf8_lossy(&rebuilt.stdout);
    assert!(
        rebuilt.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    assert!(
        stdout.contains("occupancy: generation 2 is now served"),
        "{stdout}"
    );
    assert_eq!(
        served_generation(&db.pool, OCCUPANCY).await.expect("gen"),
        2
    );
    assert_eq!(occupancy_rows(&db.pool).await.len(), 11);
    let listing = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{listing}");
    let line = |name: &str| {
        listing
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} not in {listing}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // occupancy: generation 2, nothing behind; reservations_view never ran: all behind.
    assert_eq!(line("occupancy")[1], "2");
    assert_eq!(line("occupancy")[3], "0");
    assert_eq!(line("reservations_view")[1], "-");
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(line("reservations_view")[3], total.to_string());
    assert!(!unknown.status.success());
    let complaint = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        complaint.contains("reservations_view") && complaint.contains("occupancy"),
        "{complaint}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn the_views_load_probes_its_primary_key_on_a_table_never_analyzed() {
    // Arrange: a view of 5,000 reservations that no ANALYZE has seen (as on a fresh
    // database, or one whose autovacuum is off or behind).
    let db = TestDb::new().await;
    let mut conn = db.pool.acquire().await.expect("connection");
    sqlx::query(
        "INSERT INTO reservations_view (generation, reservation_id, hotel_id, room_type_id,
                start_date, end_date, rooms, status, guest_name, guest_email, channel,
                total_cents, hold_expires_at, created_at, updated_at, version)
         SELECT 1, gen_random_uuid(), 1 + n % 50, 1, DATE '2027-01-01' + n % 60,
                DATE '2027-01-03' + n % 60, 1, 'held', 'Guest', 'g' || n || '@example.com',
                'web', 20000, now(), now(), now(), 1
           FROM generate_series(1, 5000) AS n",
    )
    .execute(&mut *conn)
    .await
    .expect("fill the view");
    let ids: Vec<Uuid> =
        sqlx::query_scalar("SELECT reservation_id FROM reservations_view LIMIT 40")
            .fetch_all(&mut *conn)
            .await
            .expect("some ids");
    let literal = format!(
        "ARRAY[{}]::uuid[]",
        ids.iter()
            .map(|id| format!("'{id}'"))
            .collect::<Vec<_>>()
            .join(",")
    );
    sqlx::query(&format!(
        "PREPARE load_view_rows(int, uuid[]) AS {LOAD_VIEW_ROWS}"
    ))
    .execute(&mut *conn)
    .await
    .expect("prepare the load");

    // Act: the plans PostgreSQL would use, generic (after a few calls) and custom.
    let plans =
        generic_and_custom_plans(&mut conn, "load_view_rows", &format!("1, {literal}")).await;
    let found: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM ({}) loaded",
        LOAD_VIEW_ROWS.replace("$1", "1").replace("$2", &literal)
    ))
    .fetch_one(&mut *conn)
    .await
    .expect("run the load");

    // Assert: each id is a probe of the primary key, never a scan of the generation.
    for (mode, plan) in &plans {
        assert!(
            plan.contains("reservations_view_pkey")
                && !plan.contains("Seq Scan on reservations_view")
                && !plan.contains("by_hotel_date"),
            "{mode}:\n{plan}"
        );
    }
    assert_eq!(found, 40);
    drop(conn);
    db.drop_database().await;
}

#[tokio::test]
async fn an_event_of_a_type_this_build_does_not_know_fails_each_projection_naming_it() {
    // Arrange: a night stream whose second event is of a type no RoomNightEvent has.
    let db = TestDb::new().await;
    let stream = aggregates::RoomNightKey::new(hotel_id(), king(), day(10)).stream_id();
    for (sequence, payload) in [
        (
            1,
            serde_json::json!({"InventorySet": {
                "key": {"hotel_id": hotel_id().get(), "room_type_id": king().get(),
                        "night": day(10)},
                "total_rooms": 5, "overbooking_allowance": 0, "rate_cents": 10_000}}),
        ),
        (2, serde_json::json!({"RoomsTeleported": {"rooms": 1}})),
    ] {
        let event_type = payload
            .as_object()
            .and_then(|o| o.keys().next())
            .cloned()
            .expect("tagged");
        sqlx::query(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type,
                                 event_version, payload, metadata)
             VALUES ($1, $2, $3, $4, '1.0', $5, '{}')",
        )
        .bind(aggregates::AggregateType::RoomNight.as_str())
        .bind(&stream)
        .bind(sequence)
        .bind(event_type)
        .bind(payload)
        .execute(&db.pool)
        .await
        .expect("insert");
    }
    wait_visible(&db.pool).await;
    let mut conn = db.pool.acquire().await.expect("connection");
    let events = projections::log::read_after(&mut conn, projections::Checkpoint::START, 100)
        .await
        .expect("the log");
    drop(conn);
    assert_eq!(events.len(), 2);

    // Act
    let mut tx = db.pool.begin().await.expect("tx");
    let occupancy = Occupancy.apply(&mut tx, 1, &events).await;
    let view = ReservationsView.apply(&mut tx, 1, &events).await;
    tx.rollback().await.expect("rollback");

    // Assert: neither skips it; each fails the batch and says which event it cannot read.
    for (name, result) in [(OCCUPANCY, occupancy), (RESERVATIONS_VIEW, view)] {
        let error = result.expect_err(name).to_string();
        assert!(error.contains(name), "{error}");
        assert!(error.contains("RoomsTeleported"), "{error}");
        assert!(error.contains(&stream), "{error}");
    }
    db.drop_database().await;
}

/// Hotel 812 with 3 king rooms on 5 nights from day 10, plan 2 (non-refundable) selling
/// them, and two holds by Ana: `planned` (days 10..12, plan 2, 2 guests) and `base`
/// (days 11..13, the base rate).
async fn planned_and_base_holds(app: &TestApp) -> (Uuid, Uuid) {
    app.seed_hotel(day(10), 5, 3).await;
    app.put_json(
        &format!("/v1/hotels/{HOTEL}/rate-plans/2"),
        Some(ADMIN),
        &serde_json::json!({"name": "Non-refundable", "room_type_ids": [KING],
                            "cancellation_policy": {"refundable": false}}),
    )
    .await
    .assert_status(200);
    let mut planned = hold_body(day(10), day(12), 1);
    planned["rate_plan_id"] = 2.into();
    planned["guests"] = 2.into();
    let planned = app.hold_ok(WEB, "planned", &planned).await;
    let base = app
        .hold_ok(WEB, "base", &hold_body(day(11), day(13), 1))
        .await;
    let id = |s: String| s.parse::<Uuid>().expect("uuid");
    (id(planned), id(base))
}

/// The house policy as the API shows it.
fn house_policy() -> Value {
    serde_json::json!({"refundable": true, "full_refund_hours": 72,
                       "partial_refund_hours": 24, "partial_refund_percent": 50})
}

/// The listed reservation `id` of `reply`.
fn listed(reply: &Reply, id: Uuid) -> Value {
    reply.json["reservations"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["reservation_id"] == id.to_string()))
        .cloned()
        .unwrap_or_else(|| panic!("{id} not listed in {}", reply.text))
}

#[tokio::test]
async fn a_reservation_held_under_a_plan_lists_with_its_plan_policy_and_guests() {
    let app = spawn_app().await;
    let (planned, base) = planned_and_base_holds(&app).await;
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;

    let reply = app
        .get("/v1/reservations?guest_email=ana@example.com", Some(WEB))
        .await;

    reply.assert_status(200);
    let sold = |id| {
        let row = listed(&reply, id);
        (
            row["rate_plan_id"].clone(),
            row["cancellation_policy"].clone(),
            row["guests"].clone(),
        )
    };
    assert_eq!(
        sold(planned),
        (2.into(), serde_json::json!({"refundable": false}), 2.into())
    );
    assert_eq!(sold(base), (Value::Null, house_policy(), 1.into()));
    // As the write side answers for each.
    for id in [planned, base] {
        let direct = app.get_reservation(WEB, &id.to_string()).await;
        let row = listed(&reply, id);
        for field in ["rate_plan_id", "cancellation_policy", "guests"] {
            assert_eq!(row[field], direct.json[field], "{field} of {id}");
        }
    }
    runners.stop().await;
    app.finish().await;
}

#[tokio::test]
async fn the_migration_fills_the_plans_of_rows_written_before_it() {
    let app = spawn_app().await;
    let (planned, base) = planned_and_base_holds(&app).await;
    // A stay recorded before plans and guests existed: its event has none of the three.
    let legacy = Uuid::new_v4();
    let mut payload = serde_json::to_value(aggregates::ReservationEvent::ReservationHeld(
        aggregates::ReservationDetails {
            more_lines: Vec::new(),
            reservation_id: ReservationId::from_uuid(legacy),
            hotel_id: hotel_id(),
            room_type_id: king(),
            stay: stay(day(12), day(13)),
            rooms: aggregates::RoomCount::parse(1).expect("rooms"),
            guest: aggregates::Personal::Clear(guest(9)),
            channel: "web".to_owned(),
            total_cents: aggregates::Cents::new(18_000),
            hold_expires_at: chrono::Utc::now() + Duration::minutes(15),
            created_at: chrono::Utc::now(),
            rate_plan_id: None,
            cancellation_policy: aggregates::cancellation::CancellationPolicy::HOUSE,
            guests: aggregates::GuestCount::ONE,
            first_night_cents: None,
            currency: aggregates::Currency::EUR,
            taxes: aggregates::taxes::Taxes::default(),
            block_code: None,
        },
    ))
    .expect("json");
    if let Some(held) = payload["ReservationHeld"].as_object_mut() {
        held.remove("cancellation_policy");
        // Its guest in the clear, untagged, as events before sealing stored it.
        let clear = held["guest"]["clear"].clone();
        held.insert("guest".into(), clear);
    }
    sqlx::query(
        "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version,
                             payload, metadata)
         VALUES ('reservation', $1, 1, 'ReservationHeld', '1.0', $2, '{}')",
    )
    .bind(format!("{HOTEL}:{legacy}"))
    .bind(&payload)
    .execute(&app.db.pool)
    .await
    .expect("a legacy hold");
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    runners.stop().await;
    // The view as the build before the migration left it, the migration not yet run.
    for sql in [
        "ALTER TABLE reservations_view DROP COLUMN rate_plan_id, DROP COLUMN guests,
             DROP COLUMN cancellation_policy",
        "DELETE FROM _sqlx_migrations WHERE version = 20261201000013",
    ] {
        sqlx::query(sql)
            .execute(&app.db.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    store::db::MIGRATOR
        .run(&app.db.pool)
        .await
        .expect("migration 13 runs again");

    let rows: BTreeMap<Uuid, (Option<i64>, i32, Option<Value>)> = sqlx::query_as::<
        _,
        (Uuid, Option<i64>, i32, Option<Value>),
    >(
        "SELECT reservation_id, rate_plan_id, guests, cancellation_policy FROM reservations_view",
    )
    .fetch_all(&app.db.pool)
    .await
    .expect("rows")
    .into_iter()
    .map(|(id, plan, guests, policy)| (id, (plan, guests, policy)))
    .collect();
    assert_eq!(
        rows.get(&planned),
        Some(&(Some(2), 2, Some(serde_json::json!("NonRefundable"))))
    );
    assert_eq!(
        rows.get(&base).map(|r| (r.0, r.1, r.2.is_some())),
        Some((None, 1, true))
    );
    assert_eq!(rows.get(&legacy), Some(&(None, 1, None)));
    let reply = app.get("/v1/reservations", Some(ADMIN)).await;
    assert_eq!(
        listed(&reply, planned)["cancellation_policy"],
        serde_json::json!({"refundable": false})
    );
    assert_eq!(listed(&reply, base)["cancellation_policy"], house_policy());
    assert_eq!(
        listed(&reply, legacy)["cancellation_policy"],
        house_policy()
    );
    assert_eq!(listed(&reply, legacy)["guests"], 1);
    app.finish().await;
}

#[tokio::test]
async fn every_reservation_reads_its_own_short_reference_and_is_found_by_it_as_a_person_types_it() {
    // Arrange: the HTTP server and a second command service on the same database (as a
    // second server would be), each with its own block of reference numbers.
    let app = Arc::new(spawn_app().await);
    app.seed_hotel(day(10), 5, 100).await;
    let other = Arc::new(CommandService::with_clock(
        app.db.pool.clone(),
        config(Strategy::Group),
        Arc::new(app.clock.clone()),
    ));

    // Act: forty holds at once, half through each.
    let mut tasks = Vec::new();
    for n in 0..40u64 {
        let app = app.clone();
        let other = other.clone();
        tasks.push(tokio::spawn(async move {
            if n % 2 == 0 {
                app.hold_ok(WEB, &format!("ref-{n}"), &hold_body(day(10), day(12), 1))
                    .await
            } else {
                let request = hold_request(stay(day(10), day(12)), 1, n as usize);
                other
                    .hold("web", "web", key(&format!("ref-{n}")), request)
                    .await
                    .unwrap_or_else(|e| panic!("hold {n}: {e}"))
                    .reservation_id
                    .to_string()
            }
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("task"));
    }
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;

    // Assert: each answer's reference is 8 characters of the alphabet, the one its id
    // ends in, and no two are alike.
    let mut references = std::collections::BTreeSet::new();
    for id in &ids {
        let reply = app.get_reservation(WEB, id).await;
        let reference = reply.str("reference");
        assert!(
            reference.len() == 8
                && reference
                    .chars()
                    .all(|c| c.is_ascii_digit() || "ABCDEFGHJKMNPQRSTVWXYZ".contains(c)),
            "{reference}"
        );
        let parsed = ReservationId::parse(id).expect("id");
        assert_eq!(parsed.reference().to_string(), reference);
        references.insert(reference);
    }
    assert_eq!(references.len(), ids.len(), "{references:?}");

    // Found by it: lower case, with a hyphen, O for 0, by the channel and by staff.
    let (id, reference) = (
        &ids[3],
        app.get_reservation(WEB, &ids[3]).await.str("reference"),
    );
    let typed = format!("{}-{}", &reference[..4], &reference[4..])
        .to_lowercase()
        .replace('0', "o");
    for token in [WEB, ADMIN] {
        let found = app
            .get(&format!("/v1/reservations?reference={typed}"), Some(token))
            .await;
        assert_eq!(ids_of(&found), vec![id.clone()], "{}", found.text);
        assert_eq!(
            found.json["reservations"][0]["reference"],
            reference.as_str()
        );
    }
    // Another channel's reservation is not found by its reference.
    let mobile = app
        .get(
            &format!("/v1/reservations?reference={reference}"),
            Some(MOBILE),
        )
        .await;
    assert_eq!(ids_of(&mobile), Vec::<String>::new(), "{}", mobile.text);
    // A reference nobody has finds nothing; one that cannot be a reference is refused.
    let nobody = app
        .get("/v1/reservations?reference=ZZZZZZZZ", Some(ADMIN))
        .await;
    assert_eq!(ids_of(&nobody), Vec::<String>::new(), "{}", nobody.text);
    for bad in ["K7M29QX", "K7M29QXU", "K7M29QXD9"] {
        let refused = app
            .get(&format!("/v1/reservations?reference={bad}"), Some(ADMIN))
            .await;
        let error = refused.assert_error(422, "invalid_request");
        assert_eq!(error["field"], "reference", "{bad}: {}", refused.text);
    }
    runners.stop().await;
    if let Ok(app) = Arc::try_unwrap(app) {
        app.finish().await;
    }
}

/// The reservation ids a list answer names, in its order.
fn ids_of(reply: &Reply) -> Vec<String> {
    reply.json["reservations"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| r["reservation_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
