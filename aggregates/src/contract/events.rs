//! Event type names and versions (the `event_type` and `event_version` columns), once
//! per event enum.
//!
//! Each event enum gets a fieldless twin naming its variants (`RoomNightEvent` has
//! [`RoomNightEventType`]), generated from the list below together with
//! `RoomNightEvent::kind`, a match without a wildcard: a variant added to an event enum
//! and not listed here fails to compile. The name of each variant is its identifier,
//! which is also the tag serde writes in the payload (`{"RoomsHeld": {...}}`), so the
//! column and the payload cannot be named apart.
//!
//! Every enum has one version, [`RoomNightEvent::VERSION`] and so on: what
//! `DomainEvent::event_version` stores with each new event. A change of an event's
//! shape bumps its enum's version and adds an upcaster for the older versions (see
//! [`super::decode`]). A new variant, or a new field whose serde default states what
//! every older event meant (a stay held before rate plans existed was sold at the base
//! rate under the house policy, for one guest), reads every older payload as it was
//! written and keeps the version.

use std::fmt;

use crate::block::BlockEvent;
use crate::hotel::HotelEvent;
use crate::personal::PersonalField;
use crate::reservation::ReservationEvent;
use crate::room_night::RoomNightEvent;

macro_rules! event_types {
    (
        $(#[$doc:meta])*
        $event:ident => $kind:ident, version $version:literal {
            $($variant:ident),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $kind {
            $($variant),+
        }

        impl $kind {
            /// Every event type of the enum, in declaration order.
            pub const ALL: &'static [$kind] = &[$($kind::$variant),+];

            /// The name stored in `event_type` (and the payload's tag).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($kind::$variant => stringify!($variant)),+
                }
            }

            /// The event type a stored name names; `None` for one this build does not
            /// know.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $(stringify!($variant) => Some($kind::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $kind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $event {
            /// The version stored with every event of this enum (`event_version`).
            pub const VERSION: &'static str = $version;

            /// Which event this is, without its data.
            pub const fn kind(&self) -> $kind {
                match self {
                    $($event::$variant { .. } => $kind::$variant),+
                }
            }
        }
    };
}

event_types! {
    /// The event types of [`HotelEvent`].
    HotelEvent => HotelEventType, version "1.0" {
        HotelDetailsSet,
        RoomTypeSet,
        RatePlanSet,
        TaxesSet,
    }
}

event_types! {
    /// The event types of [`BlockEvent`].
    BlockEvent => BlockEventType, version "1.0" {
        BlockTermsSet,
        BlockClosed,
    }
}

event_types! {
    /// The event types of [`RoomNightEvent`].
    RoomNightEvent => RoomNightEventType, version "1.0" {
        InventorySet,
        RoomsHeld,
        RoomsBooked,
        HoldConfirmed,
        HoldLapsed,
        RoomsReleased,
        RestrictionsSet,
        PlanRateSet,
        BlockSet,
        BlockRemoved,
        BlockReleased,
        BlockRoomsHeld,
        BlockHoldLapsed,
        BlockRoomsReleased,
    }
}

event_types! {
    /// The event types of [`ReservationEvent`]. 2.0.0: personal data became `Personal`
    /// (written as cqrs-es's semantic version upcasters write it, so that an upcast 1.0
    /// event and a new one carry the same version).
    ReservationEvent => ReservationEventType, version "2.0.0" {
        ReservationHeld,
        ReservationConfirmed,
        ReservationCancelled,
        HoldExpired,
        DatesChanged,
        PaymentDeclined,
        LatePaymentRefunded,
        GuestCheckedIn,
        GuestCheckedOut,
        NoShowRecorded,
        AuthorizationIncreased,
        PaymentCaptured,
        PaymentVoided,
        PaymentRefunded,
        DateChangeHeld,
        DateChangeReleased,
        GuestErased,
    }
}

impl ReservationEventType {
    /// The personal value an event of this type carries, if any.
    pub const fn personal_field(self) -> Option<PersonalField> {
        match self {
            Self::ReservationHeld => Some(PersonalField::Guest),
            Self::ReservationCancelled => Some(PersonalField::CancelReason),
            Self::ReservationConfirmed
            | Self::HoldExpired
            | Self::DatesChanged
            | Self::PaymentDeclined
            | Self::LatePaymentRefunded
            | Self::GuestCheckedIn
            | Self::GuestCheckedOut
            | Self::NoShowRecorded
            | Self::AuthorizationIncreased
            | Self::PaymentCaptured
            | Self::PaymentVoided
            | Self::PaymentRefunded
            | Self::DateChangeHeld
            | Self::DateChangeReleased
            | Self::GuestErased => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotel::{HotelDetails, RoomTypeDetails};
    use crate::room_night::RoomNightKey;
    use crate::types::{Cents, HotelId, ReservationId, RoomTypeId};
    use chrono::{NaiveDate, TimeZone, Utc};
    use cqrs_es::DomainEvent;
    use uuid::Uuid;

    /// The tag serde writes for an event: what `event_type` must equal.
    fn tag<E: serde::Serialize>(event: &E) -> String {
        match serde_json::to_value(event) {
            Ok(serde_json::Value::Object(map)) => map.keys().next().cloned().unwrap_or_default(),
            other => panic!("not an externally tagged event: {other:?}"),
        }
    }

    fn check<E: DomainEvent>(event: &E, name: &str, version: &str) {
        assert_eq!(event.event_type(), name);
        assert_eq!(tag(event), name);
        assert_eq!(event.event_version(), version);
    }

    fn code() -> crate::types::BlockCode {
        crate::types::BlockCode::parse("ACME").expect("code")
    }

    #[test]
    fn every_room_night_event_is_stored_under_its_variant_name_and_version() {
        let id = ReservationId::from_uuid(Uuid::from_u128(1));
        let at = Utc
            .with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
            .single()
            .expect("time");
        let key = RoomNightKey::new(
            HotelId::parse(7).expect("id"),
            RoomTypeId::parse(3).expect("id"),
            NaiveDate::from_ymd_opt(2027, 6, 10).expect("date"),
        );
        let events = [
            RoomNightEvent::InventorySet {
                key,
                total_rooms: 1,
                overbooking_allowance: 0,
                rate_cents: Cents::new(1),
            },
            RoomNightEvent::RoomsHeld {
                reservation_id: id,
                rooms: 1,
                expires_at: at,
            },
            RoomNightEvent::RoomsBooked {
                reservation_id: id,
                rooms: 1,
            },
            RoomNightEvent::HoldConfirmed {
                reservation_id: id,
                rooms: 1,
            },
            RoomNightEvent::HoldLapsed {
                reservation_id: id,
                rooms: 1,
                expired_at: at,
            },
            RoomNightEvent::RoomsReleased {
                reservation_id: id,
                rooms: 1,
                was_confirmed: false,
            },
            RoomNightEvent::RestrictionsSet {
                rate_plan_id: None,
                restrictions: crate::restrictions::NightRestrictions::default(),
            },
            RoomNightEvent::PlanRateSet {
                rate_plan_id: crate::types::RatePlanId::parse(2).expect("id"),
                rate_cents: Some(Cents::new(1)),
            },
            RoomNightEvent::BlockSet {
                code: code(),
                rooms: 2,
                rate_cents: Cents::new(1),
                change: 2,
            },
            RoomNightEvent::BlockRemoved {
                code: code(),
                rooms: 2,
            },
            RoomNightEvent::BlockReleased {
                code: code(),
                rooms: 2,
            },
            RoomNightEvent::BlockRoomsHeld {
                reservation_id: id,
                code: code(),
                rooms: 1,
                expires_at: at,
            },
            RoomNightEvent::BlockHoldLapsed {
                reservation_id: id,
                code: code(),
                rooms: 1,
                expired_at: at,
                to_block: true,
            },
            RoomNightEvent::BlockRoomsReleased {
                reservation_id: id,
                code: code(),
                rooms: 1,
                was_confirmed: true,
                to_block: false,
            },
        ];
        assert_eq!(events.len(), RoomNightEventType::ALL.len());
        for (event, kind) in events.iter().zip(RoomNightEventType::ALL) {
            assert_eq!(event.kind(), *kind);
            check(event, kind.as_str(), "1.0");
            assert_eq!(RoomNightEventType::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(RoomNightEventType::parse("RoomsTeleported"), None);
    }

    #[test]
    fn every_hotel_event_is_stored_under_its_variant_name_and_version() {
        let events = [
            HotelEvent::HotelDetailsSet {
                hotel_id: HotelId::parse(7).expect("id"),
                details: HotelDetails::parse("Casa", "Lisbon", "Europe/Lisbon").expect("valid"),
            },
            HotelEvent::RoomTypeSet {
                room_type_id: RoomTypeId::parse(3).expect("id"),
                details: RoomTypeDetails::parse("King", 2).expect("valid"),
            },
            HotelEvent::RatePlanSet {
                rate_plan_id: crate::types::RatePlanId::parse(1).expect("id"),
                plan: crate::hotel::RatePlan::parse(
                    "Flexible",
                    [RoomTypeId::parse(3).expect("id")].into(),
                    crate::cancellation::CancellationPolicy::HOUSE,
                    crate::rate_plan::Pricing::Own,
                )
                .expect("valid"),
            },
            HotelEvent::TaxesSet {
                taxes: crate::taxes::Taxes::default(),
            },
        ];
        assert_eq!(events.len(), HotelEventType::ALL.len());
        for (event, kind) in events.iter().zip(HotelEventType::ALL) {
            assert_eq!(event.kind(), *kind);
            check(event, kind.as_str(), "1.0");
            assert_eq!(HotelEventType::parse(kind.as_str()), Some(*kind));
        }
    }

    #[test]
    fn every_reservation_event_type_parses_from_its_name() {
        let names: Vec<&str> = ReservationEventType::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "ReservationHeld",
                "ReservationConfirmed",
                "ReservationCancelled",
                "HoldExpired",
                "DatesChanged",
                "PaymentDeclined",
                "LatePaymentRefunded",
                "GuestCheckedIn",
                "GuestCheckedOut",
                "NoShowRecorded",
                "AuthorizationIncreased",
                "PaymentCaptured",
                "PaymentVoided",
                "PaymentRefunded",
                "DateChangeHeld",
                "DateChangeReleased",
                "GuestErased",
            ]
        );
        for kind in ReservationEventType::ALL {
            assert_eq!(ReservationEventType::parse(kind.as_str()), Some(*kind));
        }
        let expired = ReservationEvent::HoldExpired {
            expired_at: Utc
                .with_ymd_and_hms(2027, 6, 1, 12, 0, 0)
                .single()
                .expect("time"),
        };
        check(&expired, "HoldExpired", ReservationEvent::VERSION);
        let checked_in = ReservationEvent::GuestCheckedIn {
            checked_in_at: Utc
                .with_ymd_and_hms(2027, 6, 10, 16, 0, 0)
                .single()
                .expect("time"),
        };
        check(&checked_in, "GuestCheckedIn", ReservationEvent::VERSION);
    }
}
