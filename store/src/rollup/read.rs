//! The rollups' readers: metric buckets for charts, SLO events, recoveries.

use std::collections::HashMap;

use chrono::TimeDelta;
use idem_domain::{
    ConsumerName, Histogram, Metric,
    slo::{Events, Indicator},
};

use super::{
    events::{Recovery, events_of},
    series::{MetricSeries, hour_bins},
};
use crate::facets::Metrics;
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

impl Metrics<'_> {
    /// Each metric's per-bucket sums in each interval `[starts[i],
    /// starts[i + 1])` (the last ends at `to`), for one consumer or all,
    /// with the watermark read once for all of them. Intervals need not be
    /// whole hours: an hour an interval starts inside is read in minutes.
    pub async fn metric_buckets(
        self,
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
        self,
        from: Ts,
        to: Ts,
        consumer: Option<&ConsumerName>,
    ) -> StoreResult<Vec<Recovery>> {
        let consumers: Vec<String> = consumer
            .map(|c| c.as_str().to_owned())
            .into_iter()
            .collect();
        let of = (!consumers.is_empty()).then_some(&consumers[..]);
        Ok(self
            .recovery_rows(from, to, of)
            .await?
            .into_iter()
            .map(|(_, recovery)| recovery)
            .collect())
    }

    /// Good and valid events for an indicator in each `step`-long bucket of
    /// `[from, to)` (the last may be shorter), oldest first, over every
    /// consumer or the sum over `consumers`. `from` and `step` should be
    /// whole hours, so no rolled-up hour straddles two buckets.
    pub async fn indicator_buckets(
        self,
        indicator: &Indicator,
        from: Ts,
        to: Ts,
        step: TimeDelta,
        consumers: Option<&[String]>,
    ) -> StoreResult<Vec<(Ts, Events)>> {
        let mut starts = Vec::new();
        let mut at = from;
        while at < to {
            starts.push(at);
            at = at + step;
        }
        let watermark = self.rollup_watermark().await?;
        let metrics = indicator.metrics();
        let bins = hour_bins(&starts);
        let mut series = HashMap::new();
        match consumers {
            None => {
                series = self
                    .metric_series(&metrics, &[from], to, watermark, None, bins)
                    .await?;
            }
            // A team's few consumers, one after another: events add up.
            Some(consumers) => {
                for consumer in consumers {
                    let of_one = self
                        .metric_series(&metrics, &[from], to, watermark, Some(consumer), bins)
                        .await?;
                    for (metric, points) in of_one {
                        series
                            .entry(metric)
                            .or_insert_with(MetricSeries::default)
                            .extend(points);
                    }
                }
            }
        }
        let recoveries = match consumers {
            _ if !indicator.counts_recoveries() => Vec::new(),
            None => self.recoveries(from, to, None).await?,
            Some(consumers) => self
                .recoveries_of(from, to, consumers)
                .await?
                .into_iter()
                .map(|(_, recovery)| recovery)
                .collect(),
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
        self,
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

impl Store {
    /// [`Self::recoveries`] of each of `consumers`, each with its consumer.
    pub(super) async fn recoveries_of(
        &self,
        from: Ts,
        to: Ts,
        consumers: &[String],
    ) -> StoreResult<Vec<(String, Recovery)>> {
        if consumers.is_empty() {
            return Ok(Vec::new());
        }
        self.recovery_rows(from, to, Some(consumers)).await
    }

    /// Recoveries in `[from, to)` of `consumers` (every consumer for `None`).
    async fn recovery_rows(
        &self,
        from: Ts,
        to: Ts,
        consumers: Option<&[String]>,
    ) -> StoreResult<Vec<(String, Recovery)>> {
        let mut sql = Sql::default();
        let (from, to) = (sql.param(from), sql.param(to));
        sql.push(&format!(
            "SELECT consumer, at, action, recovery_seconds, state_before FROM audit_log \
             WHERE at >= {from} AND at < {to} AND result = 'ok' AND recovery_seconds IS NOT NULL"
        ));
        if let Some(consumers) = consumers {
            let placeholders: Vec<String> =
                consumers.iter().map(|c| sql.param(c.as_str())).collect();
            sql.push(&format!(" AND consumer IN ({})", placeholders.join(", ")));
        }
        let limit = sql.param(RECOVERY_ROWS);
        sql.push(&format!(" ORDER BY at LIMIT {limit}"));
        type AuditRow = (Option<String>, Ts, String, f64, Option<String>);
        let rows: Vec<AuditRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|(consumer, at, action, seconds, before)| {
                let action: idem_domain::AuditAction = crate::rows::parse(&action)?;
                let resolved_unknown = action.resolves_unknown();
                // What the resolution's audit row says it found (see
                // `claim_state_before`): a claim still pending, its lease
                // abandoned.
                let before = before.as_deref().map(idem_domain::AuditState::parse);
                let abandoned_lease = resolved_unknown
                    && matches!(
                        before,
                        Some(idem_domain::AuditState::Claim(ref c))
                            if c.status == idem_domain::ClaimStatus::Pending
                    );
                let recovery = Recovery {
                    at,
                    resolved_unknown,
                    abandoned_lease,
                    seconds,
                };
                Ok((consumer.unwrap_or_default(), recovery))
            })
            .collect()
    }
}
