//! Analytics and look-ups served from the read side: daily occupancy and revenue per
//! room type (admin, auditor), and reservations by channel, guest email, or hotel and
//! date (a channel sees its own only).
//!
//! These read projections, not the write side (through [`app::queries`]): they may
//! lag the log a little, and say how far they have got (`as_of`, the time the
//! projection last applied events).

use std::collections::BTreeMap;

use aggregates::{
    Currency, Guest, HotelId, PaymentStatus, Personal, Reference, ReservationId, ReservationStatus,
    StayDates,
};
use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use projections::analytics::ReservationRow;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::bodies::ReservationOut;
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiPath, ApiQuery, Consistency};
use super::params::reads_personal_data;
use super::params::MAX_OCCUPANCY_NIGHTS;
use crate::state::AppState;
use app::commands::GuestView;
use app::queries::{OccupancyRow, ReservationFilter};
use store::privacy::{Binding, Field};
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). Occupancy and the reservation look-up.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(occupancy))
        .routes(routes!(pickup))
        .routes(routes!(turnaways))
        .routes(routes!(list_reservations))
}

/// Default and largest page of the reservations look-up.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OccupancyQuery {
    /// First night reported.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub start_date: NaiveDate,
    /// The night after the last one reported (half-open range), at most 400 nights on.
    #[param(required = true, schema_with = super::schema::report_end_date)]
    pub end_date: NaiveDate,
}

/// One room type on one night.
#[derive(Debug, Serialize, ToSchema)]
pub struct OccupancyNight {
    pub date: NaiveDate,
    /// Physical rooms for sale (0 for a night without inventory).
    pub total_rooms: i64,
    pub overbooking_allowance: i64,
    /// The night's current rate; null without inventory.
    pub rate_cents: Option<i64>,
    /// Rooms sold (confirmed) now.
    pub confirmed: i64,
    /// Rooms on hold now (lapsed holds count until they are dropped).
    pub held: i64,
    /// `confirmed / total_rooms`; above 1 when the overbooking allowance is used; null
    /// when there are no rooms.
    pub occupancy: Option<f64>,
    /// More rooms sold than the room type physically has (its overbooking allowance in
    /// use).
    pub oversold: bool,
    /// Confirmed rooms times the night's rate when each was confirmed.
    pub revenue_cents: i64,
    /// ISO 4217 code of the night's rate and revenue: the hotel's currency in force on
    /// that night (a night before a currency change was sold in the old one).
    #[schema(example = "EUR")]
    pub currency: String,
    /// Rooms ever put on hold on this night.
    pub holds_placed: i64,
    /// Rooms whose hold lapsed on this night.
    pub holds_lapsed: i64,
    /// Rooms given back on this night by cancelled reservations.
    pub cancellations: i64,
}

/// Sums over the nights of the range.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct OccupancyTotals {
    /// Room-nights for sale (sum of `total_rooms`).
    pub total_rooms: i64,
    pub confirmed: i64,
    pub held: i64,
    /// `confirmed / total_rooms` over the range; null when there are no rooms.
    pub occupancy: Option<f64>,
    /// The nights' revenue; null when the range spans a change of the hotel's currency
    /// (amounts in two currencies are not added: each night says its own).
    pub revenue_cents: Option<i64>,
    /// The nights' currency; null when they are in more than one.
    pub currency: Option<String>,
    pub holds_placed: i64,
    pub holds_lapsed: i64,
    pub cancellations: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoomTypeOccupancy {
    pub room_type_id: i64,
    pub name: String,
    pub totals: OccupancyTotals,
    /// Every night of the range, in order.
    pub nights: Vec<OccupancyNight>,
}

/// The whole hotel on one night: its room types added up.
#[derive(Debug, Serialize, ToSchema)]
pub struct HotelNight {
    pub date: NaiveDate,
    /// Physical rooms of every room type (0 for a night without inventory).
    pub total_rooms: i64,
    /// Rooms sold (confirmed, checked in or out).
    pub confirmed: i64,
    pub held: i64,
    /// `confirmed / total_rooms`; null when there are no rooms.
    pub occupancy: Option<f64>,
    pub revenue_cents: i64,
    #[schema(example = "EUR")]
    pub currency: String,
    /// Average daily rate: `revenue_cents / confirmed`, to the nearest cent; null when
    /// nothing is sold.
    pub adr_cents: Option<i64>,
    /// Revenue per available room: `revenue_cents / total_rooms`, to the nearest cent;
    /// null when there are no rooms.
    pub revpar_cents: Option<i64>,
    /// A room type sold more rooms than it physically has (its overbooking allowance in
    /// use) on this night.
    pub oversold: bool,
}

/// The whole hotel over the range.
#[derive(Debug, Serialize, ToSchema)]
pub struct HotelTotals {
    /// Room-nights for sale.
    pub total_rooms: i64,
    pub confirmed: i64,
    pub occupancy: Option<f64>,
    /// Null when the range spans a change of the hotel's currency.
    pub revenue_cents: Option<i64>,
    pub currency: Option<String>,
    /// Null when nothing is sold or the revenue is in two currencies.
    pub adr_cents: Option<i64>,
    /// Null when there are no rooms or the revenue is in two currencies.
    pub revpar_cents: Option<i64>,
    /// Nights sold beyond the physical rooms.
    pub oversold_nights: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HotelOccupancy {
    pub totals: HotelTotals,
    /// Every night of the range, in order.
    pub nights: Vec<HotelNight>,
}

/// `amount / count` to the nearest unit (halves away from zero); null for no count.
fn per(amount: i64, count: i64) -> Option<i64> {
    (count > 0).then(|| {
        let (amount, count) = (i128::from(amount), i128::from(count));
        let rounded = (2 * amount + count).div_euclid(2 * count);
        i64::try_from(rounded).unwrap_or(i64::MAX)
    })
}

/// The hotel's nights: the room types' nights of each date added up.
fn hotel_occupancy(room_types: &[RoomTypeOccupancy]) -> HotelOccupancy {
    let dates: Vec<(NaiveDate, String)> = room_types
        .first()
        .map(|rt| {
            rt.nights
                .iter()
                .map(|n| (n.date, n.currency.clone()))
                .collect()
        })
        .unwrap_or_default();
    let nights: Vec<HotelNight> = dates
        .into_iter()
        .enumerate()
        .map(|(i, (date, currency))| {
            let of_date = room_types.iter().filter_map(|rt| rt.nights.get(i));
            let (mut total_rooms, mut confirmed, mut held, mut revenue) =
                (0_i64, 0_i64, 0_i64, 0_i64);
            let mut oversold = false;
            for n in of_date {
                oversold |= n.oversold;
                total_rooms += n.total_rooms;
                confirmed += n.confirmed;
                held += n.held;
                revenue = revenue.saturating_add(n.revenue_cents);
            }
            HotelNight {
                date,
                total_rooms,
                confirmed,
                held,
                occupancy: ratio(confirmed, total_rooms),
                revenue_cents: revenue,
                currency,
                adr_cents: per(revenue, confirmed),
                revpar_cents: per(revenue, total_rooms),
                oversold,
            }
        })
        .collect();
    let total_rooms: i64 = nights.iter().map(|n| n.total_rooms).sum();
    let confirmed: i64 = nights.iter().map(|n| n.confirmed).sum();
    let first = nights.first().map(|n| n.currency.as_str());
    let one_currency = nights.iter().all(|n| Some(n.currency.as_str()) == first);
    let revenue = one_currency.then(|| {
        nights
            .iter()
            .fold(0_i64, |sum, n| sum.saturating_add(n.revenue_cents))
    });
    HotelOccupancy {
        totals: HotelTotals {
            total_rooms,
            confirmed,
            occupancy: ratio(confirmed, total_rooms),
            revenue_cents: revenue,
            currency: if one_currency {
                first.map(str::to_owned)
            } else {
                None
            },
            adr_cents: revenue.and_then(|r| per(r, confirmed)),
            revpar_cents: revenue.and_then(|r| per(r, total_rooms)),
            oversold_nights: nights.iter().filter(|n| n.oversold).count() as i64,
        },
        nights,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OccupancyReport {
    pub hotel_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    /// When the occupancy projection last applied events; null if it has never run.
    pub as_of: Option<DateTime<Utc>>,
    /// The hotel's currency now (each night says the one its amounts are in).
    #[schema(example = "EUR")]
    pub currency: String,
    /// The whole hotel: each night's room types added up, with ADR and RevPAR.
    pub hotel: HotelOccupancy,
    pub room_types: Vec<RoomTypeOccupancy>,
}

fn ratio(confirmed: i64, total: i64) -> Option<f64> {
    (total > 0).then(|| confirmed as f64 / total as f64)
}

fn night_out(row: &OccupancyRow, currency: Currency) -> OccupancyNight {
    OccupancyNight {
        date: row.night,
        total_rooms: i64::from(row.total_rooms),
        overbooking_allowance: i64::from(row.overbooking_allowance),
        rate_cents: Some(row.rate_cents),
        confirmed: i64::from(row.confirmed),
        held: i64::from(row.held),
        occupancy: ratio(i64::from(row.confirmed), i64::from(row.total_rooms)),
        oversold: row.confirmed > row.total_rooms,
        revenue_cents: row.revenue_cents,
        currency: currency.code().to_owned(),
        holds_placed: row.holds_placed,
        holds_lapsed: row.holds_lapsed,
        cancellations: row.cancellations,
    }
}

fn empty_night(date: NaiveDate, currency: Currency) -> OccupancyNight {
    OccupancyNight {
        date,
        total_rooms: 0,
        overbooking_allowance: 0,
        rate_cents: None,
        confirmed: 0,
        held: 0,
        occupancy: None,
        oversold: false,
        revenue_cents: 0,
        currency: currency.code().to_owned(),
        holds_placed: 0,
        holds_lapsed: 0,
        cancellations: 0,
    }
}

fn totals(nights: &[OccupancyNight]) -> OccupancyTotals {
    let mut t = OccupancyTotals::default();
    let mut revenue: i64 = 0;
    for n in nights {
        t.total_rooms += n.total_rooms;
        t.confirmed += n.confirmed;
        t.held += n.held;
        revenue = revenue.saturating_add(n.revenue_cents);
        t.holds_placed += n.holds_placed;
        t.holds_lapsed += n.holds_lapsed;
        t.cancellations += n.cancellations;
    }
    t.occupancy = ratio(t.confirmed, t.total_rooms);
    let first = nights.first().map(|n| n.currency.as_str());
    if nights.iter().all(|n| Some(n.currency.as_str()) == first) {
        t.revenue_cents = Some(revenue);
        t.currency = first.map(str::to_owned);
    }
    t
}

/// The hotel and range of a report (staff and auditors only): at most
/// [`MAX_OCCUPANCY_NIGHTS`] nights; an id that cannot be a hotel's is no such hotel.
pub(crate) fn report_range(
    principal: &Principal,
    id: i64,
    start: NaiveDate,
    end: NaiveDate,
) -> Result<(HotelId, StayDates), ApiError> {
    principal.require(Role::STAFF)?;
    let id = HotelId::parse(id).map_err(|_| ApiError::not_found("no such hotel"))?;
    let range = StayDates::parse(start, end)?;
    if range.night_count() > MAX_OCCUPANCY_NIGHTS {
        return Err(ApiError::invalid(
            "end_date",
            format!("at most {MAX_OCCUPANCY_NIGHTS} nights per request"),
        ));
    }
    Ok((id, range))
}

/// Daily occupancy, revenue, holds and cancellations per room type of a hotel.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/occupancy", tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), OccupancyQuery),
    responses((status = 200, body = OccupancyReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "end_date not after start_date, or more than 400 nights", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn occupancy(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<OccupancyQuery>,
) -> Result<Json<OccupancyReport>, ApiError> {
    let (id, range) = report_range(&principal, id, query.start_date, query.end_date)?;
    let nights = &range;
    let read = state
        .queries
        .on_replica(
            consistency.0,
            |q| async move { q.occupancy(id, nights).await },
        )
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    let (room_types, rows, as_of, currencies) =
        (read.room_types, read.rows, read.as_of, read.currencies);
    let by_night: BTreeMap<(i64, NaiveDate), OccupancyRow> = rows
        .into_iter()
        .map(|r| ((r.room_type_id, r.night), r))
        .collect();
    let room_types = room_types
        .into_iter()
        .map(|(room_type_id, name)| {
            let nights: Vec<OccupancyNight> = range
                .nights()
                .map(|date| {
                    let currency = currencies.on(date);
                    by_night
                        .get(&(room_type_id, date))
                        .map_or_else(|| empty_night(date, currency), |r| night_out(r, currency))
                })
                .collect();
            RoomTypeOccupancy {
                room_type_id,
                name,
                totals: totals(&nights),
                nights,
            }
        })
        .collect::<Vec<_>>();
    Ok(Json(OccupancyReport {
        hotel_id: id.get(),
        start_date: range.start(),
        end_date: range.end(),
        as_of,
        currency: currencies.current().code().to_owned(),
        hotel: hotel_occupancy(&room_types),
        room_types,
    }))
}

/// One night's pickup: how its book moved lately (the whole hotel).
#[derive(Debug, Serialize, ToSchema)]
pub struct PickupNightOut {
    pub date: NaiveDate,
    /// Rooms booked in the last 24 hours (holds that have not lapsed included; a
    /// booking cancelled since is counted here and in `cancelled_last_day`).
    pub booked_last_day: i64,
    /// Rooms booked in the last 7 days, counted as `booked_last_day` is.
    pub booked_last_week: i64,
    /// Rooms cancelled in the last 24 hours.
    pub cancelled_last_day: i64,
    /// Rooms cancelled in the last 7 days.
    pub cancelled_last_week: i64,
    /// Rooms on the books now: live holds and confirmed, in-house and departed stays.
    pub on_the_books: i64,
    /// Rooms on the books 7 days ago (reservations made before then, and not cancelled
    /// before then).
    pub on_the_books_week_ago: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PickupReport {
    pub hotel_id: i64,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    /// When the reservations view last applied events; null if it has never run.
    pub as_of: Option<DateTime<Utc>>,
    /// The moment the last day and the last 7 days end.
    pub now: DateTime<Utc>,
    pub nights: Vec<PickupNightOut>,
}

/// Pickup per night: rooms booked and cancelled in the last day and 7 days, and the
/// rooms on the books now and 7 days ago, for the whole hotel.
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/pickup", tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), OccupancyQuery),
    responses((status = 200, body = PickupReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "end_date not after start_date, or more than 400 nights", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn pickup(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<OccupancyQuery>,
) -> Result<Json<PickupReport>, ApiError> {
    let (id, range) = report_range(&principal, id, query.start_date, query.end_date)?;
    let nights = &range;
    let read = state
        .queries
        .on_replica(consistency.0, |q| async move { q.pickup(id, nights).await })
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    Ok(Json(PickupReport {
        hotel_id: id.get(),
        start_date: range.start(),
        end_date: range.end(),
        as_of: read.as_of,
        now: read.now,
        nights: read
            .nights
            .into_iter()
            .map(|n| PickupNightOut {
                date: n.night,
                booked_last_day: n.booked_last_day,
                booked_last_week: n.booked_last_week,
                cancelled_last_day: n.cancelled_last_day,
                cancelled_last_week: n.cancelled_last_week,
                on_the_books: n.on_the_books,
                on_the_books_week_ago: n.on_the_books_week_ago,
            })
            .collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TurnawaysQuery {
    /// First night reported.
    #[param(required = true, schema_with = super::schema::start_date)]
    pub from: NaiveDate,
    /// The night after the last one reported (half-open range), at most 400 nights on.
    #[param(required = true, schema_with = super::schema::turnaways_to)]
    pub to: NaiveDate,
}

/// Refused requests by reason (a request is one room type of a refused hold).
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnawayReasons {
    /// A night of the stay was sold out.
    pub sold_out: i64,
    /// A restriction closed the stay (stop-sell, closed to arrival, a minimum stay...).
    pub restricted: i64,
    /// The room type could not take that many guests.
    pub occupancy: i64,
    /// The group block the hold was booked from had no rooms left on a night of the
    /// stay (the block was full, not general sale).
    pub block_exhausted: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TurnawayNightOut {
    pub date: NaiveDate,
    /// Refused requests that asked for this night.
    pub requests: i64,
    /// The rooms they asked for.
    pub rooms: i64,
    pub by_reason: TurnawayReasons,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TurnawayReport {
    pub hotel_id: i64,
    pub from: NaiveDate,
    pub to: NaiveDate,
    /// Nights with turnaways, in order; nights with none are left out.
    pub nights: Vec<TurnawayNightOut>,
}

/// Demand turned away per night: holds refused as sold out, restricted, beyond the room
/// type's occupancy or from an exhausted group block (the turnaway log, written moments
/// after each refusal; no personal data).
#[utoipa::path(get, path = "/v1/hotels/{hotel_id}/turnaways", tag = "analytics",
    params(("hotel_id" = i64, Path, minimum = 1, maximum = 9_007_199_254_740_991_i64), TurnawaysQuery),
    responses((status = 200, body = TurnawayReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "`to` not after `from`, or more than 400 nights", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn turnaways(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<i64>,
    ApiQuery(query): ApiQuery<TurnawaysQuery>,
) -> Result<Json<TurnawayReport>, ApiError> {
    principal.require(Role::STAFF)?;
    let id = HotelId::parse(id).map_err(|_| ApiError::not_found("no such hotel"))?;
    let range = super::params::from_to_range(query.from, query.to)?;
    let nights = state
        .queries
        .turnaways(id, &range)
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))?;
    Ok(Json(TurnawayReport {
        hotel_id: id.get(),
        from: range.start(),
        to: range.end(),
        nights: nights
            .into_iter()
            .map(|n| TurnawayNightOut {
                date: n.night,
                requests: n.requests,
                rooms: n.rooms,
                by_reason: TurnawayReasons {
                    sold_out: n.sold_out,
                    restricted: n.restricted,
                    occupancy: n.occupancy,
                    block_exhausted: n.block_exhausted,
                },
            })
            .collect(),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReservationSearch {
    /// The reservation with this short reference (`K7M29QXD`): any case, hyphens and
    /// spaces ignored, `O` read as `0`, `I` and `L` as `1`.
    #[param(example = "K7M29QXD", pattern = r"^[ -]*([0-9A-TV-Za-tv-z][ -]*){8}$")]
    pub reference: Option<String>,
    /// The guest's email (case-insensitive).
    #[param(
        min_length = 1,
        max_length = 254,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub guest_email: Option<String>,
    /// Reservations at this hotel.
    #[param(minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub hotel_id: Option<i64>,
    /// Reservations whose stay includes this night (`start_date <= date < end_date`).
    #[param(schema_with = super::schema::date)]
    pub date: Option<NaiveDate>,
    /// Reservations whose stay starts on this date (arrivals).
    #[param(schema_with = super::schema::date)]
    pub arrival_date: Option<NaiveDate>,
    /// Reservations whose stay ends on this date (departures).
    #[param(schema_with = super::schema::date)]
    pub departure_date: Option<NaiveDate>,
    /// Reservations made through this channel. A channel may only name itself (its own
    /// reservations are all it sees, with or without this).
    #[param(
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub channel: Option<String>,
    /// Reservations in this status (`held`, `confirmed`, `cancelled`, `expired`,
    /// `declined`, `checked_in`, `checked_out`, `no_show`); a hold past its expiry is
    /// `expired`.
    #[param(schema_with = super::schema::reservation_status)]
    pub status: Option<String>,
    /// At most this many, newest first (1..=500, default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReservationList {
    /// Newest first.
    pub reservations: Vec<ReservationOut>,
    /// When the reservations view last applied events; null if it has never run.
    pub as_of: Option<DateTime<Utc>>,
}

/// A view row as clients see reservations (a lapsed hold reads as expired).
fn reservation_out(
    row: ReservationRow,
    guest: &Personal<Guest>,
    now: DateTime<Utc>,
) -> ReservationOut {
    let cancellation_policy = row.cancellation_policy();
    let taxed = row.taxed();
    let lines = row.lines();
    // As the write side shows it: a hold past its expiry is expired, whether or not
    // the sweeper has recorded that yet.
    let status = if row.status == ReservationStatus::Held.as_str() && row.hold_expires_at <= now {
        ReservationStatus::Expired.as_str().to_owned()
    } else {
        row.status
    };
    // As the reservation computes it: what is owed, while the card is only authorized.
    let to_capture = if row.payment_status == PaymentStatus::Authorized.as_str() {
        taxed.total_due.get().min(row.authorized_cents)
    } else {
        0
    };
    ReservationOut {
        block_code: row.block_code.clone(),
        currency: row.currency.clone(),
        taxes: crate::taxes::tax_lines(&taxed.lines),
        total_due_cents: taxed.total_due.get(),
        reservation_id: row.reservation_id,
        reference: ReservationId::from_uuid(row.reservation_id)
            .reference()
            .to_string(),
        hotel_id: row.hotel_id,
        room_type_id: row.room_type_id,
        start_date: row.start_date,
        end_date: row.end_date,
        nights: u32::try_from((row.end_date - row.start_date).num_days()).unwrap_or(0),
        rooms: u32::try_from(row.rooms).unwrap_or(0),
        guest: GuestView::of(guest).into(),
        channel: row.channel,
        total_cents: row.total_cents,
        status,
        hold_expires_at: row.hold_expires_at,
        created_at: row.created_at,
        updated_at: row.updated_at,
        // The reservations view does not follow payments; the reservation itself does.
        paid_cents: None,
        refund_cents: None,
        rate_plan_id: row.rate_plan_id,
        cancellation_policy: Some(cancellation_policy.into()),
        guests: u32::try_from(row.guests).ok(),
        payment: super::bodies::PaymentOut {
            status: row.payment_status,
            authorized_cents: row.authorized_cents,
            to_capture_cents: to_capture,
            captured_cents: row.captured_cents,
            refunded_cents: row.refunded_cents,
        },
        lines: lines
            .iter()
            .map(|line| super::bodies::LineOut {
                room_type_id: line.room_type_id,
                rooms: line.rooms,
                guests: line.guests,
                rate_plan_id: line.rate_plan_id,
                cancellation_policy: line.cancellation_policy.into(),
                total_cents: line.total_cents,
            })
            .collect(),
    }
}

/// A free-text filter: trimmed, 1..=`max` characters, no control characters.
fn text_filter(field: &str, value: Option<String>, max: usize) -> Result<Option<String>, ApiError> {
    let Some(value) = value else { return Ok(None) };
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max || value.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            format!("{field}: 1 to {max} printable characters"),
        ));
    }
    Ok(Some(value.to_owned()))
}

/// Reservations by reference, channel, guest email, or hotel and date, newest first.
#[utoipa::path(get, path = "/v1/reservations", tag = "analytics", params(ReservationSearch),
    responses((status = 200, body = ReservationList), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "a channel naming another channel", body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn list_reservations(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiQuery(query): ApiQuery<ReservationSearch>,
) -> Result<Json<ReservationList>, ApiError> {
    let asked_channel = text_filter("channel", query.channel, 200)?;
    let channel = match principal.role {
        Role::Admin | Role::Auditor | Role::Revenue | Role::FrontDesk => asked_channel,
        Role::Channel => match asked_channel {
            Some(other) if other != principal.name => {
                return Err(ApiError::forbidden(
                    "a channel may only list its own reservations",
                ))
            }
            _ => Some(principal.name.clone()),
        },
    };
    // Emails are stored lower-case (the domain normalises them).
    let guest_email =
        text_filter("guest_email", query.guest_email, 254)?.map(|e| e.to_ascii_lowercase());
    // Whether an address has stays here is itself personal data.
    if guest_email.is_some() && !reads_personal_data(&principal) {
        return Err(ApiError::forbidden(format!(
            "the {} role may not search by a guest's e-mail (personal data)",
            principal.role
        )));
    }
    let hotel_id = query
        .hotel_id
        .map(HotelId::parse)
        .transpose()?
        .map(HotelId::get);
    // Outside the years the domain accepts, a date names no stay (and some are outside
    // what PostgreSQL's `date` holds).
    for (field, date) in [
        ("date", query.date),
        ("arrival_date", query.arrival_date),
        ("departure_date", query.departure_date),
    ] {
        if date.is_some_and(|d| !(1900..=9999).contains(&d.year())) {
            return Err(ApiError::invalid(
                field,
                format!("{field} must be between 1900-01-01 and 9999-12-31"),
            ));
        }
    }
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("limit must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let status = match query.status.as_deref() {
        None => None,
        Some(name) => Some(ReservationStatus::parse(name).ok_or_else(|| {
            let names: Vec<&str> = ReservationStatus::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::invalid(
                "status",
                format!("status must be one of {}", names.join(", ")),
            )
        })?),
    };

    // Sealed guests are found by their id; guests of older rows by their e-mail.
    let guest_id = match &guest_email {
        Some(email) => Some(
            state
                .commands
                .privacy()
                .guest_id_in(state.commands.pool(), email)
                .await?
                .to_string(),
        ),
        None => None,
    };
    let reference_number = match query.reference.as_deref() {
        None => None,
        Some(typed) => {
            let number = Reference::parse(typed)?.number();
            Some(i64::try_from(number).unwrap_or(i64::MAX))
        }
    };
    let filter = &ReservationFilter {
        reference_number,
        channel,
        guest_email,
        guest_id,
        hotel_id,
        night: query.date,
        arrival: query.arrival_date,
        departure: query.departure_date,
        status,
        limit,
    };
    let page = state
        .queries
        .on_replica(
            consistency.0,
            |q| async move { q.reservations(filter).await },
        )
        .await?;
    let now = page.now;
    let mut guests: Vec<Personal<Guest>> = page.rows.iter().map(ReservationRow::guest).collect();
    if reads_personal_data(&principal) {
        let mut opening: Vec<(Binding, &mut Personal<Guest>)> = page
            .rows
            .iter()
            .zip(guests.iter_mut())
            .map(|(row, guest)| {
                let binding = Binding {
                    reservation: ReservationId::from_uuid(row.reservation_id),
                    field: Field::Guest,
                };
                (binding, guest)
            })
            .collect();
        state.commands.privacy().open_all(&mut opening).await?;
    }
    Ok(Json(ReservationList {
        reservations: page
            .rows
            .into_iter()
            .zip(&guests)
            .map(|(row, guest)| reservation_out(row, guest, now))
            .collect(),
        as_of: page.as_of,
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn averages_round_to_the_nearest_cent_and_are_null_without_a_count() {
        assert_eq!(super::per(1000, 3), Some(333));
        assert_eq!(super::per(1001, 2), Some(501));
        assert_eq!(super::per(999, 2), Some(500));
        assert_eq!(super::per(0, 4), Some(0));
        assert_eq!(super::per(1000, 0), None);
    }
}
