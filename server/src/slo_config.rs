//! The SLO file (`IDEM_SLO_FILE`): TOML, one `[[slo]]` table per objective.
//! Without a file Idem uses the built-in defaults ([`default_slos`]). A file
//! that does not parse or does not make sense stops start-up with the file,
//! the line and the reason.
//!
//! ```toml
//! [[slo]]
//! name = "queue-age-60s"
//! description = "Minutes in which the oldest queued message was at most 60 seconds old."
//! objective = 0.995
//! window = "28d"          # optional, 28d by default
//! min_events = 30         # optional: fewer valid events than this never alert
//! sli = { kind = "gauge_slices", gauge = "queue_oldest_age_seconds", at_most_seconds = 60 }
//!
//! [[slo]]
//! name = "payments-not-dead-lettered"
//! description = "Payments that do not end in the dead-letter queue."
//! objective = 0.9999
//! team = "payments"       # or consumers = ["payment-webhooks"]; neither: every consumer
//! per_consumer = true     # each consumer its own SLI, budget, burn rates, page and alerts
//! objectives = { "ledger-sync" = 0.999 }  # a consumer's own objective
//! sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }
//!
//! # Optional: keep the built-in objectives beside these, each consumer
//! # its own (per_consumer = false: over the fleet, as without a file).
//! [builtins]
//! per_consumer = true
//! objectives = { "not-dead-lettered" = { "payment-webhooks" = 0.9999 } }
//! ```
//!
//! A team must own a consumer in the catalogue (`IDEM_CONSUMERS_FILE`); that
//! is checked with the catalogue in force ([`check_against`]).

use std::{
    collections::{BTreeMap, HashSet},
    path::Path,
};

use idem_domain::{
    Catalogue, ConsumerName,
    slo::{Objective, Slo, SloSet, default_slos},
};
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum SloConfigError {
    #[error("cannot read the SLO file {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Invalid {
        path: String,
        line: usize,
        reason: String,
    },
    #[error("{file}: SLO `{slo}`: {reason}")]
    Catalogue {
        file: String,
        slo: String,
        reason: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SloFile {
    #[serde(default)]
    slo: Vec<toml::Spanned<Slo>>,
    builtins: Option<toml::Spanned<Builtins>>,
}

/// `[builtins]`: the built-in objectives kept beside the file's own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Builtins {
    #[serde(default)]
    per_consumer: bool,
    /// Per built-in objective's name, consumers' own objectives.
    #[serde(default)]
    objectives: BTreeMap<String, BTreeMap<ConsumerName, Objective>>,
}

impl Builtins {
    fn slos(self) -> Result<Vec<Slo>, String> {
        let mut slos = default_slos();
        for (name, objectives) in self.objectives {
            let Some(slo) = slos.iter_mut().find(|s| s.name == name) else {
                let known: Vec<String> = default_slos().into_iter().map(|s| s.name).collect();
                return Err(format!(
                    "`{name}` is not a built-in objective; they are {}",
                    known.join(", ")
                ));
            };
            slo.objectives = objectives;
        }
        for slo in &mut slos {
            slo.per_consumer = self.per_consumer;
            slo.check()
                .map_err(|reason| format!("built-in `{}`: {reason}", slo.name))?;
        }
        Ok(slos)
    }
}

/// The SLOs from `path`, or the built-in defaults when there is none.
pub fn load(path: Option<&Path>) -> Result<SloSet, SloConfigError> {
    let Some(path) = path else {
        return Ok(SloSet::default());
    };
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SloConfigError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text, &shown)
}

/// The demo's objectives: the built-ins over the fleet, and its two teams' own.
pub fn demo() -> SloSet {
    parse(include_str!("demo/slo.toml"), "the demo's objectives")
        .expect("the demo's objectives are checked by a test")
}

/// Parses the text of an SLO file (`path` names it in errors).
pub fn parse(text: &str, path: &str) -> Result<SloSet, SloConfigError> {
    let invalid = |offset: usize, reason: String| SloConfigError::Invalid {
        path: path.to_owned(),
        line: line_of(text, offset),
        reason,
    };
    let file: SloFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        invalid(offset, e.message().trim().to_owned())
    })?;
    if file.slo.is_empty() && file.builtins.is_none() {
        return Err(invalid(
            0,
            "the file names no [[slo]] and no [builtins]".to_owned(),
        ));
    }
    let mut names = HashSet::new();
    let mut slos = Vec::with_capacity(file.slo.len());
    if let Some(builtins) = file.builtins {
        let offset = builtins.span().start;
        for slo in builtins
            .into_inner()
            .slos()
            .map_err(|r| invalid(offset, r))?
        {
            names.insert(slo.name.clone());
            slos.push(slo);
        }
    }
    for spanned in file.slo {
        let offset = spanned.span().start;
        let slo = spanned.into_inner();
        slo.check().map_err(|reason| invalid(offset, reason))?;
        if !names.insert(slo.name.clone()) {
            return Err(invalid(
                offset,
                format!("a second SLO named `{}` (the built-ins count)", slo.name),
            ));
        }
        slos.push(slo);
    }
    Ok(SloSet {
        slos,
        source: path.to_owned(),
    })
}

/// Checks every SLO's selection against the catalogue in force (the file's,
/// or the demo's), which start-up knows only after it has read both.
pub fn check_against(set: &SloSet, catalogue: &Catalogue) -> Result<(), SloConfigError> {
    for slo in &set.slos {
        slo.check_against(catalogue)
            .map_err(|reason| SloConfigError::Catalogue {
                file: set.source.clone(),
                slo: slo.name.clone(),
                reason,
            })?;
    }
    Ok(())
}

/// The 1-based line a byte offset falls on.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use idem_domain::{Metric, slo::Indicator};

    use super::*;

    const GOOD: &str = r#"
[[slo]]
name = "payments-dead-letters"
description = "Payments that do not end in the dead-letter queue."
objective = 0.9995
window = "30d"
min_events = 500
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }

[[slo]]
name = "queue-age"
description = "Oldest queued message at most two minutes old."
objective = 0.99
sli = { kind = "gauge_slices", gauge = "queue_oldest_age_seconds", at_most_seconds = 120 }
"#;

    fn error(text: &str) -> (usize, String) {
        match parse(text, "slo.toml") {
            Err(SloConfigError::Invalid { line, reason, .. }) => (line, reason),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn a_file_replaces_the_defaults_and_names_itself() {
        let set = parse(GOOD, "/etc/idem/slo.toml").unwrap();
        assert_eq!(set.source, "/etc/idem/slo.toml");
        assert_eq!(set.slos.len(), 2);
        let first = &set.slos[0];
        assert_eq!(first.window.to_string(), "30d");
        assert_eq!(first.min_events, 500);
        assert_eq!(
            first.sli,
            Indicator::Counters {
                valid: Metric::Deliveries,
                bad: Metric::DeadLetters
            }
        );
        assert_eq!(set.slos[1].window.to_string(), "28d", "the default window");
    }

    #[test]
    fn the_demos_objectives_fit_the_demos_catalogue() {
        let set = demo();
        check_against(&set, &crate::consumers_config::demo()).unwrap();
        assert_eq!(set.slos.len(), 8 + 4);
        assert!(set.slos.iter().any(|s| s.team.as_deref() == Some("growth")));
    }

    #[test]
    fn no_file_means_the_built_in_defaults() {
        let set = load(None).unwrap();
        assert_eq!(set.source, "built-in defaults");
        assert_eq!(set.slos.len(), 8);
    }

    #[test]
    fn an_objective_out_of_range_names_its_line() {
        let (line, reason) = error(&GOOD.replace("objective = 0.99\n", "objective = 99.5\n"));
        assert_eq!(line, 13);
        assert!(reason.contains("strictly between 0 and 1"), "{reason}");
    }

    #[test]
    fn an_unknown_metric_names_its_line_and_the_known_ones() {
        let (line, reason) = error(&GOOD.replace("\"dead_letters\"", "\"dead_leters\""));
        assert_eq!(line, 8);
        assert!(reason.contains("unknown metric `dead_leters`"), "{reason}");
        assert!(reason.contains("dead_letters"), "{reason}");
    }

    #[test]
    fn a_threshold_rollups_cannot_answer_names_the_slo() {
        let (line, reason) = error(&GOOD.replace("at_most_seconds = 120", "at_most_seconds = 100"));
        assert_eq!(line, 10, "the line of the second [[slo]]");
        assert!(reason.contains("not a bucket bound"), "{reason}");
    }

    #[test]
    fn a_bad_window_a_typo_and_a_duplicate_are_refused() {
        let (line, reason) = error(&GOOD.replace("\"30d\"", "\"a month\""));
        assert_eq!(line, 6);
        assert!(reason.contains("not a span of time"), "{reason}");

        let (line, reason) = error(&GOOD.replace("min_events", "minimum_events"));
        assert_eq!(line, 7);
        assert!(reason.contains("minimum_events"), "{reason}");

        let (line, reason) = error(&GOOD.replace("\"queue-age\"", "\"payments-dead-letters\""));
        assert_eq!(line, 10);
        assert!(reason.contains("a second SLO"), "{reason}");

        let (line, _) = error("[[slo]\nname = 1");
        assert_eq!(line, 1);
    }

    const TEAMS: &str = r#"
[[slo]]
name = "payments-not-dead-lettered"
description = "Payments that do not end in the dead-letter queue."
objective = 0.9999
team = "payments"
per_consumer = true
objectives = { "ledger-sync" = 0.999 }
sli = { kind = "counters", valid = "deliveries", bad = "dead_letters" }

[[slo]]
name = "checkout-queue-age"
description = "Checkout's queues, together."
objective = 0.99
consumers = ["order-events", "payment-webhooks"]
sli = { kind = "gauge_slices", gauge = "queue_oldest_age_seconds", at_most_seconds = 120 }
"#;

    fn catalogue() -> Catalogue {
        crate::consumers_config::parse(
            r#"
[[consumer]]
name = "payment-webhooks"
team = "payments"
description = "Ledger webhooks."
provider_contract = "honours-key"

[[consumer]]
name = "ledger-sync"
team = "payments"
description = "Ledger sync."
provider_contract = "keeps-reference"

[[consumer]]
name = "reminders"
team = "growth"
description = "Renewal reminders."
provider_contract = "neither"
"#,
            "consumers.toml",
        )
        .unwrap()
    }

    #[test]
    fn an_slo_selects_a_team_or_named_consumers_each_on_its_own_or_together() {
        let set = parse(TEAMS, "slo.toml").unwrap();
        check_against(&set, &catalogue()).unwrap();
        let payments = &set.slos[0];
        assert_eq!(payments.team.as_deref(), Some("payments"));
        assert!(payments.per_consumer);
        assert_eq!(
            payments
                .objectives
                .values()
                .map(|o| o.get())
                .collect::<Vec<_>>(),
            [0.999]
        );
        let checkout = &set.slos[1];
        assert_eq!(checkout.consumers.len(), 2);
        assert!(!checkout.per_consumer);
    }

    #[test]
    fn a_consumers_own_objective_needs_a_per_consumer_slo_that_selects_it() {
        let (line, reason) = error(&TEAMS.replace("per_consumer = true\n", ""));
        assert_eq!(line, 2);
        assert!(reason.contains("per_consumer = true"), "{reason}");

        let both = TEAMS.replace(
            "consumers = [\"order-events\"",
            "team = \"checkout\"\nconsumers = [\"order-events\"",
        );
        let (line, reason) = error(&both);
        assert_eq!(line, 11);
        assert!(reason.contains("not both"), "{reason}");

        let stray = TEAMS.replace(
            "consumers = [\"order-events\", \"payment-webhooks\"]",
            "consumers = [\"order-events\", \"payment-webhooks\"]\nper_consumer = true\nobjectives = { reminders = 0.9 }",
        );
        let (line, reason) = error(&stray);
        assert_eq!(line, 11);
        assert!(reason.contains("`reminders`"), "{reason}");
    }

    #[test]
    fn a_team_must_own_a_consumer_and_its_overrides_must_be_the_teams() {
        let set = parse(
            &TEAMS.replace("\"payments\"\nper", "\"billing\"\nper"),
            "slo.toml",
        )
        .unwrap();
        let err = check_against(&set, &catalogue()).unwrap_err().to_string();
        assert!(err.contains("team `billing`"), "{err}");
        assert!(err.contains("growth, payments"), "{err}");

        let set = parse(
            &TEAMS.replace("\"ledger-sync\" = 0.999", "reminders = 0.9"),
            "slo.toml",
        )
        .unwrap();
        let err = check_against(&set, &catalogue()).unwrap_err().to_string();
        assert!(
            err.contains("payments-not-dead-lettered") && err.contains("`reminders`"),
            "{err}"
        );
    }

    #[test]
    fn the_built_ins_can_be_kept_each_consumer_its_own_with_overrides() {
        let text = "[builtins]\nper_consumer = true\nobjectives = { \"not-dead-lettered\" = { \"payment-webhooks\" = 0.9999 } }\n";
        let set = parse(text, "slo.toml").unwrap();
        assert_eq!(set.slos.len(), 8);
        assert!(set.slos.iter().all(|s| s.per_consumer));
        let kept = set
            .slos
            .iter()
            .find(|s| s.name == "not-dead-lettered")
            .unwrap();
        assert_eq!(kept.objectives.len(), 1);

        let (line, reason) = error(&text.replace("not-dead-lettered", "not-dead"));
        assert_eq!(line, 1);
        assert!(
            reason.contains("not a built-in") && reason.contains("queue-age-60s"),
            "{reason}"
        );

        let (line, reason) = error(&text.replace("per_consumer = true", "per_consumer = false"));
        assert_eq!(line, 1);
        assert!(reason.contains("per_consumer = true"), "{reason}");

        let twice = format!(
            "{text}{}",
            GOOD.replace("payments-dead-letters", "queue-age-60s")
        );
        let (_, reason) = error(&twice);
        assert!(
            reason.contains("a second SLO named `queue-age-60s`"),
            "{reason}"
        );
    }
}
