//! Rate plans, their own rates, restrictions and bulk ARI updates (admin).
//!
//! The cancellation policy has one wire shape, in requests and in answers (a plan's and
//! a reservation's): `{"refundable": true, "full_refund_hours", "partial_refund_hours",
//! "partial_refund_percent"}` or `{"refundable": false}`.

use aggregates::rate_plan::CancellationPolicy;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::ApiError;

/// A cancellation policy as clients see it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PolicyOut {
    /// `false`: a guest's cancellation refunds nothing.
    pub refundable: bool,
    /// All of the payment back at this many hours or more before check-in (15:00 local
    /// time on the arrival date).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_refund_hours: Option<u32>,
    /// `partial_refund_percent` back at this many hours or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_refund_hours: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_refund_percent: Option<u8>,
}

impl From<CancellationPolicy> for PolicyOut {
    fn from(policy: CancellationPolicy) -> Self {
        match policy {
            CancellationPolicy::NonRefundable => Self {
                refundable: false,
                full_refund_hours: None,
                partial_refund_hours: None,
                partial_refund_percent: None,
            },
            CancellationPolicy::Refundable {
                full_refund_hours,
                partial_refund_hours,
                partial_refund_percent,
            } => Self {
                refundable: true,
                full_refund_hours: Some(full_refund_hours),
                partial_refund_hours: Some(partial_refund_hours),
                partial_refund_percent: Some(partial_refund_percent),
            },
        }
    }
}

/// A cancellation policy as clients send it; a refundable one without its windows gets
/// the house policy's.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyIn {
    pub refundable: bool,
    #[schema(example = 72, minimum = 0, maximum = 8784)]
    pub full_refund_hours: Option<i64>,
    #[schema(example = 24, minimum = 0, maximum = 8784)]
    pub partial_refund_hours: Option<i64>,
    #[schema(example = 50, minimum = 0, maximum = 100)]
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
