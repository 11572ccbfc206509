//! Per-minute consumer metrics (`consumer_metrics`).
//!
//! Consumers accumulate counts in memory and flush them every few seconds, one
//! upsert per (consumer, metric, minute, bucket): that keeps a claim write from
//! ever updating a shared counter row, which would serialise every worker on it.

use idem_domain::{Metric, MetricKind, Within};

use crate::facets::Metrics;
use crate::{
    StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::Store,
    ts::Ts,
};

pub use idem_consumer::MetricSample;

impl Metrics<'_> {
    /// Folds samples into their minutes in one transaction: counters and
    /// histogram buckets add, gauges keep the largest value of the minute.
    pub async fn record_metrics(self, samples: &[MetricSample]) -> StoreResult<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        idem_consumer::write_metrics(tx.conn(), samples).await?;
        tx.commit().await
    }

    /// The consumers `within` allows that have written metrics, in name
    /// order, at most `limit`: one index probe per consumer (a skip scan of
    /// the primary key), however many rows each has written.
    pub async fn consumers(self, limit: usize, within: &Within) -> StoreResult<Vec<String>> {
        self.distinct_consumers("consumer_metrics", limit, within)
            .await
    }

    /// The consumers `within` allows that have claims, in name order, at
    /// most `limit`: one probe of the claims' primary key per consumer (a
    /// consumer that claims through an adapter may write no metrics).
    pub async fn claiming_consumers(
        self,
        limit: usize,
        within: &Within,
    ) -> StoreResult<Vec<String>> {
        self.distinct_consumers("claims", limit, within).await
    }

    /// The consumers `within` allows that have dead letters, in name order,
    /// at most `limit`: one probe of `dead_letters_by_key` per consumer (a
    /// consumer may dead-letter without claiming or reporting metrics).
    pub async fn dead_lettering_consumers(
        self,
        limit: usize,
        within: &Within,
    ) -> StoreResult<Vec<String>> {
        self.distinct_consumers("dead_letters", limit, within).await
    }

    /// Every counter's sum per consumer over the minutes in `[from, to)`,
    /// by consumer and metric.
    pub async fn counter_sums(self, from: Ts, to: Ts) -> StoreResult<Vec<(String, Metric, f64)>> {
        self.sums_by_consumer(Metric::ALL, from, to, &Within::Every)
            .await
    }

    /// The sums of `counters` per consumer `within` allows over the minutes
    /// in `[from, to)`, by consumer and metric (the counters among them): a
    /// range of the `(metric, minute)` index, one metric at a time.
    pub async fn sums_by_consumer(
        self,
        counters: &[Metric],
        from: Ts,
        to: Ts,
        within: &Within,
    ) -> StoreResult<Vec<(String, Metric, f64)>> {
        let mut sql = Sql::default();
        let (from, to) = (sql.param(from), sql.param(to));
        sql.push(&format!(
            "SELECT consumer, metric, SUM(value) FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= {from} AND minute < {to}",
            crate::rollup::names_of(counters, &[MetricKind::Counter])
        ));
        sql.and_within(within, "consumer");
        sql.push(" GROUP BY consumer, metric ORDER BY consumer, metric");
        let rows: Vec<(String, String, f64)> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(consumer, name, sum)| Some((consumer, Metric::from_name(&name)?, sum)))
            .collect())
    }
}

impl Store {
    /// The distinct consumers of `table` (whose primary key starts with
    /// `consumer`) that `within` allows, in one statement: for every
    /// consumer, a recursive query that asks the index for the smallest
    /// name after the last one found (a loose index scan, which neither
    /// planner does by itself for `DISTINCT`); for some, one probe each.
    async fn distinct_consumers(
        &self,
        table: &str,
        limit: usize,
        within: &Within,
    ) -> StoreResult<Vec<String>> {
        let mut sql = Sql::default();
        let limit = sql.param(i64::try_from(limit).unwrap_or(i64::MAX));
        sql.text = match within {
            Within::Every => format!(
                "WITH RECURSIVE names(consumer) AS ( \
                   SELECT MIN(consumer) FROM {table} \
                   UNION ALL \
                   SELECT (SELECT MIN(consumer) FROM {table} WHERE consumer > names.consumer) \
                   FROM names WHERE names.consumer IS NOT NULL \
                 ) SELECT consumer FROM names WHERE consumer IS NOT NULL LIMIT {limit}"
            ),
            Within::Only(names) if names.is_empty() => {
                format!("SELECT consumer FROM {table} WHERE 1 = 0 LIMIT {limit}")
            }
            Within::Only(names) => {
                let mut sorted: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
                sorted.sort_unstable();
                sorted.dedup();
                let probes: Vec<String> = sorted
                    .into_iter()
                    .map(|name| {
                        let p = sql.param(name);
                        format!(
                            "SELECT consumer FROM (SELECT consumer FROM {table} \
                             WHERE consumer = {p} LIMIT 1) AS probe"
                        )
                    })
                    .collect();
                format!(
                    "SELECT consumer FROM ({}) AS seen ORDER BY consumer LIMIT {limit}",
                    probes.join(" UNION ALL ")
                )
            }
        };
        let names: Vec<String> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(names)
    }
}
