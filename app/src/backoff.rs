//! The retry delay the outboxes' workers share: doubling from a first delay up to a
//! ceiling, by the number of attempts made so far.

use std::time::Duration;

/// The delay before the next attempt after `attempts` (1 or more) failed: `first`,
/// doubled for each attempt after the first, at most `max`.
pub fn doubling(first: Duration, max: Duration, attempts: i32) -> chrono::Duration {
    let doubled = first.saturating_mul(1 << attempts.clamp(1, 20).saturating_sub(1));
    chrono::Duration::from_std(doubled.min(max)).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_the_first_up_to_the_ceiling() {
        let (first, max) = (Duration::from_secs(2), Duration::from_secs(600));
        let seconds = |n| doubling(first, max, n).num_seconds();
        assert_eq!(
            [seconds(1), seconds(2), seconds(3), seconds(9), seconds(10)],
            [2, 4, 8, 512, 600]
        );
        assert_eq!(seconds(0), 2);
        assert_eq!(seconds(i32::MAX), 600);
    }
}
