//! The consumer catalogue (`IDEM_CONSUMERS_FILE`): who owns each consumer,
//! what it does, where its runbook is, and the contract its provider keeps —
//! which decides whether a retry after an unknown outcome is safe.
//!
//! The catalogue describes; it never gates. A consumer Idem sees in its
//! tables but not in the catalogue works as any other and is shown as "not
//! in the catalogue".

use serde::{Deserialize, Serialize};

use crate::ConsumerName;

/// What the provider a consumer calls does with a repeated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderContract {
    /// The provider deduplicates on our idempotency key (Stripe's
    /// `Idempotency-Key`): a second call with the same key has no second effect.
    HonoursKey,
    /// The provider keeps a durable reference of each call that can be looked
    /// up (a message id, a transaction id), but a second call acts again.
    KeepsReference,
    /// The provider neither deduplicates nor keeps anything to look up.
    Neither,
}

impl ProviderContract {
    pub const ALL: [Self; 3] = [Self::HonoursKey, Self::KeepsReference, Self::Neither];

    /// The name the catalogue file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HonoursKey => "honours-key",
            Self::KeepsReference => "keeps-reference",
            Self::Neither => "neither",
        }
    }

    /// A few words for a table cell.
    pub fn label(self) -> &'static str {
        match self {
            Self::HonoursKey => "honours the key",
            Self::KeepsReference => "keeps a durable reference",
            Self::Neither => "neither",
        }
    }

    /// What this contract means for "mark failed and retry" after an
    /// unknown outcome: the sentence the resolution form shows.
    pub fn retry_advice(self) -> &'static str {
        match self {
            Self::HonoursKey => {
                "The provider honours the idempotency key: a retry with the same key \
                 cannot act twice, so retrying is safe even if the first call went through."
            }
            Self::KeepsReference => {
                "The provider keeps a durable reference but does not deduplicate: look the \
                 call up by its reference or time first. Retry only if the provider has no \
                 record of it; a retry after a call that went through acts twice."
            }
            Self::Neither => {
                "The provider neither honours the key nor keeps a reference: nothing proves \
                 the first call did not act. A retry may act twice; retry only when a second \
                 effect is harmless, otherwise mark failed and settle it by hand."
            }
        }
    }
}

/// One consumer as the catalogue describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogueEntry {
    pub name: ConsumerName,
    pub team: String,
    pub description: String,
    /// An `http(s)` address.
    pub runbook: Option<String>,
    pub contract: ProviderContract,
    /// Days the consumer keeps its claims, when the catalogue says.
    pub claim_retention_days: Option<i64>,
    /// The queue it consumes, as its team names it.
    pub queue: Option<String>,
    /// Where its dead letters are kept (a table, a broker's queue).
    pub dead_letters: Option<String>,
    /// How its provider's export words a call's status, besides the usual
    /// words (`queued=accepted, soft_bounce=failed`; see [`crate::StatusWords`]).
    #[serde(default)]
    pub provider_status_words: String,
}

/// Every consumer the catalogue names, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalogue {
    entries: Vec<CatalogueEntry>,
    /// Where it came from: a file's path, or empty for none.
    pub source: String,
}

impl Catalogue {
    /// The catalogue of `entries` (sorted here; names are unique by then).
    pub fn new(mut entries: Vec<CatalogueEntry>, source: impl Into<String>) -> Self {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            entries,
            source: source.into(),
        }
    }

    pub fn entries(&self) -> &[CatalogueEntry] {
        &self.entries
    }

    pub fn get(&self, consumer: &str) -> Option<&CatalogueEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(consumer))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The teams the catalogue names, each once, in order.
    pub fn teams(&self) -> Vec<&str> {
        let mut teams: Vec<&str> = self.entries.iter().map(|e| e.team.as_str()).collect();
        teams.sort_unstable();
        teams.dedup();
        teams
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A team's name: what a catalogue entry's `team` must be (and, later, what
/// a role is limited to): 1 to 64 of `a-z`, `0-9`, `-`, `_`, starting with a
/// letter or digit, so it reads the same in a label, an address and a group.
pub fn check_team(team: &str) -> Result<(), String> {
    let ok = !team.is_empty()
        && team.len() <= 64
        && team
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && team.as_bytes()[0].is_ascii_alphanumeric();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "team `{team}` must be 1 to 64 of a-z, 0-9, `-` and `_`, starting with a letter or digit"
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn entry(name: &str, team: &str) -> CatalogueEntry {
        CatalogueEntry {
            name: ConsumerName::parse(name).unwrap(),
            team: team.to_owned(),
            description: String::new(),
            runbook: None,
            contract: ProviderContract::Neither,
            claim_retention_days: None,
            queue: None,
            dead_letters: None,
            provider_status_words: String::new(),
        }
    }

    #[test]
    fn entries_are_found_by_name_whatever_order_they_came_in() {
        let catalogue = Catalogue::new(
            vec![
                entry("reminders", "growth"),
                entry("order-events", "payments"),
                entry("payment-events", "payments"),
            ],
            "consumers.toml",
        );
        assert_eq!(catalogue.get("payment-events").unwrap().team, "payments");
        assert_eq!(catalogue.get("reminders").unwrap().team, "growth");
        assert!(catalogue.get("remind").is_none());
        assert_eq!(catalogue.teams(), ["growth", "payments"]);
    }

    #[test]
    fn a_team_name_is_plain_enough_for_a_label_and_a_group() {
        assert!(check_team("payments").is_ok());
        assert!(check_team("core-2_b").is_ok());
        for bad in [
            "",
            "Payments",
            "-payments",
            "pay ments",
            "paiements\u{e9}",
            "a@b",
        ] {
            assert!(check_team(bad).is_err(), "{bad:?}");
        }
        assert!(check_team(&"a".repeat(65)).is_err());
    }

    #[test]
    fn every_contract_says_what_a_retry_risks() {
        for contract in ProviderContract::ALL {
            assert!(contract.retry_advice().contains("retry"), "{contract:?}");
        }
        assert!(ProviderContract::HonoursKey.retry_advice().contains("safe"));
        assert!(ProviderContract::Neither.retry_advice().contains("twice"));
    }
}
