//! Derived prices and their rounding, and chains of derivation resolved or refused.

use std::collections::BTreeMap;

use super::*;

fn plan(id: i64) -> RatePlanId {
    RatePlanId::parse(id).expect("an id")
}

fn cents(c: i64) -> Cents {
    Cents::new(c)
}

#[test]
fn a_derived_price_is_rounded_to_the_nearest_cent_with_halves_up() {
    // 10% under 18,000: 16,200 exactly.
    assert_eq!(adjust(cents(18_000), -10), Some(cents(16_200)));
    // 10% under 12,345 is 11,110.5: the half goes up.
    assert_eq!(adjust(cents(12_345), -10), Some(cents(11_111)));
    // 3% over 999 is 1,028.97: the nearest cent.
    assert_eq!(adjust(cents(999), 3), Some(cents(1_029)));
    // 15% under 1,003 is 852.55: halves up.
    assert_eq!(adjust(cents(1_003), -15), Some(cents(853)));
    // 15% under 1,001 is 850.85: up to the nearest.
    assert_eq!(adjust(cents(1_001), -15), Some(cents(851)));
    // 1% under 101 is 99.99; 1% under 150 is 148.5 -> 149.
    assert_eq!(adjust(cents(101), -1), Some(cents(100)));
    assert_eq!(adjust(cents(150), -1), Some(cents(149)));
}

#[test]
fn a_plan_may_be_free_but_not_below_nothing() {
    assert_eq!(adjust(cents(18_000), -100), Some(Cents::ZERO));
    assert_eq!(adjust(cents(18_000), -101), None);
    assert_eq!(adjust(cents(i64::MAX), 100), None, "overflow is refused");
}

#[test]
fn a_chain_of_derivations_is_priced_from_its_root_rounding_at_each_step() {
    // flexible (own) <- non-refundable (-10%) <- member (-5%)
    let plans: BTreeMap<RatePlanId, Pricing> = [
        (plan(1), Pricing::Own),
        (
            plan(2),
            Pricing::Derived {
                parent: plan(1),
                adjust_percent: -10,
            },
        ),
        (
            plan(3),
            Pricing::Derived {
                parent: plan(2),
                adjust_percent: -5,
            },
        ),
    ]
    .into_iter()
    .collect();
    let (root, chain) = resolve(plan(3), |p| plans.get(&p).copied()).expect("resolves");
    assert_eq!(root, plan(1));
    assert_eq!(chain.as_slice(), [-10, -5], "root first");
    // 12,345 -> 11,111 (11,110.5 up) -> 10,555 (10,555.45 to the nearest).
    assert_eq!(derived_price(cents(12_345), &chain), Some(cents(10_555)));
    assert_eq!(
        resolve(plan(1), |p| plans.get(&p).copied()),
        Ok((plan(1), Adjustments::new()))
    );
}

#[test]
fn a_chain_that_comes_back_to_a_plan_is_refused_as_a_cycle() {
    let derived = |parent: i64| Pricing::Derived {
        parent: plan(parent),
        adjust_percent: -10,
    };
    let plans: BTreeMap<RatePlanId, Pricing> = [
        (plan(1), derived(2)),
        (plan(2), derived(3)),
        (plan(3), derived(1)),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        resolve(plan(1), |p| plans.get(&p).copied()),
        Err(PricingError::Cycle(plan(1)))
    );
    // A plan that only leads into a loop does not derive from itself: the loop is named.
    let into: BTreeMap<RatePlanId, Pricing> = [
        (plan(1), derived(2)),
        (plan(2), derived(3)),
        (plan(3), derived(2)),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        resolve(plan(1), |p| into.get(&p).copied()),
        Err(PricingError::Cycle(plan(2)))
    );
    let itself: BTreeMap<RatePlanId, Pricing> = [(plan(4), derived(4))].into_iter().collect();
    assert_eq!(
        resolve(plan(4), |p| itself.get(&p).copied()),
        Err(PricingError::Cycle(plan(4)))
    );
}

#[test]
fn a_plan_deriving_from_a_missing_plan_is_named_and_a_missing_plan_too() {
    let plans: BTreeMap<RatePlanId, Pricing> = [(
        plan(2),
        Pricing::Derived {
            parent: plan(9),
            adjust_percent: 5,
        },
    )]
    .into_iter()
    .collect();
    assert_eq!(
        resolve(plan(2), |p| plans.get(&p).copied()),
        Err(PricingError::UnknownParent(plan(2)))
    );
    assert_eq!(
        resolve(plan(7), |p| plans.get(&p).copied()),
        Err(PricingError::UnknownPlan(plan(7)))
    );
}
