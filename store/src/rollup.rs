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
//! The rollup is a periodic `INSERT … SELECT … GROUP BY` over settled minutes:
//! no claim write ever touches it, so it adds no hot row to the write path.

use std::collections::HashMap;

use chrono::TimeDelta;
use idem_domain::{
    Metric, MetricKind, le_label,
    slo::{Events, GAUGE_SLICE_BOUNDS, Indicator},
};

use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

/// `idem_meta` name of the instant up to which hours are rolled up.
pub const ROLLUP_WATERMARK: &str = "rollup_hourly_through";

/// How long after a minute ends consumers may still write to it (they flush
/// every few seconds); an hour is rolled up only this long after it ends.
pub const ROLLUP_SETTLE: TimeDelta = TimeDelta::minutes(5);

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

/// The stored names of every metric of the given kinds, as an SQL list. The
/// names are Idem's own constants, never input.
fn names_of(kinds: &[MetricKind]) -> String {
    Metric::ALL
        .iter()
        .filter(|m| kinds.contains(&m.kind()))
        .map(|m| format!("'{}'", m.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The two rollup statements for one dialect's hour truncation.
fn rollup_sql(hour_of_minute: &str) -> [String; 2] {
    let upsert =
        "ON CONFLICT (consumer, metric, hour, bucket) DO UPDATE SET value = excluded.value";
    [
        // Counters and histogram buckets: the hour's sum.
        format!(
            "INSERT INTO consumer_metrics_hourly (consumer, metric, hour, bucket, value) \
             SELECT consumer, metric, {hour_of_minute}, bucket, SUM(value) FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= $1 AND minute < $2 \
             GROUP BY consumer, metric, {hour_of_minute}, bucket {upsert}",
            names_of(&[MetricKind::Counter, MetricKind::Histogram])
        ),
        // Gauges: how many consumer-minutes read into each slice bucket.
        format!(
            "INSERT INTO consumer_metrics_hourly (consumer, metric, hour, bucket, value) \
             SELECT consumer, metric, {hour_of_minute}, {bucket}, CAST(COUNT(*) AS DOUBLE PRECISION) \
             FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= $1 AND minute < $2 \
             GROUP BY consumer, metric, {hour_of_minute}, {bucket} {upsert}",
            names_of(&[MetricKind::Gauge]),
            bucket = gauge_bucket_sql(),
        ),
    ]
}

/// Per-bucket sums of one metric over a span (`""` for counters).
type BucketSums = HashMap<String, f64>;

impl Store {
    /// The instant up to which hours are rolled up, if any are.
    pub async fn rollup_watermark(&self) -> StoreResult<Option<Ts>> {
        Ok(self
            .meta(ROLLUP_WATERMARK)
            .await?
            .and_then(|v| v.parse().ok())
            .and_then(Ts::from_micros))
    }

    /// Rolls up every settled hour past the watermark, a day per transaction,
    /// and returns how many hours it covered. Idempotent: rolling up an hour
    /// again replaces its rows with the same sums.
    pub async fn roll_up_hours(&self, now: Ts) -> StoreResult<i64> {
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
            crate::dialect::Dialect::Sqlite(_) => rollup_sql("(minute / 3600000000) * 3600000000"),
            crate::dialect::Dialect::Postgres(_) => rollup_sql("date_trunc('hour', minute, 'UTC')"),
        };
        let mut hours = 0;
        while from < settled {
            let to = (from + CHUNK).min(settled);
            let mut tx = self.begin().await?;
            for sql in &statements {
                dispatch!(&mut tx.inner, tx => {
                    sqlx::query(sql).bind(from).bind(to).execute(&mut **tx).await?;
                });
            }
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
    /// again (after history was written behind the watermark, e.g. by `idem seed`).
    pub async fn reset_rollups(&self) -> StoreResult<()> {
        const SQL: &str = "DELETE FROM idem_meta WHERE name = $1";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(ROLLUP_WATERMARK).execute(pool).await?;
        });
        Ok(())
    }

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

    /// Good and valid events for an SLO's indicator in `[from, to)`.
    pub async fn indicator_events(
        &self,
        indicator: &Indicator,
        from: Ts,
        to: Ts,
    ) -> StoreResult<Events> {
        let total = |sums: &BucketSums| sums.values().sum::<f64>();
        Ok(match *indicator {
            Indicator::Counters { valid, bad } => {
                let valid = total(&self.bucket_sums(valid, from, to).await?);
                let bad = total(&self.bucket_sums(bad, from, to).await?);
                Events::new(valid - bad, valid)
            }
            Indicator::GaugeSlices {
                gauge: metric,
                at_most_seconds,
            }
            | Indicator::Histogram {
                histogram: metric,
                at_most_seconds,
            } => {
                let sums = self.bucket_sums(metric, from, to).await?;
                let good = sums
                    .iter()
                    .filter(|(bucket, _)| bucket_bound(bucket) <= at_most_seconds)
                    .map(|(_, v)| v)
                    .sum();
                Events::new(good, total(&sums))
            }
            Indicator::UnknownResolved { within_seconds } => {
                const SQL: &str = "SELECT COUNT(*) FROM audit_log \
                     WHERE at >= $1 AND at < $2 AND result = 'ok' AND action LIKE 'resolve:%' \
                     AND recovery_seconds <= $3";
                let valid = total(&self.bucket_sums(Metric::UnknownOutcomes, from, to).await?);
                let good: i64 = dispatch!(&self.pools, pool => {
                    sqlx::query_scalar(SQL).bind(from).bind(to).bind(within_seconds)
                        .fetch_one(pool).await?
                });
                Events::new(good as f64, valid)
            }
            Indicator::Recovery { within_seconds } => {
                const SQL: &str = "SELECT COUNT(*), \
                     COALESCE(SUM(CASE WHEN recovery_seconds <= $3 THEN 1 ELSE 0 END), 0) \
                     FROM audit_log WHERE at >= $1 AND at < $2 AND result = 'ok' \
                     AND recovery_seconds IS NOT NULL";
                let (valid, good): (i64, i64) = dispatch!(&self.pools, pool => {
                    sqlx::query_as(SQL).bind(from).bind(to).bind(within_seconds)
                        .fetch_one(pool).await?
                });
                Events::new(good as f64, valid as f64)
            }
        })
    }

    /// Per-bucket sums of one metric in `[from, to)`: whole rolled-up hours
    /// from the rollup, the rest from minutes. Gauge minutes are counted into
    /// the same slice buckets the rollup uses.
    async fn bucket_sums(&self, metric: Metric, from: Ts, to: Ts) -> StoreResult<BucketSums> {
        let watermark = self.rollup_watermark().await?;
        let hours_from = from.next_hour();
        let hours_to = watermark.map_or(hours_from, |w| w.min(to.hour()));
        let mut sums = BucketSums::new();
        if hours_from < hours_to {
            self.add_hour_sums(&mut sums, metric, hours_from, hours_to)
                .await?;
            self.add_minute_sums(&mut sums, metric, from, hours_from)
                .await?;
            self.add_minute_sums(&mut sums, metric, hours_to, to)
                .await?;
        } else {
            self.add_minute_sums(&mut sums, metric, from, to).await?;
        }
        Ok(sums)
    }

    async fn add_hour_sums(
        &self,
        sums: &mut BucketSums,
        metric: Metric,
        from: Ts,
        to: Ts,
    ) -> StoreResult<()> {
        const SQL: &str = "SELECT bucket, SUM(value) FROM consumer_metrics_hourly \
             WHERE metric = $1 AND hour >= $2 AND hour < $3 GROUP BY bucket";
        let rows: Vec<(String, f64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(metric.name()).bind(from).bind(to).fetch_all(pool).await?
        });
        merge(sums, rows);
        Ok(())
    }

    async fn add_minute_sums(
        &self,
        sums: &mut BucketSums,
        metric: Metric,
        from: Ts,
        to: Ts,
    ) -> StoreResult<()> {
        if from >= to {
            return Ok(());
        }
        let sql = match metric.kind() {
            MetricKind::Gauge => format!(
                "SELECT {} AS slice, CAST(COUNT(*) AS DOUBLE PRECISION) FROM consumer_metrics \
                 WHERE metric = $1 AND minute >= $2 AND minute < $3 GROUP BY slice",
                gauge_bucket_sql()
            ),
            MetricKind::Counter | MetricKind::Histogram => {
                "SELECT bucket, SUM(value) FROM consumer_metrics \
                 WHERE metric = $1 AND minute >= $2 AND minute < $3 GROUP BY bucket"
                    .to_owned()
            }
        };
        let rows: Vec<(String, f64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(metric.name()).bind(from).bind(to).fetch_all(pool).await?
        });
        merge(sums, rows);
        Ok(())
    }
}

fn merge(sums: &mut BucketSums, rows: Vec<(String, f64)>) {
    for (bucket, value) in rows {
        *sums.entry(bucket).or_default() += value;
    }
}

/// The upper bound a bucket label stands for (`+Inf` and unknown labels: infinity).
fn bucket_bound(label: &str) -> f64 {
    label.parse().unwrap_or(f64::INFINITY)
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

    #[test]
    fn bucket_labels_read_back_as_bounds() {
        assert_eq!(bucket_bound("300"), 300.0);
        assert_eq!(bucket_bound("0.5"), 0.5);
        assert_eq!(bucket_bound("+Inf"), f64::INFINITY);
    }
}
