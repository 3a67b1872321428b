//! `set_inventory`.

use super::*;

fn update(total: i64, allowance: Option<i64>, rate: Option<i64>) -> InventoryUpdate {
    InventoryUpdate {
        total_rooms: Some(total),
        overbooking_allowance: allowance,
        rate_cents: rate.map(Cents::new),
    }
}

fn set(nights: &Nights, range: StayDates, update: InventoryUpdate) -> Result<Decision, Rejection> {
    set_inventory(&hotel(), nights, cmd(king(), range, update, at(0)))
}

fn cmd(
    room_type_id: RoomTypeId,
    range: StayDates,
    update: InventoryUpdate,
    now: DateTime<Utc>,
) -> SetInventory {
    SetInventory {
        hotel_id: hotel_id(),
        room_type_id,
        range,
        update,
        now,
    }
}

fn inventory_set(
    d: u32,
    total: u32,
    allowance: u32,
    rate: i64,
) -> (RoomNightKey, Vec<RoomNightEvent>) {
    (
        key(d),
        vec![RoomNightEvent::InventorySet {
            key: key(d),
            total_rooms: total,
            overbooking_allowance: allowance,
            rate_cents: Cents::new(rate),
        }],
    )
}

#[test]
fn setting_inventory_on_new_nights_puts_every_night_of_the_range_on_sale() {
    let decision =
        set(&Nights::new(), stay(10, 12), update(5, None, Some(9_000))).expect("valid update");
    assert!(decision.reservation.is_empty());
    assert_eq!(
        decision.nights,
        vec![
            inventory_set(10, 5, 0, 9_000),
            inventory_set(11, 5, 0, 9_000)
        ]
    );
}

#[test]
fn omitting_the_rate_for_a_night_without_inventory_is_invalid() {
    let nights = nights(&[(10, 5, 0, 9_000)]);
    match set(&nights, stay(10, 12), update(5, None, None)) {
        Err(Rejection::Invalid(InvalidInputRejection { field, message })) => {
            assert_eq!(field, "rate_cents");
            assert!(message.contains("2027-06-11"), "{message}");
        }
        other => panic!("expected invalid rate_cents, got {other:?}"),
    }
}

#[test]
fn omitted_allowance_and_rate_keep_the_current_values() {
    let nights = nights(&[(10, 5, 2, 9_000), (11, 5, 1, 11_000)]);
    let decision = set(&nights, stay(10, 12), update(8, None, None)).expect("valid update");
    assert_eq!(
        decision.nights,
        vec![
            inventory_set(10, 8, 2, 9_000),
            inventory_set(11, 8, 1, 11_000)
        ]
    );
    let decision =
        set(&nights, stay(10, 12), update(8, Some(0), Some(10_000))).expect("valid update");
    assert_eq!(
        decision.nights,
        vec![
            inventory_set(10, 8, 0, 10_000),
            inventory_set(11, 8, 0, 10_000)
        ]
    );
}

#[test]
fn setting_unchanged_inventory_decides_nothing() {
    let nights = nights(&[(10, 5, 2, 9_000)]);
    let decision = set(&nights, stay(10, 11), update(5, None, None)).expect("valid update");
    assert!(decision.is_empty());
}

#[test]
fn setting_inventory_below_what_is_sold_names_the_night_and_changes_no_night() {
    let mut nights = four_nights(3);
    held(hold_cmd(1, 11, 12, 2), &mut nights);
    confirmed(hold_cmd(2, 12, 13, 1), &mut nights);
    assert_eq!(
        set(&nights, stay(10, 14), update(1, None, None)),
        Err(Rejection::InventoryBelowReserved {
            night: day(11),
            reserved: 2
        })
    );
    let decision = set(&nights, stay(10, 14), update(2, None, None)).expect("fits");
    assert_eq!(decision.nights.len(), 4);
}

#[test]
fn lapsed_holds_do_not_count_as_sold_when_lowering_inventory() {
    let mut nights = four_nights(3);
    held(hold_cmd(1, 11, 12, 2), &mut nights);
    let decision = set_inventory(
        &hotel(),
        &nights,
        cmd(king(), stay(11, 12), update(0, None, None), at(15)),
    )
    .expect("the lapsed hold does not count");
    assert_eq!(
        decision.nights,
        vec![(
            key(11),
            vec![
                RoomNightEvent::HoldLapsed {
                    reservation_id: res(1),
                    rooms: 2,
                    expired_at: at(15),
                },
                RoomNightEvent::InventorySet {
                    key: key(11),
                    total_rooms: 0,
                    overbooking_allowance: 0,
                    rate_cents: Cents::new(12_000),
                },
            ]
        )]
    );
}

#[test]
fn out_of_range_inventory_values_are_invalid() {
    let nights = four_nights(3);
    assert_eq!(
        invalid_field(set(&nights, stay(10, 11), update(-1, None, None))),
        "total_rooms"
    );
    assert_eq!(
        invalid_field(set(&nights, stay(10, 11), update(1, Some(-1), None))),
        "overbooking_allowance"
    );
    assert_eq!(
        invalid_field(set(&nights, stay(10, 11), update(1, None, Some(-5)))),
        "rate_cents"
    );
}

#[test]
fn setting_inventory_of_an_unknown_hotel_or_room_type_is_refused() {
    let range = stay(10, 11);
    let up = update(1, None, Some(1));
    assert_eq!(
        set_inventory(
            &Hotel::default(),
            &Nights::new(),
            cmd(king(), range, up, at(0))
        ),
        Err(Rejection::UnknownHotel)
    );
    let other_type = RoomTypeId::parse(9).expect("valid id");
    assert_eq!(
        set_inventory(&hotel(), &Nights::new(), cmd(other_type, range, up, at(0))),
        Err(Rejection::UnknownRoomType)
    );
}
