//! SLOs evaluated against the consumers' metrics and the audit log.

use idem_domain::slo::SloStatus;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// Every SLO, evaluated now, worst first: once for a fleet-wide, a team's
/// or named consumers' objective, once per consumer for a per-consumer one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloBoard {
    pub clock: Clock,
    /// Where the SLOs come from: a file's path, or "built-in defaults".
    pub source: String,
    pub statuses: Vec<SloStatus>,
    /// Every team an objective belongs to, for the filter (in order).
    pub teams: Vec<String>,
    /// Consumers whose duplicates Idem cannot observe (their adapter says
    /// so): the duplicate-claim SLOs count their deliveries, not their
    /// duplicates.
    pub duplicates_unobservable: Vec<String>,
}

impl SloBoard {
    /// The consumers an SLO cannot see the bad events of, for a note beside it.
    pub fn blind_spots(&self, status: &SloStatus) -> &[String] {
        blind_spots(status, &self.duplicates_unobservable)
    }
}

/// Of the consumers whose duplicates cannot be observed, those `status`
/// misses bad events of: all of them for a duplicate-claim SLO, else none.
pub fn blind_spots<'a>(status: &SloStatus, duplicates_unobservable: &'a [String]) -> &'a [String] {
    match status.slo.sli {
        idem_domain::slo::Indicator::Counters {
            bad: idem_domain::Metric::DuplicateClaims,
            ..
        } => duplicates_unobservable,
        _ => &[],
    }
}

/// Every SLO, worst first; with `team`, only that team's objectives and
/// consumers (an unknown team is a 404 naming the known ones).
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slos(team: Option<String>) -> Result<SloBoard, AppError> {
    crate::serving::serve(async move {
        let user = crate::serving::require(idem_domain::Role::Viewer)?;
        let state = crate::serving::state()?;
        let mut board = ssr::load_slo_board(&state).await?;
        ssr::keep_readable(&mut board, &user, &state.catalogue);
        board.clock = crate::serving::clock(board.clock.as_of);
        if let Some(team) = team.filter(|t| !t.is_empty()) {
            if !board.teams.contains(&team) {
                return Err(AppError::NotFound(format!(
                    "No objective belongs to a team “{team}”; the teams are: {}.",
                    if board.teams.is_empty() {
                        "none".to_owned()
                    } else {
                        board.teams.join(", ")
                    }
                )));
            }
            board
                .statuses
                .retain(|s| s.scope.team() == Some(team.as_str()));
        }
        Ok(board)
    })
    .await
}

/// One SLO (`/slo/{name}`), or one consumer's instance of a per-consumer
/// SLO (`/slo/{name}/{consumer}`, the segment as the address has it). The
/// board holds that one, or for a per-consumer SLO without a consumer,
/// each of its consumers'.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_slo(name: String, consumer: Option<String>) -> Result<SloBoard, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let consumer = ssr::consumer_segment(consumer.as_deref())?;
        if let Some(consumer) = &consumer {
            crate::serving::require_on(consumer.as_str(), idem_domain::Role::Viewer).await?;
        }
        let state = crate::serving::state()?;
        let mut board = ssr::load_slo_board(&state).await?;
        let scope = board
            .statuses
            .iter()
            .find(|s| s.slo.name == name)
            .map(|s| s.scope.clone());
        let user = crate::serving::require(idem_domain::Role::Viewer)?;
        ssr::keep_readable(&mut board, &user, &state.catalogue);
        if let Some(scope) = scope
            && !board.statuses.iter().any(|s| s.slo.name == name)
        {
            return Err(ssr::scope_refused(&user, &name, &scope).await);
        }
        board.clock = crate::serving::clock(board.clock.as_of);
        board.statuses.retain(|s| {
            s.slo.name == name
                && consumer
                    .as_ref()
                    .is_none_or(|c| s.scope.consumer() == Some(c.as_str()))
        });
        if board.statuses.is_empty() {
            return Err(AppError::NotFound(match consumer {
                None => format!(
                    "There is no SLO named “{name}” (SLOs come from {}).",
                    board.source
                ),
                Some(consumer) => format!(
                    "The SLO “{name}” has no objective for the consumer “{}” (SLOs come from {}).",
                    consumer.as_str(),
                    board.source
                ),
            }));
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
        Catalogue, ConsumerName, Metric,
        slo::{Events, Indicator, Instance, SloSet, SloStatus, Span, instances, worst_first},
    };
    use idem_store::{Store, Ts};

    use super::SloBoard;
    use crate::{cache::ReadKey, error::AppError, format::Clock, serving::AppState};

    /// The most consumers a per-consumer SLO that selects every consumer
    /// reads (those the catalogue names count too).
    const SEEN_CONSUMERS: usize = 1_000;

    /// A consumer as the address's segment has it, decoded once (400 when
    /// it is not a consumer name).
    pub fn consumer_segment(segment: Option<&str>) -> Result<Option<ConsumerName>, AppError> {
        match segment.filter(|s| !s.is_empty()) {
            Some(segment) => Ok(Some(ConsumerName::from_segment(segment)?)),
            None => Ok(None),
        }
    }

    /// The 403 for an objective over consumers the person may not read,
    /// naming the team it belongs to (or saying it counts every team's).
    pub async fn scope_refused(
        user: &crate::auth::CurrentUser,
        name: &str,
        scope: &idem_domain::slo::Scope,
    ) -> AppError {
        let (reason, message) = match scope.team() {
            Some(team) => (
                format!("forbidden: viewer on team {team}"),
                format!(
                    "The SLO “{name}” belongs to the team “{team}”, which your rights do not cover."
                ),
            ),
            None => (
                "forbidden: viewer on every team".to_owned(),
                format!("The SLO “{name}” counts the consumers of teams your rights do not cover."),
            ),
        };
        crate::serving::refused_elsewhere(user, &reason, message).await
    }

    /// Keeps the objectives `user` may read (all of them unless their
    /// rights are limited to teams), and the teams those belong to.
    pub fn keep_readable(
        board: &mut super::SloBoard,
        user: &crate::auth::CurrentUser,
        catalogue: &Catalogue,
    ) {
        if !user.rights.is_limited() {
            return;
        }
        board
            .statuses
            .retain(|s| user.rights.reads_scope(catalogue, &s.scope));
        board
            .teams
            .retain(|t| user.rights.role_on(Some(t)).is_some());
        let readable = user.rights.within(catalogue, idem_domain::Role::Viewer);
        board.duplicates_unobservable.retain(|c| readable.allows(c));
    }

    /// Every SLO evaluated up to the last whole minute (clock in UTC), read
    /// from the primary and shared by every viewer and by `/metrics` until
    /// the next minute completes: the consumers' metrics are per minute, so
    /// nothing newer could change it.
    pub async fn load_slo_board(state: &AppState) -> Result<SloBoard, AppError> {
        let (slos, catalogue) = (state.slos.clone(), state.catalogue.clone());
        let minute = Ts::now().minute();
        crate::serving::primary(state)
            .cached(ReadKey::SloBoard { minute }, |store| {
                evaluate(store, slos, catalogue, minute)
            })
            .await
    }

    /// The consumers seen in the tables, when an SLO selects every consumer
    /// (else none are needed). Only names a consumer could have: a row
    /// written without one counts in the fleet's sums, and is no consumer of
    /// its own. The board is the fleet's, shared with `/metrics`; each
    /// reader is shown the objectives of their scope (`keep_readable`).
    async fn seen_consumers(
        store: &Store,
        set: &SloSet,
        catalogue: &Catalogue,
    ) -> Result<Vec<String>, AppError> {
        let every_consumer = set
            .slos
            .iter()
            .any(|s| s.per_consumer && s.selected(catalogue).is_none());
        if !every_consumer {
            return Ok(Vec::new());
        }
        let seen = store
            .metrics()
            .consumers(SEEN_CONSUMERS, &idem_domain::Within::Every)
            .await?;
        Ok(seen
            .into_iter()
            .filter(|name| ConsumerName::parse(name.as_str()).is_ok())
            .collect())
    }

    /// Every SLO of `set` as `/slo` shows it at `until`: each metric read
    /// once for all the fleet-wide ones, and once per consumer for all the
    /// others (a team's objective sums its consumers' events); worst first.
    pub async fn evaluate(
        store: Store,
        set: std::sync::Arc<SloSet>,
        catalogue: std::sync::Arc<Catalogue>,
        until: Ts,
    ) -> Result<SloBoard, AppError> {
        let seen = seen_consumers(&store, &set, &catalogue).await?;
        let instances = instances(&set, &catalogue, &seen);
        // Every span of every SLO, each metric read once for all of them.
        let mut spans: Vec<Span> = set.slos.iter().flat_map(|slo| slo.spans()).collect();
        spans.sort();
        spans.dedup();
        let froms: Vec<Ts> = spans
            .iter()
            .map(|span| until - TimeDelta::seconds(span.as_seconds()))
            .collect();

        let fleet: Vec<&Instance> = instances.iter().filter(|i| i.consumers.is_none()).collect();
        let indicators: Vec<&Indicator> = fleet.iter().map(|i| &i.slo.sli).collect();
        let fleet_counts = store
            .metrics()
            .indicator_events_since(&indicators, &froms, until)
            .await?;

        // The SLOs that select consumers, each once, and every consumer they select.
        let mut selecting: Vec<&str> = Vec::new();
        let mut consumers: Vec<String> = Vec::new();
        for instance in instances.iter().filter(|i| i.consumers.is_some()) {
            if !selecting.contains(&instance.slo.name.as_str()) {
                selecting.push(&instance.slo.name);
            }
            consumers.extend(instance.consumers.iter().flatten().cloned());
        }
        consumers.sort();
        consumers.dedup();
        let selecting_indicators: Vec<&Indicator> = selecting
            .iter()
            .filter_map(|name| set.slos.iter().find(|s| s.name == *name))
            .map(|slo| &slo.sli)
            .collect();
        let by_consumer = store
            .metrics()
            .indicator_events_by_consumer(&selecting_indicators, &froms, until, &consumers)
            .await?;

        let mut fleet_counts = fleet_counts.into_iter();
        let mut statuses: Vec<SloStatus> = instances
            .iter()
            .map(|instance| {
                let counts: Vec<Events> = match &instance.consumers {
                    None => fleet_counts.next().unwrap_or_default(),
                    Some(names) => {
                        let at = selecting
                            .iter()
                            .position(|n| *n == instance.slo.name)
                            .unwrap_or_default();
                        sum_of(names, at, &by_consumer, froms.len())
                    }
                };
                let events: HashMap<Span, Events> = spans.iter().copied().zip(counts).collect();
                instance.evaluate(|span| events.get(&span).copied().unwrap_or_default())
            })
            .collect();
        worst_first(&mut statuses);
        let mut teams: Vec<String> = statuses
            .iter()
            .filter_map(|s| s.scope.team().map(str::to_owned))
            .collect();
        teams.sort();
        teams.dedup();
        Ok(SloBoard {
            clock: Clock::utc(until.0),
            source: set.source.clone(),
            statuses,
            teams,
            duplicates_unobservable: store
                .metrics()
                .unobservable(Metric::DuplicateClaims, &idem_domain::Within::Every)
                .await?,
        })
    }

    /// The events of the `at`-th indicator over each of `spans` spans,
    /// summed over `names`' consumers (events add up across consumers).
    fn sum_of(
        names: &[String],
        at: usize,
        by_consumer: &HashMap<String, Vec<Vec<Events>>>,
        spans: usize,
    ) -> Vec<Events> {
        let mut sum = vec![Events::default(); spans];
        for counts in names.iter().filter_map(|n| by_consumer.get(n)) {
            for (total, events) in sum.iter_mut().zip(&counts[at]) {
                *total = Events::new(total.good + events.good, total.valid + events.valid);
            }
        }
        sum
    }
}
