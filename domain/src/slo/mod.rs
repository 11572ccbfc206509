//! Service-level objectives: what each one counts, and the arithmetic that
//! turns counts into an SLI, an error budget, burn rates and alert tiers.
//!
//! Everything here is pure: the store supplies [`Events`] (good and valid
//! counts) for a span of time, and this module decides what they mean. The
//! formulas follow the Google SRE workbook's "Alerting on SLOs" chapter:
//!
//! - SLI = Σgood / Σvalid over the window — event-weighted, never an average
//!   of per-minute ratios (a quiet minute must not weigh as much as a busy one);
//! - error budget = 1 − objective;
//! - burn rate over a span = error ratio over that span / error budget
//!   (1× spends exactly the budget by the end of the window);
//! - budget remaining = 1 − burn rate over the whole window;
//! - an alert tier fires when the burn rate exceeds its threshold over both its
//!   long and its short span, and the long span saw at least the SLO's minimum
//!   number of events.

use std::{collections::BTreeMap, fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::{
    ConsumerName,
    metric::{Metric, MetricKind},
};

mod defaults;
mod eval;
mod events;
mod scope;
#[cfg(test)]
mod tests;

pub use defaults::default_slos;
pub use eval::{AlertState, Events, Severity, SloStatus, TIERS, Tier, TierReading, worst_first};
pub use events::Recovered;
pub use scope::{Instance, Scope, instances};

/// A length of time as people write it in a config file: `90s`, `30m`, `6h`, `28d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Span {
    seconds: i64,
}

impl Span {
    pub const fn seconds(seconds: i64) -> Self {
        Span { seconds }
    }
    pub const fn minutes(minutes: i64) -> Self {
        Span::seconds(minutes * 60)
    }
    pub const fn hours(hours: i64) -> Self {
        Span::minutes(hours * 60)
    }
    pub const fn days(days: i64) -> Self {
        Span::hours(days * 24)
    }
    pub const fn as_seconds(self) -> i64 {
        self.seconds
    }
}

/// The longest window an SLO may have: rollups are kept for at least this long.
pub const MAX_WINDOW: Span = Span::days(90);

impl FromStr for Span {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let expected = || {
            format!(
                "`{text}` is not a span of time: write a whole number and a unit, like 90s, 30m, 6h or 28d"
            )
        };
        let number: i64 = number.parse().map_err(|_| expected())?;
        let unit = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => return Err(expected()),
        };
        let seconds = number.checked_mul(unit).ok_or_else(expected)?;
        if seconds <= 0 || seconds > MAX_WINDOW.seconds {
            return Err(format!("`{text}` must be longer than zero and at most 90d"));
        }
        Ok(Span { seconds })
    }
}

impl TryFrom<String> for Span {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        value.parse()
    }
}

impl From<Span> for String {
    fn from(value: Span) -> Self {
        value.to_string()
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.seconds;
        match () {
            _ if s % 86_400 == 0 => write!(f, "{}d", s / 86_400),
            _ if s % 3600 == 0 => write!(f, "{}h", s / 3600),
            _ if s % 60 == 0 => write!(f, "{}m", s / 60),
            _ => write!(f, "{s}s"),
        }
    }
}

/// An objective: the share of valid events that must be good, strictly
/// between 0 and 1 (an objective of 1 leaves no budget to burn).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Objective(f64);

impl Objective {
    pub fn get(self) -> f64 {
        self.0
    }

    /// The error budget: the share of valid events allowed to be bad.
    pub fn error_budget(self) -> f64 {
        1.0 - self.0
    }
}

impl TryFrom<f64> for Objective {
    type Error = String;
    fn try_from(value: f64) -> Result<Self, String> {
        if value > 0.0 && value < 1.0 {
            Ok(Objective(value))
        } else {
            Err(format!(
                "objective {value} must be a fraction strictly between 0 and 1 (0.999 means 99.9%)"
            ))
        }
    }
}

impl From<Objective> for f64 {
    fn from(value: Objective) -> Self {
        value.0
    }
}

/// Upper bounds (seconds) into which Idem's hourly rollups sort each minute's
/// gauge reading, so "slices at or under a threshold" can be counted from
/// rollups. A gauge-slice SLO's threshold must be one of them.
pub const GAUGE_SLICE_BOUNDS: &[f64] = &[
    1.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
];

/// Where an SLO's good and valid events come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Indicator {
    /// Valid: the `valid` counter. Good: valid minus the `bad` counter.
    Counters {
        #[serde(with = "metric_by_name")]
        valid: Metric,
        #[serde(with = "metric_by_name")]
        bad: Metric,
    },
    /// Valid: each consumer-minute with a reading of the gauge. Good: those
    /// whose reading was at most the threshold.
    GaugeSlices {
        #[serde(with = "metric_by_name")]
        gauge: Metric,
        at_most_seconds: f64,
    },
    /// Valid: every observation of the histogram. Good: those at most the
    /// threshold, which must be one of the histogram's bucket bounds.
    Histogram {
        #[serde(with = "metric_by_name")]
        histogram: Metric,
        at_most_seconds: f64,
    },
    /// Valid: unknown outcomes the consumers recorded. Good: those an
    /// operator resolved within the threshold of the claim becoming unknown.
    UnknownResolved { within_seconds: f64 },
    /// Valid: every recovery action (a replay or a resolution). Good: those
    /// taken within the threshold of the item becoming actionable.
    Recovery { within_seconds: f64 },
}

impl Indicator {
    /// Checks what serde cannot: metric kinds and thresholds that rollups can answer.
    pub fn check(&self) -> Result<(), String> {
        let kind = |metric: Metric, kind: MetricKind, role: &str| {
            if metric.kind() == kind {
                Ok(())
            } else {
                Err(format!("`{}` is not a {role}", metric.name()))
            }
        };
        match *self {
            Indicator::Counters { valid, bad } => {
                kind(valid, MetricKind::Counter, "counter")?;
                kind(bad, MetricKind::Counter, "counter")
            }
            Indicator::GaugeSlices {
                gauge,
                at_most_seconds,
            } => {
                kind(gauge, MetricKind::Gauge, "gauge")?;
                one_of(at_most_seconds, GAUGE_SLICE_BOUNDS)
            }
            Indicator::Histogram {
                histogram,
                at_most_seconds,
            } => {
                kind(histogram, MetricKind::Histogram, "histogram")?;
                one_of(at_most_seconds, histogram.buckets())
            }
            Indicator::UnknownResolved { within_seconds }
            | Indicator::Recovery { within_seconds } => {
                if within_seconds > 0.0 && within_seconds.is_finite() {
                    Ok(())
                } else {
                    Err(format!("within_seconds {within_seconds} must be positive"))
                }
            }
        }
    }

    /// One sentence for the SLO pages: what is counted as good, out of what.
    pub fn describe(&self) -> String {
        match self {
            Indicator::Counters { valid, bad } => {
                format!(
                    "{} without {}, out of all {}",
                    valid.name(),
                    bad.name(),
                    valid.name()
                )
            }
            Indicator::GaugeSlices {
                gauge,
                at_most_seconds,
            } => format!(
                "consumer-minutes whose {} was at most {}, out of all minutes with a reading",
                gauge.name(),
                Span::seconds(*at_most_seconds as i64)
            ),
            Indicator::Histogram {
                histogram,
                at_most_seconds,
            } => format!(
                "{} observations of at most {}, out of all observations",
                histogram.name(),
                Span::seconds(*at_most_seconds as i64)
            ),
            Indicator::UnknownResolved { within_seconds } => format!(
                "unknown outcomes resolved within {}, out of all unknown outcomes recorded",
                Span::seconds(*within_seconds as i64)
            ),
            Indicator::Recovery { within_seconds } => format!(
                "replays and resolutions taken within {} of the item becoming actionable, out of all",
                Span::seconds(*within_seconds as i64)
            ),
        }
    }
}

fn one_of(value: f64, bounds: &[f64]) -> Result<(), String> {
    if bounds.iter().any(|b| b.is_finite() && *b == value) {
        return Ok(());
    }
    let listed: Vec<String> = bounds
        .iter()
        .filter(|b| b.is_finite())
        .map(|b| b.to_string())
        .collect();
    Err(format!(
        "threshold {value} is not a bucket bound; use one of {}",
        listed.join(", ")
    ))
}

mod metric_by_name {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use crate::Metric;

    pub fn serialize<S: Serializer>(metric: &Metric, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(metric.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        let name = String::deserialize(d)?;
        Metric::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
            D::Error::custom(format!(
                "unknown metric `{name}`; known metrics: {}",
                known.join(", ")
            ))
        })
    }
}

/// One service-level objective, as configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Lower-case letters, digits and `-`; it names the page `/slo/{name}`.
    pub name: String,
    pub description: String,
    pub sli: Indicator,
    pub objective: Objective,
    #[serde(default = "default_window")]
    pub window: Span,
    /// Below this many valid events in a tier's long span, the tier does not fire.
    #[serde(default)]
    pub min_events: u64,
    /// A team's consumers, as the consumer catalogue assigns them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Consumers by name. With neither this nor `team`, every consumer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumers: Vec<ConsumerName>,
    /// Each selected consumer its own SLI, budget and burn rates (and its
    /// own page and alerts), instead of one over all of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_consumer: bool,
    /// Per consumer, an objective that replaces the SLO's own: only for a
    /// per-consumer SLO, and only for a consumer it selects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub objectives: BTreeMap<ConsumerName, Objective>,
}

/// The SLOs in force, and where they came from (a file, or the defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloSet {
    pub slos: Vec<Slo>,
    /// The file's path, or "built-in defaults".
    pub source: String,
}

impl Default for SloSet {
    fn default() -> Self {
        SloSet {
            slos: default_slos(),
            source: "built-in defaults".to_owned(),
        }
    }
}

fn default_window() -> Span {
    Span::days(28)
}

impl Slo {
    /// Checks a parsed SLO as a whole.
    pub fn check(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(format!(
                "name `{}` must be 1–64 lower-case letters, digits or `-`",
                self.name
            ));
        }
        if self.window < Span::hours(1) {
            return Err(format!("window {} must be at least 1h", self.window));
        }
        self.check_selection()?;
        self.sli.check()
    }

    /// Every span the SLO is evaluated over: its window and each tier's two.
    pub fn spans(&self) -> Vec<Span> {
        let mut spans = vec![self.window];
        for tier in TIERS {
            spans.extend([tier.long, tier.short]);
        }
        spans.sort();
        spans.dedup();
        spans
    }
}
