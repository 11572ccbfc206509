//! Consumers Idem reads through an adapter over their own tables
//! (`IDEM_READ_ONLY_CONSUMERS`; see `adapters/`). Their pages work; the
//! actions do not, because each would write where the consumer's workers
//! never look: a resolution changes Idem's mirror of the claim, not the
//! consumer's own row, and a replay goes to an outbox no relay of theirs
//! publishes.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::{ConsumerName, KeyError};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOnlyConsumers(BTreeSet<String>);

impl ReadOnlyConsumers {
    /// A comma-separated list of consumer names (spaces around a name are
    /// ignored; a name that itself contains a comma cannot be listed).
    pub fn parse(list: &str) -> Result<Self, KeyError> {
        list.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(|name| ConsumerName::parse(name).map(|n| n.as_str().to_owned()))
            .collect::<Result<_, _>>()
            .map(ReadOnlyConsumers)
    }

    pub fn contains(&self, consumer: &str) -> bool {
        self.0.contains(consumer)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// Why nobody can act on this consumer's keys from Idem, or `None` when
    /// they can.
    pub fn reason(&self, consumer: &str) -> Option<String> {
        self.contains(consumer).then(|| {
            format!(
                "“{consumer}” is read through an adapter over its own tables, so Idem shows it \
                 but cannot change it: a resolution or replay would write where its workers \
                 never look. Act in {consumer}’s own system; this page follows within seconds."
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_names_is_split_on_commas_and_trimmed() {
        let list = ReadOnlyConsumers::parse(" billing-jobs, payment-events ,,").unwrap();
        assert_eq!(
            list.names().collect::<Vec<_>>(),
            ["billing-jobs", "payment-events"]
        );
        assert!(list.contains("billing-jobs"));
        assert!(!list.contains("reminders"));
        assert!(list.reason("reminders").is_none());
        assert!(
            list.reason("billing-jobs")
                .unwrap()
                .contains("billing-jobs")
        );
    }

    #[test]
    fn a_name_with_a_control_character_is_refused() {
        assert!(ReadOnlyConsumers::parse("ok,bad\u{7}name").is_err());
    }

    #[test]
    fn an_empty_setting_means_none() {
        assert_eq!(
            ReadOnlyConsumers::parse("").unwrap(),
            ReadOnlyConsumers::default()
        );
    }
}
