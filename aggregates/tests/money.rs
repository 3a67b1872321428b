//! Property test: a paid stay's money under random sequences of date changes (dearer
//! and cheaper, the gateway granting every increment), captures, check-in, a no-show or
//! a cancellation, with time moving on between them.
//!
//! After every step the ledger balances: nothing captured beyond what was authorized,
//! nothing refunded beyond what was captured, nothing captured once voided, no gateway
//! key used twice. And the rule that closes the date-change loophole: a guest's
//! cancellation after a change never gives back a larger share than cancelling at the
//! moment of the first change would have, and in cents never more than that refund plus
//! what the changes charged since (docs/api.md states it). With taxes (random ones: in
//! the price, added, per guest and night, per stay) the ledger balances alike, the card
//! is authorized for the total due, and a cancellation gives back at most what was
//! charged (everything when the hotel cancels).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: an unwrap is an assertion

use std::collections::HashSet;

use aggregates::booking::check_in_instant;
use aggregates::cancellation::CancellationPolicy;
use aggregates::reservation::ledger::authorization_key;
use aggregates::reservation::ReservationError;
use aggregates::taxes::{BasisPoints, Tax, TaxKind, Taxes};
use aggregates::{
    CancelledBy, Cents, Guest, GuestCount, HotelId, Increment, Payment, Reservation,
    ReservationCommand, ReservationDetails, ReservationEvent, ReservationId, ReservationStatus,
    RoomCount, RoomTypeId, StayDates, TimeZone,
};
use chrono::{DateTime, Duration, NaiveDate, TimeZone as _, Utc};
use proptest::prelude::*;
use uuid::Uuid;

fn start_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0).single().unwrap()
}

fn first_day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, 10).unwrap()
}

fn id() -> ReservationId {
    ReservationId::from_uuid(Uuid::from_u128(9))
}

#[derive(Debug, Clone)]
enum Op {
    /// Let `hours` pass.
    Wait {
        hours: i64,
    },
    /// Move to arrive `offset` days after the 10th for `nights` nights at `per_night`.
    Change {
        offset: u32,
        nights: u32,
        per_night: i64,
    },
    /// The capture worker's pass.
    Capture,
    CheckIn,
    NoShow,
    Cancel {
        by_hotel: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..=60_i64).prop_map(|hours| Op::Wait { hours }),
        4 => (0..=12_u32, 1..=4_u32, 5_000..=30_000_i64)
            .prop_map(|(offset, nights, per_night)| Op::Change { offset, nights, per_night }),
        2 => Just(Op::Capture),
        1 => Just(Op::CheckIn),
        1 => Just(Op::NoShow),
        1 => any::<bool>().prop_map(|by_hotel| Op::Cancel { by_hotel }),
    ]
}

fn taxes() -> impl Strategy<Value = Taxes> {
    let tax = prop_oneof![
        (1..=2_500_u32, any::<bool>()).prop_map(|(bp, included)| TaxKind::Percent {
            rate: BasisPoints::from_percent(f64::from(bp) / 100.0).unwrap(),
            included,
        }),
        (1..=500_i64, prop::option::of(1..=3_u32)).prop_map(|(cents, max_nights)| {
            TaxKind::PerPersonNight {
                amount: Cents::new(cents),
                max_nights,
            }
        }),
        (1..=5_000_i64).prop_map(|cents| TaxKind::PerStay {
            amount: Cents::new(cents)
        }),
    ];
    prop::collection::vec(tax, 0..=3).prop_map(|kinds| {
        let taxes = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Tax::parse(&format!("T{i}"), kind).unwrap())
            .collect();
        Taxes::parse(taxes).unwrap()
    })
}

fn policy() -> impl Strategy<Value = CancellationPolicy> {
    prop_oneof![
        Just(CancellationPolicy::HOUSE),
        Just(CancellationPolicy::NonRefundable),
        (0..=200_i64, 0..=100_i64, 0..=100_i64).prop_map(|(full, partial, percent)| {
            CancellationPolicy::refundable(full, partial.min(full), percent).unwrap()
        }),
    ]
}

/// The reservation and its whole history, with what the rule needs to remember.
struct Model {
    reservation: Reservation,
    history: Vec<ReservationEvent>,
    now: DateTime<Utc>,
    /// At the first change of the confirmed stay: the share a guest's cancellation
    /// would have given back then, and what it would have refunded, in cents.
    first_change: Option<(u8, Cents, Cents)>,
}

impl Model {
    fn new(policy: CancellationPolicy, taxes: Taxes) -> Self {
        let stay = StayDates::parse(first_day(), first_day() + Duration::days(2)).unwrap();
        let details = ReservationDetails {
            more_lines: Vec::new(),
            reservation_id: id(),
            hotel_id: HotelId::parse(1).unwrap(),
            room_type_id: RoomTypeId::parse(1).unwrap(),
            stay,
            rooms: RoomCount::parse(1).unwrap(),
            guest: aggregates::Personal::Clear(Guest::parse("Ana", "ana@example.com").unwrap()),
            channel: "web".to_owned(),
            total_cents: Cents::new(40_000),
            hold_expires_at: start_time() + Duration::minutes(15),
            created_at: start_time(),
            rate_plan_id: None,
            cancellation_policy: policy,
            guests: GuestCount::ONE,
            first_night_cents: Some(Cents::new(20_000)),
            currency: aggregates::Currency::EUR,
            taxes,
            block_code: None,
        };
        let due = details.total_due();
        let mut model = Self {
            reservation: Reservation::default(),
            history: Vec::new(),
            now: start_time(),
            first_change: None,
        };
        model.run(ReservationCommand::Place { details }).unwrap();
        let capture_due = model.capture_due(first_day());
        model
            .run(ReservationCommand::ApplyAuthorization {
                now: model.now,
                payment: Payment {
                    provider_txn_id: "txn_9".to_owned(),
                    amount_cents: due,
                },
                capture_due_at: capture_due,
            })
            .unwrap();
        assert_eq!(
            model.reservation.recorded_status(),
            Some(ReservationStatus::Confirmed)
        );
        model
    }

    fn details(&self) -> &ReservationDetails {
        self.reservation.details().unwrap()
    }

    fn lead(&self, arrival: NaiveDate) -> Duration {
        check_in_instant(arrival, TimeZone::UTC) - self.now
    }

    fn capture_due(&self, arrival: NaiveDate) -> DateTime<Utc> {
        self.details()
            .cancellation_policy
            .full_refund_until(check_in_instant(arrival, TimeZone::UTC))
            .map_or(self.now, |until| until.max(self.now))
    }

    fn guest_share_now(&self) -> u8 {
        let details = self.details();
        details
            .cancellation_policy
            .refund_percent(self.lead(details.stay.start()), CancelledBy::Guest)
    }

    fn charge(&self) -> Cents {
        self.reservation
            .ledger()
            .map_or(Cents::ZERO, |l| l.charge(self.details().total_due()))
    }

    fn run(
        &mut self,
        command: ReservationCommand,
    ) -> Result<Vec<ReservationEvent>, ReservationError> {
        let events = self.reservation.decide(command)?;
        for event in &events {
            self.reservation.apply_event(event);
        }
        self.history.extend(events.iter().cloned());
        Ok(events)
    }

    fn today(&self) -> NaiveDate {
        self.now.date_naive()
    }

    fn step(&mut self, op: &Op) {
        let confirmed = self.reservation.recorded_status() == Some(ReservationStatus::Confirmed);
        match *op {
            Op::Wait { hours } => self.now += Duration::hours(hours),
            Op::Change {
                offset,
                nights,
                per_night,
            } => {
                let start = first_day() + Duration::days(i64::from(offset));
                let stay =
                    StayDates::parse(start, start + Duration::days(i64::from(nights))).unwrap();
                if stay == self.details().stay || !confirmed {
                    return;
                }
                let before = (self.guest_share_now(), self.charge());
                let (now, capture_due_at) = (self.now, self.capture_due(start));
                let command = |increment| ReservationCommand::ChangeDates {
                    more_refund_percents_now: Vec::new(),
                    more_line_prices: Vec::new(),
                    stay,
                    total_cents: Cents::new(per_night * i64::from(nights)),
                    first_night_cents: Cents::new(per_night),
                    now,
                    refund_percent_now: before.0,
                    capture_due_at,
                    increment,
                };
                let first = command(None);
                let result = match self.run(first) {
                    Err(ReservationError::PaymentRequired { shortfall }) => {
                        let ledger = self.reservation.ledger().unwrap().into_owned();
                        assert!(shortfall > Cents::ZERO);
                        let granted = Increment {
                            amount_cents: shortfall,
                            gateway_key: authorization_key(id(), ledger.authorizations + 1),
                        };
                        let again = command(Some(granted));
                        self.run(again)
                    }
                    other => other,
                };
                let events = result.expect("a confirmed stay moves once its card covers it");
                assert!(events
                    .iter()
                    .any(|e| matches!(e, ReservationEvent::DatesChanged { .. })));
                if self.first_change.is_none() {
                    let (share, charge) = before;
                    self.first_change = Some((share, charge.percent(share), charge));
                }
            }
            Op::Capture => {
                let _ = self.run(ReservationCommand::CapturePayment { now: self.now });
            }
            Op::CheckIn => {
                let _ = self.run(ReservationCommand::CheckIn {
                    now: self.now,
                    today: self.today(),
                });
            }
            Op::NoShow => {
                let _ = self.run(ReservationCommand::RecordNoShow {
                    now: self.now,
                    today: self.today(),
                });
            }
            Op::Cancel { by_hotel } => {
                let by = if by_hotel {
                    CancelledBy::Hotel
                } else {
                    CancelledBy::Guest
                };
                let charge = self.charge();
                let was_captured = self.reservation.ledger().is_some_and(|l| l.is_captured());
                let share = self.guest_share_now();
                let result = self.run(ReservationCommand::Cancel {
                    now: self.now,
                    today: self.today(),
                    reason: "test".to_owned(),
                    by,
                    refund_percents: vec![if by_hotel { 100 } else { share }],
                });
                if let Ok(events) = result {
                    let recorded = match events.first() {
                        Some(ReservationEvent::ReservationCancelled { refund_cents, .. }) => {
                            *refund_cents
                        }
                        other => panic!("expected the cancellation first, got {other:?}"),
                    };
                    // What the guest is given back of what they stood to pay: released
                    // from the authorization before the capture, refunded after. Only
                    // the refunded part is the cancellation's refund_cents.
                    let refund = Cents::new(charge.get() - self.charge().get());
                    let refunded = if was_captured { refund } else { Cents::ZERO };
                    assert_eq!(recorded, refunded, "refund_cents is money returned");
                    assert!(refund <= charge, "{refund} back of {charge} charged");
                    if by_hotel {
                        assert_eq!(refund, charge, "the hotel gives everything back");
                    } else if self.details().taxes.is_empty() {
                        assert!(refund <= charge.percent(share), "beyond the policy");
                        if let Some((first_share, first_refund, first_charge)) = self.first_change {
                            assert!(
                                refund <= charge.percent(first_share),
                                "a larger share ({refund} of {charge}) than at the first change ({first_share}%)"
                            );
                            let charged_since =
                                Cents::new((charge.get() - first_charge.get()).max(0));
                            assert!(
                                refund.get() <= first_refund.get() + charged_since.get(),
                                "{refund} back, more than {first_refund} (at the first change) + {charged_since} (charged since)"
                            );
                        }
                    }
                }
            }
        }
        self.check();
    }

    /// The ledger balances, and every gateway key in the history is used once.
    fn check(&self) {
        if let Some(ledger) = self.reservation.ledger() {
            assert!(ledger.captured <= ledger.authorized, "{ledger:?}");
            assert!(ledger.refunded <= ledger.captured, "{ledger:?}");
            assert!(!(ledger.voided && ledger.is_captured()), "{ledger:?}");
            assert!(ledger.net() >= Cents::ZERO);
        }
        let mut keys = HashSet::new();
        for event in &self.history {
            let key = match event {
                ReservationEvent::AuthorizationIncreased { gateway_key, .. }
                | ReservationEvent::PaymentCaptured { gateway_key, .. }
                | ReservationEvent::PaymentVoided { gateway_key, .. }
                | ReservationEvent::PaymentRefunded { gateway_key, .. } => gateway_key,
                _ => continue,
            };
            assert!(keys.insert(key.clone()), "gateway key {key} used twice");
        }
        let mut replayed = Reservation::default();
        for event in &self.history {
            replayed.apply_event(event);
        }
        assert_eq!(replayed, self.reservation);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn a_paid_stays_money_balances_and_a_change_never_reopens_a_refund(
        policy in policy(),
        taxes in taxes(),
        ops in prop::collection::vec(op(), 1..=30),
    ) {
        let mut model = Model::new(policy, taxes);
        model.check();
        for op in &ops {
            model.step(op);
        }
    }
}
