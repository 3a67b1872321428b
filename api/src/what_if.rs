//! `POST /v1/analytics/what-if`: a room type's recorded demand over a range of nights
//! replayed under another overbooking policy, beside the policy in force (admin,
//! auditor). The replay itself is the domain's (`aggregates::what_if`); reading the
//! demand is the query side's (`app::queries::WhatIf`); here the question is checked
//! and the answer written in the API's words.

use aggregates::what_if::Outcome;
use aggregates::{HotelId, RoomTypeId};
use axum::extract::State;
use axum::Json;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::ApiJson;
use super::params::from_to_range;
use crate::state::AppState;
use app::queries::{Policy, WhatIfQuery};

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(what_if))
}

/// The largest allowance a what-if may ask about.
const MAX_ALLOWANCE: i64 = 10_000;
/// The most a walk may be said to cost, in the currency's minor unit.
const MAX_WALK_COST_CENTS: i64 = 100_000_000;

/// The policy to replay under: exactly one of the two (its schema,
/// `schema::what_if_policy`, says so).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyIn {
    pub overbooking_allowance: Option<i64>,
    pub suggested_risk: Option<f64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WhatIfIn {
    #[schema(example = 812, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub hotel_id: i64,
    #[schema(example = 1, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub room_type_id: i64,
    /// First night replayed.
    #[schema(schema_with = super::schema::start_date)]
    pub from: NaiveDate,
    /// The night after the last one replayed: the range is [from, to), 1 to 400 nights.
    #[schema(schema_with = super::schema::turnaways_to)]
    pub to: NaiveDate,
    #[schema(schema_with = super::schema::what_if_policy)]
    pub policy: PolicyIn,
    /// What walking a guest costs the hotel (a room elsewhere, the transfer, goodwill),
    /// in the currency's minor unit; when given, each figure also states the expected
    /// walks' cost and the revenue net of it.
    #[schema(example = 25000, minimum = 0, maximum = 100_000_000)]
    pub walk_cost_cents: Option<i64>,
}

impl WhatIfIn {
    fn parse(&self) -> Result<(WhatIfQuery, Option<i64>), ApiError> {
        let not_found = || ApiError::not_found("no such hotel or room type");
        let hotel_id = HotelId::parse(self.hotel_id).map_err(|_| not_found())?;
        let room_type_id = RoomTypeId::parse(self.room_type_id).map_err(|_| not_found())?;
        let range = from_to_range(self.from, self.to)?;
        let policy = match (
            self.policy.overbooking_allowance,
            self.policy.suggested_risk,
        ) {
            (Some(n), None) => {
                if !(0..=MAX_ALLOWANCE).contains(&n) {
                    return Err(ApiError::invalid(
                        "policy.overbooking_allowance",
                        format!("overbooking_allowance must be 0 to {MAX_ALLOWANCE}"),
                    ));
                }
                Policy::Allowance(u32::try_from(n).unwrap_or(0))
            }
            (None, Some(risk)) => {
                if !(risk > 0.0 && risk < 1.0) {
                    return Err(ApiError::invalid(
                        "policy.suggested_risk",
                        "suggested_risk must be above 0 and below 1",
                    ));
                }
                Policy::SuggestedRisk(risk)
            }
            _ => {
                return Err(ApiError::invalid(
                    "policy",
                    "policy needs exactly one of overbooking_allowance and suggested_risk",
                ))
            }
        };
        if let Some(cost) = self.walk_cost_cents {
            if !(0..=MAX_WALK_COST_CENTS).contains(&cost) {
                return Err(ApiError::invalid(
                    "walk_cost_cents",
                    format!("walk_cost_cents must be 0 to {MAX_WALK_COST_CENTS}"),
                ));
            }
        }
        let query = WhatIfQuery {
            hotel_id,
            room_type_id,
            range,
            policy,
        };
        Ok((query, self.walk_cost_cents))
    }
}

/// What a policy sold, earned and walked.
#[derive(Debug, Serialize, ToSchema, Default, PartialEq)]
pub struct Figures {
    /// Rooms sold, night by night, at the end of the demand.
    pub room_nights_sold: i64,
    /// Each room sold at the night's rate when it was sold.
    pub revenue_cents: i64,
    /// Guests expected to arrive beyond the physical rooms (to four places).
    pub walks_expected: f64,
    /// Guests beyond the physical rooms if every guest sold a room arrives.
    pub walks_worst: i64,
    /// The expected walks times `walk_cost_cents`, rounded; null without a walk cost.
    pub walk_cost_cents: Option<i64>,
    /// `revenue_cents` less `walk_cost_cents`; null without a walk cost.
    pub net_revenue_cents: Option<i64>,
}

impl Figures {
    fn of(outcomes: &[Outcome], walk_cost: Option<i64>) -> Self {
        let walks: f64 = outcomes.iter().map(|o| o.walks_expected).sum();
        let revenue = outcomes
            .iter()
            .map(|o| o.revenue_cents)
            .fold(0, i64::saturating_add);
        let cost = walk_cost.map(|c| (walks * c as f64).round() as i64);
        Figures {
            room_nights_sold: outcomes.iter().map(|o| i64::from(o.room_nights_sold)).sum(),
            revenue_cents: revenue,
            walks_expected: (walks * 10_000.0).round() / 10_000.0,
            walks_worst: outcomes.iter().map(|o| i64::from(o.walks_worst)).sum(),
            walk_cost_cents: cost,
            net_revenue_cents: cost.map(|c| revenue.saturating_sub(c)),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WhatIfNight {
    pub date: NaiveDate,
    pub in_force: Figures,
    pub what_if: Figures,
}

/// The policy replayed.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyOut {
    /// The allowance replayed on every night (the suggested one, for a risk).
    pub overbooking_allowance: i64,
    /// The risk asked for; null when an allowance was.
    pub suggested_risk: Option<f64>,
}

/// What the figures rest on.
#[derive(Debug, Serialize, ToSchema)]
pub struct Assumptions {
    /// Rooms not come over rooms due, of the range's stays whose arrival is recorded;
    /// null when none is (every guest is then expected to come, so the expected walks
    /// are the worst case).
    pub no_show_rate: Option<f64>,
    /// Rooms of the range's stays whose arrival (or no-show) is recorded.
    pub rooms_due: i64,
    pub no_shows: i64,
    /// As asked; null when not given.
    pub walk_cost_cents: Option<i64>,
}

/// How much history was replayed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Replayed {
    pub events: i64,
    pub turnaways: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WhatIfOut {
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub policy: PolicyOut,
    pub assumptions: Assumptions,
    /// The range's totals under each night's recorded allowance: what was sold.
    pub in_force: Figures,
    /// The range's totals under the policy asked about.
    pub what_if: Figures,
    pub nights: Vec<WhatIfNight>,
    pub replayed: Replayed,
}

/// Replays a room type's recorded demand over a range of nights (holds taken and their
/// confirmations, lapses, cancellations, no-shows and check-ins, and the requests turned
/// away as sold out, in commit order) under another overbooking allowance, beside the
/// allowance in force: room-nights sold, revenue, and walks expected and at worst.
/// Deterministic for the same history. A turned-away request the policy would have
/// taken is assumed to book at once at the night's rate, its guest coming or not at the
/// range's no-show rate; the policy in force keeps the hotel's own refusals.
#[utoipa::path(post, path = "/v1/analytics/what-if", tag = "analytics",
    request_body = WhatIfIn,
    responses((status = 200, body = WhatIfOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "No such hotel or room type", body = ErrorBody),
        (status = 422, description = "A field out of its range, `to` not after `from`, or a policy without exactly one of its two", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn what_if(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<WhatIfIn>,
) -> Result<Json<WhatIfOut>, ApiError> {
    principal.require(Role::AUDIT)?;
    let (query, walk_cost) = body.parse()?;
    let answer = state
        .queries
        .what_if(&query)
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel or room type"))?;
    let in_force: Vec<Outcome> = answer.nights.iter().map(|(_, now, _)| *now).collect();
    let what_if: Vec<Outcome> = answer.nights.iter().map(|(_, _, then)| *then).collect();
    Ok(Json(WhatIfOut {
        hotel_id: query.hotel_id.get(),
        room_type_id: query.room_type_id.get(),
        from: query.range.start(),
        to: query.range.end(),
        policy: PolicyOut {
            overbooking_allowance: i64::from(answer.allowance),
            suggested_risk: body.policy.suggested_risk,
        },
        assumptions: Assumptions {
            no_show_rate: answer.no_show_rate,
            rooms_due: answer.due,
            no_shows: answer.no_shows,
            walk_cost_cents: walk_cost,
        },
        in_force: Figures::of(&in_force, walk_cost),
        what_if: Figures::of(&what_if, walk_cost),
        nights: answer
            .nights
            .iter()
            .map(|(date, now, then)| WhatIfNight {
                date: *date,
                in_force: Figures::of(std::slice::from_ref(now), walk_cost),
                what_if: Figures::of(std::slice::from_ref(then), walk_cost),
            })
            .collect(),
        replayed: Replayed {
            events: i64::try_from(answer.events_read).unwrap_or(i64::MAX),
            turnaways: i64::try_from(answer.turnaways_read).unwrap_or(i64::MAX),
        },
    }))
}
