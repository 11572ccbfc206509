//! Hourly rollups of the per-minute consumer metrics, and the good and valid
//! event counts an SLO is evaluated on.
//!
//! Consumers write `consumer_metrics` one row per minute. A 28-day window over
//! minutes would read 40,320 rows per consumer and metric; over hours it reads
//! 672. Idem rolls up each hour once it has settled (no consumer writes to it
//! any more) and records how far it got (the watermark in `idem_meta`).
//! Readers take whole hours before the watermark from the rollup and the
//! ragged edges — the partial first hour, everything after the watermark —
//! from minutes, so an answer never waits for the rollup and never counts a
//! minute twice.
//!
//! Each hour is rolled up once per consumer and once summed over all
//! consumers (`consumer = ''`), so the dashboards' all-consumer reads take
//! one row per hour and bucket, however many consumers there are.
//!
//! The rollup is a periodic `INSERT … SELECT … GROUP BY` over settled minutes:
//! no claim write ever touches it, so it adds no hot row to the write path.

use chrono::TimeDelta;
use idem_domain::{Metric, MetricKind, le_label, slo::GAUGE_SLICE_BOUNDS};

mod by_consumer;
mod events;
mod read;
mod series;

pub use events::Recovery;

use crate::facets::Metrics;
use crate::{
    StoreResult,
    dialect::{Backend, dispatch},
    store::Store,
    ts::Ts,
};

/// `idem_meta` name of the instant up to which hours are rolled up.
pub const ROLLUP_WATERMARK: &str = "rollup_hourly_through";

/// How long after a minute ends consumers may still write to it (they flush
/// every few seconds); an hour is rolled up only this long after it ends.
pub const ROLLUP_SETTLE: TimeDelta = TimeDelta::minutes(5);

/// The length of the blocks of `consumer_metrics_6h`, which long charts
/// (drawn in six-hour or daily intervals) read instead of hours.
const BLOCK: TimeDelta = TimeDelta::hours(6);

/// The statement that rewrites the six-hour blocks holding hours in
/// `[$1, $2)` from their hourly rows (`$1` is a block's start), for one
/// dialect's expression of an hour's block.
fn block_sql(block_of_hour: &str) -> String {
    format!(
        "INSERT INTO consumer_metrics_6h (consumer, metric, hour, bucket, value) \
         SELECT consumer, metric, {block_of_hour}, bucket, SUM(value) FROM consumer_metrics_hourly \
         WHERE hour >= $1 AND hour < $2 \
         GROUP BY consumer, metric, {block_of_hour}, bucket \
         ON CONFLICT (consumer, metric, hour, bucket) DO UPDATE SET value = excluded.value"
    )
}

/// The start of the `bin`-long interval (a whole number of hours, aligned on
/// the epoch) that a rolled-up row's `hour` falls in, in a dialect's SQL.
fn start_of_bin<S, P>(dialect: &Backend<S, P>, bin: TimeDelta) -> String {
    match dialect {
        Backend::Sqlite(_) => {
            let micros = bin.num_microseconds().unwrap_or(i64::MAX);
            format!("(hour / {micros}) * {micros}")
        }
        // date_bin (Postgres 14+): epoch arithmetic in `numeric` cost twice
        // the read itself.
        Backend::Postgres(_) => format!(
            "date_bin('{} seconds', hour, TIMESTAMPTZ 'epoch')",
            bin.num_seconds()
        ),
    }
}

/// The most hours one rollup transaction covers, so catching up on a month
/// of history is a series of short transactions, not one long one.
const CHUNK: TimeDelta = TimeDelta::hours(24);

/// The bucket a gauge reading falls in: the smallest bound at or above it.
fn gauge_bucket_sql() -> String {
    let mut sql = String::from("CASE");
    for bound in GAUGE_SLICE_BOUNDS {
        sql += &format!(" WHEN value <= {bound} THEN '{}'", le_label(*bound));
    }
    sql + " ELSE '+Inf' END"
}

/// The stored names of `metrics`, as an SQL list (empty when there are
/// none). The names are Idem's own constants, never input.
fn names<'a>(metrics: impl IntoIterator<Item = &'a Metric>) -> String {
    metrics
        .into_iter()
        .map(|m| format!("'{}'", m.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The stored names of those of `metrics` of the given kinds (see [`names`]).
pub(crate) fn names_of(metrics: &[Metric], kinds: &[MetricKind]) -> String {
    names(metrics.iter().filter(|m| kinds.contains(&m.kind())))
}

/// The consumer of rolled-up rows that hold the sum over every consumer
/// (consumer names are never empty).
pub const ALL_CONSUMERS: &str = "";

/// The rollup statements for one dialect's hour truncation: counters and
/// histogram buckets summed, gauges counted into slices, each once per
/// consumer and once over all consumers (`consumer = ''`).
fn rollup_sql(hour_of_minute: &str) -> Vec<String> {
    let upsert =
        "ON CONFLICT (consumer, metric, hour, bucket) DO UPDATE SET value = excluded.value";
    let mut statements = Vec::new();
    // A row a consumer wrote without a name would collide with the sum over
    // all: it counts only in the sum (as it does when minutes are read).
    for (consumer, group, named) in [
        ("consumer", "consumer, ", " AND consumer <> ''"),
        ("''", "", ""),
    ] {
        // Counters and histogram buckets: the hour's sum.
        statements.push(format!(
            "INSERT INTO consumer_metrics_hourly (consumer, metric, hour, bucket, value) \
             SELECT {consumer}, metric, {hour_of_minute}, bucket, SUM(value) FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= $1 AND minute < $2{named} \
             GROUP BY {group}metric, {hour_of_minute}, bucket {upsert}",
            names_of(Metric::ALL, &[MetricKind::Counter, MetricKind::Histogram])
        ));
        // Gauges: how many consumer-minutes read into each slice bucket.
        statements.push(format!(
            "INSERT INTO consumer_metrics_hourly (consumer, metric, hour, bucket, value) \
             SELECT {consumer}, metric, {hour_of_minute}, {bucket}, CAST(COUNT(*) AS DOUBLE PRECISION) \
             FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= $1 AND minute < $2{named} \
             GROUP BY {group}metric, {hour_of_minute}, {bucket} {upsert}",
            names_of(Metric::ALL, &[MetricKind::Gauge]),
            bucket = gauge_bucket_sql(),
        ));
    }
    statements
}

impl Metrics<'_> {
    /// The instant up to which hours are rolled up, if any are.
    pub async fn rollup_watermark(self) -> StoreResult<Option<Ts>> {
        Ok(self
            .system()
            .meta(ROLLUP_WATERMARK)
            .await?
            .and_then(|v| v.parse().ok())
            .and_then(Ts::from_micros))
    }

    /// Rolls up every settled hour past the watermark, a day per transaction,
    /// and returns how many hours it covered. Idempotent: rolling up an hour
    /// again replaces its rows with the same sums.
    pub async fn roll_up_hours(self, now: Ts) -> StoreResult<i64> {
        let settled = (now - ROLLUP_SETTLE).hour();
        let mut from = match self.rollup_watermark().await? {
            Some(watermark) => watermark,
            None => match self.earliest_metric_minute().await? {
                Some(first) => first.hour(),
                // Nothing written yet: start from the first minute that is.
                None => return Ok(0),
            },
        };
        let statements = match &self.pools {
            Backend::Sqlite(_) => rollup_sql("(minute / 3600000000) * 3600000000"),
            Backend::Postgres(_) => rollup_sql("date_trunc('hour', minute, 'UTC')"),
        };
        let blocks = block_sql(&start_of_bin(&self.pools, BLOCK));
        let mut hours = 0;
        while from < settled {
            let to = (from + CHUNK).min(settled);
            let mut tx = self.begin().await?;
            for sql in &statements {
                dispatch!(&mut tx.inner, tx => {
                    sqlx::query(sql).bind(from).bind(to).execute(&mut **tx).await?;
                });
            }
            // The blocks these hours fall in, from all their hours so far.
            let block_start = from.floor(BLOCK);
            dispatch!(&mut tx.inner, tx => {
                sqlx::query(&blocks).bind(block_start).bind(to).execute(&mut **tx).await?;
            });
            const MARK: &str = "INSERT INTO idem_meta (name, value) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value";
            dispatch!(&mut tx.inner, tx => {
                sqlx::query(MARK).bind(ROLLUP_WATERMARK).bind(to.micros().to_string())
                    .execute(&mut **tx).await?;
            });
            tx.commit().await?;
            hours += (to.0 - from.0).num_hours();
            from = to;
        }
        Ok(hours)
    }

    /// Forgets how far the rollup got, so its next run rolls every hour up
    /// again (after history was written behind the watermark, e.g. by `idem-tools seed`).
    pub async fn reset_rollups(self) -> StoreResult<()> {
        const SQL: &str = "DELETE FROM idem_meta WHERE name = $1";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(ROLLUP_WATERMARK).execute(pool).await?;
        });
        Ok(())
    }
}

impl Store {
    /// The first minute any metric was written for (one index probe per metric).
    async fn earliest_metric_minute(&self) -> StoreResult<Option<Ts>> {
        const SQL: &str = "SELECT MIN(minute) FROM consumer_metrics WHERE metric = $1";
        let mut earliest: Option<Ts> = None;
        for metric in Metric::ALL {
            let first: Option<Ts> = dispatch!(&self.pools, pool => {
                sqlx::query_scalar(SQL).bind(metric.name()).fetch_one(pool).await?
            });
            earliest = match (earliest, first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(earliest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_reading_falls_in_the_smallest_bound_at_or_above_it() {
        let sql = gauge_bucket_sql();
        assert!(sql.starts_with("CASE WHEN value <= 1 THEN '1' WHEN value <= 5 THEN '5'"));
        assert!(sql.ends_with("WHEN value <= 3600 THEN '3600' ELSE '+Inf' END"));
    }
}
