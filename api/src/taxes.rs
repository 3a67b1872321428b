//! A hotel's taxes and fees (admin sets them, any role reads them), and how a stay's
//! taxes are shown wherever a price is: offers and reservations carry the same
//! [`TaxOut`] lines and `total_due_cents`.
//!
//! The rules' shape is the request's (`kind` says which fields apply); a field that
//! does not belong to the kind is refused rather than ignored, so a client never
//! believes a cap or an inclusion was set that was not.

use aggregates::taxes::{BasisPoints, Tax, TaxKind, TaxLine, Taxes};
use aggregates::{Cents, Hotel};
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath, Consistency};
use super::params::{hotel_id, load_hotel, staff};
use crate::state::AppState;

pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_taxes, get_taxes))
}

/// One tax or fee as set and shown; `kind` says which fields it has, and a field of
/// another kind is refused (422 naming it), never ignored.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TaxRule {
    /// A share of the room price: added to it, or already `included` (shown as its
    /// share, not added).
    Percent {
        #[schema(schema_with = super::schema::tax_code)]
        code: String,
        /// Above 0, at most 100, two decimals at most.
        #[schema(
            example = 6.0,
            exclusive_minimum = 0.0,
            maximum = 100.0,
            multiple_of = 0.01
        )]
        percent: f64,
        #[serde(default)]
        included: bool,
    },
    /// An amount per guest and night (a city tax), for at most `max_nights` nights of a
    /// stay when given.
    PerPersonNight {
        #[schema(schema_with = super::schema::tax_code)]
        code: String,
        /// In the currency's minor unit.
        #[schema(example = 200, minimum = 1, maximum = 100_000_000)]
        amount_cents: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(example = 7, minimum = 1, maximum = 800)]
        max_nights: Option<i64>,
    },
    /// An amount per stay (a cleaning fee).
    PerStay {
        #[schema(schema_with = super::schema::tax_code)]
        code: String,
        /// In the currency's minor unit.
        #[schema(example = 2500, minimum = 1, maximum = 100_000_000)]
        amount_cents: i64,
    },
}

/// Most a fixed tax may be: a million currency units.
const MAX_TAX_CENTS: i64 = 100_000_000;

fn amount(cents: i64) -> Result<Cents, ApiError> {
    if (1..=MAX_TAX_CENTS).contains(&cents) {
        Ok(Cents::new(cents))
    } else {
        Err(ApiError::invalid(
            "amount_cents",
            format!("amount_cents: must be between 1 and {MAX_TAX_CENTS}"),
        ))
    }
}

impl TaxRule {
    fn of(tax: &Tax) -> Self {
        let code = tax.code().to_owned();
        match tax.kind() {
            TaxKind::Percent { rate, included } => Self::Percent {
                code,
                percent: rate.percent(),
                included,
            },
            TaxKind::PerPersonNight { amount, max_nights } => Self::PerPersonNight {
                code,
                amount_cents: amount.get(),
                max_nights: max_nights.map(i64::from),
            },
            TaxKind::PerStay { amount } => Self::PerStay {
                code,
                amount_cents: amount.get(),
            },
        }
    }

    fn parse(&self) -> Result<Tax, ApiError> {
        let (code, kind) = match self {
            Self::Percent {
                code,
                percent,
                included,
            } => (
                code,
                TaxKind::Percent {
                    rate: BasisPoints::from_percent(*percent)?,
                    included: *included,
                },
            ),
            Self::PerPersonNight {
                code,
                amount_cents,
                max_nights,
            } => {
                let max_nights = match *max_nights {
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
                (
                    code,
                    TaxKind::PerPersonNight {
                        amount: amount(*amount_cents)?,
                        max_nights,
                    },
                )
            }
            Self::PerStay { code, amount_cents } => (
                code,
                TaxKind::PerStay {
                    amount: amount(*amount_cents)?,
                },
            ),
        };
        Ok(Tax::parse(code, kind)?)
    }
}

/// A hotel's taxes and fees, in the order they are listed on a bill.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaxesBody {
    /// At most 10, each code once.
    #[schema(max_items = 10)]
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
        // The domain refuses a code given twice; here it is named where it repeats.
        let mut seen = std::collections::BTreeSet::new();
        if let Some(i) = taxes.iter().position(|t| !seen.insert(t.code())) {
            return Err(ApiError::invalid(
                "code",
                format!(
                    "code: {} is given twice; each tax's code is its own",
                    taxes[i].code()
                ),
            )
            .in_field(&format!("taxes[{i}]")));
        }
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
    let hotel = load_hotel(&state, hotel_id(id)?, consistency).await?;
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
pub(crate) fn tax_lines(lines: &[TaxLine]) -> Vec<TaxOut> {
    lines.iter().map(TaxOut::from).collect()
}
