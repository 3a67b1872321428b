//! Availability as the log knew it at a past moment: the hotel and each night of the
//! stay folded from their events recorded at or before that moment, with the domain's
//! own `apply_event`, then described exactly as a live availability read describes the
//! write side's rows (the same offers, prices and restrictions; a hold lapsed by then
//! counts as free, as it did for readers at the time).
//!
//! The events of the stay's nights are read in one statement through the events'
//! primary key (a range per night's stream), so the cost grows with the events of those
//! nights, not with the log.

use std::collections::BTreeMap;

use aggregates::{AggregateType, Hotel, HotelId, RoomNight, RoomNightKey, TypedEvent};
use chrono::{DateTime, Days, Utc};
use projections::log::read_streams_until;

use super::availability::{describe, today_at, Source, StayAvailability, StayQuery, StoredNight};
use super::{Queries, QueryError};

/// A night's state at a moment, as availability reads it.
fn stored(night: &RoomNight, at: DateTime<Utc>) -> Option<StoredNight> {
    let levels = night.levels()?;
    // Lapsed by then, and not a block's (whose rooms go back to the block): free.
    let lapsed: u32 = night
        .holds()
        .iter()
        .filter(|(id, hold)| hold.expires_at <= at && night.block_of(id).is_none())
        .map(|(_, hold)| hold.rooms)
        .sum();
    Some(StoredNight::new(
        (
            i64::from(levels.total_rooms()),
            i64::from(levels.overbooking_allowance()),
        ),
        (
            i64::from(night.confirmed()),
            i64::from(night.held()) - i64::from(lapsed),
            i64::from(night.blocked()),
        ),
        levels.rate_cents(),
        night.restrictions().clone(),
        night.plan_rates().clone(),
    ))
}

impl Queries {
    /// `hotel`'s availability for `query` as the log knew it at `at`; `None` if the
    /// hotel did not exist yet (no event of it recorded by then).
    pub async fn availability_as_known_at(
        &self,
        hotel_id: HotelId,
        query: &StayQuery,
        at: DateTime<Utc>,
    ) -> Result<Option<StayAvailability>, QueryError> {
        let mut conn = self.pool.acquire().await?;
        let hotel_stream = aggregates::streams::hotel_stream_id(hotel_id);
        let mut hotel = Hotel::default();
        let events = read_streams_until(
            &mut conn,
            AggregateType::Hotel.as_str(),
            std::slice::from_ref(&hotel_stream),
            at,
        )
        .await?;
        if events.is_empty() {
            return Ok(None);
        }
        for stored_event in &events {
            match stored_event.typed() {
                Ok(TypedEvent::Hotel { event, .. }) => hotel.apply_event(event),
                Ok(_) => {}
                Err(e) => return Err(QueryError::Corrupt(e.to_string())),
            }
        }
        // The stay's nights and its check-out day (as a live read loads them).
        let through = query
            .stay
            .end()
            .checked_add_days(Days::new(1))
            .unwrap_or(query.stay.end());
        let ids: Vec<String> = hotel
            .room_types()
            .keys()
            .flat_map(|room_type| {
                query
                    .stay
                    .start()
                    .iter_days()
                    .take_while(|date| *date < through)
                    .map(|date| RoomNightKey::new(hotel_id, *room_type, date).stream_id())
            })
            .collect();
        let events =
            read_streams_until(&mut conn, AggregateType::RoomNight.as_str(), &ids, at).await?;
        let mut nights: BTreeMap<RoomNightKey, RoomNight> = BTreeMap::new();
        for stored_event in &events {
            match stored_event.typed() {
                Ok(TypedEvent::RoomNight { key, event }) => {
                    nights.entry(*key).or_default().apply_event(event);
                }
                Ok(_) => {}
                Err(e) => return Err(QueryError::Corrupt(e.to_string())),
            }
        }
        let states: BTreeMap<RoomNightKey, StoredNight> = nights
            .iter()
            .filter_map(|(key, night)| stored(night, at).map(|s| (*key, s)))
            .collect();
        let view = |room_type, date| {
            states
                .get(&RoomNightKey::new(hotel_id, room_type, date))
                .map(StoredNight::view)
        };
        let (room_types, offers) = describe(&hotel, query, today_at(&hotel, at), view);
        Ok(Some(StayAvailability {
            source: Source::Log,
            as_of: at,
            room_types,
            offers,
            currency: hotel.currency(),
        }))
    }
}
