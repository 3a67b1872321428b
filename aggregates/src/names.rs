//! The names the event log stores, each an enum with an explicit storage name and a
//! parser: the `aggregate_type` column ([`AggregateType`]) and `metadata.command` of
//! every event ([`CommandName`]).
//!
//! A module of their own, under every aggregate and above nothing but `std`: the
//! aggregates name their type here, and the event registry ([`crate::contract`]),
//! which names every aggregate's events, re-exports them, so neither depends on the
//! other through it.

use std::fmt;

/// The aggregates, as the `aggregate_type` column names them. The storage names are
/// also each aggregate's `cqrs_es::Aggregate::TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AggregateType {
    Hotel,
    RoomNight,
    Reservation,
    Block,
}

impl AggregateType {
    pub const ALL: [Self; 4] = [Self::Hotel, Self::RoomNight, Self::Reservation, Self::Block];

    /// The name stored in `events.aggregate_type` (and `audit_log.aggregate_type`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Hotel => "hotel",
            Self::RoomNight => "room_night",
            Self::Reservation => "reservation",
            Self::Block => "block",
        }
    }

    /// The aggregate a stored `aggregate_type` names; `None` for a name this build does
    /// not know.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl fmt::Display for AggregateType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The commands of the write side, as stored in every event's `metadata.command` and
/// hashed into the fingerprint of an idempotent request.
///
/// Read back by the projections (occupancy counts a release as a cancellation when its
/// command was [`CommandName::Cancel`]), so a renamed command must not change what is
/// stored: the storage names are explicit, not derived from the variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommandName {
    SetHotel,
    SetRoomType,
    SetInventory,
    HoldStay,
    Cancel,
    ChangeDates,
    Confirm,
    ExpireHold,
    ApplyAuthorization,
    DeclinePayment,
    SetRatePlan,
    SetRestrictions,
    SetPlanRates,
    UpdateAri,
    CheckIn,
    CheckOut,
    RecordNoShow,
    CapturePayment,
    RecordIncrement,
    HoldDateChange,
    ReleaseDateChange,
    EraseGuest,
    SetTaxes,
    SetBlock,
    ReleaseBlock,
}

impl CommandName {
    pub const ALL: [Self; 25] = [
        Self::SetHotel,
        Self::SetRoomType,
        Self::SetInventory,
        Self::HoldStay,
        Self::Cancel,
        Self::ChangeDates,
        Self::Confirm,
        Self::ExpireHold,
        Self::ApplyAuthorization,
        Self::DeclinePayment,
        Self::SetRatePlan,
        Self::SetRestrictions,
        Self::SetPlanRates,
        Self::UpdateAri,
        Self::CheckIn,
        Self::CheckOut,
        Self::RecordNoShow,
        Self::CapturePayment,
        Self::RecordIncrement,
        Self::HoldDateChange,
        Self::ReleaseDateChange,
        Self::EraseGuest,
        Self::SetTaxes,
        Self::SetBlock,
        Self::ReleaseBlock,
    ];

    /// The name stored in `metadata.command` and hashed into idempotency records.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SetHotel => "set_hotel",
            Self::SetRoomType => "set_room_type",
            Self::SetInventory => "set_inventory",
            Self::HoldStay => "hold_stay",
            Self::Cancel => "cancel",
            Self::ChangeDates => "change_dates",
            Self::Confirm => "confirm",
            Self::ExpireHold => "expire_hold",
            Self::ApplyAuthorization => "apply_authorization",
            Self::DeclinePayment => "decline_payment",
            Self::SetRatePlan => "set_rate_plan",
            Self::SetRestrictions => "set_restrictions",
            Self::SetPlanRates => "set_plan_rates",
            Self::UpdateAri => "update_ari",
            Self::CheckIn => "check_in",
            Self::CheckOut => "check_out",
            Self::RecordNoShow => "record_no_show",
            Self::CapturePayment => "capture_payment",
            Self::RecordIncrement => "record_increment",
            Self::HoldDateChange => "hold_date_change",
            Self::ReleaseDateChange => "release_date_change",
            Self::EraseGuest => "erase_guest",
            Self::SetTaxes => "set_taxes",
            Self::SetBlock => "set_block",
            Self::ReleaseBlock => "release_block",
        }
    }

    /// The command a stored name names; `None` for one this build does not know.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl fmt::Display for CommandName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A match with no wildcard: a new variant fails to compile here until it is also
    /// listed in `ALL` (which this test then checks).
    fn listed_aggregate(t: AggregateType) -> usize {
        match t {
            AggregateType::Hotel
            | AggregateType::RoomNight
            | AggregateType::Reservation
            | AggregateType::Block => 4,
        }
    }

    #[test]
    fn every_aggregate_type_round_trips_through_its_storage_name() {
        for t in AggregateType::ALL {
            assert_eq!(AggregateType::parse(t.as_str()), Some(t));
            assert_eq!(listed_aggregate(t), AggregateType::ALL.len());
        }
        assert_eq!(
            AggregateType::ALL.map(AggregateType::as_str),
            ["hotel", "room_night", "reservation", "block"]
        );
        assert_eq!(AggregateType::parse("spaceship"), None);
        assert_eq!(AggregateType::parse("RoomNight"), None);
    }

    fn listed_command(c: CommandName) -> usize {
        match c {
            CommandName::SetHotel
            | CommandName::SetRoomType
            | CommandName::SetInventory
            | CommandName::HoldStay
            | CommandName::Cancel
            | CommandName::ChangeDates
            | CommandName::Confirm
            | CommandName::ExpireHold
            | CommandName::ApplyAuthorization
            | CommandName::DeclinePayment
            | CommandName::SetRatePlan
            | CommandName::SetRestrictions
            | CommandName::SetPlanRates
            | CommandName::UpdateAri
            | CommandName::CheckIn
            | CommandName::CheckOut
            | CommandName::RecordNoShow
            | CommandName::CapturePayment
            | CommandName::RecordIncrement
            | CommandName::HoldDateChange
            | CommandName::ReleaseDateChange
            | CommandName::EraseGuest
            | CommandName::SetTaxes
            | CommandName::SetBlock
            | CommandName::ReleaseBlock => 25,
        }
    }

    #[test]
    fn every_command_name_round_trips_through_its_storage_name() {
        for c in CommandName::ALL {
            assert_eq!(CommandName::parse(c.as_str()), Some(c));
            assert_eq!(listed_command(c), CommandName::ALL.len());
        }
        // What is already stored in event metadata and idempotency records.
        assert_eq!(CommandName::Cancel.as_str(), "cancel");
        assert_eq!(CommandName::HoldStay.to_string(), "hold_stay");
        assert_eq!(CommandName::parse("Cancel"), None);
    }
}
