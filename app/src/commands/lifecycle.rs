//! The reservation lifecycle: hold, cancel, change dates, confirm, expire, check in and
//! out, no-show.
//!
//! A hold creates a reservation and takes its nights; every other command acts on an
//! existing reservation and has one shape ([`ReservationCommand`], run by
//! `CommandService::run`): claim the idempotency key, load the reservation (locked,
//! under the pessimistic strategies) and its nights in night order, let the pure domain
//! decide, append, and record the outcome — all in one transaction, retried whole on a
//! lost race.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aggregates::booking::{self, HoldRequest};
use aggregates::{
    CancelledBy, Cents, CommandName, Decision, Hotel, HotelId, Increment, Rejection, Reservation,
    ReservationEvent, ReservationId, RoomTypeId, StayDates, StayNights, TimeZone,
};
use chrono::{DateTime, NaiveDate, Utc};
use futures::future::BoxFuture;
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::answers::StoredAnswer;
use super::group::Hold;
use super::{Caller, CommandService, Outcome, ReservationView};
use store::error::CommandError;
use store::privacy::Privacy;
use store::write::{
    idempotency, mail, outbox, settle, with_retries, AttemptError, EventMetadata, IdempotencyKey,
    LoadedNights, LoadedReservation, Loader, RequestFingerprint, RoomWork, Strategy, WantedNights,
    Writer,
};

/// The staff's actions on a stay under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StayAction {
    /// The guest of a confirmed stay arrives, on a day of the stay at the hotel; its
    /// nights stay sold.
    CheckIn,
    /// The guest of a checked-in stay leaves: the stay's nights after that day go back
    /// to sale.
    CheckOut,
    /// The guest of a confirmed stay never came (from its arrival date): every night
    /// after the first goes back to sale.
    NoShow,
}

/// How a [`StayAction`] is decided: on the reservation, its nights, the time and the
/// hotel's timezone.
type StayDecision =
    fn(&Reservation, &StayNights<'_>, DateTime<Utc>, TimeZone) -> Result<Decision, Rejection>;

/// Writes a caller adds to a reservation command's transaction once the decision is
/// written (the payment saga resolves its step and stores its client's outcome there),
/// so they commit or roll back with the events.
pub trait AfterDecision: Sync {
    fn write<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        outcome: &'a Outcome,
        events: &'a [ReservationEvent],
    ) -> BoxFuture<'a, Result<(), AttemptError>>;
}

/// The loaded state a reservation command decides on.
pub struct Loaded<'a> {
    pub hotel: &'a Hotel,
    pub reservation: &'a Reservation,
    /// The nights of every room type of the reservation.
    pub nights: &'a StayNights<'a>,
    pub now: DateTime<Utc>,
}

/// A command on an existing reservation, as [`CommandService::run`] takes it.
pub struct ReservationCommand<'a, R, F> {
    pub caller: &'a Caller,
    /// Whose idempotency keys `key` is among (the calling token).
    pub scope: &'a str,
    pub key: Option<IdempotencyKey>,
    /// The command's name, stored with its events and in its idempotency record.
    pub command: CommandName,
    /// What the idempotency record fingerprints.
    pub request: &'a R,
    pub reservation_id: ReservationId,
    /// Nights to load beyond the reservation's own (a date change's new stay).
    pub extra_stay: Option<StayDates>,
    pub decide: F,
}

impl CommandService {
    /// Holds a stay for `channel`, every night or none, for `hold_ttl`; the idempotency
    /// key is scoped to `scope` (the calling token; a channel's own name when it is its
    /// only token).
    pub async fn hold(
        &self,
        channel: &str,
        scope: &str,
        key: IdempotencyKey,
        request: HoldRequest,
    ) -> Result<ReservationView, CommandError> {
        // A refusal appends nothing to the log: demand turned away is recorded apart.
        let asked = self
            .turnaways
            .as_ref()
            .map(|_| super::turnaways::Demand::of(&request));
        let result = self.hold_once(channel, scope, key, request).await;
        if let (Err(CommandError::Rejected(rejection)), Some(asked), Some(log)) =
            (&result, asked, &self.turnaways)
        {
            if let Some(reason) = super::turnaways::Reason::of(rejection) {
                log.record(super::turnaways::Turnaway::of(
                    &asked,
                    reason,
                    channel,
                    self.now(),
                ));
            }
        }
        result
    }

    async fn hold_once(
        &self,
        channel: &str,
        scope: &str,
        key: IdempotencyKey,
        request: HoldRequest,
    ) -> Result<ReservationView, CommandError> {
        // Refuse absurd stays before loading (and locking) a night of them.
        self.config
            .limits
            .check_size(&request.stay, request.rooms)
            .map_err(Rejection::from)?;
        let fingerprint = RequestFingerprint::new(scope, key, CommandName::HoldStay, &request)?;
        let now = self.now();
        // The id ends in the reference, so the reference is unique as its number is.
        let reference = self.references.next(&self.pool).await?;
        let reservation_id = ReservationId::with_reference(Uuid::now_v7(), reference);
        let metadata = metadata(CommandName::HoldStay, channel, None, Some(&fingerprint));
        let hold = Hold {
            channel: channel.to_owned(),
            fingerprint,
            request,
            reservation_id,
            now,
            metadata,
        };
        if self.config.strategy == Strategy::Group {
            return Ok(self.group.submit(hold).await??);
        }
        let outcome = with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result = self.hold_alone(&mut tx, &hold).await;
            settle(tx, result).await
        })
        .await?;
        Ok(outcome?)
    }

    /// One attempt at a hold in a transaction of its own (the optimistic and
    /// pessimistic strategies).
    async fn hold_alone(
        &self,
        tx: &mut PgConnection,
        hold: &Hold,
    ) -> Result<Outcome, AttemptError> {
        let request = &hold.request;
        let locks = self.config.strategy.locks_nights();
        let mut loader = Loader { conn: &mut *tx };
        let rooms: Vec<(HotelId, RoomTypeId)> = request
            .lines()
            .map(|line| (request.hotel_id, line.room_type_id))
            .collect();
        let mut opened = loader.open(&[&hold.fingerprint], &rooms, locks).await?;
        let claim = std::mem::take(&mut opened.claims).into_iter().next();
        match claim {
            Some(claim) if claim.claimed => {
                if let Some(stored) =
                    idempotency::judge::<StoredAnswer>(&hold.fingerprint, claim.record)?
                {
                    return stored.answer(&mut *tx).await;
                }
            }
            _ => return Err(CommandError::InFlight.into()),
        }
        let wanted: Vec<WantedNights> = rooms
            .iter()
            .map(|&(hotel_id, room_type_id)| WantedNights {
                hotel_id,
                room_type_id,
                dates: request.stay.nights().collect(),
                peek: vec![request.stay.end()],
            })
            .collect();
        let nights = loader
            .nights_of(&wanted, Some(hold.reservation_id), hold.now, locks)
            .await?;
        let decision = booking::hold_stay(
            opened.hotel(request.hotel_id),
            &Reservation::default(),
            &stay_nights(&nights),
            &self.config.limits,
            hold.decide(self.config.hold_ttl),
        );
        finish(
            tx,
            Decided {
                privacy: &self.privacy,
                metadata: &hold.metadata,
                fingerprint: Some(&hold.fingerprint),
                nights: &nights,
                before: None,
                now: hold.now,
                catalog: Some((request.hotel_id, opened.version(request.hotel_id))),
            },
            decision,
        )
        .await
    }

    /// Cancels a held or confirmed reservation; its nights return to sale. The
    /// idempotency key is scoped to `scope` (the calling token).
    pub async fn cancel(
        &self,
        caller: &Caller,
        scope: &str,
        key: impl Into<Option<IdempotencyKey>>,
        reservation_id: ReservationId,
        reason: String,
    ) -> Result<ReservationView, CommandError> {
        #[derive(Serialize)]
        struct CancelRequest<'a> {
            reservation_id: ReservationId,
            reason: &'a str,
        }
        let by = match caller {
            Caller::Channel(_) => CancelledBy::Guest,
            Caller::Staff(_) | Caller::Person { .. } => CancelledBy::Hotel,
        };
        self.run_rejecting(ReservationCommand {
            caller,
            scope,
            key: key.into(),
            command: CommandName::Cancel,
            request: &CancelRequest {
                reservation_id,
                reason: &reason,
            },
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| {
                let timezone = l.hotel.details().map_or(TimeZone::UTC, |d| d.timezone());
                booking::cancel(l.reservation, l.nights, l.now, reason.clone(), by, timezone)
            },
        })
        .await
    }

    /// One of the staff's actions on a stay under way (check-in, check-out, no-show; see
    /// [`StayAction`]), decided on the hotel's date (its timezone), with nothing in the
    /// request but the reservation.
    pub async fn stay_action(
        &self,
        caller: &Caller,
        scope: &str,
        key: impl Into<Option<IdempotencyKey>>,
        reservation_id: ReservationId,
        action: StayAction,
    ) -> Result<ReservationView, CommandError> {
        let (command, decide): (CommandName, StayDecision) = match action {
            StayAction::CheckIn => (CommandName::CheckIn, |r, _, now, tz| {
                booking::check_in(r, now, tz)
            }),
            StayAction::CheckOut => (CommandName::CheckOut, booking::check_out),
            StayAction::NoShow => (CommandName::RecordNoShow, booking::record_no_show),
        };
        self.run_rejecting(ReservationCommand {
            caller,
            scope,
            key: key.into(),
            command,
            request: &reservation_id,
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| {
                let timezone = l.hotel.details().map_or(TimeZone::UTC, |d| d.timezone());
                decide(l.reservation, l.nights, l.now, timezone)
            },
        })
        .await
    }

    /// Moves a reservation to new dates: the old nights are released and the new ones
    /// taken in one step, or nothing changes. The idempotency key is scoped to `scope`
    /// (the calling token); `increment` is what the gateway granted toward a dearer
    /// price. A paid stay whose new price the card does not cover is refused with
    /// `Rejection::PaymentRequired`, writing nothing, not even the idempotency record:
    /// the payment service asks the gateway and calls again (see
    /// `PaymentService::change_dates`).
    #[allow(clippy::too_many_arguments)]
    pub async fn change_dates(
        &self,
        caller: &Caller,
        scope: &str,
        key: impl Into<Option<IdempotencyKey>>,
        reservation_id: ReservationId,
        new_stay: StayDates,
        expected_total_cents: Option<Cents>,
        increment: Option<Increment>,
    ) -> Result<ReservationView, CommandError> {
        self.config
            .limits
            .check_nights(&new_stay)
            .map_err(Rejection::from)?;
        #[derive(Serialize)]
        struct ChangeRequest {
            reservation_id: ReservationId,
            stay: StayDates,
            expected_total_cents: Option<Cents>,
        }
        let limits = self.config.limits;
        self.run_rejecting(ReservationCommand {
            caller,
            scope,
            key: key.into(),
            command: CommandName::ChangeDates,
            request: &ChangeRequest {
                reservation_id,
                stay: new_stay,
                expected_total_cents,
            },
            reservation_id,
            extra_stay: Some(new_stay),
            decide: |l: Loaded<'_>| {
                booking::change_dates(
                    l.hotel,
                    l.reservation,
                    l.nights,
                    &limits,
                    booking::ChangeDates {
                        new_stay,
                        expected_total_cents,
                        now: l.now,
                    },
                    increment.clone(),
                )
            },
        })
        .await
    }

    /// Captures the authorization of a paid stay whose capture is due (the capture
    /// worker): `true` if this call recorded the capture.
    pub async fn capture_due(&self, reservation_id: ReservationId) -> Result<bool, CommandError> {
        static CAPTURE: std::sync::LazyLock<Caller> =
            std::sync::LazyLock::new(|| Caller::Staff(String::from("capture")));
        self.recorded(ReservationCommand {
            caller: &CAPTURE,
            scope: "capture",
            key: None,
            command: CommandName::CapturePayment,
            request: &reservation_id,
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| booking::capture_payment(l.reservation, l.now),
        })
        .await
    }

    /// The no-show worker's command: records a no-show for a confirmed stay whose guest
    /// was not checked in once its arrival date has ended at the hotel, `grace` after
    /// midnight there; `true` if this call recorded it.
    pub async fn record_lapsed_no_show(
        &self,
        reservation_id: ReservationId,
        grace: chrono::Duration,
    ) -> Result<bool, CommandError> {
        static NO_SHOWS: std::sync::LazyLock<Caller> =
            std::sync::LazyLock::new(|| Caller::Staff(String::from("no-show")));
        self.recorded(ReservationCommand {
            caller: &NO_SHOWS,
            scope: "no-show",
            key: None,
            command: CommandName::RecordNoShow,
            request: &reservation_id,
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| {
                let timezone = l.hotel.details().map_or(TimeZone::UTC, |d| d.timezone());
                booking::record_lapsed_no_show(l.reservation, l.nights, l.now, timezone, grace)
            },
        })
        .await
    }

    /// Holds the nights a dearer move of `reservation_id` to `new_stay` enters, until
    /// `hold_expires_at`, while the payment service asks the card for the difference.
    pub async fn hold_date_change(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
        new_stay: StayDates,
        hold_expires_at: DateTime<Utc>,
    ) -> Result<ReservationView, CommandError> {
        let limits = self.config.limits;
        self.run_rejecting(ReservationCommand {
            caller,
            scope: "payments",
            key: None,
            command: CommandName::HoldDateChange,
            request: &(reservation_id, new_stay),
            reservation_id,
            extra_stay: Some(new_stay),
            decide: |l: Loaded<'_>| {
                booking::hold_date_change(
                    l.hotel,
                    l.reservation,
                    l.nights,
                    &limits,
                    new_stay,
                    hold_expires_at,
                    l.now,
                )
            },
        })
        .await
    }

    /// Gives back the nights held for a move to `new_stay` that will not happen.
    pub async fn release_date_change(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
        new_stay: StayDates,
    ) -> Result<bool, CommandError> {
        self.recorded(ReservationCommand {
            caller,
            scope: "payments",
            key: None,
            command: CommandName::ReleaseDateChange,
            request: &(reservation_id, new_stay),
            reservation_id,
            extra_stay: Some(new_stay),
            decide: |l: Loaded<'_>| booking::release_date_change(l.reservation, l.nights, l.now),
        })
        .await
    }

    /// Records an increment of the authorization whose date change was not made.
    pub async fn record_increment(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
        increment: Increment,
    ) -> Result<bool, CommandError> {
        self.recorded(ReservationCommand {
            caller,
            scope: "payments",
            key: None,
            command: CommandName::RecordIncrement,
            request: &increment,
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| {
                booking::record_increment(l.reservation, l.now, increment.clone())
            },
        })
        .await
    }

    /// Runs `command` without a client waiting: `true` if it wrote events, `false` if
    /// there was nothing to do (someone else did it, or the state moved on).
    async fn recorded<R, F>(
        &self,
        command: ReservationCommand<'_, R, F>,
    ) -> Result<bool, CommandError>
    where
        R: Serialize,
        F: Fn(Loaded<'_>) -> Result<Decision, Rejection>,
    {
        struct Recorded(std::sync::atomic::AtomicBool);
        impl AfterDecision for Recorded {
            fn write<'a>(
                &'a self,
                _conn: &'a mut PgConnection,
                _outcome: &'a Outcome,
                events: &'a [ReservationEvent],
            ) -> BoxFuture<'a, Result<(), AttemptError>> {
                self.0
                    .store(!events.is_empty(), std::sync::atomic::Ordering::SeqCst);
                Box::pin(async { Ok(()) })
            }
        }
        let recorded = Recorded(std::sync::atomic::AtomicBool::new(false));
        let outcome = self.run(command, Some(&recorded)).await?;
        match outcome {
            Ok(_) => Ok(recorded.0.load(std::sync::atomic::Ordering::SeqCst)),
            Err(Rejection::InvalidState { .. } | Rejection::HoldStillLive) => Ok(false),
            Err(rejection) => Err(CommandError::Rejected(rejection)),
        }
    }

    /// Confirms a live hold on every night (the payment saga calls this once the card
    /// is authorized).
    pub async fn confirm(
        &self,
        caller: &Caller,
        key: Option<IdempotencyKey>,
        reservation_id: ReservationId,
    ) -> Result<ReservationView, CommandError> {
        self.run_rejecting(ReservationCommand {
            caller,
            scope: caller.name(),
            key,
            command: CommandName::Confirm,
            request: &reservation_id,
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| booking::confirm(l.reservation, l.nights, l.now),
        })
        .await
    }

    /// Records that the guest of a reservation was erased (their keys are destroyed
    /// already, see [`super::erase`]): `true` if this call recorded it, `false`
    /// if it was recorded before.
    pub async fn erase_guest_of(
        &self,
        caller: &Caller,
        reservation_id: ReservationId,
    ) -> Result<bool, CommandError> {
        self.recorded(ReservationCommand {
            caller,
            scope: "erasure",
            key: None,
            command: CommandName::EraseGuest,
            request: &reservation_id,
            reservation_id,
            extra_stay: None,
            decide: |l: Loaded<'_>| booking::erase_guest(l.reservation, l.now),
        })
        .await
    }

    /// Records that a hold lapsed and drops it from its nights.
    pub async fn expire_hold(
        &self,
        reservation_id: ReservationId,
    ) -> Result<ReservationView, CommandError> {
        self.run_rejecting(expiry(&EXPIRY, &reservation_id)).await
    }

    /// As [`Self::expire_hold`] for the sweeper: `true` if this call recorded the
    /// expiry, `false` if someone already had (or the reservation is no longer held).
    pub async fn expire_lapsed(&self, reservation_id: ReservationId) -> Result<bool, CommandError> {
        self.recorded(expiry(&EXPIRY, &reservation_id)).await
    }

    /// Records the expiry of every hold of `ids` that has lapsed, in one transaction (the
    /// sweeper's batches): the reservations and the nights of all their rooms are loaded
    /// in a statement each, every expiry is decided on the nights as the ones before it
    /// left them, and all are written in one statement, as group commit writes holds.
    /// A reservation no longer held, or still live, is left as it is. Returns how many
    /// expiries this call recorded.
    ///
    /// Locks as single commands do: the rooms' advisory locks first (in one order), then
    /// the reservations' rows (in id order), so a batch queues behind a hold, a
    /// cancellation or another sweeper instead of deadlocking with them.
    pub async fn expire_lapsed_many(&self, ids: &[ReservationId]) -> Result<usize, CommandError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let now = self.now();
        let metadata = metadata(CommandName::ExpireHold, EXPIRY.name(), None, None);
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result = self.expire_many_once(&mut tx, ids, &metadata, now).await;
            settle(tx, result).await
        })
        .await
    }

    async fn expire_many_once(
        &self,
        tx: &mut PgConnection,
        ids: &[ReservationId],
        metadata: &EventMetadata,
        now: DateTime<Utc>,
    ) -> Result<usize, AttemptError> {
        let lock = self.config.strategy.locks_nights();
        let mut loader = Loader { conn: &mut *tx };
        // Which rooms: read unlocked, then lock the rooms, then the rows (as `run_once`).
        let mut found = loader.reservations(ids, false).await?;
        let rooms: BTreeSet<(HotelId, RoomTypeId)> = found
            .iter()
            .filter_map(|l| l.reservation.details())
            .flat_map(|d| d.room_types().map(move |room_type| (d.hotel_id, room_type)))
            .collect();
        let rooms: Vec<(HotelId, RoomTypeId)> = rooms.into_iter().collect();
        if lock {
            loader.open(&[], &rooms, true).await?;
            found = loader.reservations(ids, true).await?;
        }
        let mut wanted: BTreeMap<(HotelId, RoomTypeId), BTreeSet<NaiveDate>> = BTreeMap::new();
        for details in found.iter().filter_map(|l| l.reservation.details()) {
            for room_type in details.room_types() {
                wanted
                    .entry((details.hotel_id, room_type))
                    .or_default()
                    .extend(details.stay.nights());
            }
        }
        let wanted: Vec<WantedNights> = wanted
            .into_iter()
            .map(|((hotel_id, room_type_id), dates)| WantedNights {
                hotel_id,
                room_type_id,
                dates: dates.into_iter().collect(),
                peek: Vec::new(),
            })
            .collect();
        // Every lapsed hold's allocations come with the nights.
        let loaded = loader.nights_of(&wanted, None, now, lock).await?;
        let mut work: HashMap<(HotelId, RoomTypeId), RoomWork> = loaded
            .into_iter()
            .map(|loaded| {
                (
                    (loaded.hotel_id, loaded.room_type_id),
                    RoomWork::new(loaded),
                )
            })
            .collect();
        let mut writer = Writer::new(metadata)?;
        let stored = writer.set_metadata(metadata)?.clone();
        let mut written = Vec::new();
        for before in &found {
            let Some(details) = before.reservation.details() else {
                continue;
            };
            let rooms: Vec<(HotelId, RoomTypeId)> = details
                .room_types()
                .map(|room_type| (details.hotel_id, room_type))
                .collect();
            if rooms.iter().any(|room| !work.contains_key(room)) {
                continue;
            }
            let mut nights = StayNights::default();
            for room in &rooms {
                if let Some(work) = work.get(room) {
                    nights.add(room.1, work.nights());
                }
            }
            // Not held any more, or not lapsed, or expired already (no events): someone
            // else decided it, or there is nothing to do.
            let Ok(decision) = booking::expire_hold(&before.reservation, &nights, now) else {
                continue;
            };
            if decision.reservation.is_empty() {
                continue;
            }
            if decision
                .nights
                .iter()
                .any(|(key, _)| !work.contains_key(&(key.hotel_id, key.room_type_id)))
            {
                return Err(AttemptError::Fatal(CommandError::Internal(
                    "an expiry changed nights of a room it did not load".into(),
                )));
            }
            let after = writer.queue_reservation(Some(before), &decision.reservation)?;
            if let Some(after) = after {
                written.push((after, before, decision.reservation.clone()));
            }
            for room in &rooms {
                if let Some(work) = work.get_mut(room) {
                    work.decided(stored.clone(), decision.clone());
                }
            }
        }
        for room in work.values() {
            room.queue(&mut writer)?;
        }
        writer.flush(&mut *tx, &self.privacy).await?;
        for (after, before, events) in &written {
            outbox::enqueue(&mut *tx, after, events, now).await?;
            mail::enqueue(
                &mut *tx,
                after,
                Some((&before.reservation, before.version)),
                events,
                now,
            )
            .await?;
        }
        Ok(written.len())
    }

    /// The reservation as of now (read-your-writes: read from the inline state that the
    /// command wrote in its own transaction). The payment saga decides on it; HTTP reads
    /// go through [`crate::queries`].
    pub async fn reservation(
        &self,
        reservation_id: ReservationId,
    ) -> Result<Option<ReservationView>, CommandError> {
        let loaded = self.stored_reservation(reservation_id).await?;
        Ok(loaded.and_then(|l| ReservationView::of(&l.reservation, self.now())))
    }

    /// The reservation's inline state as of now, unlocked.
    async fn stored_reservation(
        &self,
        reservation_id: ReservationId,
    ) -> Result<Option<LoadedReservation>, CommandError> {
        let mut conn = self.pool.acquire().await?;
        Loader { conn: &mut conn }
            .reservation(reservation_id, false)
            .await
            .map_err(attempt_to_command)
    }

    /// The payment ledger of a reservation as of now (read-your-writes, as
    /// [`Self::reservation`]); `None` if it does not exist or was never paid.
    pub async fn ledger(
        &self,
        reservation_id: ReservationId,
    ) -> Result<Option<aggregates::Ledger>, CommandError> {
        let loaded = self.stored_reservation(reservation_id).await?;
        Ok(loaded.and_then(|l| l.reservation.ledger().map(std::borrow::Cow::into_owned)))
    }

    /// Runs `command`, a rejection being the caller's error.
    async fn run_rejecting<R, F>(
        &self,
        command: ReservationCommand<'_, R, F>,
    ) -> Result<ReservationView, CommandError>
    where
        R: Serialize,
        F: Fn(Loaded<'_>) -> Result<Decision, Rejection>,
    {
        Ok(self.run(command, None).await??)
    }

    /// Runs a command on an existing reservation (see the module docs), with `after`
    /// written in the same transaction, and the rejection returned as the outcome rather
    /// than an error (it is what the idempotency record stores).
    pub(crate) async fn run<R, F>(
        &self,
        command: ReservationCommand<'_, R, F>,
        after: Option<&dyn AfterDecision>,
    ) -> Result<Outcome, CommandError>
    where
        R: Serialize,
        F: Fn(Loaded<'_>) -> Result<Decision, Rejection>,
    {
        let fingerprint = command
            .key
            .clone()
            .map(|key| {
                RequestFingerprint::new(command.scope, key, command.command, command.request)
            })
            .transpose()?;
        let now = self.now();
        let metadata = metadata(
            command.command,
            command.caller.name(),
            command.caller.staff_id(),
            fingerprint.as_ref(),
        );
        let outcome = with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result = self
                .run_once(
                    &mut tx,
                    &command,
                    fingerprint.as_ref(),
                    &metadata,
                    now,
                    after,
                )
                .await;
            settle(tx, result).await
        })
        .await?;
        Ok(outcome)
    }

    async fn run_once<R, F>(
        &self,
        tx: &mut PgConnection,
        command: &ReservationCommand<'_, R, F>,
        fingerprint: Option<&RequestFingerprint>,
        metadata: &EventMetadata,
        now: DateTime<Utc>,
        after: Option<&dyn AfterDecision>,
    ) -> Result<Outcome, AttemptError>
    where
        F: Fn(Loaded<'_>) -> Result<Decision, Rejection>,
    {
        let lock = self.config.strategy.locks_nights();
        let reservation_id = command.reservation_id;
        if let Some(fingerprint) = fingerprint {
            if let Some(stored) = idempotency::claim::<StoredAnswer>(tx, fingerprint).await? {
                return stored.answer(&mut *tx).await;
            }
        }
        let mut loader = Loader { conn: &mut *tx };
        let mut found = loader.reservation(reservation_id, false).await?;
        if lock {
            // Queue behind every writer of its room types before taking any row lock
            // (see `Loader::lock_room_type`), then re-read under the locks.
            if let Some(details) = found.as_ref().and_then(|l| l.reservation.details()) {
                loader
                    .lock_room_types(details.hotel_id, details.room_types())
                    .await?;
                found = loader.reservation(reservation_id, true).await?;
            }
        }
        let Some(loaded) = found else {
            let outcome = Err(Rejection::ReservationNotFound);
            if let Some(fingerprint) = fingerprint {
                idempotency::complete(tx, fingerprint, &outcome).await?;
            }
            if let Some(after) = after {
                after.write(tx, &outcome, &[]).await?;
            }
            return Ok(outcome);
        };
        if !command.caller.may_act_on(&loaded.reservation) {
            return Err(AttemptError::Fatal(CommandError::Forbidden));
        }
        let Some(details) = loaded.reservation.details() else {
            return Err(AttemptError::Fatal(CommandError::Internal(
                "stored reservation without details".into(),
            )));
        };
        let dates: BTreeSet<NaiveDate> = details
            .stay
            .nights()
            .chain(command.extra_stay.iter().flat_map(|s| s.nights()))
            .collect();
        let dates: Vec<NaiveDate> = dates.into_iter().collect();
        let hotel_id = details.hotel_id;
        let (hotel, _) = loader.hotel(hotel_id).await?;
        // Every line's nights; the new stay's check-out day, for its closed-to-departure
        // rule.
        let wanted: Vec<WantedNights> = details
            .room_types()
            .map(|room_type_id| WantedNights {
                hotel_id,
                room_type_id,
                dates: dates.clone(),
                peek: command.extra_stay.iter().map(|s| s.end()).collect(),
            })
            .collect();
        let nights = loader
            .nights_of(&wanted, Some(reservation_id), now, lock)
            .await?;
        let decision = (command.decide)(Loaded {
            hotel: &hotel,
            reservation: &loaded.reservation,
            nights: &stay_nights(&nights),
            now,
        });
        // Not an answer but a question for the payment service: nothing is written, not
        // even the idempotency record, so the call after the gateway's answer decides
        // afresh.
        if let Err(shortfall @ Rejection::PaymentRequired { .. }) = decision {
            return Err(AttemptError::Fatal(CommandError::Rejected(shortfall)));
        }
        let events = decision
            .as_ref()
            .map(|d| d.reservation.clone())
            .unwrap_or_default();
        let outcome = finish(
            tx,
            Decided {
                privacy: &self.privacy,
                metadata,
                fingerprint,
                nights: &nights,
                before: Some(&loaded),
                now,
                // The reservation keeps the currency and taxes it was sold with.
                catalog: None,
            },
            decision,
        )
        .await?;
        if let Some(after) = after {
            after.write(tx, &outcome, &events).await?;
        }
        Ok(outcome)
    }
}

/// The caller the expiry of lapsed holds acts as.
static EXPIRY: std::sync::LazyLock<Caller> =
    std::sync::LazyLock::new(|| Caller::Staff(String::from("expiry")));

fn expiry<'a>(
    caller: &'a Caller,
    reservation_id: &'a ReservationId,
) -> ReservationCommand<'a, ReservationId, impl Fn(Loaded<'_>) -> Result<Decision, Rejection>> {
    ReservationCommand {
        caller,
        scope: "expiry",
        key: None,
        command: CommandName::ExpireHold,
        request: reservation_id,
        reservation_id: *reservation_id,
        extra_stay: None,
        decide: |l: Loaded<'_>| booking::expire_hold(l.reservation, l.nights, l.now),
    }
}

pub(super) fn metadata(
    command: CommandName,
    client: &str,
    staff_id: Option<Uuid>,
    fingerprint: Option<&RequestFingerprint>,
) -> EventMetadata {
    EventMetadata {
        command,
        client: client.to_owned(),
        idempotency_key: fingerprint.map(|f| f.key.as_str().to_owned()),
        staff_id,
    }
}

pub(super) fn attempt_to_command(e: AttemptError) -> CommandError {
    match e {
        AttemptError::Conflict => CommandError::Contention { attempts: 1 },
        AttemptError::Fatal(e) => e,
    }
}

/// What a decision is written with.
struct Decided<'a> {
    privacy: &'a Privacy,
    metadata: &'a EventMetadata,
    fingerprint: Option<&'a RequestFingerprint>,
    /// The nights of every room the decision may touch.
    nights: &'a [LoadedNights],
    /// The reservation as loaded; `None` for a new one.
    before: Option<&'a LoadedReservation>,
    now: DateTime<Utc>,
    /// A sale's hotel and the catalog version it was priced from (see
    /// `Writer::expect_catalog`).
    catalog: Option<(HotelId, i64)>,
}

/// Writes a decision (or records a rejection), the idempotency outcome and the payment
/// calls the events decide; the caller commits.
async fn finish(
    conn: &mut PgConnection,
    with: Decided<'_>,
    decision: Result<Decision, Rejection>,
) -> Result<Outcome, AttemptError> {
    let mut writer = Writer::new(with.metadata)?;
    let mut version = with.before.map_or(0, |b| b.version);
    let (outcome, written) = match decision {
        Err(rejection) => (Err(rejection), None),
        Ok(decision) => {
            // A sale commits on the catalog it was priced from; a refusal sells nothing.
            if let Some((hotel_id, version)) = with.catalog {
                writer.expect_catalog(hotel_id, version);
            }
            version += decision.reservation.len() as i64;
            if !every_night_loaded(with.nights, &decision) {
                return Err(AttemptError::Fatal(CommandError::Internal(
                    "a decision changed nights of a room it did not load".into(),
                )));
            }
            for loaded in with.nights {
                writer.queue_nights(loaded, &decision)?;
            }
            let after = writer.queue_reservation(with.before, &decision.reservation)?;
            let view = after
                .as_ref()
                .and_then(|r| ReservationView::of(r, with.now));
            let view = view.ok_or_else(|| {
                AttemptError::Fatal(CommandError::Internal(
                    "a reservation command left no reservation".into(),
                ))
            })?;
            (Ok(view), after.map(|a| (a, decision.reservation)))
        }
    };
    if let Some(fingerprint) = with.fingerprint {
        writer.queue_idempotency(fingerprint, &StoredAnswer::of(&outcome, version, with.now))?;
    }
    writer.flush(conn, with.privacy).await?;
    if let Some((after, events)) = written {
        outbox::enqueue(conn, &after, &events, with.now).await?;
        let before = with.before.map(|b| (&b.reservation, b.version));
        mail::enqueue(conn, &after, before, &events, with.now).await?;
    }
    Ok(outcome)
}

/// The loaded rooms as a decision takes them.
fn stay_nights(loaded: &[LoadedNights]) -> StayNights<'_> {
    let mut nights = StayNights::default();
    for room in loaded {
        nights.add(room.room_type_id, &room.nights);
    }
    nights
}

/// Whether every night `decision` changes is of a room in `loaded` (each room's nights
/// are queued from its own load; a night of another would be lost).
pub(super) fn every_night_loaded(loaded: &[LoadedNights], decision: &Decision) -> bool {
    decision.nights.iter().all(|(key, _)| {
        loaded
            .iter()
            .any(|l| (l.hotel_id, l.room_type_id) == (key.hotel_id, key.room_type_id))
    })
}
