//! Group blocks: rooms of one room type a hotel sets aside for a group over a stay, at a
//! contracted rate, until a release date. Admins set them up, change and release them;
//! every staff role reads their pickup. A reservation books from one with `block_code`
//! (see `reservations`).

use aggregates::{BlockCode, BlockTerms, Cents, RoomCount, RoomTypeId, StayDates};
use app::commands::blocks::BlockView;
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath};
use super::params::{hotel_id, staff};
use crate::state::AppState;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_block, get_block, delete_block))
}

/// Most rooms one block may set aside on a night.
const MAX_BLOCK_ROOMS: i64 = 1_000;
/// Most nights one block may span.
const MAX_BLOCK_NIGHTS: u32 = 90;
/// Most a block's rate may be: a million currency units a night.
const MAX_BLOCK_RATE_CENTS: i64 = 100_000_000;

/// A block's terms, whole: a `PUT` sets them all.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockIn {
    /// What staff call it (1 to 100 characters).
    #[schema(example = "Acme offsite", min_length = 1, max_length = 100)]
    pub name: String,
    /// The room type it sets aside; fixed once the block exists.
    #[schema(example = 1, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub room_type_id: i64,
    #[schema(schema_with = super::schema::stay_start_date)]
    pub start_date: NaiveDate,
    #[schema(schema_with = super::schema::block_end_date)]
    pub end_date: NaiveDate,
    /// Rooms on every night, picked up ones included; never below what is picked up.
    #[schema(example = 10, minimum = 1, maximum = 1000)]
    pub rooms: i64,
    /// The group's rate per room and night, in the hotel currency's minor unit.
    #[schema(example = 15000, minimum = 0, maximum = 100_000_000)]
    pub rate_cents: i64,
    #[schema(schema_with = super::schema::block_release_date)]
    pub release_date: NaiveDate,
}

impl BlockIn {
    fn parse(&self) -> Result<BlockTerms, ApiError> {
        let stay = StayDates::parse(self.start_date, self.end_date)?;
        if stay.night_count() > MAX_BLOCK_NIGHTS {
            return Err(ApiError::invalid(
                "end_date",
                format!("end_date: a block spans at most {MAX_BLOCK_NIGHTS} nights"),
            ));
        }
        if !(0..=MAX_BLOCK_RATE_CENTS).contains(&self.rate_cents) {
            return Err(ApiError::invalid(
                "rate_cents",
                format!("rate_cents: must be between 0 and {MAX_BLOCK_RATE_CENTS}"),
            ));
        }
        if !(1..=MAX_BLOCK_ROOMS).contains(&self.rooms) {
            return Err(ApiError::invalid(
                "rooms",
                format!("rooms: must be between 1 and {MAX_BLOCK_ROOMS}"),
            ));
        }
        Ok(BlockTerms::parse(
            &self.name,
            RoomTypeId::parse(self.room_type_id)?,
            stay,
            RoomCount::parse(self.rooms)?,
            Cents::new(self.rate_cents),
            self.release_date,
        )?)
    }
}

/// One night of a block.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockNightOut {
    #[schema(value_type = String, format = Date)]
    pub date: NaiveDate,
    /// The block's rooms on the night: picked up and still set aside.
    pub rooms: u32,
    /// Rooms its bookings took (held or confirmed).
    pub picked_up: u32,
    /// Rooms still set aside for the group; 0 once the block is released.
    pub remaining: u32,
}

/// A block, its terms and its pickup.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockOut {
    pub hotel_id: i64,
    #[schema(example = "ACME")]
    pub code: String,
    pub name: String,
    pub room_type_id: i64,
    #[schema(value_type = String, format = Date)]
    pub start_date: NaiveDate,
    #[schema(value_type = String, format = Date)]
    pub end_date: NaiveDate,
    pub rooms: u32,
    pub rate_cents: i64,
    /// ISO 4217 code of the hotel; amounts are in its minor unit.
    #[schema(example = "EUR")]
    pub currency: String,
    #[schema(value_type = String, format = Date)]
    pub release_date: NaiveDate,
    /// When the release date ends at the hotel: the unpicked rooms go back then.
    pub release_at: DateTime<Utc>,
    /// `open` (its rooms are set aside) or `released`.
    #[schema(example = "open")]
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_at: Option<DateTime<Utc>>,
    /// `release_date` (the worker at its end) or `staff` (released early).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_by: Option<&'static str>,
    pub nights: Vec<BlockNightOut>,
}

impl From<BlockView> for BlockOut {
    fn from(v: BlockView) -> Self {
        Self {
            hotel_id: v.hotel_id.get(),
            code: v.code.to_string(),
            name: v.terms.name().to_owned(),
            room_type_id: v.terms.room_type_id().get(),
            start_date: v.terms.stay().start(),
            end_date: v.terms.stay().end(),
            rooms: v.terms.rooms().get(),
            rate_cents: v.terms.rate_cents().get(),
            currency: v.currency.code().to_owned(),
            release_date: v.terms.release_date(),
            release_at: v.release_at,
            status: if v.released.is_some() {
                "released"
            } else {
                "open"
            },
            released_at: v.released.map(|(at, _)| at),
            released_by: v.released.map(|(_, reason)| reason.as_str()),
            nights: v
                .nights
                .into_iter()
                .map(|n| BlockNightOut {
                    date: n.date,
                    rooms: n.rooms,
                    picked_up: n.picked_up,
                    remaining: n.remaining,
                })
                .collect(),
        }
    }
}

/// A block's code from the path: 1 to 20 of `A-Z0-9-`; anything else names no block.
fn code(raw: &str) -> Result<BlockCode, ApiError> {
    BlockCode::parse(raw).map_err(|e| ApiError::invalid("code", format!("code: {}", e.message)))
}

/// Set up a group block, or change it: its rooms leave general sale on every night
/// (all or none). It can grow (from general sale) or shrink, never below its pickup.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/blocks/{code}", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
           ("code" = String, Path, pattern = "^[A-Z0-9-]{1,20}$")),
    request_body = BlockIn,
    responses(
        (status = 200, body = BlockOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 409, description = "sold_out (general sale has too few rooms left on `night`), below_pickup, block_released, no_inventory", body = ErrorBody),
        (status = 422, description = "invalid_request naming the field; unknown_hotel; unknown_room_type", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn put_block(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, raw)): ApiPath<(i64, String)>,
    ApiJson(body): ApiJson<BlockIn>,
) -> Result<Json<BlockOut>, ApiError> {
    principal.require(Role::REVENUE)?;
    let id = hotel_id(id)?;
    let code = code(&raw)?;
    let terms = body.parse()?;
    let view = state
        .commands
        .set_block(&staff(&principal), id, code, terms)
        .await?;
    Ok(Json(view.into()))
}

/// A block and its pickup on every night.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/blocks/{code}", tag = "browse",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
           ("code" = String, Path, pattern = "^[A-Z0-9-]{1,20}$")),
    responses((status = 200, body = BlockOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn get_block(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, raw)): ApiPath<(i64, String)>,
) -> Result<Json<BlockOut>, ApiError> {
    principal.require(Role::STAFF)?;
    let view = state
        .commands
        .block(hotel_id(id)?, code(&raw)?)
        .await?
        .ok_or_else(|| ApiError::not_found("no such block"))?;
    Ok(Json(view.into()))
}

/// Release a block now: its unpicked rooms go back to general sale and it takes no more
/// bookings; its bookings stay. Releasing a released block changes nothing.
#[utoipa::path(delete, path = "/v1/hotels/{hotel_id}/blocks/{code}", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
           ("code" = String, Path, pattern = "^[A-Z0-9-]{1,20}$")),
    responses((status = 200, body = BlockOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn delete_block(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((id, raw)): ApiPath<(i64, String)>,
) -> Result<Json<BlockOut>, ApiError> {
    principal.require(Role::REVENUE)?;
    let view = state
        .commands
        .release_block(&staff(&principal), hotel_id(id)?, code(&raw)?)
        .await?;
    Ok(Json(view.into()))
}
