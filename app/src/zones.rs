//! Time zones the viewer can choose, and (on the server) turning a zone name
//! into the offsets pages format with.

/// The zones offered in the zone switcher; any other IANA name works too
/// (typed into the URL or kept from an earlier choice).
pub const OFFERED: &[&str] = &[
    "UTC",
    "America/Los_Angeles",
    "America/Denver",
    "America/Chicago",
    "America/New_York",
    "America/Sao_Paulo",
    "Europe/London",
    "Europe/Dublin",
    "Europe/Lisbon",
    "Europe/Paris",
    "Europe/Berlin",
    "Europe/Warsaw",
    "Europe/Helsinki",
    "Europe/Istanbul",
    "Africa/Johannesburg",
    "Asia/Dubai",
    "Asia/Kolkata",
    "Asia/Singapore",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Pacific/Auckland",
];

/// The cookie that remembers the viewer's zone.
pub const COOKIE: &str = "idem_tz";

#[cfg(feature = "ssr")]
pub use server::resolve;

#[cfg(feature = "ssr")]
mod server {
    use std::str::FromStr;

    use chrono::{DateTime, Duration, Offset, TimeZone, Utc};
    use chrono_tz::{OffsetComponents, OffsetName, Tz};
    use idem_domain::{ZoneInfo, ZoneSpan};

    /// The zone named `name` (an IANA name such as `Europe/Berlin`), with its
    /// offsets from five years ago to two years ahead; `None` when the
    /// time-zone database has no such zone.
    pub fn resolve(name: &str) -> Option<ZoneInfo> {
        if name == "UTC" {
            return Some(ZoneInfo::utc());
        }
        let tz = Tz::from_str(name).ok()?;
        // Whole seconds, so the transitions found are exact seconds.
        let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap_or_default();
        let (start, end) = (now - Duration::days(5 * 366), now + Duration::days(2 * 366));
        let describe = |at: DateTime<Utc>| {
            let offset = tz.offset_from_utc_datetime(&at.naive_utc());
            let seconds = offset.fix().local_minus_utc();
            let abbreviation = offset.abbreviation().map(str::to_owned).unwrap_or_else(|| {
                let total = offset.base_utc_offset() + offset.dst_offset();
                format!("UTC{:+}", total.num_minutes() as f64 / 60.0)
            });
            (seconds, abbreviation)
        };
        let (offset_seconds, abbreviation) = describe(start);
        let mut spans = vec![ZoneSpan {
            from: start,
            offset_seconds,
            abbreviation,
        }];
        let mut day = start;
        while day < end {
            let next = day + Duration::days(1);
            if describe(next).0 != spans.last().map_or(0, |s| s.offset_seconds) {
                // The change is within this day: find its second.
                let before = spans.last().map_or(0, |s| s.offset_seconds);
                let (mut lo, mut hi) = (day.timestamp(), next.timestamp());
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    let at = DateTime::from_timestamp(mid, 0).unwrap_or(day);
                    if describe(at).0 == before {
                        lo = mid
                    } else {
                        hi = mid
                    }
                }
                let from = DateTime::from_timestamp(hi, 0).unwrap_or(next);
                let (offset_seconds, abbreviation) = describe(from);
                spans.push(ZoneSpan {
                    from,
                    offset_seconds,
                    abbreviation,
                });
            }
            day = next;
        }
        Some(ZoneInfo {
            name: tz.name().to_owned(),
            spans,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_zone_with_summer_time_resolves_to_its_transitions() {
            let berlin = resolve("Europe/Berlin").unwrap();
            assert!(
                berlin.spans.len() >= 12,
                "two changes a year for seven years"
            );
            let winter = DateTime::parse_from_rfc3339("2026-11-30T14:02:11Z")
                .unwrap()
                .to_utc();
            let summer = DateTime::parse_from_rfc3339("2026-07-01T14:02:11Z")
                .unwrap()
                .to_utc();
            assert_eq!(berlin.format(winter), "2026-11-30 15:02:11 CET");
            assert_eq!(berlin.format(summer), "2026-07-01 16:02:11 CEST");
            let change = DateTime::parse_from_rfc3339("2026-03-29T01:00:00Z")
                .unwrap()
                .to_utc();
            assert!(berlin.spans.iter().any(|s| s.from == change));
        }

        #[test]
        fn unknown_zone_names_are_refused() {
            assert_eq!(resolve("Mars/Olympus_Mons"), None);
            assert_eq!(resolve("'; DROP TABLE claims; --"), None);
            assert_eq!(resolve("UTC").unwrap().name, "UTC");
            assert_eq!(
                resolve("Asia/Kolkata").unwrap().format_clock(
                    DateTime::parse_from_rfc3339("2026-11-30T14:02:00Z")
                        .unwrap()
                        .to_utc()
                ),
                "19:32 IST"
            );
        }
    }
}
