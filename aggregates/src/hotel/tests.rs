use super::*;
use cqrs_es::test::TestFramework;

type Fixture = TestFramework<Hotel>;

fn hotel_id(n: i64) -> HotelId {
    HotelId::parse(n).expect("valid id")
}

fn room_type_id(n: i64) -> RoomTypeId {
    RoomTypeId::parse(n).expect("valid id")
}

fn lisbon() -> HotelDetails {
    HotelDetails::parse("Casa do Rio", "Lisbon", "Europe/Lisbon").expect("valid details")
}

fn king() -> RoomTypeDetails {
    RoomTypeDetails::parse("King", 2).expect("valid room type")
}

fn details_set() -> HotelEvent {
    HotelEvent::HotelDetailsSet {
        hotel_id: hotel_id(7),
        details: lisbon(),
    }
}

#[test]
fn setting_details_of_a_new_hotel_creates_it() {
    Fixture::with(())
        .given_no_previous_events()
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: lisbon(),
        })
        .then_expect_events(vec![details_set()]);
}

#[test]
fn setting_the_same_details_again_changes_nothing() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: lisbon(),
        })
        .then_expect_events(vec![]);
}

#[test]
fn setting_new_details_records_them() {
    let renamed =
        HotelDetails::parse("Casa do Tejo", "Lisbon", "Europe/Lisbon").expect("valid details");
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(7),
            details: renamed.clone(),
        })
        .then_expect_events(vec![HotelEvent::HotelDetailsSet {
            hotel_id: hotel_id(7),
            details: renamed,
        }]);
}

#[test]
fn setting_details_under_another_hotel_id_is_wrong_hotel() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetDetails {
            hotel_id: hotel_id(8),
            details: lisbon(),
        })
        .then_expect_error(HotelError::WrongHotel);
}

#[test]
fn adding_a_room_type_to_an_unknown_hotel_is_unknown_hotel() {
    Fixture::with(())
        .given_no_previous_events()
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: king(),
        })
        .then_expect_error(HotelError::UnknownHotel);
}

#[test]
fn adding_a_room_type_records_it() {
    Fixture::with(())
        .given(vec![details_set()])
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: king(),
        })
        .then_expect_events(vec![HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: king(),
        }]);
}

#[test]
fn setting_the_same_room_type_again_changes_nothing() {
    Fixture::with(())
        .given(vec![
            details_set(),
            HotelEvent::RoomTypeSet {
                room_type_id: room_type_id(3),
                details: king(),
            },
        ])
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: king(),
        })
        .then_expect_events(vec![]);
}

#[test]
fn changing_a_room_type_records_the_new_details() {
    let family = RoomTypeDetails::parse("King family", 4).expect("valid room type");
    Fixture::with(())
        .given(vec![
            details_set(),
            HotelEvent::RoomTypeSet {
                room_type_id: room_type_id(3),
                details: king(),
            },
        ])
        .when(HotelCommand::SetRoomType {
            room_type_id: room_type_id(3),
            details: family.clone(),
        })
        .then_expect_events(vec![HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: family,
        }]);
}

#[test]
fn the_catalog_follows_the_events() {
    let mut hotel = Hotel::default();
    assert_eq!(hotel.hotel_id(), None);
    for event in [
        details_set(),
        HotelEvent::RoomTypeSet {
            room_type_id: room_type_id(3),
            details: king(),
        },
    ] {
        hotel.apply_event(&event);
    }
    assert_eq!(hotel.hotel_id(), Some(hotel_id(7)));
    assert_eq!(
        hotel.details().map(|d| d.timezone().name()),
        Some("Europe/Lisbon")
    );
    assert_eq!(hotel.room_type(room_type_id(3)), Some(&king()));
    assert_eq!(hotel.room_type(room_type_id(4)), None);
    assert_eq!(hotel.room_types().len(), 1);
    assert_eq!(details_set().event_type(), "HotelDetailsSet");
}

#[test]
fn hotel_details_are_validated_and_trimmed() {
    assert!(HotelDetails::parse("", "Lisbon", "Europe/Lisbon").is_err());
    assert!(HotelDetails::parse("Casa", "  ", "Europe/Lisbon").is_err());
    assert!(HotelDetails::parse("Casa\u{7}", "Lisbon", "Europe/Lisbon").is_err());
    assert!(HotelDetails::parse("Casa", "Lisbon", "Mars/Olympus").is_err());
    let details = HotelDetails::parse("  Casa  ", " Lisbon ", "Europe/Lisbon").expect("valid");
    assert_eq!((details.name(), details.city()), ("Casa", "Lisbon"));
}

#[test]
fn room_types_sleep_one_to_fifty_guests() {
    assert!(RoomTypeDetails::parse("King", 0).is_err());
    assert!(RoomTypeDetails::parse("King", 51).is_err());
    assert!(RoomTypeDetails::parse("", 2).is_err());
    let dorm = RoomTypeDetails::parse("Dorm", 50).expect("valid");
    assert_eq!((dorm.name(), dorm.max_occupancy()), ("Dorm", 50));
}
