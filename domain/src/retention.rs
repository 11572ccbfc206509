//! How long consumers keep their claims (`IDEM_CLAIM_RETENTION_DAYS`): one
//! horizon for every consumer, and any consumer's own. A dead letter whose
//! claim is older may not be deduplicated when replayed: the replay verdict
//! says so, and `/checks` lists such letters.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::ConsumerName;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRetention {
    default: TimeDelta,
    per_consumer: BTreeMap<String, TimeDelta>,
}

impl Default for ClaimRetention {
    /// Thirty days for everyone.
    fn default() -> Self {
        Self::days(30)
    }
}

impl ClaimRetention {
    /// The same horizon for every consumer.
    pub const fn days(days: i64) -> Self {
        Self::new(TimeDelta::days(days))
    }

    /// `horizon` for every consumer.
    pub const fn new(horizon: TimeDelta) -> Self {
        Self {
            default: horizon,
            per_consumer: BTreeMap::new(),
        }
    }

    /// The same, with `consumer`'s own horizon.
    pub fn with(mut self, consumer: &str, horizon: TimeDelta) -> Self {
        self.per_consumer.insert(consumer.to_owned(), horizon);
        self
    }

    /// `30` or `30, payments=90, reminders=7`: days for every consumer, then
    /// any consumer's own (a consumer name cannot hold `,` or `=` here).
    pub fn parse(text: &str) -> Result<Self, String> {
        let days = |value: &str| -> Result<TimeDelta, String> {
            match value.trim().parse::<i64>() {
                Ok(d) if (1..=36_500).contains(&d) => Ok(TimeDelta::days(d)),
                _ => Err(format!(
                    "“{}” is not a number of days (1 to 36500)",
                    value.trim()
                )),
            }
        };
        let mut parts = text.split(',').map(str::trim).filter(|p| !p.is_empty());
        let first = parts.next().ok_or("expected a number of days")?;
        let mut retention = Self {
            default: days(first)?,
            per_consumer: BTreeMap::new(),
        };
        for part in parts {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| format!("“{part}” is not consumer=days"))?;
            let name = ConsumerName::parse(name.trim()).map_err(|e| e.to_string())?;
            retention
                .per_consumer
                .insert(name.as_str().to_owned(), days(value)?);
        }
        Ok(retention)
    }

    /// How long `consumer` keeps its claims.
    pub fn of(&self, consumer: &str) -> TimeDelta {
        self.per_consumer
            .get(consumer)
            .copied()
            .unwrap_or(self.default)
    }

    /// The horizon of consumers without their own.
    pub fn default_horizon(&self) -> TimeDelta {
        self.default
    }

    /// The consumers with their own horizon, by name.
    pub fn overrides(&self) -> impl Iterator<Item = (&str, TimeDelta)> {
        self.per_consumer
            .iter()
            .map(|(name, d)| (name.as_str(), *d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_number_is_every_consumer_s_horizon_and_names_set_their_own() {
        let plain = ClaimRetention::parse("30").unwrap();
        assert_eq!(plain.of("payments"), TimeDelta::days(30));
        let mixed = ClaimRetention::parse("30, payments=90 ,reminders=7").unwrap();
        assert_eq!(mixed.of("payments"), TimeDelta::days(90));
        assert_eq!(mixed.of("reminders"), TimeDelta::days(7));
        assert_eq!(mixed.of("order-events"), TimeDelta::days(30));
        assert_eq!(mixed.overrides().count(), 2);
    }

    #[test]
    fn anything_else_is_refused_with_what_was_wrong() {
        for bad in [
            "",
            "thirty",
            "0",
            "30,payments",
            "30,payments=x",
            "payments=90",
            "30,=5",
        ] {
            assert!(ClaimRetention::parse(bad).is_err(), "{bad:?}");
        }
    }
}
