//! Rate plans' price rules: a plan derived from another (a non-refundable rate 10% under
//! the flexible one) costs its parent's price for each night adjusted by a percentage,
//! rounded to the nearest cent with halves up; a chain of derivations is resolved from
//! its root, a cycle refused. (The cancellation policy a plan sells under is in
//! [`crate::cancellation`].)

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::types::{Cents, RatePlanId};

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
