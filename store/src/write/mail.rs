//! The guest's e-mails a decision owes, queued in the transaction of the events that
//! decide them (`mail_outbox`): a crash cannot keep a confirmation without its mail,
//! nor a mail for a confirmation that never committed. Sending them, after the commit,
//! is the mail worker's (see `mail`).
//!
//! A message is one per (reservation, kind, stream version of its event): a command
//! retried, or twenty duplicate confirms racing, decide one event, so one row. The row
//! says what the message is about in [`MailFacts`], which hold no personal data: the
//! recipient is the reservation's sealed guest, opened when the message is sent.

use std::fmt;

use aggregates::cancellation::CancellationPolicy;
use aggregates::taxes::TaxLine;
use aggregates::{
    Cents, Currency, GuestCount, HotelId, Reservation, ReservationEvent, ReservationStatus,
    RoomCount, RoomTypeId, StayDates,
};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use super::attempt::AttemptError;

/// What a guest is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MailKind {
    /// The stay is confirmed (the last step of booking: sent only once it is).
    Confirmation,
    /// The stay is cancelled, with what is given back.
    Cancellation,
    /// The hold lapsed before it was confirmed.
    Expiry,
    /// The stay moved to other dates.
    DatesChanged,
    /// The guest did not arrive; the first night is kept.
    NoShow,
}

impl MailKind {
    pub const ALL: [MailKind; 5] = [
        Self::Confirmation,
        Self::Cancellation,
        Self::Expiry,
        Self::DatesChanged,
        Self::NoShow,
    ];

    /// The name stored in `mail_outbox.kind` and shown by the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Confirmation => "confirmation",
            Self::Cancellation => "cancellation",
            Self::Expiry => "expiry",
            Self::DatesChanged => "dates_changed",
            Self::NoShow => "no_show",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == stored)
    }

    /// The message an event owes the guest, if any.
    pub fn of(event: &ReservationEvent) -> Option<Self> {
        match event {
            ReservationEvent::ReservationConfirmed { .. } => Some(Self::Confirmation),
            ReservationEvent::ReservationCancelled { .. } => Some(Self::Cancellation),
            ReservationEvent::HoldExpired { .. } => Some(Self::Expiry),
            ReservationEvent::DatesChanged { .. } => Some(Self::DatesChanged),
            ReservationEvent::NoShowRecorded { .. } => Some(Self::NoShow),
            _ => None,
        }
    }
}

impl fmt::Display for MailKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a message says, as decided: the stay as it is after the event, its money and
/// policy, and what the event itself changed. No personal data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailFacts {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guests: GuestCount,
    pub total_cents: Cents,
    pub cancellation_policy: CancellationPolicy,
    /// When the event happened.
    pub at: DateTime<Utc>,
    /// A cancellation: what goes back to the card of what was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refund_cents: Option<Cents>,
    /// A cancellation of a stay paid by card: what the hotel keeps once it is carried
    /// out (0 when the authorization is voided). `None`: no card was ever given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_cents: Option<Cents>,
    /// A change of dates: the dates before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_stay: Option<StayDates>,
    /// A no-show: what the hotel keeps (the first night).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fee_cents: Option<Cents>,
    /// A no-show: the first night given back to sale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_from: Option<NaiveDate>,
    /// The currency of every amount (messages decided before hotels had one: euros).
    #[serde(default, skip_serializing_if = "Currency::is_euro")]
    pub currency: Currency,
    /// What the guest owes in all, taxes not in the price included; `None` (messages
    /// decided before taxes existed): `total_cents`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_due_cents: Option<Cents>,
    /// The stay's taxes, as the total due counts them (none: empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taxes: Vec<TaxLine>,
    /// The room types beyond the first (`room_type_id`, `rooms`, `guests`) of a stay of
    /// several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_lines: Vec<MailLine>,
}

/// One room type of a stay of several, as a message names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailLine {
    pub room_type_id: RoomTypeId,
    pub rooms: RoomCount,
    pub guests: GuestCount,
    pub cancellation_policy: CancellationPolicy,
}

/// The messages `events` owe the guest of `reservation` (its state after them), whose
/// stream stood at `version_before` before them.
fn messages(
    reservation: &Reservation,
    before: Option<&Reservation>,
    version_before: i64,
    events: &[ReservationEvent],
) -> Vec<(MailKind, i64, MailFacts)> {
    let Some(details) = reservation.details() else {
        return Vec::new();
    };
    let taxed = details.taxed();
    let facts = |at: DateTime<Utc>| MailFacts {
        hotel_id: details.hotel_id,
        room_type_id: details.room_type_id,
        stay: details.stay,
        rooms: details.rooms,
        guests: details.guests,
        total_cents: details.total_cents,
        cancellation_policy: details.cancellation_policy,
        at,
        currency: details.currency,
        total_due_cents: Some(taxed.total_due),
        taxes: taxed.lines.clone(),
        more_lines: details
            .more_lines
            .iter()
            .map(|l| MailLine {
                room_type_id: l.room_type_id,
                rooms: l.rooms,
                guests: l.guests,
                cancellation_policy: l.cancellation_policy,
            })
            .collect(),
        refund_cents: None,
        kept_cents: None,
        previous_stay: None,
        fee_cents: None,
        released_from: None,
    };
    let mut out = Vec::new();
    for (index, event) in events.iter().enumerate() {
        let Some(kind) = MailKind::of(event) else {
            continue;
        };
        let version = version_before + index as i64 + 1;
        let facts = match event {
            ReservationEvent::ReservationConfirmed { confirmed_at, .. } => facts(*confirmed_at),
            ReservationEvent::ReservationCancelled {
                cancelled_at,
                refund_cents,
                ..
            } => MailFacts {
                refund_cents: Some(*refund_cents),
                // The state after the cancellation's own capture, void or refund.
                kept_cents: reservation.ledger().map(|l| l.net()),
                ..facts(*cancelled_at)
            },
            ReservationEvent::HoldExpired { expired_at } => facts(*expired_at),
            // Guests hear about a stay once it is confirmed: a hold's moves are not news
            // (its confirmation will carry the dates it ends with).
            ReservationEvent::DatesChanged { .. }
                if reservation.recorded_status() != Some(ReservationStatus::Confirmed) =>
            {
                continue
            }
            ReservationEvent::DatesChanged { changed_at, .. } => MailFacts {
                previous_stay: before.and_then(|b| b.details()).map(|d| d.stay),
                ..facts(*changed_at)
            },
            ReservationEvent::NoShowRecorded {
                recorded_at,
                released_from,
            } => MailFacts {
                fee_cents: Some(details.first_night()),
                released_from: Some(*released_from),
                ..facts(*recorded_at)
            },
            _ => continue,
        };
        out.push((kind, version, facts));
    }
    out
}

/// Queues the messages `events` owe the guest (see [`messages`]). Called inside the
/// transaction that appends the events; a message already queued (the same event
/// version) is left as it is.
pub async fn enqueue(
    conn: &mut PgConnection,
    reservation: &Reservation,
    before: Option<(&Reservation, i64)>,
    events: &[ReservationEvent],
    now: DateTime<Utc>,
) -> Result<(), AttemptError> {
    let Some(details) = reservation.details() else {
        return Ok(());
    };
    let (previous, version_before) = match before {
        Some((r, v)) => (Some(r), v),
        None => (None, 0),
    };
    for (kind, version, facts) in messages(reservation, previous, version_before, events) {
        let facts = serde_json::to_value(&facts).map_err(|e| {
            AttemptError::Fatal(crate::error::CommandError::Internal(format!(
                "a message's facts: {e}"
            )))
        })?;
        sqlx::query(
            "INSERT INTO mail_outbox (reservation_id, kind, version, facts, created_at,
                                      next_attempt_at)
             VALUES ($1, $2, $3, $4, $5, $5)
             ON CONFLICT (reservation_id, kind, version) DO NOTHING",
        )
        .bind(details.reservation_id.as_uuid())
        .bind(kind.as_str())
        .bind(version)
        .bind(facts)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        metrics::counter!("mail_queued_total", "kind" => kind.as_str()).increment(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_stored_name() {
        for kind in MailKind::ALL {
            assert_eq!(MailKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(MailKind::parse("newsletter"), None);
    }

    #[test]
    fn only_the_guest_facing_facts_owe_a_message() {
        let at = Utc::now();
        assert_eq!(
            MailKind::of(&ReservationEvent::HoldExpired { expired_at: at }),
            Some(MailKind::Expiry)
        );
        assert_eq!(
            MailKind::of(&ReservationEvent::GuestErased { erased_at: at }),
            None
        );
        assert_eq!(
            MailKind::of(&ReservationEvent::PaymentDeclined {
                declined_at: at,
                provider_txn_id: None
            }),
            None
        );
    }
}
