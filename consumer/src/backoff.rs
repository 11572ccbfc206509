//! When to try again after a retryable failure.

use std::time::Duration;

/// Exponential backoff that honours a provider's `Retry-After`, bounded by
/// a maximum: the wait before attempt `n + 1` is
/// `min(max, max(base × 2^(n−1), retry_after))`.
///
/// A `Retry-After` longer than the maximum is cut to the maximum: the
/// message goes back to the queue either way, and a worker that waits
/// longer than its visibility timeout would lose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The wait after the `attempt`-th failed attempt (1 for the first).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let doublings = attempt.saturating_sub(1).min(30);
        let exponential = self.base.saturating_mul(1 << doublings);
        exponential
            .max(retry_after.unwrap_or_default())
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: Backoff = Backoff {
        base: Duration::from_secs(2),
        max: Duration::from_secs(60),
    };

    #[test]
    fn the_wait_doubles_with_each_attempt_up_to_the_maximum() {
        let waits: Vec<u64> = (1..=7).map(|n| BACKOFF.delay(n, None).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn a_longer_retry_after_wins_over_the_backoff() {
        assert_eq!(
            BACKOFF.delay(1, Some(Duration::from_secs(30))).as_secs(),
            30
        );
        assert_eq!(BACKOFF.delay(5, Some(Duration::from_secs(3))).as_secs(), 32);
    }

    #[test]
    fn a_retry_after_beyond_the_maximum_is_cut_to_it() {
        assert_eq!(
            BACKOFF.delay(1, Some(Duration::from_secs(3600))).as_secs(),
            60
        );
    }

    #[test]
    fn a_huge_attempt_number_does_not_overflow() {
        assert_eq!(BACKOFF.delay(u32::MAX, None), BACKOFF.max);
    }
}
