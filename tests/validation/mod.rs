//! Malformed and invalid requests. Every case of the table in
//! `tests/fixtures/malformed.json` is answered with its 4xx (never a 5xx), in the
//! contract's error shape, and changes nothing in the database; the test names each case
//! that failed. Then requests that once reached PostgreSQL unchecked.
//!
//! A case of the table has:
//! - `name`, `method`, `path` and the `status` expected; optionally the `error` code and
//!   the `field` it must name;
//! - `token`: absent, the web channel's; `null`, none; `web`, `mobile`, `admin` or
//!   `auditor`, that test token; any other text is sent as the token;
//! - `idempotency_key`: absent, `malformed <name>` on a POST and none otherwise; `null`,
//!   none; else that key;
//! - at most one body: `json` (that JSON), `hold` (the valid hold of one king room for
//!   days 10 to 12, changed: `start` and `end` days, `set` fields replaced — a dotted name
//!   reaches into `guest` — and a field to `remove`) or `raw` (that text, with the first
//!   occurrence of `replace[0]` replaced by `replace[1]`);
//! - `content_type`: absent, `application/json` when there is a body; `null`, none.
//!
//! Text may hold placeholders: `${id}` (the web channel's own hold), `${hotel}` and
//! `${king}` (the hotel and room type), `${day+N}` and `${day-N}` (the date N days from
//! today, UTC), `${valid_hold}` (the valid hold as JSON text) and `${C*N}` (the
//! character C, N times).

use chrono::{Days, NaiveDate, Utc};
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::*;

/// The case table.
const TABLE: &str = include_str!("../fixtures/malformed.json");

/// The fields a case may have.
const FIELDS: [&str; 13] = [
    "name",
    "method",
    "path",
    "status",
    "error",
    "field",
    "token",
    "idempotency_key",
    "json",
    "hold",
    "raw",
    "replace",
    "content_type",
];

/// One request of the table, ready to send.
struct Case {
    name: String,
    method: Method,
    path: String,
    token: Option<String>,
    idempotency_key: Option<Vec<u8>>,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
    status: u16,
    error: Option<String>,
    field: Option<String>,
}

/// The table's cases with their placeholders filled in (`id`: the web channel's hold).
fn cases(id: &str) -> Vec<Case> {
    let table: Value = serde_json::from_str(TABLE).expect("tests/fixtures/malformed.json is JSON");
    table["cases"]
        .as_array()
        .expect("the table has a list of cases")
        .iter()
        .map(|case| read_case(case, id))
        .collect()
}

fn read_case(case: &Value, id: &str) -> Case {
    let name = case["name"]
        .as_str()
        .unwrap_or_else(|| panic!("a case without a name: {case}"));
    let fields = case.as_object().expect("a case is an object");
    if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        panic!("case {name:?}: unknown field {unknown:?}");
    }
    let text = |field: &str| {
        case[field]
            .as_str()
            .unwrap_or_else(|| panic!("case {name:?}: {field} is not text"))
    };
    let method = Method::from_bytes(text("method").as_bytes())
        .unwrap_or_else(|_| panic!("case {name:?}: not a method"));
    let status = case["status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .unwrap_or_else(|| panic!("case {name:?}: no status"));
    let token = match fields.get("token") {
        None => Some(WEB.to_owned()),
        Some(Value::Null) => None,
        Some(Value::String(token)) => Some(
            match token.as_str() {
                "web" => WEB,
                "mobile" => MOBILE,
                "admin" => ADMIN,
                "auditor" => AUDITOR,
                other => other,
            }
            .to_owned(),
        ),
        Some(other) => panic!("case {name:?}: token {other}"),
    };
    let idempotency_key = match fields.get("idempotency_key") {
        None if method == Method::POST => Some(format!("malformed {name}").into_bytes()),
        None | Some(Value::Null) => None,
        Some(Value::String(key)) => Some(expand(key, id).into_bytes()),
        Some(other) => panic!("case {name:?}: idempotency_key {other}"),
    };
    if fields.contains_key("replace") && !fields.contains_key("raw") {
        panic!("case {name:?}: replace is for raw text");
    }
    let json = |value: Value| serde_json::to_vec(&value).expect("JSON");
    let body = match (fields.get("json"), fields.get("hold"), fields.get("raw")) {
        (None, None, None) => None,
        (Some(body), None, None) => Some(json(expand_json(body, id))),
        (None, Some(change), None) => Some(json(changed_hold(name, change, id))),
        (None, None, Some(_)) => {
            let mut raw = expand(text("raw"), id);
            if let Some(replace) = fields.get("replace") {
                let pair = replace.as_array().map(Vec::as_slice);
                let Some([Value::String(from), Value::String(to)]) = pair else {
                    panic!("case {name:?}: replace is [from, to]");
                };
                raw = raw.replacen(&expand(from, id), &expand(to, id), 1);
            }
            Some(raw.into_bytes())
        }
        _ => panic!("case {name:?}: more than one body"),
    };
    let content_type = match fields.get("content_type") {
        None => body.as_ref().map(|_| "application/json".to_owned()),
        Some(Value::Null) => None,
        Some(Value::String(content_type)) => Some(content_type.clone()),
        Some(other) => panic!("case {name:?}: content_type {other}"),
    };
    Case {
        name: name.to_owned(),
        method,
        path: expand(text("path"), id),
        token,
        idempotency_key,
        content_type,
        body,
        status,
        error: case["error"].as_str().map(str::to_owned),
        field: case["field"].as_str().map(str::to_owned),
    }
}

/// The valid hold (one king room, days 10 to 12) with `change` made to it.
fn changed_hold(name: &str, change: &Value, id: &str) -> Value {
    let change = change
        .as_object()
        .unwrap_or_else(|| panic!("case {name:?}: hold is an object"));
    if let Some(unknown) = change
        .keys()
        .find(|k| !["start", "end", "set", "remove"].contains(&k.as_str()))
    {
        panic!("case {name:?}: unknown hold change {unknown:?}");
    }
    let day_of = |field: &str, default: i64| {
        let n = change.get(field).map_or(Some(default), Value::as_i64);
        days_from_today(n.unwrap_or_else(|| panic!("case {name:?}: {field} is not a number")))
    };
    let mut body = hold_body(day_of("start", 10), day_of("end", 12), 1);
    if let Some(set) = change.get("set") {
        let set = set
            .as_object()
            .unwrap_or_else(|| panic!("case {name:?}: set is an object"));
        for (field, value) in set {
            let value = expand_json(value, id);
            match field.split_once('.') {
                Some((outer, inner)) => body[outer][inner] = value,
                None => body[field.as_str()] = value,
            }
        }
    }
    if let Some(field) = change.get("remove") {
        let field = field
            .as_str()
            .unwrap_or_else(|| panic!("case {name:?}: remove names a field"));
        body.as_object_mut().expect("object").remove(field);
    }
    body
}

/// `value` with the placeholders of its strings filled in.
fn expand_json(value: &Value, id: &str) -> Value {
    match value {
        Value::String(text) => Value::String(expand(text, id)),
        Value::Array(items) => Value::Array(items.iter().map(|v| expand_json(v, id)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), expand_json(v, id)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text` with its `${...}` placeholders filled in.
fn expand(text: &str, id: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let inside = &rest[start + 2..];
        let end = inside
            .find('}')
            .unwrap_or_else(|| panic!("an unclosed placeholder in {text:?}"));
        out.push_str(&placeholder(&inside[..end], id));
        rest = &inside[end + 1..];
    }
    out.push_str(rest);
    out
}

fn placeholder(name: &str, id: &str) -> String {
    match name {
        "id" => return id.to_owned(),
        "hotel" => return HOTEL.to_string(),
        "king" => return KING.to_string(),
        "valid_hold" => return hold_body(day(10), day(12), 1).to_string(),
        _ => {}
    }
    if let Some(Ok(n)) = name.strip_prefix("day").map(str::parse::<i64>) {
        return days_from_today(n).to_string();
    }
    if let Some((c, times)) = name.split_once('*') {
        if let (1, Ok(times)) = (c.chars().count(), times.parse()) {
            return c.repeat(times);
        }
    }
    panic!("an unknown placeholder: ${{{name}}}")
}

/// The date `n` days from today (before it, when negative).
fn days_from_today(n: i64) -> NaiveDate {
    let today = Utc::now().date_naive();
    let days = Days::new(n.unsigned_abs());
    if n < 0 {
        today.checked_sub_days(days)
    } else {
        today.checked_add_days(days)
    }
    .expect("date")
}

/// Words of the code that an error message must never show a client.
const CODE_WORDS: &[&str] = &[
    "struct ",
    "u8",
    "u16",
    "u32",
    "u64",
    "usize",
    "i32",
    "i64",
    "isize",
    "f64",
    "Option<",
    "Cancelled",
    "CheckedIn",
    "CheckedOut",
    "NoShow",
    "Confirmed",
    "Held",
    "Expired",
    "Declined",
    "Failed to deserialize",
    "sequence",
    "elements",
];

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
        if let Some(token) = &case.token {
            request = request.bearer_auth(token);
        }
        if let Some(key) = &case.idempotency_key {
            let (name, value) = raw_header("idempotency-key", key);
            request = request.header(name, value);
        }
        if let Some(content_type) = &case.content_type {
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
        // The API's words, not the code's: no Rust type or enum variant names, and a
        // refused value (422 invalid_request) names the field it is about whenever the
        // message starts with one.
        let message = reply.json["message"].as_str().unwrap_or_default();
        let code_words = CODE_WORDS.iter().find(|w| message.contains(*w));
        let unnamed_field = reply.json["error"] == "invalid_request"
            && message
                .split_once(": ")
                .is_some_and(|(field, _)| !field.contains(' '))
            && !reply.json["field"].is_string();
        if let Some(word) = code_words {
            failures.push(format!(
                "{}: the message names the code ({word}): {message}",
                case.name
            ));
        }
        if unnamed_field {
            failures.push(format!("{}: no field named: {}", case.name, reply.text));
        }
        if let Some(error) = &case.error {
            if reply.json["error"] != error.as_str() {
                failures.push(format!("{}: expected {error}: {}", case.name, reply.text));
            }
        }
        if let Some(field) = &case.field {
            if reply.json["field"] != field.as_str() {
                failures.push(format!(
                    "{}: expected field {field}: {}",
                    case.name, reply.text
                ));
            }
        }
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
