//! Counters that adapters keep outside the consumer's transaction
//! (`adapter_counters`), sampled into `consumer_metrics`.
//!
//! A worker that claims with `INSERT … ON CONFLICT DO NOTHING` and rolls
//! back when no row comes back takes every trace of its duplicate with it —
//! except a sequence, which Postgres never rolls back. The `processed_jobs`
//! and `processed_events` adapters bump one sequence per delivery and one per
//! duplicate and register them here; Idem adds what each sequence gained
//! since the last sample to the minute it samples in. SQLite has neither
//! sequences nor adapters: there the table only holds declarations that a
//! consumer's duplicates cannot be observed.

use idem_domain::{Metric, Within};

use crate::facets::Metrics;
use crate::{
    StoreResult,
    dialect::{Backend, dispatch},
    ts::Ts,
};

/// What one sample of the registered sequences gained, added to the
/// sampling minute in one statement. Each row is locked while it is read
/// and moved on, so two replicas sampling at once count every increment
/// once; a sequence that went backwards (dropped and created again by a
/// reinstall) counts from zero; a sequence that no longer exists (adapter
/// detached) is left alone.
const SAMPLE: &str = "\
WITH locked AS (
    SELECT consumer, metric, sampled, to_regclass(sequence_name) AS seq
    FROM adapter_counters
    WHERE sequence_name IS NOT NULL AND to_regclass(sequence_name) IS NOT NULL
    FOR UPDATE
), now_at AS (
    SELECT consumer, metric, sampled, coalesce(pg_sequence_last_value(seq), 0) AS value
    FROM locked
), gained AS (
    SELECT consumer, metric, value,
           CASE WHEN value >= sampled THEN value - sampled ELSE value END AS gain
    FROM now_at WHERE value <> sampled
), counted AS (
    INSERT INTO consumer_metrics (consumer, metric, minute, bucket, value)
    SELECT consumer, metric, $1, '', gain FROM gained WHERE gain > 0
    ON CONFLICT (consumer, metric, minute, bucket)
    DO UPDATE SET value = consumer_metrics.value + excluded.value
)
UPDATE adapter_counters AS a SET sampled = g.value
FROM gained AS g WHERE a.consumer = g.consumer AND a.metric = g.metric";

impl Metrics<'_> {
    /// Adds what every registered adapter sequence gained since the last
    /// sample to `at`'s minute; how many counters moved. Nothing to do on
    /// SQLite.
    pub async fn sample_adapter_counters(self, at: Ts) -> StoreResult<u64> {
        match &self.pools {
            Backend::Sqlite(_) => Ok(0),
            Backend::Postgres(pool) => {
                let done = sqlx::query(SAMPLE).bind(at.minute()).execute(pool).await?;
                Ok(done.rows_affected())
            }
        }
    }

    /// The consumers `within` allows whose `metric` an adapter has declared
    /// it cannot observe (a registration without a sequence), in name order.
    pub async fn unobservable(self, metric: Metric, within: &Within) -> StoreResult<Vec<String>> {
        let mut sql = crate::sql::Sql::default();
        let m = sql.param(metric.name());
        sql.push(&format!(
            "SELECT consumer FROM adapter_counters WHERE metric = {m} AND sequence_name IS NULL"
        ));
        sql.and_within(within, "consumer");
        sql.push(" ORDER BY consumer");
        let names = dispatch!(&self.pools, pool => {
            crate::sql::bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(names)
    }

    /// Declares that `consumer`'s `metric` cannot be observed (or, with a
    /// sequence, where its running count is kept): what an adapter's
    /// install script does in SQL, for tests and tools.
    pub async fn register_adapter_counter(
        self,
        consumer: &str,
        metric: Metric,
        sequence: Option<&str>,
    ) -> StoreResult<()> {
        const SQL: &str = "INSERT INTO adapter_counters (consumer, metric, sequence_name) \
             VALUES ($1, $2, $3) ON CONFLICT (consumer, metric) \
             DO UPDATE SET sequence_name = excluded.sequence_name";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(consumer).bind(metric.name()).bind(sequence)
                .execute(pool).await?;
        });
        Ok(())
    }
}
