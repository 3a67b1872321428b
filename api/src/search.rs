//! The search across a city's hotels (any role): `GET /v1/availability`. The stay
//! query it shares with a hotel's own availability is read by `params::stay_query`, and
//! an offer shown as `bodies::OfferOut`.
//!
//! Every parameter is checked here, at the boundary, so a bad one is a 4xx in the
//! contract's error shape: a missing or mistyped one is 400 `malformed_request` (the
//! query string does not parse), a blank city or a number out of range 422
//! `invalid_request` naming the field.

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Principal;
use super::bodies::OfferOut;
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiQuery, Consistency};
use super::params::city_filter;
use super::params::stay_query;
use crate::state::AppState;
use app::queries::{CitySearch, MAX_SEARCH_LIMIT};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). The city search.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search))
}

/// Hotels answered when `limit` is not given.
const DEFAULT_LIMIT: usize = 20;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// City name, case-insensitive.
    #[param(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub city: String,
    /// First night of the stay.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// Check-out day: the stay is `[start_date, end_date)`, at most 30 nights.
    #[param(required = true, schema_with = super::schema::stay_end_date)]
    pub end_date: NaiveDate,
    /// Rooms wanted on every night (default 1).
    #[param(minimum = 1, maximum = 10)]
    pub rooms: Option<i64>,
    /// Guests in each room (default 1).
    #[param(minimum = 1, maximum = 50)]
    pub guests: Option<i64>,
    /// Most hotels answered (default 20).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// Only hotels pricing in this ISO 4217 currency. Without it, hotels are grouped by
    /// currency (by code) and ranked within each: amounts in different currencies are
    /// never compared.
    #[param(schema_with = super::schema::currency)]
    pub currency: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HotelOffersOut {
    pub hotel_id: i64,
    pub name: String,
    pub city: String,
    /// ISO 4217 code of every amount of the hotel's offers.
    #[schema(example = "EUR")]
    pub currency: String,
    /// Cheapest first.
    pub offers: Vec<OfferOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SearchOut {
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    /// Every change committed before this time is reflected.
    pub as_of: DateTime<Utc>,
    /// `cache` (the read model) or `database` (the write side's rows).
    #[schema(example = "cache")]
    pub source: String,
    /// Hotels with at least one offer: by currency (code), then by what their cheapest
    /// offer costs the guest (`total_due_cents`).
    pub hotels: Vec<HotelOffersOut>,
}

/// Offers for a stay across a city's hotels, cheapest first. May be a little stale; a
/// hold is always decided against the database.
#[utoipa::path(get, path = "/v1/availability", tag = "browse", params(SearchParams),
    responses((status = 200, body = SearchOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 422, body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn search(
    State(state): State<AppState>,
    _principal: Principal,
    consistency: Consistency,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> Result<Json<SearchOut>, ApiError> {
    let city = city_filter(&params.city)?;
    let stay = stay_query(
        &state,
        params.start_date,
        params.end_date,
        params.rooms,
        params.guests,
    )?;
    let limit = match params.limit {
        None => DEFAULT_LIMIT,
        Some(l) => usize::try_from(l)
            .ok()
            .filter(|l| (1..=MAX_SEARCH_LIMIT).contains(l))
            .ok_or_else(|| {
                ApiError::invalid(
                    "limit",
                    format!("limit must be between 1 and {MAX_SEARCH_LIMIT}"),
                )
            })?,
    };
    let currency = params
        .currency
        .as_deref()
        .map(aggregates::Currency::parse)
        .transpose()?;
    let answer = state
        .queries
        .search(
            &CitySearch {
                city: city.to_owned(),
                stay,
                limit,
                currency,
            },
            consistency.0,
        )
        .await?;
    Ok(Json(SearchOut {
        start_date: stay.stay.start(),
        end_date: stay.stay.end(),
        as_of: answer.as_of,
        source: answer.source.as_str().to_owned(),
        hotels: answer
            .hotels
            .iter()
            .map(|h| HotelOffersOut {
                hotel_id: h.hotel_id,
                name: h.name.clone(),
                city: h.city.clone(),
                currency: h.currency.code().to_owned(),
                offers: h.offers.iter().map(OfferOut::from).collect(),
            })
            .collect(),
    }))
}
