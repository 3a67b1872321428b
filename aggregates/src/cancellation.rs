//! Cancellation: who cancelled, and the policy a stay is sold under, which says how much
//! of what was paid a cancellation gives back given how long before check-in it comes.
//! The house policy (all back at 72 hours or more, half at 24 hours or more) is
//! [`CancellationPolicy::HOUSE`]. A rate plan names its policy and a reservation keeps the
//! one it was sold under; both read it from here, so neither depends on the other.

use chrono::Duration;
use serde::{Deserialize, Serialize};

use crate::types::{Cents, InvalidInput};

/// Who cancelled: the guest's side (through a channel) or the hotel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelledBy {
    Guest,
    Hotel,
}

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

#[cfg(test)]
mod tests;
