//! The per-minute consumer metrics of the data contract (`consumer_metrics`).
//!
//! One row per (consumer, metric, minute, bucket). Counters add up within a
//! minute, gauges keep the largest sample of the minute, and histograms keep
//! one row per bucket holding the number of observations that fell in that
//! bucket (not cumulative): an observation lands in the smallest bucket whose
//! upper bound `le` is at least the value.

use serde::{Deserialize, Serialize};

use crate::histogram::le_label;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

macro_rules! metrics {
    ($( $(#[$meta:meta])* $variant:ident => $name:literal, $kind:ident ),+ $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Metric { $( $(#[$meta])* $variant ),+ }

        impl Metric {
            pub const ALL: &'static [Metric] = &[$(Metric::$variant),+];

            /// The stored name (column `metric`).
            pub const fn name(self) -> &'static str {
                match self { $(Metric::$variant => $name),+ }
            }

            pub const fn kind(self) -> MetricKind {
                match self { $(Metric::$variant => MetricKind::$kind),+ }
            }

            pub fn from_name(name: &str) -> Option<Metric> {
                match name { $($name => Some(Metric::$variant),)+ _ => None }
            }
        }
    };
}

metrics! {
    /// Messages handed to the consumer (first deliveries and redeliveries).
    Deliveries => "deliveries", Counter,
    /// Deliveries whose key was not claimed before.
    NewClaims => "new_claims", Counter,
    /// Deliveries whose key was already claimed.
    DuplicateClaims => "duplicate_claims", Counter,
    /// Duplicates acknowledged without repeating the effect.
    DedupeSuppressed => "dedupe_suppressed", Counter,
    /// Effects the provider confirmed.
    Sends => "sends", Counter,
    /// Failures worth retrying: 429, 503, a timeout before the request went out.
    RetryableFailures => "retryable_failures", Counter,
    /// Retryable failures the provider answered 429 Too Many Requests.
    RateLimited => "rate_limited", Counter,
    /// Retries delayed as the provider's `Retry-After` asked (longer than
    /// the consumer's own backoff).
    RetryAfterHonoured => "retry_after_honoured", Counter,
    PermanentFailures => "permanent_failures", Counter,
    UnknownOutcomes => "unknown_outcomes", Counter,
    DeadLetters => "dead_letters", Counter,
    Replays => "replays", Counter,
    /// Claim transactions that rolled back (serialization failure, deadlock, crash).
    TransactionFailures => "transaction_failures", Counter,
    /// Age of the oldest message waiting in the consumer's queue, in seconds.
    QueueOldestAgeSeconds => "queue_oldest_age_seconds", Gauge,
    QueueDepth => "queue_depth", Gauge,
    /// Age of the oldest unpublished outbox row, in seconds.
    OutboxOldestAgeSeconds => "outbox_oldest_age_seconds", Gauge,
    /// For each duplicate: seconds since the key's first delivery.
    DuplicateDelaySeconds => "duplicate_delay_seconds", Histogram,
    /// From a key's first delivery to its recorded outcome, in seconds.
    OutcomeLatencySeconds => "outcome_latency_seconds", Histogram,
}

/// A FIFO queue's deduplication window (SQS FIFO: five minutes). Duplicates
/// arriving later than this are invisible to the queue's own dedupe.
pub const FIFO_DEDUPE_WINDOW_SECONDS: f64 = 300.0;

impl Metric {
    /// Upper bounds of the histogram buckets, in seconds; the last is +Inf.
    pub const fn buckets(self) -> &'static [f64] {
        match self {
            Metric::DuplicateDelaySeconds => &[
                1.0,
                10.0,
                30.0,
                60.0,
                120.0,
                FIFO_DEDUPE_WINDOW_SECONDS,
                600.0,
                1800.0,
                3600.0,
                21600.0,
                86400.0,
                f64::INFINITY,
            ],
            Metric::OutcomeLatencySeconds => &[
                0.1,
                0.5,
                1.0,
                5.0,
                15.0,
                60.0,
                300.0,
                900.0,
                3600.0,
                f64::INFINITY,
            ],
            _ => &[],
        }
    }

    /// The `bucket` column for an observation of `value` seconds: the
    /// Prometheus spelling of the smallest upper bound `le >= value`.
    /// Counters and gauges use the empty string.
    pub fn bucket_for(self, value: f64) -> String {
        match self.buckets().iter().find(|le| value <= **le) {
            Some(le) => le_label(*le),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observation_lands_in_the_smallest_bucket_that_holds_it() {
        let m = Metric::DuplicateDelaySeconds;
        assert_eq!(m.bucket_for(0.2), "1");
        assert_eq!(m.bucket_for(300.0), "300");
        assert_eq!(m.bucket_for(360.0), "600");
        assert_eq!(m.bucket_for(10.0 * 86400.0), "+Inf");
        assert_eq!(Metric::OutcomeLatencySeconds.bucket_for(0.3), "0.5");
        assert_eq!(Metric::Deliveries.bucket_for(5.0), "");
    }

    #[test]
    fn every_metric_name_is_unique_and_parses_back() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(*m));
        }
    }
}
