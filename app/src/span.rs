//! The span a set of charts covers, from the address: a named range ending
//! now, or `from` and `to`, cut into whole intervals.

use chrono::{DateTime, TimeDelta, Utc};

use crate::ranges::{DEFAULT_RANGE, MAX_SPAN_DAYS, RANGES};
use crate::{charts::Frame, error::AppError};

/// The intervals charts are drawn in, smallest first: the first that
/// cuts a span into at most [`MAX_INTERVALS`] is used.
const STEPS: &[i64] = &[60, 300, 900, 3600, 2 * 3600, 6 * 3600, 86_400];
const MAX_INTERVALS: i64 = 120;
/// The longest span drawn in intervals shorter than an hour (read from
/// per-minute rows): six hours of ten consumers is ~3,600 rows a metric.
const MINUTES_AT_MOST: i64 = 6 * 3600;

/// The span a set of charts covers, in whole intervals. The charts drawn
/// for it are cached under it whole: they depend on its intervals (which
/// move on when the next one completes) and its words, not on the clock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChartSpan {
    /// The span in words: "last 24h".
    pub(super) label: String,
    pub(super) from: DateTime<Utc>,
    pub(super) to: DateTime<Utc>,
    /// The interval the span is drawn in.
    pub(super) step: TimeDelta,
}

impl ChartSpan {
    /// The span `range` names, or `from`–`to`; a 400 for anything else.
    pub fn parse(
        range: Option<String>,
        from: Option<String>,
        to: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Self, AppError> {
        let (from, to) = (from.filter(|f| !f.is_empty()), to.filter(|t| !t.is_empty()));
        match (from, to) {
            (None, None) => Self::named(range.as_deref().unwrap_or(DEFAULT_RANGE), now),
            (Some(from), Some(to)) => Self::between(&from, &to, now),
            _ => Err(AppError::BadRequest(
                "Give both from and to, or neither.".into(),
            )),
        }
    }

    fn named(range: &str, now: DateTime<Utc>) -> Result<Self, AppError> {
        let Some((name, seconds)) = RANGES.iter().find(|(name, _)| *name == range) else {
            let names: Vec<&str> = RANGES.iter().map(|(n, _)| *n).collect();
            return Err(AppError::BadRequest(format!(
                "The range must be one of {}.",
                names.join(", ")
            )));
        };
        let step = step_for(*seconds);
        let to = floor(now, step);
        Ok(Self {
            label: format!("last {name}"),
            from: to - TimeDelta::seconds(*seconds),
            to,
            step,
        })
    }

    fn between(from: &str, to: &str, now: DateTime<Utc>) -> Result<Self, AppError> {
        let (from, to) = (
            crate::api::ssr::instant(from)?,
            crate::api::ssr::instant(to)?,
        );
        if from >= to {
            return Err(AppError::BadRequest("from must be before to.".into()));
        }
        if to - from > TimeDelta::days(MAX_SPAN_DAYS) {
            return Err(AppError::BadRequest(format!(
                "A chart covers at most {MAX_SPAN_DAYS} days."
            )));
        }
        let step = step_for((to - from).num_seconds());
        // Whole intervals, and none that has not ended yet.
        let start = floor(from, step);
        let end = floor(to.min(now), step).max(start);
        let format = |at: DateTime<Utc>| at.format("%Y-%m-%d %H:%M").to_string();
        Ok(Self {
            label: format!("{} – {} UTC", format(from), format(to)),
            from: start,
            to: end,
            step,
        })
    }

    /// The span in a sentence: "Showing the last 24h, in 1 h intervals, up
    /// to 14:00 UTC."
    pub(super) fn sentence(&self) -> String {
        format!(
            "Showing the {}, in {} intervals, up to {} UTC.",
            self.label,
            crate::format::duration(self.step.num_seconds()),
            self.to.format("%Y-%m-%d %H:%M")
        )
    }

    /// The span's intervals, for a chart.
    pub(super) fn frame(&self) -> Frame {
        Frame::new(self.label.clone(), self.from, self.to, self.step)
    }
}

/// The interval a span of `seconds` is drawn in.
fn step_for(seconds: i64) -> TimeDelta {
    // Intervals shorter than an hour read minutes for the whole span;
    // past MINUTES_AT_MOST a chart is drawn in whole hours, which the
    // hourly rollup answers.
    let shortest = if seconds > MINUTES_AT_MOST { 3600 } else { 0 };
    let step = STEPS
        .iter()
        .find(|step| **step >= shortest && seconds / **step <= MAX_INTERVALS)
        .copied()
        .unwrap_or(86_400);
    TimeDelta::seconds(step)
}

/// `at` rounded down to a whole number of `step`s since the epoch.
fn floor(at: DateTime<Utc>, step: TimeDelta) -> DateTime<Utc> {
    idem_store::Ts(at).floor(step).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn a_named_range_ends_at_the_last_complete_interval() {
        let span =
            ChartSpan::parse(Some("24h".into()), None, None, at("2026-11-30T14:37:12Z")).unwrap();
        // Past six hours, whole hours: the rollup answers them.
        assert_eq!(span.step, TimeDelta::hours(1));
        assert_eq!(span.to, at("2026-11-30T14:00:00Z"));
        assert_eq!(span.from, at("2026-11-29T14:00:00Z"));
        assert_eq!(span.frame().len(), 24);
        let short =
            ChartSpan::parse(Some("6h".into()), None, None, at("2026-11-30T14:37:12Z")).unwrap();
        assert_eq!(short.step, TimeDelta::minutes(5));
        assert_eq!(short.to, at("2026-11-30T14:35:00Z"));
        assert_eq!(span.label, "last 24h");
    }

    #[test]
    fn the_span_says_what_it_shows_in_a_sentence() {
        let span =
            ChartSpan::parse(Some("24h".into()), None, None, at("2026-11-30T14:37:12Z")).unwrap();
        assert_eq!(
            span.sentence(),
            format!(
                "Showing the last 24h, in {} intervals, up to 2026-11-30 14:00 UTC.",
                crate::format::duration(3600)
            )
        );
    }

    #[test]
    fn a_chart_is_redrawn_only_when_its_next_interval_completes() {
        let key = |now| ChartSpan::parse(Some("7d".into()), None, None, at(now)).unwrap();
        // 7d is drawn in two-hour intervals.
        assert_eq!(key("2026-11-30T12:01:00Z"), key("2026-11-30T13:59:00Z"));
        assert_ne!(key("2026-11-30T13:59:00Z"), key("2026-11-30T14:00:00Z"));
    }

    #[test]
    fn from_and_to_pick_an_interval_that_fits_the_span() {
        let span = ChartSpan::parse(
            None,
            Some("2026-11-01T00:00Z".into()),
            Some("2026-11-03T00:00".into()),
            at("2026-11-30T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(span.step, TimeDelta::hours(1));
        assert_eq!(span.frame().len(), 48);
        assert_eq!(span.label, "2026-11-01 00:00 – 2026-11-03 00:00 UTC");
    }

    proptest::proptest! {
        #[test]
        fn any_span_text_is_a_bounded_span_or_a_400(
            range in proptest::option::of(".{0,12}"),
            from in proptest::option::of("(2026-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]Z?|.{0,30})"),
            to in proptest::option::of("(2026-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]Z?|.{0,30})"),
        ) {
            match ChartSpan::parse(range, from, to, at("2026-11-30T14:37:12Z")) {
                Ok(span) => {
                    proptest::prop_assert!(span.from <= span.to);
                    proptest::prop_assert!(span.frame().len() <= 120, "{}", span.frame().len());
                }
                Err(AppError::BadRequest(_)) => {}
                Err(other) => proptest::prop_assert!(false, "{other:?}"),
            }
        }
    }

    #[test]
    fn bad_spans_are_refused_with_what_to_write() {
        let now = at("2026-11-30T00:00:00Z");
        let refused =
            |range: Option<&str>, from: Option<&str>, to: Option<&str>| match ChartSpan::parse(
                range.map(Into::into),
                from.map(Into::into),
                to.map(Into::into),
                now,
            ) {
                Err(AppError::BadRequest(message)) => message,
                other => panic!("expected a 400, got {other:?}"),
            };
        assert_eq!(
            refused(Some("forever"), None, None),
            "The range must be one of 1h, 6h, 24h, 7d, 28d."
        );
        assert_eq!(
            refused(None, Some("yesterday"), Some("2026-11-02T00:00Z")),
            "“yesterday” is not a time: write it as 2026-11-30T14:00Z."
        );
        assert_eq!(
            refused(None, Some("2026-11-02T00:00Z"), Some("2026-11-01T00:00Z")),
            "from must be before to."
        );
        assert_eq!(
            refused(None, Some("2026-01-01T00:00Z"), Some("2026-11-01T00:00Z")),
            "A chart covers at most 90 days."
        );
        assert_eq!(
            refused(None, Some("2026-01-01T00:00Z"), None),
            "Give both from and to, or neither."
        );
    }
}
