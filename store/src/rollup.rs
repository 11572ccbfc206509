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

use crate::{
    StoreResult,
    dialect::{Dialect, dispatch},
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
fn start_of_bin<S, P>(dialect: &Dialect<S, P>, bin: TimeDelta) -> String {
    match dialect {
        Dialect::Sqlite(_) => {
            let micros = bin.num_microseconds().unwrap_or(i64::MAX);
            format!("(hour / {micros}) * {micros}")
        }
        // date_bin (Postgres 14+): epoch arithmetic in `numeric` cost twice
        // the read itself.
        Dialect::Postgres(_) => format!(
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
fn names_of(metrics: &[Metric], kinds: &[MetricKind]) -> String {
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
            Dialect::Sqlite(_) => rollup_sql("(minute / 3600000000) * 3600000000"),
            Dialect::Postgres(_) => rollup_sql("date_trunc('hour', minute, 'UTC')"),
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
        let series = self
            .metric_series(metrics, starts, to, watermark, consumer, hour_bins(starts))
            .await?;
        Ok(series
            .into_iter()
            .map(|(metric, series)| (metric, series.sums_by_interval(starts, to)))
            .collect())
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
        let series = self
            .metric_series(
                &indicator_metrics(indicator),
                &[from],
                to,
                watermark,
                None,
                hour_bins(&starts),
            )
            .await?;
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
        let mut metrics: Vec<Metric> = indicators
            .iter()
            .flat_map(|indicator| indicator_metrics(indicator))
            .collect();
        metrics.sort_by_key(|m| m.name());
        metrics.dedup();
        let series = self
            .metric_series(&metrics, froms, to, watermark, None, None)
            .await?;
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
    ) -> StoreResult<Vec<(String, Ts, String, f64)>> {
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
    async fn metric_series(
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
        let named =
            |kinds: &[MetricKind]| Some(names_of(metrics, kinds)).filter(|names| !names.is_empty());
        let mut rows: Vec<(String, Ts, String, f64)> = Vec::new();
        // Hours before the watermark come from the rollup, except those a `from` cuts.
        let hours_to = watermark.map_or(start, |w| w.min(to.hour()).max(start));
        let cut_hours: Vec<Ts> = froms
            .iter()
            .filter(|from| from.hour() != **from)
            .map(|from| from.hour())
            .collect();
        if start.next_hour() < hours_to {
            // One row per hour and bucket (the consumer's, or the sum over
            // all), or per interval and bucket when whole intervals are asked
            // for and no `from` cuts an hour (a cut hour is dropped below).
            // Intervals of whole blocks take the blocks the watermark has
            // passed from `consumer_metrics_6h`, and only the rest in hours.
            let bin = bin.filter(|_| cut_hours.is_empty());
            let mut hours_from = start.next_hour();
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
        let of_consumer = if consumer.is_some() {
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
        for (a, b) in merged {
            if a >= b {
                continue;
            }
            for sql in &minute_sql {
                let minutes: Vec<(String, Ts, String, f64)> = dispatch!(&self.pools, pool => {
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
        for (metric, at, bucket, value) in rows {
            if let Some(points) = Metric::from_name(&metric).and_then(|m| series.get_mut(&m)) {
                points.points.push((at, bucket, value));
            }
        }
        for points in series.values_mut() {
            points.points.sort_by_key(|(at, _, _)| *at);
        }
        Ok(series)
    }
}

/// The interval rolled-up hours may be summed into for sums over intervals
/// starting at each of `starts`: their common length, when it is a whole
/// number of hours (more than one) and every start is a whole number of
/// intervals since the epoch, as the charts' intervals are. Otherwise
/// `None`, and hours are read one by one.
fn hour_bins(starts: &[Ts]) -> Option<TimeDelta> {
    const HOUR: i64 = 3_600_000_000;
    let first = starts.first()?.micros();
    let step = starts.get(1)?.micros() - first;
    let even = starts
        .windows(2)
        .all(|w| w[1].micros() - w[0].micros() == step);
    (even && step > HOUR && step % HOUR == 0 && first.rem_euclid(step) == 0)
        .then(|| TimeDelta::microseconds(step))
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
