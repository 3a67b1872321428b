//! `Reservation`: one guest's stay, from hold to a terminal state.
//!
//! Lifecycle: held → confirmed → cancelled; held → expired; held → declined (payment);
//! confirmed → checked in (on or after the arrival date, before the departure) →
//! checked out (the nights after the day the guest left go back to sale); confirmed →
//! no-show (from the arrival date; every night after the first goes back to sale).
//! The status transition is what guards every release of nights: a second cancel finds
//! the reservation already cancelled, is refused, and so releases nothing. A stay can be
//! cancelled until its arrival date has ended at the hotel; after that the guest has
//! arrived or has not come, and cancelling would give back nights already past.
//!
//! Payments: a reservation keeps at most one card authorization (the one that confirmed
//! it), and its [`Ledger`] (see [`ledger`]): authorized at confirmation, captured at the
//! policy's deadline (or at once for a stay that can no longer be refunded in full, or
//! at check-in), voided by a cancellation before that, refunded by the policy's share
//! after it; a no-show keeps the first night. Any other authorization the gateway
//! reports for it — one that arrives after the hold lapsed, after a cancellation or
//! decline, or a second one — is recorded as `LatePaymentRefunded`, once per provider
//! transaction, and the write side gives it back through the payment outbox. A
//! reservation is never resurrected by a late payment.
//!
//! A date change can no longer open a refund the stay had lost: the first change of a
//! confirmed stay records the share a guest's cancellation would have given back at that
//! moment (`refund_cap_percent`), and no later cancellation gives back a larger share,
//! whatever the new dates' lead time (docs/api.md states the rule).

use chrono::{DateTime, NaiveDate, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::cancellation::{CancellationPolicy, CancelledBy};
use crate::names::AggregateType;
use crate::personal::Personal;
use crate::taxes::{StayFigures, TaxedStay, Taxes};
use crate::types::{
    Cents, Currency, Guest, GuestCount, HotelId, RatePlanId, ReservationId, RoomCount, RoomTypeId,
    StayDates,
};
pub use ledger::{Ledger, Movement, PaymentStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReservationStatus {
    Held,
    Confirmed,
    Cancelled,
    Expired,
    Declined,
    /// The guest has arrived (staff checked them in).
    CheckedIn,
    /// The guest has left; nights after the day they left went back to sale.
    CheckedOut,
    /// The guest never came: the first night stays sold, the others went back to sale.
    NoShow,
}

impl ReservationStatus {
    pub const ALL: [Self; 8] = [
        Self::Held,
        Self::Confirmed,
        Self::Cancelled,
        Self::Expired,
        Self::Declined,
        Self::CheckedIn,
        Self::CheckedOut,
        Self::NoShow,
    ];

    /// The status named as [`Self::as_str`] writes it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == name)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Confirmed => "confirmed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Declined => "declined",
            Self::CheckedIn => "checked_in",
            Self::CheckedOut => "checked_out",
            Self::NoShow => "no_show",
        }
    }

    /// Does a reservation in this status occupy its nights? A checked-out one occupies
    /// those up to the day its guest left ([`Reservation::occupies`]).
    pub fn occupies_nights(&self) -> bool {
        matches!(self, Self::Held | Self::Confirmed | Self::CheckedIn)
    }
}

/// A card authorization as the gateway reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    pub provider_txn_id: String,
    pub amount_cents: Cents,
}

/// Everything a reservation is about, fixed when it is first held (dates may change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationDetails {
    pub reservation_id: ReservationId,
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    /// Sealed by the write side before it is stored (see [`crate::personal`]).
    pub guest: Personal<Guest>,
    pub channel: String,
    pub total_cents: Cents,
    pub hold_expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    /// The plan the stay was sold under; absent: the base rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_plan_id: Option<RatePlanId>,
    /// The policy as it was when the stay was sold: later changes to the plan do not
    /// reach it. Stays recorded before plans existed were sold under the house policy.
    #[serde(default = "house_policy")]
    pub cancellation_policy: CancellationPolicy,
    /// Guests per room (stays recorded before guests were counted: one).
    #[serde(
        default = "GuestCount::one",
        skip_serializing_if = "GuestCount::is_one"
    )]
    pub guests: GuestCount,
    /// The price of the first night (all rooms), the fee a no-show keeps. Stays recorded
    /// before it was kept read the total's average night ([`Self::first_night`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_night_cents: Option<Cents>,
    /// The hotel's currency when the stay was sold; every amount of the reservation is
    /// in its minor unit. Stays recorded before hotels had a currency: the euro.
    #[serde(default, skip_serializing_if = "Currency::is_euro")]
    pub currency: Currency,
    /// The hotel's taxes when the stay was sold (a later change does not reach it, as
    /// with its policy). Stays recorded before taxes existed: none.
    #[serde(default, skip_serializing_if = "Taxes::is_empty")]
    pub taxes: Taxes,
    /// The room types sold beyond the first, for the same stay. The first line is the
    /// fields above (`room_type_id`, `rooms`, `guests`, `rate_plan_id`,
    /// `cancellation_policy`), so every stay recorded before lines reads as one line;
    /// `total_cents` and `first_night_cents` are the whole reservation's (every line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_lines: Vec<Line>,
    /// The group block the stay was booked from (its rooms go back to the block, while
    /// the block holds, when the stay gives them up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_code: Option<crate::types::BlockCode>,
}

/// One room type of a reservation: its rooms, guests per room, plan and policy, and its
/// price over the stay (every room and night). See [`ReservationDetails::lines`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub room_type_id: RoomTypeId,
    pub rooms: RoomCount,
    #[serde(
        default = "GuestCount::one",
        skip_serializing_if = "GuestCount::is_one"
    )]
    pub guests: GuestCount,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_plan_id: Option<RatePlanId>,
    #[serde(default = "house_policy")]
    pub cancellation_policy: CancellationPolicy,
    pub total_cents: Cents,
    /// The price of the line's first night (all its rooms).
    pub first_night_cents: Cents,
}

/// A line's prices after a date change (see `ReservationEvent::DatesChanged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinePrice {
    pub total_cents: Cents,
    pub first_night_cents: Cents,
}

impl ReservationDetails {
    /// Every line of the reservation, the first one first: one room type each, the
    /// lines' `total_cents` adding up to the reservation's.
    pub fn lines(&self) -> Vec<Line> {
        let more: i64 = self.more_lines.iter().map(|l| l.total_cents.get()).sum();
        let more_first: i64 = self
            .more_lines
            .iter()
            .map(|l| l.first_night_cents.get())
            .sum();
        let mut lines = Vec::with_capacity(1 + self.more_lines.len());
        lines.push(Line {
            room_type_id: self.room_type_id,
            rooms: self.rooms,
            guests: self.guests,
            rate_plan_id: self.rate_plan_id,
            cancellation_policy: self.cancellation_policy,
            total_cents: Cents::new(self.total_cents.get() - more),
            first_night_cents: Cents::new(self.first_night().get() - more_first),
        });
        lines.extend(self.more_lines.iter().cloned());
        lines
    }

    /// The room types the reservation holds nights of, the first line's first.
    pub fn room_types(&self) -> impl Iterator<Item = RoomTypeId> + '_ {
        std::iter::once(self.room_type_id).chain(self.more_lines.iter().map(|l| l.room_type_id))
    }

    /// Rooms of every line.
    pub fn all_rooms(&self) -> u32 {
        self.rooms.get() + self.more_lines.iter().map(|l| l.rooms.get()).sum::<u32>()
    }

    /// What the hotel keeps of `room` (the room price charged) when each line gives
    /// back its share of `percents` (in line order; one percent for every line when
    /// fewer are given): the charge split over the lines by their prices, the last line
    /// taking what rounding leaves.
    pub fn room_kept(&self, room: Cents, percents: &[u8]) -> Cents {
        let percent_of = |i: usize| percents.get(i).or(percents.last()).copied().unwrap_or(0);
        if self.more_lines.is_empty() || self.total_cents.get() <= 0 {
            return Cents::new(room.get() - room.percent(percent_of(0)).get());
        }
        let lines = self.lines();
        let total = i128::from(self.total_cents.get());
        let mut shared = 0i64;
        let mut kept = 0i64;
        for (i, line) in lines.iter().enumerate() {
            let share = if i + 1 == lines.len() {
                room.get() - shared
            } else {
                let share = i128::from(room.get()) * i128::from(line.total_cents.get()) / total;
                i64::try_from(share).unwrap_or(0)
            };
            shared += share;
            let share = Cents::new(share);
            kept += share.get() - share.percent(percent_of(i)).get();
        }
        Cents::new(kept)
    }

    /// The rooms and guests per room taxes count: a line's own, or, over several
    /// lines, every guest as one room's (taxes count persons, rooms times guests).
    fn tax_persons(&self) -> (u32, u32) {
        if self.more_lines.is_empty() {
            return (self.rooms.get(), self.guests.get());
        }
        let persons = self.rooms.get() * self.guests.get()
            + self
                .more_lines
                .iter()
                .map(|l| l.rooms.get() * l.guests.get())
                .sum::<u32>();
        (1, persons)
    }

    /// The stay's taxes and what the guest owes for it: the room price and every tax
    /// not included in it.
    pub fn taxed(&self) -> TaxedStay {
        self.taxed_for(&self.stay, self.total_cents)
    }

    /// What the guest owes in all: [`Self::taxed`]'s `total_due`.
    pub fn total_due(&self) -> Cents {
        self.taxed().total_due
    }

    /// The taxes and total due of the same rooms and guests on `stay` at `room_total`
    /// (a date change's new price). Amounts too large to add up (never sold: prices are
    /// bounded far below) count the room price alone.
    pub fn taxed_for(&self, stay: &StayDates, room_total: Cents) -> TaxedStay {
        let (rooms, guests) = self.tax_persons();
        self.taxes.due_on(StayFigures {
            room_total,
            nights: stay.night_count(),
            rooms,
            guests,
        })
    }

    /// What the guest owes when the hotel keeps `room_kept` of the room price and no
    /// night was stayed (a cancellation, a no-show): taxes levied on the price follow
    /// the part kept; those per person and night, and per stay, are not due.
    pub fn due_keeping(&self, room_kept: Cents) -> Cents {
        let (rooms, guests) = self.tax_persons();
        self.taxes
            .due_on(StayFigures {
                room_total: room_kept,
                nights: 0,
                rooms,
                guests,
            })
            .total_due
    }

    /// The price of the stay's first night (all rooms).
    pub fn first_night(&self) -> Cents {
        self.first_night_cents.unwrap_or_else(|| {
            let nights = i64::from(self.stay.night_count().max(1));
            Cents::new(self.total_cents.get() / nights)
        })
    }
}

fn house_policy() -> CancellationPolicy {
    CancellationPolicy::HOUSE
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
    refund_cents: Cents,
    /// Checked out: the first of the stay's nights that went back to sale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    released_from: Option<NaiveDate>,
    /// The money of a paid stay; absent in states stored before the ledger existed,
    /// which [`Self::ledger`] reads from `payment` and `refund_cents`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ledger: Option<Ledger>,
    /// The largest share (percent) a guest's cancellation may give back, once the dates
    /// of the confirmed stay were changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refund_cap_percent: Option<u8>,
    /// The same cap for each line beyond the first (see `ReservationDetails::lines`), in
    /// line order: each line keeps its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    more_refund_caps: Vec<u8>,
    /// A move to dearer dates whose new nights are held while the card is asked for
    /// the difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending_move: Option<PendingMove>,
}

/// The new dates of a move being paid for, and until when their nights are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingMove {
    pub stay: StayDates,
    pub hold_expires_at: DateTime<Utc>,
}

/// An increment of the authorization the gateway granted, for a move to dearer nights.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Increment {
    pub amount_cents: Cents,
    /// The gateway key it was granted under ([`ledger::authorization_key`]).
    pub gateway_key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReservationCommand {
    /// Record a new reservation whose nights are being held.
    Place { details: ReservationDetails },
    /// Confirm the hold without a payment (staff).
    Confirm { now: DateTime<Utc> },
    /// The gateway reported an authorization for this reservation: it confirms a live
    /// hold (to be captured at `capture_due_at`, at once if that has passed), and is
    /// given back in every other case.
    ApplyAuthorization {
        now: DateTime<Utc>,
        payment: Payment,
        capture_due_at: DateTime<Utc>,
    },
    /// Capture the authorization if its capture is due by `now` (the capture worker).
    CapturePayment { now: DateTime<Utc> },
    /// Hold the nights a dearer move of a confirmed stay enters, until
    /// `hold_expires_at`, while the card is asked for the difference.
    HoldDateChange {
        stay: StayDates,
        hold_expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    },
    /// The card refused (or the move failed): the nights held for it go back.
    ReleaseDateChange { now: DateTime<Utc> },
    /// Record an increment the gateway granted whose date change did not happen (the
    /// nights went meanwhile): the ledger must know what the card is authorized for.
    RecordIncrement {
        now: DateTime<Utc>,
        increment: Increment,
    },
    /// The gateway declined the card: the hold ends and its nights return to sale.
    DeclinePayment {
        now: DateTime<Utc>,
        provider_txn_id: Option<String>,
    },
    /// Cancel, giving back `refund_percents` of what the guest is charged for each line
    /// (its policy's share at this lead time, in line order; a guest's is capped after a
    /// date change). `today` is
    /// the date at the hotel: once the arrival date has ended there, the stay can no
    /// longer be cancelled (the guest has arrived, or has not come).
    Cancel {
        now: DateTime<Utc>,
        today: NaiveDate,
        reason: String,
        by: CancelledBy,
        refund_percents: Vec<u8>,
    },
    /// Record that the hold lapsed (the sweeper, or whoever finds it lapsed).
    Expire { now: DateTime<Utc> },
    /// Record that the guest's personal data was erased (its key destroyed), in
    /// whatever state the reservation is; once recorded, a repeat changes nothing.
    EraseGuest { now: DateTime<Utc> },
    /// The guest has arrived: a confirmed stay, from its arrival date to the day before
    /// its departure, `today` being the date at the hotel.
    CheckIn {
        now: DateTime<Utc>,
        today: NaiveDate,
    },
    /// The guest leaves a checked-in stay on `today` (the date at the hotel): the
    /// stay's nights after today go back to sale.
    CheckOut {
        now: DateTime<Utc>,
        today: NaiveDate,
    },
    /// The guest of a confirmed stay never came: staff (or the no-show worker) record
    /// it once the arrival date has come at the hotel (`today`); every night after the
    /// first goes back to sale.
    RecordNoShow {
        now: DateTime<Utc>,
        today: NaiveDate,
    },
    /// Move the stay to new dates at a new total price. For a paid stay:
    /// `refund_percent_now` is the share a guest's cancellation would give back now
    /// (under the old dates), `capture_due_at` the capture deadline of the new dates,
    /// and `increment` what the gateway granted toward a dearer price (without enough,
    /// the change is refused with [`ReservationError::PaymentRequired`]).
    ChangeDates {
        stay: StayDates,
        total_cents: Cents,
        first_night_cents: Cents,
        /// The new price of each line beyond the first (see `ReservationDetails::lines`).
        more_line_prices: Vec<LinePrice>,
        now: DateTime<Utc>,
        refund_percent_now: u8,
        /// `refund_percent_now` of each line beyond the first, by its own policy.
        more_refund_percents_now: Vec<u8>,
        capture_due_at: DateTime<Utc>,
        increment: Option<Increment>,
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
        /// When the authorization is to be captured. Absent with a payment: confirmed
        /// before the ledger existed, and captured at once (see [`ledger`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capture_due_at: Option<DateTime<Utc>>,
    },
    ReservationCancelled {
        cancelled_at: DateTime<Utc>,
        /// What the canceller wrote: free text, so personal data, sealed like the
        /// guest's name.
        reason: Personal<String>,
        by: CancelledBy,
        /// What is given back of the payment (0 when nothing was paid).
        #[serde(default)]
        refund_cents: Cents,
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
        amount_cents: Cents,
        refunded_at: DateTime<Utc>,
    },
    HoldExpired {
        expired_at: DateTime<Utc>,
    },
    DatesChanged {
        stay: StayDates,
        total_cents: Cents,
        changed_at: DateTime<Utc>,
        /// The new first night's price (absent in changes recorded before it was kept).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_night_cents: Option<Cents>,
        /// A confirmed stay: the largest share a guest's cancellation may give back from
        /// now on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refund_cap_percent: Option<u8>,
        /// An uncaptured authorization: its new capture deadline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capture_due_at: Option<DateTime<Utc>>,
        /// The new prices of each line beyond the first, in line order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more_line_prices: Vec<LinePrice>,
        /// `refund_cap_percent` of each line beyond the first, in line order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        more_refund_caps: Vec<u8>,
    },
    /// The nights a dearer move enters are held (until `hold_expires_at`) while the card
    /// is asked for the difference; the stay itself is unchanged.
    DateChangeHeld {
        stay: StayDates,
        hold_expires_at: DateTime<Utc>,
        held_at: DateTime<Utc>,
    },
    /// The nights held for a move that did not happen went back to sale.
    DateChangeReleased {
        released_at: DateTime<Utc>,
    },
    /// The guest's personal data was erased: the key that sealed it is destroyed, and
    /// the reservation carries it as erased from now on. It records no personal data
    /// itself; the rest of the reservation (its stay, status and money) is unchanged.
    GuestErased {
        erased_at: DateTime<Utc>,
    },
    /// The gateway increased the authorization by `amount_cents` (a dearer move).
    AuthorizationIncreased {
        amount_cents: Cents,
        gateway_key: String,
        authorized_at: DateTime<Utc>,
    },
    /// `amount_cents` of the authorization was taken (the rest of it, if any, stays
    /// authorized until the next capture or a void).
    PaymentCaptured {
        amount_cents: Cents,
        gateway_key: String,
        captured_at: DateTime<Utc>,
    },
    /// The authorization was released before anything was captured: nothing charged.
    PaymentVoided {
        gateway_key: String,
        voided_at: DateTime<Utc>,
    },
    /// `amount_cents` of what was captured goes back to the card.
    PaymentRefunded {
        amount_cents: Cents,
        gateway_key: String,
        refunded_at: DateTime<Utc>,
    },
    /// The guest arrived and was checked in.
    GuestCheckedIn {
        checked_in_at: DateTime<Utc>,
    },
    /// The guest left. The stay's nights from `released_from` on (the day after they
    /// left) went back to sale; none when they left on or after the last night.
    GuestCheckedOut {
        checked_out_at: DateTime<Utc>,
        released_from: NaiveDate,
    },
    /// The guest never came. The stay's nights from `released_from` on (every night
    /// after the first) went back to sale.
    NoShowRecorded {
        recorded_at: DateTime<Utc>,
        released_from: NaiveDate,
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
    #[error("the reservation is {}", status.as_str())]
    InvalidState { status: ReservationStatus },
    #[error("the hold lapsed at {expired_at}")]
    HoldExpired { expired_at: DateTime<Utc> },
    #[error("the hold has not lapsed yet")]
    HoldStillLive,
    #[error("the new dates are the current dates")]
    SameDates,
    #[error("the arrival date {arrival} has ended at the hotel")]
    ArrivalEnded { arrival: NaiveDate },
    #[error("the stay begins on {arrival}")]
    TooEarly { arrival: NaiveDate },
    #[error("the stay ended on {departure}")]
    StayEnded { departure: NaiveDate },
    #[error("the new price needs {shortfall} more cents authorized")]
    PaymentRequired { shortfall: Cents },
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

    /// Whether the reservation holds its room(s) on `night`, one of its stay's: while it
    /// occupies its nights, every one; checked out or a no-show, those before the first
    /// released.
    pub fn occupies(&self, night: NaiveDate) -> bool {
        match self.status {
            Some(ReservationStatus::CheckedOut | ReservationStatus::NoShow) => {
                self.released_from.is_some_and(|from| night < from)
            }
            Some(status) => status.occupies_nights(),
            None => false,
        }
    }

    /// Checked out: the first of the stay's nights that went back to sale.
    pub fn released_from(&self) -> Option<NaiveDate> {
        self.released_from
    }

    /// What the cancellation gave back, in cents (0 unless cancelled after payment).
    pub fn refund_cents(&self) -> Cents {
        self.refund_cents
    }

    /// The ledger of a paid stay; `None` while nothing was authorized. A state stored
    /// before the ledger existed reads as its payment captured at confirmation, less
    /// what its cancellation refunded.
    pub fn ledger(&self) -> Option<std::borrow::Cow<'_, Ledger>> {
        match (&self.ledger, &self.payment) {
            (Some(ledger), _) => Some(std::borrow::Cow::Borrowed(ledger)),
            (None, Some(payment)) => {
                Some(std::borrow::Cow::Owned(Ledger::captured_at_confirmation(
                    payment.provider_txn_id.clone(),
                    payment.amount_cents,
                    self.refund_cents,
                )))
            }
            (None, None) => None,
        }
    }

    /// Where the reservation's money stands.
    pub fn payment_status(&self) -> PaymentStatus {
        self.ledger().map_or(PaymentStatus::None, |l| l.status())
    }

    /// When the authorization is due to be captured, while it is neither captured nor
    /// voided.
    pub fn capture_due_at(&self) -> Option<DateTime<Utc>> {
        self.ledger()
            .filter(|l| l.is_open() && !l.is_captured())
            .and_then(|l| l.capture_due_at)
    }

    /// A dearer move being paid for, if its hold has not lapsed by `now`.
    pub fn pending_move(&self, now: DateTime<Utc>) -> Option<PendingMove> {
        self.pending_move.filter(|p| p.hold_expires_at > now)
    }

    /// A dearer move recorded as being paid for, lapsed or not.
    pub fn recorded_pending_move(&self) -> Option<PendingMove> {
        self.pending_move
    }

    /// After a change of a confirmed stay's dates: the largest share a guest's
    /// cancellation may give back.
    pub fn refund_cap_percent(&self) -> Option<u8> {
        self.refund_cap_percent
    }

    /// The cap on line `line`'s share a guest's cancellation gives back (100 before any
    /// date change of the confirmed stay).
    fn refund_cap_of(&self, line: usize) -> u8 {
        let cap = match line {
            0 => self.refund_cap_percent,
            i => self.more_refund_caps.get(i - 1).copied(),
        };
        cap.unwrap_or(100)
    }

    fn ledger_mut(&mut self) -> Option<&mut Ledger> {
        if self.ledger.is_none() {
            self.ledger = self.ledger().map(std::borrow::Cow::into_owned);
        }
        self.ledger.as_mut()
    }

    /// The events of `movements` of this reservation's payment, at `now`.
    fn money(movements: Vec<Movement>, now: DateTime<Utc>) -> Vec<ReservationEvent> {
        movements
            .into_iter()
            .map(|m| match m {
                Movement::Capture {
                    amount,
                    gateway_key,
                } => ReservationEvent::PaymentCaptured {
                    amount_cents: amount,
                    gateway_key,
                    captured_at: now,
                },
                Movement::Void { gateway_key } => ReservationEvent::PaymentVoided {
                    gateway_key,
                    voided_at: now,
                },
                Movement::Refund {
                    amount,
                    gateway_key,
                } => ReservationEvent::PaymentRefunded {
                    amount_cents: amount,
                    gateway_key,
                    refunded_at: now,
                },
            })
            .collect()
    }

    /// The events that leave the hotel keeping `keep` of the payment (none unpaid).
    fn settle(
        &self,
        details: &ReservationDetails,
        keep: Cents,
        now: DateTime<Utc>,
    ) -> Vec<ReservationEvent> {
        match self.ledger() {
            Some(ledger) => Self::money(ledger.settle(details.reservation_id, keep), now),
            None => Vec::new(),
        }
    }

    /// The capture of an open, uncaptured authorization (check-in, or its deadline).
    fn capture_now(
        &self,
        details: &ReservationDetails,
        now: DateTime<Utc>,
    ) -> Vec<ReservationEvent> {
        match self.ledger() {
            Some(l) if l.is_open() && !l.is_captured() => {
                self.settle(details, l.charge(details.total_due()), now)
            }
            _ => Vec::new(),
        }
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
            ReservationCommand::Confirm { now } => {
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
                        payment: None,
                        capture_due_at: None,
                    }]),
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::ApplyAuthorization {
                now,
                payment,
                capture_due_at,
            } => {
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
                    ReservationStatus::Held if payment.amount_cents == details.total_due() => {
                        let amount = payment.amount_cents;
                        let mut events = vec![ReservationEvent::ReservationConfirmed {
                            confirmed_at: now,
                            payment: Some(payment),
                            capture_due_at: Some(capture_due_at),
                        }];
                        // Already past the full-refund deadline (or non-refundable):
                        // the stay is owed now.
                        if capture_due_at <= now {
                            events.push(ReservationEvent::PaymentCaptured {
                                amount_cents: amount,
                                gateway_key: ledger::capture_key(details.reservation_id, 1),
                                captured_at: now,
                            });
                        }
                        Ok(events)
                    }
                    // A wrong amount, or any state but a live hold: nothing to pay for.
                    _ => Ok(vec![give_back]),
                }
            }
            ReservationCommand::CapturePayment { now } => {
                let (details, _) = self.existing()?;
                match self.capture_due_at() {
                    Some(due) if due <= now => Ok(self.capture_now(details, now)),
                    _ => Ok(Vec::new()),
                }
            }
            ReservationCommand::HoldDateChange {
                stay,
                hold_expires_at,
                now,
            } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Confirmed if details.stay == stay => {
                        Err(ReservationError::SameDates)
                    }
                    // Held already for these dates (a retry): nothing to add.
                    ReservationStatus::Confirmed
                        if self.pending_move(now).is_some_and(|p| p.stay == stay) =>
                    {
                        Ok(Vec::new())
                    }
                    ReservationStatus::Confirmed => Ok(vec![ReservationEvent::DateChangeHeld {
                        stay,
                        hold_expires_at,
                        held_at: now,
                    }]),
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::ReleaseDateChange { now } => {
                self.existing()?;
                Ok(match self.pending_move {
                    Some(_) => vec![ReservationEvent::DateChangeReleased { released_at: now }],
                    None => Vec::new(),
                })
            }
            ReservationCommand::RecordIncrement { now, increment } => {
                let (details, _) = self.existing()?;
                let expected = self.ledger().map(|l| {
                    ledger::authorization_key(details.reservation_id, l.authorizations + 1)
                });
                if expected.as_deref() == Some(increment.gateway_key.as_str()) {
                    Ok(vec![ReservationEvent::AuthorizationIncreased {
                        amount_cents: increment.amount_cents,
                        gateway_key: increment.gateway_key,
                        authorized_at: now,
                    }])
                } else {
                    // Recorded already (or not this ledger's next): nothing to add.
                    Ok(Vec::new())
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
                today,
                reason,
                by,
                refund_percents,
            } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Err(ReservationError::InvalidState {
                            status: ReservationStatus::Expired,
                        })
                    }
                    ReservationStatus::Held | ReservationStatus::Confirmed
                        if today > details.stay.start() =>
                    {
                        Err(ReservationError::ArrivalEnded {
                            arrival: details.stay.start(),
                        })
                    }
                    ReservationStatus::Held | ReservationStatus::Confirmed => {
                        // Each line's share, capped by its own cap after a date change.
                        let percents: Vec<u8> = match by {
                            CancelledBy::Hotel => vec![100],
                            CancelledBy::Guest => refund_percents
                                .iter()
                                .enumerate()
                                .map(|(i, p)| (*p).min(self.refund_cap_of(i)))
                                .collect(),
                        };
                        let ledger = self.ledger();
                        let taxed = details.taxed();
                        let charge = ledger
                            .as_ref()
                            .map_or(Cents::ZERO, |l| l.charge(taxed.total_due));
                        // The policy's share is of the room price (what the charge
                        // holds beyond the added taxes); taxes follow what is kept.
                        let room = Cents::new((charge.get() - taxed.added().get()).max(0));
                        let room_kept = details.room_kept(room, &percents);
                        let keep = details.due_keeping(room_kept).min(charge);
                        let given_back = Cents::new(charge.get() - keep.get());
                        // A refund is money returned, and only money taken can be: before
                        // the capture, what the guest does not owe is released from the
                        // authorization (voided whole, or captured only in the part kept),
                        // never refunded.
                        let refund_cents = if ledger.as_ref().is_some_and(|l| l.is_captured()) {
                            given_back
                        } else {
                            Cents::ZERO
                        };
                        let mut events = vec![ReservationEvent::ReservationCancelled {
                            cancelled_at: now,
                            reason: Personal::Clear(reason),
                            by,
                            refund_cents,
                        }];
                        events.extend(self.settle(details, keep, now));
                        Ok(events)
                    }
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::EraseGuest { now } => {
                let (details, _) = self.existing()?;
                Ok(if details.guest.is_erased() {
                    Vec::new()
                } else {
                    vec![ReservationEvent::GuestErased { erased_at: now }]
                })
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
            ReservationCommand::CheckIn { now, today } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Confirmed if today < details.stay.start() => {
                        Err(ReservationError::TooEarly {
                            arrival: details.stay.start(),
                        })
                    }
                    ReservationStatus::Confirmed if today >= details.stay.end() => {
                        Err(ReservationError::StayEnded {
                            departure: details.stay.end(),
                        })
                    }
                    ReservationStatus::Confirmed => {
                        // The guest is here: the stay is owed (seed: capture at the
                        // deadline or at check-in, whichever comes first).
                        let mut events =
                            vec![ReservationEvent::GuestCheckedIn { checked_in_at: now }];
                        events.extend(self.capture_now(details, now));
                        Ok(events)
                    }
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::RecordNoShow { now, today } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Confirmed if today < details.stay.start() => {
                        Err(ReservationError::TooEarly {
                            arrival: details.stay.start(),
                        })
                    }
                    ReservationStatus::Confirmed => {
                        let mut events = vec![ReservationEvent::NoShowRecorded {
                            recorded_at: now,
                            released_from: details
                                .stay
                                .start()
                                .succ_opt()
                                .unwrap_or(details.stay.end())
                                .min(details.stay.end()),
                        }];
                        // The fee: each line's first night, or the line's whole stay if
                        // it could never be refunded; never more than the guest is
                        // charged.
                        let fee = Cents::new(
                            details
                                .lines()
                                .iter()
                                .map(|line| match line.cancellation_policy {
                                    CancellationPolicy::NonRefundable => line.total_cents.get(),
                                    CancellationPolicy::Refundable { .. } => {
                                        line.first_night_cents.get()
                                    }
                                })
                                .sum(),
                        );
                        if let Some(ledger) = self.ledger() {
                            let keep = details
                                .due_keeping(fee)
                                .min(ledger.charge(details.total_due()));
                            events.extend(self.settle(details, keep, now));
                        }
                        Ok(events)
                    }
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::CheckOut { now, today } => {
                let (details, status) = self.existing()?;
                match status {
                    // Checked in on a day of the stay, so `today` is at least its
                    // arrival; the nights after it go back.
                    ReservationStatus::CheckedIn => Ok(vec![ReservationEvent::GuestCheckedOut {
                        checked_out_at: now,
                        released_from: today
                            .succ_opt()
                            .unwrap_or(today)
                            .clamp(details.stay.start(), details.stay.end()),
                    }]),
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
            ReservationCommand::ChangeDates {
                stay,
                total_cents,
                first_night_cents,
                more_line_prices,
                now,
                refund_percent_now,
                more_refund_percents_now,
                capture_due_at,
                increment,
            } => {
                let (details, status) = self.existing()?;
                match status {
                    ReservationStatus::Held if details.hold_expires_at <= now => {
                        Err(ReservationError::HoldExpired {
                            expired_at: details.hold_expires_at,
                        })
                    }
                    _ if details.stay == stay
                        && matches!(
                            status,
                            ReservationStatus::Held | ReservationStatus::Confirmed
                        ) =>
                    {
                        Err(ReservationError::SameDates)
                    }
                    ReservationStatus::Held => Ok(vec![ReservationEvent::DatesChanged {
                        stay,
                        total_cents,
                        changed_at: now,
                        first_night_cents: Some(first_night_cents),
                        refund_cap_percent: None,
                        capture_due_at: None,
                        more_line_prices,
                        more_refund_caps: Vec::new(),
                    }]),
                    ReservationStatus::Confirmed => self.move_confirmed(
                        details,
                        stay,
                        total_cents,
                        first_night_cents,
                        more_line_prices,
                        now,
                        (refund_percent_now, more_refund_percents_now),
                        capture_due_at,
                        increment,
                    ),
                    status => Err(ReservationError::InvalidState { status }),
                }
            }
        }
    }

    /// A confirmed stay moves: the refund cap is set (or kept, if lower), and the money
    /// follows the new price — more authorized first, then, once captured, the
    /// difference refunded or taken; before capture the new price is what will be
    /// captured, at the new deadline (at once if a full refund is no longer possible).
    #[allow(clippy::too_many_arguments)]
    fn move_confirmed(
        &self,
        details: &ReservationDetails,
        stay: StayDates,
        total_cents: Cents,
        first_night_cents: Cents,
        more_line_prices: Vec<LinePrice>,
        now: DateTime<Utc>,
        (refund_percent_now, more_refund_percents_now): (u8, Vec<u8>),
        capture_due_at: DateTime<Utc>,
        increment: Option<Increment>,
    ) -> Result<Vec<ReservationEvent>, ReservationError> {
        // Each line's cap: the share its own policy gives back now, never above the
        // one it had.
        let cap = refund_percent_now.min(self.refund_cap_of(0));
        let more_caps: Vec<u8> = more_refund_percents_now
            .iter()
            .enumerate()
            .map(|(i, p)| (*p).min(self.refund_cap_of(i + 1)))
            .collect();
        let lowest = more_caps.iter().copied().fold(cap, u8::min);
        let mut events = Vec::new();
        let mut due = None;
        let mut money = Vec::new();
        if let Some(mut ledger) = self.ledger().map(std::borrow::Cow::into_owned) {
            if ledger.is_open() {
                let next_key =
                    ledger::authorization_key(details.reservation_id, ledger.authorizations + 1);
                let granted = increment.filter(|i| i.gateway_key == next_key);
                let owed = details.taxed_for(&stay, total_cents).total_due;
                let shortfall = ledger.shortfall(owed);
                let covered = granted.as_ref().map_or(Cents::ZERO, |i| i.amount_cents);
                if shortfall > covered {
                    return Err(ReservationError::PaymentRequired { shortfall });
                }
                if let Some(granted) = granted {
                    ledger.increase(granted.amount_cents);
                    events.push(ReservationEvent::AuthorizationIncreased {
                        amount_cents: granted.amount_cents,
                        gateway_key: granted.gateway_key,
                        authorized_at: now,
                    });
                }
                let capture_at = if lowest < 100 { now } else { capture_due_at };
                if ledger.is_captured() || capture_at <= now {
                    money = Self::money(ledger.settle(details.reservation_id, owed), now);
                } else {
                    due = Some(capture_at);
                }
            }
        }
        events.push(ReservationEvent::DatesChanged {
            stay,
            total_cents,
            changed_at: now,
            first_night_cents: Some(first_night_cents),
            refund_cap_percent: Some(cap),
            capture_due_at: due,
            more_line_prices,
            more_refund_caps: more_caps,
        });
        events.extend(money);
        Ok(events)
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
                capture_due_at,
            } => {
                self.status = Some(ReservationStatus::Confirmed);
                self.updated_at = Some(*confirmed_at);
                self.payment = payment.clone();
                // Without a deadline, a payment is one confirmed before the ledger:
                // `ledger()` reads it from `payment`.
                self.ledger = match (payment, capture_due_at) {
                    (Some(p), Some(due)) => Some(Ledger::authorized(
                        p.provider_txn_id.clone(),
                        p.amount_cents,
                        *due,
                    )),
                    _ => None,
                };
            }
            ReservationEvent::ReservationCancelled {
                cancelled_at,
                refund_cents,
                ..
            } => {
                self.status = Some(ReservationStatus::Cancelled);
                self.updated_at = Some(*cancelled_at);
                // Cancellations recorded before a refund meant money returned carried
                // the policy's share even when nothing had been captured (the
                // authorization was voided): read those as the nothing they returned.
                // States from before the ledger keep theirs (their payment was taken
                // at confirmation, and the ledger is read from it).
                self.refund_cents = match &self.ledger {
                    Some(ledger) if !ledger.is_captured() => Cents::ZERO,
                    _ => *refund_cents,
                };
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
            ReservationEvent::GuestCheckedIn { checked_in_at } => {
                self.status = Some(ReservationStatus::CheckedIn);
                self.updated_at = Some(*checked_in_at);
            }
            ReservationEvent::GuestCheckedOut {
                checked_out_at,
                released_from,
            } => {
                self.status = Some(ReservationStatus::CheckedOut);
                self.updated_at = Some(*checked_out_at);
                self.released_from = Some(*released_from);
            }
            ReservationEvent::NoShowRecorded {
                recorded_at,
                released_from,
            } => {
                self.status = Some(ReservationStatus::NoShow);
                self.updated_at = Some(*recorded_at);
                self.released_from = Some(*released_from);
            }
            ReservationEvent::DatesChanged {
                stay,
                total_cents,
                changed_at,
                first_night_cents,
                refund_cap_percent,
                capture_due_at,
                more_line_prices,
                more_refund_caps,
            } => {
                if !more_refund_caps.is_empty() {
                    self.more_refund_caps.clone_from(more_refund_caps);
                }
                if let Some(details) = self.details.as_mut() {
                    details.stay = *stay;
                    details.total_cents = *total_cents;
                    details.first_night_cents = *first_night_cents;
                    for (line, price) in details.more_lines.iter_mut().zip(more_line_prices) {
                        line.total_cents = price.total_cents;
                        line.first_night_cents = price.first_night_cents;
                    }
                }
                if refund_cap_percent.is_some() {
                    self.refund_cap_percent = *refund_cap_percent;
                }
                if let (Some(due), Some(ledger)) = (capture_due_at, self.ledger_mut()) {
                    ledger.capture_due_at = Some(*due);
                }
                self.pending_move = None;
                self.updated_at = Some(*changed_at);
            }
            ReservationEvent::DateChangeHeld {
                stay,
                hold_expires_at,
                held_at,
            } => {
                self.pending_move = Some(PendingMove {
                    stay: *stay,
                    hold_expires_at: *hold_expires_at,
                });
                self.updated_at = Some(*held_at);
            }
            ReservationEvent::DateChangeReleased { released_at } => {
                self.pending_move = None;
                self.updated_at = Some(*released_at);
            }
            ReservationEvent::GuestErased { erased_at } => {
                if let Some(details) = self.details.as_mut() {
                    details.guest = Personal::Erased;
                }
                self.updated_at = Some(*erased_at);
            }
            ReservationEvent::AuthorizationIncreased {
                amount_cents,
                authorized_at,
                ..
            } => {
                if let Some(ledger) = self.ledger_mut() {
                    ledger.increase(*amount_cents);
                }
                self.updated_at = Some(*authorized_at);
            }
            ReservationEvent::PaymentCaptured {
                amount_cents,
                gateway_key,
                captured_at,
            } => {
                self.move_money(Movement::Capture {
                    amount: *amount_cents,
                    gateway_key: gateway_key.clone(),
                });
                self.updated_at = Some(*captured_at);
            }
            ReservationEvent::PaymentVoided {
                gateway_key,
                voided_at,
            } => {
                self.move_money(Movement::Void {
                    gateway_key: gateway_key.clone(),
                });
                self.updated_at = Some(*voided_at);
            }
            ReservationEvent::PaymentRefunded {
                amount_cents,
                gateway_key,
                refunded_at,
            } => {
                self.move_money(Movement::Refund {
                    amount: *amount_cents,
                    gateway_key: gateway_key.clone(),
                });
                self.updated_at = Some(*refunded_at);
            }
        }
    }
}

impl Reservation {
    fn move_money(&mut self, movement: Movement) {
        if let Some(ledger) = self.ledger_mut() {
            ledger.apply(&movement);
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
/// derivable from every stream id (see [`crate::streams`]).
pub use crate::streams::reservation_stream_id;

pub mod ledger;

#[cfg(test)]
mod tests;
