//! The rollups' readers: metric buckets for charts, SLO events, recoveries.

use std::collections::HashMap;

use chrono::TimeDelta;
use idem_domain::{
    Metric,
    slo::{Events, Indicator},
};

use super::{
    BucketSums,
    events::{Recovery, events_of, indicator_metrics},
    series::hour_bins,
};
use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

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
}
