//! What-if: one room type's recorded demand over a range of nights, read from the log
//! and the turnaway log, replayed by the domain's [`aggregates::what_if`] under the
//! policy in force and under another.
//!
//! **What is read.** Every event of the room type's night streams (inventory, holds,
//! confirmations, lapses, releases, blocks), the arrivals and no-shows of the
//! reservations those events name, and the turnaways of the room type. Events go in
//! commit order (`transaction_id`, then position: see `projections::log`); within one
//! transaction, the nights a reservation's hold (release, confirmation) touched become
//! one request. Turnaways are not in the log: each goes before the first transaction
//! that began after it was refused (both stamped by wall clocks, the servers' and the
//! database's, taken to agree).
//!
//! **The window.** A turnaway was refused because *some* night of its stay was full,
//! perhaps one outside the range asked about. So the nights replayed run from the
//! earliest night to the last of any turnaway touching the range; only the range's
//! nights are answered.
//!
//! **The policy in force** takes back the hotel's own decisions on turnaways (what
//! was refused stays refused: the recorded fact, not a re-decision from clocks that may
//! disagree by a moment) and re-decides every hold it took against the nights as they
//! were, so its answer is what was sold and earned, to the cent (a test compares it
//! with the occupancy report).
//!
//! **Arrivals.** The no-show rate is the one the range's own stays show (rooms not
//! come over rooms due, of the stays whose outcome is recorded); with none recorded it
//! is unknown, and every guest is expected to come (expected walks are then the worst
//! case). A suggested allowance is the no-show report's own (`overbooking::suggest`),
//! from those same figures.

use std::collections::{BTreeMap, HashMap};

use aggregates::what_if::{replay, Allowance, Demand, NightTerms, Outcome, TurnedAway};
use aggregates::{
    AggregateType, HotelId, ReservationEvent, ReservationId, RoomNightEvent, RoomNightKey,
    RoomTypeId, StayDates, TypedEvent,
};
use chrono::{DateTime, Days, NaiveDate, Utc};
use projections::log::{read_streams_until, StoredEvent};

use super::stays::overbooking;
use super::{Queries, QueryError};

/// The policy to replay the demand under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// The same overbooking allowance on every night.
    Allowance(u32),
    /// The allowance whose walk probability stays at or under this risk (0 to 1), as
    /// the no-show report suggests it.
    SuggestedRisk(f64),
}

/// What a what-if asks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WhatIfQuery {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    /// The nights replayed (half-open).
    pub range: StayDates,
    pub policy: Policy,
}

/// The replay's answer: each night of the range under the policy in force and the one
/// asked about, and the assumptions both rest on.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIf {
    pub nights: Vec<(NaiveDate, Outcome, Outcome)>,
    /// The allowance replayed (the suggested one, for a risk).
    pub allowance: u32,
    /// The no-show rate of the range's stays; `None` when no arrival is recorded.
    pub no_show_rate: Option<f64>,
    /// Rooms of the range's stays whose arrival is recorded, and of those no-shows.
    pub due: i64,
    pub no_shows: i64,
    /// Events and turnaways replayed.
    pub events_read: usize,
    pub turnaways_read: usize,
}

/// A turnaway of the room type, as the replay needs it.
#[derive(Debug, sqlx::FromRow)]
struct TurnawayRow {
    start_date: NaiveDate,
    end_date: NaiveDate,
    rooms: i32,
    reason: String,
    refused_at: DateTime<Utc>,
}

/// Nights a window may reach beyond the range (a turnaway's stay is far shorter).
const MAX_WIDENING: u64 = 400;

impl Queries {
    /// The what-if of `query`; `None` if there is no such hotel or room type.
    pub async fn what_if(&self, query: &WhatIfQuery) -> Result<Option<WhatIf>, QueryError> {
        let mut tx = self.snapshot().await?;
        let Some(room_types) = super::room_types_of(&mut tx, query.hotel_id).await? else {
            return Ok(None);
        };
        if !room_types
            .iter()
            .any(|(id, _)| *id == query.room_type_id.get())
        {
            return Ok(None);
        }
        let (from, to) = (query.range.start(), query.range.end());
        let turnaways: Vec<TurnawayRow> = sqlx::query_as(
            "SELECT start_date, end_date, rooms, reason, refused_at
               FROM turnaways
              WHERE hotel_id = $1 AND room_type_id = $2 AND start_date < $4 AND end_date > $3
              ORDER BY refused_at, turnaway_id",
        )
        .bind(query.hotel_id.get())
        .bind(query.room_type_id.get())
        .bind(from)
        .bind(to)
        .fetch_all(&mut *tx)
        .await?;
        let earliest = from
            .checked_sub_days(Days::new(MAX_WIDENING))
            .unwrap_or(from);
        let latest = to.checked_add_days(Days::new(MAX_WIDENING)).unwrap_or(to);
        let window_start = turnaways
            .iter()
            .map(|t| t.start_date.max(earliest))
            .fold(from, NaiveDate::min);
        let window_end = turnaways
            .iter()
            .map(|t| t.end_date.min(latest))
            .fold(to, NaiveDate::max);
        let window: Vec<NaiveDate> = window_start
            .iter_days()
            .take_while(|d| *d < window_end)
            .collect();
        let ids: Vec<String> = window
            .iter()
            .map(|d| RoomNightKey::new(query.hotel_id, query.room_type_id, *d).stream_id())
            .collect();
        let until = DateTime::<Utc>::MAX_UTC;
        let mut events =
            read_streams_until(&mut tx, AggregateType::RoomNight.as_str(), &ids, until).await?;
        let reservations: Vec<String> = {
            let mut seen: Vec<ReservationId> = events
                .iter()
                .filter_map(|e| match e.typed() {
                    Ok(TypedEvent::RoomNight { event, .. }) => reservation_of(event),
                    _ => None,
                })
                .collect();
            seen.sort();
            seen.dedup();
            seen.iter()
                .map(|r| aggregates::streams::reservation_stream_id(query.hotel_id, *r))
                .collect()
        };
        let outcomes = read_streams_until(
            &mut tx,
            AggregateType::Reservation.as_str(),
            &reservations,
            until,
        )
        .await?;
        tx.commit().await?;
        events.extend(outcomes.into_iter().filter(|e| {
            matches!(
                e.typed(),
                Ok(TypedEvent::Reservation {
                    event: ReservationEvent::GuestCheckedIn { .. }
                        | ReservationEvent::NoShowRecorded { .. }
                        | ReservationEvent::ReservationHeld(_)
                        | ReservationEvent::DatesChanged { .. },
                    ..
                })
            )
        }));
        events.sort_by_key(|e| (e.transaction_id, e.position));
        let events_read = events.len();
        let turnaways_read = turnaways.len();

        let mut book = Demands::default();
        let mut pending = turnaways.into_iter().peekable();
        let mut current: Option<i64> = None;
        for stored in &events {
            if current != Some(stored.transaction_id) {
                current = Some(stored.transaction_id);
                while let Some(t) = pending.next_if(|t| t.refused_at < stored.recorded_at) {
                    book.turnaway(&t, &window);
                }
            }
            book.event(stored)?;
        }
        for t in pending {
            book.turnaway(&t, &window);
        }
        let demand = book.finish();

        let (due, no_shows) = book.arrivals(from, to);
        let no_show_rate = super::stays::rate(no_shows, due);
        let start: BTreeMap<NaiveDate, NightTerms> = window
            .iter()
            .map(|d| {
                let none = NightTerms {
                    physical: 0,
                    allowance: 0,
                    rate_cents: 0,
                };
                (*d, none)
            })
            .collect();
        let allowance = match query.policy {
            Policy::Allowance(n) => n,
            Policy::SuggestedRisk(risk) => {
                let capacity = book
                    .physical
                    .range(from..to)
                    .map(|(_, p)| i64::from(*p))
                    .max()
                    .unwrap_or(0);
                let suggestion = overbooking::suggest(capacity, no_shows, due, risk);
                u32::try_from(suggestion.allowance).unwrap_or(0)
            }
        };
        // Pure CPU, a night's walks growing with its rooms sold times its rooms: off the
        // runtime's threads, so a large what-if holds up no other request.
        let rate = no_show_rate.unwrap_or(0.0);
        let (in_force, what_if) = tokio::task::spawn_blocking(move || {
            (
                replay(&start, &demand.in_force, Allowance::InForce, rate),
                replay(&start, &demand.what_if, Allowance::Every(allowance), rate),
            )
        })
        .await
        .map_err(|e| QueryError::Corrupt(format!("the what-if replay failed: {e}")))?;
        let nights = in_force
            .range(from..to)
            .map(|(date, now)| (*date, *now, what_if.get(date).copied().unwrap_or_default()))
            .collect();
        Ok(Some(WhatIf {
            nights,
            allowance,
            no_show_rate,
            due,
            no_shows,
            events_read,
            turnaways_read,
        }))
    }
}

/// The reservation a night's event is about, if any.
fn reservation_of(event: &RoomNightEvent) -> Option<ReservationId> {
    match event {
        RoomNightEvent::RoomsHeld { reservation_id, .. }
        | RoomNightEvent::RoomsBooked { reservation_id, .. }
        | RoomNightEvent::HoldConfirmed { reservation_id, .. }
        | RoomNightEvent::HoldLapsed { reservation_id, .. }
        | RoomNightEvent::RoomsReleased { reservation_id, .. }
        | RoomNightEvent::BlockRoomsHeld { reservation_id, .. }
        | RoomNightEvent::BlockHoldLapsed { reservation_id, .. }
        | RoomNightEvent::BlockRoomsReleased { reservation_id, .. } => Some(*reservation_id),
        _ => None,
    }
}

/// What one transaction's events of one reservation amount to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Held,
    Booked,
    Confirmed,
    Released { to_block: bool },
    Picked,
}

/// The demand as it is read: two lists, identical but for the turnaways (the policy in
/// force keeps the hotel's own refusals; the other re-decides them).
#[derive(Default)]
struct Demands {
    in_force: Vec<Demand>,
    what_if: Vec<Demand>,
    /// The reservations' ids in the replay, by order of appearance.
    ids: HashMap<ReservationId, u64>,
    /// The current transaction's grouped items: (reservation, kind) → place in `tx`.
    grouped: HashMap<(u64, Kind), usize>,
    tx: Vec<Demand>,
    tx_id: Option<i64>,
    /// Each reservation's rooms of this room type, its arrival date (from its own
    /// stream, as held or as changed) and whether it arrived, once recorded.
    rooms: HashMap<u64, u32>,
    arrival: HashMap<u64, NaiveDate>,
    arrived: HashMap<u64, bool>,
    /// Each night's physical rooms, last known.
    physical: BTreeMap<NaiveDate, u32>,
    turnaways: u64,
}

impl Demands {
    fn id(&mut self, reservation: ReservationId) -> u64 {
        let next = self.ids.len() as u64;
        *self.ids.entry(reservation).or_insert(next)
    }

    /// Ends the transaction being gathered.
    fn flush(&mut self) {
        self.grouped.clear();
        for item in self.tx.drain(..) {
            self.in_force.push(item.clone());
            self.what_if.push(item);
        }
    }

    fn turnaway(&mut self, row: &TurnawayRow, window: &[NaiveDate]) {
        self.flush();
        self.turnaways += 1;
        // Ids past any reservation's (a turnaway is never one).
        let id = u64::MAX - self.turnaways;
        // Only a sold-out night is something another allowance could have sold. The
        // rest (`restricted`, `occupancy`, `block_exhausted`: a group block whose rooms
        // were all picked up, general sale perhaps not full) stay refused under any
        // policy: an allowance changes neither a restriction, nor a room type's
        // occupancy, nor a block's size.
        let turned_away = if row.reason == "sold_out" {
            TurnedAway::SoldOut
        } else {
            TurnedAway::Other
        };
        let nights = window
            .iter()
            .copied()
            .filter(|d| *d >= row.start_date && *d < row.end_date)
            .collect();
        self.what_if.push(Demand::Request {
            id,
            nights,
            rooms: u32::try_from(row.rooms).unwrap_or(0),
            turned_away: Some(turned_away),
        });
    }

    /// Adds `night` to the transaction's item of (`reservation`, `kind`), made by `new`
    /// if it is the first.
    fn group(&mut self, id: u64, kind: Kind, night: NaiveDate, new: impl FnOnce() -> Demand) {
        let place = *self.grouped.entry((id, kind)).or_insert_with(|| {
            self.tx.push(new());
            self.tx.len() - 1
        });
        if let Some(
            Demand::Request { nights, .. }
            | Demand::Picked { nights, .. }
            | Demand::Released { nights, .. },
        ) = self.tx.get_mut(place)
        {
            if !nights.contains(&night) {
                nights.push(night);
            }
        }
    }

    fn event(&mut self, stored: &StoredEvent) -> Result<(), QueryError> {
        if self.tx_id != Some(stored.transaction_id) {
            self.flush();
            self.tx_id = Some(stored.transaction_id);
        }
        let typed = stored
            .typed()
            .map_err(|e| QueryError::Corrupt(e.to_string()))?;
        match typed {
            TypedEvent::RoomNight { key, event } => self.night_event(key.night, event),
            TypedEvent::Reservation {
                reservation_id,
                event,
                ..
            } => {
                // Only the reservations the nights' events name are read; a stream's
                // first event may come before its nights' in the same transaction.
                let id = self.id(*reservation_id);
                match event {
                    ReservationEvent::GuestCheckedIn { .. } => {
                        self.arrived.insert(id, true);
                        self.tx.push(Demand::CheckedIn { id });
                    }
                    ReservationEvent::NoShowRecorded { .. } => {
                        self.arrived.insert(id, false);
                        self.tx.push(Demand::NoShow { id });
                    }
                    // The stay's own first night (its nights before the window are not
                    // read).
                    ReservationEvent::ReservationHeld(details) => {
                        self.arrival.insert(id, details.stay.start());
                    }
                    ReservationEvent::DatesChanged { stay, .. } => {
                        self.arrival.insert(id, stay.start());
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn night_event(&mut self, night: NaiveDate, event: &RoomNightEvent) {
        let request = |id, rooms: &u32| {
            let rooms = *rooms;
            move || Demand::Request {
                id,
                nights: Vec::new(),
                rooms,
                turned_away: None,
            }
        };
        let released = |id, to_block| {
            move || Demand::Released {
                id,
                nights: Vec::new(),
                to_block,
            }
        };
        match event {
            RoomNightEvent::InventorySet {
                total_rooms,
                overbooking_allowance,
                rate_cents,
                ..
            } => {
                self.physical.insert(night, *total_rooms);
                self.tx.push(Demand::Terms {
                    night,
                    terms: NightTerms {
                        physical: *total_rooms,
                        allowance: *overbooking_allowance,
                        rate_cents: rate_cents.get(),
                    },
                });
            }
            RoomNightEvent::RoomsHeld {
                reservation_id,
                rooms,
                ..
            } => {
                let id = self.id(*reservation_id);
                self.rooms.entry(id).or_insert(*rooms);
                self.group(id, Kind::Held, night, request(id, rooms));
            }
            RoomNightEvent::RoomsBooked {
                reservation_id,
                rooms,
            } => {
                let id = self.id(*reservation_id);
                self.rooms.entry(id).or_insert(*rooms);
                // The request, then its confirmation: once per transaction each.
                self.group(id, Kind::Booked, night, request(id, rooms));
                self.group(id, Kind::Confirmed, night, || Demand::Confirmed { id });
            }
            RoomNightEvent::HoldConfirmed { reservation_id, .. } => {
                let id = self.id(*reservation_id);
                self.group(id, Kind::Confirmed, night, || Demand::Confirmed { id });
            }
            RoomNightEvent::HoldLapsed { reservation_id, .. }
            | RoomNightEvent::RoomsReleased { reservation_id, .. } => {
                let id = self.id(*reservation_id);
                let kind = Kind::Released { to_block: false };
                self.group(id, kind, night, released(id, false));
            }
            RoomNightEvent::BlockHoldLapsed {
                reservation_id,
                to_block,
                ..
            }
            | RoomNightEvent::BlockRoomsReleased {
                reservation_id,
                to_block,
                ..
            } => {
                let id = self.id(*reservation_id);
                let kind = Kind::Released {
                    to_block: *to_block,
                };
                self.group(id, kind, night, released(id, *to_block));
            }
            RoomNightEvent::BlockRoomsHeld {
                reservation_id,
                rooms,
                ..
            } => {
                let id = self.id(*reservation_id);
                self.rooms.entry(id).or_insert(*rooms);
                let rooms = *rooms;
                self.group(id, Kind::Picked, night, || Demand::Picked {
                    id,
                    nights: Vec::new(),
                    rooms,
                });
            }
            RoomNightEvent::BlockSet { change, .. } => {
                self.tx.push(Demand::SetAside {
                    night,
                    change: *change,
                });
            }
            RoomNightEvent::BlockRemoved { rooms, .. }
            | RoomNightEvent::BlockReleased { rooms, .. } => {
                self.tx.push(Demand::SetAside {
                    night,
                    change: -i64::from(*rooms),
                });
            }
            RoomNightEvent::RestrictionsSet { .. } | RoomNightEvent::PlanRateSet { .. } => {}
        }
    }

    fn finish(&mut self) -> FinishedDemand {
        self.flush();
        FinishedDemand {
            in_force: std::mem::take(&mut self.in_force),
            what_if: std::mem::take(&mut self.what_if),
        }
    }

    /// Rooms due in `[from, to)` whose arrival is recorded, and of those no-shows.
    fn arrivals(&self, from: NaiveDate, to: NaiveDate) -> (i64, i64) {
        self.arrived
            .iter()
            .filter_map(|(id, came)| {
                let (rooms, first) = (self.rooms.get(id)?, self.arrival.get(id)?);
                (*first >= from && *first < to).then_some((i64::from(*rooms), *came))
            })
            .fold((0, 0), |(due, missed), (rooms, came)| {
                (due + rooms, if came { missed } else { missed + rooms })
            })
    }
}

struct FinishedDemand {
    in_force: Vec<Demand>,
    what_if: Vec<Demand>,
}
