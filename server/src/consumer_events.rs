//! `idem_consumer_events_total{consumer,event}`: the consumers' per-minute
//! counters (`consumer_metrics`) as Prometheus counters.
//!
//! A Prometheus counter counts from its process's start and only goes up.
//! The consumers are the processes that count, and they write per-minute
//! rows, not totals; so each Idem replica keeps running totals from its own
//! start, and each scrape adds the minutes that settled since the last one
//! (a minute settles [`ROLLUP_SETTLE`] after it ends, when consumers no
//! longer flush into it). A restart starts the totals again at zero, which
//! `rate()` and `increase()` expect of a counter. Every replica reads the
//! same rows, so aggregate replicas with `max`, never `sum`.

use std::collections::BTreeMap;

use idem_domain::Metric;
use idem_store::{ROLLUP_SETTLE, Store, StoreError, Ts};

/// Each replica's running totals per consumer and counter.
#[derive(Debug, Default)]
pub struct EventTotals {
    inner: tokio::sync::Mutex<Totals>,
}

#[derive(Debug, Default)]
struct Totals {
    /// The minute up to which rows are counted (exclusive); `None` before
    /// the first scrape, which starts the count.
    through: Option<Ts>,
    counts: BTreeMap<(String, Metric), f64>,
}

impl EventTotals {
    /// Adds the minutes that settled since the last call, and returns the
    /// totals, by consumer and counter. Two scrapes at once take turns, so
    /// no minute is added twice.
    pub async fn advance(
        &self,
        store: &Store,
        now: Ts,
    ) -> Result<Vec<(String, Metric, f64)>, StoreError> {
        let mut totals = self.inner.lock().await;
        let settled = Ts::from(now.0 - ROLLUP_SETTLE).minute();
        let from = *totals.through.get_or_insert(settled);
        if settled > from {
            for (consumer, metric, sum) in store.metrics().counter_sums(from, settled).await? {
                *totals.counts.entry((consumer, metric)).or_default() += sum;
            }
            totals.through = Some(settled);
        }
        Ok(totals
            .counts
            .iter()
            .map(|((consumer, metric), total)| (consumer.clone(), *metric, *total))
            .collect())
    }
}
