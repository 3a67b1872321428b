//! What an idempotency record keeps of a reservation command's answer, and how a retry
//! gets that answer back.
//!
//! A record keeps a reference, not the answer: the reservation's stream, the version
//! the command left it at, and the time the answer was given. The stream's events up to
//! that version are the reservation the answer showed, so a retry folds them and views
//! the result at that time, and gets what the first attempt answered without the answer
//! being stored a third time beside the event and the reservation's row (a whole view
//! was the largest line of a hold's bytes after the events; docs/benchmarks.md, "The
//! hold's budget"). The one thing that may differ is meant to: a guest erased since
//! reads as erased, as every other copy of them does.
//!
//! A refusal is small and is stored as it is. Records written before answers were kept
//! by reference hold the whole view under `Ok` and are replayed as they are.

use aggregates::{
    HotelId, Personal, Rejection, Reservation, ReservationEvent, ReservationId, TypedEvent,
};
use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Outcome;
use store::error::CommandError;
use store::view::ReservationView;
use store::write::AttemptError;

/// A reservation command's answer as its idempotency record stores it. Serialized as
/// `{"Ok": view}`, `{"Err": refusal}` (the shape of an [`Outcome`], which records
/// written before hold) or `{"Reservation": {...}}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum StoredAnswer {
    /// The whole view, as records written before references hold it.
    Ok(Box<ReservationView>),
    Err(Rejection),
    /// The reservation as its stream stood at `version`, viewed at `at`.
    Reservation {
        hotel_id: i64,
        reservation_id: Uuid,
        version: i64,
        at: DateTime<Utc>,
    },
}

impl StoredAnswer {
    /// What to store for `outcome`, answered at `at` with the reservation's stream left
    /// at `version`.
    pub fn of(outcome: &Outcome, version: i64, at: DateTime<Utc>) -> Self {
        match outcome {
            Ok(view) => Self::Reservation {
                hotel_id: view.hotel_id,
                reservation_id: view.reservation_id,
                version,
                at,
            },
            Err(rejection) => Self::Err(rejection.clone()),
        }
    }

    /// The answer the record refers to, read back on `conn`.
    pub async fn answer(self, conn: &mut PgConnection) -> Result<Outcome, AttemptError> {
        let (hotel_id, reservation_id, version, at) = match self {
            Self::Ok(view) => return Ok(Ok(*view)),
            Self::Err(rejection) => return Ok(Err(rejection)),
            Self::Reservation {
                hotel_id,
                reservation_id,
                version,
                at,
            } => (hotel_id, reservation_id, version, at),
        };
        let unreadable = |why: &str| {
            AttemptError::Fatal(CommandError::Internal(format!(
                "stored answer for reservation {reservation_id} unreadable: {why}"
            )))
        };
        let hotel = HotelId::parse(hotel_id).map_err(|e| unreadable(&e.to_string()))?;
        let stream_id = aggregates::reservation::reservation_stream_id(
            hotel,
            ReservationId::from_uuid(reservation_id),
        );
        let events = projections::log::read_stream(conn, Reservation::TYPE, &stream_id).await?;
        // Its events up to `version` are the reservation answered; a guest erased after
        // it reads as erased, as every other copy of them does.
        let mut reservation = Reservation::default();
        let (mut reached, mut erased) = (false, false);
        for event in &events {
            let Ok(TypedEvent::Reservation { event: typed, .. }) = event.typed() else {
                return Err(unreadable("an event of its stream does not decode"));
            };
            if event.sequence <= version {
                reservation.apply(typed.clone());
                reached |= event.sequence == version;
            } else if matches!(typed, ReservationEvent::GuestErased { .. }) {
                erased = true;
            }
        }
        if !reached {
            return Err(unreadable("its version is not in the log"));
        }
        let mut view =
            ReservationView::of(&reservation, at).ok_or_else(|| unreadable("no reservation"))?;
        if erased {
            view.guest = Personal::Erased;
        }
        Ok(Ok(view))
    }
}
