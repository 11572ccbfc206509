//! Good and valid events of an SLO's indicator over windows, from metric
//! series and operators' recoveries already read: the store sums each
//! window's rows, and the indicator counts its events from the sums.

use std::collections::HashMap;

use idem_domain::{
    Metric,
    slo::{Events, Indicator, Recovered},
};

use super::series::MetricSeries;
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
    froms
        .iter()
        .map(|&from| {
            let sums = |metric| {
                series
                    .get(&metric)
                    .map(|s| s.sums(from, to))
                    .unwrap_or_default()
            };
            let recovered = recoveries
                .iter()
                .filter(|r| r.at >= from && r.at < to)
                .map(Recovery::recovered);
            indicator.events(sums, recovered)
        })
        .collect()
}

/// One operator action that ended an unknown outcome or a dead letter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub at: Ts,
    /// A resolution of an unknown outcome (otherwise a dead-letter replay or discard).
    pub resolved_unknown: bool,
    /// A resolution of an abandoned lease (see [`Recovered::abandoned_lease`]).
    pub abandoned_lease: bool,
    /// From the problem's start (the unknown outcome, the dead-lettering) to the action.
    pub seconds: f64,
}

impl Recovery {
    /// What an SLI counts of it (its time is the store's to filter on).
    pub fn recovered(&self) -> Recovered {
        Recovered {
            resolved_unknown: self.resolved_unknown,
            abandoned_lease: self.abandoned_lease,
            seconds: self.seconds,
        }
    }
}
