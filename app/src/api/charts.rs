//! Charts drawn on the server as SVG (plotters), each with a title and a
//! text summary, so they read the same with JavaScript off and to a screen
//! reader.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// The time ranges a chart can show (`?range=`).
pub const RANGES: &[(&str, i64)] = &[
    ("1h", 3600),
    ("6h", 6 * 3600),
    ("24h", 24 * 3600),
    ("7d", 7 * 86_400),
    ("28d", 28 * 86_400),
];

/// The range charts show when the address names none.
pub const DEFAULT_RANGE: &str = "24h";

/// The range's length in seconds, or a message saying which ranges exist.
#[cfg(feature = "ssr")]
pub fn range_seconds(range: &str) -> Result<i64, AppError> {
    RANGES
        .iter()
        .find(|(name, _)| *name == range)
        .map(|(_, seconds)| *seconds)
        .ok_or_else(|| {
            let names: Vec<&str> = RANGES.iter().map(|(n, _)| *n).collect();
            AppError::BadRequest(format!("The range must be one of {}.", names.join(", ")))
        })
}

/// A chart: its SVG markup (drawn on the server), what it shows in words,
/// and the range it covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    pub range: String,
    pub title: String,
    /// `None` when there is nothing to draw (no data is not a zero).
    pub svg: Option<String>,
    pub summary: String,
}

/// How long after a key's first delivery each duplicate arrived, against
/// the five-minute FIFO dedupe window.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_duplicate_delays(range: Option<String>) -> Result<Chart, AppError> {
    crate::ssr::serve(async move {
        crate::ssr::require(idem_domain::Role::Viewer)?;
        let range = range.unwrap_or_else(|| DEFAULT_RANGE.to_owned());
        let seconds = range_seconds(&range)?;
        let state = crate::ssr::state()?;
        let store = state.store.clone();
        state
            .reads
            .get_or_load(format!("duplicate-delays:{range}"), || async move {
                let to = idem_store::Ts::now();
                let from = to - chrono::TimeDelta::seconds(seconds);
                let totals = store
                    .metric_totals(idem_domain::Metric::DuplicateDelaySeconds, from, to)
                    .await?;
                Ok::<_, AppError>(crate::charts::duplicate_delays(&range, &totals))
            })
            .await
    })
    .await
}

/// One SLO's SLI over its window, in about a hundred buckets of whole hours.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slo_chart(name: String) -> Result<Chart, AppError> {
    crate::ssr::serve(async move {
        crate::ssr::require(idem_domain::Role::Viewer)?;
        let state = crate::ssr::state()?;
        let Some(slo) = state.slos.slos.iter().find(|s| s.name == name).cloned() else {
            return Err(AppError::NotFound(format!(
                "There is no SLO named “{name}”."
            )));
        };
        let store = state.store.clone();
        state
            .reads
            .get_or_load(format!("slo-chart:{name}"), || async move {
                let to = idem_store::Ts::now();
                let hours = (slo.window.as_seconds() / 3600 / 112).max(1);
                let step = chrono::TimeDelta::hours(hours);
                let from = (to - chrono::TimeDelta::seconds(slo.window.as_seconds())).hour();
                let buckets = store.indicator_buckets(&slo.sli, from, to, step).await?;
                let buckets: Vec<_> = buckets.into_iter().map(|(at, e)| (at.0, e)).collect();
                Ok::<_, AppError>(crate::charts::sli_over_time(&slo, &buckets))
            })
            .await
    })
    .await
}
