//! The HTTP harness: a server per test on its own fresh database, a clock the test
//! moves, and a typed client for every endpoint of the contract.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use app::clock::ManualClock;
use app::payments::simulated::{SimulatedConfig, SimulatedGateway};
use app::payments::PaymentService;
use chrono::{DateTime, Days, NaiveDate, SubsecRound, Utc};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use reservations::startup::{Application, Settings};
use serde_json::{json, Value};
use sqlx::Row;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::*;

pub const ADMIN: &str = "admin-token-1";
pub const WEB: &str = "web-token-1";
pub const MOBILE: &str = "mobile-token-1";
pub const AUDITOR: &str = "audit-token-1";
pub const TOKENS: &str =
    "admin-token-1:admin:staff,web-token-1:channel:web,mobile-token-1:channel:mobile,audit-token-1:auditor";

/// The plans `TestApp::two_plans` sets: a flexible one and one derived from it.
pub const FLEXIBLE: i64 = 1;
pub const NON_REFUNDABLE: i64 = 2;

/// The nightly rate `TestApp::seed_hotel` sets.
pub const RATE: i64 = 18_000;
/// The hold time-to-live the server runs with (the default).
pub const HOLD_TTL_SECONDS: i64 = 900;

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub db: TestDb,
    pub clock: ManualClock,
    /// The payment saga the server runs; tests run its workers' passes themselves.
    pub payments: PaymentService,
    /// The simulated payment provider: its ledger, and webhooks held until released.
    pub gateway: SimulatedGateway,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
}

/// The webhook secret the test servers share with their simulated provider.
pub const WEBHOOK_SECRET: &str = "test-webhook-secret";

/// Starts a server on a free port, on a fresh migrated database, with the test tokens
/// and a manual clock set to the current time.
pub async fn spawn_app() -> TestApp {
    spawn_app_configured(|_| {}, test_gateway()).await
}

/// A simulated provider that answers at once and holds its webhooks until the test
/// releases them.
pub fn test_gateway() -> SimulatedConfig {
    SimulatedConfig {
        latency: Duration::ZERO,
        webhook_delay: None,
        webhook_copies: 1,
        shuffle_webhooks: false,
    }
}

/// As [`spawn_app`], with `configure` given the last word on the settings.
pub async fn spawn_app_with(configure: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_app_configured(configure, test_gateway()).await
}

/// As [`spawn_app`], with settings adjusted and a given provider.
pub async fn spawn_app_configured(
    adjust: impl FnOnce(&mut Settings),
    gateway: SimulatedConfig,
) -> TestApp {
    spawn_app_on(TestDb::new().await, adjust, gateway).await
}

/// As [`spawn_app_configured`], on a given database.
pub async fn spawn_app_on(
    db: TestDb,
    adjust: impl FnOnce(&mut Settings),
    gateway: SimulatedConfig,
) -> TestApp {
    let mut settings = Settings::for_database(&db.url);
    settings.listen_addr = "127.0.0.1:0".into();
    settings.api_tokens = Some(TOKENS.into());
    // The contract tests read availability from PostgreSQL (deterministic `as_of` from
    // the test clock); the Redis read model has its own tests in `read_side`.
    settings.run_projections = false;
    // Tests run the sweeper, recovery and outbox passes themselves, when they choose.
    settings.run_workers = false;
    settings.payment_webhook_secret = Some(WEBHOOK_SECRET.into());
    settings.payment_timeout_ms = 300;
    // Most tests book as one guest many times within minutes (a hundred racing clients,
    // replays, whole lifecycles), which the default per-guest hold limit (3 per 15
    // minutes) would refuse. The limit has its own tests (`rate_limit`), which spawn
    // with the default settings.
    settings.hold_limit_per_guest = 1_000_000;
    // The webhook tests' receivers listen on loopback, which partners' URLs may not
    // name unless allowed (the guard has its own test in `webhooks`).
    settings.webhook_allowed_hosts = "127.0.0.1".into();
    adjust(&mut settings);
    let clock = ManualClock::new(Utc::now().trunc_subsecs(6));
    let gateway = SimulatedGateway::new(gateway);
    let app = Application::build_with(settings, Arc::new(clock.clone()), gateway.clone())
        .await
        .expect("build the application");
    let payments = app.payments().clone();
    let address = format!("http://127.0.0.1:{}", app.port());
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async move {
        let _ = rx.await;
    }));
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client");
    TestApp {
        address,
        client,
        db,
        clock,
        payments,
        gateway,
        shutdown: Some(tx),
        server: Some(server),
    }
}

/// A response read whole: status, headers, the body as sent, and the body as JSON
/// (`Value::Null` when it is not JSON).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Reply {
    pub async fn of(response: Response) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("response body");
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Self {
            status,
            headers,
            text,
            json,
        }
    }

    /// Asserts the status and the contract's error shape, with the given code; returns
    /// the body.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) -> &Value {
        assert_eq!(self.status.as_u16(), status, "status of {}", self.text);
        assert_error_shape(self);
        assert_eq!(self.json["error"], code, "error code of {}", self.text);
        &self.json
    }

    #[track_caller]
    pub fn assert_status(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "status of {}", self.text);
        &self.json
    }

    pub fn str(&self, field: &str) -> String {
        self.json[field]
            .as_str()
            .unwrap_or_else(|| panic!("no string {field} in {}", self.text))
            .to_owned()
    }
}

/// `{"error": "<code>", "message": "<text>", ...}` with non-empty strings, served as JSON.
#[track_caller]
pub fn assert_error_shape(reply: &Reply) {
    assert!(
        reply.json.is_object(),
        "error body is not a JSON object: {:?}",
        reply.text
    );
    let code = reply.json["error"].as_str().unwrap_or_default();
    let message = reply.json["message"].as_str().unwrap_or_default();
    assert!(!code.is_empty(), "no \"error\" in {}", reply.text);
    assert!(!message.is_empty(), "no \"message\" in {}", reply.text);
    let content_type = reply
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "error served as {content_type:?}"
    );
}

/// A date `days` from the app's clock (which starts at the current time).
pub fn date(days: u64) -> String {
    day(days).to_string()
}

pub fn plus_days(date: NaiveDate, days: u64) -> NaiveDate {
    date.checked_add_days(Days::new(days)).expect("date")
}

/// A valid hold of king rooms at hotel 812.
pub fn hold_body(start: NaiveDate, end: NaiveDate, rooms: i64) -> Value {
    json!({
        "hotel_id": HOTEL,
        "room_type_id": KING,
        "start_date": start,
        "end_date": end,
        "rooms": rooms,
        "guest": {"name": "Ana Lima", "email": "ana@example.com"},
    })
}

/// What the database holds: everything a refused request must leave untouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub events: i64,
    pub room_nights: Vec<String>,
    pub allocations: Vec<String>,
    pub reservations: Vec<String>,
    pub hotels: Vec<String>,
    pub room_types: Vec<String>,
}

async fn rows_as_text(pool: &sqlx::PgPool, sql: &str) -> Vec<String> {
    sqlx::query(sql)
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect()
}

impl TestApp {
    /// Moves the clock `days` on and runs one retention pass with the default
    /// retention (what the tests of deleting old rows compare).
    pub async fn retention_after(&self, days: i64) -> app::sweeper::Retained {
        self.clock.advance(chrono::Duration::days(days));
        app::sweeper::retention_once(self.payments.commands(), app::sweeper::Retention::default())
            .await
            .expect("a retention pass")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// A request with a bearer token (or none).
    pub fn request(&self, method: Method, path: &str, token: Option<&str>) -> RequestBuilder {
        let builder = self.client.request(method, self.url(path));
        match token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    pub async fn send(&self, builder: RequestBuilder) -> Reply {
        Reply::of(builder.send().await.expect("request sent")).await
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Reply {
        self.send(self.request(Method::GET, path, token)).await
    }

    pub async fn put_json(&self, path: &str, token: Option<&str>, body: &Value) -> Reply {
        self.send(self.request(Method::PUT, path, token).json(body))
            .await
    }

    /// A state-changing POST with an Idempotency-Key.
    pub async fn post_json(&self, path: &str, token: &str, key: &str, body: &Value) -> Reply {
        self.send(
            self.request(Method::POST, path, Some(token))
                .header("Idempotency-Key", key)
                .json(body),
        )
        .await
    }

    // Catalog and inventory (admin).

    pub async fn put_hotel(&self, hotel_id: i64, body: &Value) -> Reply {
        self.put_json(&format!("/v1/hotels/{hotel_id}"), Some(ADMIN), body)
            .await
    }

    pub async fn put_room_type(&self, hotel_id: i64, room_type_id: i64, body: &Value) -> Reply {
        self.put_json(
            &format!("/v1/hotels/{hotel_id}/room-types/{room_type_id}"),
            Some(ADMIN),
            body,
        )
        .await
    }

    pub async fn put_inventory(&self, hotel_id: i64, room_type_id: i64, body: &Value) -> Reply {
        self.put_json(
            &format!("/v1/hotels/{hotel_id}/room-types/{room_type_id}/inventory"),
            Some(ADMIN),
            body,
        )
        .await
    }

    pub async fn put_rate_plan(&self, hotel_id: i64, rate_plan_id: i64, body: &Value) -> Reply {
        self.put_json(
            &format!("/v1/hotels/{hotel_id}/rate-plans/{rate_plan_id}"),
            Some(ADMIN),
            body,
        )
        .await
    }

    pub async fn put_plan_rates(&self, hotel_id: i64, rate_plan_id: i64, body: &Value) -> Reply {
        self.put_json(
            &format!("/v1/hotels/{hotel_id}/rate-plans/{rate_plan_id}/rates"),
            Some(ADMIN),
            body,
        )
        .await
    }

    pub async fn put_restrictions(&self, hotel_id: i64, room_type_id: i64, body: &Value) -> Reply {
        self.put_json(
            &format!("/v1/hotels/{hotel_id}/room-types/{room_type_id}/restrictions"),
            Some(ADMIN),
            body,
        )
        .await
    }

    pub async fn put_ari(&self, hotel_id: i64, body: &Value) -> Reply {
        self.put_json(&format!("/v1/hotels/{hotel_id}/ari"), Some(ADMIN), body)
            .await
    }

    /// A flexible plan (house policy, the base rate) and a non-refundable one 10% under
    /// it, both selling `room_type`.
    pub async fn two_plans(&self, hotel_id: i64, room_type: i64) {
        self.put_rate_plan(
            hotel_id,
            FLEXIBLE,
            &json!({"name": "Flexible", "room_type_ids": [room_type]}),
        )
        .await
        .assert_status(200);
        self.put_rate_plan(
            hotel_id,
            NON_REFUNDABLE,
            &json!({"name": "Non-refundable", "room_type_ids": [room_type],
                    "cancellation_policy": {"refundable": false},
                    "derived_from": {"rate_plan_id": FLEXIBLE, "adjust_percent": -10}}),
        )
        .await
        .assert_status(200);
    }

    /// Hotel 812 "Hotel Tejo" in Lisbon, room type 3 "king", `rooms` rooms at 180.00 on
    /// `nights` nights from `first`.
    pub async fn seed_hotel(&self, first: NaiveDate, nights: u64, rooms: i64) {
        self.put_hotel(
            HOTEL,
            &json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon"}),
        )
        .await
        .assert_status(200);
        self.put_room_type(HOTEL, KING, &json!({"name": "king", "max_occupancy": 2}))
            .await
            .assert_status(200);
        self.put_inventory(
            HOTEL,
            KING,
            &json!({
                "start_date": first,
                "end_date": plus_days(first, nights),
                "total_rooms": rooms,
                "overbooking_allowance": 0,
                "rate_cents": RATE,
            }),
        )
        .await
        .assert_status(200);
    }

    // Browse (any role).

    pub async fn get_hotel(&self, token: &str, hotel_id: i64) -> Reply {
        self.get(&format!("/v1/hotels/{hotel_id}"), Some(token))
            .await
    }

    pub async fn search(&self, token: &str, city: &str) -> Reply {
        self.send(
            self.request(Method::GET, "/v1/hotels", Some(token))
                .query(&[("city", city)]),
        )
        .await
    }

    pub async fn availability(
        &self,
        token: &str,
        hotel_id: i64,
        start: NaiveDate,
        end: NaiveDate,
        rooms: Option<i64>,
    ) -> Reply {
        let mut query = vec![
            ("start_date", start.to_string()),
            ("end_date", end.to_string()),
        ];
        if let Some(rooms) = rooms {
            query.push(("rooms", rooms.to_string()));
        }
        self.send(
            self.request(
                Method::GET,
                &format!("/v1/hotels/{hotel_id}/availability"),
                Some(token),
            )
            .query(&query),
        )
        .await
    }

    // Reservations (channel).

    pub async fn hold(&self, token: &str, key: &str, body: &Value) -> Reply {
        self.post_json("/v1/reservations", token, key, body).await
    }

    /// Holds and expects 201; returns the reservation id.
    pub async fn hold_ok(&self, token: &str, key: &str, body: &Value) -> String {
        let reply = self.hold(token, key, body).await;
        reply.assert_status(201);
        reply.str("reservation_id")
    }

    pub async fn confirm(&self, token: &str, key: &str, id: &str, payment_token: &str) -> Reply {
        self.post_json(
            &format!("/v1/reservations/{id}/confirm"),
            token,
            key,
            &json!({"payment_token": payment_token}),
        )
        .await
    }

    /// Posts a webhook body signed with the shared secret.
    pub async fn webhook(&self, body: &Value) -> Reply {
        let bytes = serde_json::to_vec(body).expect("json");
        let signature = app::payments::signature::sign(WEBHOOK_SECRET.as_bytes(), &bytes);
        self.send(
            self.request(Method::POST, "/v1/payments/webhook", None)
                .header(CONTENT_TYPE, "application/json")
                .header("x-signature", signature)
                .body(bytes),
        )
        .await
    }

    pub async fn get_reservation(&self, token: &str, id: &str) -> Reply {
        self.get(&format!("/v1/reservations/{id}"), Some(token))
            .await
    }

    pub async fn cancel(&self, token: &str, key: &str, id: &str, body: &Value) -> Reply {
        self.post_json(&format!("/v1/reservations/{id}/cancel"), token, key, body)
            .await
    }

    pub async fn check_in(&self, token: &str, key: &str, id: &str) -> Reply {
        self.post_empty(&format!("/v1/reservations/{id}/check-in"), token, key)
            .await
    }

    pub async fn check_out(&self, token: &str, key: &str, id: &str) -> Reply {
        self.post_empty(&format!("/v1/reservations/{id}/check-out"), token, key)
            .await
    }

    pub async fn no_show(&self, token: &str, key: &str, id: &str) -> Reply {
        self.post_empty(&format!("/v1/reservations/{id}/no-show"), token, key)
            .await
    }

    /// A POST without a body, as the stay's staff actions are.
    async fn post_empty(&self, path: &str, token: &str, key: &str) -> Reply {
        self.send(
            self.client
                .post(self.url(path))
                .bearer_auth(token)
                .header("Idempotency-Key", key),
        )
        .await
    }

    pub async fn change_dates(&self, token: &str, key: &str, id: &str, body: &Value) -> Reply {
        self.post_json(
            &format!("/v1/reservations/{id}/change-dates"),
            token,
            key,
            body,
        )
        .await
    }

    pub async fn reservation_events(&self, token: &str, id: &str) -> Reply {
        self.get(&format!("/v1/reservations/{id}/events"), Some(token))
            .await
    }

    // Events (auditor).

    pub async fn events_feed(&self, token: &str, after: Option<i64>, limit: Option<i64>) -> Reply {
        let mut query = Vec::new();
        if let Some(after) = after {
            query.push(("after", after.to_string()));
        }
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        self.send(
            self.request(Method::GET, "/v1/events", Some(token))
                .query(&query),
        )
        .await
    }

    // The database, read directly.

    /// Rooms taken (held + confirmed) on a night of king rooms at hotel 812.
    pub async fn taken(&self, night: NaiveDate) -> i64 {
        self.taken_of(KING, night).await
    }

    /// Rooms taken (held + confirmed) on a night of a room type at hotel 812.
    pub async fn taken_of(&self, room_type: i64, night: NaiveDate) -> i64 {
        sqlx::query_scalar(
            "SELECT coalesce(sum(confirmed + held), 0)::bigint FROM room_nights
              WHERE hotel_id = $1 AND room_type_id = $2 AND night = $3",
        )
        .bind(HOTEL)
        .bind(room_type)
        .bind(night)
        .fetch_one(&self.db.pool)
        .await
        .expect("taken")
    }

    /// Rooms taken per night, over every room type and hotel.
    pub async fn taken_by_night(&self) -> BTreeMap<NaiveDate, i64> {
        sqlx::query_as::<_, (NaiveDate, i64)>(
            "SELECT night, sum(confirmed + held)::bigint FROM room_nights GROUP BY night",
        )
        .fetch_all(&self.db.pool)
        .await
        .expect("taken by night")
        .into_iter()
        .collect()
    }

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.db.pool)
            .await
            .expect("count")
    }

    pub async fn snapshot(&self) -> Snapshot {
        let pool = &self.db.pool;
        Snapshot {
            events: self.count("events").await,
            room_nights: rows_as_text(pool, "SELECT n::text FROM room_nights n ORDER BY 1").await,
            allocations: rows_as_text(
                pool,
                "SELECT a::text FROM room_night_allocations a ORDER BY 1",
            )
            .await,
            reservations: rows_as_text(
                pool,
                "SELECT (reservation_id, start_date, end_date, rooms, status, total_cents,
                         version)::text FROM reservations ORDER BY 1",
            )
            .await,
            hotels: rows_as_text(
                pool,
                "SELECT (hotel_id, name, city, timezone, version)::text FROM hotels ORDER BY 1",
            )
            .await,
            room_types: rows_as_text(pool, "SELECT r::text FROM room_types r ORDER BY 1").await,
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        use app::clock::Clock;
        self.clock.now()
    }

    /// One pass of the capture worker at the clock's time, then the payment outbox
    /// delivered (as the server's worker loop does); how many captures were recorded.
    pub async fn capture_due(&self) -> usize {
        let captured = app::sweeper::capture_due_once(self.payments.commands(), 100)
            .await
            .expect("capture pass");
        self.deliver_payments().await;
        captured
    }

    /// Delivers the payment outbox until nothing is due (a refund waits for the capture
    /// before it, so one pass may not be enough).
    pub async fn deliver_payments(&self) {
        for _ in 0..5 {
            let delivered = self.payments.deliver_outbox(100).await.expect("outbox");
            if delivered.done == 0 && delivered.retrying == 0 {
                return;
            }
        }
    }

    /// One pass of the no-show worker at the clock's time with `grace`, then the
    /// payment outbox delivered; how many no-shows were recorded.
    pub async fn record_no_shows(&self, grace: chrono::Duration) -> usize {
        let recorded = app::sweeper::record_no_shows_once(self.payments.commands(), 100, grace)
            .await
            .expect("no-show pass");
        self.deliver_payments().await;
        recorded
    }

    /// Stops the server (letting in-flight requests finish) and drops the database.
    pub async fn finish(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        drop(self.client);
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        self.db.drop_database().await;
    }
}

/// A header from raw bytes (possibly not valid text), for malformed-request tests.
pub fn raw_header(name: &'static str, value: &[u8]) -> (HeaderName, HeaderValue) {
    (
        HeaderName::from_static(name),
        HeaderValue::from_bytes(value).expect("header value bytes"),
    )
}
