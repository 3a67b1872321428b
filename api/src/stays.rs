//! Stays at a hotel from the read side (admin, auditor): arrivals, departures, guests in
//! house and no-shows per room type and night, and the overbooking allowance the
//! observed no-shows suggest (see `queries::stays`).

use std::collections::BTreeMap;

use aggregates::{HotelId, StayDates};
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::analytics::report_range;
use super::auth::Principal;
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiPath, ApiQuery, Consistency};
use crate::state::AppState;
use app::queries::stays::{rate, NoShowReport, StayNight, StaysRead};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Arrivals, departures and no-shows.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(stays))
        .routes(routes!(no_shows))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StaysQuery {
    /// First date reported.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// The date after the last one reported (half-open range), at most 400 days on.
    #[param(required = true, schema_with = super::schema::report_end_date)]
    pub end_date: NaiveDate,
}

/// The no-show report's range, and the risk it accepts.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NoShowsQuery {
    /// First date reported.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// The date after the last one reported (half-open range), at most 400 days on.
    #[param(required = true, schema_with = super::schema::report_end_date)]
    pub end_date: NaiveDate,
    /// The largest probability of walking a guest accepted (0 < risk < 1, default
    /// 0.05).
    #[param(exclusive_minimum = 0, exclusive_maximum = 1)]
    pub risk: Option<f64>,
}

/// One room type on one date.
#[derive(Debug, Serialize, ToSchema)]
pub struct StayDay {
    pub date: NaiveDate,
    /// Rooms of stays arriving this day whose guests checked in.
    pub arrivals: i64,
    /// Rooms of checked-out stays whose guests left this day.
    pub departures: i64,
    /// Rooms occupied this night by guests who checked in.
    pub in_house: i64,
    /// Rooms of stays arriving this day whose guests never came.
    pub no_shows: i64,
    /// `no_shows / (arrivals + no_shows)`; null when nothing was due.
    pub no_show_rate: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoomTypeStays {
    pub room_type_id: i64,
    pub name: String,
    /// Every date of the range.
    pub days: Vec<StayDay>,
    /// Over the range: arrivals, no-shows and their rate.
    pub arrivals: i64,
    pub no_shows: i64,
    pub no_show_rate: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StaysReport {
    pub hotel_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    /// When the reservations view last applied events; null if it has never run.
    pub as_of: Option<DateTime<Utc>>,
    pub room_types: Vec<RoomTypeStays>,
}

async fn read(
    state: &AppState,
    principal: &Principal,
    consistency: Consistency,
    id: i64,
    (start, end): (NaiveDate, NaiveDate),
) -> Result<(HotelId, StayDates, StaysRead), ApiError> {
    let (id, range) = report_range(principal, id, start, end)?;
    let nights = &range;
    let read = state
        .queries
        .on_replica(consistency.0, |q| async move { q.stays(id, nights).await })
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    Ok((id, range, read))
}

/// Arrivals, departures, guests in house and no-shows per room type and date.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/stays", tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), StaysQuery),
    responses((status = 200, body = StaysReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "end_date not after start_date, or more than 400 days", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn stays(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<StaysQuery>,
) -> Result<Json<StaysReport>, ApiError> {
    let dates = (query.start_date, query.end_date);
    let (id, range, read) = read(&state, &principal, consistency, id, dates).await?;
    let by_night: BTreeMap<(i64, NaiveDate), &StayNight> = read
        .nights
        .iter()
        .map(|n| ((n.room_type_id, n.night), n))
        .collect();
    let room_types = read
        .room_types
        .iter()
        .map(|(room_type_id, name)| {
            let days: Vec<StayDay> = range
                .nights()
                .map(|date| {
                    by_night.get(&(*room_type_id, date)).map_or(
                        StayDay {
                            date,
                            arrivals: 0,
                            departures: 0,
                            in_house: 0,
                            no_shows: 0,
                            no_show_rate: None,
                        },
                        |n| StayDay {
                            date,
                            arrivals: n.arrivals,
                            departures: n.departures,
                            in_house: n.in_house,
                            no_shows: n.no_shows,
                            no_show_rate: n.no_show_rate(),
                        },
                    )
                })
                .collect();
            let arrivals = days.iter().map(|d| d.arrivals).sum();
            let no_shows = days.iter().map(|d| d.no_shows).sum();
            RoomTypeStays {
                room_type_id: *room_type_id,
                name: name.clone(),
                days,
                arrivals,
                no_shows,
                no_show_rate: rate(no_shows, arrivals + no_shows),
            }
        })
        .collect();
    Ok(Json(StaysReport {
        hotel_id: id.get(),
        start_date: range.start(),
        end_date: range.end(),
        as_of: read.as_of,
        room_types,
    }))
}

/// One room type's no-shows and the allowance they suggest.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoomTypeNoShows {
    pub room_type_id: i64,
    pub name: String,
    /// Rooms of stays due to arrive in the range (arrived or not come).
    pub due: i64,
    pub no_shows: i64,
    pub no_show_rate: Option<f64>,
    /// The rate the suggestion uses: the lower end of the observed rate's one-sided
    /// 95% Wilson interval.
    pub no_show_rate_lower_bound: f64,
    /// The most rooms on sale on a night of the range.
    pub capacity: i64,
    /// The largest overbooking allowance it was sold with in the range.
    pub current_allowance: i64,
    /// The largest allowance whose probability of walking a guest stays at or under
    /// `risk`.
    pub suggested_allowance: i64,
    /// That probability.
    pub walk_probability: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NoShowsReport {
    pub hotel_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub risk: f64,
    pub as_of: Option<DateTime<Utc>>,
    pub room_types: Vec<RoomTypeNoShows>,
}

impl From<NoShowReport> for RoomTypeNoShows {
    fn from(r: NoShowReport) -> Self {
        Self {
            room_type_id: r.room_type_id,
            name: r.name,
            due: r.due,
            no_shows: r.no_shows,
            no_show_rate: r.no_show_rate,
            no_show_rate_lower_bound: r.suggestion.rate,
            capacity: r.capacity,
            current_allowance: r.current_allowance,
            suggested_allowance: r.suggestion.allowance,
            walk_probability: r.suggestion.walk_probability,
        }
    }
}

/// The no-show rate per room type over a range and the overbooking allowance it
/// suggests: the largest allowance `A` with `P(Binomial(C + A, 1 - p) > C) <= risk`.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/no-shows", tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), NoShowsQuery),
    responses((status = 200, body = NoShowsReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "a bad range, or risk not between 0 and 1", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn no_shows(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<NoShowsQuery>,
) -> Result<Json<NoShowsReport>, ApiError> {
    let risk = query.risk.unwrap_or(0.05);
    if !(risk > 0.0 && risk < 1.0) {
        return Err(ApiError::invalid(
            "risk",
            "risk: between 0 and 1, exclusive",
        ));
    }
    let dates = (query.start_date, query.end_date);
    let (id, range, read) = read(&state, &principal, consistency, id, dates).await?;
    Ok(Json(NoShowsReport {
        hotel_id: id.get(),
        start_date: range.start(),
        end_date: range.end(),
        risk,
        as_of: read.as_of,
        room_types: read
            .no_show_report(risk)
            .into_iter()
            .map(RoomTypeNoShows::from)
            .collect(),
    }))
}
