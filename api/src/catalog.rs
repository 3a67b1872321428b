//! Catalog and inventory (admin), hotel look-ups and a hotel's availability (any
//! role).

use aggregates::booking::InventoryUpdate;
use aggregates::restrictions::{NightRestrictions, RestrictionSet};
use aggregates::{
    Cents, Currency, HotelDetails, HotelId, Rejection, RoomTypeDetails, RoomTypeId, StayDates,
};
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::bodies::OfferOut;
use super::bodies::{hotel_out, HotelOut};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath, ApiQuery, Consistency};
use super::params::stay_query;
use super::params::{city_filter, hotel_id, load_hotel, staff, CitySearch};
use crate::state::AppState;
use app::queries::{NightAvailability, PlanPrice};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Hotels, room types, inventory, and a hotel's availability.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search_hotels))
        .routes(routes!(put_hotel, get_hotel))
        .routes(routes!(put_room_type))
        .routes(routes!(put_inventory))
        .routes(routes!(availability))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PutHotel {
    #[schema(
        example = "Hotel Tejo",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub name: String,
    #[schema(
        example = "Lisbon",
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub city: String,
    /// IANA timezone name (one the server knows, case and all).
    #[schema(schema_with = super::schema::timezone)]
    pub timezone: String,
    /// ISO 4217 code the hotel prices in (with a minor unit: EUR, CHF, JPY...). Absent:
    /// the one it has (the euro for a new hotel). A change is refused (409
    /// `currency_in_use`) while it has reservations not yet checked out.
    #[schema(schema_with = super::schema::currency)]
    pub currency: Option<String>,
}

/// Create or update a hotel.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}", tag = "catalog",
    params(("hotel_id" = i64, Path, description = "Positive integer chosen by the caller", minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutHotel,
    responses(
        (status = 200, body = HotelOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "currency_in_use: names a reservation in the old currency", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn put_hotel(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<PutHotel>,
) -> Result<Json<HotelOut>, ApiError> {
    principal.require(&[Role::Admin])?;
    let id = HotelId::parse(id)?;
    let details = HotelDetails::parse(&body.name, &body.city, &body.timezone)?;
    let currency = body.currency.as_deref().map(Currency::parse).transpose()?;
    let hotel = state
        .commands
        .set_hotel(&staff(&principal), id, details, currency)
        .await?;
    hotel_out(&hotel)
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PutRoomType {
    #[schema(
        example = "king",
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub name: String,
    #[schema(example = 2, minimum = 1, maximum = 50)]
    pub max_occupancy: i64,
    /// Guests the rate covers (1 to `max_occupancy`; default `max_occupancy`).
    #[schema(schema_with = super::schema::base_occupancy)]
    pub base_occupancy: Option<i64>,
    /// Added per night and room for each guest beyond `base_occupancy` (default 0).
    #[schema(example = 2500, minimum = 0, maximum = 100_000_000)]
    pub extra_guest_cents: Option<i64>,
}

/// Create or update a room type of an existing hotel.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/room-types/{room_type_id}", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
        ("room_type_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutRoomType,
    responses(
        (status = 200, body = HotelOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn put_room_type(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((hotel, room_type)): ApiPath<(i64, i64)>,
    ApiJson(body): ApiJson<PutRoomType>,
) -> Result<Json<HotelOut>, ApiError> {
    principal.require(&[Role::Admin])?;
    let hotel = HotelId::parse(hotel)?;
    let room_type = RoomTypeId::parse(room_type)?;
    let details = RoomTypeDetails::parse(&body.name, body.max_occupancy)?
        .with_occupancy_pricing(body.base_occupancy, body.extra_guest_cents)?;
    let hotel = state
        .commands
        .set_room_type(&staff(&principal), hotel, room_type, details)
        .await?;
    hotel_out(&hotel)
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PutInventory {
    /// First night set.
    #[schema(schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// The night after the last one set (half-open range, at most 800 nights).
    #[schema(schema_with = super::schema::update_end_date)]
    pub end_date: NaiveDate,
    #[schema(example = 100, minimum = 0, maximum = 1_000_000)]
    pub total_rooms: i64,
    /// Kept as it is when omitted (0 for a new night).
    #[schema(example = 0, minimum = 0, maximum = 1_000_000)]
    pub overbooking_allowance: Option<i64>,
    /// Kept as it is when omitted; required for nights without a rate yet.
    #[schema(example = 18000, minimum = 0, maximum = 10_000_000_000_i64)]
    pub rate_cents: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InventorySet {
    /// How many nights were set.
    pub nights: u32,
}

/// Set total rooms, overbooking allowance and rate on every night of a range.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/room-types/{room_type_id}/inventory",
    tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
        ("room_type_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutInventory,
    responses(
        (status = 200, body = InventorySet),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "inventory_below_reserved, names the night", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn put_inventory(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((hotel, room_type)): ApiPath<(i64, i64)>,
    ApiJson(body): ApiJson<PutInventory>,
) -> Result<Json<InventorySet>, ApiError> {
    principal.require(Role::REVENUE)?;
    let hotel = HotelId::parse(hotel)?;
    let room_type = RoomTypeId::parse(room_type)?;
    let range = StayDates::parse(body.start_date, body.end_date)?;
    let nights = state
        .commands
        .set_inventory(
            &staff(&principal),
            hotel,
            room_type,
            range,
            InventoryUpdate {
                total_rooms: Some(body.total_rooms),
                overbooking_allowance: body.overbooking_allowance,
                rate_cents: body.rate_cents.map(Cents::new),
            },
        )
        .await?;
    Ok(Json(InventorySet { nights }))
}

/// A hotel with its room types.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}", tag = "browse",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    responses((status = 200, body = HotelOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn get_hotel(
    State(state): State<AppState>,
    _principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<HotelOut>, ApiError> {
    let hotel = load_hotel(&state, hotel_id(id)?, consistency).await?;
    hotel_out(&hotel)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HotelList {
    pub hotels: Vec<HotelOut>,
}

/// Hotels in a city, or every hotel.
#[utoipa::path(get, path = "/v1/hotels", tag = "browse", params(CitySearch),
    responses((status = 200, body = HotelList), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 422, body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn search_hotels(
    State(state): State<AppState>,
    _principal: Principal,
    consistency: Consistency,
    ApiQuery(query): ApiQuery<CitySearch>,
) -> Result<Json<HotelList>, ApiError> {
    let city = query.city.as_deref().map(city_filter).transpose()?;
    let hotels = state
        .queries
        .on_replica(consistency.0, |q| async move {
            match city {
                Some(city) => q.hotels_in(city).await,
                None => q.all_hotels().await,
            }
        })
        .await?
        .iter()
        .filter_map(HotelOut::of)
        .collect();
    Ok(Json(HotelList { hotels }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AvailabilityQuery {
    /// First night of the stay.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// Check-out day: the stay is `[start_date, end_date)`, at most 30 nights.
    #[param(required = true, schema_with = super::schema::stay_end_date)]
    pub end_date: NaiveDate,
    /// Rooms wanted on every night (default 1).
    #[param(minimum = 1, maximum = 10)]
    pub rooms: Option<i64>,
    /// Guests in each room (default 1): prices and offers are for them.
    #[param(minimum = 1, maximum = 50)]
    pub guests: Option<i64>,
    /// Answer as the event log knew it at this moment (RFC 3339, not in the future):
    /// only events recorded by then count (admin, auditor).
    #[param(value_type = Option<String>, format = DateTime, example = "2027-05-02T10:00:00Z")]
    pub as_known_at: Option<DateTime<Utc>>,
}

/// Restrictions in force, only the ones that bind (an empty object: none).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct RestrictionsOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_stay: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_stay: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_stay_through: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub closed_to_arrival: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub closed_to_departure: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stop_sell: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_advance_days: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_advance_days: Option<u32>,
}

impl From<NightRestrictions> for RestrictionsOut {
    fn from(r: NightRestrictions) -> Self {
        Self {
            min_stay: r.min_stay,
            max_stay: r.max_stay,
            min_stay_through: r.min_stay_through,
            closed_to_arrival: r.closed_to_arrival,
            closed_to_departure: r.closed_to_departure,
            stop_sell: r.stop_sell,
            min_advance_days: r.min_advance_days,
            max_advance_days: r.max_advance_days,
        }
    }
}

/// A plan's price of one room on one night.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanPriceOut {
    /// `null`: the base rate, for a room type no plan sells.
    pub rate_plan_id: Option<i64>,
    /// For one room and the guests asked, extra guests included.
    pub rate_cents: i64,
    /// The plan's own restrictions on this night, when it has any; a stay under the
    /// plan meets these and the night's `restrictions` both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restrictions: Option<RestrictionsOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NightOut {
    #[serde(serialize_with = "iso_date")]
    pub date: NaiveDate,
    pub remaining: u32,
    /// The base rate; `null` without inventory.
    pub rate_cents: Option<i64>,
    /// The restrictions for every plan in force on this night.
    pub restrictions: RestrictionsOut,
    /// One per plan selling the room type (or the base rate when none does).
    pub prices: Vec<PlanPriceOut>,
}

impl NightOut {
    fn of(night: NightAvailability) -> Self {
        Self {
            date: night.date,
            remaining: night.remaining,
            rate_cents: night.rate_cents,
            restrictions: night.restrictions.all.into(),
            prices: prices_out(&night.prices, &night.restrictions),
        }
    }
}

/// A night's prices per plan, each with the plan's own restrictions when it has any.
pub(crate) fn prices_out(prices: &[PlanPrice], restrictions: &RestrictionSet) -> Vec<PlanPriceOut> {
    prices
        .iter()
        .map(|p| PlanPriceOut {
            rate_plan_id: p.rate_plan_id.map(|id| id.get()),
            rate_cents: p.rate_cents.get(),
            restrictions: p
                .rate_plan_id
                .and_then(|id| restrictions.plans.get(&id))
                .filter(|r| !r.is_none())
                .map(|r| (*r).into()),
        })
        .collect()
}

/// A date as `YYYY-MM-DD`, the form chrono's `Serialize` gives, written without the
/// formatting machinery chrono goes through (`Debug`, padding): an availability answer
/// has a date per night and room type, and formatting them showed in the server's
/// profile under reads (see docs/benchmarks.md, `redis-round-trips`). Years outside 0..=9999 take chrono's own path.
pub(crate) fn iso_date<S: serde::Serializer>(
    date: &NaiveDate,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let Ok(year) = u32::try_from(date.year()) else {
        return date.serialize(serializer);
    };
    if year > 9999 {
        return date.serialize(serializer);
    }
    let digit = |n: u32| b'0' + (n % 10) as u8;
    let (month, day) = (date.month(), date.day());
    let text = [
        digit(year / 1000),
        digit(year / 100),
        digit(year / 10),
        digit(year),
        b'-',
        digit(month / 10),
        digit(month),
        b'-',
        digit(day / 10),
        digit(day),
    ];
    match std::str::from_utf8(&text) {
        Ok(text) => serializer.serialize_str(text),
        Err(_) => date.serialize(serializer),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoomTypeAvailability {
    pub room_type_id: i64,
    pub name: String,
    /// Whether a hold of `rooms` rooms of this type for this stay and `guests` would be
    /// accepted now under some plan (or the base rate): exactly when `offers` is not
    /// empty. Enough rooms on every night is not enough: restrictions, occupancy and
    /// the booking limits decide too.
    pub available: bool,
    /// The fewest rooms left over the nights (0 for a night without inventory).
    pub remaining: u32,
    /// The price of the stay for the rooms and guests asked at the base rate (no plan),
    /// each night priced as in `prices` (extra guests included): what a hold without a
    /// `rate_plan_id` would cost. `null` when a night has no inventory or the room does
    /// not sleep the guests.
    pub total_cents: Option<i64>,
    pub nights: Vec<NightOut>,
    /// What the stay can be booked as (see `GET /v1/availability`), cheapest first.
    pub offers: Vec<OfferOut>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Availability {
    pub hotel_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    /// When the answer was read.
    pub as_of: DateTime<Utc>,
    /// `database` (read from the write side's rows), `cache` (the read model),
    /// `replica`, or `log` (folded from the event log, for `as_known_at`).
    #[schema(example = "database")]
    pub source: String,
    /// The moment asked for with `as_known_at`: the answer is what the log knew then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_known_at: Option<DateTime<Utc>>,
    /// ISO 4217 code of the hotel's prices: every amount is an integer in its minor
    /// unit (whole yen for JPY).
    #[schema(example = "EUR")]
    pub currency: String,
    pub room_types: Vec<RoomTypeAvailability>,
}

/// Remaining rooms, rates, restrictions and prices per plan for a stay, per room type,
/// and the offers it can be booked as. May be a little stale; a hold is always decided
/// against the database.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/availability", tag = "browse",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), AvailabilityQuery),
    responses((status = 200, body = Availability), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, description = "invalid_request, or occupancy_exceeded: no room type sleeps the guests", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn availability(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<AvailabilityQuery>,
) -> Result<Json<Availability>, ApiError> {
    let id = hotel_id(id)?;
    let stay_query = stay_query(
        &state,
        query.start_date,
        query.end_date,
        query.rooms,
        query.guests,
    )?;
    let answer = match query.as_known_at {
        None => state
            .queries
            .availability(id, &stay_query, consistency.0)
            .await?
            .ok_or_else(|| ApiError::not_found("no such hotel"))?,
        Some(at) => {
            principal.require(Role::AUDIT)?;
            // The log stamps events with the database's wall clock, which the server's
            // shares; a test's manual clock may run behind it.
            if at > Utc::now().max(state.commands.now()) {
                return Err(ApiError::invalid(
                    "as_known_at",
                    "as_known_at is in the future: the log knows only the past",
                ));
            }
            state
                .queries
                .availability_as_known_at(id, &stay_query, at)
                .await?
                .ok_or_else(|| ApiError::not_found("no such hotel at as_known_at"))?
        }
    };
    Ok(Json(availability_out(
        id,
        &stay_query,
        answer,
        query.as_known_at,
    )?))
}

/// An availability answer as the API writes it: the endpoint's, and `reservations audit
/// at`'s (the same JSON from the command line). Refused as `occupancy_exceeded` when no
/// room type sleeps the guests.
pub fn availability_out(
    id: HotelId,
    stay_query: &app::queries::StayQuery,
    answer: app::queries::StayAvailability,
    as_known_at: Option<DateTime<Utc>>,
) -> Result<Availability, ApiError> {
    let guests = stay_query.guests.get();
    let largest = answer.room_types.iter().map(|rt| rt.max_occupancy).max();
    if let Some(max_occupancy) = largest.filter(|max| *max < guests) {
        return Err(Rejection::OccupancyExceeded { max_occupancy }.into());
    }
    let offers = &answer.offers;
    let currency = answer.currency.code().to_owned();
    let room_types = answer
        .room_types
        .into_iter()
        .map(|rt| {
            let nights: Vec<NightOut> = rt.nights.into_iter().map(NightOut::of).collect();
            let remaining = nights.iter().map(|n| n.remaining).min().unwrap_or(0);
            let offers: Vec<OfferOut> = offers
                .iter()
                .filter(|o| o.room_type_id.get() == rt.room_type_id)
                .map(OfferOut::from)
                .collect();
            RoomTypeAvailability {
                room_type_id: rt.room_type_id,
                name: rt.name,
                // One rule: the offers' (a hold's).
                available: !offers.is_empty(),
                remaining,
                total_cents: rt.base_total.map(Cents::get),
                nights,
                offers,
            }
        })
        .collect();
    Ok(Availability {
        hotel_id: id.get(),
        start_date: stay_query.stay.start(),
        end_date: stay_query.stay.end(),
        as_of: answer.as_of,
        source: answer.source.as_str().to_owned(),
        as_known_at,
        currency,
        room_types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_night_serializes_its_date_as_chrono_does() {
        let dates = [
            NaiveDate::from_ymd_opt(2027, 1, 4),
            NaiveDate::from_ymd_opt(1999, 12, 31),
            NaiveDate::from_ymd_opt(2024, 2, 29),
            NaiveDate::from_ymd_opt(9999, 12, 31),
            NaiveDate::from_ymd_opt(10_000, 1, 1),
            NaiveDate::from_ymd_opt(33, 7, 9),
            NaiveDate::from_ymd_opt(-1, 1, 1),
            Some(NaiveDate::MIN),
            Some(NaiveDate::MAX),
        ];
        for date in dates.into_iter().flatten() {
            let night = NightOut {
                date,
                remaining: 3,
                rate_cents: None,
                restrictions: RestrictionsOut::default(),
                prices: Vec::new(),
            };
            let json = serde_json::to_value(&night).expect("serializes");
            assert_eq!(
                json["date"],
                serde_json::to_value(date).expect("chrono"),
                "{date}"
            );
        }
    }
}
