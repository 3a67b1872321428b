//! `Hotel`: the catalog entry of one hotel and its room types.
//!
//! Catalog writes are PUTs: setting the same details again records nothing, so staff
//! tools can retry freely.

use std::collections::BTreeMap;

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

use crate::contract::AggregateType;
use crate::types::{HotelId, InvalidInput, RoomTypeId, TimeZone};

/// Name, city and IANA timezone of a hotel, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotelDetails {
    name: String,
    city: String,
    timezone: TimeZone,
}

fn short_text(field: &'static str, value: &str, max: usize) -> Result<String, InvalidInput> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max || value.chars().any(char::is_control) {
        return Err(InvalidInput::new(
            field,
            format!("must be 1 to {max} printable characters"),
        ));
    }
    Ok(value.to_owned())
}

impl HotelDetails {
    pub fn parse(name: &str, city: &str, timezone: &str) -> Result<Self, InvalidInput> {
        let name = short_text("name", name, 200)?;
        let city = short_text("city", city, 100)?;
        let timezone = TimeZone::parse(timezone)?;
        Ok(Self {
            name,
            city,
            timezone,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn city(&self) -> &str {
        &self.city
    }

    pub fn timezone(&self) -> TimeZone {
        self.timezone
    }
}

/// A room type's name and how many guests it sleeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomTypeDetails {
    name: String,
    max_occupancy: u32,
}

impl RoomTypeDetails {
    pub fn parse(name: &str, max_occupancy: i64) -> Result<Self, InvalidInput> {
        let name = short_text("name", name, 100)?;
        let max_occupancy = match u32::try_from(max_occupancy) {
            Ok(v) if (1..=50).contains(&v) => v,
            _ => {
                return Err(InvalidInput::new(
                    "max_occupancy",
                    "must be between 1 and 50",
                ))
            }
        };
        Ok(Self {
            name,
            max_occupancy,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_occupancy(&self) -> u32 {
        self.max_occupancy
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Hotel {
    hotel_id: Option<HotelId>,
    details: Option<HotelDetails>,
    room_types: BTreeMap<RoomTypeId, RoomTypeDetails>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HotelCommand {
    SetDetails {
        hotel_id: HotelId,
        details: HotelDetails,
    },
    SetRoomType {
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HotelEvent {
    HotelDetailsSet {
        hotel_id: HotelId,
        details: HotelDetails,
    },
    RoomTypeSet {
        room_type_id: RoomTypeId,
        details: RoomTypeDetails,
    },
}

/// Names and version: see [`crate::contract::events`].
impl DomainEvent for HotelEvent {
    fn event_type(&self) -> String {
        self.kind().as_str().to_owned()
    }

    fn event_version(&self) -> String {
        Self::VERSION.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum HotelError {
    #[error("no such hotel")]
    UnknownHotel,
    #[error("the hotel id does not match this hotel")]
    WrongHotel,
}

impl Hotel {
    pub fn hotel_id(&self) -> Option<HotelId> {
        self.hotel_id
    }

    pub fn details(&self) -> Option<&HotelDetails> {
        self.details.as_ref()
    }

    pub fn room_type(&self, id: RoomTypeId) -> Option<&RoomTypeDetails> {
        self.room_types.get(&id)
    }

    pub fn room_types(&self) -> &BTreeMap<RoomTypeId, RoomTypeDetails> {
        &self.room_types
    }

    pub fn decide(&self, command: HotelCommand) -> Result<Vec<HotelEvent>, HotelError> {
        match command {
            HotelCommand::SetDetails { hotel_id, details } => {
                if self.hotel_id.is_some_and(|id| id != hotel_id) {
                    return Err(HotelError::WrongHotel);
                }
                if self.details.as_ref() == Some(&details) {
                    return Ok(Vec::new());
                }
                Ok(vec![HotelEvent::HotelDetailsSet { hotel_id, details }])
            }
            HotelCommand::SetRoomType {
                room_type_id,
                details,
            } => {
                if self.hotel_id.is_none() {
                    return Err(HotelError::UnknownHotel);
                }
                if self.room_types.get(&room_type_id) == Some(&details) {
                    return Ok(Vec::new());
                }
                Ok(vec![HotelEvent::RoomTypeSet {
                    room_type_id,
                    details,
                }])
            }
        }
    }

    pub fn apply_event(&mut self, event: &HotelEvent) {
        match event {
            HotelEvent::HotelDetailsSet { hotel_id, details } => {
                self.hotel_id = Some(*hotel_id);
                self.details = Some(details.clone());
            }
            HotelEvent::RoomTypeSet {
                room_type_id,
                details,
            } => {
                self.room_types.insert(*room_type_id, details.clone());
            }
        }
    }
}

impl Aggregate for Hotel {
    const TYPE: &'static str = AggregateType::Hotel.as_str();
    type Command = HotelCommand;
    type Event = HotelEvent;
    type Error = HotelError;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _service: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        for event in self.decide(command)? {
            sink.write(event, self).await;
        }
        Ok(())
    }

    fn apply(&mut self, event: Self::Event) {
        self.apply_event(&event);
    }
}

#[cfg(test)]
mod tests {
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
}
