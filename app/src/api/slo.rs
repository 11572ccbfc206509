//! SLOs evaluated against the consumers' metrics and the audit log.

use idem_domain::slo::SloStatus;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// Every SLO, evaluated now, worst first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloBoard {
    pub clock: Clock,
    /// Where the SLOs come from: a file's path, or "built-in defaults".
    pub source: String,
    pub statuses: Vec<SloStatus>,
    /// Consumers whose duplicates Idem cannot observe (their adapter says
    /// so): the duplicate-claim SLOs count their deliveries, not their
    /// duplicates.
    pub duplicates_unobservable: Vec<String>,
}

impl SloBoard {
    /// The consumers an SLO cannot see the bad events of, for a note beside it.
    pub fn blind_spots(&self, status: &SloStatus) -> &[String] {
        match status.slo.sli {
            idem_domain::slo::Indicator::Counters {
                bad: idem_domain::Metric::DuplicateClaims,
                ..
            } => &self.duplicates_unobservable,
            _ => &[],
        }
    }
}

#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slos() -> Result<SloBoard, AppError> {
    crate::serving::serve(async {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let board = ssr::load_slo_board(&crate::serving::state()?).await?;
        Ok(SloBoard {
            clock: crate::serving::clock(board.clock.as_of),
            ..board
        })
    })
    .await
}

/// One SLO by name (`/slo/{name}`); the board holds just that one.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slo(name: String) -> Result<SloBoard, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let state = crate::serving::state()?;
        let mut board = ssr::load_slo_board(&state).await?;
        board.clock = crate::serving::clock(board.clock.as_of);
        board.statuses.retain(|s| s.slo.name == name);
        if board.statuses.is_empty() {
            return Err(AppError::NotFound(format!(
                "There is no SLO named “{name}” (SLOs come from {}).",
                board.source
            )));
        }
        Ok(board)
    })
    .await
}

#[cfg(feature = "ssr")]
pub use ssr::load_slo_board;

/// The SLO board's server-only code: evaluating every SLO, and caching it.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use std::collections::HashMap;

    use chrono::TimeDelta;
    use idem_domain::{
        Metric,
        slo::{Events, Indicator, SloSet, SloStatus, Span, worst_first},
    };
    use idem_store::{Store, Ts};

    use super::SloBoard;
    use crate::{cache::ReadKey, error::AppError, format::Clock, serving::AppState};

    /// Every SLO evaluated up to the last whole minute (clock in UTC), read
    /// from the primary and shared by every viewer and by `/metrics` until
    /// the next minute completes: the consumers' metrics are per minute, so
    /// nothing newer could change it.
    pub async fn load_slo_board(state: &AppState) -> Result<SloBoard, AppError> {
        let slos = state.slos.clone();
        let minute = Ts::now().minute();
        crate::serving::primary(state)
            .cached(ReadKey::SloBoard { minute }, |store| {
                evaluate(store, slos, minute)
            })
            .await
    }

    /// Every SLO of `set` as `/slo` shows it at `until`: each metric read
    /// once for all of them, worst first.
    pub async fn evaluate(
        store: Store,
        set: std::sync::Arc<SloSet>,
        until: Ts,
    ) -> Result<SloBoard, AppError> {
        let now = until.0;
        // Every span of every SLO, each metric read once for all of them.
        let mut spans: Vec<Span> = set.slos.iter().flat_map(|slo| slo.spans()).collect();
        spans.sort();
        spans.dedup();
        let froms: Vec<Ts> = spans
            .iter()
            .map(|span| until - TimeDelta::seconds(span.as_seconds()))
            .collect();
        let indicators: Vec<&Indicator> = set.slos.iter().map(|slo| &slo.sli).collect();
        let counts = store
            .indicator_events_since(&indicators, &froms, until)
            .await?;
        let mut statuses: Vec<SloStatus> = set
            .slos
            .iter()
            .zip(counts)
            .map(|(slo, counts)| {
                let events: HashMap<Span, Events> = spans.iter().copied().zip(counts).collect();
                SloStatus::evaluate(slo, |span| events.get(&span).copied().unwrap_or_default())
            })
            .collect();
        worst_first(&mut statuses);
        Ok(SloBoard {
            clock: Clock::utc(now),
            source: set.source.clone(),
            statuses,
            duplicates_unobservable: store.unobservable(Metric::DuplicateClaims).await?,
        })
    }
}
