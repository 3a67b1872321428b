//! `Reservation`: one guest's stay, from hold to a terminal state.
//!
//! Lifecycle: held → confirmed → cancelled; held → expired; held → declined (payment).
//! The status transition is what guards every release of nights: a second cancel finds
//! the reservation already cancelled, is refused, and so releases nothing.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationCommand {
    /// Record a new reservation whose nights are being held.
    Place { details: ReservationDetails },
    Confirm { now: DateTime<Utc> },
    Cancel {
        now: DateTime<Utc>,
        reason: String,
        by: CancelledBy,
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
    },
    ReservationCancelled {
        cancelled_at: DateTime<Utc>,
        reason: String,
        by: CancelledBy,
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

impl DomainEvent for ReservationEvent {
    fn event_type(&self) -> String {
        match self {
            Self::ReservationHeld(_) => "ReservationHeld",
            Self::ReservationConfirmed { .. } => "ReservationConfirmed",
            Self::ReservationCancelled { .. } => "ReservationCancelled",
            Self::HoldExpired { .. } => "HoldExpired",
            Self::DatesChanged { .. } => "DatesChanged",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1.0".to_owned()
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
            ReservationCommand::Confirm { now } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Confirmed => Ok(Vec::new()),
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Err(ReservationError::HoldExpired {
                            expired_at: details.hold_expires_at,
                        })
                    }
                    ReservationStatus::Held => {
                        Ok(vec![ReservationEvent::ReservationConfirmed { confirmed_at: now }])
                    }
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::Cancel { now, reason, by } => {
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
            ReservationEvent::ReservationConfirmed { confirmed_at } => {
                self.status = Some(ReservationStatus::Confirmed);
                self.updated_at = Some(*confirmed_at);
            }
            ReservationEvent::ReservationCancelled { cancelled_at, .. } => {
                self.status = Some(ReservationStatus::Cancelled);
                self.updated_at = Some(*cancelled_at);
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
    const TYPE: &'static str = "reservation";
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
/// derivable from every stream id.
pub fn reservation_stream_id(hotel_id: HotelId, reservation_id: ReservationId) -> String {
    format!("{hotel_id}:{reservation_id}")
}
