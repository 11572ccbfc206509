//! The viewer's time zone, as data both renders can use.
//!
//! Times are stored in UTC and shown in the zone the viewer chose (UTC by
//! default), named on screen. The server resolves the zone from the time-zone
//! database into its offsets over a span of years ([`ZoneInfo`]); formatting
//! is then plain arithmetic, identical on the server and in the browser, so
//! the WASM needs no time-zone database and hydration sees the same text.

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

/// One stretch of time during which a zone keeps one offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSpan {
    /// From this instant (inclusive) until the next span starts.
    pub from: DateTime<Utc>,
    pub offset_seconds: i32,
    /// What the zone calls itself then (`CET`, `CEST`, `UTC`).
    pub abbreviation: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneInfo {
    /// The IANA name: `UTC`, `Europe/Berlin`.
    pub name: String,
    /// Ordered by `from`; the first span also covers everything before it.
    pub spans: Vec<ZoneSpan>,
}

impl Default for ZoneInfo {
    fn default() -> Self {
        Self::utc()
    }
}

impl ZoneInfo {
    pub fn utc() -> Self {
        ZoneInfo {
            name: "UTC".into(),
            spans: vec![ZoneSpan {
                from: DateTime::<Utc>::MIN_UTC,
                offset_seconds: 0,
                abbreviation: "UTC".into(),
            }],
        }
    }

    fn span_at(&self, at: DateTime<Utc>) -> Option<&ZoneSpan> {
        let after = self.spans.partition_point(|s| s.from <= at);
        self.spans.get(after.saturating_sub(1))
    }

    /// `at` on the viewer's wall clock.
    pub fn local(&self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        let offset = self.span_at(at).map_or(0, |s| s.offset_seconds);
        at.with_timezone(
            &FixedOffset::east_opt(offset)
                .unwrap_or(FixedOffset::east_opt(0).expect("zero offset")),
        )
    }

    /// `2026-11-30 15:02:11 CET`
    pub fn format(&self, at: DateTime<Utc>) -> String {
        let abbreviation = self.span_at(at).map_or("UTC", |s| s.abbreviation.as_str());
        format!(
            "{} {abbreviation}",
            self.local(at).format("%Y-%m-%d %H:%M:%S")
        )
    }

    /// `15:02 CET`
    pub fn format_clock(&self, at: DateTime<Utc>) -> String {
        let abbreviation = self.span_at(at).map_or("UTC", |s| s.abbreviation.as_str());
        format!("{} {abbreviation}", self.local(at).format("%H:%M"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn berlin() -> ZoneInfo {
        ZoneInfo {
            name: "Europe/Berlin".into(),
            spans: vec![
                ZoneSpan {
                    from: t("2025-10-26T01:00:00Z"),
                    offset_seconds: 3600,
                    abbreviation: "CET".into(),
                },
                ZoneSpan {
                    from: t("2026-03-29T01:00:00Z"),
                    offset_seconds: 7200,
                    abbreviation: "CEST".into(),
                },
                ZoneSpan {
                    from: t("2026-10-25T01:00:00Z"),
                    offset_seconds: 3600,
                    abbreviation: "CET".into(),
                },
            ],
        }
    }

    #[test]
    fn utc_is_the_default_and_names_itself() {
        assert_eq!(
            ZoneInfo::default().format(t("2026-11-30T14:02:11Z")),
            "2026-11-30 14:02:11 UTC"
        );
    }

    #[test]
    fn a_zone_shows_the_offset_in_force_at_each_instant() {
        let zone = berlin();
        assert_eq!(
            zone.format(t("2026-11-30T14:02:11Z")),
            "2026-11-30 15:02:11 CET"
        );
        assert_eq!(
            zone.format(t("2026-07-01T14:02:11Z")),
            "2026-07-01 16:02:11 CEST"
        );
        assert_eq!(zone.format_clock(t("2026-03-29T00:59:59Z")), "01:59 CET");
        assert_eq!(zone.format_clock(t("2026-03-29T01:00:00Z")), "03:00 CEST");
        // Before the first span: its offset still applies.
        assert_eq!(
            zone.format(t("2020-01-01T00:00:00Z")),
            "2020-01-01 01:00:00 CET"
        );
    }
}
