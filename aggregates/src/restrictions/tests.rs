//! Each restriction refusing a stay and allowing one at its boundary, the two sets
//! that both apply, and which restriction a stay breaking several is refused for.

use std::collections::BTreeMap;

use chrono::NaiveDate;

use super::*;

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2027, 6, d).expect("a June day")
}

fn stay(start: u32, end: u32) -> StayDates {
    StayDates::parse(day(start), day(end)).expect("a stay")
}

/// Today, as the tests book: ten days before the 11th.
fn today() -> NaiveDate {
    day(1)
}

/// Given these nights' restrictions (every other night has none), when `stay` is
/// judged on `today`.
fn judge(given: &[(u32, NightRestrictions)], stay: StayDates) -> Result<(), Restricted> {
    let nights: BTreeMap<NaiveDate, NightRestrictions> =
        given.iter().map(|(d, r)| (day(*d), *r)).collect();
    check_stay(&stay, today(), |date| {
        nights.get(&date).copied().unwrap_or_default()
    })
}

fn refused(restriction: Restriction, night: u32) -> Result<(), Restricted> {
    Err(Restricted {
        restriction,
        night: day(night),
    })
}

fn with(f: impl FnOnce(&mut NightRestrictions)) -> NightRestrictions {
    let mut r = NightRestrictions::default();
    f(&mut r);
    r
}

#[test]
fn a_stay_over_nights_without_restrictions_is_allowed() {
    assert_eq!(judge(&[], stay(11, 14)), Ok(()));
}

#[test]
fn a_stopped_night_refuses_every_stay_that_includes_it() {
    let stopped = [(12, with(|r| r.stop_sell = true))];
    assert_eq!(
        judge(&stopped, stay(11, 14)),
        refused(Restriction::StopSell, 12)
    );
    assert_eq!(
        judge(&stopped, stay(12, 13)),
        refused(Restriction::StopSell, 12)
    );
}

#[test]
fn a_stopped_night_does_not_refuse_a_stay_that_checks_out_that_day() {
    let stopped = [(12, with(|r| r.stop_sell = true))];
    assert_eq!(judge(&stopped, stay(10, 12)), Ok(()));
}

#[test]
fn closed_to_arrival_refuses_arriving_that_night_but_not_staying_through_it() {
    let closed = [(12, with(|r| r.closed_to_arrival = true))];
    assert_eq!(
        judge(&closed, stay(12, 14)),
        refused(Restriction::ClosedToArrival, 12)
    );
    assert_eq!(judge(&closed, stay(11, 14)), Ok(()));
}

#[test]
fn the_arrival_nights_minimum_stay_refuses_a_shorter_stay_and_allows_one_of_that_length() {
    let min = [(11, with(|r| r.min_stay = Some(3)))];
    assert_eq!(judge(&min, stay(11, 13)), refused(Restriction::MinStay, 11));
    assert_eq!(judge(&min, stay(11, 14)), Ok(()));
}

#[test]
fn a_minimum_stay_on_a_later_night_does_not_bind_a_stay_arriving_before_it() {
    let min = [(12, with(|r| r.min_stay = Some(5)))];
    assert_eq!(judge(&min, stay(11, 13)), Ok(()));
}

#[test]
fn the_arrival_nights_maximum_stay_refuses_a_longer_stay_and_allows_one_of_that_length() {
    let max = [(11, with(|r| r.max_stay = Some(3)))];
    assert_eq!(judge(&max, stay(11, 15)), refused(Restriction::MaxStay, 11));
    assert_eq!(judge(&max, stay(11, 14)), Ok(()));
}

#[test]
fn a_minimum_stay_through_binds_every_stay_that_includes_the_night() {
    let through = [(13, with(|r| r.min_stay_through = Some(3)))];
    assert_eq!(
        judge(&through, stay(12, 14)),
        refused(Restriction::MinStayThrough, 13)
    );
    assert_eq!(judge(&through, stay(12, 15)), Ok(()));
    assert_eq!(judge(&through, stay(11, 13)), Ok(()), "not a night of it");
}

#[test]
fn closed_to_departure_refuses_checking_out_that_day_but_not_staying_through_it() {
    let closed = [(14, with(|r| r.closed_to_departure = true))];
    assert_eq!(
        judge(&closed, stay(11, 14)),
        refused(Restriction::ClosedToDeparture, 14)
    );
    assert_eq!(judge(&closed, stay(11, 15)), Ok(()));
}

#[test]
fn the_minimum_advance_counts_days_from_today_to_arrival() {
    // Arriving on the 11th, booked on the 1st: ten days ahead.
    let ahead_11 = [(11, with(|r| r.min_advance_days = Some(11)))];
    assert_eq!(
        judge(&ahead_11, stay(11, 12)),
        refused(Restriction::MinAdvanceDays, 11)
    );
    let ahead_10 = [(11, with(|r| r.min_advance_days = Some(10)))];
    assert_eq!(judge(&ahead_10, stay(11, 12)), Ok(()));
}

#[test]
fn the_maximum_advance_refuses_booking_further_ahead() {
    let ahead_9 = [(11, with(|r| r.max_advance_days = Some(9)))];
    assert_eq!(
        judge(&ahead_9, stay(11, 12)),
        refused(Restriction::MaxAdvanceDays, 11)
    );
    let ahead_10 = [(11, with(|r| r.max_advance_days = Some(10)))];
    assert_eq!(judge(&ahead_10, stay(11, 12)), Ok(()));
}

#[test]
fn a_stay_breaking_several_restrictions_is_refused_for_the_first_in_the_documented_order() {
    let many = [
        (
            11,
            with(|r| {
                r.closed_to_arrival = true;
                r.min_stay = Some(5);
            }),
        ),
        (13, with(|r| r.stop_sell = true)),
        (14, with(|r| r.closed_to_departure = true)),
    ];
    assert_eq!(
        judge(&many, stay(11, 14)),
        refused(Restriction::StopSell, 13)
    );
    let arrival_rules = [(
        11,
        with(|r| {
            r.closed_to_arrival = true;
            r.min_stay = Some(5);
        }),
    )];
    assert_eq!(
        judge(&arrival_rules, stay(11, 14)),
        refused(Restriction::ClosedToArrival, 11)
    );
}

#[test]
fn restrictions_for_every_plan_and_for_one_plan_both_apply_the_stricter_winning() {
    let house = with(|r| {
        r.min_stay = Some(2);
        r.max_stay = Some(10);
        r.min_advance_days = Some(1);
    });
    let plan = with(|r| {
        r.min_stay = Some(3);
        r.max_stay = Some(7);
        r.closed_to_departure = true;
        r.max_advance_days = Some(30);
    });
    let both = house.and(plan);
    assert_eq!(both.min_stay, Some(3));
    assert_eq!(both.max_stay, Some(7));
    assert!(both.closed_to_departure);
    assert_eq!(both.min_advance_days, Some(1));
    assert_eq!(both.max_advance_days, Some(30));
    assert_eq!(both, plan.and(house), "the order does not matter");
    assert_eq!(house.and(NightRestrictions::default()), house);
}

#[test]
fn a_refusal_names_the_restriction_as_the_contract_field_and_the_night() {
    let error = Restricted {
        restriction: Restriction::MinStayThrough,
        night: day(13),
    };
    assert_eq!(error.restriction.as_str(), "min_stay_through");
    assert_eq!(
        error.to_string(),
        "the stay breaks min_stay_through on 2027-06-13"
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn restrictions() -> impl Strategy<Value = NightRestrictions> {
        let bound = || proptest::option::of(1u32..8);
        (
            (bound(), bound(), bound(), bound(), bound()),
            (any::<bool>(), any::<bool>(), any::<bool>()),
        )
            .prop_map(
                |((min, max, through, min_adv, max_adv), (cta, ctd, stop))| NightRestrictions {
                    min_stay: min,
                    max_stay: max,
                    min_stay_through: through,
                    closed_to_arrival: cta,
                    closed_to_departure: ctd,
                    stop_sell: stop,
                    min_advance_days: min_adv,
                    max_advance_days: max_adv,
                },
            )
    }

    /// Restrictions for the nights 1..=20 of June.
    fn calendar() -> impl Strategy<Value = Vec<NightRestrictions>> {
        proptest::collection::vec(restrictions(), 20)
    }

    fn judge_on(calendar: &[NightRestrictions], stay: &StayDates) -> Result<(), Restricted> {
        check_stay(stay, today(), |date| {
            let index = usize::try_from(date.signed_duration_since(day(1)).num_days())
                .unwrap_or(usize::MAX);
            calendar.get(index).copied().unwrap_or_default()
        })
    }

    proptest! {
        /// Both sets applying never lets through a stay that either set refuses, and
        /// which set is "for every plan" does not matter.
        #[test]
        fn combining_restrictions_never_admits_a_stay_either_refuses(
            house in calendar(),
            plan in calendar(),
            start in 1u32..15,
            nights in 1u32..6,
        ) {
            let stay = stay(start, start + nights);
            let both: Vec<NightRestrictions> =
                house.iter().zip(&plan).map(|(h, p)| h.and(*p)).collect();
            let flipped: Vec<NightRestrictions> =
                plan.iter().zip(&house).map(|(p, h)| p.and(*h)).collect();
            prop_assert_eq!(judge_on(&both, &stay), judge_on(&flipped, &stay));
            if judge_on(&both, &stay).is_ok() {
                prop_assert!(judge_on(&house, &stay).is_ok());
                prop_assert!(judge_on(&plan, &stay).is_ok());
            }
        }
    }
}
