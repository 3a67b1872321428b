//! A hotel's inventory calendar (admin, auditor): what the staff console draws, one
//! request per month and per refresh.

use aggregates::StayDates;
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::catalog::{iso_date, prices_out, PlanPriceOut, RestrictionsOut};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiPath, ApiQuery, Consistency};
use super::params::hotel_id;
use crate::state::AppState;
use app::queries::{CalendarNight, MAX_CALENDAR_NIGHTS};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). The staff calendar.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(calendar))
        .routes(routes!(night_history))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CalendarQuery {
    /// First night shown.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// The night after the last one shown (half-open), at most 92 nights on.
    #[param(required = true, schema_with = super::schema::calendar_end_date)]
    pub end_date: NaiveDate,
}

/// One room type on one night.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarNightOut {
    #[serde(serialize_with = "iso_date")]
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    /// Whether the night has ever been put on sale (given rooms and a rate). `false`: it
    /// has no inventory (known, not merely unseen: a night the read model has not seen
    /// is read from PostgreSQL), and its counters read 0, its rate `null`.
    pub has_inventory: bool,
    /// Rooms for sale; 0 for a night without inventory.
    pub total_rooms: i64,
    pub overbooking_allowance: i64,
    /// Rooms on hold (the read model counts a lapsed hold until it is recorded).
    pub held: i64,
    pub confirmed: i64,
    /// Rooms set aside for group blocks (not for general sale).
    pub blocked: i64,
    /// `total_rooms + overbooking_allowance - held - confirmed - blocked`, at least 0.
    pub remaining: u32,
    /// The base rate; `null` without inventory.
    pub rate_cents: Option<i64>,
    /// The restrictions in force for every plan.
    pub restrictions: RestrictionsOut,
    /// One room for one guest under each plan selling the room type (or the base rate
    /// when none does), with the plan's own restrictions.
    pub prices: Vec<PlanPriceOut>,
}

impl CalendarNightOut {
    fn of(night: &CalendarNight) -> Self {
        let rooms = night.rooms;
        Self {
            date: night.date,
            has_inventory: rooms.is_some(),
            total_rooms: rooms.map_or(0, |r| r.total_rooms),
            overbooking_allowance: rooms.map_or(0, |r| r.overbooking_allowance),
            held: rooms.map_or(0, |r| r.held),
            confirmed: rooms.map_or(0, |r| r.confirmed),
            blocked: rooms.map_or(0, |r| r.blocked),
            remaining: rooms.map_or(0, |r| r.remaining),
            rate_cents: rooms.map(|r| r.rate_cents),
            restrictions: night.restrictions.all.into(),
            prices: prices_out(&night.prices, &night.restrictions),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarRoomType {
    pub room_type_id: i64,
    pub name: String,
    pub nights: Vec<CalendarNightOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PlanName {
    pub rate_plan_id: i64,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarOut {
    pub hotel_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    /// Every change committed before it is in the answer.
    pub as_of: DateTime<Utc>,
    /// `cache` (the read model), `database` or `replica` (the write side's rows).
    #[schema(example = "cache")]
    pub source: String,
    /// ISO 4217 code of every rate: integers in its minor unit.
    #[schema(example = "EUR")]
    pub currency: String,
    pub rate_plans: Vec<PlanName>,
    pub room_types: Vec<CalendarRoomType>,
    /// The group blocks with a night in the range, each with its pickup.
    pub blocks: Vec<CalendarBlockOut>,
}

/// A group block on the calendar: a band under its room type.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarBlockOut {
    #[schema(example = "ACME")]
    pub code: String,
    pub name: String,
    pub room_type_id: i64,
    #[serde(serialize_with = "iso_date")]
    #[schema(value_type = String, format = Date)]
    pub start_date: NaiveDate,
    #[serde(serialize_with = "iso_date")]
    #[schema(value_type = String, format = Date)]
    pub end_date: NaiveDate,
    #[serde(serialize_with = "iso_date")]
    #[schema(value_type = String, format = Date)]
    pub release_date: NaiveDate,
    /// `open` or `released`.
    #[schema(example = "open")]
    pub status: &'static str,
    pub rate_cents: i64,
    /// Its nights within the range.
    pub nights: Vec<CalendarBlockNightOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarBlockNightOut {
    #[serde(serialize_with = "iso_date")]
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    /// The block's rooms on the night: picked up and still set aside.
    pub rooms: u32,
    pub picked_up: u32,
}

/// Every room type's nights over a range: rooms, held and confirmed, rates per plan and
/// restrictions (admin, auditor).
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/calendar", tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), CalendarQuery),
    responses((status = 200, body = CalendarOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn calendar(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<CalendarQuery>,
) -> Result<Json<CalendarOut>, ApiError> {
    let id = hotel_id(id)?;
    let range = StayDates::parse(query.start_date, query.end_date)?;
    if range.night_count() > MAX_CALENDAR_NIGHTS {
        return Err(ApiError::invalid(
            "end_date",
            format!("a calendar shows at most {MAX_CALENDAR_NIGHTS} nights"),
        ));
    }
    principal.require(Role::STAFF)?;
    let calendar = state
        .queries
        .calendar(id, &range, consistency.0)
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    Ok(Json(CalendarOut {
        hotel_id: id.get(),
        start_date: range.start(),
        end_date: range.end(),
        as_of: calendar.as_of,
        source: calendar.source.as_str().to_owned(),
        currency: calendar.hotel.currency().code().to_owned(),
        rate_plans: calendar
            .hotel
            .rate_plans()
            .iter()
            .map(|(id, plan)| PlanName {
                rate_plan_id: id.get(),
                name: plan.name().to_owned(),
            })
            .collect(),
        room_types: calendar
            .room_types
            .iter()
            .map(|rt| CalendarRoomType {
                room_type_id: rt.room_type_id,
                name: rt.name.clone(),
                nights: rt.nights.iter().map(CalendarNightOut::of).collect(),
            })
            .collect(),
        blocks: calendar
            .blocks
            .iter()
            .map(|b| CalendarBlockOut {
                code: b.code.clone(),
                name: b.name.clone(),
                room_type_id: b.room_type_id,
                start_date: b.start_date,
                end_date: b.end_date,
                release_date: b.release_date,
                status: if b.released { "released" } else { "open" },
                rate_cents: b.rate_cents,
                nights: b
                    .nights
                    .iter()
                    .map(|&(date, rooms, picked_up)| CalendarBlockNightOut {
                        date,
                        rooms,
                        picked_up,
                    })
                    .collect(),
            })
            .collect(),
    }))
}

/// One night's history: every event of its stream, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct NightHistory {
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub date: NaiveDate,
    /// Each change to the night (inventory, rates, restrictions, holds, confirmations,
    /// cancellations, blocks), with `metadata.client` (who: a person's name, a token's
    /// or a worker's), `metadata.staff_id` (a person's) and `recorded_at` (when).
    pub events: Vec<super::reservations::EventOut>,
}

/// Every change to one room type's night, who made it and when, from the event log
/// (staff and auditors). A night never given inventory has no history: `[]`.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/room-types/{room_type_id}/nights/{date}/events",
    tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
           ("room_type_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
           ("date" = String, Path, format = Date)),
    responses((status = 200, body = NightHistory), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn night_history(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, room_type, date)): ApiPath<(i64, i64, String)>,
) -> Result<Json<NightHistory>, ApiError> {
    principal.require(Role::STAFF)?;
    let hotel = hotel_id(id)?;
    let room_type = aggregates::RoomTypeId::parse(room_type)
        .map_err(|_| ApiError::not_found("no such room type"))?;
    let date = NaiveDate::parse_from_str(&date, "%Y-%m-%d")
        .map_err(|_| ApiError::not_found("no such night (the date is YYYY-MM-DD)"))?;
    let found = super::params::load_hotel(&state, hotel, Consistency(None)).await?;
    if found.room_type(room_type).is_none() {
        return Err(ApiError::not_found("no such room type"));
    }
    let stream = aggregates::RoomNightKey::new(hotel, room_type, date).stream_id();
    let events = state
        .queries
        .stream(aggregates::AggregateType::RoomNight.as_str(), &stream)
        .await?;
    Ok(Json(NightHistory {
        hotel_id: hotel.get(),
        room_type_id: room_type.get(),
        date,
        events: events
            .into_iter()
            .map(super::reservations::EventOut::from)
            .collect(),
    }))
}
