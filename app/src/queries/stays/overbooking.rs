//! How many rooms beyond its inventory a room type may sell, from how often its guests
//! do not come.
//!
//! Sell `C + A` rooms of a room type with `C` rooms, each guest coming independently
//! with probability `1 - p` (`p` the no-show rate). A guest is walked (sent to another
//! hotel) when more than `C` come, with probability
//!
//! ```text
//! P(walk | A) = P(X > C),  X ~ Binomial(C + A, 1 - p)
//!             = sum over k = C+1 ..= C+A of  (C+A choose k) (1-p)^k p^(C+A-k)
//! ```
//!
//! which grows with `A`. The suggested allowance is the largest `A` whose walk
//! probability stays at or under the accepted risk. The rate is not known, only
//! observed: `n` stays were due and `m` did not come. Selling on `m / n` itself would
//! oversell whenever the sample happened to be lucky, so the rate used is the lower end
//! of its one-sided 95% Wilson interval (`z = 1.645`), which is close to `m / n` for
//! large samples and near 0 for small ones — few observations, little overbooking.

/// z for a one-sided 95% bound.
const Z: f64 = 1.645;

/// The most rooms beyond capacity ever suggested, as a share of capacity (a room type
/// never sells more than twice its rooms, whatever the data).
const MAX_SHARE: i64 = 1;

/// The lower end of the one-sided Wilson interval of `no_shows` out of `due`.
pub fn rate_lower_bound(no_shows: i64, due: i64) -> f64 {
    if due <= 0 || no_shows <= 0 {
        return 0.0;
    }
    let n = due as f64;
    let p = (no_shows.min(due) as f64) / n;
    let z2 = Z * Z;
    let centre = p + z2 / (2.0 * n);
    let spread = Z * ((p * (1.0 - p) + z2 / (4.0 * n)) / n).sqrt();
    ((centre - spread) / (1.0 + z2 / n)).clamp(0.0, 1.0)
}

/// `P(X > capacity)` for `X ~ Binomial(sold, show)`: the probability that more guests
/// come than there are rooms.
pub fn walk_probability(capacity: i64, sold: i64, show: f64) -> f64 {
    if sold <= capacity {
        return 0.0;
    }
    if show <= 0.0 {
        return 0.0;
    }
    if show >= 1.0 {
        return 1.0;
    }
    let n = usize::try_from(sold).unwrap_or(0);
    let c = usize::try_from(capacity.max(0)).unwrap_or(0);
    // ln k! for k = 0..=n, so each term is exp of a sum of logs (no overflow).
    let mut ln_factorial = Vec::with_capacity(n + 1);
    ln_factorial.push(0.0_f64);
    for k in 1..=n {
        ln_factorial.push(ln_factorial[k - 1] + (k as f64).ln());
    }
    let (ln_show, ln_stay_away) = (show.ln(), (1.0 - show).ln());
    let tail: f64 = (c + 1..=n)
        .map(|k| {
            let ln_choose = ln_factorial[n] - ln_factorial[k] - ln_factorial[n - k];
            (ln_choose + k as f64 * ln_show + (n - k) as f64 * ln_stay_away).exp()
        })
        .sum();
    tail.clamp(0.0, 1.0)
}

/// A suggested allowance and what it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Suggestion {
    /// The no-show rate used (the lower bound of the observed one).
    pub rate: f64,
    pub allowance: i64,
    /// The walk probability at that allowance.
    pub walk_probability: f64,
}

/// The largest allowance for `capacity` rooms whose walk probability is at most `risk`,
/// with `no_shows` of `due` stays observed not to come.
pub fn suggest(capacity: i64, no_shows: i64, due: i64, risk: f64) -> Suggestion {
    let rate = rate_lower_bound(no_shows, due);
    let show = 1.0 - rate;
    let mut allowance = 0;
    let mut walk = 0.0;
    if capacity > 0 && rate > 0.0 {
        // The walk probability only grows with the allowance: stop at the first too
        // large.
        for a in 1..=capacity * MAX_SHARE {
            let p = walk_probability(capacity, capacity + a, show);
            if p > risk {
                break;
            }
            allowance = a;
            walk = p;
        }
    }
    Suggestion {
        rate,
        allowance,
        walk_probability: walk,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_walk_probability_is_the_binomial_tail_above_capacity() {
        // 2 rooms, 3 sold, each guest coming with probability 1/2: all three come with
        // probability 1/8.
        assert!(close(walk_probability(2, 3, 0.5), 0.125));
        // 1 room, 3 sold, p = 0.9: 1 - P(0) - P(1) = 1 - 0.001 - 0.027.
        assert!(close(walk_probability(1, 3, 0.9), 0.972));
        // Nothing beyond capacity sold: nobody is walked.
        assert_eq!(walk_probability(10, 10, 0.99), 0.0);
    }

    #[test]
    fn the_walk_probability_grows_with_every_room_sold_beyond_capacity() {
        let mut last = 0.0;
        for extra in 1..=20 {
            let p = walk_probability(100, 100 + extra, 0.9);
            assert!(p > last, "{extra}: {p} after {last}");
            last = p;
        }
    }

    #[test]
    fn few_observations_suggest_little_and_none_suggest_nothing() {
        assert_eq!(suggest(100, 0, 0, 0.05).allowance, 0);
        assert_eq!(
            suggest(100, 0, 500, 0.05).allowance,
            0,
            "nobody ever missed"
        );
        // One no-show in ten is a 10% rate, but its lower bound is small.
        let small = suggest(100, 1, 10, 0.05);
        let large = suggest(100, 100, 1_000, 0.05);
        assert!(small.rate < 0.05, "{small:?}");
        assert!(large.rate > 0.08 && large.rate < 0.1, "{large:?}");
        assert!(small.allowance < large.allowance, "{small:?} {large:?}");
    }

    #[test]
    fn the_suggestion_is_the_largest_allowance_within_the_risk() {
        let s = suggest(100, 100, 1_000, 0.05);
        let show = 1.0 - s.rate;
        assert!(s.walk_probability <= 0.05);
        assert!(close(
            s.walk_probability,
            walk_probability(100, 100 + s.allowance, show)
        ));
        assert!(walk_probability(100, 101 + s.allowance, show) > 0.05);
        // More risk accepted, at least as many rooms.
        assert!(suggest(100, 100, 1_000, 0.2).allowance >= s.allowance);
        assert!(suggest(100, 100, 1_000, 0.01).allowance <= s.allowance);
    }

    #[test]
    fn the_lower_bound_is_below_the_observed_rate_and_approaches_it() {
        for (m, n) in [(1, 10), (10, 100), (100, 1_000), (1_000, 10_000)] {
            let observed = m as f64 / n as f64;
            let bound = rate_lower_bound(m, n);
            assert!(bound < observed && bound > 0.0, "{m}/{n}: {bound}");
        }
        assert!(rate_lower_bound(1_000, 10_000) > 0.09);
    }
}
