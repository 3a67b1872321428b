//! Rate plans, their own rates, restrictions and bulk ARI updates (admin).
//!
//! The cancellation policy has one wire shape, in requests and in answers (a plan's and
//! a reservation's): `{"refundable": true, "full_refund_hours", "partial_refund_hours",
//! "partial_refund_percent"}` or `{"refundable": false}`.

use std::collections::BTreeSet;

use aggregates::booking::{AriChange, AriUpdate, InventoryUpdate};
use aggregates::cancellation::CancellationPolicy;
use aggregates::hotel::ADJUST_PERCENT_RANGE;
use aggregates::rate_plan::Pricing;
use aggregates::restrictions::RestrictionsPatch;
use aggregates::{
    Cents, CommandName, HotelId, InventoryLevels, RatePlan, RatePlanId, RoomTypeId, StayDates,
    Weekdays,
};
use axum::extract::State;
use axum::Json;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{Principal, Role};
use super::bodies::{hotel_out, HotelOut};
use super::bodies::{AriInventory, AriRate};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath};
use super::params::staff;
use crate::state::AppState;
use app::commands::MAX_ARI_UPDATES;
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Rate plans, their rates, restrictions, and ARI in bulk.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_restrictions))
        .routes(routes!(put_rate_plan))
        .routes(routes!(put_plan_rates))
        .routes(routes!(put_ari))
}

/// A cancellation policy as clients send it; a refundable one without its windows gets
/// the house policy's.
///
/// Its schema is `schema::cancellation_policy`: the two kinds of policy apart, which
/// the fields alone do not say.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyIn {
    pub refundable: bool,
    pub full_refund_hours: Option<i64>,
    pub partial_refund_hours: Option<i64>,
    pub partial_refund_percent: Option<i64>,
}

impl PolicyIn {
    pub fn parse(&self) -> Result<CancellationPolicy, ApiError> {
        let CancellationPolicy::Refundable {
            full_refund_hours,
            partial_refund_hours,
            partial_refund_percent,
        } = CancellationPolicy::HOUSE
        else {
            return Ok(CancellationPolicy::HOUSE);
        };
        if !self.refundable {
            if self.full_refund_hours.is_some()
                || self.partial_refund_hours.is_some()
                || self.partial_refund_percent.is_some()
            {
                return Err(ApiError::invalid(
                    "cancellation_policy",
                    "cancellation_policy: a non-refundable policy has no refund windows",
                ));
            }
            return Ok(CancellationPolicy::NonRefundable);
        }
        Ok(CancellationPolicy::refundable(
            self.full_refund_hours
                .unwrap_or(i64::from(full_refund_hours)),
            self.partial_refund_hours
                .unwrap_or(i64::from(partial_refund_hours)),
            self.partial_refund_percent
                .unwrap_or(i64::from(partial_refund_percent)),
        )?)
    }
}

/// How a plan is priced from another, as clients send it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DerivedFrom {
    #[schema(example = 1, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub rate_plan_id: i64,
    /// Each night costs the parent's price times `(100 + adjust_percent) / 100`, rounded
    /// to the nearest cent, halves up.
    #[schema(example = -10, minimum = -100, maximum = 1000)]
    pub adjust_percent: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PutRatePlan {
    #[schema(
        example = "Non-refundable",
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub name: String,
    /// The room types the plan sells (1 to 200, each a room type of the hotel).
    #[schema(schema_with = super::schema::room_type_ids)]
    pub room_type_ids: Vec<i64>,
    /// Default: the house policy (refundable: all back at 72 hours or more before
    /// check-in, half at 24 hours or more).
    #[schema(schema_with = super::schema::cancellation_policy)]
    pub cancellation_policy: Option<PolicyIn>,
    /// Absent: the plan costs the night's base rate, or its own rates where set.
    pub derived_from: Option<DerivedFrom>,
}

/// Create or update a rate plan of a hotel.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/rate-plans/{rate_plan_id}", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
        ("rate_plan_id" = i64, Path, description = "Positive integer chosen by the caller", minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutRatePlan,
    responses(
        (status = 200, description = "The hotel, its room types and rate plans", body = HotelOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "invalid fields, unknown_hotel, unknown_room_type (a listed room type the hotel does not have), unknown_rate_plan (an unknown parent), rate_plan_cycle (the derivation would loop)", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn put_rate_plan(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((hotel, plan)): ApiPath<(i64, i64)>,
    ApiJson(body): ApiJson<PutRatePlan>,
) -> Result<Json<HotelOut>, ApiError> {
    principal.require(Role::REVENUE)?;
    let hotel = HotelId::parse(hotel)?;
    let plan_id = RatePlanId::parse(plan)?;
    let mut room_types = BTreeSet::new();
    for id in &body.room_type_ids {
        if !room_types.insert(RoomTypeId::parse(*id)?) {
            return Err(ApiError::invalid(
                "room_type_ids",
                format!("room_type_ids: {id} is listed twice"),
            ));
        }
    }
    let policy = match &body.cancellation_policy {
        Some(policy) => policy.parse()?,
        None => CancellationPolicy::HOUSE,
    };
    let pricing = match &body.derived_from {
        None => Pricing::Own,
        Some(from) => Pricing::Derived {
            parent: RatePlanId::parse(from.rate_plan_id).map_err(|e| {
                ApiError::invalid("derived_from.rate_plan_id", format!("derived_from.{e}"))
            })?,
            adjust_percent: i32::try_from(from.adjust_percent)
                .ok()
                .filter(|p| ADJUST_PERCENT_RANGE.contains(&i64::from(*p)))
                .ok_or_else(|| {
                    ApiError::invalid(
                        "derived_from.adjust_percent",
                        "derived_from.adjust_percent: must be between -100 and 1000",
                    )
                })?,
        },
    };
    let plan = RatePlan::parse(&body.name, room_types, policy, pricing)?;
    let hotel = state
        .commands
        .set_rate_plan(&staff(&principal), hotel, plan_id, plan)
        .await?;
    hotel_out(&hotel)
}

/// Days of the week as clients name them; absent: every day.
fn weekdays(days: Option<&[String]>) -> Result<Weekdays, ApiError> {
    match days {
        None => Ok(Weekdays::ALL),
        Some(names) => Ok(Weekdays::parse(names)?),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PutPlanRates {
    #[schema(example = 1, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub room_type_id: i64,
    #[schema(schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// The night after the last one set (half-open range).
    #[schema(schema_with = super::schema::update_end_date)]
    pub end_date: NaiveDate,
    #[schema(example = 15000, minimum = 0, maximum = 10_000_000_000_i64)]
    pub rate_cents: i64,
    /// Only the nights on these days of the week (`mon` .. `sun`); absent: every night.
    #[schema(schema_with = super::schema::days)]
    pub days: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NightsSet {
    /// How many nights were set.
    pub nights: u32,
}

/// Set a plan's own rate on every night of a range (a plan priced on its own).
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/rate-plans/{rate_plan_id}/rates", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
        ("rate_plan_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutPlanRates,
    responses(
        (status = 200, body = NightsSet),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "derived_rate_plan (a derived plan is priced from its parent), no_inventory (names a night without inventory)", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "invalid fields, unknown_hotel, unknown_room_type, unknown_rate_plan (or one that does not sell the room type)", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn put_plan_rates(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((hotel, plan)): ApiPath<(i64, i64)>,
    ApiJson(body): ApiJson<PutPlanRates>,
) -> Result<Json<NightsSet>, ApiError> {
    principal.require(Role::REVENUE)?;
    let hotel = HotelId::parse(hotel)?;
    let rate_plan_id = RatePlanId::parse(plan)?;
    let update = AriUpdate {
        room_type_id: RoomTypeId::parse(body.room_type_id)?,
        range: StayDates::parse(body.start_date, body.end_date)?,
        days: weekdays(body.days.as_deref())?,
        change: AriChange::PlanRate {
            rate_plan_id,
            rate_cents: rate(body.rate_cents)?,
        },
    };
    let nights = state
        .commands
        .update_ari(
            &staff(&principal),
            CommandName::SetPlanRates,
            hotel,
            vec![update],
        )
        .await?;
    Ok(Json(NightsSet {
        nights: nights.iter().sum(),
    }))
}

/// A rate as clients send it, within the bounds of the inventory's rates.
fn rate(cents: i64) -> Result<Cents, ApiError> {
    // The inventory's bounds are the one statement of a valid rate.
    InventoryLevels::parse(0, 0, Cents::new(cents))
        .map(|levels| levels.rate_cents())
        .map_err(ApiError::from)
}

/// `null` and absent apart: absent keeps a restriction, `null` clears it.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Restrictions as clients send them: a field left out keeps its value, `null` clears
/// it. Their schema is `schema::put_restrictions` (and `schema::ari_restrictions` in a
/// bulk update), which also says that at least one must be given.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestrictionsIn {
    /// The plan the restrictions are for; `null` or absent: every plan of the room type.
    pub rate_plan_id: Option<i64>,
    /// Stays arriving on the night last at least this many nights.
    #[serde(default, deserialize_with = "present")]
    pub min_stay: Option<Option<i64>>,
    /// Stays arriving on the night last at most this many nights.
    #[serde(default, deserialize_with = "present")]
    pub max_stay: Option<Option<i64>>,
    /// Every stay including the night lasts at least this many nights.
    #[serde(default, deserialize_with = "present")]
    pub min_stay_through: Option<Option<i64>>,
    /// No stay may start on the night.
    #[serde(default, deserialize_with = "present")]
    pub closed_to_arrival: Option<Option<bool>>,
    /// No stay may end on this date (`end_date` equal to it).
    #[serde(default, deserialize_with = "present")]
    pub closed_to_departure: Option<Option<bool>>,
    /// The night is not sold at all.
    #[serde(default, deserialize_with = "present")]
    pub stop_sell: Option<Option<bool>>,
    /// Stays arriving on the night are booked at least this many days ahead.
    #[serde(default, deserialize_with = "present")]
    pub min_advance_days: Option<Option<i64>>,
    /// Stays arriving on the night are booked at most this many days ahead.
    #[serde(default, deserialize_with = "present")]
    pub max_advance_days: Option<Option<i64>>,
}

impl RestrictionsIn {
    fn plan(&self) -> Result<Option<RatePlanId>, ApiError> {
        Ok(self.rate_plan_id.map(RatePlanId::parse).transpose()?)
    }

    fn patch(&self) -> Result<RestrictionsPatch, ApiError> {
        let days = |field: &'static str, value: Option<Option<i64>>, min: i64| {
            value
                .map(|v| {
                    v.map(|n| RestrictionsPatch::days(field, n, min))
                        .transpose()
                })
                .transpose()
        };
        let flag = |value: Option<Option<bool>>| value.map(|v| v.unwrap_or(false));
        let patch = RestrictionsPatch {
            min_stay: days("min_stay", self.min_stay, 1)?,
            max_stay: days("max_stay", self.max_stay, 1)?,
            min_stay_through: days("min_stay_through", self.min_stay_through, 1)?,
            closed_to_arrival: flag(self.closed_to_arrival),
            closed_to_departure: flag(self.closed_to_departure),
            stop_sell: flag(self.stop_sell),
            min_advance_days: days("min_advance_days", self.min_advance_days, 0)?,
            max_advance_days: days("max_advance_days", self.max_advance_days, 0)?,
        };
        patch.check()?;
        if patch.is_empty() {
            return Err(ApiError::invalid(
                "restrictions",
                "restrictions: set at least one restriction",
            ));
        }
        Ok(patch)
    }
}

/// One flat object on the wire: the range, its days and the restrictions side by
/// side. Its schema is written out (`schema::put_restrictions`) rather than derived: a
/// derived one joins the flattened restrictions with `allOf`, and their "no other
/// fields" then contradicts the range's fields, so no body could satisfy it.
#[derive(Debug, Deserialize)]
pub struct PutRestrictions {
    pub start_date: NaiveDate,
    /// The night after the last one set (half-open range).
    pub end_date: NaiveDate,
    /// Only the nights on these days of the week (`mon` .. `sun`); absent: every night.
    pub days: Option<Vec<String>>,
    #[serde(flatten)]
    pub restrictions: RestrictionsIn,
}

impl utoipa::PartialSchema for PutRestrictions {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        super::schema::put_restrictions()
    }
}

impl ToSchema for PutRestrictions {}

/// Set restrictions on every night of a range, for every plan or one.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/room-types/{room_type_id}/restrictions", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64),
        ("room_type_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutRestrictions,
    responses(
        (status = 200, body = NightsSet),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "no_inventory (names a night without inventory)", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "invalid fields, unknown_hotel, unknown_room_type, unknown_rate_plan", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn put_restrictions(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath((hotel, room_type)): ApiPath<(i64, i64)>,
    ApiJson(body): ApiJson<PutRestrictions>,
) -> Result<Json<NightsSet>, ApiError> {
    principal.require(Role::REVENUE)?;
    let hotel = HotelId::parse(hotel)?;
    let update = AriUpdate {
        room_type_id: RoomTypeId::parse(room_type)?,
        range: StayDates::parse(body.start_date, body.end_date)?,
        days: weekdays(body.days.as_deref())?,
        change: AriChange::Restrictions {
            rate_plan_id: body.restrictions.plan()?,
            patch: body.restrictions.patch()?,
        },
    };
    let nights = state
        .commands
        .update_ari(
            &staff(&principal),
            CommandName::SetRestrictions,
            hotel,
            vec![update],
        )
        .await?;
    Ok(Json(NightsSet {
        nights: nights.iter().sum(),
    }))
}

/// One range of a bulk update, and what it sets on each of its nights (in this order:
/// inventory, restrictions, plan rates). Its schema is `schema::ari_updates`'s items.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AriRange {
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    /// The night after the last one set (half-open range).
    pub end_date: NaiveDate,
    /// Only the nights on these days of the week (`mon` .. `sun`); absent: every night.
    pub days: Option<Vec<String>>,
    pub inventory: Option<AriInventory>,
    pub restrictions: Option<RestrictionsIn>,
    #[serde(default)]
    pub rates: Vec<AriRate>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutAri {
    /// Applied in order, each on the state the earlier ones leave; all or none.
    #[schema(schema_with = super::schema::ari_updates)]
    pub updates: Vec<AriRange>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AriSet {
    /// Nights set, over every range (a night set by two ranges counts twice).
    pub nights: u32,
    /// Per range, in request order, how many nights it set.
    pub updates: Vec<NightsSet>,
}

/// A field of the `index`th range, named as a client can find it.
fn in_range(index: usize, e: ApiError) -> ApiError {
    e.in_field(&format!("updates[{index}]"))
}

/// Set availability, rates and inventory over many ranges in one request (as channel
/// managers send them).
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/ari", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = PutAri,
    responses(
        (status = 200, body = AriSet),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "inventory_below_reserved, no_inventory, derived_rate_plan; nothing is changed", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "invalid fields (named `updates[i].field`), unknown_hotel, unknown_room_type, unknown_rate_plan; nothing is changed", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn put_ari(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(hotel): ApiPath<i64>,
    ApiJson(body): ApiJson<PutAri>,
) -> Result<Json<AriSet>, ApiError> {
    principal.require(Role::REVENUE)?;
    let hotel = HotelId::parse(hotel)?;
    if body.updates.is_empty() || body.updates.len() > MAX_ARI_UPDATES {
        return Err(ApiError::invalid(
            "updates",
            format!("updates: must carry 1 to {MAX_ARI_UPDATES} ranges"),
        ));
    }
    let mut updates = Vec::new();
    let mut per_range = Vec::with_capacity(body.updates.len());
    for (index, range) in body.updates.iter().enumerate() {
        let parsed = (|| -> Result<Vec<AriUpdate>, ApiError> {
            let room_type_id = RoomTypeId::parse(range.room_type_id)?;
            let dates = StayDates::parse(range.start_date, range.end_date)?;
            let days = weekdays(range.days.as_deref())?;
            let update = |change| AriUpdate {
                room_type_id,
                range: dates,
                days,
                change,
            };
            let mut changes = Vec::new();
            if let Some(inventory) = &range.inventory {
                changes.push(update(AriChange::Inventory(InventoryUpdate {
                    total_rooms: inventory.total_rooms,
                    overbooking_allowance: inventory.overbooking_allowance,
                    rate_cents: inventory.rate_cents.map(Cents::new),
                })));
            }
            if let Some(restrictions) = &range.restrictions {
                changes.push(update(AriChange::Restrictions {
                    rate_plan_id: restrictions.plan()?,
                    patch: restrictions.patch()?,
                }));
            }
            for plan_rate in &range.rates {
                changes.push(update(AriChange::PlanRate {
                    rate_plan_id: RatePlanId::parse(plan_rate.rate_plan_id)?,
                    rate_cents: rate(plan_rate.rate_cents)?,
                }));
            }
            if changes.is_empty() {
                return Err(ApiError::invalid(
                    "updates",
                    "set inventory, restrictions or rates",
                ));
            }
            Ok(changes)
        })()
        .map_err(|e| in_range(index, e))?;
        per_range.push(parsed.len());
        updates.extend(parsed);
    }
    let nights = state
        .commands
        .update_ari(&staff(&principal), CommandName::UpdateAri, hotel, updates)
        .await?;
    // Every change of a range sets the same nights: report each range once.
    let mut counts = nights.into_iter();
    let mut answer = AriSet {
        nights: 0,
        updates: Vec::with_capacity(per_range.len()),
    };
    for changes in per_range {
        let mut range_nights = 0;
        for _ in 0..changes {
            range_nights = counts.next().unwrap_or(0);
        }
        answer.nights += range_nights;
        answer.updates.push(NightsSet {
            nights: range_nights,
        });
    }
    Ok(Json(answer))
}
