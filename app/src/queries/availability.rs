//! Availability for a stay: from the Redis read model when it can answer with
//! confidence, else from the write side's rows, exact as of now.
//!
//! The read model is skipped (and PostgreSQL answers) when Redis is down or slow, the
//! projection has not caught up, the hotel, one of its room types or a night of the
//! stay is unknown to it (unknown is not sold out: see [`holds_every_night`]), or a
//! night is down to its last room, where a stale "1 left" costs most. Either way the answer says where it
//! came from and as of when; a hold never relies on it.
//!
//! Both sources end in the same place: a hotel's catalog and, per room type and date, a
//! view of the night (rooms left, base rate, restrictions, plans' own rates), from
//! which the domain prices each plan and lists the bookable offers
//! (`aggregates::booking::offers`). So the cache and the database can only differ in
//! how fresh their nights are, never in the arithmetic. The city search
//! (`search.rs`) reads the same way, over many hotels.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aggregates::booking::{self, NightView, Offer, OfferRequest, SaleTerms};
use aggregates::restrictions::RestrictionSet;
use aggregates::room_night::rooms_left;
use aggregates::types::local_date;
use aggregates::{
    BookingLimits, Cents, GuestCount, Hotel, HotelId, RatePlanId, RoomCount, RoomTypeId, StayDates,
};
use chrono::{DateTime, Days, NaiveDate, Utc};
use projections::availability::Reader;
use sqlx::Row;

use super::memo::OfferMemo;
use super::{Lsn, Queries, QueryError};

/// How long a read waits for Redis before asking PostgreSQL instead.
const CACHE_TIMEOUT: Duration = Duration::from_millis(300);

/// After the model failed to answer, how long reads go straight to PostgreSQL before
/// one of them tries Redis again.
const CACHE_BACKOFF: Duration = Duration::from_secs(1);

/// Whether reads should try the model: a breaker over Redis's failures. While Redis is
/// down, every attempt waits for the connection to be refused or retried (some 150 ms
/// a read), so after a failure reads skip it for [`CACHE_BACKOFF`]; then one read tries
/// it (the others keep skipping meanwhile) and a success closes the breaker. See
/// docs/benchmarks.md, `redis-down-refusals`.
#[derive(Debug)]
struct Breaker {
    started: std::time::Instant,
    /// 0: closed (try the model). Otherwise the time, in ms since `started`, until which
    /// reads skip it.
    open_until: std::sync::atomic::AtomicU64,
}

impl Breaker {
    fn new() -> Self {
        Self {
            started: std::time::Instant::now(),
            open_until: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// May this read try the model? Past the back-off, the first caller gets the trial
    /// (and moves the deadline on, so the others keep skipping while it runs).
    fn admit(&self) -> bool {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        let now = self.now_ms();
        if now < until {
            return false;
        }
        let next = now.saturating_add(backoff_ms()).max(1);
        self.open_until
            .compare_exchange(until, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn succeeded(&self) {
        if self.open_until.load(Ordering::Acquire) != 0 {
            self.open_until.store(0, Ordering::Release);
            tracing::info!("the availability model answers again");
        }
    }

    fn failed(&self) {
        let next = self.now_ms().saturating_add(backoff_ms()).max(1);
        if self.open_until.swap(next, Ordering::AcqRel) == 0 {
            tracing::warn!("the availability model failed; reads go to PostgreSQL for a while");
        }
    }
}

fn backoff_ms() -> u64 {
    u64::try_from(CACHE_BACKOFF.as_millis()).unwrap_or(u64::MAX)
}

/// A handle on the availability read model.
#[derive(Clone)]
pub struct AvailabilityCache {
    /// The projection's and the hold limit's connection.
    pub redis: projections::redis_conn::RedisConn,
    /// The readers' connections, taken in turn. Each is multiplexed, and its replies are
    /// parsed by one task in arrival order: with one connection a search's replies (one
    /// per hotel of the city) queue behind the others' on one core, so there is one a
    /// core (see docs/benchmarks.md, `redis-parser-and-rejudging`).
    reads: Arc<[projections::redis_conn::RedisConn]>,
    next: Arc<AtomicUsize>,
    /// The reader every request shares (the generation it last found current, and the
    /// catalogs it has decoded).
    pub reader: Arc<Reader>,
    /// The offers searches judged, with what they were judged from.
    pub(super) offers: Arc<OfferMemo>,
    breaker: Arc<Breaker>,
}

impl AvailabilityCache {
    /// A cache on `redis_url` read through `connections` connections (at least one).
    pub fn connect(redis_url: &str, connections: usize, reader: Reader) -> anyhow::Result<Self> {
        let redis = projections::availability::connect(redis_url)?;
        let mut reads = vec![redis.clone()];
        for _ in 1..connections.max(1) {
            reads.push(projections::availability::connect(redis_url)?);
        }
        Ok(Self {
            redis,
            reads: reads.into(),
            next: Arc::new(AtomicUsize::new(0)),
            reader: Arc::new(reader),
            offers: Arc::new(OfferMemo::default()),
            breaker: Arc::new(Breaker::new()),
        })
    }

    /// The connection for the next read.
    pub fn read_connection(&self) -> projections::redis_conn::RedisConn {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        match self.reads.get(turn % self.reads.len().max(1)) {
            Some(connection) => connection.clone(),
            None => self.redis.clone(),
        }
    }
}

/// Which source answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The Redis read model, as of its `as_of`.
    Cache,
    /// The write side's rows, as of now.
    Database,
    /// The write side's rows on the read replica, as of what it has replayed.
    Replica,
    /// The event log as it stood at a past moment (availability "as known at").
    Log,
}

impl Source {
    pub const fn as_str(self) -> &'static str {
        match self {
            Source::Cache => "cache",
            Source::Database => "database",
            Source::Replica => "replica",
            Source::Log => "log",
        }
    }
}

/// What a stay is asked for, by a hotel's availability or a city search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StayQuery {
    pub stay: StayDates,
    pub rooms: RoomCount,
    pub guests: GuestCount,
    /// The booking limits a hold would be checked against: an offer is only listed for
    /// a stay that passes them.
    pub limits: BookingLimits,
}

impl StayQuery {
    /// The dates read: every night of the stay, then the check-out day, whose
    /// closure to departure binds the stay.
    pub(super) fn dates(&self) -> Vec<NaiveDate> {
        let mut dates: Vec<NaiveDate> = self.stay.nights().collect();
        dates.push(self.stay.end());
        dates
    }

    pub(super) fn offer_request(&self, today: NaiveDate) -> OfferRequest<'_> {
        OfferRequest {
            stay: &self.stay,
            rooms: self.rooms,
            guests: self.guests,
            today,
            limits: self.limits,
        }
    }
}

/// A plan's price of one room on one night for the guests asked (`rate_plan_id`
/// `None`: the base rate, for a room type no plan sells).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanPrice {
    pub rate_plan_id: Option<RatePlanId>,
    pub rate_cents: Cents,
}

/// One night of one room type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NightAvailability {
    pub date: NaiveDate,
    pub remaining: u32,
    /// `None` for a night without inventory.
    pub rate_cents: Option<i64>,
    /// The restrictions the night carries, for every plan and per plan.
    pub restrictions: RestrictionSet,
    /// One per plan selling the room type (or the base rate), for the guests asked;
    /// empty without inventory or when the room does not sleep the guests.
    pub prices: Vec<PlanPrice>,
}

/// Every night of the stay for one room type, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomTypeNights {
    pub room_type_id: i64,
    pub name: String,
    pub max_occupancy: u32,
    pub nights: Vec<NightAvailability>,
    /// The stay for the rooms and guests asked at the base rate (no plan), each night
    /// priced as a hold without a plan would price it (extra guests included); `None`
    /// when a night has no inventory or the room does not sleep the guests.
    pub base_total: Option<Cents>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StayAvailability {
    pub source: Source,
    pub as_of: DateTime<Utc>,
    pub room_types: Vec<RoomTypeNights>,
    /// The bookable offers of every room type, cheapest first.
    pub offers: Vec<Offer>,
    /// The hotel's currency: every amount of the answer is in its minor unit.
    pub currency: aggregates::Currency,
}

pub(super) fn to_u32(rooms: i64) -> u32 {
    u32::try_from(rooms.max(0)).unwrap_or(u32::MAX)
}

/// Today at the hotel; a catalog without details (never stored) counts in UTC.
pub(super) fn today_at(hotel: &Hotel, now: DateTime<Utc>) -> NaiveDate {
    hotel
        .details()
        .map_or_else(|| now.date_naive(), |d| local_date(now, d.timezone()))
}

/// The terms each plan selling `room_type` (or the base rate, when none does) sells it
/// on for `guests`.
pub(super) fn sale_terms(
    hotel: &Hotel,
    room_type: RoomTypeId,
    guests: GuestCount,
) -> Vec<SaleTerms> {
    booking::selling_plans(hotel, room_type)
        .into_iter()
        .filter_map(|plan| SaleTerms::resolve(hotel, room_type, plan, guests).ok())
        .collect()
}

/// One room's price on `night` under each of `terms` (a plan that does not price the
/// night is left out).
pub(super) fn plan_prices(terms: &[SaleTerms], night: &NightView<'_>) -> Vec<PlanPrice> {
    terms
        .iter()
        .filter_map(|t| {
            Some(PlanPrice {
                rate_plan_id: t.rate_plan_id(),
                rate_cents: night.price(t)?,
            })
        })
        .collect()
}

/// Whether a source holds everything a stay's answer is made of: a catalog with room
/// types, and a night for every room type on every night of the stay.
///
/// A night a source does not hold is unknown there, not sold out: the read model has
/// not projected it yet, or the replica has not replayed it (inventory set a moment
/// ago), or it has no inventory at all. Only the primary tells those apart, so a
/// source that lacks one hands the question on (the model to PostgreSQL, the replica
/// to the primary) rather than answer "0 left". A room type without inventory on the
/// nights asked therefore costs a read of the primary, however old its absence.
pub(super) fn holds_every_night<'v>(
    hotel: &Hotel,
    stay: &StayDates,
    view: impl Fn(RoomTypeId, NaiveDate) -> Option<NightView<'v>>,
) -> bool {
    !hotel.room_types().is_empty()
        && hotel
            .room_types()
            .keys()
            .all(|room_type| stay.nights().all(|date| view(*room_type, date).is_some()))
}

/// A hotel's availability from its catalog and a view of its nights, whichever source
/// they came from.
pub(super) fn describe<'v>(
    hotel: &Hotel,
    query: &StayQuery,
    today: NaiveDate,
    view: impl Fn(RoomTypeId, NaiveDate) -> Option<NightView<'v>>,
) -> (Vec<RoomTypeNights>, Vec<Offer>) {
    let room_types = hotel
        .room_types()
        .iter()
        .map(|(id, details)| {
            let terms = sale_terms(hotel, *id, query.guests);
            let base = SaleTerms::resolve(hotel, *id, None, query.guests).ok();
            let base_total = base.and_then(|base| {
                query
                    .stay
                    .nights()
                    .try_fold(Cents::ZERO, |sum, date| {
                        sum.checked_add(view(*id, date)?.price(&base)?)
                    })?
                    .checked_mul(query.rooms.get())
            });
            RoomTypeNights {
                room_type_id: id.get(),
                name: details.name().to_owned(),
                max_occupancy: details.max_occupancy(),
                base_total,
                nights: query
                    .stay
                    .nights()
                    .map(|date| match view(*id, date) {
                        None => NightAvailability {
                            date,
                            remaining: 0,
                            rate_cents: None,
                            restrictions: RestrictionSet::default(),
                            prices: Vec::new(),
                        },
                        Some(night) => NightAvailability {
                            date,
                            remaining: night.remaining,
                            rate_cents: Some(night.base_rate.get()),
                            restrictions: night.restrictions.clone(),
                            prices: plan_prices(&terms, &night),
                        },
                    })
                    .collect(),
            }
        })
        .collect();
    let offers = booking::offers(hotel, &query.offer_request(today), view);
    (room_types, offers)
}

impl AvailabilityCache {
    /// Runs a read of the model within [`CACHE_TIMEOUT`]; `None` (and counted) when
    /// Redis failed or was too slow, when it failed a moment ago (see [`Breaker`]), or
    /// when the model had no answer.
    pub(super) async fn within_timeout<T>(
        &self,
        read: impl Future<Output = anyhow::Result<Option<T>>>,
    ) -> Option<T> {
        if !self.breaker.admit() {
            metrics::counter!("availability_cache_skipped_total").increment(1);
            return None;
        }
        match tokio::time::timeout(CACHE_TIMEOUT, read).await {
            Ok(Ok(answer)) => {
                self.breaker.succeeded();
                answer
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "availability cache unreachable; reading PostgreSQL");
                metrics::counter!("availability_cache_errors_total").increment(1);
                self.breaker.failed();
                None
            }
            Err(_) => {
                metrics::counter!("availability_cache_errors_total").increment(1);
                self.breaker.failed();
                None
            }
        }
    }
}

/// One night of one room type as the write side's rows hold it, lapsed holds not
/// counted.
#[derive(Debug, Clone, Default)]
pub(super) struct StoredNight {
    pub total_rooms: i64,
    pub overbooking_allowance: i64,
    pub confirmed: i64,
    /// Holds that have not lapsed.
    pub held: i64,
    /// Rooms set aside for group blocks.
    pub blocked: i64,
    pub remaining: u32,
    pub rate_cents: Cents,
    pub restrictions: RestrictionSet,
    pub plan_rates: BTreeMap<RatePlanId, Cents>,
}

impl StoredNight {
    /// A night from its counts (`held`: holds that have not lapsed), with the rooms left.
    pub(super) fn new(
        (total_rooms, overbooking_allowance): (i64, i64),
        (confirmed, held, blocked): (i64, i64, i64),
        rate_cents: Cents,
        restrictions: RestrictionSet,
        plan_rates: BTreeMap<RatePlanId, Cents>,
    ) -> Self {
        let remaining = rooms_left(
            total_rooms,
            overbooking_allowance,
            confirmed,
            held + blocked,
        );
        Self {
            total_rooms,
            overbooking_allowance,
            confirmed,
            held,
            blocked,
            remaining: to_u32(remaining),
            rate_cents,
            restrictions,
            plan_rates,
        }
    }

    pub fn view(&self) -> NightView<'_> {
        NightView {
            remaining: self.remaining,
            base_rate: self.rate_cents,
            restrictions: &self.restrictions,
            plan_rates: &self.plan_rates,
        }
    }
}

/// Nights by (hotel, room type, date).
pub(super) type StoredNights = BTreeMap<(i64, i64, NaiveDate), StoredNight>;

fn terms_column<T: serde::de::DeserializeOwned + Default>(
    row: &sqlx::postgres::PgRow,
    column: &str,
) -> Result<T, QueryError> {
    match row.try_get::<Option<serde_json::Value>, _>(column)? {
        None => Ok(T::default()),
        Some(value) => serde_json::from_value(value)
            .map_err(|e| QueryError::Corrupt(format!("room_nights.{column}: {e}"))),
    }
}

impl Queries {
    /// Remaining rooms, rates, restrictions and prices per plan on every night of the
    /// stay, per room type of the hotel, and the offers it can be booked as; `None` if
    /// there is no such hotel.
    ///
    /// When PostgreSQL answers, the replica may (past `token`): a read the Redis model
    /// answers never waits for the replica.
    pub async fn availability(
        &self,
        hotel: HotelId,
        query: &StayQuery,
        token: Option<Lsn>,
    ) -> Result<Option<StayAvailability>, QueryError> {
        // A read that presents a write's token wants that write in the answer, and the
        // model cannot say whether it holds it (a room type just added, say): only
        // PostgreSQL can.
        let cached = match token {
            None => self.cached_availability(hotel, query).await,
            Some(_) => None,
        };
        let answer = match cached {
            Some(answer) => Some(answer),
            None => {
                self.on_replica(token, |q| async move {
                    q.database_availability(hotel, query).await
                })
                .await?
            }
        };
        if let Some(answer) = &answer {
            metrics::counter!("availability_reads_total", "source" => answer.source.as_str())
                .increment(1);
        }
        Ok(answer)
    }

    async fn cached_availability(
        &self,
        hotel: HotelId,
        query: &StayQuery,
    ) -> Option<StayAvailability> {
        let cache = self.availability.as_ref()?;
        let dates = query.dates();
        let mut redis = cache.read_connection();
        let cached = cache
            .within_timeout(cache.reader.read(&mut redis, hotel.get(), &dates))
            .await?;
        let last_room = cached
            .hotel
            .days
            .iter()
            .filter(|day| query.stay.contains(day.date))
            .any(|day| {
                day.room_types
                    .iter()
                    .any(|(_, n)| n.counters.remaining() <= 1)
            });
        if last_room {
            return None;
        }
        let catalog = &cached.hotel.hotel;
        if !holds_every_night(catalog, &query.stay, |room_type, date| {
            cached.hotel.view(room_type, date)
        }) {
            metrics::counter!("availability_cache_unknown_total").increment(1);
            return None;
        }
        let today = today_at(catalog, self.clock.now());
        let (room_types, offers) = describe(catalog, query, today, |room_type, date| {
            cached.hotel.view(room_type, date)
        });
        Some(StayAvailability {
            source: Source::Cache,
            as_of: cached.as_of,
            room_types,
            offers,
            currency: catalog.currency(),
        })
    }

    /// The write side's own rows: exact as of now. Lapsed holds do not count, whether
    /// or not anyone has dropped them yet.
    async fn database_availability(
        &self,
        id: HotelId,
        query: &StayQuery,
    ) -> Result<Option<StayAvailability>, QueryError> {
        let on_replica = self.replica_as_of.is_some();
        let Some(hotel) = self.hotel(id).await? else {
            return if on_replica {
                Err(QueryError::NotReplayed)
            } else {
                Ok(None)
            };
        };
        let now = self.clock.now();
        let nights = self.stored_nights(&[id.get()], &query.stay, now).await?;
        let view = |room_type: RoomTypeId, date| {
            nights
                .get(&(id.get(), room_type.get(), date))
                .map(StoredNight::view)
        };
        if on_replica && !holds_every_night(&hotel, &query.stay, view) {
            return Err(QueryError::NotReplayed);
        }
        let today = today_at(&hotel, now);
        let (room_types, offers) = describe(&hotel, query, today, view);
        let (source, as_of) = self.database_as_of(now);
        Ok(Some(StayAvailability {
            source,
            as_of,
            room_types,
            offers,
            currency: hotel.currency(),
        }))
    }

    /// The nights of `hotels` over the stay and its check-out day, as of `now`, from
    /// the write side's rows (one statement, whatever the number of hotels).
    pub(super) async fn stored_nights(
        &self,
        hotels: &[i64],
        stay: &StayDates,
        now: DateTime<Utc>,
    ) -> Result<StoredNights, QueryError> {
        let through = stay
            .end()
            .checked_add_days(Days::new(1))
            .unwrap_or(stay.end());
        let rows = sqlx::query(
            "SELECT n.hotel_id, n.room_type_id, n.night, n.rate_cents, n.total_rooms,
                    n.overbooking_allowance, n.confirmed, n.held, n.blocked, n.restrictions,
                    n.plan_rates, coalesce(l.lapsed, 0)::bigint AS lapsed
               FROM room_nights n
               LEFT JOIN LATERAL (
                    SELECT sum(a.rooms) AS lapsed FROM room_night_allocations a
                     WHERE a.hotel_id = n.hotel_id AND a.room_type_id = n.room_type_id
                       AND a.night = n.night AND a.expires_at <= $4
                       -- A lapsed booking from a block goes back to the block (while it
                       -- holds), not to general sale: counted as taken until dropped.
                       AND a.block_code IS NULL) l ON true
              WHERE n.hotel_id = ANY($1) AND n.night >= $2 AND n.night < $3",
        )
        .bind(hotels)
        .bind(stay.start())
        .bind(through)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        let mut nights = StoredNights::new();
        for row in rows {
            let total: i32 = row.try_get("total_rooms")?;
            let allowance: i32 = row.try_get("overbooking_allowance")?;
            let confirmed: i32 = row.try_get("confirmed")?;
            let held: i32 = row.try_get("held")?;
            let lapsed: i64 = row.try_get("lapsed")?;
            let held = i64::from(held) - lapsed;
            let blocked: i32 = row.try_get("blocked")?;
            nights.insert(
                (
                    row.try_get("hotel_id")?,
                    row.try_get("room_type_id")?,
                    row.try_get("night")?,
                ),
                StoredNight::new(
                    (i64::from(total), i64::from(allowance)),
                    (i64::from(confirmed), held, i64::from(blocked)),
                    Cents::new(row.try_get("rate_cents")?),
                    terms_column(&row, "restrictions")?,
                    terms_column(&row, "plan_rates")?,
                ),
            );
        }
        Ok(nights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_breaker_lets_every_read_try_the_model() {
        let breaker = Breaker::new();

        assert!(breaker.admit());
        assert!(breaker.admit());
    }

    #[test]
    fn after_a_failure_reads_skip_the_model() {
        let breaker = Breaker::new();

        breaker.failed();

        assert!(!breaker.admit());
        assert!(!breaker.admit());
    }

    #[test]
    fn past_the_back_off_one_read_tries_and_the_others_keep_skipping() {
        // A breaker running for ten seconds, whose back-off ran out long ago.
        let breaker = Breaker {
            started: std::time::Instant::now()
                .checked_sub(Duration::from_secs(10))
                .expect("the clock is past ten seconds"),
            open_until: std::sync::atomic::AtomicU64::new(0),
        };
        breaker.failed();
        breaker.open_until.store(1, Ordering::Release);

        let first = breaker.admit();
        let second = breaker.admit();

        assert!(first, "one read tries the model");
        assert!(!second, "while it does, the others read PostgreSQL");
    }

    #[test]
    fn a_success_closes_the_breaker() {
        let breaker = Breaker::new();
        breaker.failed();

        breaker.succeeded();

        assert!(breaker.admit());
    }
}
