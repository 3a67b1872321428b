//! The reservations view (`reservations_view`): one row per reservation, for look-ups by
//! channel, by guest email, by hotel and date, and by reference (see the [module
//! docs](super)). Each
//! row carries the rate plan, the cancellation policy and the guests the stay was sold
//! with, from its `ReservationHeld`, because every answer about a reservation states
//! them and the policy is the one recorded then, not the plan's of today.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use aggregates::cancellation::CancellationPolicy;
use aggregates::reservation::Line;
use aggregates::taxes::{StayFigures, TaxedStay, Taxes};
use aggregates::{
    Cents, Guest, PaymentStatus, Personal, ReservationEvent, ReservationId, ReservationStatus,
    TypedEvent,
};
use chrono::{DateTime, NaiveDate, Utc};
use columns::{columns, Columns, Statement};
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{to_i32, RESERVATIONS_VIEW};
use crate::log::StoredEvent;
use crate::runner::Projection;

/// The guest columns of a row: the sealed (or erased) value, the guest's id, and the
/// name and e-mail of a guest in the clear.
type GuestColumns = (
    Option<Json<Personal<Guest>>>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// One row per reservation; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReservationsView;

/// One row of `reservations_view` (without its generation): what the projection
/// writes and what the look-up endpoint reads.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ReservationRow {
    pub reservation_id: Uuid,
    pub hotel_id: i64,
    pub room_type_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub rooms: i32,
    pub status: String,
    /// The guest in the clear: rows of stays held before personal data was sealed, until
    /// their guest is erased.
    pub guest_name: Option<String>,
    pub guest_email: Option<String>,
    pub channel: String,
    pub total_cents: i64,
    pub hold_expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub version: i64,
    /// The plan the stay was sold under; `None`: the base rate.
    pub rate_plan_id: Option<i64>,
    /// Guests per room.
    pub guests: i32,
    /// The policy the stay was sold under, as its `ReservationHeld` recorded it; `None`
    /// (rows of stays held before rate plans existed) is the house policy: read it
    /// through [`Self::cancellation_policy`].
    pub cancellation_policy: Option<Json<CancellationPolicy>>,
    /// The payment's status (`PaymentStatus`'s names) and its amounts.
    pub payment_status: String,
    pub authorized_cents: i64,
    pub captured_cents: i64,
    pub refunded_cents: i64,
    /// Confirmed before the payment ledger existed (see the migration).
    pub paid_before_ledger: bool,
    /// Checked out or a no-show: the first of its nights given back to sale.
    pub released_from: Option<NaiveDate>,
    /// The guest as the event carries it (`Personal<Guest>`: sealed, or erased); `None`
    /// on rows whose guest is in the clear columns above.
    pub guest: Option<Json<Personal<Guest>>>,
    /// The sealed guest's id, for the look-up by guest (gone once erased).
    pub guest_id: Option<String>,
    /// The ISO 4217 code of every amount of the row.
    pub currency: String,
    /// The taxes the stay was sold with; `None`: none.
    pub taxes: Option<Json<Taxes>>,
    /// The room types beyond the first (`None`: one room type); `rooms` counts theirs too.
    pub more_lines: Option<Json<Vec<Line>>>,
    /// The group block it was booked from, if any.
    pub block_code: Option<String>,
}

/// One room type of a row: its rooms, guests per room, plan and price.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLine {
    pub room_type_id: i64,
    pub rooms: u32,
    pub guests: u32,
    pub rate_plan_id: Option<i64>,
    pub cancellation_policy: CancellationPolicy,
    pub total_cents: i64,
}

impl ReservationRow {
    /// The stay's taxes and what the guest owes, computed as the reservation computes
    /// them (see `ReservationDetails::taxed`).
    pub fn taxed(&self) -> TaxedStay {
        let room_total = Cents::new(self.total_cents);
        let Some(Json(taxes)) = &self.taxes else {
            return TaxedStay::untaxed(room_total);
        };
        let nights = u32::try_from((self.end_date - self.start_date).num_days()).unwrap_or(0);
        let (rooms, guests) = match &self.more_lines {
            // Over several lines, every guest counts as one room's (as the
            // reservation counts them).
            Some(Json(more)) if !more.is_empty() => {
                (1, self.lines().iter().map(|l| l.rooms * l.guests).sum())
            }
            _ => (
                u32::try_from(self.rooms).unwrap_or(0),
                u32::try_from(self.guests).unwrap_or(0),
            ),
        };
        taxes.due_on(StayFigures {
            room_total,
            nights,
            rooms,
            guests,
        })
    }

    /// Every line, the first one first (from the row's own columns), as the
    /// reservation's `ReservationDetails::lines` gives them.
    pub fn lines(&self) -> Vec<RowLine> {
        let more: &[Line] = self.more_lines.as_ref().map_or(&[], |m| m.0.as_slice());
        let more_rooms: u32 = more.iter().map(|l| l.rooms.get()).sum();
        let more_cents: i64 = more.iter().map(|l| l.total_cents.get()).sum();
        let mut lines = Vec::with_capacity(1 + more.len());
        lines.push(RowLine {
            room_type_id: self.room_type_id,
            rooms: u32::try_from(self.rooms)
                .unwrap_or(0)
                .saturating_sub(more_rooms),
            guests: u32::try_from(self.guests).unwrap_or(1),
            rate_plan_id: self.rate_plan_id,
            cancellation_policy: self.cancellation_policy(),
            total_cents: self.total_cents - more_cents,
        });
        lines.extend(more.iter().map(|l| RowLine {
            room_type_id: l.room_type_id.get(),
            rooms: l.rooms.get(),
            guests: l.guests.get(),
            rate_plan_id: l.rate_plan_id.map(|p| p.get()),
            cancellation_policy: l.cancellation_policy,
            total_cents: l.total_cents.get(),
        }));
        lines
    }

    /// The guest, as the reservation carries it (in the clear on older rows).
    pub fn guest(&self) -> Personal<Guest> {
        if let Some(Json(guest)) = &self.guest {
            return guest.clone();
        }
        match (&self.guest_name, &self.guest_email) {
            (Some(name), Some(email)) => {
                Guest::parse(name, email).map_or(Personal::Erased, Personal::Clear)
            }
            _ => Personal::Erased,
        }
    }

    /// The columns of a row's guest: `(guest, guest_id, name, email)`.
    fn guest_columns(guest: &Personal<Guest>) -> GuestColumns {
        match guest {
            Personal::Clear(g) => (
                None,
                None,
                Some(g.name().to_owned()),
                Some(g.email().to_owned()),
            ),
            Personal::Sealed(sealed) => (
                Some(Json(guest.clone())),
                Some(sealed.guest.as_str().to_owned()),
                None,
                None,
            ),
            Personal::Erased => (Some(Json(Personal::Erased)), None, None, None),
        }
    }

    /// The cancellation policy the stay was sold under.
    pub fn cancellation_policy(&self) -> CancellationPolicy {
        self.cancellation_policy
            .map_or(CancellationPolicy::HOUSE, |policy| policy.0)
    }

    /// The payment's status as its amounts state it (a void is final).
    fn restate_payment(&mut self) {
        if self.payment_status == PaymentStatus::Voided.as_str() {
            return;
        }
        let status = if self.authorized_cents <= 0 {
            PaymentStatus::None
        } else if self.captured_cents <= 0 {
            PaymentStatus::Authorized
        } else if self.refunded_cents <= 0 {
            PaymentStatus::Captured
        } else if self.refunded_cents >= self.captured_cents {
            PaymentStatus::Refunded
        } else {
            PaymentStatus::PartiallyRefunded
        };
        status.as_str().clone_into(&mut self.payment_status);
    }
}

/// The reservations view's rows of generation `$1` with the ids `$2` (those that exist).
///
/// One primary-key probe per id, whatever the planner believes of the table: as
/// `reservation_id = ANY($2)`, a table grown since its last ANALYZE (or never analyzed)
/// was read through another index, all of a generation's rows, for every batch (see
/// docs/benchmarks.md, `plans-without-statistics`). The lateral subquery with OFFSET 0 cannot be turned
/// into a join that scans the table. Public so that a test can check its plans.
pub const LOAD_VIEW_ROWS: &str = "SELECT v.reservation_id, v.hotel_id, v.room_type_id,
        v.start_date, v.end_date, v.rooms, v.status, v.guest_name, v.guest_email,
        v.channel, v.total_cents, v.hold_expires_at, v.created_at, v.updated_at, v.version,
        v.rate_plan_id, v.guests, v.cancellation_policy, v.payment_status,
        v.authorized_cents, v.captured_cents, v.refunded_cents, v.paid_before_ledger,
        v.released_from, v.guest, v.guest_id, v.currency, v.taxes, v.more_lines,
        v.block_code
   FROM unnest($2::uuid[]) AS k (id)
  CROSS JOIN LATERAL (
        SELECT * FROM reservations_view r
         WHERE r.generation = $1 AND r.reservation_id = k.id
        OFFSET 0) v";

columns! {
    /// Rows of the view to write, column by column (see [`ReservationRow`]).
    struct ViewColumns {
        reservation_id: Uuid = "uuid",
        hotel_id: i64 = "bigint",
        room_type_id: i64 = "bigint",
        start_date: NaiveDate = "date",
        end_date: NaiveDate = "date",
        rooms: i32 = "int",
        status: String = "text",
        guest_name: Option<String> = "text",
        guest_email: Option<String> = "text",
        channel: String = "text",
        total_cents: i64 = "bigint",
        hold_expires_at: DateTime<Utc> = "timestamptz",
        created_at: DateTime<Utc> = "timestamptz",
        updated_at: DateTime<Utc> = "timestamptz",
        version: i64 = "bigint",
        rate_plan_id: Option<i64> = "bigint",
        guests: i32 = "int",
        cancellation_policy: Option<Json<CancellationPolicy>> = "jsonb",
        payment_status: String = "text",
        authorized_cents: i64 = "bigint",
        captured_cents: i64 = "bigint",
        refunded_cents: i64 = "bigint",
        paid_before_ledger: bool = "bool",
        released_from: Option<NaiveDate> = "date",
        guest: Option<Json<Personal<Guest>>> = "jsonb",
        guest_id: Option<String> = "text",
        currency: String = "text",
        taxes: Option<Json<Taxes>> = "jsonb",
        more_lines: Option<Json<Vec<Line>>> = "jsonb",
        block_code: Option<String> = "text",
        /// New rows only: the number behind the reference the id ends in. An update
        /// leaves it as it is (the id does not change).
        reference_number: i64 = "bigint",
    }
}

impl ViewColumns {
    fn of(rows: &[&ReservationRow]) -> Self {
        let mut columns = Self::default();
        for row in rows {
            columns.reservation_id.push(row.reservation_id);
            columns.hotel_id.push(row.hotel_id);
            columns.room_type_id.push(row.room_type_id);
            columns.start_date.push(row.start_date);
            columns.end_date.push(row.end_date);
            columns.rooms.push(row.rooms);
            columns.status.push(row.status.clone());
            columns.guest_name.push(row.guest_name.clone());
            columns.guest_email.push(row.guest_email.clone());
            columns.channel.push(row.channel.clone());
            columns.total_cents.push(row.total_cents);
            columns.hold_expires_at.push(row.hold_expires_at);
            columns.created_at.push(row.created_at);
            columns.updated_at.push(row.updated_at);
            columns.version.push(row.version);
            columns.rate_plan_id.push(row.rate_plan_id);
            columns.guests.push(row.guests);
            columns.cancellation_policy.push(row.cancellation_policy);
            columns.payment_status.push(row.payment_status.clone());
            columns.authorized_cents.push(row.authorized_cents);
            columns.captured_cents.push(row.captured_cents);
            columns.refunded_cents.push(row.refunded_cents);
            columns.paid_before_ledger.push(row.paid_before_ledger);
            columns.released_from.push(row.released_from);
            columns.guest.push(row.guest.clone());
            columns.guest_id.push(row.guest_id.clone());
            columns.currency.push(row.currency.clone());
            columns.taxes.push(row.taxes.clone());
            columns.more_lines.push(row.more_lines.clone());
            columns.block_code.push(row.block_code.clone());
            columns
                .reference_number
                .push(reference_number(row.reservation_id));
        }
        columns
    }
}

/// New rows of the reservations view (generation `$1`).
const INSERT_VIEW_ROWS: Statement = Statement::new(
    "INSERT INTO reservations_view (generation, reservation_id, hotel_id, room_type_id,
        start_date, end_date, rooms, status, guest_name, guest_email, channel, total_cents,
        hold_expires_at, created_at, updated_at, version, rate_plan_id, guests,
        cancellation_policy, payment_status, authorized_cents, captured_cents,
        refunded_cents, paid_before_ledger, released_from, guest, guest_id, currency, taxes,
        more_lines, block_code, reference_number)
     SELECT $1, batch.reservation_id, batch.hotel_id, batch.room_type_id, batch.start_date,
            batch.end_date, batch.rooms, batch.status, batch.guest_name, batch.guest_email,
            batch.channel, batch.total_cents, batch.hold_expires_at, batch.created_at,
            batch.updated_at, batch.version, batch.rate_plan_id, batch.guests,
            batch.cancellation_policy, batch.payment_status, batch.authorized_cents,
            batch.captured_cents, batch.refunded_cents, batch.paid_before_ledger,
            batch.released_from, batch.guest, batch.guest_id, batch.currency, batch.taxes,
            batch.more_lines, batch.block_code, batch.reference_number
       FROM {batch}",
)
.after(1);

/// Rows of the reservations view that exist (generation `$1`). The plan, guests and
/// policy are fixed when the stay is held, but an update writes them too: a row is
/// rewritten whole from what was loaded and folded, so they are written back as they
/// were read.
const UPDATE_VIEW_ROWS: Statement = Statement::new(
    "UPDATE reservations_view AS v
        SET hotel_id = batch.hotel_id, room_type_id = batch.room_type_id,
            start_date = batch.start_date, end_date = batch.end_date, rooms = batch.rooms,
            status = batch.status, guest_name = batch.guest_name,
            guest_email = batch.guest_email, channel = batch.channel,
            total_cents = batch.total_cents, hold_expires_at = batch.hold_expires_at,
            created_at = batch.created_at, updated_at = batch.updated_at,
            version = batch.version, rate_plan_id = batch.rate_plan_id, guests = batch.guests,
            cancellation_policy = batch.cancellation_policy,
            payment_status = batch.payment_status,
            authorized_cents = batch.authorized_cents,
            captured_cents = batch.captured_cents, refunded_cents = batch.refunded_cents,
            paid_before_ledger = batch.paid_before_ledger,
            released_from = batch.released_from, guest = batch.guest,
            guest_id = batch.guest_id, currency = batch.currency, taxes = batch.taxes,
            more_lines = batch.more_lines, block_code = batch.block_code
       FROM {batch}
      WHERE v.generation = $1 AND v.reservation_id = batch.reservation_id",
)
.after(1);

impl ReservationsView {
    /// Applies one event to the rows loaded for the batch.
    fn fold(
        rows: &mut HashMap<Uuid, ReservationRow>,
        id: Uuid,
        sequence: i64,
        event: &ReservationEvent,
    ) -> anyhow::Result<bool> {
        if let ReservationEvent::ReservationHeld(details) = event {
            if rows.get(&id).is_some_and(|row| row.version >= sequence) {
                return Ok(false);
            }
            let (guest, guest_id, guest_name, guest_email) =
                ReservationRow::guest_columns(&details.guest);
            rows.insert(
                id,
                ReservationRow {
                    reservation_id: id,
                    hotel_id: details.hotel_id.get(),
                    room_type_id: details.room_type_id.get(),
                    start_date: details.stay.start(),
                    end_date: details.stay.end(),
                    rooms: to_i32(i64::from(details.all_rooms()), "rooms")?,
                    status: ReservationStatus::Held.as_str().to_owned(),
                    guest_name,
                    guest_email,
                    channel: details.channel.clone(),
                    total_cents: details.total_cents.get(),
                    hold_expires_at: details.hold_expires_at,
                    created_at: details.created_at,
                    updated_at: details.created_at,
                    version: sequence,
                    rate_plan_id: details.rate_plan_id.map(|id| id.get()),
                    guests: to_i32(i64::from(details.guests.get()), "guests")?,
                    cancellation_policy: Some(Json(details.cancellation_policy)),
                    payment_status: PaymentStatus::None.as_str().to_owned(),
                    authorized_cents: 0,
                    captured_cents: 0,
                    refunded_cents: 0,
                    paid_before_ledger: false,
                    released_from: None,
                    guest,
                    guest_id,
                    currency: details.currency.code().to_owned(),
                    taxes: (!details.taxes.is_empty()).then(|| Json(details.taxes.clone())),
                    more_lines: (!details.more_lines.is_empty())
                        .then(|| Json(details.more_lines.clone())),
                    block_code: details.block_code.map(String::from),
                },
            );
            return Ok(true);
        }
        let Some(row) = rows.get_mut(&id) else {
            // Only possible if the log lost the stream's first event; say so, and keep
            // the rest of the view moving.
            tracing::warn!(reservation = %id, sequence, "event for a reservation the view never saw held; skipped");
            return Ok(false);
        };
        if row.version >= sequence {
            return Ok(false);
        }
        row.version = sequence;
        match *event {
            ReservationEvent::ReservationHeld(_) => {}
            ReservationEvent::ReservationConfirmed {
                confirmed_at,
                ref payment,
                capture_due_at,
            } => {
                row.status = ReservationStatus::Confirmed.as_str().to_owned();
                row.updated_at = confirmed_at;
                if let Some(payment) = payment {
                    row.authorized_cents = payment.amount_cents.get();
                    // Without a deadline: captured at once, by the rule of the time.
                    if capture_due_at.is_none() {
                        row.captured_cents = payment.amount_cents.get();
                        row.paid_before_ledger = true;
                    }
                }
            }
            ReservationEvent::ReservationCancelled {
                cancelled_at,
                refund_cents,
                ..
            } => {
                row.status = ReservationStatus::Cancelled.as_str().to_owned();
                row.updated_at = cancelled_at;
                // Since the ledger, the refund moves by its own event.
                if row.paid_before_ledger {
                    row.refunded_cents += refund_cents.get();
                }
            }
            // Nights held for a move being paid for: the stay is what it was.
            ReservationEvent::DateChangeHeld { held_at, .. } => {
                row.updated_at = held_at;
            }
            ReservationEvent::DateChangeReleased { released_at } => {
                row.updated_at = released_at;
            }
            ReservationEvent::AuthorizationIncreased {
                amount_cents,
                authorized_at,
                ..
            } => {
                row.authorized_cents += amount_cents.get();
                row.updated_at = authorized_at;
            }
            ReservationEvent::PaymentCaptured {
                amount_cents,
                captured_at,
                ..
            } => {
                row.captured_cents += amount_cents.get();
                row.updated_at = captured_at;
            }
            ReservationEvent::PaymentVoided { voided_at, .. } => {
                PaymentStatus::Voided
                    .as_str()
                    .clone_into(&mut row.payment_status);
                row.updated_at = voided_at;
            }
            ReservationEvent::PaymentRefunded {
                amount_cents,
                refunded_at,
                ..
            } => {
                row.refunded_cents += amount_cents.get();
                row.updated_at = refunded_at;
            }
            ReservationEvent::HoldExpired { expired_at } => {
                row.status = ReservationStatus::Expired.as_str().to_owned();
                row.updated_at = expired_at;
            }
            ReservationEvent::DatesChanged {
                stay,
                total_cents,
                changed_at,
                ref more_line_prices,
                ..
            } => {
                row.start_date = stay.start();
                row.end_date = stay.end();
                row.total_cents = total_cents.get();
                row.updated_at = changed_at;
                if let Some(Json(more)) = row.more_lines.as_mut() {
                    for (line, price) in more.iter_mut().zip(more_line_prices) {
                        line.total_cents = price.total_cents;
                        line.first_night_cents = price.first_night_cents;
                    }
                }
            }
            ReservationEvent::PaymentDeclined { declined_at, .. } => {
                row.status = ReservationStatus::Declined.as_str().to_owned();
                row.updated_at = declined_at;
            }
            ReservationEvent::GuestCheckedIn { checked_in_at } => {
                row.status = ReservationStatus::CheckedIn.as_str().to_owned();
                row.updated_at = checked_in_at;
            }
            ReservationEvent::GuestCheckedOut {
                checked_out_at,
                released_from,
            } => {
                row.status = ReservationStatus::CheckedOut.as_str().to_owned();
                row.updated_at = checked_out_at;
                row.released_from = Some(released_from);
            }
            ReservationEvent::NoShowRecorded {
                recorded_at,
                released_from,
            } => {
                row.status = ReservationStatus::NoShow.as_str().to_owned();
                row.updated_at = recorded_at;
                row.released_from = Some(released_from);
            }
            // The status stays what it was; the refund is the payment side's business.
            ReservationEvent::LatePaymentRefunded { refunded_at, .. } => {
                row.updated_at = refunded_at;
            }
            // Nothing of the guest stays, sealed or in the clear, nor their id.
            ReservationEvent::GuestErased { erased_at } => {
                (row.guest, row.guest_id, row.guest_name, row.guest_email) =
                    ReservationRow::guest_columns(&Personal::Erased);
                row.updated_at = erased_at;
            }
        }
        row.restate_payment();
        Ok(true)
    }

    async fn load(
        tx: &mut PgConnection,
        generation: i32,
        ids: &[Uuid],
    ) -> anyhow::Result<HashMap<Uuid, ReservationRow>> {
        let rows: Vec<ReservationRow> = sqlx::query_as(LOAD_VIEW_ROWS)
            .bind(generation)
            .bind(ids)
            .fetch_all(&mut *tx)
            .await?;
        Ok(rows.into_iter().map(|r| (r.reservation_id, r)).collect())
    }

    /// Runs `sql` (one of the two below) with the rows' columns bound as arrays.
    async fn store(
        tx: &mut PgConnection,
        generation: i32,
        rows: &[&ReservationRow],
        statement: Statement,
        sql: &'static OnceLock<String>,
    ) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let columns = ViewColumns::of(rows);
        let sets: [(&str, &dyn Columns); 1] = [("batch", &columns)];
        let sql = sql.get_or_init(|| statement.render(&sets));
        Statement::bind(sqlx::query(sql).bind(generation), &sets)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }
}

/// The number behind a reservation's reference, as the view indexes it.
fn reference_number(id: Uuid) -> i64 {
    let number = ReservationId::from_uuid(id).reference().number();
    i64::try_from(number).unwrap_or(i64::MAX)
}

impl Projection for ReservationsView {
    fn name(&self) -> &'static str {
        RESERVATIONS_VIEW
    }

    async fn apply(
        &mut self,
        tx: &mut PgConnection,
        generation: i32,
        batch: &[StoredEvent],
    ) -> anyhow::Result<()> {
        let mut events = Vec::new();
        for stored in batch {
            match stored.typed_for(RESERVATIONS_VIEW)? {
                TypedEvent::Reservation {
                    reservation_id,
                    event,
                    ..
                } => events.push((reservation_id.as_uuid(), stored.sequence, event)),
                TypedEvent::Hotel { .. }
                | TypedEvent::RoomNight { .. }
                | TypedEvent::Block { .. } => {}
            }
        }
        if events.is_empty() {
            return Ok(());
        }
        let ids: Vec<Uuid> = events
            .iter()
            .map(|(id, _, _)| *id)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let mut rows = Self::load(tx, generation, &ids).await?;
        let stored: HashSet<Uuid> = rows.keys().copied().collect();
        let mut changed = HashSet::new();
        for (id, sequence, event) in events {
            if Self::fold(&mut rows, id, sequence, event)? {
                changed.insert(id);
            }
        }
        // Rows that exist are updated, new ones inserted (the transaction holds this
        // projection's checkpoint lock: no other writer adds one between). An upsert
        // would pay a speculative insertion or a row lock record for each.
        let (existing, new): (Vec<&ReservationRow>, Vec<&ReservationRow>) = changed
            .iter()
            .filter_map(|id| rows.get(id))
            .partition(|row| stored.contains(&row.reservation_id));
        static UPDATE_SQL: OnceLock<String> = OnceLock::new();
        static INSERT_SQL: OnceLock<String> = OnceLock::new();
        Self::store(tx, generation, &existing, UPDATE_VIEW_ROWS, &UPDATE_SQL).await?;
        Self::store(tx, generation, &new, INSERT_VIEW_ROWS, &INSERT_SQL).await
    }

    async fn clear(&mut self, conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM reservations_view WHERE generation = $1")
            .bind(generation)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
