//! Good and valid events of an indicator over one window, counted from what
//! was read for it: each metric's per-bucket sums, and operators' recoveries.

use super::{Events, Indicator};
use crate::{Histogram, Metric};

/// One operator action that ended an unknown outcome or a dead letter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovered {
    /// A resolution of an unknown outcome (otherwise a dead-letter replay or discard).
    pub resolved_unknown: bool,
    /// A resolution of an abandoned lease: an unknown outcome no consumer
    /// counted (its worker died), so the resolution adds it to the valid events.
    pub abandoned_lease: bool,
    /// From the problem's start (the unknown outcome, the dead-lettering) to the action.
    pub seconds: f64,
}

impl Indicator {
    /// The metrics the indicator's events are counted from.
    pub fn metrics(&self) -> Vec<Metric> {
        match *self {
            Indicator::Counters { valid, bad } => vec![valid, bad],
            Indicator::GaugeSlices { gauge: m, .. } | Indicator::Histogram { histogram: m, .. } => {
                vec![m]
            }
            Indicator::UnknownResolved { .. } => vec![Metric::UnknownOutcomes],
            Indicator::Recovery { .. } => Vec::new(),
        }
    }

    /// Whether the indicator's events are counted from operators' recoveries.
    pub fn counts_recoveries(&self) -> bool {
        matches!(
            self,
            Indicator::UnknownResolved { .. } | Indicator::Recovery { .. }
        )
    }

    /// Good and valid events over one window, from each metric's sums over
    /// it (`sums`; empty for a metric nothing was read for) and the
    /// recoveries taken in it.
    pub fn events(
        &self,
        sums: impl Fn(Metric) -> Histogram,
        recovered: impl IntoIterator<Item = Recovered>,
    ) -> Events {
        // Good and valid recoveries, and how many were abandoned leases.
        let within = |within_seconds: f64, resolves_only: bool| {
            let (mut good, mut valid, mut abandoned) = (0_usize, 0_usize, 0_usize);
            for r in recovered {
                if r.resolved_unknown || !resolves_only {
                    valid += 1;
                    good += usize::from(r.seconds <= within_seconds);
                    abandoned += usize::from(r.abandoned_lease);
                }
            }
            (good as f64, valid as f64, abandoned as f64)
        };
        match *self {
            Indicator::Counters { valid, bad } => {
                let valid = sums(valid).total();
                Events::new(valid - sums(bad).total(), valid)
            }
            Indicator::GaugeSlices {
                gauge: metric,
                at_most_seconds,
            }
            | Indicator::Histogram {
                histogram: metric,
                at_most_seconds,
            } => {
                let sums = sums(metric);
                Events::new(sums.count_at_most(at_most_seconds), sums.total())
            }
            Indicator::UnknownResolved { within_seconds } => {
                let (good, _, abandoned) = within(within_seconds, true);
                Events::new(good, sums(Metric::UnknownOutcomes).total() + abandoned)
            }
            Indicator::Recovery { within_seconds } => {
                let (good, valid, _) = within(within_seconds, false);
                Events::new(good, valid)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums(metric: Metric) -> Histogram {
        match metric {
            Metric::Deliveries => [(f64::INFINITY, 100.0)].into_iter().collect(),
            Metric::DeadLetters => [(f64::INFINITY, 3.0)].into_iter().collect(),
            Metric::UnknownOutcomes => [(f64::INFINITY, 4.0)].into_iter().collect(),
            Metric::OutcomeLatencySeconds => [(1.0, 50.0), (5.0, 40.0), (900.0, 10.0)]
                .into_iter()
                .collect(),
            _ => Histogram::new(),
        }
    }

    fn recovered() -> Vec<Recovered> {
        let r = |resolved_unknown, seconds| Recovered {
            resolved_unknown,
            abandoned_lease: false,
            seconds,
        };
        vec![
            r(true, 60.0),
            r(true, 7200.0),
            r(false, 120.0),
            r(false, 600.0),
        ]
    }

    #[test]
    fn counters_count_valid_minus_bad() {
        let indicator = Indicator::Counters {
            valid: Metric::Deliveries,
            bad: Metric::DeadLetters,
        };
        assert_eq!(
            indicator.metrics(),
            [Metric::Deliveries, Metric::DeadLetters]
        );
        assert_eq!(indicator.events(sums, []), Events::new(97.0, 100.0));
    }

    #[test]
    fn histograms_count_the_buckets_at_or_under_the_threshold() {
        let indicator = Indicator::Histogram {
            histogram: Metric::OutcomeLatencySeconds,
            at_most_seconds: 5.0,
        };
        assert_eq!(indicator.events(sums, []), Events::new(90.0, 100.0));
        let gauge = Indicator::GaugeSlices {
            gauge: Metric::QueueOldestAgeSeconds,
            at_most_seconds: 60.0,
        };
        assert_eq!(gauge.events(sums, []), Events::default());
    }

    #[test]
    fn recoveries_count_those_within_the_threshold() {
        let unknown = Indicator::UnknownResolved {
            within_seconds: 900.0,
        };
        assert!(unknown.counts_recoveries());
        assert_eq!(unknown.metrics(), [Metric::UnknownOutcomes]);
        // One of the two resolutions in time, out of four unknown outcomes.
        assert_eq!(unknown.events(sums, recovered()), Events::new(1.0, 4.0));
        let any = Indicator::Recovery {
            within_seconds: 300.0,
        };
        assert!(any.metrics().is_empty());
        assert_eq!(any.events(sums, recovered()), Events::new(2.0, 4.0));
    }

    #[test]
    fn a_resolved_abandoned_lease_is_an_unknown_outcome_the_consumers_did_not_count() {
        let unknown = Indicator::UnknownResolved {
            within_seconds: 900.0,
        };
        let mut recovered = recovered();
        recovered.push(Recovered {
            resolved_unknown: true,
            abandoned_lease: true,
            seconds: 300.0,
        });
        // Two of three resolutions in time, out of four counted and one abandoned.
        assert_eq!(unknown.events(sums, recovered), Events::new(2.0, 5.0));
    }
}
