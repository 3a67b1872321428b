//! A hotel's taxes and fees (admin sets them, any role reads them), and how a stay's
//! taxes are shown wherever a price is: offers and reservations carry the same
//! [`TaxOut`] lines and `total_due_cents`.
//!
//! The rules' shape is the request's (`kind` says which fields apply); a field that
//! does not belong to the kind is refused rather than ignored, so a client never
//! believes a cap or an inclusion was set that was not.

use aggregates::taxes::{BasisPoints, Tax, TaxKind, TaxLine, TaxedStay, Taxes};
use aggregates::{Cents, Hotel};
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath, Consistency};
use super::params::{hotel_id, staff};
use crate::state::AppState;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_taxes, get_taxes))
}

/// One tax or fee as set and shown.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct TaxRule {
    /// 1 to 10 of `A-Z`, `0-9` and `-`; distinct within the hotel.
    #[schema(example = "CITY", pattern = "^[A-Z0-9-]{1,10}$")]
    pub code: String,
    /// `percent` of the room price, `per_person_night` or `per_stay`.
    #[schema(example = "per_person_night")]
    pub kind: String,
    /// `percent` only: above 0, at most 100, two decimals at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = 6.0)]
    pub percent: Option<f64>,
    /// `percent` only: the price already holds it (shown as its share, not added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub included: Option<bool>,
    /// `per_person_night` and `per_stay`: in the currency's minor unit, above 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = 200, minimum = 1, maximum = 100_000_000)]
    pub amount_cents: Option<i64>,
    /// `per_person_night` only: charged for at most this many nights of a stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = 7, minimum = 1, maximum = 800)]
    pub max_nights: Option<i64>,
}

/// Most a fixed tax may be: a million currency units.
const MAX_TAX_CENTS: i64 = 100_000_000;

impl TaxRule {
    fn of(tax: &Tax) -> Self {
        let (kind, percent, included, amount, max_nights) = match tax.kind() {
            TaxKind::Percent { rate, included } => {
                ("percent", Some(rate.percent()), Some(included), None, None)
            }
            TaxKind::PerPersonNight { amount, max_nights } => (
                "per_person_night",
                None,
                None,
                Some(amount.get()),
                max_nights.map(i64::from),
            ),
            TaxKind::PerStay { amount } => ("per_stay", None, None, Some(amount.get()), None),
        };
        Self {
            code: tax.code().to_owned(),
            kind: kind.to_owned(),
            percent,
            included,
            amount_cents: amount,
            max_nights,
        }
    }

    fn parse(&self) -> Result<Tax, ApiError> {
        let not_for = |field: &str| {
            ApiError::invalid(
                field,
                format!("{field}: is not part of a {} tax", self.kind),
            )
        };
        let amount = || -> Result<Cents, ApiError> {
            match self.amount_cents {
                Some(cents) if (1..=MAX_TAX_CENTS).contains(&cents) => Ok(Cents::new(cents)),
                Some(_) => Err(ApiError::invalid(
                    "amount_cents",
                    format!("amount_cents: must be between 1 and {MAX_TAX_CENTS}"),
                )),
                None => Err(ApiError::invalid(
                    "amount_cents",
                    format!("amount_cents: is required for a {} tax", self.kind),
                )),
            }
        };
        let kind = match self.kind.as_str() {
            "percent" => {
                if self.amount_cents.is_some() {
                    return Err(not_for("amount_cents"));
                }
                if self.max_nights.is_some() {
                    return Err(not_for("max_nights"));
                }
                let percent = self.percent.ok_or_else(|| {
                    ApiError::invalid("percent", "percent: is required for a percent tax")
                })?;
                TaxKind::Percent {
                    rate: BasisPoints::from_percent(percent)?,
                    included: self.included.unwrap_or(false),
                }
            }
            "per_person_night" | "per_stay" => {
                if self.percent.is_some() {
                    return Err(not_for("percent"));
                }
                if self.included.is_some() {
                    return Err(not_for("included"));
                }
                if self.kind == "per_stay" {
                    if self.max_nights.is_some() {
                        return Err(not_for("max_nights"));
                    }
                    TaxKind::PerStay { amount: amount()? }
                } else {
                    let max_nights = match self.max_nights {
                        None => None,
                        Some(n) => match u32::try_from(n) {
                            Ok(n) if (1..=800).contains(&n) => Some(n),
                            _ => {
                                return Err(ApiError::invalid(
                                    "max_nights",
                                    "max_nights: must be between 1 and 800",
                                ))
                            }
                        },
                    };
                    TaxKind::PerPersonNight {
                        amount: amount()?,
                        max_nights,
                    }
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    "kind",
                    "kind: must be percent, per_person_night or per_stay",
                ))
            }
        };
        Ok(Tax::parse(&self.code, kind)?)
    }
}

/// A hotel's taxes and fees, in the order they are listed on a bill.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct TaxesBody {
    pub taxes: Vec<TaxRule>,
}

impl TaxesBody {
    fn of(taxes: &Taxes) -> Self {
        Self {
            taxes: taxes.iter().map(TaxRule::of).collect(),
        }
    }

    fn parse(&self) -> Result<Taxes, ApiError> {
        let taxes = self
            .taxes
            .iter()
            .enumerate()
            .map(|(i, rule)| rule.parse().map_err(|e| e.in_field(&format!("taxes[{i}]"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Taxes::parse(taxes)?)
    }
}

/// A hotel's taxes with the currency their amounts are in.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaxesOut {
    pub hotel_id: i64,
    /// ISO 4217 code; amounts are integers in its minor unit.
    #[schema(example = "EUR")]
    pub currency: String,
    pub taxes: Vec<TaxRule>,
}

fn taxes_out(hotel: &Hotel) -> Result<Json<TaxesOut>, ApiError> {
    let hotel_id = hotel
        .hotel_id()
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    Ok(Json(TaxesOut {
        hotel_id: hotel_id.get(),
        currency: hotel.currency().code().to_owned(),
        taxes: TaxesBody::of(hotel.taxes()).taxes,
    }))
}

/// Set a hotel's taxes and fees: the whole list (empty: none). Stays already sold keep
/// the taxes they were sold with.
#[utoipa::path(put, path = "/v1/hotels/{hotel_id}/taxes", tag = "catalog",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    request_body = TaxesBody,
    responses(
        (status = 200, body = TaxesOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 422, description = "invalid_request naming the tax and field; unknown_hotel", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn put_taxes(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<TaxesBody>,
) -> Result<Json<TaxesOut>, ApiError> {
    principal.require(&[Role::Admin])?;
    let id = hotel_id(id)?;
    let taxes = body.parse()?;
    let hotel = state
        .commands
        .set_taxes(&staff(&principal), id, taxes)
        .await?;
    taxes_out(&hotel)
}

/// A hotel's taxes and fees.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/taxes", tag = "browse",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64)),
    responses((status = 200, body = TaxesOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn get_taxes(
    State(state): State<AppState>,
    _principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<TaxesOut>, ApiError> {
    let id = hotel_id(id)?;
    let hotel = state
        .queries
        .on_replica(consistency.0, |q| async move { q.hotel(id).await })
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    taxes_out(&hotel)
}

/// One tax as a stay pays it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaxOut {
    #[schema(example = "CITY")]
    pub code: String,
    pub amount_cents: i64,
    /// Already in `total_cents` (shown, not added to `total_due_cents`).
    pub included: bool,
}

impl From<&TaxLine> for TaxOut {
    fn from(line: &TaxLine) -> Self {
        Self {
            code: line.code.clone(),
            amount_cents: line.amount.get(),
            included: line.included,
        }
    }
}

/// The lines of a taxed stay, as offers and reservations show them.
pub(crate) fn tax_lines(taxed: &TaxedStay) -> Vec<TaxOut> {
    taxed.lines.iter().map(TaxOut::from).collect()
}
