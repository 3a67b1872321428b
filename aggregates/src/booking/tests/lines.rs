//! Reservations of several room types (lines): every line held or none, each on its own
//! room type's nights, restrictions and occupancy; every later decision acts on every
//! line.

use super::*;
use crate::hotel::RoomTypeDetails;

const TWIN: i64 = 4;

fn twin() -> RoomTypeId {
    RoomTypeId::parse(TWIN).expect("valid id")
}

/// Hotel 7 with room types 3 (kings, 2 guests) and 4 (twin, 2 guests).
fn family_hotel() -> Hotel {
    let mut hotel = hotel();
    let command = HotelCommand::SetRoomType {
        room_type_id: twin(),
        details: RoomTypeDetails::parse("Twin", 2).expect("valid room type"),
    };
    for event in hotel.decide(command).expect("catalog accepts") {
        hotel.apply_event(&event);
    }
    hotel
}

/// Twin nights 10..=13 with `total` rooms each at 90, 95, 100, 105 euros.
fn twin_nights(total: u32) -> Nights {
    [(10, 9_000), (11, 9_500), (12, 10_000), (13, 10_500)]
        .into_iter()
        .map(|(d, rate)| {
            let mut night = RoomNight::default();
            night.apply_event(&RoomNightEvent::InventorySet {
                key: RoomNightKey::new(hotel_id(), twin(), day(d)),
                total_rooms: total,
                overbooking_allowance: 0,
                rate_cents: Cents::new(rate),
            });
            (day(d), night)
        })
        .collect()
}

/// A kings room for two and `twins` twin rooms for one each, `[start, end)`.
fn family_cmd(id: u128, start: u32, end: u32, twins: i64) -> HoldStay {
    let mut cmd = hold_cmd(id, start, end, 1);
    cmd.request.guests = GuestCount::parse(2).expect("guests");
    cmd.request.more_lines = vec![LineRequest {
        room_type_id: twin(),
        rooms: rooms(twins),
        guests: GuestCount::ONE,
        rate_plan_id: None,
    }];
    cmd
}

fn both<'a>(kings: &'a Nights, twins: &'a Nights) -> StayNights<'a> {
    let mut nights = StayNights::one(king(), kings);
    nights.add(twin(), twins);
    nights
}

/// Applies a decision's events to the kings and twin nights it names.
fn apply_both(
    decision: &Decision,
    reservation: &mut Reservation,
    kings: &mut Nights,
    twins: &mut Nights,
) {
    for event in &decision.reservation {
        reservation.apply_event(event);
    }
    for (key, events) in &decision.nights {
        let nights = if key.room_type_id == twin() {
            &mut *twins
        } else {
            &mut *kings
        };
        let night = nights.entry(key.night).or_default();
        for event in events {
            night.apply_event(event);
        }
    }
}

fn held_family(kings: &mut Nights, twins: &mut Nights) -> Reservation {
    let mut reservation = Reservation::default();
    let decision = hold_stay(
        &family_hotel(),
        &reservation,
        &both(kings, twins),
        &BookingLimits::default(),
        family_cmd(1, 10, 12, 2),
    )
    .expect("both lines can be held");
    apply_both(&decision, &mut reservation, kings, twins);
    reservation
}

/// The hold `cmd` decided at `hotel` on the king and twin nights.
fn hold_at(
    hotel: &Hotel,
    kings: &Nights,
    twins: &Nights,
    cmd: HoldStay,
) -> Result<Decision, Rejection> {
    hold_stay(
        hotel,
        &Reservation::default(),
        &both(kings, twins),
        &BookingLimits::default(),
        cmd,
    )
}

/// The twin line's refusal of a family's hold, for `cause`.
fn twin_refused(cause: Rejection) -> Result<Decision, Rejection> {
    Err(Rejection::InLine {
        line: 1,
        room_type_id: twin(),
        cause: Box::new(cause),
    })
}

#[test]
fn a_hold_of_two_room_types_takes_each_lines_rooms_on_its_own_nights_and_prices_each() {
    let (kings, twins) = (four_nights(3), twin_nights(2));

    let decision = hold_at(&family_hotel(), &kings, &twins, family_cmd(1, 10, 12, 2))
        .expect("both lines can be held");

    let taken: Vec<(RoomTypeId, NaiveDate, u32)> = decision
        .nights
        .iter()
        .flat_map(|(key, events)| {
            events.iter().filter_map(move |e| match e {
                RoomNightEvent::RoomsHeld { rooms, .. } => {
                    Some((key.room_type_id, key.night, *rooms))
                }
                _ => None,
            })
        })
        .collect();
    assert_eq!(
        taken,
        vec![
            (king(), day(10), 1),
            (king(), day(11), 1),
            (twin(), day(10), 2),
            (twin(), day(11), 2),
        ]
    );
    let Some(ReservationEvent::ReservationHeld(details)) = decision.reservation.first() else {
        panic!("a reservation is held: {:?}", decision.reservation);
    };
    // King 100 + 120; twin 2 x (90 + 95).
    assert_eq!(details.total_cents, Cents::new(22_000 + 37_000));
    assert_eq!(details.first_night(), Cents::new(10_000 + 18_000));
    let lines = details.lines();
    assert_eq!(
        lines
            .iter()
            .map(|l| (l.room_type_id, l.rooms.get(), l.guests.get(), l.total_cents))
            .collect::<Vec<_>>(),
        vec![
            (king(), 1, 2, Cents::new(22_000)),
            (twin(), 2, 1, Cents::new(37_000)),
        ]
    );
    assert_eq!(details.all_rooms(), 3);
}

#[test]
fn a_sold_out_line_refuses_the_whole_hold_naming_its_line_room_type_and_night() {
    let (kings, twins) = (four_nights(3), twin_nights(1));

    let refused = hold_at(&family_hotel(), &kings, &twins, family_cmd(1, 10, 12, 2));

    assert_eq!(refused, twin_refused(Rejection::SoldOut { night: day(10) }));
}

#[test]
fn each_line_is_held_to_its_own_room_types_occupancy() {
    let (kings, twins) = (four_nights(3), twin_nights(2));
    let mut cmd = family_cmd(1, 10, 12, 1);
    cmd.request.more_lines[0].guests = GuestCount::parse(3).expect("guests");

    let refused = hold_at(&family_hotel(), &kings, &twins, cmd);

    assert_eq!(
        refused,
        twin_refused(Rejection::OccupancyExceeded { max_occupancy: 2 })
    );
}

#[test]
fn a_line_of_a_room_type_the_hotel_does_not_have_is_named() {
    let (kings, twins) = (four_nights(3), twin_nights(2));

    let refused = hold_at(&hotel(), &kings, &twins, family_cmd(1, 10, 12, 1));

    assert_eq!(refused, twin_refused(Rejection::UnknownRoomType));
}

#[test]
fn cancelling_releases_every_lines_nights() {
    let (mut kings, mut twins) = (four_nights(3), twin_nights(2));
    let reservation = held_family(&mut kings, &mut twins);

    let decision = cancel(
        &reservation,
        &both(&kings, &twins),
        at(5),
        "plans".into(),
        CancelledBy::Guest,
        TimeZone::UTC,
    )
    .expect("cancellable");

    let released: Vec<(RoomTypeId, NaiveDate)> = decision
        .nights
        .iter()
        .map(|(k, _)| (k.room_type_id, k.night))
        .collect();
    assert_eq!(
        released,
        vec![
            (king(), day(10)),
            (king(), day(11)),
            (twin(), day(10)),
            (twin(), day(11)),
        ]
    );
    assert_eq!(decision.nights[2].1, vec![rooms_released(1, 2, false)]);
}

#[test]
fn a_date_change_moves_every_line_and_reprices_each() {
    let (mut kings, mut twins) = (four_nights(3), twin_nights(2));
    let mut reservation = held_family(&mut kings, &mut twins);

    let decision = change_dates(
        &family_hotel(),
        &reservation,
        &both(&kings, &twins),
        &BookingLimits::default(),
        ChangeDates {
            new_stay: stay(12, 14),
            expected_total_cents: None,
            now: at(2),
        },
        None,
    )
    .expect("both lines move");
    apply_both(&decision, &mut reservation, &mut kings, &mut twins);

    let details = reservation.details().expect("details");
    // King 140 + 160; twin 2 x (100 + 105).
    assert_eq!(
        details
            .lines()
            .iter()
            .map(|l| (l.room_type_id, l.total_cents, l.first_night_cents))
            .collect::<Vec<_>>(),
        vec![
            (king(), Cents::new(30_000), Cents::new(14_000)),
            (twin(), Cents::new(41_000), Cents::new(20_000)),
        ]
    );
    assert_eq!(details.total_cents, Cents::new(71_000));
    for (nights, rooms) in [(&kings, 1), (&twins, 2)] {
        assert_eq!(nights[&day(10)].held(), 0);
        assert_eq!(nights[&day(12)].held(), rooms);
        assert_eq!(nights[&day(13)].held(), rooms);
    }
}

#[test]
fn a_date_change_one_line_cannot_make_is_refused_naming_that_line() {
    let (mut kings, mut twins) = (four_nights(3), twin_nights(2));
    let reservation = held_family(&mut kings, &mut twins);
    // Someone else takes the last twin room on the 13th.
    let other = hold_stay(
        &family_hotel(),
        &Reservation::default(),
        &StayNights::one(twin(), &twins),
        &BookingLimits::default(),
        HoldStay {
            request: HoldRequest {
                room_type_id: twin(),
                ..hold_cmd(2, 13, 14, 2).request
            },
            ..hold_cmd(2, 13, 14, 2)
        },
    )
    .expect("the last twin rooms");
    apply_both(&other, &mut Reservation::default(), &mut kings, &mut twins);

    let refused = change_dates(
        &family_hotel(),
        &reservation,
        &both(&kings, &twins),
        &BookingLimits::default(),
        ChangeDates {
            new_stay: stay(12, 14),
            expected_total_cents: None,
            now: at(2),
        },
        None,
    );

    assert_eq!(refused, twin_refused(Rejection::SoldOut { night: day(13) }));
}

#[test]
fn each_line_keeps_its_own_share_when_policies_differ() {
    let (mut kings, mut twins) = (four_nights(3), twin_nights(2));
    let reservation = held_family(&mut kings, &mut twins);
    let details = reservation.details().expect("details");

    // King 220.00 refunded in full, twin 370.00 kept whole.
    assert_eq!(
        details.room_kept(Cents::new(59_000), &[100, 0]),
        Cents::new(37_000)
    );
    // One share for every line is the single-line rule.
    assert_eq!(
        details.room_kept(Cents::new(59_000), &[50]),
        Cents::new(29_500)
    );
}

#[test]
fn a_room_type_in_two_lines_is_refused_before_any_night_is_decided() {
    let (kings, twins) = (four_nights(3), twin_nights(2));
    let mut cmd = family_cmd(1, 10, 12, 1);
    cmd.request.more_lines[0].room_type_id = king();

    let refused = hold_at(&family_hotel(), &kings, &twins, cmd);

    assert_eq!(invalid_field(refused), "lines[1].room_type_id");
}

#[test]
fn a_stay_in_the_past_is_the_whole_requests_fault_not_a_lines() {
    let (kings, twins) = (four_nights(3), twin_nights(2));
    let mut cmd = family_cmd(1, 10, 12, 1);
    cmd.now = at(60 * 24 * 30);

    let refused = hold_at(&family_hotel(), &kings, &twins, cmd);

    assert_eq!(invalid_field(refused), "start_date");
}
