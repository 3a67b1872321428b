//! The payment saga over HTTP, against the simulated provider: approve, decline,
//! timeout then webhook, duplicate and out-of-order webhooks, a payment after the hold
//! lapsed (refunded, not resurrected), refunds at 100/50/0% and by the hotel, the
//! webhook's signature, recovery after a crash, the expiry sweeper, and 50 concurrent
//! confirm / cancel / webhook calls on one reservation.

use std::collections::BTreeMap;
use std::sync::Arc;

use aggregates::booking::check_in_instant;
use app::payments::gateway::{authorization_key, AuthorizeRequest, PaymentGateway, PaymentToken};
use app::payments::simulated::SimulatedConfig;
use app::sweeper::sweep_once;
use chrono::Duration;
use serde_json::{json, Value};

use crate::support::*;

/// A hotel with `rooms` king rooms on nights 10..15 and one 3-night hold (10..13) by
/// the web channel: (app, reservation id, total).
async fn held_stay(rooms: i64) -> (TestApp, String, i64) {
    held_stay_with(spawn_app().await, rooms).await
}

/// [`held_stay`] confirmed with a card that authorizes: (app, reservation id).
async fn paid_stay(rooms: i64) -> (TestApp, String) {
    let (app, id, _) = held_stay(rooms).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    (app, id)
}

/// The instant of `minutes` past midnight on `date` in Lisbon, the stays' hotel's time.
fn in_lisbon(date: chrono::NaiveDate, minutes: i64) -> chrono::DateTime<chrono::Utc> {
    let lisbon = aggregates::types::TimeZone::parse("Europe/Lisbon").expect("valid");
    let check_in = i64::from(aggregates::booking::CHECK_IN_HOUR);
    check_in_instant(date, lisbon) + Duration::minutes(minutes - check_in * 60)
}

async fn held_stay_with(app: TestApp, rooms: i64) -> (TestApp, String, i64) {
    app.seed_hotel(day(10), 5, rooms).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(13), 1))
        .await;
    (app, id, 3 * RATE)
}

async fn event_types(app: &TestApp, id: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT event_type FROM events WHERE aggregate_id LIKE '%' || $1 ORDER BY sequence",
    )
    .bind(id)
    .fetch_all(&app.db.pool)
    .await
    .expect("events")
}

fn count(types: &[String], name: &str) -> usize {
    types.iter().filter(|t| *t == name).count()
}

/// The provider transaction that authorized `id` (from the simulated provider's ledger).
fn authorized_txn(app: &TestApp, id: &str) -> String {
    app.gateway
        .ledger()
        .into_iter()
        .find(|e| e.reference == id && e.operation == "authorize")
        .map(|e| e.provider_txn_id)
        .expect("an authorization in the ledger")
}

async fn status_of(app: &TestApp, id: &str) -> String {
    app.get_reservation(WEB, id).await.assert_status(200)["status"]
        .as_str()
        .expect("status")
        .to_owned()
}

#[tokio::test]
async fn paying_with_an_approved_card_confirms_every_night_and_captures_once() {
    let (app, id, total) = held_stay(2).await;

    let reply = app.confirm(WEB, "pay-1", &id, "tok_ok").await;

    let body = reply.assert_status(200);
    assert_eq!(body["status"], "confirmed");
    // Authorized, not captured: nothing is taken before the policy's deadline.
    assert_eq!(body["paid_cents"], 0);
    assert_eq!(
        body["payment"],
        json!({"status": "authorized", "authorized_cents": total, "to_capture_cents": total,
               "captured_cents": 0, "refunded_cents": 0})
    );
    let confirmed: i64 = sqlx::query_scalar("SELECT sum(confirmed) FROM room_nights")
        .fetch_one(&app.db.pool)
        .await
        .expect("sum");
    assert_eq!(confirmed, 3, "every night confirmed");
    assert_eq!(app.gateway.count(&id, "authorize"), 1);
    let replay = app.confirm(WEB, "pay-1", &id, "tok_ok").await;
    assert_eq!(replay.text, reply.text, "a replay is the first response");
    let again = app.confirm(WEB, "pay-2", &id, "tok_ok").await;
    assert_eq!(again.assert_status(200)["status"], "confirmed");
    let delivered = app.payments.deliver_outbox(100).await.expect("outbox");
    assert_eq!(delivered.done, 0);
    assert_eq!(app.capture_due().await, 0, "not due before the deadline");
    assert_eq!(app.gateway.count(&id, "capture"), 0);
    // At the deadline (72 hours before check-in, the house policy) the worker takes
    // it, once.
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(72));
    assert_eq!(app.capture_due().await, 1);
    assert_eq!(app.capture_due().await, 0);
    assert_eq!(app.gateway.count(&id, "authorize"), 1, "authorized once");
    assert_eq!(app.gateway.count(&id, "capture"), 1, "captured once");
    let payment = &app.get_reservation(WEB, &id).await.json["payment"];
    assert_eq!(payment["status"], "captured", "{payment}");
    assert_eq!(payment["captured_cents"], total);
    assert_eq!(
        count(&event_types(&app, &id).await, "ReservationConfirmed"),
        1
    );
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn a_declined_card_is_402_and_releases_every_night() {
    let (app, id, _) = held_stay(2).await;

    let reply = app.confirm(WEB, "pay", &id, "tok_decline").await;

    let body = reply.assert_error(402, "payment_declined");
    assert_eq!(body["status"], "declined");
    assert_eq!(status_of(&app, &id).await, "declined");
    for d in 10..13 {
        assert_eq!(app.taken(day(d)).await, 0, "night {d} back on sale");
    }
    assert_eq!(app.gateway.count(&id, "authorize"), 0);
    let replay = app.confirm(WEB, "pay", &id, "tok_decline").await;
    assert_eq!(replay.text, reply.text);
    app.cancel(WEB, "cancel", &id, &json!({}))
        .await
        .assert_error(409, "invalid_state");
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn confirming_a_lapsed_hold_is_409_hold_expired_and_charges_nothing() {
    let (app, id, _) = held_stay(2).await;
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));

    let reply = app.confirm(WEB, "pay", &id, "tok_ok").await;

    reply.assert_error(409, "hold_expired");
    assert!(
        app.gateway.ledger().is_empty(),
        "the gateway was not called"
    );
    app.finish().await;
}

#[tokio::test]
async fn a_slow_provider_answers_202_and_the_webhook_confirms_later() {
    let (app, id, total) = held_stay(2).await;

    let reply = app.confirm(WEB, "pay", &id, "tok_timeout").await;

    let body = reply.assert_status(202);
    assert_eq!(body["status"], "held");
    assert_eq!(app.gateway.release_webhooks().await, 1);
    let now = app.get_reservation(WEB, &id).await;
    assert_eq!(now.json["status"], "confirmed");
    assert_eq!(now.json["payment"]["authorized_cents"], total);
    assert_eq!(now.json["payment"]["to_capture_cents"], total);
    let replay = app.confirm(WEB, "pay", &id, "tok_timeout").await;
    assert_eq!(
        replay.status.as_u16(),
        202,
        "replays give the first response"
    );
    assert_eq!(app.gateway.count(&id, "authorize"), 1);
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn a_repeated_webhook_is_acknowledged_and_changes_nothing() {
    let (app, id, total) = held_stay(2).await;
    app.confirm(WEB, "pay", &id, "tok_timeout")
        .await
        .assert_status(202);
    app.gateway.release_webhooks().await;
    let txn = authorized_txn(&app, &id);
    let events_before = app.count("events").await;
    let notice = json!({"provider_txn_id": txn, "reservation_id": id,
        "status": "authorized", "amount_cents": total});

    let first = app.webhook(&notice).await;
    let second = app.webhook(&notice).await;

    assert_eq!(first.assert_status(200)["result"], "duplicate");
    assert_eq!(second.assert_status(200)["result"], "duplicate");
    assert_eq!(app.count("events").await, events_before);
    assert_eq!(status_of(&app, &id).await, "confirmed");
    app.finish().await;
}

#[tokio::test]
async fn a_webhook_that_overtakes_the_request_confirms_and_the_request_agrees() {
    let (app, id, total) = held_stay(2).await;
    // The provider authorized (under the saga's key) and its webhook arrives before
    // the request that asked for it has even reached the server.
    let authorization = app
        .gateway
        .authorize(AuthorizeRequest {
            currency: aggregates::Currency::EUR,
            idempotency_key: authorization_key(id.parse().expect("uuid")),
            token: PaymentToken::parse("tok_ok").expect("token"),
            amount_cents: total,
            reference: id.clone(),
        })
        .await
        .expect("authorized");
    let hook = app
        .webhook(&json!({"provider_txn_id": authorization.provider_txn_id,
            "reservation_id": id, "status": "authorized", "amount_cents": total}))
        .await;
    assert_eq!(hook.assert_status(200)["result"], "confirmed");

    let reply = app.confirm(WEB, "pay", &id, "tok_ok").await;

    assert_eq!(reply.assert_status(200)["status"], "confirmed");
    app.payments.deliver_outbox(100).await.expect("outbox");
    assert_eq!(app.gateway.count(&id, "authorize"), 1);
    assert_eq!(
        app.gateway.count(&id, "capture"),
        0,
        "captured at the deadline"
    );
    assert_eq!(app.gateway.count(&id, "void"), 0);
    assert_eq!(
        count(&event_types(&app, &id).await, "ReservationConfirmed"),
        1
    );
    app.finish().await;
}

#[tokio::test]
async fn webhooks_delivered_three_times_in_random_order_confirm_each_stay_once() {
    let app = spawn_app_configured(
        |_| {},
        SimulatedConfig {
            webhook_copies: 3,
            shuffle_webhooks: true,
            ..test_gateway()
        },
    )
    .await;
    app.seed_hotel(day(10), 5, 10).await;
    let mut ids = Vec::new();
    for n in 0..6 {
        let id = app
            .hold_ok(WEB, &format!("hold-{n}"), &hold_body(day(10), day(12), 1))
            .await;
        let token = if n % 2 == 0 { "tok_timeout" } else { "tok_ok" };
        app.confirm(WEB, &format!("pay-{n}"), &id, token).await;
        ids.push(id);
    }

    let delivered = app.gateway.release_webhooks().await;

    assert_eq!(delivered, 18, "6 webhooks x 3 copies acknowledged");
    for id in &ids {
        assert_eq!(status_of(&app, id).await, "confirmed");
        let types = event_types(&app, id).await;
        assert_eq!(count(&types, "ReservationConfirmed"), 1, "{id}: {types:?}");
        assert_eq!(count(&types, "LatePaymentRefunded"), 0, "{id}: {types:?}");
        assert_eq!(app.gateway.count(id, "authorize"), 1);
    }
    assert_eq!(app.count("payment_webhooks").await, 6);
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn a_payment_after_the_hold_lapsed_is_refunded_and_the_nights_stay_sold_to_the_next_guest() {
    let (app, id, _) = held_stay(1).await;
    app.confirm(WEB, "pay", &id, "tok_timeout")
        .await
        .assert_status(202);
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));
    let next = app
        .hold_ok(MOBILE, "next-guest", &hold_body(day(10), day(13), 1))
        .await;

    app.gateway.release_webhooks().await;

    assert_eq!(status_of(&app, &id).await, "expired");
    let types = event_types(&app, &id).await;
    assert_eq!(count(&types, "ReservationConfirmed"), 0, "{types:?}");
    assert_eq!(count(&types, "LatePaymentRefunded"), 1, "{types:?}");
    assert_eq!(
        app.get_reservation(MOBILE, &next).await.json["status"],
        "held",
        "the next guest keeps the room"
    );
    app.payments.deliver_outbox(100).await.expect("outbox");
    assert_eq!(
        app.gateway.count(&id, "void"),
        1,
        "the authorization is given back"
    );
    assert_eq!(app.gateway.count(&id, "capture"), 0);
    let body = app.confirm(WEB, "pay", &id, "tok_timeout").await;
    assert_eq!(
        body.status.as_u16(),
        202,
        "a replay is still the first response"
    );
    app.confirm(WEB, "pay-again", &id, "tok_ok")
        .await
        .assert_error(409, "hold_expired");
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

/// Confirms a paid stay, then cancels it with `token` when `hours` remain before
/// check-in; returns the refund the response states and the refund the provider made.
async fn refund_when_cancelled(token: &'static str, hours: i64) -> (i64, i64, i64) {
    let (app, id, total) = held_stay(2).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(hours));
    // The capture worker has run by then (from 72 hours before, the deadline).
    app.capture_due().await;

    let reply = app
        .cancel(token, "cancel", &id, &json!({"reason": "plans"}))
        .await;

    let body = reply.assert_status(200).clone();
    assert_eq!(body["status"], "cancelled");
    for d in 10..13 {
        assert_eq!(app.taken(day(d)).await, 0);
    }
    app.payments.deliver_outbox(100).await.expect("outbox");
    app.payments.deliver_outbox(100).await.expect("outbox");
    let refunded: i64 = app
        .gateway
        .ledger()
        .iter()
        .filter(|e| e.reference == id && e.operation == "refund")
        .map(|e| e.amount_cents)
        .sum();
    assert!(
        app.gateway.count(&id, "refund") <= 1,
        "refunded at most once"
    );
    assert_eq!(
        app.gateway.count(&id, "capture"),
        usize::from(hours <= 72),
        "captured from the deadline on"
    );
    app.finish().await;
    (
        body["refund_cents"].as_i64().expect("refund_cents"),
        refunded,
        total,
    )
}

#[tokio::test]
async fn cancelling_once_the_arrival_date_has_ended_at_the_hotel_is_409_and_changes_nothing() {
    // Arrange: a paid stay arriving on the 10th in Lisbon, and the clock at 00:30 on the
    // 11th there (the guest has arrived, or has not come)
    let (app, id) = paid_stay(2).await;
    app.clock.set(in_lisbon(day(11), 30));
    let before = app.snapshot().await;

    // Act
    let reply = app
        .cancel(WEB, "too-late", &id, &json!({"reason": "not coming"}))
        .await;

    // Assert: refused in the contract's shape, the stay and its nights untouched
    let error = reply.assert_error(409, "invalid_state");
    assert_eq!(error["arrival_date"], day(10).to_string(), "{error}");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(
        app.get_reservation(WEB, &id).await.json["status"],
        "confirmed"
    );
    app.finish().await;
}

#[tokio::test]
async fn staff_check_a_guest_in_on_the_arrival_date_and_out_early_giving_the_later_nights_back() {
    // Arrange: a paid stay of the 10th to the 13th in Lisbon
    let (app, id) = paid_stay(2).await;
    let before = app.snapshot().await;

    // Act + Assert: the day before arrival it is too early, for the channel it is not
    // allowed, and nothing changes either way
    let early = app.check_in(ADMIN, "check-in-early", &id).await;
    let error = early.assert_error(409, "too_early");
    assert_eq!(error["arrival_date"], day(10).to_string(), "{error}");
    app.check_in(WEB, "check-in-web", &id)
        .await
        .assert_error(403, "forbidden");
    assert_eq!(app.snapshot().await, before);

    // Act: at 16:00 on the arrival date
    app.clock.set(in_lisbon(day(10), 16 * 60));
    let checked_in = app.check_in(ADMIN, "check-in", &id).await;

    // Assert: checked in, its nights still sold; a cancellation and a second check-in
    // are refused
    let body = checked_in.assert_status(200);
    assert_eq!(body["status"], "checked_in", "{body}");
    for d in 10..13 {
        assert_eq!(app.taken(day(d)).await, 1);
    }
    app.cancel(WEB, "cancel", &id, &json!({}))
        .await
        .assert_error(409, "invalid_state");
    let again = app.check_in(ADMIN, "check-in-again", &id).await;
    assert_eq!(
        again.assert_error(409, "invalid_state")["status"],
        "checked_in"
    );
    assert_eq!(
        app.get_reservation(WEB, &id).await.json["status"],
        "checked_in"
    );
    assert_invariants_at(&app.db.pool, app.now()).await;

    // Act 2: the guest leaves on the morning of the 11th
    app.clock.set(in_lisbon(day(11), 10 * 60));
    let out = app.check_out(ADMIN, "check-out", &id).await;

    // Assert 2: the 12th is for sale again, the 10th and 11th stay sold; a second
    // check-out is refused and changes nothing
    assert_eq!(out.assert_status(200)["status"], "checked_out");
    assert_eq!(
        [
            app.taken(day(10)).await,
            app.taken(day(11)).await,
            app.taken(day(12)).await
        ],
        [1, 1, 0]
    );
    let after = app.snapshot().await;
    let again = app.check_out(ADMIN, "check-out-again", &id).await;
    assert_eq!(
        again.assert_error(409, "invalid_state")["status"],
        "checked_out"
    );
    assert_eq!(app.snapshot().await, after);
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

#[tokio::test]
async fn a_no_show_keeps_the_first_night_sold_and_gives_the_others_back() {
    // Arrange: a paid stay of the 10th to the 13th in Lisbon, its guest not come
    let (app, id) = paid_stay(2).await;
    let before = app.snapshot().await;
    app.no_show(ADMIN, "no-show-early", &id)
        .await
        .assert_error(409, "too_early");
    assert_eq!(app.snapshot().await, before);

    // Act: at 23:00 on the 10th
    app.clock.set(in_lisbon(day(10), 23 * 60));
    let reply = app.no_show(ADMIN, "no-show", &id).await;

    // Assert: the first night stays sold, the others are for sale again, the guest can
    // no longer be checked in
    assert_eq!(reply.assert_status(200)["status"], "no_show");
    assert_eq!(
        [
            app.taken(day(10)).await,
            app.taken(day(11)).await,
            app.taken(day(12)).await
        ],
        [1, 0, 0]
    );
    app.check_in(ADMIN, "late-arrival", &id)
        .await
        .assert_error(409, "invalid_state");
    // The first night is the fee: the authorization, never captured, is captured for
    // it alone (the rest released).
    app.deliver_payments().await;
    let payment = &app.get_reservation(WEB, &id).await.json["payment"];
    assert_eq!(payment["status"], "captured", "{payment}");
    assert_eq!(payment["captured_cents"], RATE);
    assert_eq!(captured_by_gateway(&app, &id), RATE);
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

/// What the simulated provider captured for reservation `id`, in cents.
fn captured_by_gateway(app: &TestApp, id: &str) -> i64 {
    app.gateway
        .ledger()
        .iter()
        .filter(|e| e.reference == id && e.operation == "capture")
        .map(|e| e.amount_cents)
        .sum()
}

#[tokio::test]
async fn the_no_show_worker_marks_unarrived_guests_once_the_arrival_date_and_its_grace_are_over() {
    // Arrange: two paid stays arriving on the 10th in Lisbon, one guest checked in; the
    // worker captured both at the deadline
    let (app, absent) = paid_stay(3).await;
    let arrived = app
        .hold_ok(WEB, "hold-2", &hold_body(day(10), day(13), 1))
        .await;
    app.confirm(WEB, "pay-2", &arrived, "tok_ok")
        .await
        .assert_status(200);
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(72));
    assert_eq!(app.capture_due().await, 2);
    app.clock.set(in_lisbon(day(10), 16 * 60));
    app.check_in(ADMIN, "check-in", &arrived)
        .await
        .assert_status(200);
    let grace = chrono::Duration::hours(4);

    // Act + Assert: at 02:00 on the 11th the grace is not over; nothing happens
    app.clock.set(in_lisbon(day(11), 2 * 60));
    assert_eq!(app.record_no_shows(grace).await, 0);
    assert_eq!(status_of(&app, &absent).await, "confirmed");

    // Act: at 04:00 the worker runs (twice, as two servers might)
    app.clock.set(in_lisbon(day(11), 4 * 60));
    assert_eq!(app.record_no_shows(grace).await, 1);
    assert_eq!(app.record_no_shows(grace).await, 0);

    // Assert: the absent guest is a no-show, keeping the first night (the rest
    // refunded); the guest who came is untouched
    assert_eq!(status_of(&app, &absent).await, "no_show");
    assert_eq!(status_of(&app, &arrived).await, "checked_in");
    let payment = &app.get_reservation(WEB, &absent).await.json["payment"];
    assert_eq!(
        *payment,
        json!({"status": "partially_refunded", "authorized_cents": 3 * RATE,
               "to_capture_cents": 0, "captured_cents": 3 * RATE, "refunded_cents": 2 * RATE})
    );
    let refunds: Vec<i64> = app
        .gateway
        .ledger()
        .iter()
        .filter(|e| e.reference == absent && e.operation == "refund")
        .map(|e| e.amount_cents)
        .collect();
    assert_eq!(refunds, vec![2 * RATE], "refunded once");
    assert_eq!(
        [app.taken(day(10)).await, app.taken(day(11)).await],
        [2, 1],
        "the no-show's later nights are for sale again"
    );
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

#[tokio::test]
async fn a_guest_cancelling_72_hours_before_check_in_is_refunded_in_full() {
    let (stated, refunded, total) = refund_when_cancelled(WEB, 72).await;
    assert_eq!((stated, refunded), (total, total));
}

#[tokio::test]
async fn a_guest_cancelling_before_the_capture_deadline_has_the_authorization_voided() {
    // Arrange: a stay paid for, four days before check-in
    let (app, id) = paid_stay(2).await;
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(100));
    app.capture_due().await;

    // Act
    let reply = app
        .cancel(WEB, "cancel", &id, &json!({"reason": "plans"}))
        .await;
    app.deliver_payments().await;

    // Assert: nothing was ever charged: the authorization is voided, not refunded, and
    // every answer says no money was returned (none was taken).
    let body = reply.assert_status(200);
    assert_eq!(body["payment"]["status"], "voided", "{body}");
    assert_eq!(body["payment"]["captured_cents"], 0);
    assert_eq!(body["refund_cents"], 0, "{body}");
    let view = app.get_reservation(WEB, &id).await;
    assert_eq!(view.assert_status(200)["refund_cents"], 0);
    let history = app.reservation_events(WEB, &id).await;
    let cancelled = history.assert_status(200)["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["type"] == "ReservationCancelled")
        .cloned()
        .expect("the cancellation in the history");
    assert_eq!(cancelled["data"]["refund_cents"], 0, "{cancelled}");
    assert_eq!(app.gateway.count(&id, "void"), 1);
    assert_eq!(app.gateway.count(&id, "capture"), 0);
    assert_eq!(app.gateway.count(&id, "refund"), 0);
    app.finish().await;
}

#[tokio::test]
async fn a_guest_cancelling_30_hours_before_check_in_is_refunded_half() {
    let (stated, refunded, total) = refund_when_cancelled(WEB, 30).await;
    assert_eq!((stated, refunded), (total / 2, total / 2));
}

#[tokio::test]
async fn a_guest_cancelling_10_hours_before_check_in_is_refunded_nothing() {
    let (stated, refunded, _) = refund_when_cancelled(WEB, 10).await;
    assert_eq!((stated, refunded), (0, 0));
}

#[tokio::test]
async fn a_hotel_cancelling_at_the_last_minute_refunds_in_full() {
    let (stated, refunded, total) = refund_when_cancelled(ADMIN, 1).await;
    assert_eq!((stated, refunded), (total, total));
}

#[tokio::test]
async fn cancelling_an_unpaid_hold_refunds_nothing() {
    let (app, id, _) = held_stay(2).await;

    let reply = app.cancel(WEB, "cancel", &id, &json!({})).await;

    assert_eq!(reply.assert_status(200)["refund_cents"], 0);
    assert_eq!(app.count("payment_outbox").await, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_webhook_without_the_right_signature_is_401_and_changes_nothing() {
    let (app, id, total) = held_stay(2).await;
    let body = json!({"provider_txn_id": "sim_x", "reservation_id": id,
        "status": "authorized", "amount_cents": total});
    let bytes = serde_json::to_vec(&body).expect("json");
    let before = app.snapshot().await;
    let cases: Vec<Option<String>> = vec![
        None,
        Some("00".repeat(32)),
        Some("not hex".into()),
        Some(app::payments::signature::sign(b"another secret", &bytes)),
        // signed over a different body
        Some(app::payments::signature::sign(
            WEBHOOK_SECRET.as_bytes(),
            b"{}",
        )),
    ];

    for signature in cases {
        let mut request = app
            .request(reqwest::Method::POST, "/v1/payments/webhook", None)
            .header("content-type", "application/json")
            .body(bytes.clone());
        if let Some(signature) = &signature {
            request = request.header("x-signature", signature);
        }
        app.send(request)
            .await
            .assert_error(401, "invalid_signature");
    }

    assert_eq!(app.snapshot().await, before);
    assert_eq!(app.count("payment_webhooks").await, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_signed_webhook_with_a_bad_body_is_4xx() {
    let (app, id, _) = held_stay(2).await;
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"provider_txn_id": "t1"}), 422, "invalid_request"),
        (
            json!({"provider_txn_id": "t1", "reservation_id": id, "status": "maybe", "amount_cents": 1}),
            422,
            "invalid_request",
        ),
        (
            json!({"provider_txn_id": "", "reservation_id": id, "status": "authorized", "amount_cents": 1}),
            422,
            "invalid_request",
        ),
        (
            json!({"provider_txn_id": "t1", "reservation_id": id, "status": "authorized", "amount_cents": -5}),
            422,
            "invalid_request",
        ),
        (
            json!({"provider_txn_id": "t1", "reservation_id": uuid::Uuid::new_v4(), "status": "authorized", "amount_cents": 1}),
            404,
            "not_found",
        ),
    ];
    let before = app.snapshot().await;

    for (body, status, code) in cases {
        app.webhook(&body).await.assert_error(status, code);
    }
    let bytes = b"{not json".to_vec();
    let signature = app::payments::signature::sign(WEBHOOK_SECRET.as_bytes(), &bytes);
    app.send(
        app.request(reqwest::Method::POST, "/v1/payments/webhook", None)
            .header("x-signature", signature)
            .body(bytes),
    )
    .await
    .assert_error(400, "malformed_json");

    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn without_a_webhook_secret_webhooks_are_refused() {
    let app = spawn_app_configured(|s| s.payment_webhook_secret = None, test_gateway()).await;

    let reply = app
        .webhook(
            &json!({"provider_txn_id": "t", "reservation_id": uuid::Uuid::new_v4(),
            "status": "authorized", "amount_cents": 1}),
        )
        .await;

    reply.assert_error(403, "webhook_disabled");
    app.finish().await;
}

#[tokio::test]
async fn confirm_refuses_bad_tokens_other_clients_and_unknown_reservations() {
    let (app, id, _) = held_stay(2).await;
    let before = app.snapshot().await;

    app.confirm(WEB, "a", &id, "card-4242")
        .await
        .assert_error(422, "invalid_request");
    app.confirm(WEB, "b", &id, "tok_")
        .await
        .assert_error(422, "invalid_request");
    app.confirm(MOBILE, "c", &id, "tok_ok")
        .await
        .assert_error(403, "forbidden");
    app.confirm(AUDITOR, "d", &id, "tok_ok")
        .await
        .assert_error(403, "forbidden");
    app.confirm(WEB, "e", &uuid::Uuid::new_v4().to_string(), "tok_ok")
        .await
        .assert_error(404, "not_found");
    app.post_json(
        &format!("/v1/reservations/{id}/confirm"),
        WEB,
        "f",
        &json!({}),
    )
    .await
    .assert_error(422, "invalid_request");

    assert_eq!(app.snapshot().await, before);
    assert!(app.gateway.ledger().is_empty());
    app.finish().await;
}

#[tokio::test]
async fn a_crash_between_authorize_and_confirm_is_finished_by_recovery_with_one_authorization() {
    let (app, id, _) = held_stay(2).await;
    let reservation = aggregates::ReservationId::parse(&id).expect("id");
    let token = PaymentToken::parse("tok_ok").expect("token");
    app.payments.crash_after_authorize(true);
    let crashed = app
        .payments
        .confirm(&web(), "scope", key("pay"), reservation, token.clone())
        .await;
    assert!(crashed.is_err(), "the injected crash stops the request");
    app.payments.crash_after_authorize(false);
    assert_eq!(status_of(&app, &id).await, "held");
    let retry = app
        .payments
        .confirm(&web(), "scope", key("pay"), reservation, token.clone())
        .await;
    assert!(
        matches!(retry, Err(store::error::CommandError::InFlight)),
        "the retry waits for the crashed request: {retry:?}"
    );
    let early = app.payments.recover_due(10).await.expect("recovery");
    assert_eq!(early.resolved, 0, "the lease has not run out yet");

    app.clock.advance(Duration::seconds(60));
    let (a, b) = tokio::join!(app.payments.recover_due(10), app.payments.recover_due(10));

    let resolved = a.expect("recovery").resolved + b.expect("recovery").resolved;
    assert_eq!(resolved, 1, "one recovery worker finished it");
    assert_eq!(status_of(&app, &id).await, "confirmed");
    assert_eq!(app.gateway.count(&id, "authorize"), 1, "authorized once");
    let answered = app
        .payments
        .confirm(&web(), "scope", key("pay"), reservation, token)
        .await
        .expect("answered")
        .expect("confirmed");
    assert_eq!(answered.reservation.status.as_str(), "confirmed");
    assert_eq!(
        count(&event_types(&app, &id).await, "ReservationConfirmed"),
        1
    );
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

#[tokio::test]
async fn the_sweeper_abandons_a_dead_request_so_its_retry_runs_again_without_charging_twice() {
    let (app, id, _) = held_stay(2).await;
    let reservation = aggregates::ReservationId::parse(&id).expect("id");
    let token = PaymentToken::parse("tok_ok").expect("token");
    app.payments.crash_after_authorize(true);
    let _ = app
        .payments
        .confirm(&web(), "scope", key("pay"), reservation, token.clone())
        .await;
    app.payments.crash_after_authorize(false);
    app.clock.advance(Duration::seconds(200));

    let swept = sweep_once(app.payments.commands(), 100, Duration::seconds(120))
        .await
        .expect("sweep");

    assert_eq!(swept.abandoned_requests, 1);
    assert_eq!(swept.expired, 0, "the hold is 200 s old: still live");
    let retry = app
        .payments
        .confirm(&web(), "scope", key("pay"), reservation, token)
        .await
        .expect("ran again");
    // 200 s after the hold: still within its 900 s, so the retry confirms it with the
    // authorization the crashed request obtained.
    assert_eq!(
        retry.expect("confirmed").reservation.status.as_str(),
        "confirmed"
    );
    assert_eq!(app.gateway.count(&id, "authorize"), 1);
    app.finish().await;
}

#[tokio::test]
async fn two_sweepers_expire_every_lapsed_hold_once_and_leave_live_ones() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 20).await;
    let mut lapsed = Vec::new();
    for n in 0..8 {
        lapsed.push(
            app.hold_ok(WEB, &format!("old-{n}"), &hold_body(day(10), day(12), 1))
                .await,
        );
    }
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));
    let live = app
        .hold_ok(WEB, "new", &hold_body(day(10), day(12), 1))
        .await;

    let commands = app.payments.commands();
    let (a, b) = tokio::join!(
        sweep_once(commands, 100, Duration::seconds(120)),
        sweep_once(commands, 100, Duration::seconds(120))
    );

    assert_eq!(a.expect("sweep").expired + b.expect("sweep").expired, 8);
    for id in &lapsed {
        let types = event_types(&app, id).await;
        assert_eq!(count(&types, "HoldExpired"), 1, "{id}: {types:?}");
    }
    assert_eq!(status_of(&app, &live).await, "held");
    for d in 10..12 {
        assert_eq!(
            app.taken(day(d)).await,
            1,
            "only the live hold remains on night {d}"
        );
    }
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

#[tokio::test]
async fn a_pass_expires_six_hundred_lapsed_holds_in_a_few_transactions_and_frees_their_nights() {
    // Arrange: 600 holds of one to three nights at once, all lapsed.
    let app = Arc::new(spawn_app().await);
    app.seed_hotel(day(10), 6, 2_000).await;
    let mut tasks = Vec::new();
    for worker in 0..12u64 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0..50u64 {
                let first = 10 + (worker + n) % 3;
                let body = hold_body(day(first), day(first + 1 + n % 3), 1);
                ids.push(
                    app.hold_ok(WEB, &format!("lapse-{worker}-{n}"), &body)
                        .await,
                );
            }
            ids
        }));
    }
    let mut lapsed = Vec::new();
    for task in tasks {
        lapsed.extend(task.await.expect("task"));
    }
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));

    // Act: one pass.
    let swept = sweep_once(app.payments.commands(), 1_000, Duration::seconds(120))
        .await
        .expect("sweep");

    // Assert: every hold expired once, in a few transactions, and every night is free.
    assert_eq!(swept.expired, 600);
    let (expired, transactions): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT transaction_id) FROM events
          WHERE event_type = 'HoldExpired'",
    )
    .fetch_one(&app.db.pool)
    .await
    .expect("expiries");
    assert_eq!(expired, 600);
    // Batches of 100 (the sweeper's `EXPIRY_BATCH`): six transactions, where one a
    // hold took 600.
    assert!(
        transactions <= 6,
        "600 expiries took {transactions} transactions"
    );
    for id in lapsed.iter().step_by(37) {
        assert_eq!(status_of(&app, id).await, "expired", "{id}");
    }
    for d in 10..16 {
        assert_eq!(app.taken(day(d)).await, 0, "night {d} is free again");
    }
    assert_invariants_at(&app.db.pool, app.now()).await;
    if let Ok(app) = Arc::try_unwrap(app) {
        app.finish().await;
    }
}

#[tokio::test]
async fn a_backlog_of_lapsed_holds_larger_than_a_batch_says_there_is_more_until_it_is_gone() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 20, 20).await;
    let mut lapsed = Vec::new();
    for n in 0..12 {
        lapsed.push(
            app.hold_ok(WEB, &format!("old-{n}"), &hold_body(day(10), day(12), 1))
                .await,
        );
    }
    app.clock.advance(Duration::seconds(HOLD_TTL_SECONDS + 1));
    let commands = app.payments.commands();

    let mut passes = Vec::new();
    loop {
        let swept = sweep_once(commands, 5, Duration::seconds(120))
            .await
            .expect("sweep");
        passes.push((swept.expired, swept.more));
        if !swept.more || passes.len() > 5 {
            break;
        }
    }

    // 5 + 5 + 2: the first two passes were full, the third was not.
    assert_eq!(passes, vec![(5, true), (5, true), (2, false)]);
    for id in &lapsed {
        assert_eq!(status_of(&app, id).await, "expired", "{id}");
    }
    for d in 10..12 {
        assert_eq!(app.taken(day(d)).await, 0, "night {d} is free again");
    }
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

#[tokio::test]
async fn fifty_concurrent_confirms_cancels_and_webhooks_end_in_one_state_with_one_authorization_kept(
) {
    let (app, id, total) = held_stay(2).await;
    // The provider has authorized under the saga's key; its webhook will race the
    // confirms (which get the same authorization back) and the cancels.
    let txn = app
        .gateway
        .authorize(AuthorizeRequest {
            currency: aggregates::Currency::EUR,
            idempotency_key: authorization_key(id.parse().expect("uuid")),
            token: PaymentToken::parse("tok_ok").expect("token"),
            amount_cents: total,
            reference: id.clone(),
        })
        .await
        .expect("authorized")
        .provider_txn_id;
    let app = std::sync::Arc::new(app);

    let mut tasks = Vec::new();
    for n in 0..50 {
        let app = app.clone();
        let id = id.clone();
        let txn = txn.clone();
        tasks.push(tokio::spawn(async move {
            match n % 3 {
                0 => app.confirm(WEB, &format!("pay-{n}"), &id, "tok_ok").await,
                1 => {
                    app.cancel(WEB, &format!("cancel-{n}"), &id, &json!({}))
                        .await
                }
                _ => {
                    app.webhook(&json!({"provider_txn_id": txn, "reservation_id": id,
                        "status": "authorized", "amount_cents": total}))
                        .await
                }
            }
        }));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.expect("task").status.as_u16());
    }

    assert!(
        statuses.iter().all(|s| [200, 202, 409].contains(s)),
        "only 200, 202 and 409: {statuses:?}"
    );
    for _ in 0..3 {
        app.payments.deliver_outbox(100).await.expect("outbox");
    }
    let types = event_types(&app, &id).await;
    let terminal = count(&types, "ReservationCancelled")
        + count(&types, "HoldExpired")
        + count(&types, "PaymentDeclined");
    assert_eq!(terminal, 1, "exactly one terminal event: {types:?}");
    assert!(count(&types, "ReservationConfirmed") <= 1, "{types:?}");
    assert_eq!(status_of(&app, &id).await, "cancelled");
    let ledger = app.gateway.ledger();
    let of = |op: &str| {
        ledger
            .iter()
            .filter(|e| e.reference == id && e.operation == op)
            .count()
    };
    assert_eq!(of("authorize"), 1, "one authorization");
    let given_back = of("void") + of("refund");
    assert!(given_back <= 1, "at most one refund: {ledger:?}");
    let kept = of("authorize") - of("void");
    assert!(kept <= 1);
    // Either the cancel came first (the late authorization is voided) or the payment
    // did (authorized, then voided by the cancellation: the stay is days away, before
    // its capture deadline). Nothing is ever captured.
    assert_eq!(
        (of("capture"), of("refund"), of("void")),
        (0, 0, 1),
        "{ledger:?}"
    );
    for d in 10..13 {
        assert_eq!(app.taken(day(d)).await, 0);
    }
    assert_invariants(&app.db.pool).await;
    match std::sync::Arc::try_unwrap(app) {
        Ok(app) => app.finish().await,
        Err(_) => panic!("tasks still hold the app"),
    }
}

// --- Date changes of paid stays -------------------------------------------------------

/// The amounts the simulated provider recorded for reservation `id` under `operation`.
fn gateway_amounts(app: &TestApp, id: &str, operation: &str) -> Vec<i64> {
    app.gateway
        .ledger()
        .iter()
        .filter(|e| e.reference == id && e.operation == operation)
        .map(|e| e.amount_cents)
        .collect()
}

fn move_body(start: u64, end: u64) -> serde_json::Value {
    json!({"start_date": day(start), "end_date": day(end)})
}

#[tokio::test]
async fn a_dearer_move_of_a_captured_stay_authorizes_and_captures_the_difference() {
    // Arrange: 10th to 13th (3 nights) paid and captured at the deadline
    let (app, id) = paid_stay(2).await;
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(72));
    assert_eq!(app.capture_due().await, 1);

    // Act: one night longer
    let reply = app
        .change_dates(WEB, "longer", &id, &move_body(10, 14))
        .await;
    app.deliver_payments().await;

    // Assert: the card was asked for the difference before the move, and it was taken
    let body = reply.assert_status(200);
    assert_eq!(body["total_cents"], 4 * RATE, "{body}");
    assert_eq!(
        body["payment"],
        json!({"status": "captured", "authorized_cents": 4 * RATE, "to_capture_cents": 0,
               "captured_cents": 4 * RATE, "refunded_cents": 0})
    );
    assert_eq!(body["paid_cents"], 4 * RATE, "paid is what was taken");
    assert_eq!(gateway_amounts(&app, &id, "increment"), vec![RATE]);
    assert_eq!(gateway_amounts(&app, &id, "capture"), vec![3 * RATE, RATE]);
    let replay = app
        .change_dates(WEB, "longer", &id, &move_body(10, 14))
        .await;
    assert_eq!(replay.text, reply.text, "a replay is the first answer");
    assert_eq!(gateway_amounts(&app, &id, "increment"), vec![RATE]);
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

#[tokio::test]
async fn a_dearer_move_the_card_declines_is_402_and_changes_nothing() {
    // Arrange: paid with a card that takes no increment
    let (app, id, _) = held_stay(2).await;
    app.confirm(WEB, "pay", &id, "tok_no_increase")
        .await
        .assert_status(200);
    let before = (
        app.taken_by_night().await,
        app.get_reservation(WEB, &id).await.json,
    );

    // Act
    let reply = app
        .change_dates(WEB, "longer", &id, &move_body(10, 14))
        .await;

    // Assert: declined in the contract's shape; the stay, its nights and its money as
    // they were
    let error = reply.assert_error(402, "payment_declined");
    assert_eq!(error["shortfall_cents"], RATE, "{error}");
    // (The 13th was held while the card was asked, and given back.)
    let view = app.get_reservation(WEB, &id).await;
    assert_eq!(app.taken_by_night().await, before.0);
    for field in ["start_date", "end_date", "total_cents", "status", "payment"] {
        assert_eq!(view.json[field], before.1[field], "{field}");
    }
    assert_eq!(view.json["payment"]["authorized_cents"], 3 * RATE);
    let types = event_types(&app, &id).await;
    assert_eq!(count(&types, "DateChangeHeld"), 1, "{types:?}");
    assert_eq!(count(&types, "DateChangeReleased"), 1, "{types:?}");
    assert_eq!(count(&types, "DatesChanged"), 0, "{types:?}");
    assert_eq!(gateway_amounts(&app, &id, "increment"), Vec::<i64>::new());
    app.finish().await;
}

#[tokio::test]
async fn a_cheaper_move_refunds_the_difference_once_captured_and_captures_less_before() {
    // Arrange: two paid stays, one captured (the deadline passed for it after a later
    // move is irrelevant: it is captured by the worker), one not
    let (app, captured) = paid_stay(3).await;
    let uncaptured = app
        .hold_ok(WEB, "hold-2", &hold_body(day(11), day(14), 1))
        .await;
    app.confirm(WEB, "pay-2", &uncaptured, "tok_ok")
        .await
        .assert_status(200);
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(72));
    assert_eq!(
        app.capture_due().await,
        1,
        "only the stay arriving on the 10th"
    );

    // Act: both shortened by a night
    app.change_dates(WEB, "shorter-1", &captured, &move_body(10, 12))
        .await
        .assert_status(200);
    let reply = app
        .change_dates(WEB, "shorter-2", &uncaptured, &move_body(11, 13))
        .await;
    app.deliver_payments().await;

    // Assert: the captured one is refunded the night; the other will be captured at
    // the lower price when its deadline comes
    assert_eq!(gateway_amounts(&app, &captured, "refund"), vec![RATE]);
    let shorter = app.get_reservation(WEB, &captured).await;
    assert_eq!(shorter.json["paid_cents"], 2 * RATE, "{}", shorter.text);
    assert_eq!(shorter.json["payment"]["refunded_cents"], RATE);
    // The authorization keeps what the provider holds; what will be captured says
    // that only the new total will be taken.
    let body = reply.assert_status(200);
    assert_eq!(
        body["payment"],
        json!({"status": "authorized", "authorized_cents": 3 * RATE,
               "to_capture_cents": 2 * RATE, "captured_cents": 0, "refunded_cents": 0})
    );
    assert_eq!(body["total_cents"], 2 * RATE);
    assert_eq!(body["paid_cents"], 0);
    app.clock
        .set(in_lisbon(day(11), 15 * 60) - Duration::hours(72));
    assert_eq!(app.capture_due().await, 1);
    assert_eq!(
        gateway_amounts(&app, &uncaptured, "capture"),
        vec![2 * RATE]
    );
    let captured_now = app.get_reservation(WEB, &uncaptured).await;
    assert_eq!(captured_now.json["paid_cents"], 2 * RATE);
    assert_eq!(captured_now.json["payment"]["to_capture_cents"], 0);
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

#[tokio::test]
async fn moving_a_stay_out_of_its_no_refund_window_does_not_reopen_a_full_refund() {
    // Arrange: paid and captured; 30 hours before check-in a cancellation gives half
    let (app, id) = paid_stay(2).await;
    app.clock
        .set(in_lisbon(day(10), 15 * 60) - Duration::hours(30));
    app.capture_due().await;

    // Act: the guest moves the stay out by three days (72+ hours away), then cancels
    app.change_dates(WEB, "later", &id, &move_body(12, 15))
        .await
        .assert_status(200);
    let reply = app
        .cancel(WEB, "cancel", &id, &json!({"reason": "plans"}))
        .await;
    app.deliver_payments().await;

    // Assert: half back, as cancelling at the moment of the move would have given
    let body = reply.assert_status(200);
    assert_eq!(body["refund_cents"], 3 * RATE / 2, "{body}");
    assert_eq!(gateway_amounts(&app, &id, "refund"), vec![3 * RATE / 2]);
    app.finish().await;
}

// --- The ledger against the provider's own records --------------------------------------

/// The reservation's `payment` (as the API answers it) against the simulated provider's
/// records for it: they agree to the cent, and balance.
async fn assert_reconciles(app: &TestApp, id: &str) -> serde_json::Value {
    let payment = app.get_reservation(ADMIN, id).await.assert_status(200)["payment"].clone();
    let theirs = app.gateway.totals(id);
    let ours = |field: &str| payment[field].as_i64().expect("amount");
    assert_eq!(
        (
            ours("authorized_cents"),
            ours("captured_cents"),
            ours("refunded_cents")
        ),
        (
            theirs.authorized_cents,
            theirs.captured_cents,
            theirs.refunded_cents
        ),
        "{id}: ours {payment}, the provider's {theirs:?}"
    );
    assert!(
        theirs.captured_cents <= theirs.authorized_cents,
        "{theirs:?}"
    );
    assert!(theirs.refunded_cents <= theirs.captured_cents, "{theirs:?}");
    assert_eq!(
        payment["status"] == "voided",
        theirs.voids == 1,
        "{id}: {payment} / {theirs:?}"
    );
    payment
}

#[tokio::test]
async fn fifty_racing_stay_calls_leave_one_history_and_money_the_provider_agrees_with() {
    // Arrange: a paid stay of the 10th to the 13th, not yet captured, the clock at
    // 16:00 on its arrival date (past the deadline: the worker is due to capture it)
    let (app, id) = paid_stay(3).await;
    app.clock.set(in_lisbon(day(10), 16 * 60));
    let app = Arc::new(app);

    // Act: 48 calls at once (12 each of check-in, no-show, cancel, and a move to a
    // dearer stay of four nights), with two capture passes racing them
    let mut calls = Vec::new();
    for n in 0..50 {
        let (app, id) = (app.clone(), id.clone());
        calls.push(tokio::spawn(async move {
            let key = format!("race-{n}");
            let (call, reply) = match n % 5 {
                0 => ("check_in", Some(app.check_in(ADMIN, &key, &id).await)),
                1 => ("no_show", Some(app.no_show(ADMIN, &key, &id).await)),
                2 => (
                    "cancel",
                    Some(app.cancel(WEB, &key, &id, &json!({"reason": "race"})).await),
                ),
                3 => (
                    "change_dates",
                    Some(app.change_dates(WEB, &key, &id, &move_body(10, 14)).await),
                ),
                _ => {
                    app.capture_due().await;
                    ("capture", None)
                }
            };
            (call, reply.map(|r| (r.status, r.json)))
        }));
    }
    let mut won: BTreeMap<&str, usize> = BTreeMap::new();
    for call in calls {
        let (call, reply) = call.await.expect("task");
        let Some((status, body)) = reply else {
            continue;
        };
        match status.as_u16() {
            200 => *won.entry(call).or_default() += 1,
            409 | 422 => assert!(
                ["invalid_state", "try_again", "invalid", "too_early"]
                    .contains(&body["error"].as_str().unwrap_or_default()),
                "{call}: {body}"
            ),
            other => panic!("{call}: unexpected {other} {body}"),
        }
    }
    app.capture_due().await;
    app.deliver_payments().await;

    // Assert: one legal history...
    let count = |call| won.get(call).copied().unwrap_or(0);
    assert!(
        count("check_in") + count("no_show") + count("cancel") <= 1,
        "{won:?}"
    );
    assert!(count("change_dates") <= 1, "{won:?}");
    // ...and money the provider's own records agree with, to the cent
    let payment = assert_reconciles(&app, &id).await;
    let total = if count("change_dates") == 1 { 4 } else { 3 } * RATE;
    let kept = payment["captured_cents"].as_i64().expect("captured")
        - payment["refunded_cents"].as_i64().expect("refunded");
    let expected = if count("no_show") == 1 {
        RATE
    } else {
        // Checked in, cancelled inside the no-refund window, or still confirmed past
        // the deadline: the whole stay is owed and taken.
        total
    };
    assert_eq!(kept, expected, "{won:?}: {payment}");
    assert_invariants_at(&app.db.pool, app.now()).await;
    if let Ok(app) = Arc::try_unwrap(app) {
        app.finish().await;
    }
}

#[derive(Debug, Clone, Copy)]
enum MoneyStep {
    Confirm,
    Wait { hours: i64 },
    Move { start: u64, nights: u64 },
    Cancel { by_hotel: bool },
    CheckIn,
    CheckOut,
    NoShow,
    Capture,
}

#[tokio::test]
async fn after_a_random_workload_the_ledger_and_the_providers_records_agree_to_the_cent() {
    use rand::{Rng, SeedableRng};
    // Arrange: six stays of the same hotel, a seeded random sequence of what guests and
    // staff do to them over a fortnight, the workers running between steps
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let app = spawn_app().await;
    app.seed_hotel(day(10), 10, 20).await;
    let mut ids = Vec::new();
    for n in 0..7 {
        let start = 10 + n % 3;
        let id = app
            .hold_ok(
                WEB,
                &format!("hold-{n}"),
                &hold_body(day(start), day(start + 2), 1),
            )
            .await;
        // Most are paid at once; the others wait for a random step (their hold may
        // lapse first, as a guest's does).
        if n < 5 {
            app.confirm(WEB, &format!("pay-{n}"), &id, "tok_ok")
                .await
                .assert_status(200);
        }
        ids.push(id);
    }

    // Act
    for step in 0..80 {
        let id = &ids[rng.gen_range(0..ids.len())];
        let what = match rng.gen_range(0..9) {
            0 => MoneyStep::Confirm,
            1 | 2 => MoneyStep::Wait {
                hours: rng.gen_range(1..30),
            },
            3 => MoneyStep::Move {
                start: rng.gen_range(10..15),
                nights: rng.gen_range(1..5),
            },
            4 => MoneyStep::Cancel {
                by_hotel: rng.gen_bool(0.3),
            },
            5 => MoneyStep::CheckIn,
            6 => MoneyStep::CheckOut,
            7 => MoneyStep::NoShow,
            _ => MoneyStep::Capture,
        };
        let key = format!("step-{step}");
        let reply = match what {
            MoneyStep::Confirm => Some(app.confirm(WEB, &key, id, "tok_ok").await),
            MoneyStep::Wait { hours } => {
                app.clock.set(app.now() + Duration::hours(hours));
                None
            }
            MoneyStep::Move { start, nights } => Some(
                app.change_dates(WEB, &key, id, &move_body(start, start + nights))
                    .await,
            ),
            MoneyStep::Cancel { by_hotel } => {
                let token = if by_hotel { ADMIN } else { WEB };
                Some(app.cancel(token, &key, id, &json!({})).await)
            }
            MoneyStep::CheckIn => Some(app.check_in(ADMIN, &key, id).await),
            MoneyStep::CheckOut => Some(app.check_out(ADMIN, &key, id).await),
            MoneyStep::NoShow => Some(app.no_show(ADMIN, &key, id).await),
            MoneyStep::Capture => {
                app.capture_due().await;
                None
            }
        };
        if let Some(reply) = reply {
            assert!(
                reply.status.as_u16() < 500,
                "seed {seed}, {what:?}: {} {}",
                reply.status,
                reply.text
            );
        }
        app.record_no_shows(chrono::Duration::hours(4)).await;
        app.deliver_payments().await;
    }

    // Assert: for every stay, what we say of its money is what the provider did, and
    // the reservations view (the look-up by channel) says the same once caught up
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;
    let listed = app
        .get("/v1/reservations?channel=web&limit=50", Some(ADMIN))
        .await;
    for id in &ids {
        let payment = assert_reconciles(&app, id).await;
        let row = listed.assert_status(200)["reservations"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["reservation_id"] == *id))
            .unwrap_or_else(|| panic!("{id} not listed in {}", listed.text));
        assert_eq!(row["payment"], payment, "seed {seed}: the view of {id}");
    }
    runners.stop().await;
    assert_invariants_at(&app.db.pool, app.now()).await;
    app.finish().await;
}

// --- Stays and no-shows on the read side ------------------------------------------------

#[tokio::test]
async fn arrivals_departures_guests_in_house_and_no_shows_are_counted_and_suggest_an_allowance() {
    // Arrange: six paid stays of the 10th to the 13th in a room type of ten rooms; four
    // guests check in, one of them leaves on the 11th, two never come
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 10).await;
    let mut ids = Vec::new();
    for n in 0..6 {
        let id = app
            .hold_ok(WEB, &format!("hold-{n}"), &hold_body(day(10), day(13), 1))
            .await;
        app.confirm(WEB, &format!("pay-{n}"), &id, "tok_ok")
            .await
            .assert_status(200);
        ids.push(id);
    }
    app.clock.set(in_lisbon(day(10), 16 * 60));
    for id in &ids[..4] {
        app.check_in(ADMIN, &format!("in-{id}"), id)
            .await
            .assert_status(200);
    }
    app.clock.set(in_lisbon(day(11), 5 * 60));
    assert_eq!(app.record_no_shows(chrono::Duration::hours(4)).await, 2);
    app.clock.set(in_lisbon(day(11), 10 * 60));
    app.check_out(ADMIN, "out", &ids[0])
        .await
        .assert_status(200);
    let runners = Runners::start(&app.db.pool);
    wait_caught_up(&app.db.pool).await;

    // Act
    let range = format!("start_date={}&end_date={}", day(10), day(14));
    let stays = app
        .get(&format!("/v1/hotels/{HOTEL}/stays?{range}"), Some(ADMIN))
        .await;
    let careful = app
        .get(&format!("/v1/hotels/{HOTEL}/no-shows?{range}"), Some(ADMIN))
        .await;
    let bold = app
        .get(
            &format!("/v1/hotels/{HOTEL}/no-shows?{range}&risk=0.3"),
            Some(ADMIN),
        )
        .await;
    let refused = [
        app.get(
            &format!("/v1/hotels/{HOTEL}/no-shows?{range}&risk=1.5"),
            Some(ADMIN),
        )
        .await,
        app.get(&format!("/v1/hotels/{HOTEL}/stays?{range}"), Some(WEB))
            .await,
        app.get(
            &format!(
                "/v1/hotels/{HOTEL}/stays?start_date={}&end_date={}",
                day(14),
                day(10)
            ),
            Some(ADMIN),
        )
        .await,
    ];

    // Assert: night by night
    let days = &stays.assert_status(200)["room_types"][0]["days"];
    let day_of = |d: usize| {
        let n = &days[d];
        (
            n["arrivals"].as_i64().expect("arrivals"),
            n["no_shows"].as_i64().expect("no_shows"),
            n["in_house"].as_i64().expect("in_house"),
            n["departures"].as_i64().expect("departures"),
        )
    };
    assert_eq!(day_of(0), (4, 2, 4, 0), "the 10th: {days}");
    assert_eq!(days[0]["no_show_rate"], 2.0 / 6.0);
    assert_eq!(
        day_of(1),
        (0, 0, 4, 0),
        "the 11th (the night of leaving is sold)"
    );
    assert_eq!(day_of(2), (0, 0, 3, 1), "the 12th: one left");
    assert_eq!(
        day_of(3),
        (0, 0, 0, 0),
        "the 13th: the others are still checked in"
    );
    // The suggestion: 2 of 6 did not come, a lower bound of about 12%; with ten rooms,
    // an eleventh guest all come with probability about 25%
    let careful = &careful.assert_status(200)["room_types"][0];
    assert_eq!(careful["due"], 6, "{careful}");
    assert_eq!(careful["no_shows"], 2);
    assert_eq!(careful["capacity"], 10);
    let bound = careful["no_show_rate_lower_bound"].as_f64().expect("bound");
    assert!(bound > 0.10 && bound < 0.13, "{careful}");
    assert_eq!(careful["suggested_allowance"], 0, "at 5% risk: {careful}");
    let bold = &bold.assert_status(200)["room_types"][0];
    assert_eq!(bold["suggested_allowance"], 1, "at 30% risk: {bold}");
    let walk = bold["walk_probability"].as_f64().expect("walk");
    assert!(walk > 0.2 && walk <= 0.3, "{bold}");
    refused[0].assert_error(422, "invalid_request");
    refused[1].assert_error(403, "forbidden");
    refused[2].assert_error(422, "invalid_request");
    // Occupancy agrees: the no-shows' first night stays sold, their later nights and
    // the early leaver's last one are for sale again, and none of it is a cancellation
    let occupancy = app
        .get(
            &format!("/v1/hotels/{HOTEL}/occupancy?{range}"),
            Some(ADMIN),
        )
        .await;
    let nights = &occupancy.assert_status(200)["room_types"][0]["nights"];
    let sold: Vec<i64> = (0..4)
        .map(|d| nights[d]["confirmed"].as_i64().expect("confirmed"))
        .collect();
    assert_eq!(sold, vec![6, 4, 3, 0], "{nights}");
    assert!((0..4).all(|d| nights[d]["cancellations"] == 0), "{nights}");

    // And the report command says the same
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_reservations"))
        .args([
            "report",
            "no-shows",
            "--hotel",
            &HOTEL.to_string(),
            "--from",
            &day(10).to_string(),
            "--to",
            &day(14).to_string(),
            "--risk",
            "0.3",
            "--json",
        ])
        .env("DATABASE_URL", &app.db.url)
        .output()
        .expect("run the binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(
        report["room_types"][0]["suggested_allowance"], 1,
        "{report}"
    );
    assert_eq!(report["room_types"][0]["due"], 6);
    runners.stop().await;
    app.finish().await;
}

// --- Retention ------------------------------------------------------------------------

#[tokio::test]
async fn retention_deletes_what_no_answer_needs_any_more_and_keeps_what_a_person_must_see() {
    use app::sweeper::{retention_once, Retention};
    // Arrange: a paid stay whose webhook arrived, then cancelled (a void delivered), and
    // a webhook for an authorization the provider never issued (its void refused for
    // good: a failed row for a person)
    let (app, id) = paid_stay(2).await;
    app.gateway.release_webhooks().await;
    app.cancel(WEB, "cancel", &id, &json!({}))
        .await
        .assert_status(200);
    app.webhook(&json!({"provider_txn_id": "manual-1", "reservation_id": id,
        "status": "authorized", "amount_cents": 100}))
        .await
        .assert_status(200);
    app.deliver_payments().await;
    let counts = |app: &TestApp| {
        let pool = app.db.pool.clone();
        async move {
            let mut out = Vec::new();
            for sql in [
                "SELECT count(*) FROM idempotency_keys",
                "SELECT count(*) FROM payment_webhooks",
                "SELECT count(*) FROM payment_outbox WHERE done_at IS NOT NULL",
                "SELECT count(*) FROM payment_outbox WHERE failed",
                "SELECT count(*) FROM payment_sagas",
            ] {
                let n: i64 = sqlx::query_scalar(sql).fetch_one(&pool).await.expect(sql);
                out.push(n);
            }
            out
        }
    };
    let before = counts(&app).await;
    assert!(before.iter().all(|n| *n >= 1), "{before:?}");
    let small = Retention {
        batch: 1,
        ..Retention::default()
    };

    // Act + Assert: an hour on, nothing is old enough
    app.clock.set(app.now() + Duration::hours(1));
    let none = retention_once(app.payments.commands(), small)
        .await
        .expect("pass");
    // (Whether the allocations' compaction has a pass under way is its own business.)
    assert_eq!(
        app::sweeper::Retained {
            allocations_unfinished: false,
            ..none
        },
        Default::default()
    );

    // Two days on, the idempotency records go (a batch at a time), the rest stays
    app.clock.set(app.now() + Duration::days(2));
    while retention_once(app.payments.commands(), small)
        .await
        .expect("pass")
        .idempotency_keys
        > 0
    {}
    let after_a_day = counts(&app).await;
    assert_eq!(after_a_day[0], 0);
    assert_eq!(after_a_day[1..], before[1..]);

    // A month on, the receipts, the delivered rows and the finished saga go; the failed
    // row stays for a person, and the stay reads as before
    app.clock.set(app.now() + Duration::days(30));
    let gone = retention_once(app.payments.commands(), Retention::default())
        .await
        .expect("pass");
    assert_eq!(
        (
            gone.payment_webhooks,
            gone.payment_outbox,
            gone.payment_sagas
        ),
        (before[1] as u64, before[2] as u64, before[4] as u64)
    );
    assert_eq!(counts(&app).await, vec![0, 0, 0, before[3], 0]);
    let view = app.get_reservation(WEB, &id).await;
    assert_eq!(view.assert_status(200)["status"], "cancelled");
    app.finish().await;
}
