//! How one night of one hotel is written in its hash field: every room type's counters
//! and, behind them, the terms it is sold on (restrictions and the plans' own rates).
//!
//! A search reads the field of every night of the stay, and of its check-out day, for
//! every hotel of a city, so the field is written for the reader: positional numbers,
//! only what is set, and one field a night (the counters and the terms come from the
//! same stream, so one sequence stamps both). Decoding walks the bytes once without
//! splitting strings, and builds the maps of each distinct terms text once per read
//! (see docs/benchmarks.md, `string-splitting` and `search-answer-size`).
//!
//! ```text
//! field   = "" | entry *(";" entry)                 room types in id order
//! entry   = id "=" total "," allowance "," rate "," confirmed "," held ","
//!           sequence "," position ["/" blocked] *terms
//! terms   = "|*" rules                              restrictions for every plan
//!         | "|p" plan rules                         one plan's own restrictions
//!         | "|r" plan ":" cents                     one plan's own rate
//! rules   = ":" rule *("," rule)
//! rule    = "m" n | "M" n | "t" n | "v" n | "V" n   min_stay, max_stay, min_stay_through,
//!         | "a" | "d" | "s"                         min/max_advance_days; closed to
//!                                                   arrival, to departure, stop-sell
//! ```
//!
//! For example `3=10,0,15000,2,1,12,9041|*:M14,v0|p2:m2|r1:16000`: room type 3 has 10
//! rooms, no overbooking, a base rate of 150.00, 2 confirmed and 1 held, as of the
//! night stream's sequence 12 at log position 9041; every plan has a maximum stay of 14
//! and a minimum advance of 0 days, plan 2 a minimum stay of 2, plan 1 its own rate.
//! A night with rooms set aside for group blocks says how many after the position
//! (`/4`); most nights have none and write nothing.
//! Anything else is refused whole (`None`), and the reader then asks PostgreSQL.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use aggregates::restrictions::NightRestrictions;
use aggregates::{Cents, RatePlanId};

use super::{CachedNight, NightTerms};

/// One room type on one night as the field holds it. Its terms are shared: the nights
/// of a read that carry the same terms (most of them do: restrictions are set over
/// ranges and days of the week) share one decoded copy (see [`Interner`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CachedRoomNight {
    pub counters: CachedNight,
    pub terms: Arc<NightTerms>,
}

/// The field of one night: every room type that has inventory on it, in id order.
pub(super) fn encode_night(room_types: &BTreeMap<i64, CachedRoomNight>) -> String {
    let mut field = String::with_capacity(room_types.len() * 48);
    for (id, night) in room_types {
        if !field.is_empty() {
            field.push(';');
        }
        let c = &night.counters;
        // Writing into a String cannot fail.
        let _ = write!(
            field,
            "{id}={},{},{},{},{},{},{}",
            c.total_rooms,
            c.overbooking_allowance,
            c.rate_cents,
            c.confirmed,
            c.held,
            c.sequence,
            c.position
        );
        if c.blocked != 0 {
            let _ = write!(field, "/{}", c.blocked);
        }
        encode_terms(&mut field, &night.terms);
    }
    field
}

fn encode_terms(field: &mut String, terms: &NightTerms) {
    let restrictions = &terms.restrictions;
    if !restrictions.all.is_none() {
        field.push_str("|*");
        encode_rules(field, &restrictions.all);
    }
    // A plan's empty set means nothing (`RestrictionSet::set` drops it) and is not
    // written: `rules` has at least one rule.
    for (plan, rules) in restrictions.plans.iter().filter(|(_, r)| !r.is_none()) {
        let _ = write!(field, "|p{plan}");
        encode_rules(field, rules);
    }
    for (plan, rate) in &terms.plan_rates {
        let _ = write!(field, "|r{plan}:{}", rate.get());
    }
}

fn encode_rules(field: &mut String, rules: &NightRestrictions) {
    let mut separator = ':';
    let mut rule = |field: &mut String, code: char, value: Option<u32>| {
        field.push(separator);
        field.push(code);
        if let Some(value) = value {
            let _ = write!(field, "{value}");
        }
        separator = ',';
    };
    for (code, value) in [
        ('m', rules.min_stay),
        ('M', rules.max_stay),
        ('t', rules.min_stay_through),
        ('v', rules.min_advance_days),
        ('V', rules.max_advance_days),
    ] {
        if value.is_some() {
            rule(field, code, value);
        }
    }
    for (code, set) in [
        ('a', rules.closed_to_arrival),
        ('d', rules.closed_to_departure),
        ('s', rules.stop_sell),
    ] {
        if set {
            rule(field, code, None);
        }
    }
}

/// The room types of a night field, in the field's order; `None` if it is malformed.
/// `terms` decodes each room type's terms, once per distinct text it is shown.
pub(super) fn decode_night<'a>(
    value: &'a [u8],
    terms: &mut Interner<'a>,
) -> Option<Vec<(i64, CachedRoomNight)>> {
    let mut entries = Vec::with_capacity(4);
    let mut at = Cursor(value);
    if at.is_empty() {
        return Some(entries);
    }
    loop {
        let id = at.int()?;
        at.expect(b'=')?;
        let mut counter = |last: bool| {
            let value = at.int()?;
            if !last {
                at.expect(b',')?;
            }
            Some(value)
        };
        let mut counters = CachedNight {
            total_rooms: counter(false)?,
            overbooking_allowance: counter(false)?,
            rate_cents: counter(false)?,
            confirmed: counter(false)?,
            held: counter(false)?,
            blocked: 0,
            sequence: counter(false)?,
            position: counter(true)?,
        };
        if at.eat(b'/') {
            counters.blocked = at.int()?;
        }
        // The terms run to the next entry: they never hold a `;`.
        let length = at.0.iter().position(|b| *b == b';').unwrap_or(at.0.len());
        let (text, rest) = at.0.split_at(length);
        at.0 = rest;
        let terms = terms.decode(text)?;
        entries.push((id, CachedRoomNight { counters, terms }));
        if at.is_empty() {
            return Some(entries);
        }
        at.expect(b';')?;
    }
}

/// One room type's terms, `*terms` of the grammar: empty, or starting with `|`.
fn decode_terms(text: &[u8]) -> Option<NightTerms> {
    let mut at = Cursor(text);
    let mut terms = NightTerms::default();
    while at.eat(b'|') {
        match at.next()? {
            b'*' => terms.restrictions.all = at.rules()?,
            b'p' => {
                let plan = at.plan()?;
                let rules = at.rules()?;
                terms.restrictions.plans.insert(plan, rules);
            }
            b'r' => {
                let plan = at.plan()?;
                at.expect(b':')?;
                terms.plan_rates.insert(plan, Cents::new(at.int()?));
            }
            _ => return None,
        }
    }
    at.is_empty().then_some(terms)
}

/// Most distinct terms texts an [`Interner`] remembers; past them it decodes each one.
const MAX_INTERNED: usize = 32;

/// Decodes the terms of one read's nights, each distinct text once: a search decodes
/// the nights of every hotel of a city, and a chain's hotels mostly carry a handful of
/// distinct terms, so most room-nights share a copy instead of building maps of their
/// own. Lives as long as the read's replies.
#[derive(Debug, Default)]
pub struct Interner<'a> {
    seen: Vec<(&'a [u8], Arc<NightTerms>)>,
}

impl<'a> Interner<'a> {
    fn decode(&mut self, text: &'a [u8]) -> Option<Arc<NightTerms>> {
        if let Some((_, terms)) = self.seen.iter().find(|(seen, _)| *seen == text) {
            return Some(Arc::clone(terms));
        }
        let terms = Arc::new(decode_terms(text)?);
        if self.seen.len() < MAX_INTERNED {
            self.seen.push((text, Arc::clone(&terms)));
        }
        Some(terms)
    }
}

/// What is left of a field to decode.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn next(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    /// Consumes `byte` if it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        match self.0.split_first() {
            Some((first, rest)) if *first == byte => {
                self.0 = rest;
                true
            }
            _ => false,
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// An optional `-` and at least one digit, up to the first byte that is not one.
    fn int(&mut self) -> Option<i64> {
        let negative = self.eat(b'-');
        let mut value: i64 = 0;
        let mut digits = 0;
        for byte in self.0 {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            value = value.checked_mul(10)?.checked_add(i64::from(digit))?;
            digits += 1;
        }
        if digits == 0 {
            return None;
        }
        self.0 = self.0.get(digits..)?;
        Some(if negative { -value } else { value })
    }

    fn plan(&mut self) -> Option<RatePlanId> {
        RatePlanId::parse(self.int()?).ok()
    }

    fn count(&mut self) -> Option<Option<u32>> {
        Some(Some(u32::try_from(self.int()?).ok()?))
    }

    /// `":" rule *("," rule)`.
    fn rules(&mut self) -> Option<NightRestrictions> {
        self.expect(b':')?;
        let mut rules = NightRestrictions::default();
        loop {
            match self.next()? {
                b'm' => rules.min_stay = self.count()?,
                b'M' => rules.max_stay = self.count()?,
                b't' => rules.min_stay_through = self.count()?,
                b'v' => rules.min_advance_days = self.count()?,
                b'V' => rules.max_advance_days = self.count()?,
                b'a' => rules.closed_to_arrival = true,
                b'd' => rules.closed_to_departure = true,
                b's' => rules.stop_sell = true,
                _ => return None,
            }
            if !self.eat(b',') {
                return Some(rules);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aggregates::restrictions::RestrictionSet;
    use proptest::prelude::*;

    /// A set whose plans' empty entries are dropped, as [`RestrictionSet::set`] keeps it:
    /// what a field can say.
    fn normalized(set: &RestrictionSet) -> RestrictionSet {
        RestrictionSet {
            all: set.all,
            plans: set
                .plans
                .iter()
                .filter(|(_, r)| !r.is_none())
                .map(|(p, r)| (*p, *r))
                .collect(),
        }
    }

    fn plan(id: i64) -> RatePlanId {
        RatePlanId::parse(id).expect("plan id")
    }

    fn decode(field: &[u8]) -> Option<Vec<(i64, CachedRoomNight)>> {
        decode_night(field, &mut Interner::default())
    }

    fn counters(total_rooms: i64, held: i64) -> CachedNight {
        CachedNight {
            total_rooms,
            held,
            rate_cents: 9_900,
            sequence: 3,
            position: 77,
            ..CachedNight::default()
        }
    }

    #[test]
    fn a_night_without_terms_is_its_counters_alone() {
        let room_types = BTreeMap::from([
            (
                1,
                CachedRoomNight {
                    counters: counters(10, 2),
                    terms: Arc::default(),
                },
            ),
            (
                12,
                CachedRoomNight {
                    counters: counters(4, 0),
                    terms: Arc::default(),
                },
            ),
        ]);
        let field = encode_night(&room_types);
        assert_eq!(field, "1=10,0,9900,0,2,3,77;12=4,0,9900,0,0,3,77");
        assert_eq!(
            decode(field.as_bytes()),
            Some(room_types.into_iter().collect())
        );
        assert_eq!(decode(b""), Some(Vec::new()));
    }

    #[test]
    fn a_nights_terms_are_written_behind_its_counters_with_only_what_is_set() {
        let mut terms = NightTerms::default();
        terms.restrictions.set(
            None,
            NightRestrictions {
                max_stay: Some(14),
                min_advance_days: Some(0),
                ..NightRestrictions::default()
            },
        );
        terms.restrictions.set(
            Some(plan(2)),
            NightRestrictions {
                min_stay: Some(2),
                closed_to_arrival: true,
                stop_sell: true,
                ..NightRestrictions::default()
            },
        );
        terms.plan_rates.insert(plan(1), Cents::new(16_000));
        let night = CachedRoomNight {
            counters: counters(10, 1),
            terms: Arc::new(terms),
        };
        let field = encode_night(&BTreeMap::from([(3, night.clone())]));
        assert_eq!(field, "3=10,0,9900,0,1,3,77|*:M14,v0|p2:m2,a,s|r1:16000");
        assert_eq!(decode(field.as_bytes()), Some(vec![(3, night)]));
    }

    #[test]
    fn the_nights_of_one_read_share_each_distinct_terms() {
        let (first, second) = (
            "1=10,0,9900,0,2,3,77|*:m2;2=4,0,9900,0,0,3,77|*:m2;3=4,0,9900,0,0,3,77|*:m3",
            "1=10,0,9900,0,2,4,78|*:m2",
        );
        let mut interner = Interner::default();
        let first = decode_night(first.as_bytes(), &mut interner).expect("decodes");
        let second = decode_night(second.as_bytes(), &mut interner).expect("decodes");
        let terms = |nights: &[(i64, CachedRoomNight)], i: usize| Arc::clone(&nights[i].1.terms);
        assert!(Arc::ptr_eq(&terms(&first, 0), &terms(&first, 1)));
        assert!(Arc::ptr_eq(&terms(&first, 0), &terms(&second, 0)));
        assert!(!Arc::ptr_eq(&terms(&first, 0), &terms(&first, 2)));
        assert_eq!(terms(&first, 2).restrictions.all.min_stay, Some(3));
        // Past what it remembers, an interner still decodes every text
        let mut full = Interner::default();
        let fields: Vec<String> = (0..MAX_INTERNED + 3)
            .map(|n| format!("1=10,0,9900,0,2,3,77|*:m{n}"))
            .collect();
        for (n, field) in fields.iter().enumerate() {
            let nights = decode_night(field.as_bytes(), &mut full).expect("decodes");
            assert_eq!(
                terms(&nights, 0).restrictions.all.min_stay,
                u32::try_from(n).ok()
            );
        }
    }

    #[test]
    fn a_malformed_field_is_refused_whole() {
        for malformed in [
            "1=10,0,9900",
            "x=10,0,9900,0,2,3,77",
            "1=10,0,9900,0,2,3,",
            "1=10,0,9900,0,2,3,77,8",
            "1=10,,9900,0,2,3,77",
            "1=10,0,9900,0,2,3,99999999999999999999",
            "1=10,0,99 00,0,2,3,77",
            "1=10,0,9900,0,2,3,77;",
            "1=10,0,9900,0,2,3,77|",
            "1=10,0,9900,0,2,3,77|*",
            "1=10,0,9900,0,2,3,77|*:",
            "1=10,0,9900,0,2,3,77|*:x",
            "1=10,0,9900,0,2,3,77|*:m",
            "1=10,0,9900,0,2,3,77|*:m-1",
            "1=10,0,9900,0,2,3,77|*:m4294967296",
            "1=10,0,9900,0,2,3,77|*:a,",
            "1=10,0,9900,0,2,3,77|p0:a",
            "1=10,0,9900,0,2,3,77|p:a",
            "1=10,0,9900,0,2,3,77|r1",
            "1=10,0,9900,0,2,3,77|r1:",
            "1=10,0,9900,0,2,3,77|q1:a",
        ] {
            assert_eq!(decode(malformed.as_bytes()), None, "{malformed}");
        }
    }

    fn rules() -> impl Strategy<Value = NightRestrictions> {
        let count = || proptest::option::of(0..=u32::MAX);
        (
            (count(), count(), count(), count(), count()),
            (any::<bool>(), any::<bool>(), any::<bool>()),
        )
            .prop_map(
                |(
                    (min_stay, max_stay, min_stay_through, min_advance_days, max_advance_days),
                    (closed_to_arrival, closed_to_departure, stop_sell),
                )| NightRestrictions {
                    min_stay,
                    max_stay,
                    min_stay_through,
                    closed_to_arrival,
                    closed_to_departure,
                    stop_sell,
                    min_advance_days,
                    max_advance_days,
                },
            )
    }

    fn room_night() -> impl Strategy<Value = CachedRoomNight> {
        (
            proptest::array::uniform7(i64::MIN + 1..=i64::MAX),
            rules(),
            proptest::collection::btree_map(1..=20i64, rules(), 0..3),
            proptest::collection::btree_map(1..=20i64, i64::MIN + 1..=i64::MAX, 0..3),
        )
            .prop_map(|([a, b, c, d, e, f, g], all, plans, rates)| {
                let mut terms = NightTerms::default();
                terms.restrictions.set(None, all);
                for (p, r) in plans {
                    terms.restrictions.set(Some(plan(p)), r);
                }
                for (p, cents) in rates {
                    terms.plan_rates.insert(plan(p), Cents::new(cents));
                }
                CachedRoomNight {
                    counters: CachedNight {
                        total_rooms: a,
                        overbooking_allowance: b,
                        rate_cents: c,
                        confirmed: d,
                        held: e,
                        // Nights with and without rooms set aside for blocks.
                        blocked: (c % 5).abs(),
                        sequence: f,
                        position: g,
                    },
                    terms: Arc::new(terms),
                }
            })
    }

    proptest! {
        #[test]
        fn any_night_field_decodes_to_what_was_encoded(
            room_types in proptest::collection::btree_map(
                i64::MIN + 1..=i64::MAX, room_night(), 0..6)
        ) {
            let field = encode_night(&room_types);
            let decoded = decode(field.as_bytes());
            prop_assert_eq!(decoded, Some(room_types.into_iter().collect()));
        }

        #[test]
        fn a_plans_empty_set_is_not_written(room_night in room_night(), p in 1..=20i64) {
            let mut with_empty = room_night.clone();
            Arc::make_mut(&mut with_empty.terms)
                .restrictions
                .plans
                .insert(plan(p), NightRestrictions::default());
            let field = encode_night(&BTreeMap::from([(1, with_empty.clone())]));
            let decoded = decode(field.as_bytes()).expect("decodes");
            let terms = &decoded.first().expect("one room type").1.terms;
            prop_assert_eq!(&terms.restrictions, &normalized(&with_empty.terms.restrictions));
        }
    }
}
