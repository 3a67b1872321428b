//! Pickup: how the book of each coming night moved lately. For every night of a range,
//! the rooms booked and cancelled in the last day and the last seven days, and the rooms
//! on the books now and seven days ago, for the whole hotel (every room type, every line
//! of a reservation of several).
//!
//! From the reservations view, so a booking is counted as the read side last saw it:
//!
//! - *booked* in a window: rooms of reservations made in it that are still a booking or
//!   became one (held and not lapsed, confirmed, in house, departed, no-show) or were
//!   cancelled since (a booking made and cancelled this week counts in both);
//! - *cancelled* in a window: rooms of reservations cancelled in it (the view's last
//!   change of a cancelled reservation is its cancellation);
//! - *on the books*: rooms of live holds and of confirmed, in-house and departed stays;
//!   *seven days ago*: those made before then, and those cancelled since that were made
//!   before then. A reservation counts from when it was made (a hold that was still
//!   waiting for payment then is counted as on the books).
//!
//! Nights a stay gave back (checked out early, no-show) are left out from the night they
//! were released.

use aggregates::{HotelId, StayDates};
use chrono::{DateTime, Duration, NaiveDate, Utc};

use projections::analytics::{served_state, RESERVATIONS_VIEW};

use super::{Queries, QueryError};

/// One night's pickup.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PickupNight {
    pub night: NaiveDate,
    pub booked_last_day: i64,
    pub booked_last_week: i64,
    pub cancelled_last_day: i64,
    pub cancelled_last_week: i64,
    pub on_the_books: i64,
    pub on_the_books_week_ago: i64,
}

#[derive(Debug, Clone)]
pub struct PickupRead {
    /// When the reservations view last applied events.
    pub as_of: Option<DateTime<Utc>>,
    /// The moment the windows end at.
    pub now: DateTime<Utc>,
    /// Every night of the range, in order.
    pub nights: Vec<PickupNight>,
}

impl Queries {
    /// The pickup of `hotel`'s nights in `range`; `None` if there is no such hotel.
    pub async fn pickup(
        &self,
        hotel: HotelId,
        range: &StayDates,
    ) -> Result<Option<PickupRead>, QueryError> {
        let now = self.clock.now();
        let mut tx = self.snapshot().await?;
        if super::room_types_of(&mut tx, hotel).await?.is_none() {
            return Ok(None);
        }
        let (generation, as_of) = served_state(&mut tx, RESERVATIONS_VIEW).await?;
        let nights: Vec<PickupNight> = sqlx::query_as(
            "WITH stays AS (
                 SELECT start_date, least(end_date, coalesce(released_from, end_date)) AS left_on,
                        rooms, created_at, updated_at,
                        CASE WHEN status = 'held' AND hold_expires_at <= $5 THEN 'expired'
                             ELSE status END AS status
                   FROM reservations_view
                  WHERE generation = $1 AND hotel_id = $2 AND start_date < $4
                    AND end_date > $3),
             nights AS (
                 SELECT s.*, d::date AS night
                   FROM stays s
                  CROSS JOIN generate_series(greatest(s.start_date, $3),
                                             least(s.left_on, $4) - 1, interval '1 day') d)
             SELECT d::date AS night,
                    coalesce(sum(n.rooms) FILTER (WHERE n.created_at > $5 - interval '1 day'
                        AND n.status NOT IN ('expired', 'declined')), 0)::bigint AS booked_last_day,
                    coalesce(sum(n.rooms) FILTER (WHERE n.created_at > $6
                        AND n.status NOT IN ('expired', 'declined')), 0)::bigint AS booked_last_week,
                    coalesce(sum(n.rooms) FILTER (WHERE n.status = 'cancelled'
                        AND n.updated_at > $5 - interval '1 day'), 0)::bigint AS cancelled_last_day,
                    coalesce(sum(n.rooms) FILTER (WHERE n.status = 'cancelled'
                        AND n.updated_at > $6), 0)::bigint AS cancelled_last_week,
                    coalesce(sum(n.rooms) FILTER (WHERE n.status IN
                        ('held', 'confirmed', 'checked_in', 'checked_out', 'no_show')), 0)::bigint
                        AS on_the_books,
                    coalesce(sum(n.rooms) FILTER (WHERE n.created_at <= $6 AND (n.status IN
                        ('held', 'confirmed', 'checked_in', 'checked_out', 'no_show')
                        OR (n.status = 'cancelled' AND n.updated_at > $6))), 0)::bigint
                        AS on_the_books_week_ago
               FROM generate_series($3, $4 - 1, interval '1 day') d
               LEFT JOIN nights n ON n.night = d::date
              GROUP BY d
              ORDER BY d",
        )
        .bind(generation)
        .bind(hotel.get())
        .bind(range.start())
        .bind(range.end())
        .bind(now)
        .bind(now - Duration::days(7))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(PickupRead { as_of, now, nights }))
    }
}
