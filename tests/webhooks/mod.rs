//! Partner webhooks against a real HTTP receiver on loopback: signatures checked by an
//! implementation of the Standard Webhooks verification written here from the
//! specification (not the server's), retries with one id and in order per reservation,
//! a receiver that never answers paused, a hotel filter, and the subscription API's
//! refusals.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::webhooks::destinations::Destinations;
use app::webhooks::sender::{send_due, Delivered, SenderConfig, WebhookClient};
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use hmac::{Hmac, Mac};
use projections::webhooks::WebhookProjection;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::support::*;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_HOTEL: i64 = 900;

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

impl Hit {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

/// How the receiver answers: the statuses queued (then 200), or never.
#[derive(Default)]
struct Script {
    statuses: VecDeque<u16>,
    hang: bool,
}

/// A real HTTP server on a free port that records every request.
struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    async fn start() -> Self {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let script: Arc<Mutex<Script>> = Arc::default();
        let (h, s) = (hits.clone(), script.clone());
        let app = axum::Router::new().route(
            "/hooks",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let (hits, script) = (h.clone(), s.clone());
                async move {
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    hits.lock().expect("hits").push(Hit {
                        id: header("webhook-id"),
                        timestamp: header("webhook-timestamp"),
                        signature: header("webhook-signature"),
                        body,
                    });
                    let (hang, status) = {
                        let mut script = script.lock().expect("script");
                        (script.hang, script.statuses.pop_front().unwrap_or(200))
                    };
                    if hang {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                    StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hooks", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, hits, script }
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("hits").clone()
    }

    fn answer(&self, statuses: &[u16]) {
        self.script.lock().expect("script").statuses = statuses.iter().copied().collect();
    }

    fn hang(&self, hang: bool) {
        self.script.lock().expect("script").hang = hang;
    }
}

/// The Standard Webhooks check, from the specification: the key is the base64 after
/// `whsec_`; the signed content is `{id}.{timestamp}.{body}`; the header holds
/// space-separated `v1,<base64 HMAC-SHA256>` signatures, one of which must match.
fn verifies(hit: &Hit) -> bool {
    let key = base64::engine::general_purpose::STANDARD
        .decode(SECRET.trim_start_matches("whsec_"))
        .expect("the secret's key");
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(format!("{}.{}.{}", hit.id, hit.timestamp, hit.body).as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    hit.signature
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|s| s == expected)
}

fn sender_config() -> SenderConfig {
    SenderConfig {
        first_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(8),
        pause_after: 1_000,
        timeout: Duration::from_millis(300),
        ..SenderConfig::default()
    }
}

/// Makes the deliveries of every event committed so far.
async fn make_deliveries(app: &TestApp) {
    wait_visible(&app.db.pool).await;
    let mut projection = WebhookProjection {
        retry_window: chrono::Duration::hours(24),
    };
    projections::catch_up(&app.db.pool, &mut projection, 7, Duration::from_secs(20))
        .await
        .expect("deliveries made");
}

/// The sender's client, allowed to reach the receivers on loopback (as the servers of
/// these tests are, by `WEBHOOK_ALLOWED_HOSTS`).
fn loopback_client() -> WebhookClient {
    WebhookClient::new(Destinations::parse("127.0.0.1")).expect("client")
}

/// Passes of the sender at the test clock, `step` apart, until one finds nothing due.
/// The deliveries are made due at the time they are made (the database's clock), which
/// the test clock, started with the server, trails: it is moved a minute on first.
async fn send(app: &TestApp, config: &SenderConfig, step: chrono::Duration) -> Delivered {
    app.clock.advance(chrono::Duration::seconds(60));
    let client = loopback_client();
    let mut total = Delivered::default();
    for _ in 0..20 {
        let pass = send_due(&app.db.pool, &client, config, app.now(), 100)
            .await
            .expect("send pass");
        total.delivered += pass.delivered;
        total.retrying += pass.retrying;
        total.failed += pass.failed;
        total.paused += pass.paused;
        if pass == Delivered::default() {
            break;
        }
        app.clock.advance(step);
    }
    total
}

async fn subscribe(app: &TestApp, id: &str, body: &Value) -> Reply {
    app.put_json(&format!("/v1/webhooks/{id}"), Some(ADMIN), body)
        .await
}

fn types(hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| h.json()["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_partner_gets_every_matching_event_once_signed_in_order_and_without_the_guest() {
    // Arrange
    let receiver = Receiver::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    // Priced in francs: every delivery about the stay says so.
    app.put_hotel(
        HOTEL,
        &json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon",
                "currency": "CHF"}),
    )
    .await
    .assert_status(200);
    subscribe(
        &app,
        "pms",
        &json!({"url": receiver.url, "events": ["*"], "secret": SECRET}),
    )
    .await
    .assert_status(200);

    // Act: a stay held, confirmed and cancelled; then the deliveries are made and sent.
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    app.cancel(
        WEB,
        "cancel",
        &id,
        &json!({"reason": "Ana's secret reason"}),
    )
    .await
    .assert_status(200);
    make_deliveries(&app).await;
    let sent = send(&app, &sender_config(), chrono::Duration::seconds(1)).await;
    make_deliveries(&app).await;
    let again = send(&app, &sender_config(), chrono::Duration::seconds(1)).await;

    // Assert
    let hits = receiver.hits();
    assert_eq!(again, Delivered::default(), "nothing twice");
    assert_eq!(sent.delivered, hits.len());
    let reservation: Vec<String> = types(&hits)
        .into_iter()
        .filter(|t| t.starts_with("reservation."))
        .collect();
    assert_eq!(
        reservation,
        [
            "reservation.held",
            "reservation.confirmed",
            "reservation.cancelled"
        ]
    );
    for hit in &hits {
        assert!(verifies(hit), "signature of {hit:?}");
        let body = hit.json();
        assert_eq!(body["id"], hit.id.as_str(), "the body's id is the header's");
        assert!(hit.id.starts_with("msg_"));
        if body["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("reservation."))
        {
            assert_eq!(body["data"]["currency"], "CHF", "{}", hit.body);
        }
        assert!(
            !hit.body.contains("ana@example.com") && !hit.body.contains("Ana"),
            "{}",
            hit.body
        );
    }
    let held = hits
        .iter()
        .find(|h| h.json()["type"] == "reservation.held")
        .expect("held");
    assert_eq!(held.json()["data"]["reservation_id"], id.as_str());
    assert_eq!(held.json()["data"]["hotel_id"], HOTEL);
    let looked_up = app.get_reservation(WEB, &id).await;
    assert_eq!(
        held.json()["data"]["reference"],
        looked_up.str("reference").as_str()
    );
    // A hold says what it holds, line by line, as the reservation lists them.
    assert_eq!(held.json()["data"]["lines"], looked_up.json["lines"]);
    let cancelled = hits
        .iter()
        .find(|h| h.json()["type"] == "reservation.cancelled")
        .expect("cancelled");
    assert!(
        cancelled.json()["data"]["refund_cents"].is_i64(),
        "{}",
        cancelled.body
    );
    // Inventory: after the hold, 2 of 3 rooms left on nights 10 and 11; after the
    // cancellation, 3 again.
    let inventory: Vec<Value> = hits
        .iter()
        .map(Hit::json)
        .filter(|b| b["type"] == "inventory.changed")
        .collect();
    assert!(inventory.len() >= 2, "{inventory:?}");
    let last = &inventory[inventory.len() - 1]["data"];
    assert_eq!(last["hotel_id"], HOTEL);
    assert_eq!(last["room_type_id"], KING);
    assert_eq!(last["nights"][0]["date"], json!(day(10)));
    assert_eq!(last["nights"][0]["remaining"], 3);
    assert_eq!(last["nights"][0]["rate_cents"], RATE);
    let log = app.get("/v1/webhooks/pms/deliveries", Some(ADMIN)).await;
    let log = log.assert_status(200);
    let deliveries = log["deliveries"].as_array().expect("deliveries");
    assert_eq!(deliveries.len(), hits.len());
    assert!(deliveries
        .iter()
        .all(|d| d["state"] == "delivered" && d["attempts"] == 1));
    app.finish().await;
}

#[tokio::test]
async fn a_receiver_failing_three_times_gets_one_delivery_four_times_with_one_id_before_the_next() {
    // Arrange: the receiver answers 500 three times, then 200.
    let receiver = Receiver::start().await;
    receiver.answer(&[500, 500, 500]);
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    subscribe(
        &app,
        "crm",
        &json!({"url": receiver.url, "events": ["reservation.held", "reservation.confirmed"],
                "hotel_ids": [HOTEL], "secret": SECRET}),
    )
    .await
    .assert_status(200);
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    make_deliveries(&app).await;

    // Act: the first attempt fails; the stay is confirmed meanwhile; retries follow.
    let first = send(&app, &sender_config(), chrono::Duration::seconds(0)).await;
    app.confirm(WEB, "pay", &id, "tok_ok")
        .await
        .assert_status(200);
    make_deliveries(&app).await;
    let rest = send(&app, &sender_config(), chrono::Duration::seconds(10)).await;

    // Assert
    assert_eq!(first.retrying, 1);
    let hits = receiver.hits();
    assert_eq!(
        types(&hits),
        [
            "reservation.held",
            "reservation.held",
            "reservation.held",
            "reservation.held",
            "reservation.confirmed"
        ],
        "the confirmation waits for the hold's delivery"
    );
    assert!(
        hits[..4].iter().all(|h| h.id == hits[0].id),
        "one id for every attempt"
    );
    assert_ne!(hits[4].id, hits[0].id);
    assert!(hits.iter().all(verifies));
    assert_eq!(rest.delivered, 2);
    let log = app.get("/v1/webhooks/crm/deliveries", Some(ADMIN)).await;
    let log = log.assert_status(200);
    let held = log["deliveries"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["type"] == "reservation.held"))
        .expect("the hold's delivery")
        .clone();
    assert_eq!(held["state"], "delivered");
    assert_eq!(held["attempts"], 4);
    assert_eq!(held["last_status"], 200);
    app.finish().await;
}

#[tokio::test]
async fn a_receiver_that_never_answers_is_paused_and_gets_what_it_missed_once_resumed() {
    // Arrange: paused after 3 failed attempts in a row.
    let receiver = Receiver::start().await;
    receiver.hang(true);
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let body = json!({"url": receiver.url, "events": ["reservation.held"], "secret": SECRET});
    subscribe(&app, "slow", &body).await.assert_status(200);
    let config = SenderConfig {
        pause_after: 3,
        ..sender_config()
    };

    // Act
    app.hold_ok(WEB, "hold-1", &hold_body(day(10), day(12), 1))
        .await;
    make_deliveries(&app).await;
    let failing = send(&app, &config, chrono::Duration::seconds(10)).await;
    let paused = app.get("/v1/webhooks/slow/deliveries", Some(ADMIN)).await;
    // Committed while it is paused: made, and kept for it.
    app.hold_ok(WEB, "hold-2", &hold_body(day(11), day(13), 1))
        .await;
    make_deliveries(&app).await;
    let while_paused = send(&app, &config, chrono::Duration::seconds(10)).await;
    receiver.hang(false);
    subscribe(&app, "slow", &body).await.assert_status(200);
    let resumed = send(&app, &config, chrono::Duration::seconds(10)).await;

    // Assert
    assert_eq!(failing.paused, 1, "{failing:?}");
    assert_eq!(failing.delivered, 0);
    assert!(paused.assert_status(200)["paused_at"].is_string());
    assert_eq!(paused.json["deliveries"][0]["state"], "retrying");
    assert!(
        paused.json["deliveries"][0]["last_status"].is_null(),
        "no answer: no status"
    );
    assert_eq!(
        while_paused,
        Delivered::default(),
        "nothing is sent to a paused subscriber"
    );
    assert_eq!(resumed.delivered, 2);
    let hits = receiver.hits();
    let ids: std::collections::BTreeSet<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(
        ids.len(),
        2,
        "two deliveries, the first tried 4 times: {hits:?}"
    );
    assert_eq!(hits.len(), 3 + 2);
    app.finish().await;
}

#[tokio::test]
async fn a_subscription_to_one_hotel_sees_nothing_of_another() {
    // Arrange
    let receiver = Receiver::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    app.put_hotel(
        OTHER_HOTEL,
        &json!({"name": "Hotel Sena", "city": "Paris", "timezone": "Europe/Paris"}),
    )
    .await
    .assert_status(200);
    app.put_room_type(
        OTHER_HOTEL,
        KING,
        &json!({"name": "king", "max_occupancy": 2}),
    )
    .await
    .assert_status(200);
    app.put_inventory(
        OTHER_HOTEL,
        KING,
        &json!({"start_date": day(10), "end_date": day(15), "total_rooms": 3,
                "overbooking_allowance": 0, "rate_cents": RATE}),
    )
    .await
    .assert_status(200);
    subscribe(
        &app,
        "tejo-only",
        &json!({"url": receiver.url, "events": ["*"], "hotel_ids": [HOTEL], "secret": SECRET}),
    )
    .await
    .assert_status(200);

    // Act
    let mut elsewhere = hold_body(day(10), day(12), 1);
    elsewhere["hotel_id"] = json!(OTHER_HOTEL);
    app.hold_ok(WEB, "other", &elsewhere).await;
    app.hold_ok(WEB, "here", &hold_body(day(10), day(12), 1))
        .await;
    make_deliveries(&app).await;
    send(&app, &sender_config(), chrono::Duration::seconds(1)).await;

    // Assert
    let hits = receiver.hits();
    assert!(!hits.is_empty());
    for hit in &hits {
        let data = &hit.json()["data"];
        assert_eq!(data["hotel_id"], HOTEL, "{}", hit.body);
    }
    app.finish().await;
}

#[tokio::test]
async fn the_subscription_api_is_the_admins_and_refuses_what_cannot_work() {
    // Arrange
    let app = spawn_app().await;
    let good = json!({"url": "http://127.0.0.1:9/hooks", "events": ["*"], "secret": SECRET});

    // Act
    let by_channel = app.put_json("/v1/webhooks/p", Some(WEB), &good).await;
    let bad_secret = subscribe(
        &app,
        "p",
        &json!({"url": "http://x/h", "events": ["*"], "secret": "hunter2"}),
    )
    .await;
    let bad_type = subscribe(
        &app,
        "p",
        &json!({"url": "http://x/h", "events": ["room.sold"], "secret": SECRET}),
    )
    .await;
    let bad_url = subscribe(
        &app,
        "p",
        &json!({"url": "file:///etc/passwd", "events": ["*"], "secret": SECRET}),
    )
    .await;
    let bad_id = subscribe(&app, "no%20spaces", &good).await;
    let created = subscribe(&app, "p", &good).await;
    let log = app.get("/v1/webhooks/p/deliveries", Some(ADMIN)).await;
    let unknown_log = app.get("/v1/webhooks/nobody/deliveries", Some(ADMIN)).await;
    let retry_unknown = Reply::of(
        app.client
            .post(app.url("/v1/webhooks/p/deliveries/msg_x/retry"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("retry"),
    )
    .await;
    let deleted = app
        .client
        .delete(app.url("/v1/webhooks/p"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("delete");
    let deleted_again = Reply::of(
        app.client
            .delete(app.url("/v1/webhooks/p"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .expect("delete"),
    )
    .await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_subscriptions")
        .fetch_one(&app.db.pool)
        .await
        .expect("count");

    // Assert
    by_channel.assert_error(403, "forbidden");
    assert_eq!(
        bad_secret.assert_error(422, "invalid_request")["field"],
        "secret"
    );
    assert_eq!(
        bad_type.assert_error(422, "invalid_request")["field"],
        "events"
    );
    assert_eq!(bad_url.assert_error(422, "invalid_request")["field"], "url");
    assert_eq!(
        bad_id.assert_error(422, "invalid_request")["field"],
        "subscription_id"
    );
    let created = created.assert_status(200);
    assert_eq!(created["events"], json!(["*"]));
    assert!(created.get("secret").is_none(), "the secret is never shown");
    assert_eq!(log.assert_status(200)["deliveries"], json!([]));
    unknown_log.assert_error(404, "not_found");
    retry_unknown.assert_error(404, "not_found");
    assert_eq!(deleted.status().as_u16(), 204);
    deleted_again.assert_error(404, "not_found");
    assert_eq!(rows, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_running_server_sends_webhooks_and_emails_on_its_own() {
    // Arrange: `reservations serve` with its projections and workers, a partner and a
    // mail server.
    let receiver = Receiver::start().await;
    let sink = SmtpSink::start().await;
    let db = TestDb::new().await;
    let server = ServerProcess::start(
        &db,
        &[
            ("SMTP_URL", sink.url()),
            ("MAIL_POLL_MS", "50".to_owned()),
            ("WEBHOOK_POLL_MS", "50".to_owned()),
            ("PROJECTION_GATHER_MS", "0".to_owned()),
            ("SIM_GATEWAY_LATENCY_MS", "0".to_owned()),
        ],
    )
    .await;
    server
        .call(
            reqwest::Method::PUT,
            "/v1/webhooks/pms",
            ADMIN,
            None,
            Some(&json!({"url": receiver.url, "events": ["reservation.confirmed"], "secret": SECRET})),
        )
        .await
        .assert_status(200);
    server.seed_hotel(day(10), 5, 2).await;

    // Act
    let id = server
        .hold_and_confirm(&hold_body(day(10), day(12), 1))
        .await;
    let mails = sink.wait_for(1).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while receiver.hits().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Assert
    let hits = receiver.hits();
    assert_eq!(types(&hits), ["reservation.confirmed"]);
    assert!(verifies(&hits[0]));
    assert_eq!(hits[0].json()["data"]["reservation_id"], id.as_str());
    assert_eq!(mails.len(), 1);
    assert!(mails[0].raw.contains(&id));
    drop(server);
    db.drop_database().await;
}

#[tokio::test]
async fn four_senders_racing_send_each_delivery_once() {
    // Arrange: forty stays held, one delivery each.
    let receiver = Receiver::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 100).await;
    subscribe(
        &app,
        "race",
        &json!({"url": receiver.url, "events": ["reservation.held"], "secret": SECRET}),
    )
    .await
    .assert_status(200);
    for n in 0..40 {
        app.hold_ok(WEB, &format!("hold-{n}"), &hold_body(day(10), day(12), 1))
            .await;
    }
    make_deliveries(&app).await;
    app.clock.advance(chrono::Duration::seconds(60));

    // Act: four senders at once, small batches, until nothing is due.
    let client = loopback_client();
    let config = sender_config();
    let mut delivered = 0;
    for _ in 0..10 {
        let pass = || send_due(&app.db.pool, &client, &config, app.now(), 5);
        let (a, b, c, d) = tokio::join!(pass(), pass(), pass(), pass());
        let passes = [a, b, c, d].map(|p| p.expect("send pass"));
        delivered += passes.iter().map(|p| p.delivered).sum::<usize>();
    }

    // Assert
    let hits = receiver.hits();
    let ids: std::collections::BTreeSet<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(hits.len(), 40, "each delivery sent once");
    assert_eq!(ids.len(), 40);
    assert_eq!(delivered, 40);
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'")
            .fetch_one(&app.db.pool)
            .await
            .expect("count");
    assert_eq!(pending, 0);
    app.finish().await;
}

#[tokio::test]
async fn retention_deletes_deliveries_delivered_long_ago_and_keeps_those_still_owed() {
    // Arrange: one delivery delivered, one still owed (its receiver fails).
    let receiver = Receiver::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    let body = json!({"url": receiver.url, "events": ["reservation.held"], "secret": SECRET});
    subscribe(&app, "kept", &body).await.assert_status(200);
    app.hold_ok(WEB, "hold-1", &hold_body(day(10), day(12), 1))
        .await;
    make_deliveries(&app).await;
    send(&app, &sender_config(), chrono::Duration::seconds(1)).await;
    receiver.answer(&[500; 100]);
    app.hold_ok(WEB, "hold-2", &hold_body(day(11), day(13), 1))
        .await;
    make_deliveries(&app).await;
    send(&app, &sender_config(), chrono::Duration::seconds(0)).await;

    // Act
    let early = app.retention_after(1).await;
    let late = app.retention_after(30).await;

    // Assert
    assert_eq!(early.webhook_deliveries, 0);
    assert_eq!(late.webhook_deliveries, 1);
    let log = app.get("/v1/webhooks/kept/deliveries", Some(ADMIN)).await;
    let log = log.assert_status(200);
    let states: Vec<&str> = log["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .filter_map(|d| d["state"].as_str())
        .collect();
    assert_eq!(states, ["retrying"]);
    app.finish().await;
}

#[tokio::test]
async fn a_url_on_loopback_or_a_private_network_is_refused_unless_the_operator_allows_it() {
    // Arrange: a server with no allowed host, and a receiver on loopback.
    let receiver = Receiver::start().await;
    let app = spawn_app_with(|settings| settings.webhook_allowed_hosts = String::new()).await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next());
    let localhost = format!("http://localhost:{}/hooks", port.expect("a port"));
    let before = app.count("webhook_subscriptions").await;

    // Act
    let refused: Vec<(String, Reply)> = {
        let mut replies = Vec::new();
        for url in [
            receiver.url.clone(),
            localhost.clone(),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "http://10.0.0.7/hooks".to_owned(),
            "http://[::1]:8080/hooks".to_owned(),
            "http://[::ffff:127.0.0.1]/hooks".to_owned(),
        ] {
            let body = json!({"url": url, "events": ["*"], "secret": SECRET});
            replies.push((url, subscribe(&app, "ssrf", &body).await));
        }
        replies
    };

    // Assert: each refused naming the field, and nothing stored.
    for (url, reply) in &refused {
        let body = reply.assert_error(422, "invalid_request");
        assert_eq!(body["field"], "url", "{url}: {body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("WEBHOOK_ALLOWED_HOSTS")),
            "{url}: {body}"
        );
    }
    assert_eq!(app.count("webhook_subscriptions").await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_delivery_to_a_name_that_resolves_to_loopback_is_not_sent_without_the_operators_leave() {
    // Arrange: a subscription made while "localhost" was allowed, and a booking to
    // deliver.
    let receiver = Receiver::start().await;
    let app = spawn_app_with(|settings| settings.webhook_allowed_hosts = "localhost".into()).await;
    app.seed_hotel(day(10), 5, 3).await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next());
    let url = format!("http://localhost:{}/hooks", port.expect("a port"));
    subscribe(
        &app,
        "renamed",
        &json!({"url": url, "events": ["*"], "secret": SECRET}),
    )
    .await
    .assert_status(200);
    app.hold_ok(WEB, "h", &hold_body(day(10), day(12), 1)).await;
    make_deliveries(&app).await;
    app.clock.advance(chrono::Duration::seconds(60));

    // Act: a sender whose operator allows no private host.
    let public_only = WebhookClient::new(Destinations::default()).expect("client");
    let pass = send_due(&app.db.pool, &public_only, &sender_config(), app.now(), 10)
        .await
        .expect("a pass");

    // Assert: the name was resolved, its loopback address refused, nothing sent.
    assert_eq!(pass.delivered, 0);
    assert!(receiver.hits().is_empty(), "{:?}", receiver.hits().len());
    let log = app
        .get("/v1/webhooks/renamed/deliveries", Some(ADMIN))
        .await;
    let tried: Vec<String> = log.assert_status(200)["deliveries"]
        .as_array()
        .expect("deliveries")
        .iter()
        .filter(|d| d["attempts"] == 1)
        .filter_map(|d| d["last_error"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tried.len(), pass.retrying, "{}", log.text);
    assert!(pass.retrying > 0);
    for error in tried {
        assert!(
            error.contains("localhost is 127.0.0.1, a loopback"),
            "{error}"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn a_subscriptions_secret_is_stored_sealed_and_still_signs_its_deliveries() {
    // Arrange
    let receiver = Receiver::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 3).await;
    subscribe(
        &app,
        "pms",
        &json!({"url": receiver.url, "events": ["reservation.held"], "secret": SECRET}),
    )
    .await
    .assert_status(200);
    let stored = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT secret FROM webhook_subscriptions WHERE subscription_id = 'pms'",
        )
        .fetch_one(&app.db.pool)
        .await
        .expect("the row")
    };
    let sealed = stored().await;
    // A secret stored in the clear before sealing existed is sealed at the next start.
    sqlx::query("UPDATE webhook_subscriptions SET secret = $1")
        .bind(SECRET)
        .execute(&app.db.pool)
        .await
        .expect("a clear secret");
    let resealed = app::webhooks::secrets::seal_clear(&app.db.pool)
        .await
        .expect("sealed");

    // Act: a delivery is signed with the secret the row seals.
    app.hold_ok(WEB, "h", &hold_body(day(10), day(12), 1)).await;
    make_deliveries(&app).await;
    send(&app, &sender_config(), chrono::Duration::seconds(1)).await;

    // Assert
    let secret_text = SECRET.trim_start_matches("whsec_");
    for row in [&sealed, &stored().await] {
        assert!(row.starts_with("sealed:v1:"), "{row}");
        assert!(!row.contains(secret_text), "{row}");
    }
    assert_eq!(resealed, 1);
    let hits = receiver.hits();
    assert_eq!(hits.len(), 1);
    assert!(
        verifies(&hits[0]),
        "signed with the subscription's own secret"
    );
    let listed = app.get("/v1/webhooks/pms", Some(ADMIN)).await;
    assert!(!listed.text.contains(secret_text), "{}", listed.text);
    app.finish().await;
}

#[tokio::test]
async fn a_partner_hears_of_a_block_set_up_changed_and_released_and_its_rooms_leave_the_ari() {
    // Arrange
    let receiver = Receiver::start().await;
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 10).await;
    subscribe(
        &app,
        "blocks",
        &json!({"url": receiver.url,
                "events": ["block.created", "block.changed", "block.released", "inventory.changed"],
                "secret": SECRET}),
    )
    .await
    .assert_status(200);
    let block = |rooms: i64| {
        json!({"name": "Acme offsite", "room_type_id": KING, "start_date": day(10),
               "end_date": day(12), "rooms": rooms, "rate_cents": 15_000,
               "release_date": day(5)})
    };
    let path = format!("/v1/hotels/{HOTEL}/blocks/ACME");

    // Act
    app.put_json(&path, Some(ADMIN), &block(4))
        .await
        .assert_status(200);
    // Made now, its ARI is the block's first state (a snapshot at the delivery's making).
    make_deliveries(&app).await;
    app.put_json(&path, Some(ADMIN), &block(6))
        .await
        .assert_status(200);
    app.send(app.request(reqwest::Method::DELETE, &path, Some(ADMIN)))
        .await
        .assert_status(200);
    make_deliveries(&app).await;
    send(&app, &sender_config(), chrono::Duration::seconds(1)).await;

    // Assert
    let hits = receiver.hits();
    assert!(hits.iter().all(verifies));
    let blocks: Vec<Value> = hits
        .iter()
        .map(Hit::json)
        .filter(|h| h["type"].as_str().is_some_and(|t| t.starts_with("block.")))
        .collect();
    let kinds: Vec<&str> = blocks.iter().filter_map(|h| h["type"].as_str()).collect();
    assert_eq!(kinds, ["block.created", "block.changed", "block.released"]);
    let created = &blocks[0]["data"];
    assert_eq!(created["code"], "ACME");
    assert_eq!(created["rooms"], 4);
    assert_eq!(created["currency"], "EUR");
    assert_eq!(created["start_date"], json!(day(10)));
    assert_eq!(blocks[1]["data"]["rooms"], 6);
    assert_eq!(blocks[2]["data"]["released_by"], "staff");
    // What a channel manager sells: the block's rooms out while it holds.
    let ari: Vec<(i64, i64)> = hits
        .iter()
        .map(Hit::json)
        .filter(|h| h["type"] == "inventory.changed")
        .map(|h| {
            let night = &h["data"]["nights"][0];
            (
                night["remaining"].as_i64().expect("remaining"),
                night["blocked"].as_i64().expect("blocked"),
            )
        })
        .collect();
    assert_eq!(
        ari.first(),
        Some(&(6, 4)),
        "the block's rooms are not for sale"
    );
    assert_eq!(ari.last(), Some(&(10, 0)), "released: all for sale again");
    app.finish().await;
}
