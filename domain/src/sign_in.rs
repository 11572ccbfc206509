//! Sign-in throttling: who may try a password now, decided from counts the
//! store keeps. Pure arithmetic, so every rule is a unit test.
//!
//! The rules, and why each one:
//! - Failures are counted per (account, client address) — the **pair** — and
//!   per address over every account. Nothing is counted per account alone,
//!   so nobody can lock another person out from their own address.
//! - A pair over [`SignInLimits::per_pair`], or an address over
//!   [`SignInLimits::per_address`] (password spraying), is refused without a
//!   check until its window ends. Refused attempts are counted apart and
//!   never move the window, so hammering a throttled pair does not extend it.
//! - A browser that signed in to the account before is **known-good**: it
//!   carries a device cookie, and its attempts are counted under the
//!   device, not the address, so an attacker elsewhere — even at the same
//!   address — never touches its counter. For it the address limit does not
//!   apply, and the pair limit turns into a growing delay: one check now,
//!   then one after [`SignInLimits::first_delay`], twice that, … up to
//!   [`SignInLimits::max_delay`]. The right password always gets through.
//! - Failures are reserved before the hash is computed and released if it
//!   succeeds, so a burst of parallel guesses gets no more checks than the
//!   limit (the store serializes reservations per pair and address).

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// How many failed sign-ins are allowed, and for how long they count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignInLimits {
    /// Failures per (account, address) in a window before it is throttled.
    pub per_pair: u32,
    /// Failures per address (all accounts) in a window before unknown
    /// pairs from it are throttled.
    pub per_address: u32,
    /// How long a window lasts from its first failure.
    pub window: Duration,
    /// The first delay between checks for a known-good client over the
    /// limit; each next one is twice as long.
    pub first_delay: Duration,
    /// The longest delay between checks for a known-good client.
    pub max_delay: Duration,
    /// How long a successful sign-in makes its browser known-good.
    pub known_for: Duration,
}

impl Default for SignInLimits {
    fn default() -> Self {
        SignInLimits {
            per_pair: 5,
            per_address: 20,
            window: Duration::from_secs(15 * 60),
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            known_for: Duration::from_secs(90 * 24 * 3600),
        }
    }
}

/// A counter as the store holds it: one window of one pair or address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    pub start: Option<DateTime<Utc>>,
    /// Attempts checked (or being checked) and not successful.
    pub failures: u32,
    /// A known-good client over the limit: no check before this.
    pub next_check_at: Option<DateTime<Utc>>,
}

/// What to do with one sign-in attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Check the password. `next_check_at` is set for a known-good client
    /// over the limit: the earliest time of its following check.
    Check {
        next_check_at: Option<DateTime<Utc>>,
    },
    /// Refuse without a check until `until`.
    Throttled { until: DateTime<Utc> },
}

fn delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

impl SignInLimits {
    /// Whether a window that started at `start` has ended at `now`.
    pub fn ended(&self, start: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        now >= start + delta(self.window)
    }

    /// The delay before the check after `over` checks beyond the limit:
    /// `first_delay`, twice that, four times … up to `max_delay`.
    pub fn delay(&self, over: u32) -> Duration {
        let doubled = self.first_delay.saturating_mul(1u32 << over.min(30));
        doubled.min(self.max_delay)
    }

    /// The decision for one attempt, given the pair's and the address's
    /// current windows (ended windows already closed by the store) and
    /// whether the account signed in from this client before.
    pub fn admit(
        &self,
        pair: &Window,
        address: &Window,
        known_good: bool,
        now: DateTime<Utc>,
    ) -> Admission {
        let pair_full = pair.failures >= self.per_pair;
        let address_full = !known_good && address.failures >= self.per_address;
        if !pair_full && !address_full {
            return Admission::Check {
                next_check_at: None,
            };
        }
        let window_end = |w: &Window| w.start.unwrap_or(now) + delta(self.window);
        if known_good {
            return match pair.next_check_at {
                Some(at) if at > now => Admission::Throttled { until: at },
                _ => Admission::Check {
                    next_check_at: Some(
                        now + delta(self.delay(pair.failures.saturating_sub(self.per_pair))),
                    ),
                },
            };
        }
        let until = match (pair_full, address_full) {
            (true, true) => window_end(pair).max(window_end(address)),
            (true, false) => window_end(pair),
            _ => window_end(address),
        };
        Admission::Throttled { until }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn window(failures: u32) -> Window {
        Window {
            start: Some(now() - TimeDelta::minutes(5)),
            failures,
            next_check_at: None,
        }
    }

    const CHECK: Admission = Admission::Check {
        next_check_at: None,
    };

    #[test]
    fn under_both_limits_every_attempt_is_checked() {
        let limits = SignInLimits::default();
        assert_eq!(limits.admit(&window(4), &window(19), false, now()), CHECK);
        assert_eq!(
            limits.admit(&Window::default(), &Window::default(), false, now()),
            CHECK
        );
    }

    #[test]
    fn a_full_pair_from_an_unknown_client_waits_for_the_end_of_its_window() {
        let limits = SignInLimits::default();
        assert_eq!(
            limits.admit(&window(5), &window(5), false, now()),
            Admission::Throttled {
                until: now() + TimeDelta::minutes(10)
            }
        );
    }

    #[test]
    fn a_full_address_throttles_unknown_pairs_but_not_known_good_ones() {
        let limits = SignInLimits::default();
        assert!(matches!(
            limits.admit(&window(0), &window(20), false, now()),
            Admission::Throttled { .. }
        ));
        assert_eq!(limits.admit(&window(0), &window(20), true, now()), CHECK);
    }

    #[test]
    fn a_known_good_client_over_the_limit_gets_checks_after_a_growing_delay() {
        let limits = SignInLimits::default();
        assert_eq!(
            limits.admit(&window(5), &window(5), true, now()),
            Admission::Check {
                next_check_at: Some(now() + TimeDelta::seconds(1))
            }
        );
        let waiting = Window {
            next_check_at: Some(now() + TimeDelta::seconds(4)),
            ..window(7)
        };
        assert_eq!(
            limits.admit(&waiting, &window(7), true, now()),
            Admission::Throttled {
                until: now() + TimeDelta::seconds(4)
            }
        );
        let due = Window {
            next_check_at: Some(now()),
            ..window(7)
        };
        assert_eq!(
            limits.admit(&due, &window(7), true, now()),
            Admission::Check {
                next_check_at: Some(now() + TimeDelta::seconds(4))
            }
        );
    }

    #[test]
    fn the_delay_doubles_up_to_its_maximum() {
        let limits = SignInLimits::default();
        let delays: Vec<u64> = (0..9).map(|n| limits.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(limits.delay(u32::MAX).as_secs(), 60);
    }

    #[test]
    fn a_window_ends_its_length_after_it_started() {
        let limits = SignInLimits::default();
        let start = now();
        assert!(!limits.ended(start, start + TimeDelta::minutes(14)));
        assert!(limits.ended(start, start + TimeDelta::minutes(15)));
    }
}
