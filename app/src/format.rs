//! How times and ages read on screen. Times are stored in UTC and shown in
//! the viewer's zone (UTC unless they chose another), the zone named beside
//! them; ages are relative to the moment the data was read on the server, so
//! the server render and the hydrated page print the same text.

use chrono::{DateTime, Utc};
use idem_domain::ZoneInfo;
use serde::{Deserialize, Serialize};

/// When a page's data was read, and the zone its times are shown in. Every
/// server function that returns times returns one; page bodies provide it
/// as context to the `Time` and `Age` components.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    pub as_of: DateTime<Utc>,
    pub zone: ZoneInfo,
}

impl Clock {
    pub fn utc(as_of: DateTime<Utc>) -> Self {
        Clock {
            as_of,
            zone: ZoneInfo::utc(),
        }
    }

    /// `2026-11-30 15:02:11 CET`
    pub fn time(&self, at: DateTime<Utc>) -> String {
        self.zone.format(at)
    }

    /// How long before `as_of` the instant `at` was: `38 min`.
    pub fn age(&self, at: DateTime<Utc>) -> String {
        duration((self.as_of - at).num_seconds())
    }
}

/// A duration in the two largest units an operator cares about:
/// `12 s`, `38 min`, `2 h 5 min`, `3 d 4 h`.
pub fn duration(seconds: i64) -> String {
    idem_domain::story::span(chrono::TimeDelta::seconds(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_their_two_largest_units() {
        assert_eq!(duration(0), "0 s");
        assert_eq!(duration(59), "59 s");
        assert_eq!(duration(38 * 60 + 5), "38 min");
        assert_eq!(duration(2 * 3600 + 5 * 60), "2 h 5 min");
        assert_eq!(duration(3600), "1 h");
        assert_eq!(duration(3 * 86_400 + 4 * 3600 + 59), "3 d 4 h");
        assert_eq!(duration(-5), "0 s");
    }

    #[test]
    fn times_name_their_zone_and_ages_count_from_when_the_data_was_read() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T14:02:11.5Z")
            .unwrap()
            .to_utc();
        let clock = Clock::utc(t + chrono::TimeDelta::minutes(38));
        assert_eq!(clock.time(t), "2026-11-30 14:02:11 UTC");
        assert_eq!(clock.age(t), "38 min");
    }
}
