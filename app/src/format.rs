//! How times, ages and shares read on screen. Times are stored in UTC and shown in
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

/// A (capped) count and what it counts, singular for exactly one:
/// `1 dead letter`, `3 dead letters`, `10,000+ dead letters`.
pub fn count_of(count: idem_domain::CappedCount, one: &str, many: &str) -> String {
    let noun = if count.value == 1 && !count.capped {
        one
    } else {
        many
    };
    format!("{count} {noun}")
}

/// A share (0–1) as a percentage, with the decimals that tell it apart
/// from its nearest end: `0%`, `0.042%`, `0.50%`, `2.50%`, `97.50%`,
/// `99.950%`, `100.000%`. Small shares (duplicate rates, error budgets)
/// and shares near the whole (SLO attainment, objectives) both keep the
/// digits that matter.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    match share {
        0.0 => "0%".to_owned(),
        s if (0.001..0.99).contains(&s) => format!("{p:.2}%"),
        _ => format!("{p:.3}%"),
    }
}

/// Text for HTML (or SVG): `&`, `<`, `>` and quotes escaped. The one
/// escaper for markup Idem writes by hand (the rest is Leptos's).
pub fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_one_is_singular_and_any_other_plural() {
        let count = idem_domain::CappedCount::from_limited;
        assert_eq!(
            count_of(count(1, 100), "dead letter", "dead letters"),
            "1 dead letter"
        );
        assert_eq!(
            count_of(count(0, 100), "dead letter", "dead letters"),
            "0 dead letters"
        );
        assert_eq!(
            count_of(count(1200, 100), "dead letter", "dead letters"),
            "100+ dead letters"
        );
    }

    #[test]
    fn a_percentage_keeps_the_digits_that_tell_it_from_its_nearest_end() {
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(0.00042), "0.042%");
        assert_eq!(percent(0.005), "0.50%");
        assert_eq!(percent(0.025), "2.50%");
        assert_eq!(percent(0.95), "95.00%");
        assert_eq!(percent(0.9995), "99.950%");
        assert_eq!(percent(0.999), "99.900%");
        assert_eq!(percent(1.0), "100.000%");
    }

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
