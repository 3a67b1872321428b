//! What-if: the recorded demand of one room type's nights replayed under another
//! overbooking policy. Pure: the demand, the nights' terms and the policy come in; what
//! would have been sold, earned and walked comes out. Reading the demand from the log
//! and the turnaway log is the caller's.
//!
//! The replay takes the demand in commit order, as the night's own decision did: the
//! night's inventory as it was then ([`Demand::Terms`]), the rooms group blocks set
//! aside out of general sale ([`Demand::SetAside`]), then each request. A request (a
//! hold the hotel took, or one it turned away as sold out) is taken when every night of
//! it has room under the policy (`confirmed + held + set aside + rooms <= physical +
//! allowance`, as a hold is decided); a request turned away for a restriction,
//! occupancy or an exhausted group block stays turned away (the policy does not change
//! those), and rooms taken out of a block's set-aside rooms ([`Demand::Picked`]) are
//! always taken (the block had them). What happened to a taken reservation afterwards
//! is replayed as recorded: its confirmation makes it sold at the night's rate of that
//! moment, a release (a lapse, a cancellation, a date change, an early departure) frees
//! the nights it names, a no-show frees every night but the first. A request that was
//! turned away but would have been taken is assumed to confirm at once at the night's
//! rate and to behave like the stays whose outcome is not known yet (see [`Outcome`]).
//!
//! Walks: on a night, the guests who arrive beyond its physical rooms. *Worst case*:
//! every sold room's guest arrives (`sold - physical`, at least 0). *Expected*: each sold
//! room's guest arrives with a probability: 1 for a stay that checked in, 0 for a
//! no-show, and `1 - no_show_rate` for the rest; the expected excess is computed exactly
//! (the distribution of arrivals, room by room).
//!
//! With the policy in force (each night's recorded allowance), the replay takes exactly
//! the requests the hotel took and turns away exactly those it turned away: what it
//! sold and earned is what was sold and earned (tests hold it to that, here and against
//! the occupancy report).
//!
//! A larger allowance never sells fewer room-nights when each request is one room for
//! one night (a property test holds it to that). With longer stays it can: first come,
//! first served, a short stay the larger allowance now takes can fill the night a later,
//! longer stay needed (a test shows the case). The replay does not re-order demand to
//! avoid that: the hotel could not have either.

use std::collections::BTreeMap;

use chrono::NaiveDate;

/// One night's terms: its physical rooms, the allowance in force, and its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NightTerms {
    pub physical: u32,
    pub allowance: u32,
    pub rate_cents: i64,
}

/// Why a request was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnedAway {
    /// A night was full: another policy might have taken it.
    SoldOut,
    /// A restriction, the room type's occupancy or an exhausted group block: no
    /// allowance changes that.
    Other,
}

/// A piece of recorded demand, in commit order. `id` names a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Demand {
    /// The night's inventory from now on.
    Terms { night: NaiveDate, terms: NightTerms },
    /// Rooms group blocks took out of general sale on the night (`change` > 0) or gave
    /// back to it (`change` < 0).
    SetAside { night: NaiveDate, change: i64 },
    /// A hold the hotel took (`turned_away: None`) or turned away, for `rooms` on
    /// `nights` (those of the replayed range; the stay may run beyond it). A request for
    /// a reservation already taken adds nights to it (a change of dates).
    Request {
        id: u64,
        nights: Vec<NaiveDate>,
        rooms: u32,
        turned_away: Option<TurnedAway>,
    },
    /// Rooms held for `id` out of a block's set-aside rooms: always taken.
    Picked {
        id: u64,
        nights: Vec<NaiveDate>,
        rooms: u32,
    },
    /// The reservation's held nights became a sale.
    Confirmed { id: u64 },
    /// The guest arrived.
    CheckedIn { id: u64 },
    /// The guest never came: the first night stays sold, the others are freed.
    NoShow { id: u64 },
    /// The reservation gave back these nights (a lapse, a cancellation, a date change, a
    /// departure before the last night); `to_block`: to the block it was picked from.
    Released {
        id: u64,
        nights: Vec<NaiveDate>,
        to_block: bool,
    },
}

/// The overbooking allowance to replay under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// Each night's recorded allowance.
    InForce,
    /// The same allowance on every night.
    Every(u32),
}

/// One night's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Outcome {
    /// Rooms sold (confirmed, arrived or not) at the end of the demand.
    pub room_nights_sold: u32,
    /// Each sold room at the night's rate when it was sold.
    pub revenue_cents: i64,
    /// Expected guests arriving beyond the physical rooms.
    pub walks_expected: f64,
    /// Guests beyond the physical rooms if every sold room's guest arrives.
    pub walks_worst: u32,
}

#[derive(Debug, Clone)]
struct Stay {
    /// Each night taken, with the rate it was sold at once confirmed.
    nights: BTreeMap<NaiveDate, Option<i64>>,
    rooms: u32,
    /// From the recorded outcome: `Some(true)` arrived, `Some(false)` no-show.
    arrived: Option<bool>,
    first: Option<NaiveDate>,
}

/// The state of the replayed nights.
struct Nights {
    terms: BTreeMap<NaiveDate, NightTerms>,
    taken: BTreeMap<NaiveDate, u32>,
    aside: BTreeMap<NaiveDate, i64>,
    allowance: Allowance,
}

impl Nights {
    /// Whether `rooms` more fit on every night of `asked` under the policy.
    fn fit(&self, asked: &[NaiveDate], rooms: u32) -> bool {
        asked.iter().all(|d| {
            self.terms.get(d).is_some_and(|t| {
                let extra = match self.allowance {
                    Allowance::InForce => t.allowance,
                    Allowance::Every(n) => n,
                };
                let capacity = i64::from(t.physical) + i64::from(extra);
                let used = i64::from(self.taken.get(d).copied().unwrap_or(0))
                    + self.aside.get(d).copied().unwrap_or(0).max(0);
                used + i64::from(rooms) <= capacity
            })
        })
    }

    fn rate(&self, night: &NaiveDate) -> i64 {
        self.terms.get(night).map_or(0, |t| t.rate_cents)
    }

    fn take(&mut self, stay: &mut Stay, asked: &[NaiveDate], confirm: bool) {
        for d in asked {
            if stay.nights.contains_key(d) {
                continue;
            }
            *self.taken.entry(*d).or_default() += stay.rooms;
            let rate = confirm.then(|| self.rate(d));
            stay.nights.insert(*d, rate);
            if stay.first.is_none_or(|f| *d < f) {
                stay.first = Some(*d);
            }
        }
    }

    /// Frees the stay's nights that `which` picks.
    fn free(&mut self, stay: &mut Stay, which: impl Fn(NaiveDate) -> bool) {
        let freed: Vec<NaiveDate> = stay.nights.keys().copied().filter(|d| which(*d)).collect();
        for d in freed {
            stay.nights.remove(&d);
            if let Some(n) = self.taken.get_mut(&d) {
                *n = n.saturating_sub(stay.rooms);
            }
        }
    }
}

/// The replay of `demand` under `allowance`, per night of `nights` (each with its terms
/// before the demand, which [`Demand::Terms`] may change; a night without inventory yet
/// has all three at zero, as its own decision counts it); `no_show_rate` is the chance
/// a guest whose arrival is not recorded does not come (0 to 1).
pub fn replay(
    nights: &BTreeMap<NaiveDate, NightTerms>,
    demand: &[Demand],
    allowance: Allowance,
    no_show_rate: f64,
) -> BTreeMap<NaiveDate, Outcome> {
    let mut state = Nights {
        terms: nights.clone(),
        taken: BTreeMap::new(),
        aside: BTreeMap::new(),
        allowance,
    };
    let mut stays: BTreeMap<u64, Stay> = BTreeMap::new();
    for item in demand {
        match item {
            Demand::Terms { night, terms } => {
                state.terms.insert(*night, *terms);
            }
            Demand::SetAside { night, change } => {
                *state.aside.entry(*night).or_default() += change;
            }
            Demand::Request {
                id,
                nights: asked,
                rooms,
                turned_away,
            } => {
                if *turned_away == Some(TurnedAway::Other) {
                    continue;
                }
                let known = stays.get(id).map(|s| s.rooms);
                let rooms = known.unwrap_or(*rooms);
                let new: Vec<NaiveDate> = asked
                    .iter()
                    .copied()
                    .filter(|d| stays.get(id).is_none_or(|s| !s.nights.contains_key(d)))
                    .collect();
                if !state.fit(&new, rooms) {
                    continue;
                }
                let stay = stays.entry(*id).or_insert_with(|| Stay {
                    nights: BTreeMap::new(),
                    rooms,
                    arrived: None,
                    first: None,
                });
                // Demand turned away would have confirmed at once (the documented
                // assumption); a request taken waits for its confirmation.
                state.take(stay, &new, turned_away.is_some());
            }
            Demand::Picked {
                id,
                nights: asked,
                rooms,
            } => {
                let stay = stays.entry(*id).or_insert_with(|| Stay {
                    nights: BTreeMap::new(),
                    rooms: *rooms,
                    arrived: None,
                    first: None,
                });
                for d in asked {
                    *state.aside.entry(*d).or_default() -= i64::from(stay.rooms);
                }
                state.take(stay, asked, false);
            }
            Demand::Confirmed { id } => {
                if let Some(stay) = stays.get_mut(id) {
                    for (d, rate) in stay.nights.iter_mut() {
                        if rate.is_none() {
                            *rate = Some(state.rate(d));
                        }
                    }
                }
            }
            Demand::CheckedIn { id } => {
                if let Some(stay) = stays.get_mut(id) {
                    stay.arrived = Some(true);
                }
            }
            Demand::NoShow { id } => {
                if let Some(stay) = stays.get_mut(id) {
                    stay.arrived = Some(false);
                    let keep = stay.first;
                    state.free(stay, |d| Some(d) != keep);
                }
            }
            Demand::Released {
                id,
                nights: freed,
                to_block,
            } => {
                if let Some(stay) = stays.get_mut(id) {
                    if *to_block {
                        for d in freed.iter().filter(|d| stay.nights.contains_key(d)) {
                            *state.aside.entry(*d).or_default() += i64::from(stay.rooms);
                        }
                    }
                    state.free(stay, |d| freed.contains(&d));
                }
            }
        }
    }
    let show = 1.0 - no_show_rate.clamp(0.0, 1.0);
    state
        .terms
        .iter()
        .filter(|(date, _)| nights.contains_key(date))
        .map(|(date, terms)| {
            let sold: Vec<(&Stay, i64)> = stays
                .values()
                .filter_map(|s| s.nights.get(date).copied().flatten().map(|rate| (s, rate)))
                .collect();
            let rooms: u32 = sold.iter().map(|(s, _)| s.rooms).sum();
            let shows: Vec<(u32, f64)> = sold
                .iter()
                .map(|(s, _)| {
                    let p = match s.arrived {
                        Some(true) => 1.0,
                        Some(false) => 0.0,
                        None => show,
                    };
                    (s.rooms, p)
                })
                .collect();
            let outcome = Outcome {
                room_nights_sold: rooms,
                revenue_cents: sold
                    .iter()
                    .map(|(s, rate)| i64::from(s.rooms).saturating_mul(*rate))
                    .fold(0, i64::saturating_add),
                walks_expected: expected_excess(&shows, terms.physical),
                walks_worst: rooms.saturating_sub(terms.physical),
            };
            (*date, outcome)
        })
        .collect()
}

/// `E[max(0, arrivals - physical)]` where each room arrives on its own with its
/// probability, exactly: `E[X] - c + sum over k < c of (c - k) P(X = k)`, the
/// distribution of arrivals built room by room but only below `c` (the physical rooms),
/// so a night costs its rooms sold times its rooms, not its rooms sold squared.
fn expected_excess(rooms: &[(u32, f64)], physical: u32) -> f64 {
    let sold: u64 = rooms.iter().map(|(count, _)| u64::from(*count)).sum();
    if sold <= u64::from(physical) {
        return 0.0;
    }
    let c = physical as usize;
    let mean: f64 = rooms.iter().map(|&(count, p)| f64::from(count) * p).sum();
    // P(X = k) for k < c; what reaches c or more is not needed.
    let mut below = vec![0.0_f64; c];
    if let Some(first) = below.first_mut() {
        *first = 1.0;
    }
    for &(count, p) in rooms {
        for _ in 0..count {
            for k in (0..c).rev() {
                let from_below = if k > 0 { below[k - 1] * p } else { 0.0 };
                below[k] = below[k] * (1.0 - p) + from_below;
            }
        }
    }
    let short: f64 = below
        .iter()
        .enumerate()
        .map(|(k, q)| (c - k) as f64 * q)
        .sum();
    (mean - c as f64 + short).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2027, 6, d).expect("date")
    }

    fn two_rooms_one_extra() -> BTreeMap<NaiveDate, NightTerms> {
        (1..=3)
            .map(|d| {
                let terms = NightTerms {
                    physical: 2,
                    allowance: 1,
                    rate_cents: 10_000,
                };
                (day(d), terms)
            })
            .collect()
    }

    fn request(id: u64, nights: &[u32], rooms: u32, turned_away: Option<TurnedAway>) -> Demand {
        Demand::Request {
            id,
            nights: nights.iter().map(|d| day(*d)).collect(),
            rooms,
            turned_away,
        }
    }

    #[test]
    fn the_policy_in_force_reproduces_what_was_taken_and_what_was_turned_away() {
        // Given three rooms for sale (two and one of allowance), three sales, a hold that
        // lapsed and a request turned away while they were held
        let demand = vec![
            request(1, &[1, 2], 2, None),
            request(2, &[1], 1, None),
            request(3, &[1], 1, Some(TurnedAway::SoldOut)),
            Demand::Confirmed { id: 1 },
            Demand::Confirmed { id: 2 },
            request(4, &[2], 1, None),
            Demand::Released {
                id: 4,
                nights: vec![day(2)],
                to_block: false,
            },
        ];

        // When replayed under the allowance in force
        let out = replay(&two_rooms_one_extra(), &demand, Allowance::InForce, 0.1);

        // Then the first night sold three (the turned-away one stays away) and one walk
        // is possible, the lapsed hold sold nothing
        assert_eq!(out[&day(1)].room_nights_sold, 3);
        assert_eq!(out[&day(2)].room_nights_sold, 2);
        assert_eq!(out[&day(3)].room_nights_sold, 0);
        assert_eq!(out[&day(1)].walks_worst, 1);
        assert_eq!(out[&day(1)].revenue_cents, 30_000);
        // three rooms each arriving with 0.9: P(all three) = 0.729 walks one
        assert!((out[&day(1)].walks_expected - 0.729).abs() < 1e-9);
    }

    #[test]
    fn a_larger_allowance_takes_what_was_turned_away_as_sold_out_but_not_what_a_restriction_refused(
    ) {
        let demand = vec![
            request(1, &[1], 3, None),
            Demand::Confirmed { id: 1 },
            request(2, &[1], 1, Some(TurnedAway::SoldOut)),
            request(3, &[1], 1, Some(TurnedAway::Other)),
        ];

        let out = replay(&two_rooms_one_extra(), &demand, Allowance::Every(2), 0.0);

        assert_eq!(out[&day(1)].room_nights_sold, 4);
        assert_eq!(out[&day(1)].walks_worst, 2);
        assert!((out[&day(1)].walks_expected - 2.0).abs() < 1e-9);
    }

    #[test]
    fn with_longer_stays_a_larger_allowance_can_sell_fewer_nights_first_come_first_served() {
        // One room a night; two rooms asked for the 1st, then one room for three nights.
        let one_room: BTreeMap<NaiveDate, NightTerms> = (1..=3)
            .map(|d| {
                (
                    day(d),
                    NightTerms {
                        physical: 1,
                        allowance: 0,
                        rate_cents: 100,
                    },
                )
            })
            .collect();
        let demand = vec![
            request(1, &[1], 2, Some(TurnedAway::SoldOut)),
            Demand::Confirmed { id: 1 },
            request(2, &[1, 2, 3], 1, None),
            Demand::Confirmed { id: 2 },
        ];
        let sold = |allowance| -> u32 {
            replay(&one_room, &demand, allowance, 0.0)
                .values()
                .map(|o| o.room_nights_sold)
                .sum()
        };

        assert_eq!(sold(Allowance::InForce), 3);
        assert_eq!(
            sold(Allowance::Every(1)),
            2,
            "the two rooms now fill the 1st"
        );
    }

    #[test]
    fn a_no_show_keeps_its_first_night_sold_and_never_walks() {
        let demand = vec![
            request(1, &[1, 2, 3], 3, None),
            Demand::Confirmed { id: 1 },
            Demand::NoShow { id: 1 },
        ];

        let out = replay(&two_rooms_one_extra(), &demand, Allowance::InForce, 0.5);

        assert_eq!(out[&day(1)].room_nights_sold, 3);
        assert_eq!(out[&day(2)].room_nights_sold, 0);
        assert_eq!(out[&day(1)].walks_worst, 1);
        assert_eq!(out[&day(1)].walks_expected, 0.0);
    }

    #[test]
    fn the_policy_in_force_follows_the_inventory_as_it_was_when_each_request_came() {
        // Given a night with no inventory, then one room, then two with one extra at a
        // higher rate
        let night: BTreeMap<NaiveDate, NightTerms> = [(
            day(1),
            NightTerms {
                physical: 0,
                allowance: 0,
                rate_cents: 0,
            },
        )]
        .into();
        let terms = |physical, allowance, rate_cents| Demand::Terms {
            night: day(1),
            terms: NightTerms {
                physical,
                allowance,
                rate_cents,
            },
        };
        let demand = vec![
            request(1, &[1], 1, Some(TurnedAway::SoldOut)),
            terms(1, 0, 100),
            request(2, &[1], 1, None),
            Demand::Confirmed { id: 2 },
            request(3, &[1], 1, Some(TurnedAway::SoldOut)),
            terms(2, 1, 300),
            request(4, &[1], 2, None),
            Demand::Confirmed { id: 4 },
        ];

        // When replayed under the allowance in force
        let out = replay(&night, &demand, Allowance::InForce, 0.0);

        // Then each request met the night as it was: the first two turned away, each sale
        // at its rate of the moment
        assert_eq!(out[&day(1)].room_nights_sold, 3);
        assert_eq!(out[&day(1)].revenue_cents, 100 + 2 * 300);
        assert_eq!(out[&day(1)].walks_worst, 1);
    }

    #[test]
    fn rooms_a_block_set_aside_are_not_for_general_sale_and_its_picks_are_always_taken() {
        // Given three rooms for sale, two set aside for a block
        let demand = vec![
            Demand::SetAside {
                night: day(1),
                change: 2,
            },
            request(1, &[1], 1, None),
            request(2, &[1], 1, Some(TurnedAway::SoldOut)),
            Demand::Picked {
                id: 3,
                nights: vec![day(1)],
                rooms: 2,
            },
            Demand::Confirmed { id: 1 },
            Demand::Confirmed { id: 3 },
        ];

        // When replayed under the allowance in force, and with one more
        let in_force = replay(&two_rooms_one_extra(), &demand, Allowance::InForce, 0.0);
        let more = replay(&two_rooms_one_extra(), &demand, Allowance::Every(2), 0.0);

        // Then the block's picks sold under both; the turnaway only with more allowance
        assert_eq!(in_force[&day(1)].room_nights_sold, 3);
        assert_eq!(more[&day(1)].room_nights_sold, 4);
    }

    #[test]
    fn a_change_of_dates_adds_the_new_nights_and_releases_the_old_ones() {
        let demand = vec![
            request(1, &[1, 2], 1, None),
            Demand::Confirmed { id: 1 },
            request(1, &[3], 1, None),
            Demand::Released {
                id: 1,
                nights: vec![day(1)],
                to_block: false,
            },
            Demand::Confirmed { id: 1 },
        ];

        let out = replay(&two_rooms_one_extra(), &demand, Allowance::InForce, 0.0);

        let sold: Vec<u32> = out.values().map(|o| o.room_nights_sold).collect();
        assert_eq!(sold, vec![0, 1, 1]);
    }

    /// The whole distribution of arrivals, room by room: the reference.
    fn excess_by_distribution(rooms: &[(u32, f64)], physical: u32) -> f64 {
        let mut dist = vec![1.0_f64];
        for &(count, p) in rooms {
            for _ in 0..count {
                let mut next = vec![0.0; dist.len() + 1];
                for (k, &q) in dist.iter().enumerate() {
                    next[k] += q * (1.0 - p);
                    next[k + 1] += q * p;
                }
                dist = next;
            }
        }
        dist.iter()
            .enumerate()
            .map(|(k, q)| q * (k as f64 - f64::from(physical)).max(0.0))
            .sum()
    }

    /// One room for one night each, taken or turned away, and their confirmations.
    fn single_nights() -> impl Strategy<Value = Vec<Demand>> {
        let item = (0u64..20, 1u32..=3, 0u8..4);
        proptest::collection::vec(item, 0..40).prop_map(|items| {
            items
                .into_iter()
                .enumerate()
                .map(|(i, (earlier, night, kind))| {
                    // A request's id is its place; a confirmation names an earlier one.
                    let id = i as u64;
                    match kind {
                        0 => request(id, &[night], 1, None),
                        1 => request(id, &[night], 1, Some(TurnedAway::SoldOut)),
                        2 => request(id, &[night], 1, Some(TurnedAway::Other)),
                        _ => Demand::Confirmed {
                            id: earlier % id.max(1),
                        },
                    }
                })
                .collect()
        })
    }

    fn demand_strategy() -> impl Strategy<Value = Vec<Demand>> {
        let item = (0u64..12, 1u32..=3, 1u32..=3, 1u32..=3, 0u8..8);
        proptest::collection::vec(item, 0..40).prop_map(|items| {
            items
                .into_iter()
                .enumerate()
                .map(|(i, (earlier, first, len, rooms, kind))| {
                    let id = if kind <= 3 {
                        i as u64
                    } else {
                        earlier % (i as u64).max(1)
                    };
                    let nights: Vec<u32> = (first..first + len).filter(|d| *d <= 3).collect();
                    match kind {
                        0 | 1 => request(id, &nights, rooms, None),
                        2 => request(id, &nights, rooms, Some(TurnedAway::SoldOut)),
                        3 => request(id, &nights, rooms, Some(TurnedAway::Other)),
                        4 => Demand::Confirmed { id },
                        5 => Demand::NoShow { id },
                        6 => Demand::Released {
                            id,
                            nights: (first..=3).map(day).collect(),
                            to_block: false,
                        },
                        _ => Demand::CheckedIn { id },
                    }
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// One room for one night at a time: a larger allowance never sells fewer.
        #[test]
        fn a_larger_allowance_never_sells_fewer_nights(
            demand in single_nights(),
            smaller in 0u32..3,
            more in 1u32..3,
        ) {
            let nights = two_rooms_one_extra();
            let sold = |allowance| -> u32 {
                replay(&nights, &demand, Allowance::Every(allowance), 0.1)
                    .values()
                    .map(|o| o.room_nights_sold)
                    .sum()
            };
            prop_assert!(sold(smaller + more) >= sold(smaller));
        }

        /// The expected excess counted only below the physical rooms is the whole
        /// distribution's.
        #[test]
        fn the_expected_walks_are_the_whole_distributions(
            rooms in proptest::collection::vec((1u32..4, 0.0f64..=1.0), 0..12),
            physical in 0u32..20,
        ) {
            let fast = expected_excess(&rooms, physical);
            let reference = excess_by_distribution(&rooms, physical);
            prop_assert!((fast - reference).abs() < 1e-9, "{} against {}", fast, reference);
        }

        /// Never more sold on a night than its capacity under the policy.
        #[test]
        fn the_replay_never_sells_beyond_the_policy(demand in demand_strategy(), allowance in 0u32..4) {
            let nights = two_rooms_one_extra();
            for (date, outcome) in replay(&nights, &demand, Allowance::Every(allowance), 0.2) {
                prop_assert!(outcome.room_nights_sold <= nights[&date].physical + allowance);
                prop_assert!(outcome.walks_expected <= f64::from(outcome.walks_worst) + 1e-9);
            }
        }
    }
}
