//! What a request names, parsed once at the boundary and shared by the handlers: path
//! ids (a hotel, a reservation), a city and a stay as queries name them, the longest
//! range a report spans, and who is asking (acting as staff, reading guests' data).

use aggregates::{GuestCount, Hotel, HotelId, ReservationId, StayDates};
use chrono::NaiveDate;
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::{Principal, Role};
use super::error::ApiError;
use super::extract::Consistency;
use crate::state::AppState;
use app::commands::Caller;
use app::queries::StayQuery;

/// The staff member acting: the person signed in (name and staff id), or the token by
/// its name; recorded with the events.
pub(crate) fn staff(principal: &Principal) -> Caller {
    match principal.staff_id {
        Some(staff_id) => Caller::Person {
            name: principal.name.clone(),
            staff_id,
        },
        None => Caller::Staff(principal.name.clone()),
    }
}

/// A hotel as a read presenting `consistency` may see it; 404 if there is none.
pub(crate) async fn load_hotel(
    state: &AppState,
    id: HotelId,
    consistency: Consistency,
) -> Result<Hotel, ApiError> {
    state
        .queries
        .on_replica(consistency.0, |q| async move { q.hotel(id).await })
        .await?
        .ok_or_else(|| ApiError::not_found("no such hotel"))
}

/// Path ids arrive as integers; a non-positive one names nothing.
pub(crate) fn hotel_id(raw: i64) -> Result<HotelId, ApiError> {
    HotelId::parse(raw).map_err(|_| ApiError::not_found("no such hotel"))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CitySearch {
    /// City name, case-insensitive; absent: every hotel (the first 500 by id).
    #[param(
        min_length = 1,
        max_length = 100,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u001F\u007F-\u009F]*$"
    )]
    pub city: Option<String>,
}

/// A city as a search names it: trimmed, 1 to 100 printable characters (the limit a
/// hotel's city has).
pub(crate) fn city_filter(raw: &str) -> Result<&str, ApiError> {
    let city = raw.trim();
    if city.is_empty() || city.chars().count() > 100 || city.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "city",
            "city: must be 1 to 100 printable characters",
        ));
    }
    Ok(city)
}

/// The stay, rooms and guests of an availability query or a search, checked against
/// the booking limits' size rules (the rest depends on the hotel's date, and only hides
/// offers).
pub fn stay_query(
    state: &AppState,
    start_date: NaiveDate,
    end_date: NaiveDate,
    rooms: Option<i64>,
    guests: Option<i64>,
) -> Result<StayQuery, ApiError> {
    let stay = StayDates::parse(start_date, end_date)?;
    let limits = state.commands.config().limits;
    limits.check_nights(&stay)?;
    let rooms = limits.rooms(rooms.unwrap_or(1))?;
    let guests = match guests {
        None => GuestCount::ONE,
        Some(g) => GuestCount::parse(g)?,
    };
    Ok(StayQuery {
        stay,
        rooms,
        guests,
        limits,
    })
}

/// Whether `principal` may read the guests of the reservations it may see: the channel
/// that owns one (the handlers check the owner), admins and the front desk; an auditor
/// reads the history and revenue the numbers, not the people in them.
pub(crate) fn reads_personal_data(principal: &Principal) -> bool {
    matches!(
        principal.role,
        Role::Admin | Role::Channel | Role::FrontDesk
    )
}

pub(crate) fn reservation_id(raw: &str) -> Result<ReservationId, ApiError> {
    ReservationId::parse(raw).map_err(|_| ApiError::not_found("no such reservation"))
}

/// The longest range one occupancy request may ask for (a year and a bit).
pub const MAX_OCCUPANCY_NIGHTS: u32 = 400;

/// A report's nights named `[from, to)` (the turnaways', a what-if's): `to` after `from`,
/// at most [`MAX_OCCUPANCY_NIGHTS`] nights, in those fields' words.
pub(crate) fn from_to_range(
    from: chrono::NaiveDate,
    to: chrono::NaiveDate,
) -> Result<aggregates::StayDates, ApiError> {
    if to <= from {
        return Err(ApiError::invalid("to", "to must be after from"));
    }
    if (to - from).num_days() > i64::from(MAX_OCCUPANCY_NIGHTS) {
        return Err(ApiError::invalid(
            "to",
            format!("at most {MAX_OCCUPANCY_NIGHTS} nights per request"),
        ));
    }
    aggregates::StayDates::parse(from, to)
        .map_err(|e| ApiError::invalid("from", format!("from: {}", e.message)))
}
