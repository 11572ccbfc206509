//! Per-minute consumer metrics (`consumer_metrics`).
//!
//! Consumers accumulate counts in memory and flush them every few seconds, one
//! upsert per (consumer, metric, minute, bucket): that keeps a claim write from
//! ever updating a shared counter row, which would serialise every worker on it.

use idem_domain::{Metric, MetricKind};

use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

pub use idem_consumer::MetricSample;

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

    /// The consumers that have written metrics, in name order, at most
    /// `limit`: one index probe per consumer (a skip scan of the primary
    /// key), however many rows each has written.
    pub async fn consumers(&self, limit: usize) -> StoreResult<Vec<String>> {
        self.distinct_consumers("consumer_metrics", limit).await
    }

    /// The consumers that have claims, in name order, at most `limit`: one
    /// probe of the claims' primary key per consumer (a consumer that
    /// claims through an adapter may write no metrics).
    pub async fn claiming_consumers(&self, limit: usize) -> StoreResult<Vec<String>> {
        self.distinct_consumers("claims", limit).await
    }

    /// The distinct consumers of `table` (whose primary key starts with
    /// `consumer`), in one statement: a recursive query that asks the index
    /// for the smallest name after the last one found (a loose index scan,
    /// which neither planner does by itself for `DISTINCT`).
    async fn distinct_consumers(&self, table: &str, limit: usize) -> StoreResult<Vec<String>> {
        let sql = format!(
            "WITH RECURSIVE names(consumer) AS ( \
               SELECT MIN(consumer) FROM {table} \
               UNION ALL \
               SELECT (SELECT MIN(consumer) FROM {table} WHERE consumer > names.consumer) \
               FROM names WHERE names.consumer IS NOT NULL \
             ) SELECT consumer FROM names WHERE consumer IS NOT NULL LIMIT $1"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let names: Vec<String> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(&sql).bind(limit).fetch_all(pool).await?
        });
        Ok(names)
    }

    /// Every counter's sum per consumer over the minutes in `[from, to)`,
    /// by consumer and metric.
    pub async fn counter_sums(&self, from: Ts, to: Ts) -> StoreResult<Vec<(String, Metric, f64)>> {
        self.sums_by_consumer(Metric::ALL, from, to).await
    }

    /// The sums of `counters` per consumer over the minutes in `[from, to)`,
    /// by consumer and metric (the counters among them): a range of the
    /// `(metric, minute)` index, one metric at a time.
    pub async fn sums_by_consumer(
        &self,
        counters: &[Metric],
        from: Ts,
        to: Ts,
    ) -> StoreResult<Vec<(String, Metric, f64)>> {
        let sql = format!(
            "SELECT consumer, metric, SUM(value) FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= $1 AND minute < $2 \
             GROUP BY consumer, metric ORDER BY consumer, metric",
            crate::rollup::names_of(counters, &[MetricKind::Counter])
        );
        let rows: Vec<(String, String, f64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(from).bind(to).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(consumer, name, sum)| Some((consumer, Metric::from_name(&name)?, sum)))
            .collect())
    }
}
