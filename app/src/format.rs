//! How times and ages read on screen. Times are stored in UTC and shown in
//! UTC, the zone named beside them; ages are relative to the moment the data
//! was read on the server (`as_of`), so the server render and the hydrated
//! page print the same text.

use chrono::{DateTime, Utc};

/// `2026-11-30 14:02:11 UTC`
pub fn utc(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A duration in the two largest units an operator cares about:
/// `12 s`, `38 min`, `2 h 5 min`, `3 d 4 h`.
pub fn duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3_600, (s % 3_600) / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s} s"),
        (0, 0, m) => format!("{m} min"),
        (0, h, 0) => format!("{h} h"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, 0, _) => format!("{d} d"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

/// How long before `as_of` the instant `at` was: `38 min`.
pub fn age(as_of: DateTime<Utc>, at: DateTime<Utc>) -> String {
    duration((as_of - at).num_seconds())
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
    fn times_name_their_zone() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T14:02:11.5Z")
            .unwrap()
            .to_utc();
        assert_eq!(utc(t), "2026-11-30 14:02:11 UTC");
    }
}
