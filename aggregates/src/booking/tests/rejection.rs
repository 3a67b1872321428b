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
        // A line's refusal, stored as the outcome of a hold of several room types.
        Rejection::SoldOut { night: day(11) }.in_line(1, king(), 2),
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

#[test]
fn a_lines_refusal_names_the_line_only_when_there_are_several() {
    let sold_out = Rejection::SoldOut { night: day(11) };

    assert_eq!(sold_out.clone().in_line(0, king(), 1), sold_out);
    assert_eq!(
        sold_out.clone().in_line(1, king(), 2),
        Rejection::InLine {
            line: 1,
            room_type_id: king(),
            cause: Box::new(sold_out),
        }
    );
    // An invalid field is named inside its line.
    assert_eq!(
        invalid_field(Err(
            Rejection::from(InvalidInput::new("rooms", "too many")).in_line(1, king(), 2)
        )),
        "lines[1].rooms"
    );
}
