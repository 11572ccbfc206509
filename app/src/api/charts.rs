//! Charts drawn on the server as SVG (plotters), each with a title and a
//! text summary, so they read the same with JavaScript off and to a screen
//! reader.
//!
//! A chart shows whole intervals only, so one drawn for the last complete
//! interval stays true until the next one completes: rendered charts are
//! cached under that interval (`AppState::per_interval`).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// The time ranges a chart can show (`?range=`), with the interval each is
/// drawn in (at most 120 intervals per chart).
pub const RANGES: &[(&str, i64)] = &[
    ("1h", 3600),
    ("6h", 6 * 3600),
    ("24h", 24 * 3600),
    ("7d", 7 * 86_400),
    ("28d", 28 * 86_400),
];

/// The range charts show when the address names none.
pub const DEFAULT_RANGE: &str = "24h";

/// The longest span `from`/`to` may cover.
pub const MAX_SPAN_DAYS: i64 = 90;

/// A chart: its SVG markup (drawn on the server), what it shows in words,
/// and the span it covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// Stable within a page (`id` of its figure), e.g. `duplicate-rate`.
    pub id: String,
    /// The span in words: "last 24h".
    pub range: String,
    pub title: String,
    /// `None` when there is nothing to draw (no data is not a zero).
    pub svg: Option<String>,
    pub summary: String,
    /// The keys behind the chart, where a list of them exists.
    pub link: Option<ChartLink>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartLink {
    pub href: String,
    pub text: String,
}

/// The overview's charts for one span and consumer (or all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartSet {
    /// The span in words: "Showing the last 24h, in 1 h intervals, up to 14:00 UTC."
    pub span: String,
    /// The consumers that report metrics, for the filter.
    pub consumers: Vec<String>,
    pub charts: Vec<Chart>,
}

/// Every overview chart: duplicate-claim rate, duplicate delays, queue and
/// outbox age, unknown outcomes, dead letters, transaction failures,
/// delivery-to-outcome latency and recovery times. `range` names a span
/// ending now; `from` and `to` (RFC 3339, or `YYYY-MM-DDTHH:MM` in UTC) name
/// one instead. `consumer` narrows every chart to one consumer.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_charts(
    range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    consumer: Option<String>,
) -> Result<ChartSet, AppError> {
    crate::ssr::serve(async move {
        crate::ssr::require(idem_domain::Role::Viewer)?;
        let span = ssr::ChartSpan::parse(range, from, to, chrono::Utc::now())?;
        let consumer = match consumer.filter(|c| !c.is_empty()) {
            Some(c) => Some(idem_domain::ConsumerName::parse(c)?.as_str().to_owned()),
            None => None,
        };
        let state = crate::ssr::state()?;
        let key = format!("overview:{}:{consumer:?}", span.key());
        let (store, slos) = (crate::ssr::reader(&state).store, state.slos.clone());
        let mut set = state
            .per_interval
            .get_or_load(key, {
                let (store, slos, consumer) = (store.clone(), slos.clone(), consumer.clone());
                || ssr::overview_charts(store, slos, span, consumer)
            })
            .await?;
        // Open unknown outcomes are about now, not the span: read through the
        // short cache, so a resolution shows on the next refresh.
        let open = state
            .reads
            .get_or_load(format!("unknown-open:{consumer:?}"), || {
                ssr::open_unknown_chart(store, slos, consumer)
            })
            .await?;
        let at = set
            .charts
            .iter()
            .position(|c| c.id == "unknown-outcomes")
            .unwrap_or(set.charts.len());
        set.charts.insert(at, open);
        Ok(set)
    })
    .await
}

/// One SLO's charts over its window: the SLI, the error budget remaining,
/// and each alert tier's burn rate against its threshold.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slo_charts(name: String) -> Result<Vec<Chart>, AppError> {
    crate::ssr::serve(async move {
        crate::ssr::require(idem_domain::Role::Viewer)?;
        let state = crate::ssr::state()?;
        let Some(slo) = state.slos.slos.iter().find(|s| s.name == name).cloned() else {
            return Err(AppError::NotFound(format!(
                "There is no SLO named “{name}”."
            )));
        };
        let store = crate::ssr::reader(&state).store;
        let hour = idem_store::Ts::now().hour();
        state
            .per_interval
            .get_or_load(format!("slo:{name}:{}", hour.micros()), || {
                ssr::slo_charts(store, slo, hour)
            })
            .await
    })
    .await
}

#[cfg(feature = "ssr")]
pub use ssr::{CHART_METRICS, chart_reads};

#[cfg(feature = "ssr")]
mod ssr {
    use std::sync::Arc;

    use chrono::{DateTime, TimeDelta, Utc};
    use idem_domain::{
        Metric,
        slo::{Events, Indicator, Slo, SloSet, TIERS},
    };
    use idem_store::{BucketSums, Store, Ts};

    use super::{Chart, ChartLink, ChartSet, DEFAULT_RANGE, MAX_SPAN_DAYS, RANGES};
    use crate::{
        charts::{self, Frame},
        error::AppError,
        links,
    };

    /// The intervals charts are drawn in, smallest first: the first that
    /// cuts a span into at most [`MAX_INTERVALS`] is used.
    const STEPS: &[i64] = &[60, 300, 900, 3600, 2 * 3600, 6 * 3600, 86_400];
    const MAX_INTERVALS: i64 = 120;
    /// The longest span drawn in intervals shorter than an hour (read from
    /// per-minute rows): six hours of ten consumers is ~3,600 rows a metric.
    const MINUTES_AT_MOST: i64 = 6 * 3600;

    /// The span a set of charts covers, in whole intervals.
    #[derive(Debug, Clone)]
    pub struct ChartSpan {
        label: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        step: TimeDelta,
    }

    impl ChartSpan {
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
            let (from, to) = (super::super::instant(from)?, super::super::instant(to)?);
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

        /// What the charts drawn for this span depend on: the intervals
        /// (which move on when the next one completes), not the clock.
        pub fn key(&self) -> String {
            format!(
                "{}:{}:{}",
                self.from.timestamp(),
                self.to.timestamp(),
                self.step.num_seconds()
            )
        }

        fn frame(&self) -> Frame {
            Frame::new(self.label.clone(), self.from, self.to, self.step)
        }
    }

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

    /// The first SLO whose indicator `pick` recognises, and what it returns.
    fn from_slos<T>(slos: &SloSet, pick: impl Fn(&Slo) -> Option<T>) -> Option<T> {
        slos.slos.iter().find_map(pick)
    }

    /// The most a bad count may be of deliveries under its SLO, and the
    /// deliveries an interval needs before that is judged.
    fn allowed_share(slos: &SloSet, metric: Metric) -> Option<charts::Allowed> {
        from_slos(slos, |slo| match slo.sli {
            Indicator::Counters {
                valid: Metric::Deliveries,
                bad,
            } if bad == metric => Some(charts::Allowed {
                share: slo.objective.error_budget(),
                min_deliveries: slo.min_events as f64,
            }),
            _ => None,
        })
    }

    fn gauge_threshold(slos: &SloSet, metric: Metric) -> Option<f64> {
        from_slos(slos, |slo| match slo.sli {
            Indicator::GaugeSlices {
                gauge,
                at_most_seconds,
            } if gauge == metric => Some(at_most_seconds),
            _ => None,
        })
    }

    /// Every metric the overview's charts draw.
    pub const CHART_METRICS: &[Metric] = &[
        Metric::Deliveries,
        Metric::DuplicateClaims,
        Metric::DuplicateDelaySeconds,
        Metric::QueueOldestAgeSeconds,
        Metric::OutboxOldestAgeSeconds,
        Metric::UnknownOutcomes,
        Metric::DeadLetters,
        Metric::TransactionFailures,
        Metric::OutcomeLatencySeconds,
    ];

    /// The database read behind the overview's charts for a named range
    /// ending `now`, across all consumers (what `idem bench` times); returns
    /// how many metrics came back.
    pub async fn chart_reads(
        store: &Store,
        range: &str,
        now: DateTime<Utc>,
    ) -> Result<usize, AppError> {
        let span = ChartSpan::parse(Some(range.to_owned()), None, None, now)?;
        let starts: Vec<Ts> = span.frame().starts.iter().copied().map(Ts::from).collect();
        let read = store
            .metric_buckets(CHART_METRICS, &starts, Ts::from(span.to), None)
            .await?;
        Ok(read.len())
    }

    pub async fn overview_charts(
        store: Store,
        slos: Arc<SloSet>,
        span: ChartSpan,
        consumer: Option<String>,
    ) -> Result<ChartSet, AppError> {
        let frame = span.frame();
        let starts: Vec<Ts> = frame.starts.iter().copied().map(Ts::from).collect();
        let (from, to) = (Ts::from(span.from), Ts::from(span.to));
        let who = consumer.as_deref();
        // Every metric the charts draw, the rollup watermark read once.
        let mut read = store
            .metric_buckets(CHART_METRICS, &starts, to, who)
            .await?;
        let mut buckets =
            |metric: Metric| -> Vec<BucketSums> { read.remove(&metric).unwrap_or_default() };
        let counts =
            |sums: &[BucketSums]| -> Vec<f64> { sums.iter().map(|s| s.values().sum()).collect() };
        let deliveries = buckets(Metric::Deliveries);
        let valid: Vec<Option<f64>> = deliveries
            .iter()
            .map(|s| (!s.is_empty()).then(|| s.values().sum()))
            .collect();
        let reported: Vec<bool> = valid.iter().map(Option::is_some).collect();

        // The lists a chart's keys are in, for the same span and consumer.
        let keys_link = |path: &str, text: &str| {
            let mut pairs: Vec<(&str, String)> = vec![
                ("from", span.from.format("%Y-%m-%dT%H:%MZ").to_string()),
                ("to", span.to.format("%Y-%m-%dT%H:%MZ").to_string()),
            ];
            if let Some(c) = &consumer {
                pairs.push(("consumer", c.clone()));
            }
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            Some(ChartLink {
                href: links::with_query(path, &pairs),
                text: text.to_owned(),
            })
        };

        let mut list = Vec::new();
        list.push(charts::bad_share(
            "duplicate-rate",
            "Duplicate-claim rate",
            &frame,
            "found their key already claimed",
            &valid,
            &counts(&buckets(Metric::DuplicateClaims)),
            allowed_share(&slos, Metric::DuplicateClaims),
        ));
        // The distribution over the whole span: its intervals added up.
        let mut delays = BucketSums::new();
        for interval in buckets(Metric::DuplicateDelaySeconds) {
            for (bucket, n) in interval {
                *delays.entry(bucket).or_default() += n;
            }
        }
        list.push(charts::duplicate_delays(&span.label, &delays));
        list.push(charts::gauge_worst(
            "queue-age",
            "Oldest queued message",
            &frame,
            "oldest queued message",
            &buckets(Metric::QueueOldestAgeSeconds),
            gauge_threshold(&slos, Metric::QueueOldestAgeSeconds),
        ));
        let mut outbox = charts::gauge_worst(
            "outbox-age",
            "Oldest unpublished outbox row",
            &frame,
            "oldest unpublished outbox row",
            &buckets(Metric::OutboxOldestAgeSeconds),
            gauge_threshold(&slos, Metric::OutboxOldestAgeSeconds),
        );
        outbox.link = Some(ChartLink {
            href: "/outbox".into(),
            text: "The outbox backlog now, oldest first".into(),
        });
        list.push(outbox);

        let mut unknown = charts::new_unknown_outcomes(
            &frame,
            &reported,
            &counts(&buckets(Metric::UnknownOutcomes)),
        );
        unknown.link = keys_link("/unknown", "Unknown outcomes from this span");
        list.push(unknown);

        let mut dead = charts::bad_share(
            "dead-letters",
            "Dead letters",
            &frame,
            "were dead-lettered",
            &valid,
            &counts(&buckets(Metric::DeadLetters)),
            allowed_share(&slos, Metric::DeadLetters),
        );
        dead.link = keys_link("/dead-letters", "Dead letters from this span");
        list.push(dead);
        list.push(charts::bad_share(
            "transaction-failures",
            "Transaction failures",
            &frame,
            "rolled back their claim transaction",
            &valid,
            &counts(&buckets(Metric::TransactionFailures)),
            allowed_share(&slos, Metric::TransactionFailures),
        ));
        let latency_threshold = from_slos(&slos, |slo| match slo.sli {
            Indicator::Histogram {
                histogram: Metric::OutcomeLatencySeconds,
                at_most_seconds,
            } => Some(at_most_seconds),
            _ => None,
        });
        list.push(charts::outcome_latency(
            &frame,
            &buckets(Metric::OutcomeLatencySeconds),
            Metric::OutcomeLatencySeconds.buckets(),
            latency_threshold,
        ));
        let recoveries: Vec<(DateTime<Utc>, f64)> = store
            .recoveries(from, to, who)
            .await?
            .into_iter()
            .map(|r| (r.at.0, r.seconds))
            .collect();
        let recovery_threshold = from_slos(&slos, |slo| match slo.sli {
            Indicator::Recovery { within_seconds } => Some(within_seconds),
            _ => None,
        });
        list.push(charts::recovery_times(
            &frame,
            &recoveries,
            recovery_threshold,
        ));

        Ok(ChartSet {
            span: format!(
                "Showing the {}, in {} intervals, up to {} UTC.",
                span.label,
                crate::format::duration(span.step.num_seconds()),
                span.to.format("%Y-%m-%d %H:%M")
            ),
            consumers: store.consumers(200).await?,
            charts: list,
        })
    }

    /// The unknown outcomes open now by age, for one consumer or all, with a
    /// link to them.
    pub async fn open_unknown_chart(
        store: Store,
        slos: Arc<SloSet>,
        consumer: Option<String>,
    ) -> Result<Chart, AppError> {
        let cap = super::super::COUNT_CAP;
        let since = store
            .unknown_since(consumer.as_deref(), cap as i64 + 1)
            .await?;
        let now = Utc::now();
        let ages: Vec<f64> = since
            .iter()
            .take(cap as usize)
            .map(|at| (now - at.0).num_milliseconds() as f64 / 1000.0)
            .collect();
        let objective = from_slos(&slos, |slo| match slo.sli {
            Indicator::UnknownResolved { within_seconds } => Some(within_seconds),
            _ => None,
        })
        .unwrap_or(super::super::UNKNOWN_RESOLUTION_SLO_SECONDS as f64);
        let mut chart = charts::open_unknown_outcomes(&ages, since.len() as u64 > cap, objective);
        let consumer = consumer.unwrap_or_default();
        chart.link = Some(ChartLink {
            href: links::with_query("/unknown", &[("consumer", &consumer)]),
            text: "Every open unknown outcome, oldest first".into(),
        });
        Ok(chart)
    }

    /// The SLI and budget in about a hundred intervals over the SLO's window,
    /// and each tier's burn rate hour by hour, all from one hourly read. A
    /// window longer than the data (a new install, the demo's two days) is
    /// drawn from the first hour with events (a day at the least), so the
    /// data fill the chart instead of its last few pixels.
    pub async fn slo_charts(store: Store, slo: Slo, until: Ts) -> Result<Vec<Chart>, AppError> {
        let window_start = (until - TimeDelta::seconds(slo.window.as_seconds())).hour();
        let hourly = store
            .indicator_buckets(&slo.sli, window_start, until, TimeDelta::hours(1))
            .await?;
        let mut events: Vec<Events> = hourly.iter().map(|(_, e)| *e).collect();
        let first = first_with_data(&events, 24);
        events.drain(..first);
        let from = Ts(window_start.0 + TimeDelta::hours(first as i64));
        let label = if first == 0 {
            format!("last {}", slo.window)
        } else {
            format!("{} hours with data", events.len())
        };
        let hours = Frame::new(label, from.0, until.0, TimeDelta::hours(1));
        // About a hundred intervals for the SLI and the budget.
        let per = (events.len() / 112).max(1);
        let coarse = Frame::new(
            hours.label.clone(),
            from.0,
            until.0,
            TimeDelta::hours(per as i64),
        );
        let summed: Vec<Events> = events
            .chunks(per)
            .map(|chunk| {
                chunk.iter().fold(Events::default(), |a, e| {
                    Events::new(a.good + e.good, a.valid + e.valid)
                })
            })
            .collect();
        let mut list = vec![
            charts::sli_over_time(&slo, &coarse, &summed),
            charts::budget_over_time(&slo, &coarse, &summed),
        ];
        list.extend(
            TIERS
                .iter()
                .map(|tier| charts::burn_rate(&slo, tier, &hours, &events)),
        );
        Ok(list)
    }

    /// Where a chart of `events` starts: at the first with valid events, but
    /// never leaving fewer than `at_least` (nor skipping any when none has).
    pub(super) fn first_with_data(events: &[Events], at_least: usize) -> usize {
        let first = events.iter().position(|e| e.valid > 0.0).unwrap_or(0);
        first.min(events.len().saturating_sub(at_least))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn an_slo_chart_starts_at_its_first_data_and_shows_a_day_at_the_least() {
            let none = Events::default();
            let some = Events::new(9.0, 10.0);
            let mut events = vec![none; 600];
            events.extend(vec![some; 48]);
            assert_eq!(first_with_data(&events, 24), 600);
            let late = [vec![none; 640], vec![some; 8]].concat();
            assert_eq!(first_with_data(&late, 24), 624, "a day at the least");
            assert_eq!(
                first_with_data(&[none; 30], 24),
                0,
                "no data: the whole window"
            );
            assert_eq!(first_with_data(&[some; 30], 24), 0);
        }

        fn at(text: &str) -> DateTime<Utc> {
            DateTime::parse_from_rfc3339(text).unwrap().to_utc()
        }

        #[test]
        fn a_named_range_ends_at_the_last_complete_interval() {
            let span = ChartSpan::parse(Some("24h".into()), None, None, at("2026-11-30T14:37:12Z"))
                .unwrap();
            // Past six hours, whole hours: the rollup answers them.
            assert_eq!(span.step, TimeDelta::hours(1));
            assert_eq!(span.to, at("2026-11-30T14:00:00Z"));
            assert_eq!(span.from, at("2026-11-29T14:00:00Z"));
            assert_eq!(span.frame().len(), 24);
            let short = ChartSpan::parse(Some("6h".into()), None, None, at("2026-11-30T14:37:12Z"))
                .unwrap();
            assert_eq!(short.step, TimeDelta::minutes(5));
            assert_eq!(short.to, at("2026-11-30T14:35:00Z"));
            assert_eq!(span.label, "last 24h");
        }

        #[test]
        fn a_chart_is_redrawn_only_when_its_next_interval_completes() {
            let key = |now| {
                ChartSpan::parse(Some("7d".into()), None, None, at(now))
                    .unwrap()
                    .key()
            };
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
}
