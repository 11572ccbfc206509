//! SLO events per consumer: the per-consumer and team objectives' read.
//!
//! An SLO's spans all end now, so they cut time into a few intervals
//! (`[28d ago, 3d ago)`, `[3d ago, 1d ago)`, …). Each consumer's rows are
//! summed into those intervals in the database — grouped by consumer,
//! metric, interval and bucket — so an answer holds consumers × metrics ×
//! buckets × intervals rows whatever the window's length, and every row
//! read is a range of the rollups' primary key (consumer, metric, hour).
//! Sums over a span are then the intervals' sums from its start on. The
//! first interval — most of a 28-day window — is read in six-hour blocks
//! where whole blocks lie inside it, so a window's length costs little.

use std::collections::HashMap;

use idem_domain::{
    Metric, MetricKind, le_bound,
    slo::{Events, Indicator},
};

use super::{
    ALL_CONSUMERS, BLOCK,
    events::{Recovery, events_of},
    gauge_bucket_sql, names, names_of,
    series::{MetricSeries, minute_ranges},
};
use crate::facets::Metrics;
use crate::{
    StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::Store,
    ts::Ts,
};

/// One row: consumer, metric, the start of its interval, bucket, value.
type Row = (String, String, Ts, String, f64);

impl Metrics<'_> {
    /// Good and valid events for each indicator over `[from, to)` for each
    /// of `froms`, for each of `consumers` (those with no events too): the
    /// answer's `[consumer][indicator][from]`. Events add up across
    /// consumers, so a team's are the sum of its consumers'.
    pub async fn indicator_events_by_consumer(
        self,
        indicators: &[&Indicator],
        froms: &[Ts],
        to: Ts,
        consumers: &[String],
    ) -> StoreResult<HashMap<String, Vec<Vec<Events>>>> {
        let mut starts: Vec<Ts> = froms.to_vec();
        starts.sort();
        starts.dedup();
        let Some(&start) = starts.first() else {
            return Ok(HashMap::new());
        };
        if consumers.is_empty() {
            return Ok(HashMap::new());
        }
        let mut metrics: Vec<Metric> = indicators.iter().flat_map(|i| i.metrics()).collect();
        metrics.sort_by_key(|m| m.name());
        metrics.dedup();
        let watermark = self.rollup_watermark().await?;
        // As `metric_series`: whole hours before the watermark from the
        // hourly rollup, except those a `from` cuts; minutes for the rest.
        let hours_to = watermark.map_or(start, |w| w.min(to.hour()).max(start));
        let cut_hours: Vec<Ts> = starts
            .iter()
            .filter(|from| from.hour() != **from)
            .map(|from| from.hour())
            .collect();
        let mut rows: Vec<Row> = Vec::new();
        if !metrics.is_empty() {
            let blocks = first_interval_blocks(&starts, hours_to);
            if blocks.0 < blocks.1 {
                let sql = blocks_sql(&metrics, consumers, start, blocks);
                rows.extend(self.interval_rows(&sql).await?);
            }
            if start.next_hour() < hours_to {
                let sql = hours_sql(
                    &metrics,
                    consumers,
                    &starts,
                    (start.next_hour(), hours_to),
                    &cut_hours,
                    blocks,
                );
                rows.extend(self.interval_rows(&sql).await?);
            }
            for (a, b) in minute_ranges(start, to, hours_to, &cut_hours) {
                // A cut hour's range may run past `to`.
                let b = b.min(to);
                if a >= b {
                    continue;
                }
                for sql in minutes_sql(&metrics, consumers, &starts, (a, b)) {
                    rows.extend(self.interval_rows(&sql).await?);
                }
            }
        }
        let series = series_by_consumer(rows);
        let mut recoveries: HashMap<String, Vec<Recovery>> = HashMap::new();
        if indicators.iter().any(|i| i.counts_recoveries()) {
            for (consumer, recovery) in self.recoveries_of(start, to, consumers).await? {
                recoveries.entry(consumer).or_default().push(recovery);
            }
        }
        let none = HashMap::new();
        Ok(consumers
            .iter()
            .map(|consumer| {
                let series = series.get(consumer).unwrap_or(&none);
                let recoveries = recoveries.get(consumer).map_or(&[][..], Vec::as_slice);
                let events = indicators
                    .iter()
                    .map(|indicator| events_of(indicator, series, recoveries, froms, to))
                    .collect();
                (consumer.clone(), events)
            })
            .collect())
    }
}

impl Store {
    async fn interval_rows(&self, sql: &Sql) -> StoreResult<Vec<Row>> {
        Ok(dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        }))
    }
}

/// Each consumer's rows as a series per metric, in time order.
fn series_by_consumer(rows: Vec<Row>) -> HashMap<String, HashMap<Metric, MetricSeries>> {
    let mut series: HashMap<String, HashMap<Metric, MetricSeries>> = HashMap::new();
    for (consumer, metric, at, bucket, value) in rows {
        if let Some(metric) = Metric::from_name(&metric) {
            series
                .entry(consumer)
                .or_default()
                .entry(metric)
                .or_default()
                .push(at, le_bound(&bucket), value);
        }
    }
    for of_consumer in series.values_mut() {
        for points in of_consumer.values_mut() {
            points.sort();
        }
    }
    series
}

/// `consumer IN ($…)` over `consumers`, never the rollups' sums over every
/// consumer (stored under the empty name).
fn consumer_in(sql: &mut Sql, consumers: &[String]) -> String {
    let placeholders: Vec<String> = consumers.iter().map(|c| sql.param(c.as_str())).collect();
    format!(
        "consumer IN ({}) AND consumer <> '{ALL_CONSUMERS}'",
        placeholders.join(", ")
    )
}

/// The start of the interval `column` falls in: the latest of `starts` at
/// or before it (`starts` ascending; rows before the first are not read).
fn interval_of(sql: &mut Sql, column: &str, starts: &[Ts]) -> String {
    let mut case = String::from("CASE");
    for start in starts.iter().rev() {
        let start = sql.param(*start);
        case += &format!(" WHEN {column} >= {start} THEN {start}");
    }
    case + " END"
}

/// The whole six-hour blocks inside the first interval (`starts[0]` to
/// `starts[1]`, or to `hours_to`, whichever is first) that the rollup has
/// passed: `[from, to)`, empty when none fits.
fn first_interval_blocks(starts: &[Ts], hours_to: Ts) -> (Ts, Ts) {
    let Some(first) = starts.first() else {
        return (hours_to, hours_to);
    };
    // A block starts on a whole hour after the first start's (cut) hour.
    let after = first.next_hour();
    let floor = after.floor(BLOCK);
    let from = if floor < after { floor + BLOCK } else { floor };
    let end = starts.get(1).map_or(hours_to, |next| (*next).min(hours_to));
    // The hour the next start cuts is read in minutes: blocks end before it.
    let to = end.hour().floor(BLOCK);
    (from, to.max(from))
}

/// The six-hour blocks of `[from, to)`, all inside the first interval (which
/// starts at `first`), per consumer summed.
fn blocks_sql(metrics: &[Metric], consumers: &[String], first: Ts, (from, to): (Ts, Ts)) -> Sql {
    let mut sql = Sql::default();
    let since = sql.param(first);
    let of = consumer_in(&mut sql, consumers);
    let (from, to) = (sql.param(from), sql.param(to));
    sql.push(&format!(
        "SELECT consumer, metric, {since} AS since, bucket, SUM(value) FROM consumer_metrics_6h \
         WHERE {of} AND metric IN ({}) AND hour >= {from} AND hour < {to} \
         GROUP BY 1, 2, 3, 4",
        names(metrics)
    ));
    sql
}

/// The hourly rollup's uncut hours of `[from, to)` but those of `blocks`,
/// per consumer summed into intervals.
fn hours_sql(
    metrics: &[Metric],
    consumers: &[String],
    starts: &[Ts],
    (from, to): (Ts, Ts),
    cut_hours: &[Ts],
    blocks: (Ts, Ts),
) -> Sql {
    let mut sql = Sql::default();
    let since = interval_of(&mut sql, "hour", starts);
    let of = consumer_in(&mut sql, consumers);
    let (from, to) = (sql.param(from), sql.param(to));
    let mut cut = String::new();
    for hour in cut_hours {
        cut += &format!(" AND hour <> {}", sql.param(*hour));
    }
    if blocks.0 < blocks.1 {
        let (a, b) = (sql.param(blocks.0), sql.param(blocks.1));
        cut += &format!(" AND (hour < {a} OR hour >= {b})");
    }
    sql.push(&format!(
        "SELECT consumer, metric, {since} AS since, bucket, SUM(value) FROM consumer_metrics_hourly \
         WHERE {of} AND metric IN ({}) AND hour >= {from} AND hour < {to}{cut} \
         GROUP BY 1, 2, 3, 4",
        names(metrics)
    ));
    sql
}

/// The minutes of `[from, to)`, per consumer summed into intervals: gauges
/// counted into slices, counters and histograms summed (one statement
/// each, when there are any).
fn minutes_sql(
    metrics: &[Metric],
    consumers: &[String],
    starts: &[Ts],
    range: (Ts, Ts),
) -> Vec<Sql> {
    let mut out = Vec::new();
    let kinds: [(&[MetricKind], String, &str); 2] = [
        (
            &[MetricKind::Gauge],
            format!("{} AS bucket", gauge_bucket_sql()),
            "CAST(COUNT(*) AS DOUBLE PRECISION)",
        ),
        (
            &[MetricKind::Counter, MetricKind::Histogram],
            "bucket".to_owned(),
            "SUM(value)",
        ),
    ];
    for (kinds, bucket, value) in kinds {
        let named = names_of(metrics, kinds);
        if named.is_empty() {
            continue;
        }
        let mut sql = Sql::default();
        let since = interval_of(&mut sql, "minute", starts);
        let of = consumer_in(&mut sql, consumers);
        // A cut hour's minutes before the first span are no span's.
        let (from, to) = (sql.param(range.0.max(starts[0])), sql.param(range.1));
        sql.push(&format!(
            "SELECT consumer, metric, {since} AS since, {bucket}, {value} FROM consumer_metrics \
             WHERE {of} AND metric IN ({named}) AND minute >= {from} AND minute < {to} \
             GROUP BY 1, 2, 3, 4"
        ));
        out.push(sql);
    }
    out
}
