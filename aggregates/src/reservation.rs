//! `Reservation`: one guest's stay, from hold to a terminal state.
//!
//! Lifecycle: held → confirmed → cancelled; held → expired; held → declined (payment).
//! The status transition is what guards every release of nights: a second cancel finds
//! the reservation already cancelled, is refused, and so releases nothing.
//!
//! Payments: a reservation keeps at most one card authorization (the one that confirmed
//! it). Any other authorization the gateway reports for it — one that arrives after the
//! hold lapsed, after a cancellation or decline, or a second one — is recorded as
//! `LatePaymentRefunded`, once per provider transaction, and the write side gives it back
//! through the payment outbox. A reservation is never resurrected by a late payment.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::contract::AggregateType;
use crate::types::{Guest, HotelId, ReservationId, RoomCount, RoomTypeId, StayDates};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReservationStatus {
    Held,
    Confirmed,
    Cancelled,
    Expired,
    Declined,
}

impl ReservationStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Declined => "declined",
        }
    }

    /// Does a reservation in this status occupy its nights?
    pub fn occupies_nights(&self) -> bool {
        matches!(self, Self::Held | Self::Confirmed)
    }
}

/// Who cancelled: the guest's side (through a channel) or the hotel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelledBy {
    Guest,
    Hotel,
}

/// A card authorization as the gateway reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    pub provider_txn_id: String,
    pub amount_cents: i64,
}

/// Everything a reservation is about, fixed when it is first held (dates may change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationDetails {
    pub reservation_id: ReservationId,
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guest: Guest,
    pub channel: String,
    pub total_cents: i64,
    pub hold_expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Reservation {
    details: Option<ReservationDetails>,
    status: Option<ReservationStatus>,
    updated_at: Option<DateTime<Utc>>,
    /// The authorization that confirmed the reservation, if it was paid for.
    #[serde(default)]
    payment: Option<Payment>,
    /// Provider transactions already given back (late or extra authorizations).
    #[serde(default)]
    refunded_payments: Vec<String>,
    /// What the cancellation gave back of the payment, in cents.
    #[serde(default)]
    refund_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationCommand {
    /// Record a new reservation whose nights are being held.
    Place { details: ReservationDetails },
    /// Confirm the hold; `payment` is the authorization that pays for it (none when
    /// staff confirm without taking a payment).
    Confirm {
        now: DateTime<Utc>,
        payment: Option<Payment>,
    },
    /// The gateway reported an authorization for this reservation: it confirms a live
    /// hold, and is given back in every other case.
    ApplyAuthorization {
        now: DateTime<Utc>,
        payment: Payment,
    },
    /// The gateway declined the card: the hold ends and its nights return to sale.
    DeclinePayment {
        now: DateTime<Utc>,
        provider_txn_id: Option<String>,
    },
    /// Cancel, giving back `refund_cents` of what was paid (the refund policy's answer).
    Cancel {
        now: DateTime<Utc>,
        reason: String,
        by: CancelledBy,
        refund_cents: i64,
    },
    /// Record that the hold lapsed (the sweeper, or whoever finds it lapsed).
    Expire { now: DateTime<Utc> },
    /// Move the stay to new dates at a new total price.
    ChangeDates {
        stay: StayDates,
        total_cents: i64,
        now: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationEvent {
    ReservationHeld(ReservationDetails),
    ReservationConfirmed {
        confirmed_at: DateTime<Utc>,
        /// The authorization that paid for it; absent when confirmed without payment.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payment: Option<Payment>,
    },
    ReservationCancelled {
        cancelled_at: DateTime<Utc>,
        reason: String,
        by: CancelledBy,
        /// What is given back of the payment (0 when nothing was paid).
        #[serde(default)]
        refund_cents: i64,
    },
    /// The card was declined; the hold ended.
    PaymentDeclined {
        declined_at: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_txn_id: Option<String>,
    },
    /// An authorization that cannot be kept (it arrived after the hold lapsed, after a
    /// cancellation or a decline, or another authorization already paid) is given back.
    LatePaymentRefunded {
        provider_txn_id: String,
        amount_cents: i64,
        refunded_at: DateTime<Utc>,
    },
    HoldExpired {
        expired_at: DateTime<Utc>,
    },
    DatesChanged {
        stay: StayDates,
        total_cents: i64,
        changed_at: DateTime<Utc>,
    },
}

/// Names and version: see [`crate::contract::events`].
impl DomainEvent for ReservationEvent {
    fn event_type(&self) -> String {
        self.kind().as_str().to_owned()
    }

    fn event_version(&self) -> String {
        Self::VERSION.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ReservationError {
    #[error("no such reservation")]
    NotFound,
    #[error("the reservation already exists with other details")]
    AlreadyExists,
    #[error("the reservation is {status:?}")]
    InvalidState { status: ReservationStatus },
    #[error("the hold lapsed at {expired_at}")]
    HoldExpired { expired_at: DateTime<Utc> },
    #[error("the hold has not lapsed yet")]
    HoldStillLive,
    #[error("the new dates are the current dates")]
    SameDates,
}

impl Reservation {
    pub fn details(&self) -> Option<&ReservationDetails> {
        self.details.as_ref()
    }

    /// The recorded status, without looking at the clock.
    pub fn recorded_status(&self) -> Option<ReservationStatus> {
        self.status
    }

    /// The status as a reader should see it now: a hold past its expiry is `expired`
    /// whether or not anyone has recorded that yet.
    pub fn status_at(&self, now: DateTime<Utc>) -> Option<ReservationStatus> {
        match (self.status, &self.details) {
            (Some(ReservationStatus::Held), Some(d)) if d.hold_expires_at <= now => {
                Some(ReservationStatus::Expired)
            }
            (status, _) => status,
        }
    }

    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        self.updated_at
    }

    /// The authorization that paid for the reservation, if any.
    pub fn payment(&self) -> Option<&Payment> {
        self.payment.as_ref()
    }

    /// What the cancellation gave back, in cents (0 unless cancelled after payment).
    pub fn refund_cents(&self) -> i64 {
        self.refund_cents
    }

    /// Has this provider transaction been seen already (kept or given back)?
    pub fn knows_payment(&self, provider_txn_id: &str) -> bool {
        self.payment
            .as_ref()
            .is_some_and(|p| p.provider_txn_id == provider_txn_id)
            || self.refunded_payments.iter().any(|t| t == provider_txn_id)
    }

    fn existing(&self) -> Result<(&ReservationDetails, ReservationStatus), ReservationError> {
        match (&self.details, self.status) {
            (Some(details), Some(status)) => Ok((details, status)),
            _ => Err(ReservationError::NotFound),
        }
    }

    pub fn decide(
        &self,
        command: ReservationCommand,
    ) -> Result<Vec<ReservationEvent>, ReservationError> {
        match command {
            ReservationCommand::Place { details } => match &self.details {
                None => Ok(vec![ReservationEvent::ReservationHeld(details)]),
                Some(existing) if *existing == details => Ok(Vec::new()),
                Some(_) => Err(ReservationError::AlreadyExists),
            },
            ReservationCommand::Confirm { now, payment } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Confirmed => Ok(Vec::new()),
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Err(ReservationError::HoldExpired {
                            expired_at: details.hold_expires_at,
                        })
                    }
                    ReservationStatus::Held => Ok(vec![ReservationEvent::ReservationConfirmed {
                        confirmed_at: now,
                        payment,
                    }]),
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::ApplyAuthorization { now, payment } => {
                let (details, status) = self.existing()?;
                if self.knows_payment(&payment.provider_txn_id) {
                    return Ok(Vec::new());
                }
                let give_back = ReservationEvent::LatePaymentRefunded {
                    provider_txn_id: payment.provider_txn_id.clone(),
                    amount_cents: payment.amount_cents,
                    refunded_at: now,
                };
                match status {
                    ReservationStatus::Held if details.hold_expires_at <= now => Ok(vec![
                        ReservationEvent::HoldExpired {
                            expired_at: details.hold_expires_at,
                        },
                        give_back,
                    ]),
                    ReservationStatus::Held if payment.amount_cents == details.total_cents => {
                        Ok(vec![ReservationEvent::ReservationConfirmed {
                            confirmed_at: now,
                            payment: Some(payment),
                        }])
                    }
                    // A wrong amount, or any state but a live hold: nothing to pay for.
                    _ => Ok(vec![give_back]),
                }
            }
            ReservationCommand::DeclinePayment {
                now,
                provider_txn_id,
            } => {
                let (_, status) = self.existing()?;
                match status {
                    // Declined also after the hold lapsed: the nights go back either way,
                    // and the history says why.
                    ReservationStatus::Held => Ok(vec![ReservationEvent::PaymentDeclined {
                        declined_at: now,
                        provider_txn_id,
                    }]),
                    // A decline cannot undo a confirmation or a cancellation; a repeat
                    // changes nothing.
                    _ => Ok(Vec::new()),
                }
            }
            ReservationCommand::Cancel {
                now,
                reason,
                by,
                refund_cents,
            } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Err(ReservationError::InvalidState {
                            status: ReservationStatus::Expired,
                        })
                    }
                    ReservationStatus::Held | ReservationStatus::Confirmed => {
                        Ok(vec![ReservationEvent::ReservationCancelled {
                            cancelled_at: now,
                            reason,
                            by,
                            refund_cents,
                        }])
                    }
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::Expire { now } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Expired => Ok(Vec::new()),
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Ok(vec![ReservationEvent::HoldExpired {
                            expired_at: details.hold_expires_at,
                        }])
                    }
                    ReservationStatus::Held => Err(ReservationError::HoldStillLive),
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::ChangeDates {
                stay,
                total_cents,
                now,
            } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Err(ReservationError::HoldExpired {
                            expired_at: details.hold_expires_at,
                        })
                    }
                    ReservationStatus::Held | ReservationStatus::Confirmed => {
                        if details.stay == stay {
                            Err(ReservationError::SameDates)
                        } else {
                            Ok(vec![ReservationEvent::DatesChanged {
                                stay,
                                total_cents,
                                changed_at: now,
                            }])
                        }
                    }
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
        }
    }

    pub fn apply_event(&mut self, event: &ReservationEvent) {
        match event {
            ReservationEvent::ReservationHeld(details) => {
                self.updated_at = Some(details.created_at);
                self.details = Some(details.clone());
                self.status = Some(ReservationStatus::Held);
            }
            ReservationEvent::ReservationConfirmed {
                confirmed_at,
                payment,
            } => {
                self.status = Some(ReservationStatus::Confirmed);
                self.updated_at = Some(*confirmed_at);
                self.payment = payment.clone();
            }
            ReservationEvent::ReservationCancelled {
                cancelled_at,
                refund_cents,
                ..
            } => {
                self.status = Some(ReservationStatus::Cancelled);
                self.updated_at = Some(*cancelled_at);
                self.refund_cents = *refund_cents;
            }
            ReservationEvent::PaymentDeclined { declined_at, .. } => {
                self.status = Some(ReservationStatus::Declined);
                self.updated_at = Some(*declined_at);
            }
            ReservationEvent::LatePaymentRefunded {
                provider_txn_id,
                refunded_at,
                ..
            } => {
                self.refunded_payments.push(provider_txn_id.clone());
                self.updated_at = Some(*refunded_at);
            }
            ReservationEvent::HoldExpired { expired_at } => {
                self.status = Some(ReservationStatus::Expired);
                self.updated_at = Some(*expired_at);
            }
            ReservationEvent::DatesChanged {
                stay,
                total_cents,
                changed_at,
            } => {
                if let Some(details) = self.details.as_mut() {
                    details.stay = *stay;
                    details.total_cents = *total_cents;
                }
                self.updated_at = Some(*changed_at);
            }
        }
    }
}

impl Aggregate for Reservation {
    const TYPE: &'static str = AggregateType::Reservation.as_str();
    type Command = ReservationCommand;
    type Event = ReservationEvent;
    type Error = ReservationError;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _service: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        for event in self.decide(command)? {
            sink.write(event, self).await;
        }
        Ok(())
    }

    fn apply(&mut self, event: Self::Event) {
        self.apply_event(&event);
    }
}

/// The stream id of a reservation: `{hotel}:{uuid}`, so the hotel (the shard key) is
/// derivable from every stream id (see [`crate::contract::streams`]).
pub use crate::contract::reservation_stream_id;

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone};
    use cqrs_es::test::TestFramework;
    use uuid::Uuid;

    type Fixture = TestFramework<Reservation>;

    /// Minutes after 2027-06-01 12:00 UTC.
    fn at(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
            .single()
            .expect("valid time")
            + chrono::Duration::minutes(minutes)
    }

    fn stay(start_day: u32, end_day: u32) -> StayDates {
        StayDates::parse(
            NaiveDate::from_ymd_opt(2027, 6, start_day).expect("valid date"),
            NaiveDate::from_ymd_opt(2027, 6, end_day).expect("valid date"),
        )
        .expect("valid stay")
    }

    /// A stay of 2027-06-10..12, two rooms, held until minute 15.
    fn details() -> ReservationDetails {
        ReservationDetails {
            reservation_id: ReservationId::from_uuid(Uuid::from_u128(1)),
            hotel_id: HotelId::parse(7).expect("valid id"),
            room_type_id: RoomTypeId::parse(3).expect("valid id"),
            stay: stay(10, 12),
            rooms: RoomCount::parse(2).expect("valid count"),
            guest: Guest::parse("Ana Lima", "ana@example.com").expect("valid guest"),
            channel: "direct".to_owned(),
            total_cents: 48_000,
            hold_expires_at: at(15),
            created_at: at(0),
        }
    }

    fn placed() -> ReservationEvent {
        ReservationEvent::ReservationHeld(details())
    }

    fn confirmed_at(minutes: i64) -> ReservationEvent {
        ReservationEvent::ReservationConfirmed {
            confirmed_at: at(minutes),
            payment: None,
        }
    }

    fn cancelled_at(minutes: i64) -> ReservationEvent {
        ReservationEvent::ReservationCancelled {
            cancelled_at: at(minutes),
            reason: "plans changed".to_owned(),
            by: CancelledBy::Guest,
            refund_cents: 0,
        }
    }

    fn expired() -> ReservationEvent {
        ReservationEvent::HoldExpired { expired_at: at(15) }
    }

    fn cancel(minutes: i64) -> ReservationCommand {
        ReservationCommand::Cancel {
            now: at(minutes),
            reason: "plans changed".to_owned(),
            by: CancelledBy::Guest,
            refund_cents: 0,
        }
    }

    fn change_to(start_day: u32, end_day: u32, minutes: i64) -> ReservationCommand {
        ReservationCommand::ChangeDates {
            stay: stay(start_day, end_day),
            total_cents: 72_000,
            now: at(minutes),
        }
    }

    fn state(events: &[ReservationEvent]) -> Reservation {
        let mut reservation = Reservation::default();
        for event in events {
            reservation.apply_event(event);
        }
        reservation
    }

    // --- Place --------------------------------------------------------------------------

    #[test]
    fn placing_a_new_reservation_records_it_as_held() {
        Fixture::with(())
            .given_no_previous_events()
            .when(ReservationCommand::Place { details: details() })
            .then_expect_events(vec![placed()]);
    }

    #[test]
    fn placing_the_same_reservation_again_changes_nothing() {
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::Place { details: details() })
            .then_expect_events(vec![]);
    }

    #[test]
    fn placing_a_reservation_id_again_with_other_details_already_exists() {
        let mut other = details();
        other.rooms = RoomCount::parse(1).expect("valid count");
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::Place { details: other })
            .then_expect_error(ReservationError::AlreadyExists);
    }

    // --- Confirm ------------------------------------------------------------------------

    #[test]
    fn confirming_a_live_hold_confirms_the_reservation() {
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::Confirm {
                now: at(14),
                payment: None,
            })
            .then_expect_events(vec![confirmed_at(14)]);
    }

    #[test]
    fn confirming_twice_changes_nothing() {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5)])
            .when(ReservationCommand::Confirm {
                now: at(30),
                payment: None,
            })
            .then_expect_events(vec![]);
    }

    #[test]
    fn confirming_a_lapsed_hold_is_hold_expired() {
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::Confirm {
                now: at(15),
                payment: None,
            })
            .then_expect_error(ReservationError::HoldExpired { expired_at: at(15) });
    }

    #[test]
    fn confirming_an_unknown_reservation_is_not_found() {
        Fixture::with(())
            .given_no_previous_events()
            .when(ReservationCommand::Confirm {
                now: at(0),
                payment: None,
            })
            .then_expect_error(ReservationError::NotFound);
    }

    #[test]
    fn confirming_a_cancelled_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), cancelled_at(5)])
            .when(ReservationCommand::Confirm {
                now: at(6),
                payment: None,
            })
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Cancelled,
            });
    }

    #[test]
    fn confirming_an_expired_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), expired()])
            .when(ReservationCommand::Confirm {
                now: at(20),
                payment: None,
            })
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Expired,
            });
    }

    // --- Cancel -------------------------------------------------------------------------

    #[test]
    fn cancelling_a_live_hold_cancels_it() {
        Fixture::with(())
            .given(vec![placed()])
            .when(cancel(5))
            .then_expect_events(vec![cancelled_at(5)]);
    }

    #[test]
    fn cancelling_a_confirmed_reservation_cancels_it_even_after_the_hold_time() {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5)])
            .when(ReservationCommand::Cancel {
                now: at(600),
                reason: "overbooked".to_owned(),
                by: CancelledBy::Hotel,
                refund_cents: 0,
            })
            .then_expect_events(vec![ReservationEvent::ReservationCancelled {
                cancelled_at: at(600),
                reason: "overbooked".to_owned(),
                by: CancelledBy::Hotel,
                refund_cents: 0,
            }]);
    }

    #[test]
    fn cancelling_twice_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), cancelled_at(5)])
            .when(cancel(6))
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Cancelled,
            });
    }

    #[test]
    fn cancelling_a_lapsed_hold_is_invalid_state_expired() {
        Fixture::with(())
            .given(vec![placed()])
            .when(cancel(15))
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Expired,
            });
    }

    #[test]
    fn cancelling_an_expired_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), expired()])
            .when(cancel(20))
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Expired,
            });
    }

    #[test]
    fn cancelling_an_unknown_reservation_is_not_found() {
        Fixture::with(())
            .given_no_previous_events()
            .when(cancel(0))
            .then_expect_error(ReservationError::NotFound);
    }

    // --- Expire -------------------------------------------------------------------------

    #[test]
    fn expiring_a_lapsed_hold_records_when_it_lapsed() {
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::Expire { now: at(40) })
            .then_expect_events(vec![expired()]);
    }

    #[test]
    fn expiring_a_live_hold_is_hold_still_live() {
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::Expire { now: at(14) })
            .then_expect_error(ReservationError::HoldStillLive);
    }

    #[test]
    fn expiring_twice_changes_nothing() {
        Fixture::with(())
            .given(vec![placed(), expired()])
            .when(ReservationCommand::Expire { now: at(40) })
            .then_expect_events(vec![]);
    }

    #[test]
    fn expiring_a_confirmed_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5)])
            .when(ReservationCommand::Expire { now: at(40) })
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Confirmed,
            });
    }

    #[test]
    fn expiring_a_cancelled_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), cancelled_at(5)])
            .when(ReservationCommand::Expire { now: at(40) })
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Cancelled,
            });
    }

    #[test]
    fn expiring_an_unknown_reservation_is_not_found() {
        Fixture::with(())
            .given_no_previous_events()
            .when(ReservationCommand::Expire { now: at(40) })
            .then_expect_error(ReservationError::NotFound);
    }

    // --- ChangeDates --------------------------------------------------------------------

    #[test]
    fn changing_the_dates_of_a_live_hold_records_the_new_stay_and_price() {
        Fixture::with(())
            .given(vec![placed()])
            .when(change_to(11, 14, 5))
            .then_expect_events(vec![ReservationEvent::DatesChanged {
                stay: stay(11, 14),
                total_cents: 72_000,
                changed_at: at(5),
            }]);
    }

    #[test]
    fn changing_the_dates_of_a_confirmed_reservation_records_the_new_stay() {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5)])
            .when(change_to(11, 14, 600))
            .then_expect_events(vec![ReservationEvent::DatesChanged {
                stay: stay(11, 14),
                total_cents: 72_000,
                changed_at: at(600),
            }]);
    }

    #[test]
    fn changing_to_the_current_dates_is_same_dates() {
        Fixture::with(())
            .given(vec![placed()])
            .when(change_to(10, 12, 5))
            .then_expect_error(ReservationError::SameDates);
    }

    #[test]
    fn changing_the_dates_of_a_lapsed_hold_is_hold_expired() {
        Fixture::with(())
            .given(vec![placed()])
            .when(change_to(11, 14, 15))
            .then_expect_error(ReservationError::HoldExpired { expired_at: at(15) });
    }

    #[test]
    fn changing_the_dates_of_a_cancelled_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), confirmed_at(5), cancelled_at(6)])
            .when(change_to(11, 14, 7))
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Cancelled,
            });
    }

    #[test]
    fn changing_the_dates_of_an_expired_reservation_is_invalid_state() {
        Fixture::with(())
            .given(vec![placed(), expired()])
            .when(change_to(11, 14, 40))
            .then_expect_error(ReservationError::InvalidState {
                status: ReservationStatus::Expired,
            });
    }

    #[test]
    fn changing_the_dates_of_an_unknown_reservation_is_not_found() {
        Fixture::with(())
            .given_no_previous_events()
            .when(change_to(11, 14, 0))
            .then_expect_error(ReservationError::NotFound);
    }

    // --- State --------------------------------------------------------------------------

    #[test]
    fn the_state_follows_the_events() {
        let reservation = state(&[placed()]);
        assert_eq!(reservation.details(), Some(&details()));
        assert_eq!(reservation.recorded_status(), Some(ReservationStatus::Held));
        assert_eq!(reservation.updated_at(), Some(at(0)));

        let reservation = state(&[
            placed(),
            ReservationEvent::DatesChanged {
                stay: stay(11, 14),
                total_cents: 72_000,
                changed_at: at(3),
            },
            confirmed_at(5),
        ]);
        let details = reservation.details().expect("placed");
        assert_eq!(details.stay, stay(11, 14));
        assert_eq!(details.total_cents, 72_000);
        assert_eq!(details.hold_expires_at, at(15));
        assert_eq!(
            reservation.recorded_status(),
            Some(ReservationStatus::Confirmed)
        );
        assert_eq!(reservation.updated_at(), Some(at(5)));

        let reservation = state(&[placed(), cancelled_at(7)]);
        assert_eq!(
            reservation.recorded_status(),
            Some(ReservationStatus::Cancelled)
        );
        assert_eq!(reservation.updated_at(), Some(at(7)));

        let reservation = state(&[placed(), expired()]);
        assert_eq!(
            reservation.recorded_status(),
            Some(ReservationStatus::Expired)
        );
        assert_eq!(reservation.updated_at(), Some(at(15)));
    }

    #[test]
    fn a_held_reservation_reads_as_expired_once_its_hold_lapses() {
        let held = state(&[placed()]);
        assert_eq!(held.status_at(at(14)), Some(ReservationStatus::Held));
        assert_eq!(held.status_at(at(15)), Some(ReservationStatus::Expired));
        assert_eq!(held.recorded_status(), Some(ReservationStatus::Held));
        let confirmed = state(&[placed(), confirmed_at(5)]);
        assert_eq!(
            confirmed.status_at(at(60)),
            Some(ReservationStatus::Confirmed)
        );
        assert_eq!(Reservation::default().status_at(at(0)), None);
    }

    #[test]
    fn only_held_and_confirmed_reservations_occupy_nights() {
        assert!(ReservationStatus::Held.occupies_nights());
        assert!(ReservationStatus::Confirmed.occupies_nights());
        assert!(!ReservationStatus::Cancelled.occupies_nights());
        assert!(!ReservationStatus::Expired.occupies_nights());
        assert!(!ReservationStatus::Declined.occupies_nights());
        assert_eq!(ReservationStatus::Declined.as_str(), "declined");
    }

    // --- Payments -----------------------------------------------------------------------

    fn card(txn: &str, amount_cents: i64) -> Payment {
        Payment {
            provider_txn_id: txn.to_owned(),
            amount_cents,
        }
    }

    fn authorize(txn: &str, amount_cents: i64, minutes: i64) -> ReservationCommand {
        ReservationCommand::ApplyAuthorization {
            now: at(minutes),
            payment: card(txn, amount_cents),
        }
    }

    fn given_back(txn: &str, amount_cents: i64, minutes: i64) -> ReservationEvent {
        ReservationEvent::LatePaymentRefunded {
            provider_txn_id: txn.to_owned(),
            amount_cents,
            refunded_at: at(minutes),
        }
    }

    fn paid_at(txn: &str, minutes: i64) -> ReservationEvent {
        ReservationEvent::ReservationConfirmed {
            confirmed_at: at(minutes),
            payment: Some(card(txn, 48_000)),
        }
    }

    #[test]
    fn an_authorization_for_a_live_hold_confirms_it_with_the_payment() {
        Fixture::with(())
            .given(vec![placed()])
            .when(authorize("txn_1", 48_000, 5))
            .then_expect_events(vec![paid_at("txn_1", 5)]);
    }

    #[test]
    fn the_same_authorization_twice_changes_nothing() {
        Fixture::with(())
            .given(vec![placed(), paid_at("txn_1", 5)])
            .when(authorize("txn_1", 48_000, 6))
            .then_expect_events(vec![]);
    }

    #[test]
    fn an_authorization_after_the_hold_lapsed_records_the_lapse_and_is_given_back() {
        Fixture::with(())
            .given(vec![placed()])
            .when(authorize("txn_1", 48_000, 15))
            .then_expect_events(vec![expired(), given_back("txn_1", 48_000, 15)]);
    }

    #[test]
    fn an_authorization_for_an_expired_reservation_is_given_back_not_resurrected() {
        Fixture::with(())
            .given(vec![placed(), expired()])
            .when(authorize("txn_1", 48_000, 20))
            .then_expect_events(vec![given_back("txn_1", 48_000, 20)]);
    }

    #[test]
    fn an_authorization_after_a_cancellation_is_given_back() {
        Fixture::with(())
            .given(vec![placed(), cancelled_at(3)])
            .when(authorize("txn_1", 48_000, 5))
            .then_expect_events(vec![given_back("txn_1", 48_000, 5)]);
    }

    #[test]
    fn a_second_authorization_of_a_paid_reservation_is_given_back_once() {
        let given = vec![
            placed(),
            paid_at("txn_1", 5),
            given_back("txn_2", 48_000, 6),
        ];
        Fixture::with(())
            .given(vec![placed(), paid_at("txn_1", 5)])
            .when(authorize("txn_2", 48_000, 6))
            .then_expect_events(vec![given_back("txn_2", 48_000, 6)]);
        Fixture::with(())
            .given(given)
            .when(authorize("txn_2", 48_000, 7))
            .then_expect_events(vec![]);
    }

    #[test]
    fn an_authorization_of_the_wrong_amount_is_given_back_and_the_hold_stays() {
        let after = state(&[placed(), given_back("txn_1", 100, 5)]);
        Fixture::with(())
            .given(vec![placed()])
            .when(authorize("txn_1", 100, 5))
            .then_expect_events(vec![given_back("txn_1", 100, 5)]);
        assert_eq!(after.recorded_status(), Some(ReservationStatus::Held));
        assert!(after.knows_payment("txn_1"));
    }

    #[test]
    fn a_declined_card_ends_the_hold_as_declined() {
        let declined = ReservationEvent::PaymentDeclined {
            declined_at: at(5),
            provider_txn_id: Some("txn_1".into()),
        };
        Fixture::with(())
            .given(vec![placed()])
            .when(ReservationCommand::DeclinePayment {
                now: at(5),
                provider_txn_id: Some("txn_1".into()),
            })
            .then_expect_events(vec![declined.clone()]);
        assert_eq!(
            state(&[placed(), declined]).recorded_status(),
            Some(ReservationStatus::Declined)
        );
    }

    #[test]
    fn a_decline_cannot_undo_a_confirmation() {
        Fixture::with(())
            .given(vec![placed(), paid_at("txn_1", 5)])
            .when(ReservationCommand::DeclinePayment {
                now: at(6),
                provider_txn_id: Some("txn_1".into()),
            })
            .then_expect_events(vec![]);
    }

    #[test]
    fn cancelling_records_the_refund_the_policy_gave() {
        let cancelled = ReservationEvent::ReservationCancelled {
            cancelled_at: at(30),
            reason: "plans changed".into(),
            by: CancelledBy::Hotel,
            refund_cents: 48_000,
        };
        Fixture::with(())
            .given(vec![placed(), paid_at("txn_1", 5)])
            .when(ReservationCommand::Cancel {
                now: at(30),
                reason: "plans changed".into(),
                by: CancelledBy::Hotel,
                refund_cents: 48_000,
            })
            .then_expect_events(vec![cancelled.clone()]);
        let after = state(&[placed(), paid_at("txn_1", 5), cancelled]);
        assert_eq!(after.refund_cents(), 48_000);
        assert_eq!(after.payment(), Some(&card("txn_1", 48_000)));
    }

    #[test]
    fn the_stream_id_starts_with_the_hotel() {
        let id = ReservationId::from_uuid(Uuid::from_u128(1));
        assert_eq!(
            reservation_stream_id(HotelId::parse(7).expect("valid id"), id),
            "7:00000000-0000-0000-0000-000000000001"
        );
        assert_eq!(expired().event_type(), "HoldExpired");
    }
}
