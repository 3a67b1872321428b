//! Judging every recorded sale again against the terms it was sold on: the hotel's
//! catalog (the room type, its occupancy, the rate plan and its cancellation policy,
//! the hotel's time zone) and the restrictions of the stay's nights, as they stood when
//! the sale was decided.
//!
//! **Why a pass of its own.** The stream replay ([`super::StreamReplay`]) holds one
//! stream at a time, in stream order, but a sale's terms live in other streams: the
//! hotel's and every night's, the check-out day's included. [`TermsReplay`] reads the log
//! in commit order instead, and only the events that shape or make a sale (every hotel
//! event, `RestrictionsSet`, `ReservationHeld`, `DatesChanged`). It keeps the catalog of
//! every hotel and the restrictions of the nights that carry any, nothing else of a
//! night (no counters, holds or rates), so its memory grows with the catalog and the
//! restricted nights, not with the bookings.
//!
//! **Where in the history a sale is judged.** The write side decides a hold or a date
//! change and appends the reservation's and the nights' events in one transaction; what
//! bound that decision is what had been committed before the transaction. So the changes
//! to the terms that a transaction records are held back until its last event has been
//! read, and each sale is judged against the terms as the previous transactions left
//! them. No decision both sets terms and sells, so nothing of a sale's own transaction
//! could have bound it, and a change forged into that transaction does not excuse it.
//! Commit order is the log's `(transaction_id, position)`. For the nights a sale takes
//! it is the order the write side decided in: their restrictions and their sales queue
//! on the same room lock (under the optimistic strategy, the nights' version checks
//! refuse a sale whose nights changed). The catalog, and under the optimistic strategy
//! the check-out day, are read by a hold without a guard, so a change of a plan, a room
//! type or a check-out day's `closed_to_departure` that raced a hold may be judged as
//! if it had come first.
//!
//! **What is judged**, with the domain's own rules, as `hold_stay` and `change_dates`
//! judge: the hotel, the room type, the plan (a plan of the hotel selling the room type)
//! and the guests per room (within the room type's occupancy) through
//! [`SaleTerms::resolve`]; the stay against the restrictions in force for its plan, on
//! the hotel's local date of the decision (`created_at`, `changed_at`), through
//! [`SaleTerms::check_stay_on`], a date change with a stop-sell not closing the nights
//! its old stay already had; and a hold's recorded cancellation policy against its
//! plan's. A date change is judged for the reservation as its earlier events left it
//! (its plan, its guests, the stay it leaves): this pass keeps no reservations, so the
//! caller reads those events along with the change.
//!
//! An event that does not decode is skipped here: the stream replay reports it.
//!
//! Pure: no IO, so every rule has a unit test below.

use std::collections::HashMap;

use aggregates::booking::SaleTerms;
use aggregates::contract::RawEvent;
use aggregates::restrictions::{NightRestrictions, RestrictionSet};
use aggregates::types::local_date;
use aggregates::{
    Hotel, HotelEvent, HotelId, RatePlanId, Rejection, Reservation, ReservationDetails,
    ReservationEvent, RoomNightEvent, RoomNightKey, StayDates, TypedEvent,
};
use chrono::{DateTime, Utc};

use super::DECODER;

/// The terms of sale through the history, read in commit order; see the module docs.
#[derive(Debug, Default)]
pub struct TermsReplay {
    hotels: HashMap<HotelId, Hotel>,
    /// Only nights that carry restrictions: most carry none.
    restrictions: HashMap<RoomNightKey, RestrictionSet>,
    /// The transaction being read, and the changes to the terms it has recorded so far.
    transaction_id: Option<i64>,
    pending: Vec<Change>,
}

/// A change to the terms, held back until its transaction has been read.
#[derive(Debug)]
enum Change {
    Hotel(HotelId, HotelEvent),
    Restrictions {
        key: RoomNightKey,
        rate_plan_id: Option<RatePlanId>,
        restrictions: NightRestrictions,
    },
}

/// A sale being judged: a hold, or a change of dates.
#[derive(Clone, Copy)]
enum Sale<'a> {
    Hold,
    DatesChanged { old_stay: &'a StayDates },
}

impl TermsReplay {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the next event of the log (in commit order) of transaction
    /// `transaction_id`. Returns what is wrong with the sale it records, if it records
    /// one. `earlier` is only read for a `DatesChanged`: the events before it in its
    /// reservation's stream, in order.
    pub fn apply<'e>(
        &mut self,
        transaction_id: i64,
        raw: RawEvent<'_>,
        earlier: impl IntoIterator<Item = RawEvent<'e>>,
    ) -> Result<(), String> {
        if self.transaction_id != Some(transaction_id) {
            self.end_transaction();
            self.transaction_id = Some(transaction_id);
        }
        let Ok(event) = DECODER.decode(raw) else {
            return Ok(());
        };
        match event {
            TypedEvent::Hotel { hotel_id, event } => {
                self.pending.push(Change::Hotel(hotel_id, event));
                Ok(())
            }
            TypedEvent::RoomNight {
                key,
                event:
                    RoomNightEvent::RestrictionsSet {
                        rate_plan_id,
                        restrictions,
                    },
            } => {
                self.pending.push(Change::Restrictions {
                    key,
                    rate_plan_id,
                    restrictions,
                });
                Ok(())
            }
            TypedEvent::RoomNight { .. } => Ok(()),
            TypedEvent::Reservation {
                event: ReservationEvent::ReservationHeld(details),
                ..
            } => self.judge(&details, &details.stay, details.created_at, Sale::Hold),
            TypedEvent::Reservation {
                event:
                    ReservationEvent::DatesChanged {
                        stay, changed_at, ..
                    },
                ..
            } => {
                let mut reservation = Reservation::default();
                for raw in earlier {
                    if let Ok(TypedEvent::Reservation { event, .. }) = DECODER.decode(raw) {
                        reservation.apply_event(&event);
                    }
                }
                // Without its ReservationHeld the stream replay reports the change.
                let Some(details) = reservation.details() else {
                    return Ok(());
                };
                let old_stay = &details.stay;
                self.judge(details, &stay, changed_at, Sale::DatesChanged { old_stay })
            }
            TypedEvent::Reservation { .. } | TypedEvent::Block { .. } => Ok(()),
        }
    }

    /// The transaction read so far is over: its changes are now in force.
    fn end_transaction(&mut self) {
        for change in self.pending.drain(..) {
            match change {
                Change::Hotel(hotel_id, event) => {
                    self.hotels.entry(hotel_id).or_default().apply_event(&event);
                }
                Change::Restrictions {
                    key,
                    rate_plan_id,
                    restrictions,
                } => {
                    let set = self.restrictions.entry(key).or_default();
                    set.set(rate_plan_id, restrictions);
                    if set.is_empty() {
                        self.restrictions.remove(&key);
                    }
                }
            }
        }
    }

    /// Whether `details` (the reservation, with its plan and guests) could be sold
    /// `stay` at `at` on the terms in force.
    fn judge(
        &self,
        details: &ReservationDetails,
        stay: &StayDates,
        at: DateTime<Utc>,
        sale: Sale<'_>,
    ) -> Result<(), String> {
        let what = match sale {
            Sale::Hold => format!("ReservationHeld of {stay}"),
            Sale::DatesChanged { .. } => format!("DatesChanged to {stay}"),
        };
        let hotel_id = details.hotel_id;
        let Some((hotel, timezone)) = self
            .hotels
            .get(&hotel_id)
            .and_then(|hotel| Some((hotel, hotel.details()?.timezone())))
        else {
            return Err(format!(
                "{what} at hotel {hotel_id}, which does not exist at that point of the history"
            ));
        };
        if matches!(sale, Sale::Hold) && details.currency != hotel.currency() {
            return Err(format!(
                "{what} records the currency {}, but hotel {hotel_id} priced in {}",
                details.currency,
                hotel.currency()
            ));
        }
        if matches!(sale, Sale::Hold) && details.taxes != *hotel.taxes() {
            return Err(format!(
                "{what} records taxes {:?}, but hotel {hotel_id} had {:?}",
                details.taxes.iter().map(|t| t.code()).collect::<Vec<_>>(),
                hotel.taxes().iter().map(|t| t.code()).collect::<Vec<_>>()
            ));
        }
        // Every line on its own room type's terms, as the hold judged it.
        for line in details.lines() {
            self.judge_line(
                &line,
                details.block_code,
                hotel_id,
                hotel,
                timezone,
                stay,
                at,
                sale,
                &what,
            )?;
        }
        Ok(())
    }

    /// One line of a sale (see [`Self::judge`]).
    #[allow(clippy::too_many_arguments)]
    fn judge_line(
        &self,
        line: &aggregates::reservation::Line,
        block_code: Option<aggregates::BlockCode>,
        hotel_id: HotelId,
        hotel: &Hotel,
        timezone: aggregates::TimeZone,
        stay: &StayDates,
        at: DateTime<Utc>,
        sale: Sale<'_>,
        what: &str,
    ) -> Result<(), String> {
        let room_type_id = line.room_type_id;
        let terms = SaleTerms::resolve(hotel, room_type_id, line.rate_plan_id, line.guests)
            .map_err(|rejection| {
                let why = match rejection {
                    Rejection::UnknownRoomType => format!(
                    "room type {room_type_id}, which hotel {hotel_id} does not have at that point"
                ),
                    Rejection::UnknownRatePlan => format!(
                        "rate plan {}, which is not a plan of hotel {hotel_id} selling room type \
                         {room_type_id} at that point",
                        line.rate_plan_id
                            .map_or_else(|| "(none)".to_owned(), |id| id.to_string())
                    ),
                    Rejection::OccupancyExceeded { max_occupancy } => format!(
                        "{} guests per room, but room type {room_type_id} sleeps at most \
                         {max_occupancy}",
                        line.guests.get()
                    ),
                    other => other.to_string(),
                };
                format!("{what} for {why}")
            })?;
        if matches!(sale, Sale::Hold) && line.cancellation_policy != terms.cancellation_policy() {
            return Err(format!(
                "{what} records the cancellation policy {:?}, but {} had {:?}",
                line.cancellation_policy,
                line.rate_plan_id.map_or_else(
                    || "the base rate".to_owned(),
                    |id| format!("rate plan {id}")
                ),
                terms.cancellation_policy()
            ));
        }
        let today = local_date(at, timezone);
        // A block's rooms are sold on its contract, not under general sale's restrictions.
        if block_code.is_some() {
            return Ok(());
        }
        let already_sold = |date| match sale {
            Sale::Hold => false,
            Sale::DatesChanged { old_stay } => old_stay.contains(date),
        };
        terms
            .check_stay_on(
                stay,
                today,
                |date| {
                    self.restrictions
                        .get(&RoomNightKey::new(hotel_id, room_type_id, date))
                },
                already_sold,
            )
            .map_err(|restricted| {
                format!("{what} on {today} (the hotel's date): {restricted}, a restriction in force then")
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use aggregates::cancellation::CancellationPolicy;
    use aggregates::contract::{hotel_stream_id, reservation_stream_id, RawPayload};
    use aggregates::rate_plan::Pricing;
    use aggregates::{
        Cents, Guest, GuestCount, HotelDetails, RatePlan, ReservationId, RoomCount,
        RoomTypeDetails, RoomTypeId,
    };
    use chrono::{NaiveDate, TimeZone};
    use cqrs_es::DomainEvent;
    use uuid::Uuid;

    use super::*;

    fn hotel() -> HotelId {
        HotelId::parse(7).expect("id")
    }

    fn king() -> RoomTypeId {
        RoomTypeId::parse(3).expect("id")
    }

    fn plan_id(n: i64) -> RatePlanId {
        RatePlanId::parse(n).expect("id")
    }

    fn date(day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2027, 6, day).expect("date")
    }

    fn stay(from: u32, to: u32) -> StayDates {
        StayDates::parse(date(from), date(to)).expect("stay")
    }

    /// 1 June 2027, `hour` o'clock UTC.
    fn at(hour: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 6, 1, hour, 0, 0)
            .single()
            .expect("time")
    }

    /// One stored event, as the log holds it.
    struct Stored {
        aggregate_type: &'static str,
        aggregate_id: String,
        sequence: i64,
        event_type: String,
        event_version: String,
        payload: String,
    }

    impl Stored {
        fn of<E: DomainEvent>(
            aggregate_type: &'static str,
            aggregate_id: String,
            sequence: i64,
            event: &E,
        ) -> Self {
            Self {
                aggregate_type,
                aggregate_id,
                sequence,
                event_type: event.event_type(),
                event_version: event.event_version(),
                payload: serde_json::to_string(event).expect("serializable"),
            }
        }

        fn raw(&self) -> RawEvent<'_> {
            RawEvent {
                aggregate_type: self.aggregate_type,
                aggregate_id: &self.aggregate_id,
                sequence: self.sequence,
                event_type: &self.event_type,
                event_version: &self.event_version,
                payload: RawPayload::Text(&self.payload),
            }
        }
    }

    fn hotel_event(sequence: i64, event: HotelEvent) -> Stored {
        Stored::of("hotel", hotel_stream_id(hotel()), sequence, &event)
    }

    /// Hotel 7 in Lisbon (UTC+1 in June), room type 3 sleeping 2, and plan 2 selling
    /// it non-refundable.
    fn catalog() -> Vec<Stored> {
        vec![
            hotel_event(
                1,
                HotelEvent::HotelDetailsSet {
                    hotel_id: hotel(),
                    details: HotelDetails::parse("Tejo", "Lisbon", "Europe/Lisbon")
                        .expect("details"),
                },
            ),
            hotel_event(
                2,
                HotelEvent::RoomTypeSet {
                    room_type_id: king(),
                    details: RoomTypeDetails::parse("king", 2).expect("room type"),
                },
            ),
            hotel_event(
                3,
                HotelEvent::RatePlanSet {
                    rate_plan_id: plan_id(2),
                    plan: RatePlan::parse(
                        "Non-refundable",
                        BTreeSet::from([king()]),
                        CancellationPolicy::NonRefundable,
                        Pricing::Own,
                    )
                    .expect("plan"),
                },
            ),
        ]
    }

    fn restrict(
        day: u32,
        sequence: i64,
        rate_plan_id: Option<RatePlanId>,
        restrictions: NightRestrictions,
    ) -> Stored {
        Stored::of(
            "room_night",
            RoomNightKey::new(hotel(), king(), date(day)).stream_id(),
            sequence,
            &RoomNightEvent::RestrictionsSet {
                rate_plan_id,
                restrictions,
            },
        )
    }

    fn min_stay(nights: u32) -> NightRestrictions {
        NightRestrictions {
            min_stay: Some(nights),
            ..NightRestrictions::default()
        }
    }

    fn stop_sell() -> NightRestrictions {
        NightRestrictions {
            stop_sell: true,
            ..NightRestrictions::default()
        }
    }

    fn res(n: u128) -> ReservationId {
        ReservationId::from_uuid(Uuid::from_u128(n))
    }

    fn details(n: u128, stay: StayDates) -> ReservationDetails {
        ReservationDetails {
            more_lines: Vec::new(),
            reservation_id: res(n),
            hotel_id: hotel(),
            room_type_id: king(),
            stay,
            rooms: RoomCount::parse(1).expect("rooms"),
            guest: aggregates::Personal::Clear(
                Guest::parse("Ana", "ana@example.com").expect("guest"),
            ),
            channel: "web".to_owned(),
            total_cents: Cents::new(36_000),
            hold_expires_at: at(13),
            created_at: at(12),
            rate_plan_id: None,
            cancellation_policy: CancellationPolicy::HOUSE,
            guests: GuestCount::ONE,
            first_night_cents: None,
            currency: aggregates::Currency::EUR,
            taxes: aggregates::taxes::Taxes::default(),
            block_code: None,
        }
    }

    fn held(details: ReservationDetails) -> Stored {
        Stored::of(
            "reservation",
            reservation_stream_id(details.hotel_id, details.reservation_id),
            1,
            &ReservationEvent::ReservationHeld(details),
        )
    }

    /// Reads `transactions` (each a list of events) in order; returns each event's
    /// result, in order.
    fn replay(transactions: &[Vec<Stored>]) -> Vec<Result<(), String>> {
        let mut terms = TermsReplay::new();
        let mut results = Vec::new();
        for (txid, events) in transactions.iter().enumerate() {
            for event in events {
                results.push(terms.apply(txid as i64 + 100, event.raw(), []));
            }
        }
        results
    }

    #[test]
    fn a_hold_breaking_a_restriction_committed_before_it_is_flagged() {
        let results = replay(&[
            catalog(),
            vec![restrict(10, 2, None, min_stay(3))],
            vec![held(details(1, stay(10, 12)))],
        ]);
        let err = results[4].clone().expect_err("min stay broken");
        assert!(
            err.contains("ReservationHeld of [2027-06-10, 2027-06-12)")
                && err.contains("breaks min_stay on 2027-06-10"),
            "{err}"
        );
        assert!(results[..4].iter().all(Result::is_ok), "{results:?}");
    }

    #[test]
    fn a_hold_recording_another_currency_or_other_taxes_than_its_hotels_is_flagged() {
        let francs = aggregates::Currency::parse("CHF").expect("currency");
        let city = aggregates::taxes::Taxes::parse(vec![aggregates::taxes::Tax::parse(
            "CITY",
            aggregates::taxes::TaxKind::PerStay {
                amount: aggregates::Cents::new(100),
            },
        )
        .expect("tax")])
        .expect("taxes");
        let results = replay(&[
            catalog(),
            vec![held(ReservationDetails {
                currency: francs,
                ..details(1, stay(10, 12))
            })],
            vec![held(ReservationDetails {
                taxes: city.clone(),
                ..details(2, stay(10, 12))
            })],
            vec![hotel_event(
                4,
                HotelEvent::TaxesSet {
                    taxes: city.clone(),
                },
            )],
            vec![held(ReservationDetails {
                taxes: city,
                ..details(3, stay(10, 12))
            })],
        ]);
        let err = results[3].clone().expect_err("another currency");
        assert!(
            err.contains("records the currency CHF") && err.contains("EUR"),
            "{err}"
        );
        let err = results[4]
            .clone()
            .expect_err("taxes the hotel did not have");
        assert!(err.contains("records taxes [\"CITY\"]"), "{err}");
        assert!(results[5..].iter().all(Result::is_ok), "{results:?}");
    }

    #[test]
    fn a_restriction_committed_after_the_hold_or_in_its_transaction_is_not_held_against_it() {
        let results = replay(&[
            catalog(),
            vec![held(details(1, stay(10, 12)))],
            vec![restrict(10, 2, None, min_stay(3))],
        ]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        // Forged into the hold's own transaction, before it: still not in force.
        let results = replay(&[
            catalog(),
            vec![
                restrict(10, 2, None, min_stay(3)),
                held(details(1, stay(10, 12))),
            ],
        ]);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }

    #[test]
    fn a_lifted_restriction_no_longer_binds_and_a_plans_own_binds_only_its_plan() {
        let results = replay(&[
            catalog(),
            vec![restrict(10, 2, None, stop_sell())],
            vec![restrict(10, 3, None, NightRestrictions::default())],
            vec![restrict(11, 2, Some(plan_id(2)), stop_sell())],
            // The base rate is not stopped on the 11th; plan 2 is.
            vec![held(details(1, stay(10, 12)))],
            vec![held(ReservationDetails {
                rate_plan_id: Some(plan_id(2)),
                cancellation_policy: CancellationPolicy::NonRefundable,
                ..details(2, stay(10, 12))
            })],
        ]);
        assert!(results[..7].iter().all(Result::is_ok), "{results:?}");
        let err = results[7].clone().expect_err("plan 2 stopped");
        assert!(err.contains("breaks stop_sell on 2027-06-11"), "{err}");
    }

    #[test]
    fn the_check_out_day_and_the_hotels_local_date_count() {
        let closed = NightRestrictions {
            closed_to_departure: true,
            ..NightRestrictions::default()
        };
        let ahead = NightRestrictions {
            min_advance_days: Some(10),
            ..NightRestrictions::default()
        };
        let results = replay(&[
            catalog(),
            vec![restrict(12, 2, None, closed), restrict(11, 2, None, ahead)],
            vec![held(details(1, stay(10, 12)))],
            // 22:30 UTC on 1 June is 23:30 in Lisbon, still the 1st: 10 days before the
            // 11th, allowed.
            vec![held(ReservationDetails {
                created_at: at(22) + chrono::Duration::minutes(30),
                ..details(2, stay(11, 13))
            })],
            // 23:30 UTC, still the 1st in UTC, is the 2nd in Lisbon: 9 days, refused.
            vec![held(ReservationDetails {
                created_at: at(23) + chrono::Duration::minutes(30),
                ..details(3, stay(11, 13))
            })],
        ]);
        let err = results[5].clone().expect_err("closed to departure");
        assert!(
            err.contains("breaks closed_to_departure on 2027-06-12"),
            "{err}"
        );
        assert!(results[6].is_ok(), "{results:?}");
        let err = results[7].clone().expect_err("too late");
        assert!(
            err.contains("on 2027-06-02 (the hotel's date)")
                && err.contains("breaks min_advance_days on 2027-06-11"),
            "{err}"
        );
    }

    fn dates_changed(details: &ReservationDetails, sequence: i64, to: StayDates) -> Stored {
        Stored::of(
            "reservation",
            reservation_stream_id(details.hotel_id, details.reservation_id),
            sequence,
            &ReservationEvent::DatesChanged {
                more_refund_caps: Vec::new(),
                more_line_prices: Vec::new(),
                stay: to,
                total_cents: Cents::new(36_000),
                changed_at: at(14),
                first_night_cents: None,
                refund_cap_percent: None,
                capture_due_at: None,
            },
        )
    }

    #[test]
    fn a_date_change_is_judged_for_its_new_stay_and_keeps_its_nights_through_a_stop_sell() {
        let mut terms = TermsReplay::new();
        let mut txid = 0;
        let mut read = |terms: &mut TermsReplay, events: &[Stored], earlier: &[Stored]| {
            txid += 1;
            events
                .iter()
                .map(|e| terms.apply(txid, e.raw(), earlier.iter().map(Stored::raw)))
                .collect::<Vec<_>>()
        };
        for event in catalog() {
            assert!(read(&mut terms, &[event], &[])[0].is_ok());
        }
        let booked = details(1, stay(10, 12));
        let hold = held(booked.clone());
        assert!(read(&mut terms, std::slice::from_ref(&hold), &[])[0].is_ok());
        read(&mut terms, &[restrict(11, 2, None, stop_sell())], &[]);
        read(&mut terms, &[restrict(13, 2, None, stop_sell())], &[]);

        // Keeps the stopped 11th: allowed. Enters the stopped 13th: refused.
        let keeps = dates_changed(&booked, 2, stay(11, 13));
        assert_eq!(
            read(
                &mut terms,
                std::slice::from_ref(&keeps),
                std::slice::from_ref(&hold)
            ),
            vec![Ok(())]
        );
        let moved = dates_changed(&booked, 3, stay(12, 14));
        let err = read(&mut terms, &[moved], &[hold, keeps])
            .remove(0)
            .expect_err("enters a stopped night");
        assert!(
            err.contains("DatesChanged to [2027-06-12, 2027-06-14)")
                && err.contains("breaks stop_sell on 2027-06-13"),
            "{err}"
        );
    }

    #[test]
    fn plans_and_occupancy_are_those_of_the_catalog_at_that_point() {
        let results = replay(&[
            catalog(),
            // Plan 9 does not exist; plan 2 exists but sells only room type 3.
            vec![held(ReservationDetails {
                rate_plan_id: Some(plan_id(9)),
                ..details(1, stay(10, 12))
            })],
            vec![held(ReservationDetails {
                guests: GuestCount::parse(3).expect("guests"),
                ..details(2, stay(10, 12))
            })],
            vec![held(ReservationDetails {
                room_type_id: RoomTypeId::parse(4).expect("id"),
                ..details(3, stay(10, 12))
            })],
            vec![held(ReservationDetails {
                hotel_id: HotelId::parse(8).expect("id"),
                ..details(4, stay(10, 12))
            })],
            // Plan 2 is non-refundable: a hold under it recording the house policy lies.
            vec![held(ReservationDetails {
                rate_plan_id: Some(plan_id(2)),
                ..details(5, stay(10, 12))
            })],
            vec![held(ReservationDetails {
                rate_plan_id: Some(plan_id(2)),
                cancellation_policy: CancellationPolicy::NonRefundable,
                guests: GuestCount::parse(2).expect("guests"),
                ..details(6, stay(10, 12))
            })],
        ]);
        let err = |i: usize| results[i].clone().expect_err("refused");
        assert!(
            err(3).contains("rate plan 9, which is not a plan of hotel 7 selling room type 3"),
            "{}",
            err(3)
        );
        assert!(
            err(4).contains("3 guests per room, but room type 3 sleeps at most 2"),
            "{}",
            err(4)
        );
        assert!(
            err(5).contains("room type 4, which hotel 7 does not have"),
            "{}",
            err(5)
        );
        assert!(
            err(6).contains("at hotel 8, which does not exist"),
            "{}",
            err(6)
        );
        assert!(
            err(7).contains("records the cancellation policy") && err(7).contains("rate plan 2"),
            "{}",
            err(7)
        );
        assert!(results[8].is_ok(), "{results:?}");
    }

    #[test]
    fn a_plan_set_after_the_hold_does_not_excuse_it() {
        let mut later = catalog();
        let plan = later.pop().expect("the plan");
        let results = replay(&[
            later,
            vec![held(ReservationDetails {
                rate_plan_id: Some(plan_id(2)),
                cancellation_policy: CancellationPolicy::NonRefundable,
                ..details(1, stay(10, 12))
            })],
            vec![plan],
        ]);
        assert!(results[2].is_err(), "{results:?}");
        assert!(results[3].is_ok(), "{results:?}");
    }
}
