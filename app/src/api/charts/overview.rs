//! The overview's charts for a span: one read of every metric they draw,
//! then one chart per question, in the order the page shows them.

use std::{collections::HashMap, sync::Arc};

use chrono::{DateTime, Utc};
use idem_domain::{
    ConsumerName, Histogram, Metric,
    slo::{Indicator, Slo, SloSet},
};
use idem_store::{Store, Ts};

use super::{Chart, ChartLink, ChartSet};
use crate::span::ChartSpan;
use crate::{
    charts::{self, Frame},
    error::AppError,
    links,
};

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

/// The age a gauge's SLO allows, in seconds.
fn gauge_threshold(slos: &SloSet, metric: Metric) -> Option<f64> {
    from_slos(slos, |slo| match slo.sli {
        Indicator::GaugeSlices {
            gauge,
            at_most_seconds,
        } if gauge == metric => Some(at_most_seconds),
        _ => None,
    })
}

/// The delivery-to-outcome latency the SLOs allow, in seconds.
fn latency_threshold(slos: &SloSet) -> Option<f64> {
    from_slos(slos, |slo| match slo.sli {
        Indicator::Histogram {
            histogram: Metric::OutcomeLatencySeconds,
            at_most_seconds,
        } => Some(at_most_seconds),
        _ => None,
    })
}

/// How soon the SLOs want an operator's recovery, in seconds.
fn recovery_threshold(slos: &SloSet) -> Option<f64> {
    from_slos(slos, |slo| match slo.sli {
        Indicator::Recovery { within_seconds } => Some(within_seconds),
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
    Metric::DedupeSuppressed,
    Metric::RetryableFailures,
    Metric::RateLimited,
    Metric::RetryAfterHonoured,
    Metric::QueueDepth,
    Metric::Replays,
];

/// The database read behind the overview's charts for a named range
/// ending `now`, across all consumers (what `idem-tools bench` times); returns
/// how many metrics came back.
pub async fn chart_reads(
    store: &Store,
    range: &str,
    now: DateTime<Utc>,
) -> Result<usize, AppError> {
    let span = ChartSpan::parse(Some(range.to_owned()), None, None, now)?;
    let starts: Vec<Ts> = span.frame().starts.iter().copied().map(Ts::from).collect();
    let read = store
        .metrics()
        .metric_buckets(CHART_METRICS, &starts, Ts::from(span.to), None)
        .await?;
    Ok(read.len())
}

/// Every overview chart for `span` and `consumer` (or all), in page order.
/// Every overview chart over `range` ending `now`, for all consumers under
/// the default SLOs, read and drawn without a cache (what `idem-tools bench`
/// times as a chart's cold cost); the SVG bytes drawn.
pub async fn charts_drawn(
    store: &Store,
    range: &str,
    now: DateTime<Utc>,
) -> Result<usize, AppError> {
    let span = ChartSpan::parse(Some(range.to_owned()), None, None, now)?;
    let slos = Arc::new(SloSet::default());
    let set = overview_charts(store.clone(), slos, span, None, false).await?;
    Ok(set
        .charts
        .iter()
        .filter_map(|c| c.svg.as_ref())
        .map(String::len)
        .sum())
}

pub async fn overview_charts(
    store: Store,
    slos: Arc<SloSet>,
    span: ChartSpan,
    consumer: Option<ConsumerName>,
    blind: bool,
) -> Result<ChartSet, AppError> {
    let frame = span.frame();
    let starts: Vec<Ts> = frame.starts.iter().copied().map(Ts::from).collect();
    let (from, to) = (Ts::from(span.from), Ts::from(span.to));
    let who = consumer.as_ref();
    // Every metric the charts draw, the rollup watermark read once; for
    // a consumer not the reader's, nothing (as for one that reports none).
    let read = match blind {
        true => HashMap::new(),
        false => {
            store
                .metrics()
                .metric_buckets(CHART_METRICS, &starts, to, who)
                .await?
        }
    };
    let mut reads = Reads::new(read, &frame);
    let keys = |path: &str, text: &str| keys_link(&span, who, path, text);

    // The charts read one consumer or, for a reader who sees every team,
    // the fleet (`get_charts` never asks a limited reader for the fleet).
    let reach = match blind {
        true => idem_domain::Within::Only(Vec::new()),
        false => idem_domain::Within::Every.narrowed_to(who),
    };
    let unobservable = store
        .metrics()
        .unobservable(Metric::DuplicateClaims, &reach)
        .await?;
    let mut list = Vec::new();
    list.extend(duplicate_charts(
        &mut reads,
        &span.label,
        &slos,
        &unobservable,
        who,
    ));
    list.extend(age_charts(&mut reads, &slos));
    list.extend(loss_charts(&mut reads, &slos, keys));
    list.push(charts::outcome_latency(
        &frame,
        &reads.take(Metric::OutcomeLatencySeconds),
        Metric::OutcomeLatencySeconds.buckets(),
        latency_threshold(&slos),
    ));
    let recoveries = match blind {
        true => Vec::new(),
        false => store.metrics().recoveries(from, to, who).await?,
    };
    let recoveries: Vec<(DateTime<Utc>, f64)> = recoveries
        .into_iter()
        .map(|r| (r.at.0, r.seconds))
        .collect();
    let mut recovery = charts::recovery_times(&frame, &recoveries, recovery_threshold(&slos));
    recovery.link = recoveries_link(&span);
    list.push(recovery);
    list.extend(pressure_charts(&mut reads));

    Ok(ChartSet {
        span: span.sentence(),
        // The filter's names are the reader's, filled in outside the cache.
        consumers: Vec::new(),
        charts: list,
    })
}

/// The metrics read for a span's charts, each taken once by the chart that
/// draws it, and the deliveries every ratio is over.
struct Reads<'a> {
    read: HashMap<Metric, Vec<Histogram>>,
    frame: &'a Frame,
    /// Deliveries per interval; `None` where no consumer reported.
    valid: Vec<Option<f64>>,
}

impl<'a> Reads<'a> {
    /// Takes the deliveries out of `read` at once: every ratio needs them.
    fn new(mut read: HashMap<Metric, Vec<Histogram>>, frame: &'a Frame) -> Self {
        let deliveries = read.remove(&Metric::Deliveries).unwrap_or_default();
        let valid = deliveries
            .iter()
            .map(|s| (!s.is_empty()).then(|| s.total()))
            .collect();
        Self { read, frame, valid }
    }

    /// `metric`'s sums per interval (none when it was not read).
    fn take(&mut self, metric: Metric) -> Vec<Histogram> {
        self.read.remove(&metric).unwrap_or_default()
    }

    /// `metric`'s count per interval: its buckets added up.
    fn counts(&mut self, metric: Metric) -> Vec<f64> {
        self.take(metric).iter().map(Histogram::total).collect()
    }

    /// Which intervals some consumer reported deliveries for.
    fn reported(&self) -> Vec<bool> {
        self.valid.iter().map(Option::is_some).collect()
    }
}

/// The duplicate-claim rate over time (or why it cannot be known, for the
/// consumers in `unobservable`), when duplicates arrived over the whole
/// span (labelled `span_label`), and how many were suppressed.
fn duplicate_charts(
    reads: &mut Reads,
    span_label: &str,
    slos: &SloSet,
    unobservable: &[String],
    consumer: Option<&ConsumerName>,
) -> [Chart; 3] {
    let duplicates = reads.counts(Metric::DuplicateClaims);
    let suppressed = charts::duplicates_suppressed(
        reads.frame,
        &reads.reported(),
        &duplicates,
        &reads.counts(Metric::DedupeSuppressed),
    );
    let mut rate = charts::bad_share(
        "duplicate-rate",
        "Duplicate-claim rate",
        reads.frame,
        "found their key already claimed",
        &reads.valid,
        &duplicates,
        allowed_share(slos, Metric::DuplicateClaims),
    );
    not_observable(&mut rate, unobservable, consumer);
    let delays = summed(reads.take(Metric::DuplicateDelaySeconds));
    [
        rate,
        charts::duplicate_delays(span_label, &delays),
        suppressed,
    ]
}

/// What the consumers push against and what operators push back with:
/// retries and rate limiting, queue depth, replays.
fn pressure_charts(reads: &mut Reads) -> [Chart; 3] {
    let reported = reads.reported();
    let retries = charts::retry_pressure(
        reads.frame,
        &reported,
        &reads.counts(Metric::RetryableFailures),
        &reads.counts(Metric::RateLimited),
        &reads.counts(Metric::RetryAfterHonoured),
    );
    let depth = charts::queue_depth(reads.frame, &reads.take(Metric::QueueDepth));
    let replays = charts::replays(reads.frame, &reported, &reads.counts(Metric::Replays));
    [retries, depth, replays]
}

/// Says so on the duplicate-claim rate where duplicates cannot be observed:
/// instead of the rate, for a consumer whose adapter declared it; beside it,
/// across all consumers, when some did. Never a rate that only looks perfect.
fn not_observable(rate: &mut Chart, unobservable: &[String], consumer: Option<&ConsumerName>) {
    match consumer {
        Some(c) if unobservable.iter().any(|u| u.as_str() == c.as_str()) => {
            rate.svg = None;
            rate.summary = format!(
                "Not observable: {c}'s duplicates never reach a table Idem reads (its adapter \
                 says so), so its duplicate-claim rate is unknown, not 0%."
            );
        }
        Some(_) => {}
        None if unobservable.is_empty() => {}
        None => {
            rate.summary += &format!(
                " Not observable for {}: their deliveries count here, their duplicates cannot, \
                 so the rate may read low.",
                unobservable.join(", ")
            );
        }
    }
}

/// A distribution over a whole span: its intervals' buckets added up.
fn summed(intervals: Vec<Histogram>) -> Histogram {
    Histogram::merged(&intervals)
}

/// The oldest queued message and the oldest unpublished outbox row, the
/// latter linked to the outbox backlog.
fn age_charts(reads: &mut Reads, slos: &SloSet) -> [Chart; 2] {
    let queue = charts::gauge_worst(
        "queue-age",
        "Oldest queued message",
        reads.frame,
        "oldest queued message",
        &reads.take(Metric::QueueOldestAgeSeconds),
        gauge_threshold(slos, Metric::QueueOldestAgeSeconds),
    );
    let mut outbox = charts::gauge_worst(
        "outbox-age",
        "Oldest unpublished outbox row",
        reads.frame,
        "oldest unpublished outbox row",
        &reads.take(Metric::OutboxOldestAgeSeconds),
        gauge_threshold(slos, Metric::OutboxOldestAgeSeconds),
    );
    outbox.link = Some(ChartLink {
        href: "/outbox".into(),
        text: "The outbox backlog now, oldest first".into(),
    });
    [queue, outbox]
}

/// New unknown outcomes, dead letters and transaction failures; the first
/// two linked (by `keys`) to their lists for the span.
fn loss_charts(
    reads: &mut Reads,
    slos: &SloSet,
    keys: impl Fn(&str, &str) -> Option<ChartLink>,
) -> [Chart; 3] {
    let mut unknown = charts::new_unknown_outcomes(
        reads.frame,
        &reads.reported(),
        &reads.counts(Metric::UnknownOutcomes),
    );
    unknown.link = keys("/unknown", "Unknown outcomes from this span");
    let dead_letters = reads.counts(Metric::DeadLetters);
    let mut dead = charts::bad_share(
        "dead-letters",
        "Dead letters",
        reads.frame,
        "were dead-lettered",
        &reads.valid,
        &dead_letters,
        allowed_share(slos, Metric::DeadLetters),
    );
    dead.link = keys("/dead-letters", "Dead letters from this span");
    let rolled_back = reads.counts(Metric::TransactionFailures);
    let failures = charts::bad_share(
        "transaction-failures",
        "Transaction failures",
        reads.frame,
        "rolled back their claim transaction",
        &reads.valid,
        &rolled_back,
        allowed_share(slos, Metric::TransactionFailures),
    );
    [unknown, dead, failures]
}

/// The recovery actions behind the span's chart, in the audit log (which
/// operators and admins may read).
fn recoveries_link(span: &ChartSpan) -> Option<ChartLink> {
    let [(_, from), (_, to)] = span_bounds(span);
    let pairs = [
        ("from", from.as_str()),
        ("to", to.as_str()),
        ("recoveries", "1"),
    ];
    Some(ChartLink {
        href: links::with_query("/audit", &pairs),
        text: "These recoveries in the audit log".into(),
    })
}

/// `from` and `to` of a span, as a list's address takes them.
fn span_bounds(span: &ChartSpan) -> [(&'static str, String); 2] {
    [
        ("from", span.from.format("%Y-%m-%dT%H:%MZ").to_string()),
        ("to", span.to.format("%Y-%m-%dT%H:%MZ").to_string()),
    ]
}

/// A link to the list at `path` narrowed to the same span and consumer.
fn keys_link(
    span: &ChartSpan,
    consumer: Option<&ConsumerName>,
    path: &str,
    text: &str,
) -> Option<ChartLink> {
    let mut pairs: Vec<(&str, String)> = span_bounds(span).to_vec();
    if let Some(c) = consumer {
        pairs.push(("consumer", c.to_string()));
    }
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Some(ChartLink {
        href: links::with_query(path, &pairs),
        text: text.to_owned(),
    })
}

/// The unknown outcomes open now by age, for one consumer or all, with a
/// link to them.
pub async fn open_unknown_chart(
    store: Store,
    slos: Arc<SloSet>,
    consumer: Option<ConsumerName>,
    blind: bool,
) -> Result<Chart, AppError> {
    let cap = crate::api::COUNT_CAP;
    let window = idem_store::Window {
        consumer: consumer.clone(),
        within: match blind {
            true => idem_domain::Within::Only(Vec::new()),
            false => idem_domain::Within::Every,
        },
        ..Default::default()
    };
    let since = store.lists().unknown_since(&window, cap as i64 + 1).await?;
    let now = Utc::now();
    let ages: Vec<f64> = since
        .iter()
        .take(cap as usize)
        .map(|at| (now - at.0).num_milliseconds() as f64 / 1000.0)
        .collect();
    let objective = crate::api::ssr::unknown_objective_seconds(&slos);
    let mut chart = charts::open_unknown_outcomes(&ages, since.len() as u64 > cap, objective);
    let consumer = consumer.map(String::from).unwrap_or_default();
    chart.link = Some(ChartLink {
        href: links::with_query("/unknown", &[("consumer", &consumer)]),
        text: "Every open unknown outcome, oldest first".into(),
    });
    Ok(chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span() -> ChartSpan {
        let now = DateTime::parse_from_rfc3339("2026-11-30T14:37:12Z")
            .unwrap()
            .to_utc();
        ChartSpan::parse(Some("24h".into()), None, None, now).unwrap()
    }

    #[test]
    fn a_keys_link_narrows_its_list_to_the_span_and_the_consumer() {
        let all = keys_link(&span(), None, "/unknown", "Unknown outcomes").unwrap();
        assert_eq!(
            all.href,
            "/unknown?from=2026-11-29T14%3A00Z&to=2026-11-30T14%3A00Z"
        );
        assert_eq!(all.text, "Unknown outcomes");
        let billing = ConsumerName::parse("billing").unwrap();
        let one = keys_link(&span(), Some(&billing), "/dead-letters", "Dead").unwrap();
        assert!(one.href.ends_with("&consumer=billing"), "{}", one.href);
    }

    #[test]
    fn a_distribution_over_a_span_adds_up_its_intervals() {
        let interval = |pairs: &[(&str, f64)]| -> Histogram {
            let mut h = Histogram::new();
            for (label, n) in pairs {
                h.add_label(label, *n);
            }
            h
        };
        let total = summed(vec![
            interval(&[("10", 2.0), ("300", 1.0)]),
            Histogram::new(),
            interval(&[("10", 3.0)]),
        ]);
        assert_eq!(total, interval(&[("10", 5.0), ("300", 1.0)]));
    }
}
