//! The hotel most tests book, and typed values to book it with through the command API.

use aggregates::booking::InventoryUpdate;
use aggregates::{Guest, HotelDetails, HotelId, RoomCount, RoomTypeDetails, RoomTypeId, StayDates};
use app::commands::{Caller, CommandService, HoldRequest};
use chrono::{Days, NaiveDate, Utc};

pub const HOTEL: i64 = 812;
pub const KING: i64 = 3;

pub fn hotel_id() -> HotelId {
    HotelId::parse(HOTEL).expect("hotel id")
}

pub fn king() -> RoomTypeId {
    RoomTypeId::parse(KING).expect("room type id")
}

/// A date `days` from today: always in the bookable future.
pub fn day(days: u64) -> NaiveDate {
    Utc::now()
        .date_naive()
        .checked_add_days(Days::new(days))
        .expect("date")
}

pub fn stay(from: NaiveDate, to: NaiveDate) -> StayDates {
    StayDates::parse(from, to).expect("valid stay")
}

pub fn guest(n: usize) -> Guest {
    Guest::parse(&format!("Guest {n}"), &format!("guest{n}@example.com")).expect("guest")
}

/// Defines hotel 812 (Lisbon) with room type 3 ("king") and sets `total_rooms` rooms at
/// 180.00 a night on `nights` nights starting at `first`.
pub async fn hotel_with_rooms(
    svc: &CommandService,
    first: NaiveDate,
    nights: u64,
    total_rooms: i64,
) {
    svc.set_hotel(
        &app::commands::Caller::Staff("staff".into()),
        hotel_id(),
        HotelDetails::parse("Hotel Tejo", "Lisbon", "Europe/Lisbon").expect("details"),
        None,
    )
    .await
    .expect("set hotel");
    room_type_with_rooms(svc, KING, first, nights, total_rooms).await;
}

/// Adds room type `room_type` (sleeping two) to hotel 812 with `total_rooms` rooms at
/// 180.00 a night on `nights` nights starting at `first`.
pub async fn room_type_with_rooms(
    svc: &CommandService,
    room_type: i64,
    first: NaiveDate,
    nights: u64,
    total_rooms: i64,
) {
    room_type_of_hotel_with_rooms(svc, hotel_id(), room_type, first, nights, total_rooms).await;
}

/// [`room_type_with_rooms`] for another hotel (defined already).
pub async fn room_type_of_hotel_with_rooms(
    svc: &CommandService,
    hotel_id: HotelId,
    room_type: i64,
    first: NaiveDate,
    nights: u64,
    total_rooms: i64,
) {
    let room_type = RoomTypeId::parse(room_type).expect("room type id");
    let staff = app::commands::Caller::Staff("staff".into());
    let name = if room_type == king() {
        "king".to_owned()
    } else {
        format!("type {room_type}")
    };
    svc.set_room_type(
        &staff,
        hotel_id,
        room_type,
        RoomTypeDetails::parse(&name, 2).expect("room type"),
    )
    .await
    .expect("set room type");
    let last = first.checked_add_days(Days::new(nights)).expect("date");
    svc.set_inventory(
        &staff,
        hotel_id,
        room_type,
        stay(first, last),
        InventoryUpdate {
            total_rooms: Some(total_rooms),
            overbooking_allowance: Some(0),
            rate_cents: Some(aggregates::Cents::new(18_000)),
        },
    )
    .await
    .expect("set inventory");
}

pub fn hold_request(stay: StayDates, rooms: i64, guest_no: usize) -> HoldRequest {
    HoldRequest {
        more_lines: Vec::new(),
        hotel_id: hotel_id(),
        room_type_id: king(),
        stay,
        rooms: RoomCount::parse(rooms).expect("rooms"),
        guest: guest(guest_no),
        expected_total_cents: None,
        rate_plan_id: None,
        guests: aggregates::GuestCount::ONE,
        block_code: None,
    }
}

pub fn key(s: &str) -> store::write::IdempotencyKey {
    store::write::IdempotencyKey::parse(s).expect("key")
}

pub fn web() -> Caller {
    Caller::Channel("web".to_owned())
}
