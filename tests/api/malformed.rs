//! Malformed and invalid requests, table-driven: each is answered with the expected 4xx
//! (never a 5xx), in the contract's error shape, and changes nothing in the database.

use chrono::{Days, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

/// 2^63: one more than the largest i64.
const TWO_POW_63: u64 = 1 << 63;

struct Case {
    name: String,
    method: Method,
    path: String,
    token: Option<&'static str>,
    idempotency_key: Option<Vec<u8>>,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
    status: u16,
}

impl Case {
    fn new(name: impl Into<String>, method: Method, path: impl Into<String>, status: u16) -> Self {
        Self {
            name: name.into(),
            method,
            path: path.into(),
            token: Some(WEB),
            idempotency_key: None,
            content_type: None,
            body: None,
            status,
        }
    }

    fn get(name: impl Into<String>, path: impl Into<String>, status: u16) -> Self {
        Self::new(name, Method::GET, path, status)
    }

    /// A state-changing POST as the web channel, with a fresh Idempotency-Key.
    fn post(name: impl Into<String>, path: impl Into<String>, body: &Value, status: u16) -> Self {
        let name = name.into();
        Self {
            idempotency_key: Some(format!("malformed {name}").into_bytes()),
            ..Self::new(name, Method::POST, path, status)
        }
        .json(body)
    }

    /// A hold (POST /v1/reservations).
    fn hold(name: impl Into<String>, body: &Value, status: u16) -> Self {
        Self::post(name, "/v1/reservations", body, status)
    }

    /// A PUT as admin.
    fn put(name: impl Into<String>, path: impl Into<String>, body: &Value, status: u16) -> Self {
        Self::new(name, Method::PUT, path, status)
            .token(Some(ADMIN))
            .json(body)
    }

    fn json(self, body: &Value) -> Self {
        self.raw("application/json", serde_json::to_vec(body).expect("JSON"))
    }

    fn raw(mut self, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        self.content_type = Some(content_type);
        self.body = Some(body.into());
        self
    }

    fn content_type(mut self, content_type: Option<&'static str>) -> Self {
        self.content_type = content_type;
        self
    }

    fn token(mut self, token: Option<&'static str>) -> Self {
        self.token = token;
        self
    }

    fn key(mut self, key: Option<&[u8]>) -> Self {
        self.idempotency_key = key.map(<[u8]>::to_vec);
        self
    }
}

/// A valid hold with one field replaced (a dotted path reaches into `guest`).
fn hold_with(field: &str, value: Value) -> Value {
    let mut body = hold_body(day(10), day(12), 1);
    match field.split_once('.') {
        Some((outer, inner)) => body[outer][inner] = value,
        None => body[field] = value,
    }
    body
}

fn hold_without(field: &str) -> Value {
    let mut body = hold_body(day(10), day(12), 1);
    body.as_object_mut().expect("object").remove(field);
    body
}

fn valid_hold_text() -> String {
    hold_body(day(10), day(12), 1).to_string()
}

fn hotel(name: &str, city: &str, timezone: &str) -> Value {
    json!({"name": name, "city": city, "timezone": timezone})
}

fn inventory(start: Value, end: Value, total_rooms: Value) -> Value {
    json!({"start_date": start, "end_date": end, "total_rooms": total_rooms, "rate_cents": RATE})
}

fn cases(id: &str) -> Vec<Case> {
    let yesterday = Utc::now()
        .date_naive()
        .checked_sub_days(Days::new(2))
        .expect("date");
    let holds = format!("/v1/reservations/{id}");
    let rt = format!("/v1/hotels/{HOTEL}/room-types/{KING}");
    let inv = format!("{rt}/inventory");
    let avail = format!("/v1/hotels/{HOTEL}/availability");
    let dates = format!("start_date={}&end_date={}", day(10), day(12));
    let big_name = "A".repeat(60 * 1024);
    let oversized = format!(
        r#"{{"padding": "{}", {}"#,
        "x".repeat(70 * 1024),
        &valid_hold_text()[1..]
    );
    vec![
        // Bodies that are not JSON, or not the request's JSON.
        Case::hold("invalid JSON", &json!(null), 400)
            .raw("application/json", r#"{"hotel_id": 812,"#),
        Case::hold("empty body", &json!(null), 400).raw("application/json", ""),
        Case::hold("trailing garbage", &json!(null), 400)
            .raw("application/json", format!("{} xyz", valid_hold_text())),
        Case::hold("JSON null", &json!(null), 422),
        Case::hold("JSON array", &json!([]), 422),
        Case::hold("JSON string", &json!("hold please"), 422),
        Case::hold("lone surrogate in the name", &json!(null), 400).raw(
            "application/json",
            valid_hold_text().replace("Ana Lima", "\\ud800"),
        ),
        Case::hold("duplicate field", &json!(null), 422).raw(
            "application/json",
            valid_hold_text().replacen('{', r#"{"rooms": 2, "#, 1),
        ),
        // Wrong types and missing fields.
        Case::hold(
            "hotel_id as a string",
            &hold_with("hotel_id", json!("812")),
            422,
        ),
        Case::hold("rooms as a string", &hold_with("rooms", json!("1")), 422),
        Case::hold("rooms as a fraction", &hold_with("rooms", json!(1.5)), 422),
        Case::hold("rooms as a boolean", &hold_with("rooms", json!(true)), 422),
        Case::hold(
            "start_date as a number",
            &hold_with("start_date", json!(20270601)),
            422,
        ),
        Case::hold("guest as a string", &hold_with("guest", json!("Ana")), 422),
        Case::hold(
            "guest name as null",
            &hold_with("guest.name", json!(null)),
            422,
        ),
        Case::hold("missing guest", &hold_without("guest"), 422),
        Case::hold("missing hotel_id", &hold_without("hotel_id"), 422),
        Case::hold("missing start_date", &hold_without("start_date"), 422),
        Case::hold("missing end_date", &hold_without("end_date"), 422),
        Case::hold("empty object", &json!({}), 422),
        // Huge and out-of-range numbers.
        Case::hold("rooms 1e30", &hold_with("rooms", json!(1e30)), 422),
        Case::hold("rooms 2^63", &hold_with("rooms", json!(TWO_POW_63)), 422),
        Case::hold("rooms i64::MAX", &hold_with("rooms", json!(i64::MAX)), 422),
        Case::hold("rooms i64::MIN", &hold_with("rooms", json!(i64::MIN)), 422),
        Case::hold(
            "rooms 2^32 + 1",
            &hold_with("rooms", json!(4_294_967_297_i64)),
            422,
        ),
        Case::hold(
            "hotel_id 2^63",
            &hold_with("hotel_id", json!(TWO_POW_63)),
            422,
        ),
        Case::hold("hotel_id 1e30", &hold_with("hotel_id", json!(1e30)), 422),
        Case::hold(
            "hotel_id i64::MAX",
            &hold_with("hotel_id", json!(i64::MAX)),
            422,
        ),
        Case::hold(
            "room_type_id 2^63",
            &hold_with("room_type_id", json!(TWO_POW_63)),
            422,
        ),
        Case::hold(
            "expected_total_cents 2^63",
            &hold_with("expected_total_cents", json!(TWO_POW_63)),
            422,
        ),
        Case::hold(
            "expected_total_cents 1e30",
            &hold_with("expected_total_cents", json!(1e30)),
            422,
        ),
        Case::hold(
            "expected_total_cents negative",
            &hold_with("expected_total_cents", json!(-1)),
            409,
        ),
        // Invalid rooms, ids and dates.
        Case::hold("zero rooms", &hold_with("rooms", json!(0)), 422),
        Case::hold("negative rooms", &hold_with("rooms", json!(-1)), 422),
        Case::hold("eleven rooms", &hold_with("rooms", json!(11)), 422),
        Case::hold("hotel_id 0", &hold_with("hotel_id", json!(0)), 422),
        Case::hold(
            "negative hotel_id",
            &hold_with("hotel_id", json!(-812)),
            422,
        ),
        Case::hold(
            "negative room_type_id",
            &hold_with("room_type_id", json!(-3)),
            422,
        ),
        Case::hold("31 nights", &hold_body(day(10), day(41), 1), 422),
        Case::hold("start in the past", &hold_body(yesterday, day(3), 1), 422),
        Case::hold(
            "start 732 days ahead",
            &hold_body(day(732), day(733), 1),
            422,
        ),
        Case::hold("year 0", &hold_with("start_date", json!("0000-01-01")), 422),
        Case::hold(
            "February 30th",
            &hold_with("end_date", json!("2027-02-30")),
            422,
        ),
        Case::hold(
            "month 13",
            &hold_with("start_date", json!("2027-13-01")),
            422,
        ),
        Case::hold(
            "not a date",
            &hold_with("start_date", json!("tomorrow")),
            422,
        ),
        Case::hold(
            "a timestamp",
            &hold_with("start_date", json!("2027-06-01T00:00:00Z")),
            422,
        ),
        Case::hold(
            "year 300000",
            &hold_with("end_date", json!("+300000-01-01")),
            422,
        ),
        Case::hold("inverted stay", &hold_body(day(12), day(10), 1), 422),
        Case::hold("zero-night stay", &hold_body(day(10), day(10), 1), 422),
        // Invalid guests.
        Case::hold(
            "201-character name",
            &hold_with("guest.name", json!("A".repeat(201))),
            422,
        ),
        Case::hold(
            "60 KiB name",
            &hold_with("guest.name", json!(big_name)),
            422,
        ),
        Case::hold("empty name", &hold_with("guest.name", json!("")), 422),
        Case::hold("blank name", &hold_with("guest.name", json!("   ")), 422),
        Case::hold(
            "control character in name",
            &hold_with("guest.name", json!("Ana\u{7}")),
            422,
        ),
        Case::hold(
            "NUL in name",
            &hold_with("guest.name", json!("Ana\u{0}Lima")),
            422,
        ),
        Case::hold(
            "email without @",
            &hold_with("guest.email", json!("ana.example.com")),
            422,
        ),
        Case::hold(
            "email without a dot",
            &hold_with("guest.email", json!("ana@localhost")),
            422,
        ),
        Case::hold(
            "email with two @",
            &hold_with("guest.email", json!("a@b@c.com")),
            422,
        ),
        Case::hold(
            "email with a space",
            &hold_with("guest.email", json!("ana lima@x.com")),
            422,
        ),
        Case::hold("empty email", &hold_with("guest.email", json!("")), 422),
        Case::hold(
            "300-character email",
            &hold_with("guest.email", json!(format!("{}@x.com", "a".repeat(300)))),
            422,
        ),
        // Headers and media type.
        Case::hold("text/plain body", &json!(null), 415).raw("text/plain", valid_hold_text()),
        Case::hold("no Content-Type", &json!(null), 415)
            .raw("application/json", valid_hold_text())
            .content_type(None),
        Case::hold("XML Content-Type", &json!(null), 415).raw("application/xml", valid_hold_text()),
        Case::hold("body over 64 KiB", &json!(null), 413).raw("application/json", oversized),
        Case::hold("no token", &hold_body(day(10), day(12), 1), 401).token(None),
        Case::hold("unknown token", &hold_body(day(10), day(12), 1), 401)
            .token(Some("nope-nope-nope")),
        Case::hold("auditor holds", &hold_body(day(10), day(12), 1), 403).token(Some(AUDITOR)),
        Case::hold("no Idempotency-Key", &hold_body(day(10), day(12), 1), 400).key(None),
        Case::hold(
            "256-character Idempotency-Key",
            &hold_body(day(10), day(12), 1),
            400,
        )
        .key(Some("k".repeat(256).as_bytes())),
        Case::hold(
            "non-ASCII Idempotency-Key",
            &hold_body(day(10), day(12), 1),
            400,
        )
        .key(Some("ключ".as_bytes())),
        Case::hold(
            "control character in Idempotency-Key",
            &hold_body(day(10), day(12), 1),
            400,
        )
        .key(Some(b"a\tb")),
        // PUT hotel, room type, inventory.
        Case::put(
            "bad timezone",
            format!("/v1/hotels/{HOTEL}"),
            &hotel("H", "Lisbon", "Mars/Olympus"),
            422,
        ),
        Case::put(
            "empty timezone",
            format!("/v1/hotels/{HOTEL}"),
            &hotel("H", "Lisbon", ""),
            422,
        ),
        Case::put(
            "empty hotel name",
            format!("/v1/hotels/{HOTEL}"),
            &hotel("", "Lisbon", "UTC"),
            422,
        ),
        Case::put(
            "201-character hotel name",
            format!("/v1/hotels/{HOTEL}"),
            &hotel(&"H".repeat(201), "Lisbon", "UTC"),
            422,
        ),
        Case::put(
            "101-character city",
            format!("/v1/hotels/{HOTEL}"),
            &hotel("H", &"C".repeat(101), "UTC"),
            422,
        ),
        Case::put(
            "missing timezone",
            format!("/v1/hotels/{HOTEL}"),
            &json!({"name": "H", "city": "Lisbon"}),
            422,
        ),
        Case::put(
            "hotel name as a number",
            format!("/v1/hotels/{HOTEL}"),
            &json!({"name": 7, "city": "Lisbon", "timezone": "UTC"}),
            422,
        ),
        Case::put(
            "hotel id not an integer",
            "/v1/hotels/abc",
            &hotel("H", "Lisbon", "UTC"),
            400,
        ),
        Case::put(
            "hotel id a fraction",
            "/v1/hotels/1.5",
            &hotel("H", "Lisbon", "UTC"),
            400,
        ),
        Case::put(
            "hotel id 2^63",
            format!("/v1/hotels/{TWO_POW_63}"),
            &hotel("H", "Lisbon", "UTC"),
            400,
        ),
        Case::put(
            "hotel id 0",
            "/v1/hotels/0",
            &hotel("H", "Lisbon", "UTC"),
            422,
        ),
        Case::put(
            "negative hotel id",
            "/v1/hotels/-1",
            &hotel("H", "Lisbon", "UTC"),
            422,
        ),
        Case::put(
            "hotel as a channel",
            format!("/v1/hotels/{HOTEL}"),
            &hotel("H", "Lisbon", "UTC"),
            403,
        )
        .token(Some(WEB)),
        Case::put(
            "invalid JSON hotel",
            format!("/v1/hotels/{HOTEL}"),
            &json!(null),
            400,
        )
        .raw("application/json", "{"),
        Case::put(
            "max_occupancy 0",
            rt.clone(),
            &json!({"name": "king", "max_occupancy": 0}),
            422,
        ),
        Case::put(
            "max_occupancy 51",
            rt.clone(),
            &json!({"name": "king", "max_occupancy": 51}),
            422,
        ),
        Case::put(
            "max_occupancy 1e30",
            rt.clone(),
            &json!({"name": "king", "max_occupancy": 1e30}),
            422,
        ),
        Case::put(
            "empty room type name",
            rt.clone(),
            &json!({"name": "", "max_occupancy": 2}),
            422,
        ),
        Case::put(
            "room type id not an integer",
            format!("/v1/hotels/{HOTEL}/room-types/x"),
            &json!({"name": "king", "max_occupancy": 2}),
            400,
        ),
        Case::put(
            "room type id 0",
            format!("/v1/hotels/{HOTEL}/room-types/0"),
            &json!({"name": "king", "max_occupancy": 2}),
            422,
        ),
        Case::put(
            "room type of an unknown hotel",
            format!("/v1/hotels/999/room-types/{KING}"),
            &json!({"name": "king", "max_occupancy": 2}),
            422,
        ),
        Case::put(
            "negative total_rooms",
            inv.clone(),
            &inventory(json!(day(10)), json!(day(12)), json!(-1)),
            422,
        ),
        Case::put(
            "total_rooms 1e30",
            inv.clone(),
            &inventory(json!(day(10)), json!(day(12)), json!(1e30)),
            422,
        ),
        Case::put(
            "total_rooms 2^63",
            inv.clone(),
            &inventory(json!(day(10)), json!(day(12)), json!(TWO_POW_63)),
            422,
        ),
        Case::put(
            "total_rooms a trillion",
            inv.clone(),
            &inventory(json!(day(10)), json!(day(12)), json!(1_000_000_000_000_i64)),
            422,
        ),
        Case::put(
            "negative rate",
            inv.clone(),
            &json!({"start_date": day(10), "end_date": day(12), "total_rooms": 5, "rate_cents": -1}),
            422,
        ),
        Case::put(
            "negative allowance",
            inv.clone(),
            &json!({"start_date": day(10), "end_date": day(12), "total_rooms": 5, "overbooking_allowance": -1}),
            422,
        ),
        Case::put(
            "no rate for new nights",
            inv.clone(),
            &json!({"start_date": day(40), "end_date": day(42), "total_rooms": 5}),
            422,
        ),
        Case::put(
            "missing total_rooms",
            inv.clone(),
            &json!({"start_date": day(10), "end_date": day(12)}),
            422,
        ),
        Case::put(
            "inverted inventory range",
            inv.clone(),
            &inventory(json!(day(12)), json!(day(10)), json!(5)),
            422,
        ),
        Case::put(
            "801-night inventory range",
            inv.clone(),
            &inventory(json!(day(10)), json!(day(811)), json!(5)),
            422,
        ),
        Case::put(
            "inventory on February 30th",
            inv.clone(),
            &inventory(json!("2027-02-01"), json!("2027-02-30"), json!(5)),
            422,
        ),
        Case::put(
            "inventory of an unknown room type",
            format!("/v1/hotels/{HOTEL}/room-types/77/inventory"),
            &inventory(json!(day(10)), json!(day(12)), json!(5)),
            422,
        ),
        Case::put(
            "inventory below what is held",
            inv.clone(),
            &inventory(json!(day(10)), json!(day(12)), json!(1)),
            409,
        ),
        // Look-ups.
        Case::get("hotel id not an integer", "/v1/hotels/abc", 400),
        Case::get("hotel id 2^64", "/v1/hotels/18446744073709551616", 400),
        Case::get("negative hotel id", "/v1/hotels/-1", 404),
        Case::get("unknown hotel", "/v1/hotels/4242", 404),
        Case::get("search without a city", "/v1/hotels", 400),
        Case::get("availability without dates", avail.clone(), 400),
        Case::get(
            "availability on February 30th",
            format!("{avail}?start_date=2027-02-01&end_date=2027-02-30"),
            400,
        ),
        Case::get(
            "availability with rooms=abc",
            format!("{avail}?{dates}&rooms=abc"),
            400,
        ),
        Case::get(
            "availability with rooms 2^64",
            format!("{avail}?{dates}&rooms=18446744073709551616"),
            400,
        ),
        Case::get(
            "availability with rooms=0",
            format!("{avail}?{dates}&rooms=0"),
            422,
        ),
        Case::get(
            "availability of 31 nights",
            format!("{avail}?start_date={}&end_date={}", day(10), day(41)),
            422,
        ),
        Case::get(
            "availability inverted",
            format!("{avail}?start_date={}&end_date={}", day(12), day(10)),
            422,
        ),
        Case::get(
            "availability of 10000 years",
            format!("{avail}?start_date=0001-01-01&end_date=9999-12-31"),
            422,
        ),
        Case::get(
            "reservation id not a UUID",
            "/v1/reservations/not-a-uuid",
            404,
        ),
        Case::get(
            "reservation id invalid percent-encoding",
            "/v1/reservations/%FF%FE",
            400,
        ),
        Case::get("events of a non-UUID", "/v1/reservations/12345/events", 404),
        Case::get("feed limit 0", "/v1/events?limit=0", 422).token(Some(AUDITOR)),
        Case::get(
            "feed limit 2^63",
            format!("/v1/events?limit={TWO_POW_63}"),
            400,
        )
        .token(Some(AUDITOR)),
        // Commands on a reservation.
        Case::post(
            "cancel a non-UUID",
            "/v1/reservations/not-a-uuid/cancel",
            &json!({}),
            404,
        ),
        Case::post(
            "cancel with a 501-character reason",
            format!("{holds}/cancel"),
            &json!({"reason": "r".repeat(501)}),
            422,
        ),
        Case::post(
            "cancel with a numeric reason",
            format!("{holds}/cancel"),
            &json!({"reason": 5}),
            422,
        ),
        Case::post(
            "cancel with invalid JSON",
            format!("{holds}/cancel"),
            &json!(null),
            400,
        )
        .raw("application/json", "{]"),
        Case::post(
            "change dates of a non-UUID",
            "/v1/reservations/xyz/change-dates",
            &json!({"start_date": day(11), "end_date": day(13)}),
            404,
        ),
        Case::post(
            "change to an inverted stay",
            format!("{holds}/change-dates"),
            &json!({"start_date": day(13), "end_date": day(11)}),
            422,
        ),
        Case::post(
            "change without end_date",
            format!("{holds}/change-dates"),
            &json!({"start_date": day(13)}),
            422,
        ),
        Case::post(
            "change to 31 nights",
            format!("{holds}/change-dates"),
            &json!({"start_date": day(10), "end_date": day(41)}),
            422,
        ),
        Case::post(
            "change into the past",
            format!("{holds}/change-dates"),
            &json!({"start_date": yesterday, "end_date": day(2)}),
            422,
        ),
        Case::post(
            "change to February 30th",
            format!("{holds}/change-dates"),
            &json!({"start_date": "2027-02-27", "end_date": "2027-02-30"}),
            422,
        ),
        Case::post(
            "change dates with a stale total",
            format!("{holds}/change-dates"),
            &json!({"start_date": day(11), "end_date": day(13), "expected_total_cents": 1}),
            409,
        ),
        // Unknown routes and wrong methods.
        Case::get("unknown route", "/v1/hotels/812/nope", 404),
        Case::get("unknown version", "/v2/reservations", 404),
        Case::new("DELETE a reservation", Method::DELETE, holds.clone(), 405),
        Case::new(
            "PATCH a hotel",
            Method::PATCH,
            format!("/v1/hotels/{HOTEL}"),
            405,
        )
        .token(Some(ADMIN)),
        Case::new(
            "DELETE the reservations collection",
            Method::DELETE,
            "/v1/reservations",
            405,
        ),
        // The reservations look-up (GET on the collection).
        Case::get("list with limit 0", "/v1/reservations?limit=0", 422),
        Case::get(
            "list with a bad date",
            "/v1/reservations?date=2027-02-30",
            400,
        ),
        Case::get(
            "list with date year 0",
            "/v1/reservations?date=0000-01-01",
            422,
        ),
        Case::get(
            "list another channel's",
            "/v1/reservations?channel=mobile",
            403,
        ),
        Case::get(
            "occupancy as a channel",
            format!("/v1/hotels/{HOTEL}/occupancy?start_date=2027-06-02&end_date=2027-06-01"),
            403,
        ),
        Case::get(
            "occupancy of an inverted range (admin)",
            format!("/v1/hotels/{HOTEL}/occupancy?start_date=2027-06-02&end_date=2027-06-01"),
            422,
        )
        .token(Some(ADMIN)),
        Case::new("PUT a reservation", Method::PUT, holds.clone(), 405),
        Case::new("POST the event feed", Method::POST, "/v1/events", 405).token(Some(AUDITOR)),
    ]
}

#[tokio::test]
async fn malformed_and_invalid_requests_get_a_4xx_in_the_error_shape_and_change_nothing() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 20, 5).await;
    // Another channel holds 2 rooms on days 10 and 11 (the inventory case lowers below).
    app.hold_ok(MOBILE, "existing", &hold_body(day(10), day(12), 2))
        .await;
    let mine = app
        .hold_ok(WEB, "mine", &hold_body(day(15), day(16), 1))
        .await;
    let before = app.snapshot().await;
    let mut failures = Vec::new();

    for case in cases(&mine) {
        let mut request = app.client.request(case.method.clone(), app.url(&case.path));
        if let Some(token) = case.token {
            request = request.bearer_auth(token);
        }
        if let Some(key) = &case.idempotency_key {
            let (name, value) = raw_header("idempotency-key", key);
            request = request.header(name, value);
        }
        if let Some(content_type) = case.content_type {
            request = request.header("Content-Type", content_type);
        }
        if let Some(body) = &case.body {
            request = request.body(body.clone());
        }
        let reply = app.send(request).await;

        let well_formed = reply.json["error"].as_str().is_some_and(|e| !e.is_empty())
            && reply.json["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
            && reply
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
        if reply.status.as_u16() != case.status || !well_formed {
            failures.push(format!(
                "{} {} ({}): expected {}, got {} {}",
                case.method,
                case.path,
                case.name,
                case.status,
                reply.status,
                reply.text.chars().take(300).collect::<String>()
            ));
        }
        assert!(
            reply.status.is_client_error(),
            "{}: never a 5xx, got {} {}",
            case.name,
            reply.status,
            reply.text
        );
        assert_eq!(
            app.snapshot().await,
            before,
            "{} changed the database",
            case.name
        );
    }

    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_invariants(&app.db.pool).await;
    app.finish().await;
}

// Client input that once reached PostgreSQL unchecked: PostgreSQL refused it, and the
// refusal was reported as the database being down (503 with Retry-After, which tells the
// client to send the same request again), instead of a 4xx.

#[tokio::test]
async fn dates_before_postgresqls_earliest_date_are_422_not_503() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;
    let (start, end) = ("-5000-01-01", "-5000-01-02");
    let mut hold = hold_body(day(10), day(12), 1);
    hold["start_date"] = json!(start);
    hold["end_date"] = json!(end);

    let replies = [
        app.hold(WEB, "ancient", &hold).await,
        app.change_dates(
            WEB,
            "ancient",
            &id,
            &json!({"start_date": start, "end_date": end}),
        )
        .await,
        app.get(
            &format!("/v1/hotels/{HOTEL}/availability?start_date={start}&end_date={end}"),
            Some(WEB),
        )
        .await,
        app.put_inventory(
            HOTEL,
            KING,
            &json!({"start_date": start, "end_date": end, "total_rooms": 1, "rate_cents": 1}),
        )
        .await,
    ];

    for reply in &replies {
        assert_eq!(reply.status.as_u16(), 422, "{}", reply.text);
        assert_error_shape(reply);
    }
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn searching_for_a_city_containing_a_nul_character_is_a_4xx_not_503() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 1, 1).await;

    let reply = app.get("/v1/hotels?city=Lis%00bon", Some(WEB)).await;

    assert!(
        reply.status.is_client_error(),
        "{} {}",
        reply.status,
        reply.text
    );
    assert_error_shape(&reply);
    app.finish().await;
}

#[tokio::test]
async fn a_cancel_reason_containing_a_nul_character_is_422_not_503() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let before = app.snapshot().await;

    let reply = app
        .cancel(WEB, "nul", &id, &json!({"reason": "a\u{0}b"}))
        .await;

    reply.assert_error(422, "invalid_request");
    assert_eq!(app.snapshot().await, before);
    app.finish().await;
}

#[tokio::test]
async fn a_stay_spanning_thousands_of_years_is_refused() {
    let app = spawn_app().await;
    app.seed_hotel(day(10), 5, 5).await;
    let id = app
        .hold_ok(WEB, "hold", &hold_body(day(10), day(12), 1))
        .await;
    let (start, end) = ("0001-01-01", "9999-12-31");
    let mut hold = hold_body(day(10), day(12), 1);
    hold["start_date"] = json!(start);
    hold["end_date"] = json!(end);

    let held = app.hold(WEB, "millennia", &hold).await;
    let changed = app
        .change_dates(
            WEB,
            "millennia-change",
            &id,
            &json!({"start_date": start, "end_date": end}),
        )
        .await;

    held.assert_error(422, "invalid_request");
    changed.assert_error(422, "invalid_request");
    app.finish().await;
}
