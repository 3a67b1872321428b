//! The command API the HTTP layer calls: catalog, inventory and the reservation
//! lifecycle. Each method validates nothing the types have not already validated; it
//! runs the unit of work (load, decide, append in one transaction) with retries, stamps
//! the current time and new ids into the commands, and keeps idempotency records for
//! the calls clients may retry.

use std::collections::BTreeSet;
use std::sync::Arc;

use aggregates::booking::{self, InventoryUpdate};
use aggregates::{
    BookingLimits, CancelledBy, CommandName, Decision, Guest, Hotel, HotelCommand, HotelDetails,
    HotelId, InvalidInput, Nights, Rejection, Reservation, ReservationEvent, ReservationId,
    ReservationStatus, RoomCount, RoomTypeDetails, RoomTypeId, StayDates,
};
use chrono::{DateTime, Duration, NaiveDate, Utc};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::clock::{Clock, SystemClock};
use crate::error::CommandError;
use crate::write::{
    idempotency, settle, with_retries, AttemptError, EventMetadata, IdempotencyKey, LoadedNights,
    LoadedReservation, Loader, RequestFingerprint, RetryPolicy, Strategy, Writer,
};

/// How the write side behaves; every field has a production default.
#[derive(Debug, Clone, Copy)]
pub struct WriteConfig {
    pub strategy: Strategy,
    pub retry: RetryPolicy,
    pub hold_ttl: Duration,
    pub limits: BookingLimits,
    /// Most nights one inventory update may set (a year and a bit).
    pub max_inventory_nights: u32,
    /// Group commit: how many batches of holds may be in flight at once.
    pub group_lanes: usize,
}

impl Default for WriteConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::Group,
            retry: RetryPolicy::default(),
            hold_ttl: Duration::seconds(900),
            limits: BookingLimits::default(),
            max_inventory_nights: 800,
            group_lanes: crate::write::group::DEFAULT_LANES,
        }
    }
}

/// Who is acting. A channel (a booking front-end) acts on its own reservations only;
/// staff act on any, and their cancellations count as the hotel's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Channel(String),
    Staff(String),
}

impl Caller {
    pub fn name(&self) -> &str {
        match self {
            Caller::Channel(name) | Caller::Staff(name) => name,
        }
    }

    pub(crate) fn may_act_on(&self, reservation: &Reservation) -> bool {
        match self {
            Caller::Staff(_) => true,
            Caller::Channel(name) => reservation.details().is_some_and(|d| &d.channel == name),
        }
    }
}

/// A request to hold a stay. The price is the server's; `expected_total_cents` only
/// guards against the client showing a stale one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HoldRequest {
    pub hotel_id: HotelId,
    pub room_type_id: RoomTypeId,
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guest: Guest,
    pub expected_total_cents: Option<i64>,
}

/// A reservation as clients see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationView {
    pub reservation_id: Uuid,
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub nights: u32,
    pub rooms: u32,
    pub guest: GuestView,
    pub channel: String,
    pub total_cents: i64,
    pub status: ReservationStatus,
    pub hold_expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What the guest paid (the authorization that confirmed it), in cents.
    #[serde(default)]
    pub paid_cents: i64,
    /// What a cancellation gave back, in cents.
    #[serde(default)]
    pub refund_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestView {
    pub name: String,
    pub email: String,
}

impl ReservationView {
    /// The view of a reservation at `now` (a lapsed hold reads as `expired`).
    pub fn of(reservation: &Reservation, now: DateTime<Utc>) -> Option<Self> {
        let d = reservation.details()?;
        Some(Self {
            reservation_id: d.reservation_id.as_uuid(),
            hotel_id: d.hotel_id.get(),
            room_type_id: d.room_type_id.get(),
            start_date: d.stay.start(),
            end_date: d.stay.end(),
            nights: d.stay.night_count(),
            rooms: d.rooms.get(),
            guest: GuestView {
                name: d.guest.name().to_owned(),
                email: d.guest.email().to_owned(),
            },
            channel: d.channel.clone(),
            total_cents: d.total_cents,
            status: reservation.status_at(now)?,
            hold_expires_at: d.hold_expires_at,
            created_at: d.created_at,
            updated_at: reservation.updated_at().unwrap_or(d.created_at),
            paid_cents: reservation.payment().map_or(0, |p| p.amount_cents),
            refund_cents: reservation.refund_cents(),
        })
    }
}

/// The outcome stored for an idempotent request: what the first attempt answered.
pub type Outcome = Result<ReservationView, Rejection>;

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
    pub nights: &'a Nights,
    pub now: DateTime<Utc>,
}

#[derive(Clone)]
pub struct CommandService {
    pool: PgPool,
    config: WriteConfig,
    clock: Arc<dyn Clock>,
    group: Arc<crate::write::group::GroupCommit>,
}

impl CommandService {
    pub fn new(pool: PgPool, config: WriteConfig) -> Self {
        Self::with_clock(pool, config, Arc::new(SystemClock))
    }

    pub fn with_clock(pool: PgPool, config: WriteConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            pool,
            config,
            clock,
            group: Arc::new(crate::write::group::GroupCommit::new(config.group_lanes)),
        }
    }

    pub fn config(&self) -> &WriteConfig {
        &self.config
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Creates or updates a hotel's name, city and timezone.
    pub async fn set_hotel(
        &self,
        hotel_id: HotelId,
        details: HotelDetails,
    ) -> Result<Hotel, CommandError> {
        let command = HotelCommand::SetDetails { hotel_id, details };
        self.hotel_command(hotel_id, command, CommandName::SetHotel.as_str())
            .await
    }

    /// Creates or updates a room type of an existing hotel.
    pub async fn set_room_type(
        &self,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    ) -> Result<Hotel, CommandError> {
        let command = HotelCommand::SetRoomType {
            room_type_id,
            details,
        };
        self.hotel_command(hotel_id, command, CommandName::SetRoomType.as_str())
            .await
    }

    async fn hotel_command(
        &self,
        hotel_id: HotelId,
        command: HotelCommand,
        name: &'static str,
    ) -> Result<Hotel, CommandError> {
        let metadata = EventMetadata {
            command: name,
            client: String::from("staff"),
            idempotency_key: None,
        };
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let (hotel, version) = Loader { conn: &mut tx }.hotel(hotel_id).await?;
                let events = hotel.decide(command.clone()).map_err(|e| match e {
                    aggregates::hotel::HotelError::UnknownHotel => Rejection::UnknownHotel,
                    aggregates::hotel::HotelError::WrongHotel => Rejection::UnknownHotel,
                })?;
                let mut writer = Writer::new(&metadata)?;
                let after = writer.hotel(&mut tx, &hotel, version, &events).await?;
                writer.flush(&mut tx).await?;
                Ok(after)
            }
            .await;
            settle(tx, result).await
        })
        .await
    }

    /// Sets total rooms (and optionally allowance and rate) on every night of `range`
    /// for one room type, or on none. Returns how many nights were set.
    pub async fn set_inventory(
        &self,
        hotel_id: HotelId,
        room_type_id: RoomTypeId,
        range: StayDates,
        update: InventoryUpdate,
    ) -> Result<u32, CommandError> {
        if range.night_count() > self.config.max_inventory_nights {
            return Err(Rejection::from(InvalidInput::new(
                "end_date",
                format!(
                    "at most {} nights per inventory update",
                    self.config.max_inventory_nights
                ),
            ))
            .into());
        }
        let now = self.now();
        let dates: Vec<NaiveDate> = range.nights().collect();
        let metadata = EventMetadata {
            command: CommandName::SetInventory.as_str(),
            client: String::from("staff"),
            idempotency_key: None,
        };
        with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<_, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                if self.config.strategy.locks_nights() {
                    loader.lock_room_type(hotel_id, room_type_id).await?;
                }
                let (hotel, _) = loader.hotel(hotel_id).await?;
                let nights = loader
                    .nights(
                        hotel_id,
                        room_type_id,
                        &dates,
                        None,
                        now,
                        self.config.strategy.locks_nights(),
                    )
                    .await?;
                let decision = booking::set_inventory(
                    &hotel,
                    &nights.nights,
                    hotel_id,
                    room_type_id,
                    range,
                    update,
                    now,
                )?;
                let mut writer = Writer::new(&metadata)?;
                writer.queue_nights(&nights, &decision)?;
                writer.flush(&mut tx).await?;
                Ok(range.night_count())
            }
            .await;
            settle(tx, result).await
        })
        .await
    }

    /// Holds a stay for a channel: every night or none, for `hold_ttl`. The channel's
    /// name scopes the idempotency key.
    pub async fn hold(
        &self,
        channel: &str,
        key: IdempotencyKey,
        request: HoldRequest,
    ) -> Result<ReservationView, CommandError> {
        self.hold_as(channel, channel, key, request).await
    }

    /// Holds a stay owned by `channel`, with the idempotency key scoped to `scope` (the
    /// calling token).
    pub async fn hold_as(
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
        let fingerprint =
            RequestFingerprint::new(scope, key, CommandName::HoldStay.as_str(), &request)?;
        let now = self.now();
        let reservation_id = ReservationId::from_uuid(Uuid::now_v7());
        let dates: Vec<NaiveDate> = request.stay.nights().collect();
        let metadata = self.metadata(CommandName::HoldStay.as_str(), channel, Some(&fingerprint));
        if self.config.strategy == Strategy::Group {
            let hold = crate::write::group::Hold {
                channel: channel.to_owned(),
                fingerprint,
                request,
                reservation_id,
                now,
                metadata,
            };
            return Ok(self.group.submit(self, hold).await??);
        }
        let outcome = with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<Outcome, AttemptError> = async {
                let mut loader = Loader { conn: &mut tx };
                let mut opened = loader
                    .open(
                        &[&fingerprint],
                        &[(request.hotel_id, request.room_type_id)],
                        self.config.strategy.locks_nights(),
                    )
                    .await?;
                let claim = std::mem::take(&mut opened.claims).into_iter().next();
                match claim {
                    Some(claim) if claim.claimed => {
                        if let Some(stored) =
                            idempotency::judge::<Outcome>(&fingerprint, claim.record)?
                        {
                            return Ok(stored);
                        }
                    }
                    _ => return Err(CommandError::InFlight.into()),
                }
                let hotel = opened.hotel(request.hotel_id);
                let nights = loader
                    .nights(
                        request.hotel_id,
                        request.room_type_id,
                        &dates,
                        Some(reservation_id),
                        now,
                        self.config.strategy.locks_nights(),
                    )
                    .await?;
                let decision = booking::hold_stay(
                    hotel,
                    &Reservation::default(),
                    &nights.nights,
                    &self.config.limits,
                    booking::HoldStay {
                        reservation_id,
                        hotel_id: request.hotel_id,
                        room_type_id: request.room_type_id,
                        stay: request.stay,
                        rooms: request.rooms,
                        guest: request.guest.clone(),
                        channel: channel.to_owned(),
                        expected_total_cents: request.expected_total_cents,
                        now,
                        hold_expires_at: now + self.config.hold_ttl,
                    },
                );
                finish(
                    &mut tx,
                    &metadata,
                    Some(&fingerprint),
                    &nights,
                    None,
                    decision,
                    now,
                )
                .await
            }
            .await;
            settle(tx, result).await
        })
        .await?;
        Ok(outcome?)
    }

    /// Cancels a held or confirmed reservation; its nights return to sale.
    pub async fn cancel(
        &self,
        caller: &Caller,
        key: Option<IdempotencyKey>,
        reservation_id: ReservationId,
        reason: String,
    ) -> Result<ReservationView, CommandError> {
        self.cancel_as(caller, caller.name(), key, reservation_id, reason)
            .await
    }

    /// As [`Self::cancel`], with the idempotency key scoped to `scope`.
    pub async fn cancel_as(
        &self,
        caller: &Caller,
        scope: &str,
        key: impl Into<Option<IdempotencyKey>>,
        reservation_id: ReservationId,
        reason: String,
    ) -> Result<ReservationView, CommandError> {
        let key = key.into();
        #[derive(Serialize)]
        struct CancelRequest<'a> {
            reservation_id: ReservationId,
            reason: &'a str,
        }
        let by = match caller {
            Caller::Channel(_) => CancelledBy::Guest,
            Caller::Staff(_) => CancelledBy::Hotel,
        };
        let request = CancelRequest {
            reservation_id,
            reason: &reason,
        };
        self.reservation_command(
            caller,
            scope,
            key,
            CommandName::Cancel.as_str(),
            &request,
            reservation_id,
            None,
            |l| {
                let timezone = l.hotel.details().map_or("UTC", |d| d.timezone());
                booking::cancel(l.reservation, l.nights, l.now, reason.clone(), by, timezone)
            },
        )
        .await
    }

    /// Moves a reservation to new dates: the old nights are released and the new ones
    /// taken in one step, or nothing changes.
    pub async fn change_dates(
        &self,
        caller: &Caller,
        key: Option<IdempotencyKey>,
        reservation_id: ReservationId,
        new_stay: StayDates,
        expected_total_cents: Option<i64>,
    ) -> Result<ReservationView, CommandError> {
        self.change_dates_as(
            caller,
            caller.name(),
            key,
            reservation_id,
            new_stay,
            expected_total_cents,
        )
        .await
    }

    /// As [`Self::change_dates`], with the idempotency key scoped to `scope`.
    pub async fn change_dates_as(
        &self,
        caller: &Caller,
        scope: &str,
        key: impl Into<Option<IdempotencyKey>>,
        reservation_id: ReservationId,
        new_stay: StayDates,
        expected_total_cents: Option<i64>,
    ) -> Result<ReservationView, CommandError> {
        let key = key.into();
        self.config
            .limits
            .check_nights(&new_stay)
            .map_err(Rejection::from)?;
        #[derive(Serialize)]
        struct ChangeRequest {
            reservation_id: ReservationId,
            stay: StayDates,
            expected_total_cents: Option<i64>,
        }
        let request = ChangeRequest {
            reservation_id,
            stay: new_stay,
            expected_total_cents,
        };
        let limits = self.config.limits;
        self.reservation_command(
            caller,
            scope,
            key,
            CommandName::ChangeDates.as_str(),
            &request,
            reservation_id,
            Some(new_stay),
            |l| {
                booking::change_dates(
                    l.hotel,
                    l.reservation,
                    l.nights,
                    &limits,
                    new_stay,
                    expected_total_cents,
                    l.now,
                )
            },
        )
        .await
    }

    /// Confirms a live hold on every night (the payment saga calls this once the card
    /// is authorized).
    pub async fn confirm(
        &self,
        caller: &Caller,
        key: Option<IdempotencyKey>,
        reservation_id: ReservationId,
    ) -> Result<ReservationView, CommandError> {
        self.reservation_command(
            caller,
            caller.name(),
            key,
            CommandName::Confirm.as_str(),
            &reservation_id,
            reservation_id,
            None,
            |l| booking::confirm(l.reservation, l.nights, l.now),
        )
        .await
    }

    /// Records that a hold lapsed and drops it from its nights.
    pub async fn expire_hold(
        &self,
        reservation_id: ReservationId,
    ) -> Result<ReservationView, CommandError> {
        let caller = Caller::Staff(String::from("expiry"));
        self.reservation_command(
            &caller,
            "expiry",
            None,
            CommandName::ExpireHold.as_str(),
            &reservation_id,
            reservation_id,
            None,
            |l| booking::expire_hold(l.reservation, l.nights, l.now),
        )
        .await
    }

    /// As [`Self::expire_hold`] for the sweeper: `true` if this call recorded the
    /// expiry, `false` if someone already had (or the reservation is no longer held).
    pub async fn expire_lapsed(&self, reservation_id: ReservationId) -> Result<bool, CommandError> {
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
        let outcome = self
            .reservation_command_with(
                &Caller::Staff(String::from("expiry")),
                "expiry",
                None,
                CommandName::ExpireHold.as_str(),
                &reservation_id,
                reservation_id,
                None,
                |l| booking::expire_hold(l.reservation, l.nights, l.now),
                Some(&recorded),
            )
            .await?;
        match outcome {
            Ok(_) => Ok(recorded.0.load(std::sync::atomic::Ordering::SeqCst)),
            Err(Rejection::InvalidState { .. } | Rejection::HoldStillLive) => Ok(false),
            Err(rejection) => Err(CommandError::Rejected(rejection)),
        }
    }

    /// The reservation as of now (read-your-writes: read from the inline state that the
    /// command wrote in its own transaction).
    pub async fn reservation(
        &self,
        reservation_id: ReservationId,
    ) -> Result<Option<ReservationView>, CommandError> {
        let mut conn = self.pool.acquire().await?;
        let loaded = Loader { conn: &mut conn }
            .reservation(reservation_id, false)
            .await
            .map_err(attempt_to_command)?;
        Ok(loaded.and_then(|l| ReservationView::of(&l.reservation, self.now())))
    }

    fn metadata(
        &self,
        command: &'static str,
        client: &str,
        fingerprint: Option<&RequestFingerprint>,
    ) -> EventMetadata {
        EventMetadata {
            command,
            client: client.to_owned(),
            idempotency_key: fingerprint.map(|f| f.key.as_str().to_owned()),
        }
    }

    /// The shared shape of every command on an existing reservation: claim the key,
    /// load the reservation (locked, under the pessimistic strategy) and its nights in
    /// night order, decide, append.
    #[allow(clippy::too_many_arguments)]
    async fn reservation_command<R, F>(
        &self,
        caller: &Caller,
        scope: &str,
        key: Option<IdempotencyKey>,
        command: &'static str,
        request: &R,
        reservation_id: ReservationId,
        extra_stay: Option<StayDates>,
        decide: F,
    ) -> Result<ReservationView, CommandError>
    where
        R: Serialize,
        F: Fn(Loaded<'_>) -> Result<Decision, Rejection>,
    {
        Ok(self
            .reservation_command_with(
                caller,
                scope,
                key,
                command,
                request,
                reservation_id,
                extra_stay,
                decide,
                None,
            )
            .await??)
    }

    /// The shape of [`Self::reservation_command`], with `after` written in the same
    /// transaction, and the rejection returned as the outcome rather than an error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn reservation_command_with<R, F>(
        &self,
        caller: &Caller,
        scope: &str,
        key: Option<IdempotencyKey>,
        command: &'static str,
        request: &R,
        reservation_id: ReservationId,
        extra_stay: Option<StayDates>,
        decide: F,
        after: Option<&dyn AfterDecision>,
    ) -> Result<Outcome, CommandError>
    where
        R: Serialize,
        F: Fn(Loaded<'_>) -> Result<Decision, Rejection>,
    {
        let fingerprint = key
            .map(|key| RequestFingerprint::new(scope, key, command, request))
            .transpose()?;
        let now = self.now();
        let lock = self.config.strategy.locks_nights();
        let metadata = self.metadata(command, caller.name(), fingerprint.as_ref());
        let outcome = with_retries(self.config.retry, |_| async {
            let mut tx = self.pool.begin().await?;
            let result: Result<Outcome, AttemptError> = async {
                if let Some(fingerprint) = &fingerprint {
                    if let Some(stored) =
                        idempotency::claim::<Outcome>(&mut tx, fingerprint).await?
                    {
                        return Ok(stored);
                    }
                }
                let mut loader = Loader { conn: &mut tx };
                let mut found = loader.reservation(reservation_id, false).await?;
                if lock {
                    // Queue behind every writer of this room type before taking any row
                    // lock (see `Loader::lock_room_type`), then re-read under the lock.
                    if let Some(details) = found.as_ref().and_then(|l| l.reservation.details()) {
                        loader
                            .lock_room_type(details.hotel_id, details.room_type_id)
                            .await?;
                        found = loader.reservation(reservation_id, true).await?;
                    }
                }
                let Some(loaded) = found else {
                    let outcome = Err(Rejection::ReservationNotFound);
                    if let Some(fingerprint) = &fingerprint {
                        idempotency::complete(&mut tx, fingerprint, &outcome).await?;
                    }
                    if let Some(after) = after {
                        after.write(&mut tx, &outcome, &[]).await?;
                    }
                    return Ok(outcome);
                };
                if !caller.may_act_on(&loaded.reservation) {
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
                    .chain(extra_stay.iter().flat_map(|s| s.nights()))
                    .collect();
                let dates: Vec<NaiveDate> = dates.into_iter().collect();
                let (hotel_id, room_type_id) = (details.hotel_id, details.room_type_id);
                let (hotel, _) = loader.hotel(hotel_id).await?;
                let nights = loader
                    .nights(
                        hotel_id,
                        room_type_id,
                        &dates,
                        Some(reservation_id),
                        now,
                        lock,
                    )
                    .await?;
                let decision = decide(Loaded {
                    hotel: &hotel,
                    reservation: &loaded.reservation,
                    nights: &nights.nights,
                    now,
                });
                let events = decision
                    .as_ref()
                    .map(|d| d.reservation.clone())
                    .unwrap_or_default();
                let outcome = finish(
                    &mut tx,
                    &metadata,
                    fingerprint.as_ref(),
                    &nights,
                    Some(&loaded),
                    decision,
                    now,
                )
                .await?;
                if let Some(after) = after {
                    after.write(&mut tx, &outcome, &events).await?;
                }
                Ok(outcome)
            }
            .await;
            settle(tx, result).await
        })
        .await?;
        Ok(outcome)
    }
}

fn attempt_to_command(e: AttemptError) -> CommandError {
    match e {
        AttemptError::Conflict => CommandError::Contention { attempts: 1 },
        AttemptError::Fatal(e) => e,
    }
}

/// Writes a decision (or records a rejection) and the idempotency outcome; the caller
/// commits.
async fn finish(
    conn: &mut PgConnection,
    metadata: &EventMetadata,
    fingerprint: Option<&RequestFingerprint>,
    nights: &LoadedNights,
    reservation: Option<&LoadedReservation>,
    decision: Result<Decision, Rejection>,
    now: DateTime<Utc>,
) -> Result<Outcome, AttemptError> {
    let mut writer = Writer::new(metadata)?;
    let (outcome, written) = match decision {
        Err(rejection) => (Err(rejection), None),
        Ok(decision) => {
            writer.queue_nights(nights, &decision)?;
            let after = writer.queue_reservation(reservation, &decision.reservation)?;
            let view = after.as_ref().and_then(|r| ReservationView::of(r, now));
            let view = view.ok_or_else(|| {
                AttemptError::Fatal(CommandError::Internal(
                    "a reservation command left no reservation".into(),
                ))
            })?;
            (Ok(view), after.map(|a| (a, decision.reservation)))
        }
    };
    if let Some(fingerprint) = fingerprint {
        writer.queue_idempotency(fingerprint, &outcome)?;
    }
    writer.flush(conn).await?;
    if let Some((after, events)) = written {
        crate::payments::outbox::enqueue(conn, &after, &events, now).await?;
    }
    Ok(outcome)
}
