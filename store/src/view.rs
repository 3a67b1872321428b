//! A reservation as clients see it, at a given time: what a command answers (and its
//! idempotency record stores) and what a look-up answers. It depends on the domain
//! alone, so the commands and the queries share it without depending on each other.

use aggregates::cancellation::CancellationPolicy;
use aggregates::taxes::TaxLine;
use aggregates::{Cents, Currency, Guest, PaymentStatus, Personal, Reservation, ReservationStatus};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a reader not entitled to personal data is shown in its place ([`GuestView`]).
pub const SEALED_TEXT: &str = "[sealed]";
/// What anyone is shown in place of erased personal data.
pub const ERASED_TEXT: &str = "[erased]";

/// A reservation as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationView {
    pub reservation_id: Uuid,
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub nights: u32,
    pub rooms: u32,
    /// As the reservation carries it: in the clear right after a hold, sealed after a
    /// load (the API opens it for whoever may read it, see [`crate::privacy`]), or
    /// erased. Outcomes stored before sealing hold it in the clear, untagged.
    #[serde(deserialize_with = "stored_guest")]
    pub guest: Personal<Guest>,
    pub channel: String,
    pub total_cents: Cents,
    pub status: ReservationStatus,
    pub hold_expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What the guest has paid and kept paid: captured, less refunded (0 while the
    /// card is only authorized). Outcomes stored before it meant this carried the
    /// confirming authorization's amount.
    #[serde(default)]
    pub paid_cents: Cents,
    /// What a cancellation returned (refunded of what was captured), in cents.
    #[serde(default)]
    pub refund_cents: Cents,
    /// The plan it was sold under (`None`: the base rate). Outcomes stored before plans
    /// existed read as the base rate, the house policy and one guest, which is what they
    /// were.
    #[serde(default)]
    pub rate_plan_id: Option<i64>,
    #[serde(default = "house_policy")]
    pub cancellation_policy: CancellationPolicy,
    #[serde(default = "one_guest")]
    pub guests: u32,
    /// Where its money stands (outcomes stored before the ledger read as none).
    #[serde(default)]
    pub payment: PaymentView,
    /// The currency of every amount (outcomes stored before hotels had one: the euro).
    #[serde(default)]
    pub currency: Currency,
    /// The taxes of the stay, as it was sold (outcomes stored before taxes: none).
    #[serde(default)]
    pub taxes: Vec<TaxLine>,
    /// What the guest owes in all: `total_cents` and every tax not included in it.
    /// Outcomes stored before taxes existed carry none: they owed `total_cents`.
    #[serde(default)]
    pub total_due_cents: Option<Cents>,
    /// The group block it was booked from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_code: Option<aggregates::BlockCode>,
    /// One per room type, the first one first, for a reservation of several; empty for
    /// one room type (and in outcomes stored before lines), whose one line is the
    /// view's own fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineView>,
}

/// One room type of a reservation: its rooms, guests per room, plan and price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineView {
    pub room_type_id: i64,
    pub rooms: u32,
    pub guests: u32,
    pub rate_plan_id: Option<i64>,
    /// The line's policy, as sold (each line is refunded by its own).
    #[serde(default = "house_policy")]
    pub cancellation_policy: CancellationPolicy,
    pub total_cents: Cents,
}

impl LineView {
    pub fn of(line: &aggregates::reservation::Line) -> Self {
        Self {
            room_type_id: line.room_type_id.get(),
            rooms: line.rooms.get(),
            guests: line.guests.get(),
            rate_plan_id: line.rate_plan_id.map(|p| p.get()),
            cancellation_policy: line.cancellation_policy,
            total_cents: line.total_cents,
        }
    }
}

/// A reservation's money: the ledger's status and amounts, each one thing (see the
/// API's "The money of a stay").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentView {
    pub status: PaymentStatus,
    /// Every authorization granted on the card, added up: what the provider holds for
    /// the stay. A cheaper move does not lower it; the capture takes only what is owed
    /// and releases the rest.
    pub authorized_cents: Cents,
    /// What the capture still to come will take: the stay's price as far as the
    /// authorization covers it, while authorized and not captured; 0 otherwise.
    #[serde(default)]
    pub to_capture_cents: Cents,
    pub captured_cents: Cents,
    pub refunded_cents: Cents,
}

impl Default for PaymentView {
    fn default() -> Self {
        Self {
            status: PaymentStatus::None,
            authorized_cents: Cents::ZERO,
            to_capture_cents: Cents::ZERO,
            captured_cents: Cents::ZERO,
            refunded_cents: Cents::ZERO,
        }
    }
}

impl PaymentView {
    /// The money of `reservation`, whose guest owes `price` in all (its total due).
    pub fn of(reservation: &Reservation, price: Cents) -> Self {
        reservation.ledger().map_or_else(Self::default, |l| Self {
            status: l.status(),
            authorized_cents: l.authorized,
            to_capture_cents: if l.is_open() && !l.is_captured() {
                l.charge(price)
            } else {
                Cents::ZERO
            },
            captured_cents: l.captured,
            refunded_cents: l.refunded,
        })
    }
}

fn house_policy() -> CancellationPolicy {
    CancellationPolicy::HOUSE
}

fn one_guest() -> u32 {
    1
}

/// A guest as an answer shows them: in the clear to whoever may read them, otherwise
/// [`SEALED_TEXT`], and [`ERASED_TEXT`] to anyone once erased.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestView {
    pub name: String,
    pub email: String,
}

impl GuestView {
    pub fn of(guest: &Personal<Guest>) -> Self {
        let shown = |text: &str| Self {
            name: text.to_owned(),
            email: text.to_owned(),
        };
        match guest {
            Personal::Clear(guest) => Self {
                name: guest.name().to_owned(),
                email: guest.email().to_owned(),
            },
            Personal::Sealed(_) => shown(SEALED_TEXT),
            Personal::Erased => shown(ERASED_TEXT),
        }
    }
}

/// A stored outcome's guest: tagged, or in the clear as outcomes stored before sealing
/// wrote it.
fn stored_guest<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Personal<Guest>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stored {
        Tagged(Personal<Guest>),
        Untagged(Guest),
    }
    Ok(match Stored::deserialize(d)? {
        Stored::Tagged(guest) => guest,
        Stored::Untagged(guest) => Personal::Clear(guest),
    })
}

impl ReservationView {
    /// The view of a reservation at `now` (a lapsed hold reads as `expired`).
    pub fn of(reservation: &Reservation, now: DateTime<Utc>) -> Option<Self> {
        let d = reservation.details()?;
        let taxed = d.taxed();
        Some(Self {
            reservation_id: d.reservation_id.as_uuid(),
            hotel_id: d.hotel_id.get(),
            room_type_id: d.room_type_id.get(),
            start_date: d.stay.start(),
            end_date: d.stay.end(),
            nights: d.stay.night_count(),
            rooms: d.all_rooms(),
            guest: d.guest.clone(),
            channel: d.channel.clone(),
            total_cents: d.total_cents,
            status: reservation.status_at(now)?,
            hold_expires_at: d.hold_expires_at,
            created_at: d.created_at,
            updated_at: reservation.updated_at().unwrap_or(d.created_at),
            paid_cents: reservation.ledger().map_or(Cents::ZERO, |l| l.net()),
            refund_cents: reservation.refund_cents(),
            rate_plan_id: d.rate_plan_id.map(|p| p.get()),
            cancellation_policy: d.cancellation_policy,
            guests: d.guests.get(),
            payment: PaymentView::of(reservation, taxed.total_due),
            currency: d.currency,
            total_due_cents: Some(taxed.total_due),
            taxes: taxed.lines,
            block_code: d.block_code,
            // One room type: its line is the view's own fields (the answer lists it).
            lines: if d.more_lines.is_empty() {
                Vec::new()
            } else {
                d.lines().iter().map(LineView::of).collect()
            },
        })
    }
}
