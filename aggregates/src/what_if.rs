//! What-if: the recorded demand of one room type's nights replayed under another
//! overbooking policy. Pure: the demand, the nights' terms and the policy come in; what
//! would have been sold, earned and walked comes out. Reading the demand from the log
//! and the turnaway log is the caller's.
//!
//! The replay takes the demand in commit order. A request (a hold the hotel took, or one
//! it turned away as sold out) is taken when every night of it has room under the policy
//! (`confirmed + held < physical + allowance`, as a hold is decided); a request turned
//! away for a restriction or occupancy stays turned away (the policy does not change
//! those). What happened to a taken reservation afterwards is replayed as recorded: its
//! lapse or cancellation frees its nights, a no-show or an early departure frees the
//! nights after, a confirmation makes it sold. A request that was turned away but would
//! have been taken is assumed to confirm at the night's rate and to behave like the
//! stays whose outcome is not known yet (see [`Outcome`]).
//!
//! Walks: on a night, the guests who arrive beyond its physical rooms. *Worst case*:
//! every sold room's guest arrives (`sold - physical`, at least 0). *Expected*: each sold
//! room's guest arrives with a probability: 1 for a stay that checked in, 0 for a
//! no-show, and `1 - no_show_rate` for the rest; the expected excess is computed exactly
//! (the distribution of arrivals, room by room).
//!
//! With the policy in force (each night's recorded allowance), the replay takes exactly
//! the requests the hotel took and turns away exactly those it turned away: what it
//! sold is what was sold (a test holds it to that).
//!
//! A larger allowance never sells fewer room-nights when each request is one room for
//! one night (a property test holds it to that). With longer stays it can: first come,
//! first served, a short stay the larger allowance now takes can fill the night a later,
//! longer stay needed (a test shows the case). The replay does not re-order demand to
//! avoid that: the hotel could not have either.

use std::collections::{BTreeMap, BTreeSet};

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
    /// A restriction or the room type's occupancy: no allowance changes that.
    Other,
}

/// A piece of recorded demand, in commit order. `id` names a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Demand {
    /// A hold the hotel took (`turned_away: None`) or turned away, for `rooms` on
    /// `nights` (those of the replayed range; the stay may run beyond it).
    Request {
        id: u64,
        nights: Vec<NaiveDate>,
        rooms: u32,
        turned_away: Option<TurnedAway>,
    },
    /// The hold became a sale.
    Confirmed { id: u64 },
    /// The guest arrived.
    CheckedIn { id: u64 },
    /// The guest never came: the first night stays sold, the others are freed.
    NoShow { id: u64 },
    /// The nights from `from` on are freed (a departure before the last night).
    FreedFrom { id: u64, from: NaiveDate },
    /// Every night is freed (a cancellation, a lapsed hold).
    Freed { id: u64 },
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
    pub revenue_cents: i64,
    /// Expected guests arriving beyond the physical rooms.
    pub walks_expected: f64,
    /// Guests beyond the physical rooms if every sold room's guest arrives.
    pub walks_worst: u32,
}

#[derive(Debug, Clone)]
struct Stay {
    nights: BTreeSet<NaiveDate>,
    rooms: u32,
    confirmed: bool,
    /// From the recorded outcome: `Some(true)` arrived, `Some(false)` no-show.
    arrived: Option<bool>,
    first: Option<NaiveDate>,
}

/// The replay of `demand` over `nights` under `allowance`, per night; `no_show_rate` is
/// the chance a guest whose arrival is not recorded does not come (0 to 1).
pub fn replay(
    nights: &BTreeMap<NaiveDate, NightTerms>,
    demand: &[Demand],
    allowance: Allowance,
    no_show_rate: f64,
) -> BTreeMap<NaiveDate, Outcome> {
    let capacity = |date: &NaiveDate| {
        nights.get(date).map(|t| {
            let extra = match allowance {
                Allowance::InForce => t.allowance,
                Allowance::Every(n) => n,
            };
            t.physical.saturating_add(extra)
        })
    };
    let mut taken: BTreeMap<NaiveDate, u32> = BTreeMap::new();
    let mut stays: BTreeMap<u64, Stay> = BTreeMap::new();
    for item in demand {
        match item {
            Demand::Request {
                id,
                nights: asked,
                rooms,
                turned_away,
            } => {
                if *turned_away == Some(TurnedAway::Other) {
                    continue;
                }
                let fits = asked.iter().all(|d| {
                    capacity(d).is_some_and(|cap| {
                        taken.get(d).copied().unwrap_or(0).saturating_add(*rooms) <= cap
                    })
                });
                if !fits {
                    continue;
                }
                for d in asked {
                    *taken.entry(*d).or_default() += rooms;
                }
                stays.insert(
                    *id,
                    Stay {
                        nights: asked.iter().copied().collect(),
                        rooms: *rooms,
                        // Demand turned away would have confirmed (the documented
                        // assumption); a request taken waits for its confirmation.
                        confirmed: turned_away.is_some(),
                        arrived: None,
                        first: asked.iter().min().copied(),
                    },
                );
            }
            Demand::Confirmed { id } => {
                if let Some(stay) = stays.get_mut(id) {
                    stay.confirmed = true;
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
                    free(&mut taken, stay, |d| Some(d) != keep);
                }
            }
            Demand::FreedFrom { id, from } => {
                if let Some(stay) = stays.get_mut(id) {
                    let from = *from;
                    free(&mut taken, stay, |d| d >= from);
                }
            }
            Demand::Freed { id } => {
                if let Some(mut stay) = stays.remove(id) {
                    free(&mut taken, &mut stay, |_| true);
                }
            }
        }
    }
    nights
        .iter()
        .map(|(date, terms)| {
            let sold: Vec<&Stay> = stays
                .values()
                .filter(|s| s.confirmed && s.nights.contains(date))
                .collect();
            let rooms: u32 = sold.iter().map(|s| s.rooms).sum();
            let shows: Vec<(u32, f64)> = sold
                .iter()
                .map(|s| {
                    let p = match s.arrived {
                        Some(true) => 1.0,
                        Some(false) => 0.0,
                        None => 1.0 - no_show_rate.clamp(0.0, 1.0),
                    };
                    (s.rooms, p)
                })
                .collect();
            let outcome = Outcome {
                room_nights_sold: rooms,
                revenue_cents: i64::from(rooms).saturating_mul(terms.rate_cents),
                walks_expected: expected_excess(&shows, terms.physical),
                walks_worst: rooms.saturating_sub(terms.physical),
            };
            (*date, outcome)
        })
        .collect()
}

/// Frees the stay's nights that `which` picks.
fn free(taken: &mut BTreeMap<NaiveDate, u32>, stay: &mut Stay, which: impl Fn(NaiveDate) -> bool) {
    let freed: Vec<NaiveDate> = stay.nights.iter().copied().filter(|d| which(*d)).collect();
    for d in freed {
        stay.nights.remove(&d);
        if let Some(n) = taken.get_mut(&d) {
            *n = n.saturating_sub(stay.rooms);
        }
    }
}

/// `E[max(0, arrivals - physical)]` where each room arrives on its own with its
/// probability: the distribution of arrivals built room by room.
fn expected_excess(rooms: &[(u32, f64)], physical: u32) -> f64 {
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
            Demand::Freed { id: 4 },
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
                        6 => Demand::Freed { id },
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
