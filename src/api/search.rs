//! The search across a city's hotels (any role): `GET /v1/availability`, and the parts
//! of a stay query it shares with a hotel's own availability (rooms, guests, the stay
//! and its limits, and how an offer is shown).
//!
//! Every parameter is checked here, at the boundary, so a bad one is a 4xx in the
//! contract's error shape: a missing or mistyped one is 400 `malformed_request` (the
//! query string does not parse), a blank city or a number out of range 422
//! `invalid_request` naming the field.

use aggregates::booking::Offer;
use aggregates::{GuestCount, StayDates};
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Principal;
use super::catalog::city_filter;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiQuery, Consistency};
use super::AppState;
use crate::queries::{CitySearch, StayQuery, MAX_SEARCH_LIMIT};

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
}

/// A room type that can be booked for the whole stay under a plan.
#[derive(Debug, Serialize, ToSchema)]
pub struct OfferOut {
    pub room_type_id: i64,
    /// `null`: the base rate, for a room type no plan sells (house policy).
    pub rate_plan_id: Option<i64>,
    /// The price of the stay for the rooms and guests asked.
    pub total_cents: i64,
    /// The fewest rooms left on any night of the stay.
    pub remaining: u32,
    /// `false`: a guest's cancellation refunds nothing.
    pub refundable: bool,
}

impl From<&Offer> for OfferOut {
    fn from(offer: &Offer) -> Self {
        Self {
            room_type_id: offer.room_type_id.get(),
            rate_plan_id: offer.rate_plan_id.map(|p| p.get()),
            total_cents: offer.total_cents.get(),
            remaining: offer.remaining,
            refundable: offer.refundable,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HotelOffersOut {
    pub hotel_id: i64,
    pub name: String,
    pub city: String,
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
    /// Hotels with at least one offer, by their cheapest offer.
    pub hotels: Vec<HotelOffersOut>,
}

/// The stay, rooms and guests of an availability query or a search, checked against
/// the booking limits' size rules (the rest depends on the hotel's date, and only hides
/// offers).
pub fn stay_query(
    state: &AppState,
    start_date: NaiveDate,
    end_date: NaiveDate,
    rooms: Option<i64>,
    guests: Option<i64>,
) -> Result<StayQuery, ApiError> {
    let stay = StayDates::parse(start_date, end_date)?;
    let limits = state.commands.config().limits;
    limits.check_nights(&stay)?;
    let rooms = limits.rooms(rooms.unwrap_or(1))?;
    let guests = match guests {
        None => GuestCount::ONE,
        Some(g) => GuestCount::parse(g)?,
    };
    Ok(StayQuery {
        stay,
        rooms,
        guests,
        limits,
    })
}

/// Offers for a stay across a city's hotels, cheapest first. May be a little stale; a
/// hold is always decided against the database.
#[utoipa::path(get, path = "/v1/availability", tag = "browse", params(SearchParams),
    responses((status = 200, body = SearchOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody)),
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
    let answer = state
        .queries
        .search(
            &CitySearch {
                city: city.to_owned(),
                stay,
                limit,
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
                offers: h.offers.iter().map(OfferOut::from).collect(),
            })
            .collect(),
    }))
}
