//! The fleet's metrics, counted in memory and flushed every few seconds as
//! per-minute rows: no claim write ever touches a shared counter row.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use idem_domain::Metric;
use idem_store::{MetricSample, Ts};

use super::flows::Flow;

#[derive(Default)]
pub struct Meter {
    pending: HashMap<(Flow, Metric, Ts, String), f64>,
}

impl Meter {
    pub fn count(&mut self, flow: Flow, metric: Metric, at: DateTime<Utc>) {
        self.add(flow, metric, at, String::new(), 1.0);
    }

    /// One observation of a histogram metric, in seconds.
    pub fn observe(&mut self, flow: Flow, metric: Metric, at: DateTime<Utc>, seconds: f64) {
        self.add(flow, metric, at, metric.bucket_for(seconds), 1.0);
    }

    /// A gauge sample; the minute keeps the largest.
    pub fn gauge(&mut self, flow: Flow, metric: Metric, at: DateTime<Utc>, value: f64) {
        let slot = self
            .pending
            .entry((flow, metric, Ts::from(at).minute(), String::new()))
            .or_insert(value);
        *slot = slot.max(value);
    }

    fn add(&mut self, flow: Flow, metric: Metric, at: DateTime<Utc>, bucket: String, value: f64) {
        *self
            .pending
            .entry((flow, metric, Ts::from(at).minute(), bucket))
            .or_default() += value;
    }

    pub fn drain(&mut self) -> Vec<MetricSample> {
        self.pending
            .drain()
            .map(|((flow, metric, minute, bucket), value)| MetricSample {
                consumer: flow.consumer().to_owned(),
                metric,
                at: minute,
                bucket,
                value,
            })
            .collect()
    }
}
