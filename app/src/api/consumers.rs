//! The consumer table (`/consumers`) and one consumer's page
//! (`/consumers/{name}`): the catalogue beside what each consumer did in the
//! last hour and what of it waits for a person.

use idem_domain::{CappedCount, CatalogueEntry};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// One consumer: what the catalogue says of it (if anything) and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerSummary {
    pub name: String,
    /// `None`: seen in the tables, not in the catalogue.
    pub entry: Option<CatalogueEntry>,
    /// Deliveries in the last hour (the consumers' `deliveries` metric).
    pub deliveries: u64,
    /// Of those, deliveries whose key was already claimed.
    pub duplicates: u64,
    /// The oldest queued message's age, the largest of the last five minutes.
    pub queue_age_seconds: Option<f64>,
    pub unknown: CappedCount,
    pub dead_letters: CappedCount,
    /// Read through an adapter: actions are refused (`IDEM_READ_ONLY_CONSUMERS`).
    pub read_only: bool,
}

impl ConsumerSummary {
    /// Duplicate claims per delivery in the last hour.
    pub fn duplicate_rate(&self) -> Option<f64> {
        (self.deliveries > 0).then(|| self.duplicates as f64 / self.deliveries as f64)
    }

    pub fn team(&self) -> Option<&str> {
        self.entry.as_ref().map(|e| e.team.as_str())
    }
}

/// How the table is ordered: by name, or worst first by one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ConsumerSort {
    #[default]
    Name,
    Team,
    Deliveries,
    DuplicateRate,
    QueueAge,
    Unknown,
    DeadLetters,
}

impl ConsumerSort {
    pub const ALL: [Self; 7] = [
        Self::Name,
        Self::Team,
        Self::Deliveries,
        Self::DuplicateRate,
        Self::QueueAge,
        Self::Unknown,
        Self::DeadLetters,
    ];

    /// The `sort` value in the address.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Team => "team",
            Self::Deliveries => "deliveries",
            Self::DuplicateRate => "duplicate-rate",
            Self::QueueAge => "queue-age",
            Self::Unknown => "unknown",
            Self::DeadLetters => "dead-letters",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Orders `rows`: names ascending, every figure largest (worst) first,
    /// ties by name.
    pub fn apply(self, rows: &mut [ConsumerSummary]) {
        let figure = |s: &ConsumerSummary| -> f64 {
            match self {
                Self::Name | Self::Team => 0.0,
                Self::Deliveries => s.deliveries as f64,
                Self::DuplicateRate => s.duplicate_rate().unwrap_or(-1.0),
                Self::QueueAge => s.queue_age_seconds.unwrap_or(-1.0),
                Self::Unknown => s.unknown.value as f64,
                Self::DeadLetters => s.dead_letters.value as f64,
            }
        };
        rows.sort_by(|a, b| {
            let by_team = match self {
                Self::Team => a
                    .team()
                    .is_none()
                    .cmp(&b.team().is_none())
                    .then(a.team().cmp(&b.team())),
                _ => std::cmp::Ordering::Equal,
            };
            by_team
                .then(figure(b).total_cmp(&figure(a)))
                .then(a.name.cmp(&b.name))
        });
    }
}

/// The consumer table as one person asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerTable {
    pub clock: Clock,
    pub rows: Vec<ConsumerSummary>,
    /// Every team the catalogue names (for the filter).
    pub teams: Vec<String>,
    /// The team asked for, if one was.
    pub team: Option<String>,
    pub sort: ConsumerSort,
    /// Where the catalogue comes from (empty: there is none).
    pub catalogue_source: String,
}

/// One consumer's page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsumerDetail {
    pub clock: Clock,
    pub summary: ConsumerSummary,
    /// How long it keeps its claims, in days (the catalogue's, else
    /// `IDEM_CLAIM_RETENTION_DAYS`).
    pub retention_days: i64,
    pub catalogue_source: String,
}

/// `/consumers?team=&sort=`: every consumer, from the catalogue and from
/// the tables.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_consumers(
    team: Option<String>,
    sort: Option<String>,
) -> Result<ConsumerTable, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let team = team.filter(|t| !t.trim().is_empty());
        if let Some(team) = &team {
            idem_domain::check_team(team).map_err(AppError::BadRequest)?;
        }
        let sort = match sort.as_deref().filter(|s| !s.is_empty()) {
            None => ConsumerSort::default(),
            Some(text) => ConsumerSort::parse(text).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "“{text}” is not a column to sort by (one of: {}).",
                    ConsumerSort::ALL.map(ConsumerSort::as_str).join(", ")
                ))
            })?,
        };
        let state = crate::serving::state()?;
        let readable = crate::serving::within(idem_domain::Role::Viewer)?;
        let (as_of, mut rows) = ssr::load_summaries(&state, &readable).await?;
        if let Some(team) = &team {
            rows.retain(|r| r.team() == Some(team.as_str()));
        }
        sort.apply(&mut rows);
        Ok(ConsumerTable {
            clock: crate::serving::clock(as_of),
            rows,
            teams: state
                .catalogue
                .teams()
                .into_iter()
                .filter(|t| {
                    readable.is_every()
                        || state
                            .catalogue
                            .entries()
                            .iter()
                            .any(|e| e.team == *t && readable.allows(e.name.as_str()))
                })
                .map(str::to_owned)
                .collect(),
            team,
            sort,
            catalogue_source: state.catalogue.source.clone(),
        })
    })
    .await
}

/// `/consumers/{name}`, `name` as the raw path segment.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_consumer(name: String) -> Result<ConsumerDetail, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let name = idem_domain::ConsumerName::from_segment(&name)
            .map_err(|e| AppError::BadRequest(e.to_string()))?;
        // Another team's consumer answers as a missing one.
        let scope = crate::serving::within(idem_domain::Role::Viewer)?.narrowed_to(Some(&name));
        let state = crate::serving::state()?;
        let (as_of, rows) = ssr::load_summaries(&state, &scope).await?;
        let summary = rows
            .into_iter()
            .find(|r| r.name == name.as_str())
            .ok_or_else(|| {
                AppError::NotFound(format!(
                    "No consumer named “{}” is in the catalogue or has written to Idem's tables.",
                    name.as_str()
                ))
            })?;
        Ok(ConsumerDetail {
            clock: crate::serving::clock(as_of),
            summary,
            retention_days: state.claim_retention.of(name.as_str()).num_days(),
            catalogue_source: state.catalogue.source.clone(),
        })
    })
    .await
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use std::collections::{BTreeSet, HashMap};

    use chrono::{DateTime, TimeDelta, Utc};
    use idem_domain::Metric;

    use idem_domain::{ConsumerName, Within};

    use super::ConsumerSummary;
    use crate::{api::COUNT_CAP, cache::ReadKey, error::AppError, serving::AppState};

    /// At most this many consumers are listed from the tables (the catalogue's are all listed).
    pub const MAX_CONSUMERS: usize = 1_000;

    /// The summary of every consumer `within` allows, in name order, shared
    /// by every reader of that scope for the read cache's lifetime: a few
    /// statements however many consumers there are (their names each an
    /// index probe, in one statement per table), each scoped in its SQL.
    pub async fn load_summaries(
        state: &AppState,
        within: &Within,
    ) -> Result<(DateTime<Utc>, Vec<ConsumerSummary>), AppError> {
        let catalogue = state.catalogue.clone();
        let read_only = state.read_only.clone();
        let key = ReadKey::Consumers {
            within: within.clone(),
        };
        let within = within.clone();
        crate::serving::reader(state)
            .cached(key, |store| async move {
                let now = Utc::now();
                let hour_ago = (now - TimeDelta::hours(1)).into();
                let metrics = store.metrics();
                let sums = metrics
                    .sums_by_consumer(
                        &[Metric::Deliveries, Metric::DuplicateClaims],
                        hour_ago,
                        now.into(),
                        &within,
                    )
                    .await?;
                let ages = metrics
                    .gauge_max_by_consumer(
                        Metric::QueueOldestAgeSeconds,
                        (now - TimeDelta::minutes(5)).into(),
                        now.into(),
                        &within,
                    )
                    .await?;
                let mut names: BTreeSet<String> = metrics
                    .consumers(MAX_CONSUMERS, &within)
                    .await?
                    .into_iter()
                    .collect();
                names.extend(metrics.claiming_consumers(MAX_CONSUMERS, &within).await?);
                names.extend(
                    metrics
                        .dead_lettering_consumers(MAX_CONSUMERS, &within)
                        .await?,
                );
                names.extend(
                    catalogue
                        .entries()
                        .iter()
                        .map(|e| e.name.as_str())
                        .filter(|name| within.allows(name))
                        .map(str::to_owned),
                );
                let parsed: Vec<ConsumerName> = names
                    .iter()
                    .filter_map(|name| ConsumerName::parse(name.as_str()).ok())
                    .collect();
                let open = store.lists().open_by_consumer(&parsed, COUNT_CAP).await?;
                let sums: HashMap<(String, Metric), f64> = sums
                    .into_iter()
                    .map(|(consumer, metric, sum)| ((consumer, metric), sum))
                    .collect();
                let sum = |name: &str, metric: Metric| -> u64 {
                    sums.get(&(name.to_owned(), metric))
                        .map_or(0, |v| v.max(0.0).round() as u64)
                };
                let rows = names
                    .into_iter()
                    .map(|name| ConsumerSummary {
                        entry: catalogue.get(&name).cloned(),
                        deliveries: sum(&name, Metric::Deliveries),
                        duplicates: sum(&name, Metric::DuplicateClaims),
                        queue_age_seconds: ages.get(&name).copied(),
                        unknown: open.unknown(&name),
                        dead_letters: open.dead_letters(&name),
                        read_only: read_only.contains(&name),
                        name,
                    })
                    .collect::<Vec<_>>();
                Ok::<_, AppError>((now, rows))
            })
            .await
    }
}
