//! Per-minute consumer metrics (`consumer_metrics`).
//!
//! Consumers accumulate counts in memory and flush them every few seconds, one
//! upsert per (consumer, metric, minute, bucket): that keeps a claim write from
//! ever updating a shared counter row, which would serialise every worker on it.

use idem_domain::Metric;

use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

pub use idem_consumer::MetricSample;

/// One stored row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MetricRow {
    pub consumer: String,
    pub metric: String,
    pub minute: Ts,
    pub bucket: String,
    pub value: f64,
}

impl Store {
    /// Folds samples into their minutes in one transaction: counters and
    /// histogram buckets add, gauges keep the largest value of the minute.
    pub async fn record_metrics(&self, samples: &[MetricSample]) -> StoreResult<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        idem_consumer::write_metrics(tx.conn(), samples).await?;
        tx.commit().await
    }

    /// The rows of one metric for one consumer in `[from, to)`, by minute.
    pub async fn metric_rows(
        &self,
        consumer: &str,
        metric: Metric,
        from: Ts,
        to: Ts,
    ) -> StoreResult<Vec<MetricRow>> {
        const SQL: &str = "SELECT consumer, metric, minute, bucket, value FROM consumer_metrics \
             WHERE consumer = $1 AND metric = $2 AND minute >= $3 AND minute < $4 \
             ORDER BY minute, bucket";
        let rows = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(consumer).bind(metric.name()).bind(from).bind(to)
                .fetch_all(pool).await?
        });
        Ok(rows)
    }

    /// The consumers that have written metrics, in name order, at most
    /// `limit`: one index probe per consumer (a skip scan of the primary
    /// key), however many rows each has written.
    pub async fn consumers(&self, limit: usize) -> StoreResult<Vec<String>> {
        const SQL: &str = "SELECT MIN(consumer) FROM consumer_metrics WHERE consumer > $1";
        let mut names: Vec<String> = Vec::new();
        while names.len() < limit {
            let after = names.last().map_or("", String::as_str);
            let next: Option<String> = dispatch!(&self.pools, pool => {
                sqlx::query_scalar(SQL).bind(after).fetch_one(pool).await?
            });
            match next {
                Some(name) => names.push(name),
                None => break,
            }
        }
        Ok(names)
    }
}
