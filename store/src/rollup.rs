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
            names_of(&[MetricKind::Counter, MetricKind::Histogram])
        ));
        // Gauges: how many consumer-minutes read into each slice bucket.
        statements.push(format!(
            "INSERT INTO consumer_metrics_hourly (consumer, metric, hour, bucket, value) \
             SELECT {consumer}, metric, {hour_of_minute}, {bucket}, CAST(COUNT(*) AS DOUBLE PRECISION) \
             FROM consumer_metrics \
             WHERE metric IN ({}) AND minute >= $1 AND minute < $2{named} \
             GROUP BY {group}metric, {hour_of_minute}, {bucket} {upsert}",
            names_of(&[MetricKind::Gauge]),
            bucket = gauge_bucket_sql(),
        ));
    }
    statements
}

/// Per-bucket sums of one metric over a span (`""` for counters; for gauges,
/// consumer-minutes per slice bound).
pub type BucketSums = HashMap<String, f64>;

/// Rows of the audit log read per answer at most: operators' recoveries
/// are human actions, a few a day; this only bounds a pathological log.
const RECOVERY_ROWS: i64 = 100_000;

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

    /// Each metric's per-bucket sums in each interval `[starts[i],
    /// starts[i + 1])` (the last ends at `to`), for one consumer or all,
    /// with the watermark read once for all of them. Intervals need not be
    /// whole hours: an hour an interval starts inside is read in minutes.
    pub async fn metric_buckets(
        &self,
        metrics: &[Metric],
        starts: &[Ts],
        to: Ts,
        consumer: Option<&str>,
    ) -> StoreResult<HashMap<Metric, Vec<BucketSums>>> {
        let watermark = self.rollup_watermark().await?;
        let mut all = HashMap::with_capacity(metrics.len());
        for metric in metrics {
            let series = self
                .metric_series(*metric, starts, to, watermark, consumer)
                .await?;
            all.insert(*metric, series.sums_by_interval(starts, to));
        }
        Ok(all)
    }

    /// Successful operator actions that recovered an unknown outcome or a
    /// dead letter in `[from, to)`: when, and how many seconds after the
    /// problem began. Oldest first, for one consumer or all.
    pub async fn recoveries(
        &self,
        from: Ts,
        to: Ts,
        consumer: Option<&str>,
    ) -> StoreResult<Vec<Recovery>> {
        let mut sql = String::from(
            "SELECT at, action, recovery_seconds FROM audit_log \
             WHERE at >= $1 AND at < $2 AND result = 'ok' AND recovery_seconds IS NOT NULL",
        );
        if consumer.is_some() {
            sql += " AND consumer = $4";
        }
        sql += " ORDER BY at LIMIT $3";
        let rows: Vec<(Ts, String, f64)> = dispatch!(&self.pools, pool => {
            let query = sqlx::query_as(&sql).bind(from).bind(to).bind(RECOVERY_ROWS);
            match consumer {
                Some(consumer) => query.bind(consumer),
                None => query,
            }
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(at, action, seconds)| Recovery {
                at,
                resolved_unknown: action.starts_with("resolve:"),
                seconds,
            })
            .collect())
    }

    /// Good and valid events for an indicator in each `step`-long bucket of
    /// `[from, to)` (the last may be shorter), oldest first. `from` and `step`
    /// should be whole hours, so no rolled-up hour straddles two buckets.
    pub async fn indicator_buckets(
        &self,
        indicator: &Indicator,
        from: Ts,
        to: Ts,
        step: TimeDelta,
    ) -> StoreResult<Vec<(Ts, Events)>> {
        let mut starts = Vec::new();
        let mut at = from;
        while at < to {
            starts.push(at);
            at = at + step;
        }
        let watermark = self.rollup_watermark().await?;
        let mut series = HashMap::new();
        for metric in indicator_metrics(indicator) {
            series.insert(
                metric,
                self.metric_series(metric, &[from], to, watermark, None)
                    .await?,
            );
        }
        let recoveries = match indicator {
            Indicator::UnknownResolved { .. } | Indicator::Recovery { .. } => {
                self.recoveries(from, to, None).await?
            }
            _ => Vec::new(),
        };
        Ok(starts
            .into_iter()
            .map(|start| {
                let end = (start + step).min(to);
                let events = events_of(indicator, &series, &recoveries, &[start], end);
                (start, events[0])
            })
            .collect())
    }

    /// Good and valid events for an SLO's indicator in `[from, to)`.
    pub async fn indicator_events(
        &self,
        indicator: &Indicator,
        from: Ts,
        to: Ts,
    ) -> StoreResult<Events> {
        let events = self
            .indicator_events_since(&[indicator], &[from], to)
            .await?;
        Ok(events[0][0])
    }

    /// Good and valid events for each indicator in `[from, to)` for each of
    /// `froms` (SLO windows and their tiers' spans, all ending now). Each
    /// metric is read once for all of them, at the resolution the spans need.
    pub async fn indicator_events_since(
        &self,
        indicators: &[&Indicator],
        froms: &[Ts],
        to: Ts,
    ) -> StoreResult<Vec<Vec<Events>>> {
        let watermark = self.rollup_watermark().await?;
        let mut series: HashMap<Metric, MetricSeries> = HashMap::new();
        for indicator in indicators {
            for metric in indicator_metrics(indicator) {
                if let std::collections::hash_map::Entry::Vacant(slot) = series.entry(metric) {
                    slot.insert(
                        self.metric_series(metric, froms, to, watermark, None)
                            .await?,
                    );
                }
            }
        }
        let reads_audit = indicators.iter().any(|i| {
            matches!(
                i,
                Indicator::UnknownResolved { .. } | Indicator::Recovery { .. }
            )
        });
        let recoveries = match froms.iter().min() {
            Some(from) if reads_audit => self.recoveries(*from, to, None).await?,
            _ => Vec::new(),
        };
        Ok(indicators
            .iter()
            .map(|indicator| events_of(indicator, &series, &recoveries, froms, to))
            .collect())
    }

    /// One metric's per-bucket sums from the earliest of `froms` to `to`, at
    /// the resolution sums over `[from, to)` for each `from` need: whole
    /// rolled-up hours as one point each, and minutes in every hour a `from`
    /// falls inside and after the watermark. Gauge minutes are counted into
    /// the same slice buckets the rollup uses. Callers read the watermark once
    /// for all the metrics of one answer.
    async fn metric_series(
        &self,
        metric: Metric,
        froms: &[Ts],
        to: Ts,
        watermark: Option<Ts>,
        consumer: Option<&str>,
    ) -> StoreResult<MetricSeries> {
        let of_consumer = if consumer.is_some() {
            " AND consumer = $4"
        } else {
            ""
        };
        let mut series = MetricSeries::default();
        let Some(start) = froms.iter().min().copied() else {
            return Ok(series);
        };
        // Hours before the watermark come from the rollup, except those a `from` cuts.
        let hours_to = watermark.map_or(start, |w| w.min(to.hour()).max(start));
        let cut_hours: Vec<Ts> = froms
            .iter()
            .filter(|from| from.hour() != **from)
            .map(|from| from.hour())
            .collect();
        if start.next_hour() < hours_to {
            // One row per hour and bucket: the consumer's, or the sum over all.
            const SQL: &str = "SELECT hour, bucket, value FROM consumer_metrics_hourly \
                 WHERE metric = $1 AND consumer = $2 AND hour >= $3 AND hour < $4";
            let rows: Vec<(Ts, String, f64)> = dispatch!(&self.pools, pool => {
                sqlx::query_as(SQL).bind(metric.name()).bind(consumer.unwrap_or(ALL_CONSUMERS))
                    .bind(start.next_hour()).bind(hours_to)
                    .fetch_all(pool).await?
            });
            series.points.extend(
                rows.into_iter()
                    .filter(|(hour, _, _)| !cut_hours.contains(hour)),
            );
        }
        // Minutes: the hours the `from`s cut (before the watermark), and everything after it.
        let mut ranges: Vec<(Ts, Ts)> = cut_hours
            .iter()
            .filter(|hour| **hour < hours_to)
            .map(|hour| (*hour, *hour + TimeDelta::hours(1)))
            .collect();
        if start.next_hour() >= hours_to {
            // Nothing came from the rollup: every minute since the start.
            ranges.push((start, to));
        }
        ranges.push((hours_to, to));
        ranges.sort_by_key(|r| r.0);
        let mut merged: Vec<(Ts, Ts)> = Vec::new();
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let sql = match metric.kind() {
            MetricKind::Gauge => format!(
                "SELECT minute, {} AS slice, CAST(COUNT(*) AS DOUBLE PRECISION) FROM consumer_metrics \
                 WHERE metric = $1 AND minute >= $2 AND minute < $3{of_consumer} \
                 GROUP BY minute, slice",
                gauge_bucket_sql()
            ),
            MetricKind::Counter | MetricKind::Histogram => format!(
                "SELECT minute, bucket, SUM(value) FROM consumer_metrics \
                 WHERE metric = $1 AND minute >= $2 AND minute < $3{of_consumer} \
                 GROUP BY minute, bucket"
            ),
        };
        for (a, b) in merged {
            if a >= b {
                continue;
            }
            let rows: Vec<(Ts, String, f64)> = dispatch!(&self.pools, pool => {
                let query = sqlx::query_as(&sql).bind(metric.name()).bind(a).bind(b);
                match consumer {
                    Some(consumer) => query.bind(consumer),
                    None => query,
                }
                .fetch_all(pool)
                .await?
            });
            series.points.extend(rows);
        }
        series.points.sort_by_key(|(at, _, _)| *at);
        Ok(series)
    }
}

/// Good and valid events of an indicator over `[from, to)` for each of
/// `froms`, from series and audit rows already read.
fn events_of(
    indicator: &Indicator,
    series: &HashMap<Metric, MetricSeries>,
    recoveries: &[Recovery],
    froms: &[Ts],
    to: Ts,
) -> Vec<Events> {
    let total = |metric: Metric, from: Ts| -> f64 {
        series
            .get(&metric)
            .map_or(0.0, |s| s.sums(from, to).values().sum())
    };
    let at_most = |metric: Metric, from: Ts, bound: f64| -> Events {
        let sums = series
            .get(&metric)
            .map(|s| s.sums(from, to))
            .unwrap_or_default();
        let good = sums
            .iter()
            .filter(|(bucket, _)| bucket_bound(bucket) <= bound)
            .map(|(_, v)| v)
            .sum();
        Events::new(good, sums.values().sum())
    };
    let recovered = |from: Ts, resolves_only: bool| {
        recoveries
            .iter()
            .filter(move |r| r.at >= from && r.at < to && (r.resolved_unknown || !resolves_only))
    };
    froms
        .iter()
        .map(|from| match *indicator {
            Indicator::Counters { valid, bad } => {
                let valid = total(valid, *from);
                Events::new(valid - total(bad, *from), valid)
            }
            Indicator::GaugeSlices {
                gauge: metric,
                at_most_seconds,
            }
            | Indicator::Histogram {
                histogram: metric,
                at_most_seconds,
            } => at_most(metric, *from, at_most_seconds),
            Indicator::UnknownResolved { within_seconds } => Events::new(
                recovered(*from, true)
                    .filter(|r| r.seconds <= within_seconds)
                    .count() as f64,
                total(Metric::UnknownOutcomes, *from),
            ),
            Indicator::Recovery { within_seconds } => Events::new(
                recovered(*from, false)
                    .filter(|r| r.seconds <= within_seconds)
                    .count() as f64,
                recovered(*from, false).count() as f64,
            ),
        })
        .collect()
}

/// One operator action that ended an unknown outcome or a dead letter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub at: Ts,
    /// A resolution of an unknown outcome (otherwise a dead-letter replay or discard).
    pub resolved_unknown: bool,
    /// From the problem's start (the unknown outcome, the dead-lettering) to the action.
    pub seconds: f64,
}

/// The metrics an indicator's events are counted from.
fn indicator_metrics(indicator: &Indicator) -> Vec<Metric> {
    match *indicator {
        Indicator::Counters { valid, bad } => vec![valid, bad],
        Indicator::GaugeSlices { gauge: m, .. } | Indicator::Histogram { histogram: m, .. } => {
            vec![m]
        }
        Indicator::UnknownResolved { .. } => vec![Metric::UnknownOutcomes],
        Indicator::Recovery { .. } => Vec::new(),
    }
}

/// Bucket sums of one metric keyed by the minute or hour they start at. A
/// span's sum takes the points that start inside it: [`Store::metric_series`]
/// only returns an hour as one point when no span boundary falls inside it.
#[derive(Debug, Default)]
struct MetricSeries {
    points: Vec<(Ts, String, f64)>,
}

impl MetricSeries {
    /// The points in `[from, to)`: a slice, since the points are sorted by time.
    fn between(&self, from: Ts, to: Ts) -> &[(Ts, String, f64)] {
        let lo = self.points.partition_point(|(at, _, _)| *at < from);
        let hi = self.points.partition_point(|(at, _, _)| *at < to);
        &self.points[lo..hi.max(lo)]
    }

    fn sums(&self, from: Ts, to: Ts) -> BucketSums {
        let mut sums: HashMap<&str, f64> = HashMap::new();
        for (_, bucket, value) in self.between(from, to) {
            *sums.entry(bucket).or_default() += value;
        }
        owned(sums)
    }

    /// Sums in each interval `[starts[i], starts[i + 1])`, the last ending
    /// at `to`; `starts` ascending. One pass over the points.
    fn sums_by_interval(&self, starts: &[Ts], to: Ts) -> Vec<BucketSums> {
        let mut intervals: Vec<HashMap<&str, f64>> = vec![HashMap::new(); starts.len()];
        let Some(first) = starts.first() else {
            return Vec::new();
        };
        for (at, bucket, value) in self.between(*first, to) {
            let i = starts.partition_point(|s| s <= at) - 1;
            *intervals[i].entry(bucket).or_default() += value;
        }
        intervals.into_iter().map(owned).collect()
    }
}

fn owned(sums: HashMap<&str, f64>) -> BucketSums {
    sums.into_iter().map(|(b, v)| (b.to_owned(), v)).collect()
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
