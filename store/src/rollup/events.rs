//! Good and valid events of an SLO's indicator, counted from metric series
//! and operators' recoveries already read.

use std::collections::HashMap;

use idem_domain::{
    Metric,
    slo::{Events, Indicator},
};

use super::series::{MetricSeries, bucket_bound};
use crate::ts::Ts;

/// Good and valid events of an indicator over `[from, to)` for each of
/// `froms`, from series and audit rows already read.
pub(super) fn events_of(
    indicator: &Indicator,
    series: &HashMap<Metric, MetricSeries>,
    recoveries: &[Recovery],
    froms: &[Ts],
    to: Ts,
) -> Vec<Events> {
    let total = |metric: Metric, from: Ts| -> f64 {
        series
            .get(&metric)
            .map_or(0.0, |s| s.sums(from, to).values().sum())
    };
    let at_most = |metric: Metric, from: Ts, bound: f64| -> Events {
        let sums = series
            .get(&metric)
            .map(|s| s.sums(from, to))
            .unwrap_or_default();
        let good = sums
            .iter()
            .filter(|(bucket, _)| bucket_bound(bucket) <= bound)
            .map(|(_, v)| v)
            .sum();
        Events::new(good, sums.values().sum())
    };
    let recovered = |from: Ts, resolves_only: bool| {
        recoveries
            .iter()
            .filter(move |r| r.at >= from && r.at < to && (r.resolved_unknown || !resolves_only))
    };
    froms
        .iter()
        .map(|from| match *indicator {
            Indicator::Counters { valid, bad } => {
                let valid = total(valid, *from);
                Events::new(valid - total(bad, *from), valid)
            }
            Indicator::GaugeSlices {
                gauge: metric,
                at_most_seconds,
            }
            | Indicator::Histogram {
                histogram: metric,
                at_most_seconds,
            } => at_most(metric, *from, at_most_seconds),
            Indicator::UnknownResolved { within_seconds } => Events::new(
                recovered(*from, true)
                    .filter(|r| r.seconds <= within_seconds)
                    .count() as f64,
                total(Metric::UnknownOutcomes, *from),
            ),
            Indicator::Recovery { within_seconds } => Events::new(
                recovered(*from, false)
                    .filter(|r| r.seconds <= within_seconds)
                    .count() as f64,
                recovered(*from, false).count() as f64,
            ),
        })
        .collect()
}

/// One operator action that ended an unknown outcome or a dead letter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub at: Ts,
    /// A resolution of an unknown outcome (otherwise a dead-letter replay or discard).
    pub resolved_unknown: bool,
    /// From the problem's start (the unknown outcome, the dead-lettering) to the action.
    pub seconds: f64,
}

/// The metrics an indicator's events are counted from.
pub(super) fn indicator_metrics(indicator: &Indicator) -> Vec<Metric> {
    match *indicator {
        Indicator::Counters { valid, bad } => vec![valid, bad],
        Indicator::GaugeSlices { gauge: m, .. } | Indicator::Histogram { histogram: m, .. } => {
            vec![m]
        }
        Indicator::UnknownResolved { .. } => vec![Metric::UnknownOutcomes],
        Indicator::Recovery { .. } => Vec::new(),
    }
}
