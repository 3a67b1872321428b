//! The reservation row's `state`: the aggregate's JSON without what the row's own
//! columns already say (ids, dates, rooms, guest, channel, total, status; see
//! docs/scaling.md), nor what reads back as its default (no payment yet, nothing
//! refunded). Its times go too when the columns keep them exactly (a column keeps
//! microseconds; a time with finer digits stays in the JSON, so a reservation always
//! reads back as it was answered).
//! Written slim by [`slim`]; loaded by [`restore`], which puts the columns back before
//! the aggregate is read. A state stored before this (the whole aggregate) loads as it
//! is: a key present in the JSON is kept.

use aggregates::{
    Cents, Guest, HotelId, Personal, Reservation, ReservationId, RoomCount, RoomTypeId, StayDates,
};
use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::Row;

/// The `details` keys the row's columns hold.
const DETAIL_COLUMNS: [&str; 8] = [
    "reservation_id",
    "hotel_id",
    "room_type_id",
    "stay",
    "rooms",
    "guest",
    "channel",
    "total_cents",
];

/// The `details` times the row's columns hold, when they hold them exactly.
const DETAIL_TIMES: [&str; 2] = ["created_at", "hold_expires_at"];

/// Top-level keys that read back as their default when absent (`#[serde(default)]` on
/// the aggregate), and the default each is left out at.
fn is_default(key: &str, value: &Value) -> bool {
    match key {
        "payment" => value.is_null(),
        "refunded_payments" => value.as_array().is_some_and(Vec::is_empty),
        "refund_cents" => value.as_i64() == Some(0),
        _ => false,
    }
}

/// Whether a stored time is one a `timestamptz` column keeps exactly (whole
/// microseconds).
fn column_keeps(value: &Value) -> bool {
    value
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|t| t.timestamp_subsec_nanos() % 1_000 == 0)
}

/// The columns [`restore`] reads, for the loader's SELECT.
pub const COLUMNS: &str = "state, version, reservation_id, hotel_id, room_type_id, start_date,
    end_date, rooms, status, guest, guest_name, guest_email, channel, total_cents,
    created_at, hold_expires_at, updated_at";

/// The aggregate's JSON without what the columns say.
pub fn slim(reservation: &Reservation) -> Result<Value, serde_json::Error> {
    let mut state = serde_json::to_value(reservation)?;
    if let Some(object) = state.as_object_mut() {
        object.remove("status");
        object.retain(|key, value| !is_default(key, value));
        if object.get("updated_at").is_some_and(column_keeps) {
            object.remove("updated_at");
        }
        if let Some(Value::Object(details)) = object.get_mut("details") {
            for key in DETAIL_COLUMNS {
                details.remove(key);
            }
            for key in DETAIL_TIMES {
                if details.get(key).is_some_and(column_keeps) {
                    details.remove(key);
                }
            }
        }
    }
    Ok(state)
}

/// The row's guest as the aggregate carries it: the `guest` column (sealed, or erased),
/// or, on a row written before personal data was sealed, its name and e-mail in the
/// clear.
fn guest(row: &PgRow) -> Result<Value, String> {
    let column = |e: sqlx::Error| e.to_string();
    if let Some(guest) = row.try_get::<Option<Value>, _>("guest").map_err(column)? {
        return Ok(guest);
    }
    let name: Option<&str> = row.try_get("guest_name").map_err(column)?;
    let email: Option<&str> = row.try_get("guest_email").map_err(column)?;
    let (Some(name), Some(email)) = (name, email) else {
        return Err("a reservation row without its guest".to_owned());
    };
    let guest = Guest::parse(name, email).map_err(|e| format!("{}: {}", e.field, e.message))?;
    serde_json::to_value(Personal::Clear(guest)).map_err(|e| e.to_string())
}

/// The aggregate of a row: its `state` with the columns put back.
pub fn restore(row: &PgRow) -> Result<Reservation, String> {
    let mut state: Value = row.try_get("state").map_err(|e| e.to_string())?;
    let column = |e: sqlx::Error| e.to_string();
    let invalid = |e: aggregates::InvalidInput| format!("{}: {}", e.field, e.message);
    let json = |v: Result<Value, serde_json::Error>| v.map_err(|e| e.to_string());
    let start: NaiveDate = row.try_get("start_date").map_err(column)?;
    let end: NaiveDate = row.try_get("end_date").map_err(column)?;
    let details: [(&str, Value); 8] = [
        (
            "reservation_id",
            json(serde_json::to_value(ReservationId::from_uuid(
                row.try_get("reservation_id").map_err(column)?,
            )))?,
        ),
        (
            "hotel_id",
            json(serde_json::to_value(
                HotelId::parse(row.try_get("hotel_id").map_err(column)?).map_err(invalid)?,
            ))?,
        ),
        (
            "room_type_id",
            json(serde_json::to_value(
                RoomTypeId::parse(row.try_get("room_type_id").map_err(column)?).map_err(invalid)?,
            ))?,
        ),
        (
            "stay",
            json(serde_json::to_value(
                StayDates::parse(start, end).map_err(invalid)?,
            ))?,
        ),
        (
            "rooms",
            json(serde_json::to_value(
                RoomCount::parse(i64::from(row.try_get::<i32, _>("rooms").map_err(column)?))
                    .map_err(invalid)?,
            ))?,
        ),
        ("guest", guest(row)?),
        (
            "channel",
            Value::String(row.try_get("channel").map_err(column)?),
        ),
        (
            "total_cents",
            json(serde_json::to_value(Cents::new(
                row.try_get("total_cents").map_err(column)?,
            )))?,
        ),
    ];
    let time = |name: &str| -> Result<Value, String> {
        let at: DateTime<Utc> = row.try_get(name).map_err(column)?;
        json(serde_json::to_value(at))
    };
    let times: [(&str, Value); 2] = [
        ("created_at", time("created_at")?),
        ("hold_expires_at", time("hold_expires_at")?),
    ];
    let status = Value::String(row.try_get("status").map_err(column)?);
    let updated_at = time("updated_at")?;
    let object = state
        .as_object_mut()
        .ok_or_else(|| "the state is not an object".to_owned())?;
    object.entry("status").or_insert(status);
    object.entry("updated_at").or_insert(updated_at);
    let held = object
        .entry("details")
        .or_insert_with(|| Value::Object(Map::new()));
    let held = held
        .as_object_mut()
        .ok_or_else(|| "the details are not an object".to_owned())?;
    for (key, value) in times {
        held.entry(key).or_insert(value);
    }
    for (key, value) in details {
        if key == "guest" {
            // A whole state stored before sealing has its guest in the old shape; the
            // columns say it either way.
            held.insert(key.to_owned(), value);
        } else {
            held.entry(key).or_insert(value);
        }
    }
    serde_json::from_value(state).map_err(|e| e.to_string())
}
