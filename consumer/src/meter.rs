//! The consumer metrics, counted in memory and flushed as per-minute rows.
//!
//! A worker counts into its own [`Meter`] and flushes every few seconds
//! ([`crate::write_metrics`]): one upsert per (consumer, metric, minute,
//! bucket), so no claim write ever touches a shared counter row that every
//! worker would queue on.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use idem_domain::Metric;

use crate::{ClaimDecision, Decision, MetricSample, Ts};

#[derive(Debug, Default)]
pub struct Meter {
    pending: HashMap<(String, Metric, Ts, String), f64>,
}

impl Meter {
    /// One occurrence of a counter metric.
    pub fn count(&mut self, consumer: &str, metric: Metric, at: DateTime<Utc>) {
        self.add(consumer, metric, at, String::new(), 1.0);
    }

    /// One observation of a histogram metric, in seconds.
    pub fn observe(&mut self, consumer: &str, metric: Metric, at: DateTime<Utc>, seconds: f64) {
        self.add(consumer, metric, at, metric.bucket_for(seconds), 1.0);
    }

    /// A gauge sample; the minute keeps the largest.
    pub fn gauge(&mut self, consumer: &str, metric: Metric, at: DateTime<Utc>, value: f64) {
        let slot = self
            .pending
            .entry((
                consumer.to_owned(),
                metric,
                Ts::from(at).minute(),
                String::new(),
            ))
            .or_insert(value);
        *slot = slot.max(value);
    }

    /// What a claim tells: a new claim or a duplicate (with how late it
    /// came), and a duplicate acknowledged without repeating the effect.
    pub fn claimed(&mut self, consumer: &str, claim: &ClaimDecision, at: DateTime<Utc>) {
        if claim.new {
            self.count(consumer, Metric::NewClaims, at);
        } else {
            self.count(consumer, Metric::DuplicateClaims, at);
            let delay = (at - claim.first_delivery_at).num_milliseconds() as f64 / 1000.0;
            self.observe(consumer, Metric::DuplicateDelaySeconds, at, delay.max(0.0));
        }
        match claim.decision {
            Decision::AlreadyDone { .. } => self.count(consumer, Metric::DedupeSuppressed, at),
            Decision::LeaseExpired => self.count(consumer, Metric::UnknownOutcomes, at),
            Decision::Proceed | Decision::Busy { .. } => {}
        }
    }

    /// A retryable failure the provider answered 429 Too Many Requests,
    /// and whether the retry waits as its `Retry-After` asked (the wait the
    /// consumer chose is the provider's, not its own shorter backoff).
    pub fn rate_limited(
        &mut self,
        consumer: &str,
        waited_for_retry_after: bool,
        at: DateTime<Utc>,
    ) {
        self.count(consumer, Metric::RateLimited, at);
        if waited_for_retry_after {
            self.count(consumer, Metric::RetryAfterHonoured, at);
        }
    }

    fn add(
        &mut self,
        consumer: &str,
        metric: Metric,
        at: DateTime<Utc>,
        bucket: String,
        value: f64,
    ) {
        *self
            .pending
            .entry((consumer.to_owned(), metric, Ts::from(at).minute(), bucket))
            .or_default() += value;
    }

    /// Whether anything waits to be flushed.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Everything counted since the last drain, one sample per row to upsert.
    pub fn drain(&mut self) -> Vec<MetricSample> {
        self.pending
            .drain()
            .map(|((consumer, metric, minute, bucket), value)| MetricSample {
                consumer,
                metric,
                at: minute,
                bucket,
                value,
            })
            .collect()
    }
}
