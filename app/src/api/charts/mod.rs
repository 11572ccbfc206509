//! Charts drawn on the server as SVG (plotters), each with a title and a
//! text summary, so they read the same with JavaScript off and to a screen
//! reader.
//!
//! A chart shows whole intervals only, so one drawn for the last complete
//! interval stays true until the next one completes: rendered charts are
//! cached under that interval (`AppState::per_interval`).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;
pub use crate::ranges::{DEFAULT_RANGE, MAX_SPAN_DAYS, RANGES};

/// A chart: its SVG markup (drawn on the server), what it shows in words,
/// and the span it covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// Stable within a page (`id` of its figure), e.g. `duplicate-rate`.
    pub id: String,
    /// The span in words: "last 24h".
    pub range: String,
    pub title: String,
    /// `None` when there is nothing to draw (no data is not a zero).
    pub svg: Option<String>,
    pub summary: String,
    /// The keys behind the chart, where a list of them exists.
    pub link: Option<ChartLink>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartLink {
    pub href: String,
    pub text: String,
}

/// The overview's charts for one span and consumer (or all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChartSet {
    /// The span in words: "Showing the last 24h, in 1 h intervals, up to 14:00 UTC."
    pub span: String,
    /// The consumers that report metrics, for the filter.
    pub consumers: Vec<String>,
    pub charts: Vec<Chart>,
}

/// Every overview chart: duplicate-claim rate, duplicate delays, duplicates
/// suppressed, queue and outbox age, unknown outcomes, dead letters,
/// transaction failures, delivery-to-outcome latency, recovery times,
/// retryable failures and rate limiting, queue depth and replays. `range` names a span
/// ending now; `from` and `to` (RFC 3339, or `YYYY-MM-DDTHH:MM` in UTC) name
/// one instead. `consumer` narrows every chart to one consumer.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_charts(
    range: Option<String>,
    from: Option<String>,
    to: Option<String>,
    consumer: Option<String>,
) -> Result<ChartSet, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let span = ssr::ChartSpan::parse(range, from, to, chrono::Utc::now())?;
        let (consumer, readable) = crate::api::ssr::scoped_consumer(consumer.as_deref()).await?;
        // The fleet's sums count every team: rights limited to teams chart
        // one of their consumers at a time.
        let (consumer, first) = match (consumer, &readable) {
            (Some(consumer), _) => (Some(consumer), None),
            (None, idem_domain::Within::Every) => (None, None),
            (None, idem_domain::Within::Only(names)) => match names.first() {
                Some(first) => (Some(first.clone()), Some(first.clone())),
                None => {
                    return Err(AppError::OtherTeam(
                        "None of your teams has a consumer in the catalogue: there is nothing \
                         to chart."
                            .into(),
                    ));
                }
            },
        };
        let state = crate::serving::state()?;
        // Another team's consumer charts as one that reports nothing.
        let blind = consumer
            .as_ref()
            .is_some_and(|c| !readable.allows(c.as_str()));
        let mut set = ssr::charts(&state, span, consumer, blind).await?;
        // The filter offers the consumers this reader may see, read in
        // their scope (never the fleet's names trimmed afterwards).
        set.consumers = crate::serving::reader(&state)
            .store
            .metrics()
            .consumers(200, &readable)
            .await?;
        if let Some(first) = first {
            set.span = format!(
                "{} Your rights are limited to teams, so the charts show one consumer at a \
                 time: {first}; choose another of yours below.",
                set.span
            );
        }
        Ok(set)
    })
    .await
}

/// One SLO's charts over its window — the SLI, the error budget remaining,
/// and each alert tier's burn rate against its threshold — or one
/// consumer's of a per-consumer SLO (`consumer` as the address's segment).
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slo_charts(
    name: String,
    consumer: Option<String>,
) -> Result<Vec<Chart>, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let consumer = crate::api::slo::ssr::consumer_segment(consumer.as_deref())?;
        ssr::slo_charts(&crate::serving::state()?, &name, consumer).await
    })
    .await
}

#[cfg(feature = "ssr")]
mod overview;
#[cfg(feature = "ssr")]
mod slo;

#[cfg(feature = "ssr")]
pub use overview::{CHART_METRICS, chart_reads, charts_drawn};

/// The charts' server-only code: the cached reads behind the server
/// functions. Reading and drawing live in the server-only files beside it
/// (`overview`, `slo`, `span`).
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use idem_domain::ConsumerName;
    use idem_store::Ts;

    use super::{Chart, ChartSet, overview, slo};
    pub(crate) use crate::span::ChartSpan;
    use crate::{cache::ReadKey, error::AppError, serving::AppState};

    /// The overview's charts for `span` and `consumer` (or all), from the
    /// request's reader: drawn once per interval, with the open unknown
    /// outcomes (about now, not the span) read through the short cache, so a
    /// resolution shows on the next refresh.
    /// `blind`: the consumer is not the reader's, and charts as one that
    /// reports nothing (nothing of it is read).
    pub async fn charts(
        state: &AppState,
        span: ChartSpan,
        consumer: Option<ConsumerName>,
        blind: bool,
    ) -> Result<ChartSet, AppError> {
        let reader = crate::serving::reader(state);
        let key = ReadKey::OverviewCharts {
            span: span.clone(),
            consumer: consumer.clone(),
            blind,
        };
        let (slos, for_span, who) = (state.slos.clone(), consumer.clone(), consumer.clone());
        let mut set = reader
            .cached(key, |store| {
                overview::overview_charts(store, slos, span, for_span, blind)
            })
            .await?;
        let slos = state.slos.clone();
        let open = reader
            .cached(ReadKey::OpenUnknownChart { consumer, blind }, |store| {
                overview::open_unknown_chart(store, slos, who, blind)
            })
            .await?;
        let at = set
            .charts
            .iter()
            .position(|c| c.id == "unknown-outcomes")
            .unwrap_or(set.charts.len());
        set.charts.insert(at, open);
        Ok(set)
    }

    /// The charts of the SLO named `name` (for `consumer`, when it is
    /// per consumer), from the request's reader, drawn once per hour.
    pub async fn slo_charts(
        state: &AppState,
        name: &str,
        consumer: Option<ConsumerName>,
    ) -> Result<Vec<Chart>, AppError> {
        let Some(slo) = state.slos.slos.iter().find(|s| s.name == name) else {
            return Err(AppError::NotFound(format!(
                "There is no SLO named “{name}”."
            )));
        };
        if let Some(consumer) = &consumer {
            crate::serving::require_on(consumer.as_str(), idem_domain::Role::Viewer).await?;
        }
        let Some(instance) = slo.instance(&state.catalogue, consumer.as_ref().map(|c| c.as_str()))
        else {
            return Err(AppError::NotFound(match consumer {
                Some(consumer) => format!(
                    "The SLO “{name}” has no objective for the consumer “{}”.",
                    consumer.as_str()
                ),
                None => format!("The SLO “{name}” is per consumer: choose one of its consumers."),
            }));
        };
        let user = crate::serving::require(idem_domain::Role::Viewer)?;
        if !user.rights.reads_scope(&state.catalogue, &instance.scope) {
            return Err(crate::api::slo::ssr::scope_refused(&user, name, &instance.scope).await);
        }
        // Selecting every consumer, any name makes an instance: only the
        // consumers /slo shows have charts.
        if let Some(consumer) = &consumer
            && slo.per_consumer
            && slo.selected(&state.catalogue).is_none()
        {
            let board = crate::api::load_slo_board(state).await?;
            let shown = board
                .statuses
                .iter()
                .any(|s| s.slo.name == name && s.scope.consumer() == Some(consumer.as_str()));
            if !shown {
                return Err(AppError::NotFound(format!(
                    "The SLO “{name}” has no objective for the consumer “{}”.",
                    consumer.as_str()
                )));
            }
        }
        let hour = Ts::now().hour();
        let key = ReadKey::SloCharts {
            name: name.to_owned(),
            consumer,
            hour,
        };
        crate::serving::reader(state)
            .cached(key, |store| slo::slo_charts(store, instance, hour))
            .await
    }
}
