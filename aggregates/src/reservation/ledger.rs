//! The payment ledger of one reservation: what the card was authorized for, what was
//! taken, what was given back, and when the taking is due.
//!
//! A stay is paid for with one card authorization at one provider transaction. It may
//! grow (a move to dearer nights asks the provider to increase it), be captured in
//! parts up to its amount (at the policy's deadline, at check-in, or what a cancellation
//! or a no-show keeps), be voided while nothing was captured, and be refunded up to what
//! was captured. Each of those is an event carrying its gateway idempotency key, so the
//! write side can hand it to the payment outbox exactly as decided, and a provider that
//! sees the same key twice acts once:
//!
//! - authorizations: `{reservation}:auth`, then `{reservation}:auth:2`, `:auth:3`...
//! - captures: `{reservation}:capture`, then `{reservation}:capture:2`...
//! - refunds: `{reservation}:refund:1`, `:refund:2`...
//! - voids: `{reservation}:void:{provider_txn_id}`.
//!
//! The keys are numbered by the ledger's own counts, so a decision repeated on the same
//! state names the same key, and a new effect a new one.
//!
//! Capturing less than the authorization releases the rest (the provider's rule, and
//! what a hotel wants: a cheaper move, a cancellation that keeps a share or a no-show fee
//! never charges more than it keeps). So one rule settles every ending: [`Ledger::settle`]
//! takes "the hotel keeps this much" and returns the captures, voids and refunds that
//! make it so.
//!
//! Confirmations recorded before the ledger existed carry no capture deadline: the
//! outbox of the time captured them at once (key `{reservation}:capture`) and a
//! cancellation refunded under `{reservation}:refund`. [`Ledger::captured_at_confirmation`]
//! reads them so.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::types::{Cents, ReservationId};

/// Where the money of a reservation stands, as every reservation answer states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentStatus {
    /// Nothing was authorized (a hold, or confirmed by staff without a payment).
    None,
    /// Authorized, nothing captured yet.
    Authorized,
    /// Captured (all or part of the authorization), nothing refunded.
    Captured,
    /// Released before anything was captured: nothing charged.
    Voided,
    /// Everything captured was given back.
    Refunded,
    /// Part of what was captured was given back.
    PartiallyRefunded,
}

impl PaymentStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Authorized => "authorized",
            Self::Captured => "captured",
            Self::Voided => "voided",
            Self::Refunded => "refunded",
            Self::PartiallyRefunded => "partially_refunded",
        }
    }
}

/// The ledger of a paid reservation (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// The provider transaction of the authorization.
    pub provider_txn_id: String,
    /// How many authorizations were granted on it (the first and its increments).
    pub authorizations: u32,
    pub authorized: Cents,
    /// How many captures were made.
    pub captures: u32,
    pub captured: Cents,
    /// How many refunds were made.
    pub refunds: u32,
    pub refunded: Cents,
    pub voided: bool,
    /// When the authorization is to be captured, while it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_due_at: Option<DateTime<Utc>>,
}

/// One movement of money a decision asks the provider for, with its gateway key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Movement {
    Capture { amount: Cents, gateway_key: String },
    Void { gateway_key: String },
    Refund { amount: Cents, gateway_key: String },
}

fn numbered(id: ReservationId, what: &str, n: u32) -> String {
    let id = id.as_uuid();
    if n <= 1 {
        format!("{id}:{what}")
    } else {
        format!("{id}:{what}:{n}")
    }
}

/// The gateway key of a reservation's `n`-th authorization (1: the first).
pub fn authorization_key(id: ReservationId, n: u32) -> String {
    numbered(id, "auth", n)
}

/// The gateway key of a reservation's `n`-th capture (1: the first).
pub fn capture_key(id: ReservationId, n: u32) -> String {
    numbered(id, "capture", n)
}

/// The gateway key of a reservation's `n`-th refund (numbered from 1).
pub fn refund_key(id: ReservationId, n: u32) -> String {
    format!("{}:refund:{n}", id.as_uuid())
}

/// The gateway key of the void of provider transaction `txn`.
pub fn void_key(id: ReservationId, txn: &str) -> String {
    format!("{}:void:{txn}", id.as_uuid())
}

impl Ledger {
    /// A fresh authorization of `amount`, to be captured at `capture_due_at`.
    pub fn authorized(
        provider_txn_id: String,
        amount: Cents,
        capture_due_at: DateTime<Utc>,
    ) -> Self {
        Self {
            provider_txn_id,
            authorizations: 1,
            authorized: amount,
            captures: 0,
            captured: Cents::ZERO,
            refunds: 0,
            refunded: Cents::ZERO,
            voided: false,
            capture_due_at: Some(capture_due_at),
        }
    }

    /// A payment confirmed before the ledger existed: captured in full at once, and
    /// `refunded` of it given back by a cancellation (see the module docs).
    pub fn captured_at_confirmation(
        provider_txn_id: String,
        amount: Cents,
        refunded: Cents,
    ) -> Self {
        Self {
            provider_txn_id,
            authorizations: 1,
            authorized: amount,
            captures: 1,
            captured: amount,
            refunds: u32::from(refunded > Cents::ZERO),
            refunded,
            voided: false,
            capture_due_at: None,
        }
    }

    pub fn status(&self) -> PaymentStatus {
        if self.voided {
            PaymentStatus::Voided
        } else if self.captured <= Cents::ZERO {
            PaymentStatus::Authorized
        } else if self.refunded <= Cents::ZERO {
            PaymentStatus::Captured
        } else if self.refunded >= self.captured {
            PaymentStatus::Refunded
        } else {
            PaymentStatus::PartiallyRefunded
        }
    }

    pub fn is_captured(&self) -> bool {
        self.captured > Cents::ZERO
    }

    /// Is the authorization still open to be taken (not voided)? Something may have
    /// been captured already.
    pub fn is_open(&self) -> bool {
        !self.voided
    }

    /// What the guest has been charged and kept charged: captured less refunded.
    pub fn net(&self) -> Cents {
        Cents::new(self.captured.get().saturating_sub(self.refunded.get()))
    }

    /// What may still be captured: authorized less captured (nothing once voided).
    pub fn uncaptured(&self) -> Cents {
        if self.voided {
            Cents::ZERO
        } else {
            Cents::new(self.authorized.get().saturating_sub(self.captured.get()))
        }
    }

    /// What the guest stands to pay for a stay priced `price`: once captured, what was
    /// taken and kept; before, the price, as far as the authorization covers it.
    pub fn charge(&self, price: Cents) -> Cents {
        if self.voided {
            Cents::ZERO
        } else if self.is_captured() {
            self.net()
        } else {
            price.min(self.authorized)
        }
    }

    /// How much more must be authorized before the guest can be charged `price`.
    pub fn shortfall(&self, price: Cents) -> Cents {
        let covered = self.net().get().saturating_add(self.uncaptured().get());
        Cents::new(price.get().saturating_sub(covered).max(0))
    }

    /// The movements that leave the hotel keeping `keep` (at most what can be taken)
    /// and give the rest back: before any capture, capture `keep` (releasing the rest of
    /// the authorization) or void it all when `keep` is zero; after, refund what was
    /// taken beyond `keep`, or take the difference when `keep` is more.
    pub fn settle(&self, id: ReservationId, keep: Cents) -> Vec<Movement> {
        if self.voided {
            return Vec::new();
        }
        let keep = Cents::new(keep.get().max(0));
        if !self.is_captured() {
            let amount = keep.min(self.authorized);
            return if amount > Cents::ZERO {
                vec![Movement::Capture {
                    amount,
                    gateway_key: capture_key(id, self.captures + 1),
                }]
            } else {
                vec![Movement::Void {
                    gateway_key: void_key(id, &self.provider_txn_id),
                }]
            };
        }
        let net = self.net();
        if keep < net {
            vec![Movement::Refund {
                amount: Cents::new(net.get() - keep.get()),
                gateway_key: refund_key(id, self.refunds + 1),
            }]
        } else if keep > net {
            let amount = Cents::new(keep.get() - net.get()).min(self.uncaptured());
            if amount > Cents::ZERO {
                vec![Movement::Capture {
                    amount,
                    gateway_key: capture_key(id, self.captures + 1),
                }]
            } else {
                Vec::new()
            }
        } else {
            Vec::new()
        }
    }

    /// The ledger after `movement`.
    pub fn apply(&mut self, movement: &Movement) {
        match movement {
            Movement::Capture { amount, .. } => {
                self.captures += 1;
                self.captured = Cents::new(self.captured.get().saturating_add(amount.get()));
                self.capture_due_at = None;
            }
            Movement::Void { .. } => {
                self.voided = true;
                self.capture_due_at = None;
            }
            Movement::Refund { amount, .. } => {
                self.refunds += 1;
                self.refunded = Cents::new(self.refunded.get().saturating_add(amount.get()));
            }
        }
    }

    /// An increment of `amount` granted on the authorization.
    pub fn increase(&mut self, amount: Cents) {
        self.authorizations += 1;
        self.authorized = Cents::new(self.authorized.get().saturating_add(amount.get()));
    }
}

#[cfg(test)]
mod tests;
