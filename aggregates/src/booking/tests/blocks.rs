//! Group blocks: setting one up over a stay, moving its dates, releasing it, and
//! booking from it at its rate.

use super::*;
use crate::block::{Block, BlockTerms, ReleaseReason};
use crate::types::BlockCode;

fn acme() -> BlockCode {
    BlockCode::parse("ACME").expect("code")
}

fn terms(start: u32, end: u32, n: i64) -> BlockTerms {
    BlockTerms::parse(
        "Acme offsite",
        king(),
        stay(start, end),
        rooms(n),
        Cents::new(15_000),
        day(5),
    )
    .expect("terms")
}

fn set(block: &Block, nights: &Nights, terms: BlockTerms) -> Result<BlockDecision, Rejection> {
    set_block(
        &hotel(),
        block,
        nights,
        SetBlock {
            hotel_id: hotel_id(),
            code: acme(),
            terms,
            max_days_ahead: 730,
            now: at(0),
        },
    )
}

/// Applies a block decision to the block and the nights.
fn settle(decision: &BlockDecision, block: &mut Block, nights: &mut Nights) {
    for event in &decision.block {
        block.apply_event(event);
    }
    apply(&decision.nights, &mut Reservation::default(), nights);
}

fn block_hold(id: u128, start: u32, end: u32, n: i64) -> HoldStay {
    let mut cmd = hold_cmd(id, start, end, n);
    cmd.request.block_code = Some(acme());
    cmd
}

#[test]
fn a_block_sets_its_rooms_aside_on_every_night_of_its_stay() {
    let (mut block, mut nights) = (Block::default(), four_nights(5));
    let decision = set(&block, &nights, terms(10, 13, 3)).expect("set");
    assert_eq!(decision.block.len(), 1);
    let nights_set: Vec<NaiveDate> = decision
        .nights
        .nights
        .iter()
        .map(|(k, _)| k.night)
        .collect();
    assert_eq!(nights_set, vec![day(10), day(11), day(12)]);
    settle(&decision, &mut block, &mut nights);
    assert_eq!(nights[&day(10)].remaining(), 2);
    assert_eq!(
        nights[&day(13)].remaining(),
        5,
        "the day after is not the block's"
    );
}

#[test]
fn a_block_is_refused_whole_naming_the_first_night_general_sale_cannot_spare() {
    let mut nights = four_nights(5);
    held(hold_cmd(1, 11, 12, 3), &mut nights);
    assert_eq!(
        set(&Block::default(), &nights, terms(10, 13, 3)),
        Err(Rejection::SoldOut { night: day(11) })
    );
}

#[test]
fn moving_a_block_gives_back_the_nights_it_leaves_and_takes_the_new_ones() {
    let (mut block, mut nights) = (Block::default(), four_nights(5));
    let decision = set(&block, &nights, terms(10, 12, 2)).expect("set");
    settle(&decision, &mut block, &mut nights);
    let decision = set(&block, &nights, terms(11, 14, 2)).expect("moved");
    settle(&decision, &mut block, &mut nights);
    let left: Vec<u32> = [10, 11, 12, 13]
        .iter()
        .map(|d| nights[&day(*d)].remaining())
        .collect();
    assert_eq!(left, vec![5, 3, 3, 3]);
    assert!(nights[&day(10)].block(&acme()).is_none());
}

#[test]
fn a_booking_from_the_block_is_priced_at_its_rate_and_skips_general_sales_restrictions() {
    let (mut block, mut nights) = (Block::default(), four_nights(5));
    let decision = set(&block, &nights, terms(10, 13, 3)).expect("set");
    settle(&decision, &mut block, &mut nights);
    restrict(
        &mut nights,
        10,
        None,
        RestrictionsPatch {
            stop_sell: Some(true),
            ..RestrictionsPatch::default()
        },
    );
    let reservation = held(block_hold(1, 10, 12, 2), &mut nights);
    let details = reservation.details().expect("held");
    assert_eq!(details.total_cents, Cents::new(2 * 2 * 15_000));
    assert_eq!(details.first_night_cents, Some(Cents::new(2 * 15_000)));
    assert_eq!(details.block_code, Some(acme()));
    assert_eq!(
        nights[&day(10)].remaining(),
        2,
        "general sale keeps its rooms"
    );
}

#[test]
fn a_booking_from_a_block_off_its_nights_names_the_block_code() {
    let (mut block, mut nights) = (Block::default(), four_nights(5));
    let decision = set(&block, &nights, terms(10, 12, 3)).expect("set");
    settle(&decision, &mut block, &mut nights);
    let result = hold_stay(
        &hotel(),
        &Reservation::default(),
        &of_king(&nights),
        &BookingLimits::default(),
        block_hold(1, 11, 13, 1),
    );
    assert_eq!(invalid_field(result), "block_code");
}

#[test]
fn a_released_block_gives_its_rooms_back_once_and_refuses_its_code_again() {
    let (mut block, mut nights) = (Block::default(), four_nights(5));
    let decision = set(&block, &nights, terms(10, 13, 3)).expect("set");
    settle(&decision, &mut block, &mut nights);
    held(block_hold(1, 10, 11, 1), &mut nights);
    let decision =
        release_block(&block, &nights, ReleaseReason::ReleaseDate, at(5)).expect("released");
    settle(&decision, &mut block, &mut nights);
    assert_eq!(nights[&day(10)].remaining(), 4, "its booking stays");
    assert_eq!(nights[&day(11)].remaining(), 5);
    let again = release_block(&block, &nights, ReleaseReason::Staff, at(6)).expect("no-op");
    assert!(again.block.is_empty() && again.nights.is_empty());
    assert_eq!(
        set(&block, &nights, terms(10, 13, 3)),
        Err(Rejection::BlockWasReleased)
    );
}

#[test]
fn a_blocks_release_is_at_midnight_after_its_release_date_at_the_hotel() {
    let lisbon = block_release_at(day(5), zone("Europe/Lisbon"));
    assert_eq!(
        lisbon,
        Utc.with_ymd_and_hms(2027, 6, 5, 23, 0, 0)
            .single()
            .expect("t")
    );
    let tokyo = block_release_at(day(5), zone("Asia/Tokyo"));
    assert_eq!(
        tokyo,
        Utc.with_ymd_and_hms(2027, 6, 5, 15, 0, 0)
            .single()
            .expect("t")
    );
}

#[test]
fn a_block_whose_release_date_has_ended_at_the_hotel_is_refused() {
    let mut late = terms(10, 13, 3);
    late = BlockTerms::parse(
        late.name(),
        late.room_type_id(),
        late.stay(),
        late.rooms(),
        late.rate_cents(),
        NaiveDate::from_ymd_opt(2027, 5, 31).expect("date"),
    )
    .expect("terms");
    let result = set(&Block::default(), &four_nights(5), late);
    assert!(
        matches!(&result, Err(Rejection::Invalid(InvalidInputRejection { field, .. })) if field == "release_date"),
        "{result:?}"
    );
}

#[test]
fn a_block_under_way_can_still_change_but_a_new_one_cannot_start_in_the_past() {
    let (mut block, mut nights) = (Block::default(), four_nights(5));
    let decision = set(&block, &nights, terms(10, 13, 3)).expect("set");
    settle(&decision, &mut block, &mut nights);
    // On the 11th the block has started: it shrinks all the same.
    let later = Utc
        .with_ymd_and_hms(2027, 6, 11, 12, 0, 0)
        .single()
        .expect("t");
    let mut shrink = terms(10, 13, 2);
    shrink = BlockTerms::parse(
        shrink.name(),
        shrink.room_type_id(),
        shrink.stay(),
        shrink.rooms(),
        shrink.rate_cents(),
        day(11),
    )
    .expect("terms");
    let change = |block: &Block, terms: BlockTerms| {
        set_block(
            &hotel(),
            block,
            &nights,
            SetBlock {
                hotel_id: hotel_id(),
                code: acme(),
                terms,
                max_days_ahead: 730,
                now: later,
            },
        )
    };
    assert!(change(&block, shrink.clone()).is_ok());
    let fresh = change(&Block::default(), shrink);
    assert_eq!(invalid_field_of(fresh), "start_date");
}

fn invalid_field_of(result: Result<BlockDecision, Rejection>) -> String {
    match result {
        Err(Rejection::Invalid(InvalidInputRejection { field, .. })) => field,
        other => panic!("expected an invalid input rejection, got {other:?}"),
    }
}
