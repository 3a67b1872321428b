//! The reservations view (`reservations_view`): one row per reservation, for look-ups by
//! channel, by guest email, by hotel and date, and by reference (see the [module
//! docs](super)). Each
//! row carries the rate plan, the cancellation policy and the guests the stay was sold
//! with, from its `ReservationHeld`, because every answer about a reservation states
//! them and the policy is the one recorded then, not the plan's of today.

use std::collections::{HashMap, HashSet};

use aggregates::cancellation::CancellationPolicy;
use aggregates::{
    Guest, PaymentStatus, Personal, ReservationEvent, ReservationId, ReservationStatus, TypedEvent,
};
use chrono::{DateTime, NaiveDate, Utc};
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
}

impl ReservationRow {
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
        v.released_from, v.guest, v.guest_id
   FROM unnest($2::uuid[]) AS k (id)
  CROSS JOIN LATERAL (
        SELECT * FROM reservations_view r
         WHERE r.generation = $1 AND r.reservation_id = k.id
        OFFSET 0) v";

/// New rows of the reservations view, columns as arrays (generation `$1`).
const INSERT_VIEW_ROWS: &str = "INSERT INTO reservations_view (generation, reservation_id,
        hotel_id, room_type_id, start_date, end_date, rooms, status, guest_name, guest_email,
        channel, total_cents, hold_expires_at, created_at, updated_at, version,
        rate_plan_id, guests, cancellation_policy, payment_status, authorized_cents,
        captured_cents, refunded_cents, paid_before_ledger, released_from, guest, guest_id,
        reference_number)
     SELECT $1, * FROM unnest($2::uuid[], $3::bigint[], $4::bigint[], $5::date[],
            $6::date[], $7::int[], $8::text[], $9::text[], $10::text[], $11::text[],
            $12::bigint[], $13::timestamptz[], $14::timestamptz[], $15::timestamptz[],
            $16::bigint[], $17::bigint[], $18::int[], $19::jsonb[], $20::text[],
            $21::bigint[], $22::bigint[], $23::bigint[], $24::bool[], $25::date[],
            $26::jsonb[], $27::text[], $28::bigint[])";

/// Rows of the reservations view that exist, bound as [`INSERT_VIEW_ROWS`] binds them.
/// The plan, guests and policy are fixed when the stay is held, but an update writes
/// them too: a row is rewritten whole from what was loaded and folded, so they are
/// written back as they were read.
const UPDATE_VIEW_ROWS: &str = "UPDATE reservations_view AS v
        SET hotel_id = u.hotel_id, room_type_id = u.room_type_id,
            start_date = u.start_date, end_date = u.end_date, rooms = u.rooms,
            status = u.status, guest_name = u.guest_name, guest_email = u.guest_email,
            channel = u.channel, total_cents = u.total_cents,
            hold_expires_at = u.hold_expires_at, created_at = u.created_at,
            updated_at = u.updated_at, version = u.version,
            rate_plan_id = u.rate_plan_id, guests = u.guests,
            cancellation_policy = u.cancellation_policy,
            payment_status = u.payment_status, authorized_cents = u.authorized_cents,
            captured_cents = u.captured_cents, refunded_cents = u.refunded_cents,
            paid_before_ledger = u.paid_before_ledger, released_from = u.released_from,
            guest = u.guest, guest_id = u.guest_id
       FROM unnest($2::uuid[], $3::bigint[], $4::bigint[], $5::date[], $6::date[],
                   $7::int[], $8::text[], $9::text[], $10::text[], $11::text[],
                   $12::bigint[], $13::timestamptz[], $14::timestamptz[],
                   $15::timestamptz[], $16::bigint[], $17::bigint[], $18::int[],
                   $19::jsonb[], $20::text[], $21::bigint[], $22::bigint[],
                   $23::bigint[], $24::bool[], $25::date[], $26::jsonb[], $27::text[])
            AS u (reservation_id, hotel_id, room_type_id, start_date, end_date, rooms,
                  status, guest_name, guest_email, channel, total_cents, hold_expires_at,
                  created_at, updated_at, version, rate_plan_id, guests,
                  cancellation_policy, payment_status, authorized_cents, captured_cents,
                  refunded_cents, paid_before_ledger, released_from, guest, guest_id)
      WHERE v.generation = $1 AND v.reservation_id = u.reservation_id";

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
                    rooms: to_i32(i64::from(details.rooms.get()), "rooms")?,
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
                ..
            } => {
                row.start_date = stay.start();
                row.end_date = stay.end();
                row.total_cents = total_cents.get();
                row.updated_at = changed_at;
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
        sql: &'static str,
    ) -> anyhow::Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        macro_rules! column {
            ($field:ident) => {
                rows.iter().map(|r| r.$field.clone()).collect::<Vec<_>>()
            };
        }
        sqlx::query(sql)
            .bind(generation)
            .bind(column!(reservation_id))
            .bind(column!(hotel_id))
            .bind(column!(room_type_id))
            .bind(column!(start_date))
            .bind(column!(end_date))
            .bind(column!(rooms))
            .bind(column!(status))
            .bind(column!(guest_name))
            .bind(column!(guest_email))
            .bind(column!(channel))
            .bind(column!(total_cents))
            .bind(column!(hold_expires_at))
            .bind(column!(created_at))
            .bind(column!(updated_at))
            .bind(column!(version))
            .bind(column!(rate_plan_id))
            .bind(column!(guests))
            .bind(column!(cancellation_policy))
            .bind(column!(payment_status))
            .bind(column!(authorized_cents))
            .bind(column!(captured_cents))
            .bind(column!(refunded_cents))
            .bind(column!(paid_before_ledger))
            .bind(column!(released_from))
            .bind(column!(guest))
            .bind(column!(guest_id))
            // $28, new rows only: the number behind the reference the id ends in. An
            // update leaves it as it is (the id does not change).
            .bind(
                rows.iter()
                    .map(|r| reference_number(r.reservation_id))
                    .collect::<Vec<_>>(),
            )
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
                TypedEvent::Hotel { .. } | TypedEvent::RoomNight { .. } => {}
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
        Self::store(tx, generation, &existing, UPDATE_VIEW_ROWS).await?;
        Self::store(tx, generation, &new, INSERT_VIEW_ROWS).await
    }

    async fn clear(&mut self, conn: &mut PgConnection, generation: i32) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM reservations_view WHERE generation = $1")
            .bind(generation)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
