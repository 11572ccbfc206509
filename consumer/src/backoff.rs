//! When to try again after a retryable failure.

use std::time::Duration;

/// Exponential backoff bounded by a maximum, and never shorter than a
/// provider's `Retry-After`: the wait before attempt `n + 1` is
/// `max(min(max, base × 2^(n−1)), retry_after)`.
///
/// The maximum bounds only the backoff's own growth. A provider that says
/// "not before an hour" is obeyed: retrying sooner would only spend a
/// delivery (and bring the dead letter closer) on a certain refusal. The
/// message goes back to the queue with that delay; no worker waits.
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
            .min(self.max)
            .max(retry_after.unwrap_or_default())
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
    fn a_retry_after_beyond_the_maximum_is_still_obeyed() {
        assert_eq!(
            BACKOFF.delay(1, Some(Duration::from_secs(3600))).as_secs(),
            3600
        );
    }

    #[test]
    fn a_huge_attempt_number_does_not_overflow() {
        assert_eq!(BACKOFF.delay(u32::MAX, None), BACKOFF.max);
    }
}
