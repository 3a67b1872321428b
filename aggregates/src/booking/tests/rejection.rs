//! `Rejection`: how refusals map and are stored.

use super::*;

#[test]
fn reservation_errors_map_to_rejections() {
    assert_eq!(
        Rejection::from(ReservationError::NotFound),
        Rejection::ReservationNotFound
    );
    assert_eq!(
        Rejection::from(ReservationError::AlreadyExists),
        Rejection::ReservationExists
    );
    assert_eq!(
        Rejection::from(ReservationError::HoldStillLive),
        Rejection::HoldStillLive
    );
    assert_eq!(
        invalid_field(Err(ReservationError::SameDates.into())),
        "end_date"
    );
}

#[test]
fn rejections_survive_a_json_round_trip() {
    let rejections = [
        Rejection::SoldOut { night: day(11) },
        Rejection::PriceChanged {
            total_cents: Cents::new(1),
        },
        Rejection::InvalidState {
            status: ReservationStatus::Cancelled,
        },
        InvalidInput::new("rooms", "too many").into(),
    ];
    for rejection in rejections {
        let json = serde_json::to_string(&rejection).expect("serializes");
        let back: Rejection = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, rejection);
    }
    assert_eq!(
        serde_json::to_value(Rejection::SoldOut { night: day(11) }).expect("serializes"),
        serde_json::json!({"error": "sold_out", "night": "2027-06-11"})
    );
}

#[test]
fn a_state_refusal_names_the_status_as_the_api_writes_it() {
    for status in ReservationStatus::ALL {
        let message = Rejection::InvalidState { status }.to_string();

        assert_eq!(message, format!("the reservation is {}", status.as_str()));
        assert!(
            !message.chars().any(|c| c.is_ascii_uppercase()),
            "{message}"
        );
    }
}
