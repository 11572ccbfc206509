//! The consumer catalogue file (`IDEM_CONSUMERS_FILE`): TOML, one
//! `[[consumer]]` table per consumer. A file that does not parse or does
//! not make sense stops start-up with the file, the line and the reason, as
//! the SLO file does. Without a file the catalogue is empty (the demo brings
//! its own, `demo/consumers.toml`), and every consumer is shown as "not in
//! the catalogue".
//!
//! ```toml
//! [[consumer]]
//! name = "payment-webhooks"
//! team = "payments"
//! description = "Applies the payment provider's webhooks to the ledger."
//! runbook = "https://wiki.example.com/runbooks/payment-webhooks"
//! provider_contract = "honours-key"   # or "keeps-reference", "neither"
//! claim_retention_days = 90           # optional: IDEM_CLAIM_RETENTION_DAYS's default otherwise
//! queue = "payment-webhooks"          # optional
//! dead_letters = "table dead_letters" # optional: where its dead letters are kept
//! provider_status_words = "queued=accepted, soft_bounce=failed" # optional: its provider export's own words
//! ```

use std::{collections::HashSet, path::Path};

use chrono::TimeDelta;
use idem_domain::{Catalogue, CatalogueEntry, ClaimRetention, ConsumerName, ProviderContract};
use serde::Deserialize;

use crate::slo_config::line_of;

#[derive(Debug, thiserror::Error)]
pub enum ConsumersConfigError {
    #[error("cannot read the consumers file {path}")]
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
struct ConsumersFile {
    consumer: Vec<toml::Spanned<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    team: String,
    #[serde(default)]
    description: String,
    runbook: Option<String>,
    provider_contract: ProviderContract,
    claim_retention_days: Option<i64>,
    queue: Option<String>,
    dead_letters: Option<String>,
    #[serde(default)]
    provider_status_words: String,
}

/// The longest description, queue or dead-letter source the file may give.
const MAX_TEXT: usize = 2_000;

impl Entry {
    fn check(self) -> Result<CatalogueEntry, String> {
        let name = ConsumerName::parse(self.name).map_err(|e| e.to_string())?;
        idem_domain::check_team(&self.team)?;
        if let Some(runbook) = &self.runbook {
            let parsed = url::Url::parse(runbook)
                .map_err(|e| format!("runbook `{runbook}` is not an address: {e}"))?;
            if !matches!(parsed.scheme(), "https" | "http") {
                return Err(format!(
                    "runbook `{runbook}` must be an http or https address"
                ));
            }
        }
        if let Some(days) = self.claim_retention_days
            && !(1..=36_500).contains(&days)
        {
            return Err(format!(
                "claim_retention_days {days} is not a number of days (1 to 36500)"
            ));
        }
        if self.description.len() > MAX_TEXT {
            return Err(format!("description is longer than {MAX_TEXT} bytes"));
        }
        for (field, text) in [("queue", &self.queue), ("dead_letters", &self.dead_letters)] {
            if text
                .as_ref()
                .is_some_and(|t| t.len() > MAX_TEXT || t.chars().any(char::is_control))
            {
                return Err(format!(
                    "{field} is longer than {MAX_TEXT} bytes or holds a control character"
                ));
            }
        }
        idem_domain::StatusWords::parse(&self.provider_status_words)
            .map_err(|e| format!("provider_status_words: {e}"))?;
        Ok(CatalogueEntry {
            name,
            team: self.team,
            description: self.description.trim().to_owned(),
            runbook: self.runbook,
            contract: self.provider_contract,
            claim_retention_days: self.claim_retention_days,
            queue: self.queue,
            dead_letters: self.dead_letters,
            provider_status_words: self.provider_status_words,
        })
    }
}

/// The catalogue at `path`, or an empty one when there is none.
pub fn load(path: Option<&Path>) -> Result<Catalogue, ConsumersConfigError> {
    let Some(path) = path else {
        return Ok(Catalogue::default());
    };
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConsumersConfigError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text, &shown)
}

/// The demo's catalogue: its consumers, owned by two teams.
pub fn demo() -> Catalogue {
    parse(include_str!("demo/consumers.toml"), "the demo's catalogue")
        .expect("the demo's catalogue is checked by a test")
}

/// Parses the text of a consumers file (`path` names it in errors).
pub fn parse(text: &str, path: &str) -> Result<Catalogue, ConsumersConfigError> {
    let invalid = |offset: usize, reason: String| ConsumersConfigError::Invalid {
        path: path.to_owned(),
        line: line_of(text, offset),
        reason,
    };
    let file: ConsumersFile = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        invalid(offset, e.message().trim().to_owned())
    })?;
    if file.consumer.is_empty() {
        return Err(invalid(0, "the file names no [[consumer]]".to_owned()));
    }
    let mut names = HashSet::new();
    let mut entries = Vec::with_capacity(file.consumer.len());
    for spanned in file.consumer {
        let offset = spanned.span().start;
        let entry = spanned
            .into_inner()
            .check()
            .map_err(|reason| invalid(offset, reason))?;
        if !names.insert(entry.name.clone()) {
            return Err(invalid(
                offset,
                format!("a second consumer named `{}`", entry.name.as_str()),
            ));
        }
        entries.push(entry);
    }
    Ok(Catalogue::new(entries, path))
}

/// `retention` (from `IDEM_CLAIM_RETENTION_DAYS`) with each catalogued
/// consumer's own horizon. A consumer given a horizon in both places is
/// refused: the catalogue replaces the variable's per-consumer part, and two
/// answers to one question would leave one of them silently wrong.
pub fn retention(
    catalogue: &Catalogue,
    retention: ClaimRetention,
) -> Result<ClaimRetention, String> {
    let mut merged = retention.clone();
    for entry in catalogue.entries() {
        let Some(days) = entry.claim_retention_days else {
            continue;
        };
        let name = entry.name.as_str();
        if retention.overrides().any(|(other, _)| other == name) {
            return Err(format!(
                "`{name}`'s claim retention is set both in IDEM_CLAIM_RETENTION_DAYS and in \
                 {}: keep it in the catalogue only",
                catalogue.source
            ));
        }
        merged = merged.with(name, TimeDelta::days(days));
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[consumer]]
name = "payment-webhooks"
team = "payments"
description = "Applies the payment provider's webhooks to the ledger."
runbook = "https://wiki.example.com/runbooks/payment-webhooks"
provider_contract = "honours-key"
claim_retention_days = 90

[[consumer]]
name = "reminders"
team = "growth"
provider_contract = "keeps-reference"
queue = "reminders.fifo"
dead_letters = "RabbitMQ queue reminders.dead"
"#;

    fn error(text: &str) -> (usize, String) {
        match parse(text, "consumers.toml") {
            Err(ConsumersConfigError::Invalid { line, reason, .. }) => (line, reason),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn a_file_names_each_consumer_s_team_contract_and_retention() {
        let catalogue = parse(GOOD, "/etc/idem/consumers.toml").unwrap();
        assert_eq!(catalogue.source, "/etc/idem/consumers.toml");
        let payments = catalogue.get("payment-webhooks").unwrap();
        assert_eq!(payments.team, "payments");
        assert_eq!(payments.contract, ProviderContract::HonoursKey);
        assert_eq!(payments.claim_retention_days, Some(90));
        let reminders = catalogue.get("reminders").unwrap();
        assert_eq!(reminders.contract, ProviderContract::KeepsReference);
        assert_eq!(reminders.queue.as_deref(), Some("reminders.fifo"));
        assert_eq!(reminders.description, "");
        assert_eq!(catalogue.teams(), ["growth", "payments"]);
    }

    #[test]
    fn what_cannot_be_right_names_its_line_and_reason() {
        let (line, reason) = error(&GOOD.replace("\"growth\"", "\"Growth Team\""));
        assert_eq!(line, 10, "the line of the second [[consumer]]");
        assert!(reason.contains("team `Growth Team`"), "{reason}");

        let (line, reason) = error(&GOOD.replace("\"keeps-reference\"", "\"maybe\""));
        assert_eq!(line, 13);
        assert!(reason.contains("honours-key"), "{reason}");

        let (line, reason) = error(&GOOD.replace("https://wiki", "javascript://wiki"));
        assert_eq!(line, 2);
        assert!(reason.contains("http or https"), "{reason}");

        let (line, reason) = error(&GOOD.replace("= 90", "= 0"));
        assert_eq!(line, 2);
        assert!(reason.contains("1 to 36500"), "{reason}");

        let (line, reason) = error(&GOOD.replace("\"reminders\"", "\"payment-webhooks\""));
        assert_eq!(line, 10);
        assert!(reason.contains("a second consumer"), "{reason}");

        let (line, reason) = error(&GOOD.replace("queue =", "queues ="));
        assert_eq!(line, 14);
        assert!(reason.contains("queues"), "{reason}");

        let (_, reason) = error(&GOOD.replace("\"reminders\"", "\"\""));
        assert!(reason.contains("consumer name"), "{reason}");

        let (line, reason) = error("# nothing here\n");
        assert_eq!(line, 1);
        assert!(reason.contains("consumer"), "{reason}");
    }

    #[test]
    fn the_catalogue_s_retention_replaces_the_variable_s_per_consumer_part() {
        let catalogue = parse(GOOD, "consumers.toml").unwrap();
        let merged = retention(
            &catalogue,
            ClaimRetention::parse("30, reminders=7").unwrap(),
        )
        .unwrap();
        assert_eq!(merged.of("payment-webhooks"), TimeDelta::days(90));
        assert_eq!(merged.of("reminders"), TimeDelta::days(7));
        assert_eq!(merged.of("order-events"), TimeDelta::days(30));

        let both = retention(
            &catalogue,
            ClaimRetention::parse("30, payment-webhooks=60").unwrap(),
        )
        .unwrap_err();
        assert!(both.contains("`payment-webhooks`"), "{both}");
    }

    #[test]
    fn the_demo_s_catalogue_is_a_valid_file() {
        let catalogue = demo();
        assert!(catalogue.entries().len() >= 3);
        assert!(catalogue.teams().len() >= 2);
    }
}
