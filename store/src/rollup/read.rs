//! The rollups' readers: metric buckets for charts, SLO events, recoveries.

use std::collections::HashMap;

use chrono::TimeDelta;
use idem_domain::{
    ConsumerName, Histogram, Metric,
    slo::{Events, Indicator},
};

use super::{
    events::{Recovery, events_of},
    series::hour_bins,
};
use crate::{
    StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::Store,
    ts::Ts,
};

/// Rows of the audit log read per answer at most: operators' recoveries
/// are human actions, a few a day; this only bounds a pathological log.
const RECOVERY_ROWS: i64 = 100_000;

impl Store {
    /// Each metric's per-bucket sums in each interval `[starts[i],
    /// starts[i + 1])` (the last ends at `to`), for one consumer or all,
    /// with the watermark read once for all of them. Intervals need not be
    /// whole hours: an hour an interval starts inside is read in minutes.
    pub async fn metric_buckets(
        &self,
        metrics: &[Metric],
        starts: &[Ts],
        to: Ts,
        consumer: Option<&ConsumerName>,
    ) -> StoreResult<HashMap<Metric, Vec<Histogram>>> {
        let watermark = self.rollup_watermark().await?;
        let consumer = consumer.map(ConsumerName::as_str);
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
        consumer: Option<&ConsumerName>,
    ) -> StoreResult<Vec<Recovery>> {
        let mut sql = Sql::default();
        let (from, to) = (sql.param(from), sql.param(to));
        sql.push(&format!(
            "SELECT at, action, recovery_seconds, state_before FROM audit_log WHERE at >= {from} AND at < {to} \
             AND result = 'ok' AND recovery_seconds IS NOT NULL"
        ));
        if let Some(consumer) = consumer {
            let consumer = sql.param(consumer.as_str());
            sql.push(&format!(" AND consumer = {consumer}"));
        }
        let limit = sql.param(RECOVERY_ROWS);
        sql.push(&format!(" ORDER BY at LIMIT {limit}"));
        let rows: Vec<(Ts, String, f64, Option<String>)> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(at, action, seconds, before)| {
                let resolved_unknown = action.starts_with("resolve:");
                Recovery {
                    at,
                    resolved_unknown,
                    // What the resolution's audit row says it found (see
                    // `claim_state_before`).
                    abandoned_lease: resolved_unknown
                        && before.is_some_and(|b| b.starts_with("pending")),
                    seconds,
                }
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
                &indicator.metrics(),
                &[from],
                to,
                watermark,
                None,
                hour_bins(&starts),
            )
            .await?;
        let recoveries = if indicator.counts_recoveries() {
            self.recoveries(from, to, None).await?
        } else {
            Vec::new()
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
            .flat_map(|indicator| indicator.metrics())
            .collect();
        metrics.sort_by_key(|m| m.name());
        metrics.dedup();
        let series = self
            .metric_series(&metrics, froms, to, watermark, None, None)
            .await?;
        let reads_audit = indicators.iter().any(|i| i.counts_recoveries());
        let recoveries = match froms.iter().min() {
            Some(from) if reads_audit => self.recoveries(*from, to, None).await?,
            _ => Vec::new(),
        };
        Ok(indicators
            .iter()
            .map(|indicator| events_of(indicator, &series, &recoveries, froms, to))
            .collect())
    }
}
