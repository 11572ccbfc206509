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
//! ```

use std::{collections::HashSet, path::Path};

use idem_domain::slo::{Slo, SloSet};
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SloFile {
    slo: Vec<toml::Spanned<Slo>>,
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
    if file.slo.is_empty() {
        return Err(invalid(0, "the file names no [[slo]]".to_owned()));
    }
    let mut names = HashSet::new();
    let mut slos = Vec::with_capacity(file.slo.len());
    for spanned in file.slo {
        let offset = spanned.span().start;
        let slo = spanned.into_inner();
        slo.check().map_err(|reason| invalid(offset, reason))?;
        if !names.insert(slo.name.clone()) {
            return Err(invalid(
                offset,
                format!("a second SLO named `{}`", slo.name),
            ));
        }
        slos.push(slo);
    }
    Ok(SloSet {
        slos,
        source: path.to_owned(),
    })
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
}
