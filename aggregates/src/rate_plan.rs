//! Rate plans' money rules: the cancellation policy a stay is sold under, and the price
//! of a plan derived from another (a non-refundable rate 10% under the flexible one).
//!
//! Pure rules, as the rest of the domain: a policy says how much of what was paid a
//! cancellation gives back, given how long before check-in it comes; a derived plan's
//! night costs its parent's price for that night adjusted by a percentage, rounded to
//! the nearest cent with halves up, and a chain of derivations is resolved from its
//! root, a cycle refused. The house policy of today (all back at 72 hours or more,
//! half at 24 hours or more) is [`CancellationPolicy::HOUSE`], and the cancellation
//! decision refunds by it.
//!
//! Not wired yet: the catalog does not hold rate plans and a reservation does not
//! record one (see the notes of the rate plans and restrictions issue).

use chrono::Duration;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::reservation::CancelledBy;
use crate::types::{Cents, InvalidInput, RatePlanId};

/// How much a cancellation gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancellationPolicy {
    /// All of it at `full_refund_hours` or more before check-in, `partial_refund_percent`
    /// (rounded down) at `partial_refund_hours` or more, nothing after.
    Refundable {
        full_refund_hours: u32,
        partial_refund_hours: u32,
        partial_refund_percent: u8,
    },
    /// A guest's cancellation gives nothing back.
    NonRefundable,
}

impl CancellationPolicy {
    /// The policy every stay was sold under before rate plans, and the default plan's.
    pub const HOUSE: CancellationPolicy = CancellationPolicy::Refundable {
        full_refund_hours: 72,
        partial_refund_hours: 24,
        partial_refund_percent: 50,
    };

    /// A refundable policy as a client states it: the partial window may not start
    /// before the full one ends, and a percentage is 0 to 100.
    pub fn refundable(
        full_refund_hours: i64,
        partial_refund_hours: i64,
        partial_refund_percent: i64,
    ) -> Result<Self, InvalidInput> {
        let hours = |field, value: i64| {
            u32::try_from(value)
                .ok()
                .filter(|h| *h <= 24 * 366)
                .ok_or_else(|| InvalidInput::new(field, "must be between 0 and 8784 hours"))
        };
        let full = hours("cancellation_policy.full_refund_hours", full_refund_hours)?;
        let partial = hours(
            "cancellation_policy.partial_refund_hours",
            partial_refund_hours,
        )?;
        if partial > full {
            return Err(InvalidInput::new(
                "cancellation_policy.partial_refund_hours",
                "may not be more than full_refund_hours",
            ));
        }
        let percent = u8::try_from(partial_refund_percent)
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| {
                InvalidInput::new(
                    "cancellation_policy.partial_refund_percent",
                    "must be between 0 and 100",
                )
            })?;
        Ok(CancellationPolicy::Refundable {
            full_refund_hours: full,
            partial_refund_hours: partial,
            partial_refund_percent: percent,
        })
    }

    /// What a cancellation `lead` before check-in gives back of `paid`: all of it when
    /// the hotel cancels, whatever the policy.
    pub fn refund(&self, paid: Cents, lead: Duration, by: CancelledBy) -> Cents {
        if paid <= Cents::ZERO {
            return Cents::ZERO;
        }
        paid.percent(self.refund_percent(lead, by))
    }

    /// The share (percent) a cancellation `lead` before check-in gives back: 100 when
    /// the hotel cancels, whatever the policy.
    pub fn refund_percent(&self, lead: Duration, by: CancelledBy) -> u8 {
        if by == CancelledBy::Hotel {
            return 100;
        }
        match *self {
            CancellationPolicy::NonRefundable => 0,
            CancellationPolicy::Refundable {
                full_refund_hours,
                partial_refund_hours,
                partial_refund_percent,
            } => {
                if lead >= Duration::hours(full_refund_hours.into()) {
                    100
                } else if lead >= Duration::hours(partial_refund_hours.into()) {
                    partial_refund_percent
                } else {
                    0
                }
            }
        }
    }

    /// The last instant a guest's cancellation gives everything back, for a stay
    /// checking in at `check_in`; `None` for a stay never refunded. The authorization
    /// is captured then: until that moment a cancellation voids it.
    pub fn full_refund_until(
        &self,
        check_in: chrono::DateTime<chrono::Utc>,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        match *self {
            CancellationPolicy::NonRefundable => None,
            CancellationPolicy::Refundable {
                full_refund_hours, ..
            } => Some(check_in - Duration::hours(full_refund_hours.into())),
        }
    }
}

/// How a plan is priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pricing {
    /// The night's own rate (the inventory's, or the plan's own rates).
    Own,
    /// The parent plan's price for the night, adjusted by `adjust_percent`.
    Derived {
        parent: RatePlanId,
        adjust_percent: i32,
    },
}

/// Why a plan's price cannot be resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum PricingError {
    #[error("rate plan {0} derives from itself through its parents")]
    Cycle(RatePlanId),
    #[error("rate plan {0} derives from a plan that does not exist")]
    UnknownParent(RatePlanId),
    #[error("rate plan {0} does not exist")]
    UnknownPlan(RatePlanId),
}

/// The adjustments of a price chain, from its root down; inline up to four.
pub type Adjustments = SmallVec<[i32; 4]>;

/// The adjustments a plan's price goes through, from the root plan (priced on its own)
/// to `plan`, and that root. `pricing_of` gives each plan's pricing, `None` for a plan
/// that does not exist. A chain that loops is refused naming a plan on the loop.
pub fn resolve(
    plan: RatePlanId,
    pricing_of: impl Fn(RatePlanId) -> Option<Pricing>,
) -> Result<(RatePlanId, Adjustments), PricingError> {
    let mut adjustments = Adjustments::new();
    let mut seen: SmallVec<[RatePlanId; 8]> = smallvec::smallvec![plan];
    let mut current = plan;
    // The plan whose parent `current` is (none for `plan` itself).
    let mut child: Option<RatePlanId> = None;
    loop {
        match pricing_of(current) {
            None => {
                return Err(
                    child.map_or(PricingError::UnknownPlan(plan), PricingError::UnknownParent)
                )
            }
            Some(Pricing::Own) => {
                adjustments.reverse();
                return Ok((current, adjustments));
            }
            Some(Pricing::Derived {
                parent,
                adjust_percent,
            }) => {
                if seen.contains(&parent) {
                    // The first plan met twice is on the loop (`plan` itself may only
                    // lead into it).
                    return Err(PricingError::Cycle(parent));
                }
                adjustments.push(adjust_percent);
                seen.push(parent);
                child = Some(current);
                current = parent;
            }
        }
    }
}

/// `price` times `(100 + adjust_percent) / 100`, rounded to the nearest cent, halves
/// up; `None` below -100% or on overflow.
pub fn adjust(price: Cents, adjust_percent: i32) -> Option<Cents> {
    let factor = 100_i128 + i128::from(adjust_percent);
    if factor < 0 {
        return None;
    }
    let scaled = i128::from(price.get()).checked_mul(factor)?;
    // Halves up: floor((scaled + 50) / 100), for a price of either sign.
    let rounded = (scaled + 50).div_euclid(100);
    i64::try_from(rounded).ok().map(Cents::new)
}

/// A root plan's night price carried down a chain of adjustments, rounded at each
/// step (each plan's price is a price a guest can be shown).
pub fn derived_price(root_price: Cents, adjustments: &[i32]) -> Option<Cents> {
    adjustments
        .iter()
        .try_fold(root_price, |price, percent| adjust(price, *percent))
}

#[cfg(test)]
mod tests;
