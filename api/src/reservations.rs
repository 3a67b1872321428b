//! Reservations: hold, look up, cancel, check in and out, no-show, change dates, and a
//! reservation's history.

use aggregates::{
    BookingLimits, Cents, Guest, GuestCount, HotelId, RatePlanId, Rejection, ReservationId,
    RoomTypeId, StayDates,
};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, NaiveDate, Utc};
pub use projections::feed::EventOut;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{Principal, Role};
use super::bodies::{GuestOut, ReservationOut};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiJson, ApiPath, Idempotency, IdempotencyKeyHeader};
use super::params::{reads_personal_data, reservation_id};
use crate::state::AppState;
use app::commands::{Caller, GuestView, HoldRequest, LineRequest, ReservationView, StayAction};
use app::rate_limit::{retry_after_seconds, Admission, HoldAttempt, HoldLimiter};
use store::error::CommandError;
use store::privacy::{Binding, Field};
use store::write::IdempotencyKey;
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). The reservation lifecycle.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(get))
        .routes(routes!(cancel))
        .routes(routes!(check_in))
        .routes(routes!(check_out))
        .routes(routes!(no_show))
        .routes(routes!(change_dates))
        .routes(routes!(events))
        .routes(routes!(messages))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct GuestIn {
    #[schema(
        example = "Ana Lima",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub name: String,
    #[schema(
        example = "ana@example.com",
        max_length = 254,
        pattern = r"^[^@\s\u0000-\u001F\u007F-\u009F]+@[^@\s.\u0000-\u001F\u007F-\u009F][^@\s\u0000-\u001F\u007F-\u009F]*\.[^@\s\u0000-\u001F\u007F-\u009F]*[^@\s.\u0000-\u001F\u007F-\u009F]$"
    )]
    pub email: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateReservation {
    #[schema(example = 812, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub hotel_id: i64,
    /// The room type (required unless `lines` are given, and absent with them).
    #[schema(example = 3, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub room_type_id: Option<i64>,
    /// First night of the stay.
    #[schema(schema_with = super::schema::stay_start_date)]
    pub start_date: NaiveDate,
    /// Check-out day: the stay is `[start_date, end_date)`.
    #[schema(schema_with = super::schema::stay_end_date)]
    pub end_date: NaiveDate,
    /// Rooms on every night (default 1; at most 10).
    #[schema(example = 1, minimum = 1, maximum = 10)]
    pub rooms: Option<i64>,
    pub guest: GuestIn,
    /// The total the client showed the guest; refused with `price_changed` if the
    /// server's price differs. The client never sets the price.
    pub expected_total_cents: Option<i64>,
    /// The rate plan to sell under (it must sell the room type); absent: the base rate
    /// under the house cancellation policy.
    #[schema(example = 2, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub rate_plan_id: Option<i64>,
    /// Guests per room (default 1); above the room type's `max_occupancy` is 422
    /// `occupancy_exceeded`, and each guest beyond its `base_occupancy` adds its
    /// `extra_guest_cents` per night and room.
    #[schema(example = 2, minimum = 1, maximum = 50)]
    pub guests: Option<i64>,
    /// Several room types for the same stay, instead of `room_type_id`, `rooms`,
    /// `guests` and `rate_plan_id`: 1 to 4 lines, each a different room type. All are
    /// held or none.
    #[schema(schema_with = super::schema::reservation_lines)]
    pub lines: Option<Vec<LineIn>>,
    /// A group block of the hotel to book from: its rooms (not general sale's), at its
    /// rate, without a rate plan. More rooms than it has left is 409
    /// `block_exhausted`; a released block is 409 `block_released`.
    #[schema(example = "ACME", pattern = "^[A-Z0-9-]{1,20}$")]
    pub block_code: Option<String>,
}

/// One room type of a reservation of several.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LineIn {
    #[schema(example = 1, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub room_type_id: i64,
    /// Rooms of this type on every night (default 1; at most 10).
    #[schema(example = 1, minimum = 1, maximum = 10)]
    pub rooms: Option<i64>,
    /// Guests per room (default 1), as for a single room type.
    #[schema(example = 2, minimum = 1, maximum = 50)]
    pub guests: Option<i64>,
    /// The plan this line sells under; absent or `null`: the base rate.
    #[schema(example = 2, minimum = 1, maximum = 9_007_199_254_740_991_i64)]
    pub rate_plan_id: Option<i64>,
}

/// Most lines in one reservation.
pub const MAX_LINES: usize = 4;

impl LineIn {
    /// The line, its fields named as `lines[i].field` when refused.
    fn parse(self, i: usize, limits: &BookingLimits) -> Result<LineRequest, ApiError> {
        let named = |e: aggregates::InvalidInput| {
            let field = format!("lines[{i}].{}", e.field);
            ApiError::invalid(&field, format!("{field}: {}", e.message))
        };
        Ok(LineRequest {
            room_type_id: RoomTypeId::parse(self.room_type_id).map_err(named)?,
            rooms: limits.rooms(self.rooms.unwrap_or(1)).map_err(named)?,
            guests: self
                .guests
                .map(GuestCount::parse)
                .transpose()
                .map_err(named)?
                .unwrap_or_default(),
            rate_plan_id: self
                .rate_plan_id
                .map(RatePlanId::parse)
                .transpose()
                .map_err(named)?,
        })
    }
}

impl CreateReservation {
    /// The lines asked for: `lines`, or the single room type's fields as one line.
    fn lines(&mut self, limits: &BookingLimits) -> Result<Vec<LineRequest>, ApiError> {
        let Some(lines) = self.lines.take() else {
            let Some(room_type_id) = self.room_type_id else {
                return Err(ApiError::invalid(
                    "room_type_id",
                    "room_type_id: required (or lines, for several room types)",
                ));
            };
            return Ok(vec![LineRequest {
                room_type_id: RoomTypeId::parse(room_type_id)?,
                rooms: limits.rooms(self.rooms.unwrap_or(1))?,
                guests: self
                    .guests
                    .map(GuestCount::parse)
                    .transpose()?
                    .unwrap_or_default(),
                rate_plan_id: self.rate_plan_id.map(RatePlanId::parse).transpose()?,
            }]);
        };
        let single = [
            ("room_type_id", self.room_type_id.is_some()),
            ("rooms", self.rooms.is_some()),
            ("guests", self.guests.is_some()),
            ("rate_plan_id", self.rate_plan_id.is_some()),
        ];
        if let Some((field, _)) = single.iter().find(|(_, given)| *given) {
            return Err(ApiError::invalid(
                field,
                format!("{field}: not with lines (each line says its own room type, rooms, guests and plan)"),
            ));
        }
        if lines.is_empty() || lines.len() > MAX_LINES {
            return Err(ApiError::invalid(
                "lines",
                format!("lines: must hold 1 to {MAX_LINES} lines"),
            ));
        }
        let mut parsed: Vec<LineRequest> = Vec::with_capacity(lines.len());
        for (i, line) in lines.into_iter().enumerate() {
            let line = line.parse(i, limits)?;
            if let Some(j) = parsed
                .iter()
                .position(|l| l.room_type_id == line.room_type_id)
            {
                let field = format!("lines[{i}].room_type_id");
                return Err(ApiError::invalid(
                    &field,
                    format!(
                        "{field}: room type {} is lines[{j}] already (a room type appears once; its rooms count them)",
                        line.room_type_id
                    ),
                ));
            }
            parsed.push(line);
        }
        Ok(parsed)
    }

    /// The hold this body asks for, each field parsed once, here; an oversized stay is
    /// a 422 whatever the guest's allowance (the domain refuses it too, as an invariant).
    fn parse(mut self, limits: &BookingLimits) -> Result<HoldRequest, ApiError> {
        let hotel_id = HotelId::parse(self.hotel_id)?;
        let mut lines = self.lines(limits)?.into_iter();
        let first = lines.next().ok_or_else(|| {
            ApiError::invalid("lines", format!("lines: must hold 1 to {MAX_LINES} lines"))
        })?;
        let request = HoldRequest {
            hotel_id,
            room_type_id: first.room_type_id,
            stay: StayDates::parse(self.start_date, self.end_date)?,
            rooms: first.rooms,
            guest: Guest::parse(&self.guest.name, &self.guest.email)?,
            expected_total_cents: self.expected_total_cents.map(Cents::new),
            rate_plan_id: first.rate_plan_id,
            guests: first.guests,
            more_lines: lines.collect(),
            block_code: self
                .block_code
                .as_deref()
                .map(aggregates::BlockCode::parse)
                .transpose()?,
        };
        for line in request.lines() {
            limits.check_size(&request.stay, line.rooms)?;
        }
        Ok(request)
    }
}

/// The answer about a reservation for `principal`: its guest opened if they may read it.
pub(crate) async fn answer(
    state: &AppState,
    principal: &Principal,
    mut view: ReservationView,
) -> Result<ReservationOut, ApiError> {
    if reads_personal_data(principal) {
        let binding = Binding {
            reservation: ReservationId::from_uuid(view.reservation_id),
            field: Field::Guest,
        };
        state
            .commands
            .privacy()
            .open(binding, &mut view.guest)
            .await?;
    }
    Ok(view.into())
}

impl From<GuestView> for GuestOut {
    fn from(g: GuestView) -> Self {
        Self {
            name: g.name,
            email: g.email,
        }
    }
}

impl From<ReservationView> for ReservationOut {
    fn from(v: ReservationView) -> Self {
        Self {
            reservation_id: v.reservation_id,
            reference: ReservationId::from_uuid(v.reservation_id)
                .reference()
                .to_string(),
            hotel_id: v.hotel_id,
            room_type_id: v.room_type_id,
            start_date: v.start_date,
            end_date: v.end_date,
            nights: v.nights,
            rooms: v.rooms,
            guest: GuestView::of(&v.guest).into(),
            channel: v.channel,
            total_cents: v.total_cents.get(),
            currency: v.currency.code().to_owned(),
            taxes: crate::taxes::tax_lines(&v.taxes),
            total_due_cents: v.total_due_cents.unwrap_or(v.total_cents).get(),
            block_code: v.block_code.map(String::from),
            status: v.status.as_str().to_owned(),
            hold_expires_at: v.hold_expires_at,
            created_at: v.created_at,
            updated_at: v.updated_at,
            paid_cents: Some(v.paid_cents.get()),
            refund_cents: (v.status == aggregates::ReservationStatus::Cancelled)
                .then_some(v.refund_cents.get()),
            rate_plan_id: v.rate_plan_id,
            cancellation_policy: Some(v.cancellation_policy.into()),
            guests: Some(v.guests),
            payment: v.payment.into(),
            lines: if v.lines.is_empty() {
                vec![crate::bodies::LineOut {
                    room_type_id: v.room_type_id,
                    rooms: v.rooms,
                    guests: v.guests,
                    rate_plan_id: v.rate_plan_id,
                    cancellation_policy: v.cancellation_policy.into(),
                    total_cents: v.total_cents.get(),
                }]
            } else {
                v.lines.iter().map(crate::bodies::LineOut::from).collect()
            },
        }
    }
}

pub(crate) fn caller(principal: &Principal) -> Result<Caller, ApiError> {
    match principal.role {
        Role::Channel => Ok(Caller::Channel(principal.name.clone())),
        Role::Admin | Role::FrontDesk => Ok(crate::params::staff(principal)),
        Role::Auditor => Err(ApiError::forbidden("the auditor role is read-only")),
        Role::Revenue => Err(ApiError::forbidden(
            "the revenue role may not change reservations",
        )),
    }
}

/// The scope of idempotency keys: the calling token.
pub(crate) fn client_scope(principal: &Principal) -> String {
    format!("{}:{}", principal.role, principal.token_id)
}

/// Hold a stay: every night of `[start_date, end_date)` or none.
#[utoipa::path(post, path = "/v1/reservations", tag = "reservations",
    params(IdempotencyKeyHeader),
    request_body = CreateReservation,
    responses(
        (status = 201, body = ReservationOut),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 409, description = "sold_out (names the night), price_changed, request_in_flight, try_again", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, description = "invalid dates or rooms, unknown hotel or room type, idempotency_key_reused", body = ErrorBody),
        (status = 429, description = "rate_limited: this guest (e-mail) has used up its holds on this channel for the window; `Retry-After` and `retry_after_seconds` say when to try again", body = ErrorBody,
            headers(("Retry-After" = u32, description = "seconds until the next hold is allowed"))),
        Unavailable),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Idempotency(key): Idempotency,
    ApiJson(body): ApiJson<CreateReservation>,
) -> Result<(StatusCode, Json<ReservationOut>), ApiError> {
    principal.require(&[Role::Channel])?;
    let request = body.parse(&state.commands.config().limits)?;
    let scope = client_scope(&principal);
    let ticket = match &state.hold_limiter {
        Some(limiter) => {
            let guest = state
                .commands
                .privacy()
                .guest_id_in(state.commands.pool(), request.guest.email())
                .await?;
            let attempt = HoldAttempt {
                channel: &principal.name,
                guest: &guest,
                scope: &scope,
                idempotency_key: key.as_str(),
            };
            match limiter.admit(attempt, state.commands.now()).await {
                Admission::Counted(ticket) => Some((limiter, ticket)),
                Admission::Allowed => None,
                Admission::Limited { retry_after } => {
                    state.metrics.booking("rate_limited");
                    return Err(rate_limited(limiter, retry_after));
                }
            }
        }
        None => None,
    };
    // The channel owns the reservation; the key is scoped to the token.
    let result = state
        .commands
        .hold(&principal.name, &scope, key, request)
        .await;
    state.metrics.booking(hold_outcome(&result));
    // Only holds that succeed use up the guest's allowance. `request_in_flight` is not
    // a refusal: a duplicate of this request (the same key, so the same counted entry)
    // is running and may well hold, so the entry stays.
    let in_flight = matches!(result, Err(CommandError::InFlight));
    if let (Err(_), false, Some((limiter, ticket))) = (&result, in_flight, ticket) {
        limiter.release(ticket).await;
    }
    Ok((
        StatusCode::CREATED,
        Json(answer(&state, &principal, result?).await?),
    ))
}

/// A hold's outcome as `bookings_total` labels it.
fn hold_outcome(result: &Result<ReservationView, CommandError>) -> &'static str {
    match result {
        Ok(_) => "held",
        Err(CommandError::Rejected(r)) => match r {
            // A line's refusal counts as its cause.
            Rejection::InLine { cause, .. } if matches!(**cause, Rejection::SoldOut { .. }) => {
                "sold_out"
            }
            Rejection::SoldOut { .. } => "sold_out",
            Rejection::PriceChanged { .. } => "price_changed",
            _ => "rejected",
        },
        Err(CommandError::InFlight) => "in_flight",
        Err(CommandError::KeyReused) => "key_reused",
        Err(CommandError::Contention { .. }) => "contention",
        Err(_) => "error",
    }
}

fn rate_limited(limiter: &HoldLimiter, retry_after: std::time::Duration) -> ApiError {
    let seconds = retry_after_seconds(retry_after);
    let window = limiter.window().as_secs();
    let window = if window % 60 == 0 {
        format!("{} minutes", window / 60)
    } else {
        format!("{window} seconds")
    };
    ApiError::rate_limited(
        format!(
            "this guest already has {} holds on this channel within {window}; try again in {seconds} s",
            limiter.limit()
        ),
        seconds,
    )
}

/// The reservation as of now (read-your-writes).
#[utoipa::path(get, path = "/v1/reservations/{reservation_id}", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path)),
    responses((status = 200, body = ReservationOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ReservationOut>, ApiError> {
    let id = reservation_id(&id)?;
    let view = state
        .queries
        .reservation(id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such reservation"))?;
    check_owner(&principal, &view.channel)?;
    Ok(Json(answer(&state, &principal, view).await?))
}

fn check_owner(principal: &Principal, channel: &str) -> Result<(), ApiError> {
    if principal.role == Role::Channel && principal.name != channel {
        return Err(ApiError::forbidden(
            "this reservation belongs to another client",
        ));
    }
    Ok(())
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct CancelReservation {
    /// Why; kept in the event history.
    #[schema(
        example = "change of plans",
        max_length = 500,
        pattern = r"^[^\u0000-\u0008\u000B-\u001F\u007F-\u009F]*$"
    )]
    pub reason: Option<String>,
}

/// Cancel a held or confirmed reservation; its nights return to sale.
#[utoipa::path(post, path = "/v1/reservations/{reservation_id}/cancel", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path),
        IdempotencyKeyHeader),
    request_body = CancelReservation,
    responses((status = 200, body = ReservationOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "invalid_state (already cancelled or expired), request_in_flight", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    Idempotency(key): Idempotency,
    ApiJson(body): ApiJson<CancelReservation>,
) -> Result<Json<ReservationOut>, ApiError> {
    let caller = caller(&principal)?;
    let id = reservation_id(&id)?;
    let reason = body.reason.unwrap_or_default();
    // Newlines and tabs are fine in a note; other control characters (NUL above all,
    // which PostgreSQL cannot store) are not.
    let printable = |c: char| !c.is_control() || c == '\n' || c == '\t';
    if reason.chars().count() > 500 || !reason.chars().all(printable) {
        return Err(ApiError::invalid(
            "reason",
            "reason: at most 500 characters, no control characters",
        ));
    }
    let view = state
        .commands
        .cancel(&caller, &client_scope(&principal), key, id, reason)
        .await?;
    Ok(Json(answer(&state, &principal, view).await?))
}

/// Check the guest of a confirmed reservation in (hotel staff), from its arrival date
/// (at the hotel) to the day before its departure; its nights stay sold.
#[utoipa::path(post, path = "/v1/reservations/{reservation_id}/check-in", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path),
        IdempotencyKeyHeader),
    responses((status = 200, body = ReservationOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "too_early (before the arrival date), invalid_state (not confirmed, or the stay has ended), request_in_flight", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn check_in(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    Idempotency(key): Idempotency,
) -> Result<Json<ReservationOut>, ApiError> {
    staff_action(&state, &principal, &id, key, StayAction::CheckIn).await
}

/// Check the guest of a checked-in reservation out (hotel staff): the stay's nights
/// after the day they leave (at the hotel) go back to sale.
#[utoipa::path(post, path = "/v1/reservations/{reservation_id}/check-out", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path),
        IdempotencyKeyHeader),
    responses((status = 200, body = ReservationOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "invalid_state (not checked in), request_in_flight", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn check_out(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    Idempotency(key): Idempotency,
) -> Result<Json<ReservationOut>, ApiError> {
    staff_action(&state, &principal, &id, key, StayAction::CheckOut).await
}

/// Record that the guest of a confirmed reservation never came (hotel staff), on or
/// after its arrival date at the hotel: the first night stays sold, every night after it
/// goes back to sale.
#[utoipa::path(post, path = "/v1/reservations/{reservation_id}/no-show", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path),
        IdempotencyKeyHeader),
    responses((status = 200, body = ReservationOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "too_early (before the arrival date), invalid_state (not confirmed), request_in_flight", body = ErrorBody),
        Unavailable),
    security(("bearer" = [])))]
pub async fn no_show(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    Idempotency(key): Idempotency,
) -> Result<Json<ReservationOut>, ApiError> {
    staff_action(&state, &principal, &id, key, StayAction::NoShow).await
}

/// Runs a staff action on a reservation: admins and the front desk, the reservation's id from
/// the path, nothing in the body.
async fn staff_action(
    state: &AppState,
    principal: &Principal,
    id: &str,
    key: IdempotencyKey,
    action: StayAction,
) -> Result<Json<ReservationOut>, ApiError> {
    principal.require(Role::FRONT_DESK)?;
    let caller = caller(principal)?;
    let id = reservation_id(id)?;
    let view = state
        .commands
        .stay_action(&caller, &client_scope(principal), key, id, action)
        .await?;
    Ok(Json(answer(state, principal, view).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ChangeDates {
    #[schema(schema_with = super::schema::stay_start_date)]
    pub start_date: NaiveDate,
    #[schema(schema_with = super::schema::stay_end_date)]
    pub end_date: NaiveDate,
    pub expected_total_cents: Option<i64>,
}

/// Move a reservation to new dates in one step, or change nothing.
#[utoipa::path(post, path = "/v1/reservations/{reservation_id}/change-dates", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path),
        IdempotencyKeyHeader),
    request_body = ChangeDates,
    responses((status = 200, body = ReservationOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 402, description = "payment_declined: the card refused the difference a dearer stay costs (`shortfall_cents`); nothing changed", body = ErrorBody),
        (status = 409, description = "sold_out (names the night), price_changed, invalid_state, hold_expired", body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn change_dates(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
    Idempotency(key): Idempotency,
    ApiJson(body): ApiJson<ChangeDates>,
) -> Result<Json<ReservationOut>, ApiError> {
    let caller = caller(&principal)?;
    let id = reservation_id(&id)?;
    let stay = StayDates::parse(body.start_date, body.end_date)?;
    let view = state
        .payments
        .change_dates(
            &caller,
            &client_scope(&principal),
            key,
            id,
            stay,
            body.expected_total_cents.map(Cents::new),
        )
        .await?;
    Ok(Json(answer(&state, &principal, view).await?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReservationEvents {
    pub reservation_id: uuid::Uuid,
    pub events: Vec<EventOut>,
}

/// A reservation's event history (its owner channel, admin or auditor).
#[utoipa::path(get, path = "/v1/reservations/{reservation_id}/events", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path)),
    responses((status = 200, body = ReservationEvents), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn events(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ReservationEvents>, ApiError> {
    let id = reservation_id(&id)?;
    let (channel, events) = state
        .queries
        .reservation_history(id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such reservation"))?;
    check_owner(&principal, &channel)?;
    let mut events: Vec<EventOut> = events.into_iter().map(EventOut::from).collect();
    // The owner and staff read the guest and the reasons; an auditor reads them sealed.
    if reads_personal_data(&principal) {
        let mut data: Vec<(ReservationId, &str, &mut serde_json::Value)> = events
            .iter_mut()
            .map(|e| (id, e.event_type.as_str(), &mut e.data))
            .collect();
        state.commands.privacy().open_events(&mut data).await?;
    }
    Ok(Json(ReservationEvents {
        reservation_id: id.as_uuid(),
        events,
    }))
}

/// A reservation's e-mails to its guest.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessagesOut {
    pub reservation_id: uuid::Uuid,
    pub messages: Vec<MessageOut>,
}

/// One e-mail to the guest.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageOut {
    /// `confirmation`, `cancellation`, `expiry`, `dates_changed` or `no_show`.
    #[schema(example = "confirmation")]
    pub kind: String,
    /// The guest's address (`"[erased]"` once the guest was erased).
    pub to: String,
    /// `pending` (queued, or being retried), `sent` (the mail server took it),
    /// `failed` (given up; see `last_error`) or `dropped` (the guest was erased first).
    #[schema(example = "sent")]
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
    pub attempts: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The e-mails the guest was sent (or is to be sent) about a reservation (its channel,
/// admin).
#[utoipa::path(get, path = "/v1/reservations/{reservation_id}/messages", tag = "reservations",
    params(("reservation_id" = uuid::Uuid, Path)),
    responses((status = 200, body = MessagesOut), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn messages(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<MessagesOut>, ApiError> {
    if !reads_personal_data(&principal) {
        return Err(ApiError::forbidden(
            "a guest's messages are read by the reservation's channel or an admin",
        ));
    }
    let id = reservation_id(&id)?;
    let view = state
        .queries
        .reservation(id)
        .await?
        .ok_or_else(|| ApiError::not_found("no such reservation"))?;
    check_owner(&principal, &view.channel)?;
    let to = answer(&state, &principal, view).await?.guest.email;
    let messages = state.queries.reservation_messages(id).await?;
    Ok(Json(MessagesOut {
        reservation_id: id.as_uuid(),
        messages: messages
            .into_iter()
            .map(|m| MessageOut {
                kind: m.kind,
                to: to.clone(),
                state: m.state,
                created_at: m.created_at,
                sent_at: m.sent_at,
                attempts: m.attempts,
                last_error: m.last_error,
            })
            .collect(),
    }))
}
