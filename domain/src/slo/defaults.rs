//! The SLOs Idem uses when no file is configured, as data.

use super::{Indicator, Objective, Slo, default_window};
use crate::metric::Metric;

/// One built-in SLO, before it becomes an [`Slo`].
struct Preset {
    name: &'static str,
    description: &'static str,
    sli: Indicator,
    objective: f64,
    min_events: u64,
}

/// The SLOs Idem uses when no file is configured. Each says why it exists.
pub fn default_slos() -> Vec<Slo> {
    PRESETS
        .iter()
        .map(|preset| Slo {
            name: preset.name.to_owned(),
            description: preset.description.to_owned(),
            sli: preset.sli.clone(),
            objective: Objective(preset.objective),
            window: default_window(),
            min_events: preset.min_events,
            team: None,
            consumers: Vec::new(),
            per_consumer: false,
            objectives: Default::default(),
        })
        .collect()
}

/// The built-in SLOs, in the order the pages list them.
const PRESETS: [Preset; 8] = [
    Preset {
        name: "unknown-resolved-15m",
        description: "Unknown outcomes resolved within 15 minutes. An unknown outcome may be a lost or a doubled payment; \
             someone must settle it while the customer is still waiting.",
        sli: Indicator::UnknownResolved {
            within_seconds: 900.0,
        },
        objective: 0.999,
        min_events: 5,
    },
    Preset {
        name: "not-dead-lettered",
        description: "Deliveries that do not end in the dead-letter queue. Every dead letter is an effect a person must \
             replay or discard by hand.",
        sli: Indicator::Counters {
            valid: Metric::Deliveries,
            bad: Metric::DeadLetters,
        },
        objective: 0.999,
        min_events: 100,
    },
    Preset {
        name: "transactions-committed",
        description: "Claim transactions that commit. A rolled-back claim is a redelivery later; many of them mean \
             contention or crashes in the consumer.",
        sli: Indicator::Counters {
            valid: Metric::Deliveries,
            bad: Metric::TransactionFailures,
        },
        objective: 0.999,
        min_events: 100,
    },
    Preset {
        name: "duplicate-claim-rate",
        description: "Deliveries that find their key already claimed stay at or under 1%. Duplicates are harmless while \
             the claim holds, but a rising rate means publishers retry or leases expire, and each duplicate \
             is a chance for a consumer without a durable key to repeat an effect.",
        sli: Indicator::Counters {
            valid: Metric::Deliveries,
            bad: Metric::DuplicateClaims,
        },
        objective: 0.99,
        min_events: 100,
    },
    Preset {
        name: "queue-age-60s",
        description: "Minutes in which the oldest queued message was at most 60 seconds old. Older messages mean \
             reminders and payments go out late.",
        sli: Indicator::GaugeSlices {
            gauge: Metric::QueueOldestAgeSeconds,
            at_most_seconds: 60.0,
        },
        objective: 0.995,
        min_events: 30,
    },
    Preset {
        name: "outbox-age-30s",
        description: "Minutes in which the oldest unpublished outbox row was at most 30 seconds old. A stuck relay \
             holds back every effect that could not join the claim's transaction, replays included.",
        sli: Indicator::GaugeSlices {
            gauge: Metric::OutboxOldestAgeSeconds,
            at_most_seconds: 30.0,
        },
        objective: 0.995,
        min_events: 30,
    },
    Preset {
        name: "reconciled-15m",
        description: "Keys whose outcome is recorded within 15 minutes of the first delivery. Until then nobody can \
             say whether the effect happened.",
        sli: Indicator::Histogram {
            histogram: Metric::OutcomeLatencySeconds,
            at_most_seconds: 900.0,
        },
        objective: 0.99,
        min_events: 100,
    },
    Preset {
        name: "recovery-60m",
        description: "Replays and resolutions taken within 60 minutes of the dead letter or unknown outcome \
             appearing: alert to replay-safe recovery.",
        sli: Indicator::Recovery {
            within_seconds: 3600.0,
        },
        objective: 0.90,
        min_events: 5,
    },
];
