//! Which consumers an objective counts: every consumer together (the
//! fleet), a team's, some named ones, or each consumer on its own — and the
//! [`Instance`]s that makes of the SLOs in force, one per SLI Idem evaluates.
//!
//! Good and valid events add up across consumers (each indicator counts
//! events, never ratios), so an objective over several consumers is the sum
//! of theirs: the store reads each consumer once for every objective.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Events, Slo, SloSet, SloStatus, Span};
use crate::{Catalogue, catalogue::check_team};

/// What one evaluated objective counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// Every consumer together.
    Fleet,
    /// A team's consumers together.
    Team(String),
    /// The named consumers together, and their team when they all belong
    /// to one.
    Consumers {
        names: Vec<String>,
        team: Option<String>,
    },
    /// One consumer of a per-consumer objective, and its team when the
    /// catalogue names one.
    Consumer { name: String, team: Option<String> },
}

impl Scope {
    /// The team it belongs to, for grouping and for alert routing: a team's
    /// objective, a consumer's team, or named consumers all of one team.
    pub fn team(&self) -> Option<&str> {
        match self {
            Scope::Fleet => None,
            Scope::Team(team) => Some(team),
            Scope::Consumer { team, .. } | Scope::Consumers { team, .. } => team.as_deref(),
        }
    }

    /// The consumer of a per-consumer objective.
    pub fn consumer(&self) -> Option<&str> {
        match self {
            Scope::Consumer { name, .. } => Some(name),
            _ => None,
        }
    }

    /// A few words for a table cell: what is counted.
    pub fn label(&self) -> String {
        match self {
            Scope::Fleet => "every consumer".to_owned(),
            Scope::Team(team) => format!("team {team}"),
            Scope::Consumers { names, .. } => names.join(", "),
            Scope::Consumer { name, .. } => name.clone(),
        }
    }
}

/// One SLI Idem evaluates: an SLO (its objective the consumer's own where
/// it has one) over one scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    pub slo: Slo,
    pub scope: Scope,
    /// The consumers summed; `None` for the fleet, which the store reads
    /// from its sums over every consumer.
    pub consumers: Option<Vec<String>>,
}

impl Instance {
    /// The instance evaluated: `events` answers "good and valid over the
    /// last `span`" for each of [`Slo::spans`].
    pub fn evaluate(&self, events: impl FnMut(Span) -> Events) -> SloStatus {
        SloStatus {
            scope: self.scope.clone(),
            ..SloStatus::evaluate(&self.slo, events)
        }
    }
}

/// Every instance of `set`: a fleet-wide SLO once, a team's or named
/// consumers' once over them, a per-consumer SLO once per consumer it
/// selects — of its team, of its list, or every consumer the catalogue names
/// or `seen` (the consumers in the tables) holds. In the order of the set,
/// consumers in name order.
pub fn instances(set: &SloSet, catalogue: &Catalogue, seen: &[String]) -> Vec<Instance> {
    let mut out = Vec::new();
    for slo in &set.slos {
        if !slo.per_consumer {
            out.extend(slo.instance(catalogue, None));
            continue;
        }
        let every = || -> Vec<String> {
            let names: BTreeSet<String> = catalogue
                .entries()
                .iter()
                .map(|e| e.name.as_str().to_owned())
                .chain(seen.iter().cloned())
                .collect();
            names.into_iter().collect()
        };
        for name in slo.selected(catalogue).unwrap_or_else(every) {
            out.extend(slo.instance(catalogue, Some(&name)));
        }
    }
    out
}

impl Slo {
    /// The consumers it selects by team or by name; `None` when it selects
    /// every consumer.
    pub fn selected(&self, catalogue: &Catalogue) -> Option<Vec<String>> {
        if let Some(team) = &self.team {
            return Some(
                catalogue
                    .entries()
                    .iter()
                    .filter(|e| &e.team == team)
                    .map(|e| e.name.as_str().to_owned())
                    .collect(),
            );
        }
        (!self.consumers.is_empty()).then(|| {
            self.consumers
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect()
        })
    }

    /// The one instance `/slo/{name}` (no consumer) or
    /// `/slo/{name}/{consumer}` shows: `None` when a per-consumer SLO is
    /// asked without a consumer or for one it does not select, or another
    /// SLO with one.
    pub fn instance(&self, catalogue: &Catalogue, consumer: Option<&str>) -> Option<Instance> {
        let selected = self.selected(catalogue);
        match (self.per_consumer, consumer) {
            (true, Some(name)) => {
                if selected
                    .as_ref()
                    .is_some_and(|s| !s.iter().any(|c| c == name))
                {
                    return None;
                }
                // The instance carries its own consumer and objective only:
                // a person shown it learns nothing of the SLO's others.
                let mut own = self.clone();
                if let Some((_, objective)) =
                    self.objectives.iter().find(|(c, _)| c.as_str() == name)
                {
                    own.objective = *objective;
                }
                own.objectives.clear();
                own.consumers.retain(|c| c.as_str() == name);
                Some(Instance {
                    slo: own,
                    scope: Scope::Consumer {
                        name: name.to_owned(),
                        team: catalogue.get(name).map(|e| e.team.clone()),
                    },
                    consumers: Some(vec![name.to_owned()]),
                })
            }
            (false, None) => {
                let scope = match (&self.team, &selected) {
                    (Some(team), _) => Scope::Team(team.clone()),
                    (None, Some(names)) => Scope::Consumers {
                        names: names.clone(),
                        team: one_team(names, catalogue),
                    },
                    (None, None) => Scope::Fleet,
                };
                Some(Instance {
                    slo: self.clone(),
                    scope,
                    consumers: selected,
                })
            }
            _ => None,
        }
    }

    /// Checks the selection on its own; [`check_against`](Self::check_against)
    /// checks it against the catalogue.
    pub(super) fn check_selection(&self) -> Result<(), String> {
        if let Some(team) = &self.team {
            check_team(team)?;
            if !self.consumers.is_empty() {
                return Err("select consumers by `team` or by `consumers`, not both".to_owned());
            }
        }
        let mut seen = BTreeSet::new();
        if let Some(twice) = self.consumers.iter().find(|c| !seen.insert(*c)) {
            return Err(format!("`consumers` names `{}` twice", twice.as_str()));
        }
        if !self.objectives.is_empty() && !self.per_consumer {
            return Err(
                "per-consumer `objectives` need `per_consumer = true`: one objective over \
                 several consumers has one target"
                    .to_owned(),
            );
        }
        if !self.consumers.is_empty()
            && let Some(stray) = self.objectives.keys().find(|c| !self.consumers.contains(c))
        {
            return Err(format!(
                "`objectives` names `{}`, which `consumers` does not select",
                stray.as_str()
            ));
        }
        Ok(())
    }

    /// Checks the selection against the consumer catalogue: a team must own
    /// a consumer, and a team's per-consumer objective may only override its
    /// own consumers. (Named consumers need not be in the catalogue: a
    /// consumer absent from it works as any other.)
    pub fn check_against(&self, catalogue: &Catalogue) -> Result<(), String> {
        let Some(team) = &self.team else {
            return Ok(());
        };
        if !catalogue.entries().iter().any(|e| &e.team == team) {
            let teams = catalogue.teams();
            return Err(format!(
                "no consumer in the catalogue belongs to team `{team}` (its teams: {})",
                if teams.is_empty() {
                    "none; set IDEM_CONSUMERS_FILE".to_owned()
                } else {
                    teams.join(", ")
                }
            ));
        }
        if let Some(stray) = self
            .objectives
            .keys()
            .find(|c| catalogue.get(c.as_str()).is_none_or(|e| &e.team != team))
        {
            return Err(format!(
                "`objectives` names `{}`, which is not a consumer of team `{team}`",
                stray.as_str()
            ));
        }
        Ok(())
    }
}

/// The team every one of `names` belongs to, if there is one.
fn one_team(names: &[String], catalogue: &Catalogue) -> Option<String> {
    let mut teams = names
        .iter()
        .map(|name| catalogue.get(name).map(|e| e.team.as_str()));
    let first = teams.next()??;
    teams.all(|t| t == Some(first)).then(|| first.to_owned())
}
