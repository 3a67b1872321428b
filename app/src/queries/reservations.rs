//! Reservation look-ups: one reservation and its history as of now (the write side's
//! inline row), and the search by channel, guest, hotel and night over the
//! reservations view (as of its `as_of`).

use aggregates::{Reservation, ReservationId, ReservationStatus};
use chrono::{DateTime, NaiveDate, Utc};
use projections::analytics::{served_state, ReservationRow, RESERVATIONS_VIEW};
use projections::log::StoredEvent;
use sqlx::{Postgres, QueryBuilder};

use super::{Queries, QueryError};
use store::view::ReservationView;
use store::write::Loader;

/// What the search filters by; every filter given must hold.
#[derive(Debug, Clone, Default)]
pub struct ReservationFilter {
    /// The number behind a reference (see [`aggregates::Reference::number`]).
    pub reference_number: Option<i64>,
    pub channel: Option<String>,
    /// Lower-case, as the domain stores e-mails: finds the guests held before sealing.
    pub guest_email: Option<String>,
    /// The guest's id: finds the sealed guests (given with `guest_email`, either may
    /// match).
    pub guest_id: Option<String>,
    pub hotel_id: Option<i64>,
    /// Reservations whose stay includes this night.
    pub night: Option<NaiveDate>,
    /// Reservations whose stay starts on this date (the front desk's arrivals).
    pub arrival: Option<NaiveDate>,
    /// Reservations whose stay ends on this date (the front desk's departures).
    pub departure: Option<NaiveDate>,
    /// Reservations in this status as clients see it: a hold past its expiry is
    /// `expired`, not `held`.
    pub status: Option<ReservationStatus>,
    pub limit: i64,
}

/// A page of the search, newest first.
#[derive(Debug, Clone)]
pub struct ReservationPage {
    pub rows: Vec<ReservationRow>,
    /// When the view last applied events; `None` if it has never run.
    pub as_of: Option<DateTime<Utc>>,
    /// The time the page was read (a hold past its expiry reads as expired).
    pub now: DateTime<Utc>,
}

impl Queries {
    async fn stored_reservation(
        &self,
        id: ReservationId,
    ) -> Result<Option<Reservation>, QueryError> {
        let mut conn = self.pool.acquire().await?;
        let loaded = Loader { conn: &mut conn }.reservation(id, false).await?;
        Ok(loaded.map(|l| l.reservation))
    }

    /// The reservation as of now (a lapsed hold reads as expired).
    pub async fn reservation(
        &self,
        id: ReservationId,
    ) -> Result<Option<ReservationView>, QueryError> {
        let reservation = self.stored_reservation(id).await?;
        Ok(reservation.and_then(|r| ReservationView::of(&r, self.clock.now())))
    }

    /// A reservation's channel and its stream's events, in order.
    pub async fn reservation_history(
        &self,
        id: ReservationId,
    ) -> Result<Option<(String, Vec<StoredEvent>)>, QueryError> {
        let Some(reservation) = self.stored_reservation(id).await? else {
            return Ok(None);
        };
        let Some(details) = reservation.details() else {
            return Err(QueryError::Corrupt("reservation without details".into()));
        };
        let stream =
            aggregates::contract::reservation_stream_id(details.hotel_id, details.reservation_id);
        let events = self
            .stream(aggregates::AggregateType::Reservation.as_str(), &stream)
            .await?;
        Ok(Some((details.channel.clone(), events)))
    }

    /// The reservations that name a guest, newest first, from the reservations view:
    /// sealed ones by the guest's id, those held before sealing by their e-mail.
    pub async fn guest_reservations(
        &self,
        guest_id: &str,
        email: Option<&str>,
    ) -> Result<Vec<uuid::Uuid>, QueryError> {
        let mut tx = self.snapshot().await?;
        let (generation, _) = served_state(&mut tx, RESERVATIONS_VIEW).await?;
        let ids = sqlx::query_scalar(
            "SELECT reservation_id FROM reservations_view
              WHERE generation = $1 AND (guest_id = $2 OR guest_email = $3)
              ORDER BY created_at DESC, reservation_id",
        )
        .bind(generation)
        .bind(guest_id)
        .bind(email)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// Reservations matching `filter`, newest first, from the reservations view.
    pub async fn reservations(
        &self,
        filter: &ReservationFilter,
    ) -> Result<ReservationPage, QueryError> {
        let now = self.clock.now();
        let mut tx = self.snapshot().await?;
        let (generation, as_of) = served_state(&mut tx, RESERVATIONS_VIEW).await?;
        // Only the filters given go into the statement, so each shape of query gets a
        // plan that uses its index (a catch-all `$n IS NULL OR ...` would not).
        let mut sql: QueryBuilder<Postgres> = QueryBuilder::new(
            "SELECT reservation_id, hotel_id, room_type_id, start_date, end_date, rooms, status,
                    guest_name, guest_email, channel, total_cents, hold_expires_at, created_at,
                    updated_at, version, rate_plan_id, guests, cancellation_policy,
                    payment_status, authorized_cents, captured_cents, refunded_cents,
                    paid_before_ledger, released_from, guest, guest_id, currency, taxes,
                    more_lines, block_code
               FROM reservations_view WHERE generation = ",
        );
        sql.push_bind(generation);
        if let Some(number) = filter.reference_number {
            sql.push(" AND reference_number = ").push_bind(number);
        }
        if let Some(channel) = &filter.channel {
            sql.push(" AND channel = ").push_bind(channel);
        }
        match (&filter.guest_id, &filter.guest_email) {
            (Some(id), Some(email)) => {
                sql.push(" AND (guest_id = ")
                    .push_bind(id)
                    .push(" OR guest_email = ")
                    .push_bind(email)
                    .push(")");
            }
            (Some(id), None) => {
                sql.push(" AND guest_id = ").push_bind(id);
            }
            (None, Some(email)) => {
                sql.push(" AND guest_email = ").push_bind(email);
            }
            (None, None) => {}
        }
        if let Some(hotel_id) = filter.hotel_id {
            sql.push(" AND hotel_id = ").push_bind(hotel_id);
        }
        if let Some(night) = filter.night {
            sql.push(" AND start_date <= ")
                .push_bind(night)
                .push(" AND end_date > ")
                .push_bind(night);
        }
        if let Some(arrival) = filter.arrival {
            sql.push(" AND start_date = ").push_bind(arrival);
        }
        if let Some(departure) = filter.departure {
            sql.push(" AND end_date = ").push_bind(departure);
        }
        match filter.status {
            None => {}
            Some(ReservationStatus::Held) => {
                sql.push(" AND status = 'held' AND hold_expires_at > ")
                    .push_bind(now);
            }
            Some(ReservationStatus::Expired) => {
                sql.push(" AND (status = 'expired' OR (status = 'held' AND hold_expires_at <= ")
                    .push_bind(now)
                    .push("))");
            }
            Some(status) => {
                sql.push(" AND status = ").push_bind(status.as_str());
            }
        }
        sql.push(" ORDER BY created_at DESC, reservation_id LIMIT ")
            .push_bind(filter.limit);
        let rows: Vec<ReservationRow> = sql.build_query_as().fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(ReservationPage { rows, as_of, now })
    }
}

/// Reservations made in one minute, by the status they have now.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MinuteCount {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    /// Every reservation made in the minute.
    pub made: i64,
    /// Those confirmed since (including those checked in or out and no-shows).
    pub confirmed: i64,
    pub cancelled: i64,
}

/// The reservations made per minute over the last minutes.
#[derive(Debug, Clone)]
pub struct BookingRate {
    /// One per minute, oldest first, the current (partial) minute last; minutes with
    /// nothing made included.
    pub minutes: Vec<MinuteCount>,
    pub as_of: Option<DateTime<Utc>>,
}

impl Queries {
    /// Reservations made per minute over the last `minutes` minutes (the current one
    /// included), from the reservations view.
    pub async fn booking_rate(&self, minutes: u32) -> Result<BookingRate, QueryError> {
        let now = self.clock.now();
        let mut tx = self.snapshot().await?;
        let (generation, as_of) = served_state(&mut tx, RESERVATIONS_VIEW).await?;
        let minutes: Vec<MinuteCount> = sqlx::query_as(
            "WITH span AS (
                 SELECT generate_series(date_trunc('minute', $2::timestamptz)
                                        - make_interval(mins => $3 - 1),
                                        date_trunc('minute', $2::timestamptz),
                                        interval '1 minute') AS minute)
             SELECT s.minute,
                    count(v.reservation_id) AS made,
                    count(v.reservation_id) FILTER (WHERE v.status IN
                        ('confirmed', 'checked_in', 'checked_out', 'no_show')) AS confirmed,
                    count(v.reservation_id) FILTER (WHERE v.status = 'cancelled') AS cancelled
               FROM span s
               LEFT JOIN reservations_view v
                 ON v.generation = $1
                AND v.created_at >= s.minute AND v.created_at < s.minute + interval '1 minute'
              GROUP BY s.minute ORDER BY s.minute",
        )
        .bind(generation)
        .bind(now)
        .bind(i32::try_from(minutes).unwrap_or(i32::MAX))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(BookingRate { minutes, as_of })
    }
}
