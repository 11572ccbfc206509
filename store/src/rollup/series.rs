//! Metric series at the resolution an answer needs: whole rolled-up hours
//! (or six-hour blocks, or longer intervals summed in the database) where
//! they can be, minutes at the ragged edges.

use std::collections::HashMap;

use chrono::TimeDelta;
use idem_domain::{Histogram, Metric, MetricKind, le_bound};

use super::{ALL_CONSUMERS, BLOCK, gauge_bucket_sql, names, names_of, start_of_bin};
use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

/// One row read for a series: metric name, when, bucket, value.
type Row = (String, Ts, String, f64);

impl Store {
    /// Each metric's per-bucket sums from the earliest of `froms` to `to`,
    /// at the resolution sums over `[from, to)` for each `from` need: whole
    /// rolled-up hours as one point each, and minutes in every hour a `from`
    /// falls inside and after the watermark. Gauge minutes are counted into
    /// the same slice buckets the rollup uses. Callers read the watermark once
    /// for all the metrics of one answer. All the metrics come together: one
    /// query per rollup tier, and per range of minutes one for gauges and
    /// one for counters and histograms — never one per metric.
    ///
    /// With `bin` (see [`hour_bins`]), rolled-up hours are summed in the
    /// database into `bin`-long intervals and each comes back as one point
    /// at its interval's start: a 28-day chart in six-hour intervals decodes
    /// 112 rows per bucket instead of 672. Summing is exact, so the sums a
    /// caller makes over those intervals do not change.
    pub(super) async fn metric_series(
        &self,
        metrics: &[Metric],
        froms: &[Ts],
        to: Ts,
        watermark: Option<Ts>,
        consumer: Option<&str>,
        bin: Option<TimeDelta>,
    ) -> StoreResult<HashMap<Metric, MetricSeries>> {
        let mut series: HashMap<Metric, MetricSeries> = metrics
            .iter()
            .map(|m| (*m, MetricSeries::default()))
            .collect();
        let Some(start) = froms.iter().min().copied() else {
            return Ok(series);
        };
        if metrics.is_empty() {
            return Ok(series);
        }
        let mut rows: Vec<Row> = Vec::new();
        // Hours before the watermark come from the rollup, except those a `from` cuts.
        let hours_to = watermark.map_or(start, |w| w.min(to.hour()).max(start));
        let cut_hours: Vec<Ts> = froms
            .iter()
            .filter(|from| from.hour() != **from)
            .map(|from| from.hour())
            .collect();
        if start.next_hour() < hours_to {
            let hours = (start.next_hour(), hours_to);
            rows.extend(
                self.rolled_up_rows(metrics, consumer, hours, &cut_hours, bin)
                    .await?,
            );
        }
        // Minutes: the hours the `from`s cut (before the watermark), and everything after it.
        let ranges = minute_ranges(start, to, hours_to, &cut_hours);
        rows.extend(self.minute_rows(metrics, consumer, &ranges).await?);
        for (metric, at, bucket, value) in rows {
            if let Some(points) = Metric::from_name(&metric).and_then(|m| series.get_mut(&m)) {
                points.points.push((at, le_bound(&bucket), value));
            }
        }
        for points in series.values_mut() {
            points.points.sort_by_key(|(at, _, _)| *at);
        }
        Ok(series)
    }

    /// The rolled-up rows of `[hours_from, hours_to)`, without the hours a `from` cuts.
    async fn rolled_up_rows(
        &self,
        metrics: &[Metric],
        consumer: Option<&str>,
        (mut hours_from, hours_to): (Ts, Ts),
        cut_hours: &[Ts],
        bin: Option<TimeDelta>,
    ) -> StoreResult<Vec<Row>> {
        let mut rows = Vec::new();
        // One row per hour and bucket (the consumer's, or the sum over
        // all), or per interval and bucket when whole intervals are asked
        // for and no `from` cuts an hour (a cut hour is dropped below).
        // Intervals of whole blocks take the blocks the watermark has
        // passed from `consumer_metrics_6h`, and only the rest in hours.
        let bin = bin.filter(|_| cut_hours.is_empty());
        if let Some(bin) = bin.filter(|bin| bin.num_seconds() % BLOCK.num_seconds() == 0) {
            let blocks_to = hours_to.floor(BLOCK).max(hours_from);
            // Blocks as long as the intervals need no summing.
            let blocks_bin = Some(bin).filter(|bin| *bin != BLOCK);
            rows.extend(
                self.rolled_up(
                    "consumer_metrics_6h",
                    metrics,
                    consumer,
                    (hours_from, blocks_to),
                    blocks_bin,
                )
                .await?,
            );
            hours_from = blocks_to;
        }
        rows.extend(
            self.rolled_up(
                "consumer_metrics_hourly",
                metrics,
                consumer,
                (hours_from, hours_to),
                bin,
            )
            .await?
            .into_iter()
            .filter(|(_, hour, _, _)| !cut_hours.contains(hour)),
        );
        Ok(rows)
    }

    /// The minute rows of each range, gauges counted into slice buckets.
    async fn minute_rows(
        &self,
        metrics: &[Metric],
        consumer: Option<&str>,
        ranges: &[(Ts, Ts)],
    ) -> StoreResult<Vec<Row>> {
        let minute_sql = minute_sql(metrics, consumer.is_some());
        let mut rows = Vec::new();
        for &(a, b) in ranges {
            if a >= b {
                continue;
            }
            for sql in &minute_sql {
                let minutes: Vec<Row> = dispatch!(&self.pools, pool => {
                    let query = sqlx::query_as(sql).bind(a).bind(b);
                    match consumer {
                        Some(consumer) => query.bind(consumer),
                        None => query,
                    }
                    .fetch_all(pool)
                    .await?
                });
                rows.extend(minutes);
            }
        }
        Ok(rows)
    }

    /// Rows of a rollup table (`consumer_metrics_hourly` or
    /// `consumer_metrics_6h`) in `[from, to)` for `metrics`, of one consumer
    /// or the sum over all: one per row and bucket, or with `bin`, one per
    /// `bin`-long interval and bucket, at the interval's start.
    async fn rolled_up(
        &self,
        table: &'static str,
        metrics: &[Metric],
        consumer: Option<&str>,
        (from, to): (Ts, Ts),
        bin: Option<TimeDelta>,
    ) -> StoreResult<Vec<Row>> {
        if from >= to {
            return Ok(Vec::new());
        }
        let names = names(metrics);
        let from_where = format!(
            "FROM {table} WHERE metric IN ({names}) AND consumer = $1 AND hour >= $2 AND hour < $3"
        );
        let sql = match bin {
            None => format!("SELECT metric, hour, bucket, value {from_where}"),
            Some(bin) => format!(
                "SELECT metric, {}, bucket, SUM(value) {from_where} GROUP BY 1, 2, 3",
                start_of_bin(&self.pools, bin)
            ),
        };
        Ok(dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(consumer.unwrap_or(ALL_CONSUMERS)).bind(from).bind(to)
                .fetch_all(pool).await?
        }))
    }
}

/// The ranges of minutes to read, merged and in order: the hours the
/// `from`s cut before `hours_to`, everything from `hours_to` to `to`, and
/// everything from `start` when nothing comes from the rollup. A range may
/// be empty (its start not before its end).
pub(super) fn minute_ranges(start: Ts, to: Ts, hours_to: Ts, cut_hours: &[Ts]) -> Vec<(Ts, Ts)> {
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
    merged
}

/// The minute queries for `metrics`: one for gauges (counted into slice
/// buckets), one for counters and histograms; each only when it has metrics.
/// `$1`/`$2` bound the minutes, `$3` is the consumer when `of_consumer`.
fn minute_sql(metrics: &[Metric], of_consumer: bool) -> Vec<String> {
    let named =
        |kinds: &[MetricKind]| Some(names_of(metrics, kinds)).filter(|names| !names.is_empty());
    let of_consumer = if of_consumer {
        " AND consumer = $3"
    } else {
        ""
    };
    let mut minute_sql = Vec::new();
    if let Some(gauges) = named(&[MetricKind::Gauge]) {
        minute_sql.push(format!(
            "SELECT metric, minute, {} AS slice, CAST(COUNT(*) AS DOUBLE PRECISION) \
             FROM consumer_metrics \
             WHERE metric IN ({gauges}) AND minute >= $1 AND minute < $2{of_consumer} \
             GROUP BY metric, minute, slice",
            gauge_bucket_sql()
        ));
    }
    if let Some(sums) = named(&[MetricKind::Counter, MetricKind::Histogram]) {
        minute_sql.push(format!(
            "SELECT metric, minute, bucket, SUM(value) FROM consumer_metrics \
             WHERE metric IN ({sums}) AND minute >= $1 AND minute < $2{of_consumer} \
             GROUP BY metric, minute, bucket"
        ));
    }
    minute_sql
}

/// The interval rolled-up hours may be summed into for sums over intervals
/// starting at each of `starts`: their common length, when it is a whole
/// number of hours (more than one) and every start is a whole number of
/// intervals since the epoch, as the charts' intervals are. Otherwise
/// `None`, and hours are read one by one.
pub(super) fn hour_bins(starts: &[Ts]) -> Option<TimeDelta> {
    const HOUR: i64 = 3_600_000_000;
    let first = starts.first()?.micros();
    let step = starts.get(1)?.micros() - first;
    let even = starts
        .windows(2)
        .all(|w| w[1].micros() - w[0].micros() == step);
    (even && step > HOUR && step % HOUR == 0 && first.rem_euclid(step) == 0)
        .then(|| TimeDelta::microseconds(step))
}

/// Bucket sums of one metric keyed by the minute or hour they start at, each
/// with its bucket's upper bound. A span's sum takes the points that start
/// inside it: [`Store::metric_series`] only returns an hour as one point
/// when no span boundary falls inside it.
#[derive(Debug, Default)]
pub(super) struct MetricSeries {
    points: Vec<(Ts, f64, f64)>,
}

impl MetricSeries {
    pub(super) fn push(&mut self, at: Ts, le: f64, value: f64) {
        self.points.push((at, le, value));
    }

    /// Adds another series' points (another consumer's), keeping the order.
    pub(super) fn extend(&mut self, other: MetricSeries) {
        self.points.extend(other.points);
        self.sort();
    }

    /// Orders the points by time, as [`Self::sums`] needs.
    pub(super) fn sort(&mut self) {
        self.points.sort_by_key(|(at, _, _)| *at);
    }

    /// The points in `[from, to)`: a slice, since the points are sorted by time.
    fn between(&self, from: Ts, to: Ts) -> &[(Ts, f64, f64)] {
        let lo = self.points.partition_point(|(at, _, _)| *at < from);
        let hi = self.points.partition_point(|(at, _, _)| *at < to);
        &self.points[lo..hi.max(lo)]
    }

    pub(super) fn sums(&self, from: Ts, to: Ts) -> Histogram {
        self.between(from, to)
            .iter()
            .map(|(_, le, value)| (*le, *value))
            .collect()
    }

    /// Sums in each interval `[starts[i], starts[i + 1])`, the last ending
    /// at `to`; `starts` ascending. One pass over the points.
    pub(super) fn sums_by_interval(&self, starts: &[Ts], to: Ts) -> Vec<Histogram> {
        let mut intervals = vec![Histogram::new(); starts.len()];
        let Some(first) = starts.first() else {
            return Vec::new();
        };
        for (at, le, value) in self.between(*first, to) {
            let i = starts.partition_point(|s| s <= at) - 1;
            intervals[i].add(*le, *value);
        }
        intervals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hours: i64, minutes: i64) -> Ts {
        Ts::from_micros((hours * 60 + minutes) * 60_000_000).unwrap()
    }

    #[test]
    fn minutes_are_read_for_cut_hours_and_after_the_watermark_merged() {
        // Rolled up through 10:00; `from`s cut the hours at 02:00 and 03:00.
        assert_eq!(
            minute_ranges(at(2, 30), at(11, 15), at(10, 0), &[at(2, 0), at(3, 0)]),
            [(at(2, 0), at(4, 0)), (at(10, 0), at(11, 15))]
        );
        // Nothing from the rollup: every minute since the start (and from
        // the start of the hour it cuts).
        assert_eq!(
            minute_ranges(at(2, 30), at(3, 10), at(2, 30), &[]),
            [(at(2, 30), at(3, 10))]
        );
        assert_eq!(
            minute_ranges(at(2, 30), at(3, 10), at(2, 30), &[at(2, 0)]),
            [(at(2, 0), at(3, 10))]
        );
    }

    #[test]
    fn minute_queries_come_one_per_kind_only_when_asked_for() {
        let gauges_only = minute_sql(&[Metric::QueueOldestAgeSeconds], true);
        assert_eq!(gauges_only.len(), 1);
        assert!(gauges_only[0].contains("AS slice") && gauges_only[0].contains("consumer = $3"));
        let both = minute_sql(&[Metric::Deliveries, Metric::QueueOldestAgeSeconds], false);
        assert_eq!(both.len(), 2);
        assert!(both[1].contains("WHERE metric IN ('deliveries')"));
        assert!(!both[1].contains("consumer = "));
        assert!(minute_sql(&[], false).is_empty());
    }

    #[test]
    fn hours_are_binned_only_for_even_aligned_starts() {
        assert_eq!(
            hour_bins(&[at(0, 0), at(6, 0), at(12, 0)]),
            Some(TimeDelta::hours(6))
        );
        assert_eq!(hour_bins(&[at(1, 0), at(7, 0)]), None);
        assert_eq!(hour_bins(&[at(0, 0), at(1, 0)]), None);
        assert_eq!(hour_bins(&[at(0, 0)]), None);
    }
}
