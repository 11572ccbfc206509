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

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::metric::{Metric, MetricKind};

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

/// The SLOs Idem uses when no file is configured. Each says why it exists.
pub fn default_slos() -> Vec<Slo> {
    let slo = |name: &str, description: &str, sli: Indicator, objective: f64, min_events| Slo {
        name: name.to_owned(),
        description: description.to_owned(),
        sli,
        objective: Objective(objective),
        window: default_window(),
        min_events,
    };
    vec![
        slo(
            "unknown-resolved-15m",
            "Unknown outcomes resolved within 15 minutes. An unknown outcome may be a lost or a doubled payment; \
             someone must settle it while the customer is still waiting.",
            Indicator::UnknownResolved {
                within_seconds: 900.0,
            },
            0.999,
            5,
        ),
        slo(
            "not-dead-lettered",
            "Deliveries that do not end in the dead-letter queue. Every dead letter is an effect a person must \
             replay or discard by hand.",
            Indicator::Counters {
                valid: Metric::Deliveries,
                bad: Metric::DeadLetters,
            },
            0.999,
            100,
        ),
        slo(
            "transactions-committed",
            "Claim transactions that commit. A rolled-back claim is a redelivery later; many of them mean \
             contention or crashes in the consumer.",
            Indicator::Counters {
                valid: Metric::Deliveries,
                bad: Metric::TransactionFailures,
            },
            0.999,
            100,
        ),
        slo(
            "duplicate-claim-rate",
            "Deliveries that find their key already claimed stay at or under 1%. Duplicates are harmless while \
             the claim holds, but a rising rate means publishers retry or leases expire, and each duplicate \
             is a chance for a consumer without a durable key to repeat an effect.",
            Indicator::Counters {
                valid: Metric::Deliveries,
                bad: Metric::DuplicateClaims,
            },
            0.99,
            100,
        ),
        slo(
            "queue-age-60s",
            "Minutes in which the oldest queued message was at most 60 seconds old. Older messages mean \
             reminders and payments go out late.",
            Indicator::GaugeSlices {
                gauge: Metric::QueueOldestAgeSeconds,
                at_most_seconds: 60.0,
            },
            0.995,
            30,
        ),
        slo(
            "outbox-age-30s",
            "Minutes in which the oldest unpublished outbox row was at most 30 seconds old. A stuck relay \
             holds back every effect that could not join the claim's transaction, replays included.",
            Indicator::GaugeSlices {
                gauge: Metric::OutboxOldestAgeSeconds,
                at_most_seconds: 30.0,
            },
            0.995,
            30,
        ),
        slo(
            "reconciled-15m",
            "Keys whose outcome is recorded within 15 minutes of the first delivery. Until then nobody can \
             say whether the effect happened.",
            Indicator::Histogram {
                histogram: Metric::OutcomeLatencySeconds,
                at_most_seconds: 900.0,
            },
            0.99,
            100,
        ),
        slo(
            "recovery-60m",
            "Replays and resolutions taken within 60 minutes of the dead letter or unknown outcome \
             appearing: alert to replay-safe recovery.",
            Indicator::Recovery {
                within_seconds: 3600.0,
            },
            0.90,
            5,
        ),
    ]
}

/// Good and valid event counts over one span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Events {
    pub good: f64,
    pub valid: f64,
}

impl Events {
    /// Clamps `good` into `0..=valid`: counts read at a window's edge can
    /// disagree by a few (an unknown raised before the window, resolved in it).
    pub fn new(good: f64, valid: f64) -> Self {
        let valid = valid.max(0.0);
        Events {
            good: good.clamp(0.0, valid),
            valid,
        }
    }

    /// Σgood / Σvalid; `None` when nothing was valid (no data is not 100%).
    pub fn ratio(self) -> Option<f64> {
        (self.valid > 0.0).then(|| self.good / self.valid)
    }

    pub fn error_ratio(self) -> Option<f64> {
        self.ratio().map(|r| 1.0 - r)
    }

    /// Error ratio / error budget: 1× spends the budget exactly over the window.
    pub fn burn_rate(self, objective: Objective) -> Option<f64> {
        self.error_ratio().map(|e| e / objective.error_budget())
    }

    /// The share of the window's budget not yet spent; negative when overspent.
    pub fn budget_remaining(self, objective: Objective) -> Option<f64> {
        self.burn_rate(objective).map(|burn| 1.0 - burn)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Severity {
    Page,
    Ticket,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Page => "page",
            Severity::Ticket => "ticket",
        }
    }
}

/// A multi-window, multi-burn-rate alert tier.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    pub severity: Severity,
    pub long: Span,
    pub short: Span,
    /// The share of the whole window's budget this tier lets burn in `long`.
    pub budget_share: f64,
}

/// The workbook's tiers: 2% of a 30-day budget in 1h (14.4×), 5% in 6h (6×)
/// page; 10% in 1d (3×) and 10% in 3d (1×) open a ticket.
pub const TIERS: [Tier; 4] = [
    Tier {
        severity: Severity::Page,
        long: Span::hours(1),
        short: Span::minutes(5),
        budget_share: 0.02,
    },
    Tier {
        severity: Severity::Page,
        long: Span::hours(6),
        short: Span::minutes(30),
        budget_share: 0.05,
    },
    Tier {
        severity: Severity::Ticket,
        long: Span::days(1),
        short: Span::hours(2),
        budget_share: 0.10,
    },
    Tier {
        severity: Severity::Ticket,
        long: Span::days(3),
        short: Span::hours(6),
        budget_share: 0.10,
    },
];

impl Tier {
    /// The burn-rate threshold for an SLO window: the rate that spends
    /// `budget_share` of the window's budget within `long`. For 30 days this is
    /// 14.4, 6, 3 and 1; for 28 days 13.44, 5.6, 2.8 and 0.933….
    pub fn threshold(&self, window: Span) -> f64 {
        self.budget_share * window.as_seconds() as f64 / self.long.as_seconds() as f64
    }
}

/// One tier, evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TierReading {
    pub tier: Tier,
    pub threshold: f64,
    pub long: Events,
    pub short: Events,
    pub long_burn: Option<f64>,
    pub short_burn: Option<f64>,
    /// The long span had fewer valid events than the SLO's minimum.
    pub too_few_events: bool,
    pub firing: bool,
}

impl TierReading {
    pub fn new(slo: &Slo, tier: Tier, long: Events, short: Events) -> Self {
        let threshold = tier.threshold(slo.window);
        let long_burn = long.burn_rate(slo.objective);
        let short_burn = short.burn_rate(slo.objective);
        let too_few_events = long.valid < slo.min_events as f64;
        let over = |burn: Option<f64>| burn.is_some_and(|b| b > threshold);
        TierReading {
            tier,
            threshold,
            long,
            short,
            long_burn,
            short_burn,
            too_few_events,
            firing: !too_few_events && over(long_burn) && over(short_burn),
        }
    }
}

/// What an SLO asks of people right now, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AlertState {
    Page,
    Ticket,
    /// Not alerting, but the budget for the window is spent.
    BudgetSpent,
    Ok,
    /// Not enough traffic to judge.
    TooFewEvents,
    NoData,
}

impl AlertState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Page => "page",
            AlertState::Ticket => "ticket",
            AlertState::BudgetSpent => "budget spent",
            AlertState::Ok => "ok",
            AlertState::TooFewEvents => "too few events",
            AlertState::NoData => "no data",
        }
    }
}

/// One SLO, evaluated at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloStatus {
    pub slo: Slo,
    pub window: Events,
    pub sli: Option<f64>,
    pub budget_remaining: Option<f64>,
    pub tiers: Vec<TierReading>,
    pub alert: AlertState,
}

impl SloStatus {
    /// `events` answers "good and valid over the last `span`" for each of
    /// [`Slo::spans`].
    pub fn evaluate(slo: &Slo, mut events: impl FnMut(Span) -> Events) -> Self {
        let window = events(slo.window);
        let tiers: Vec<TierReading> = TIERS
            .iter()
            .map(|tier| TierReading::new(slo, *tier, events(tier.long), events(tier.short)))
            .collect();
        let budget_remaining = window.budget_remaining(slo.objective);
        let firing = |severity| {
            tiers
                .iter()
                .any(|t| t.firing && t.tier.severity == severity)
        };
        let alert = if firing(Severity::Page) {
            AlertState::Page
        } else if firing(Severity::Ticket) {
            AlertState::Ticket
        } else if window.valid == 0.0 {
            AlertState::NoData
        } else if window.valid < slo.min_events as f64 {
            AlertState::TooFewEvents
        } else if budget_remaining.is_some_and(|b| b < 0.0) {
            AlertState::BudgetSpent
        } else {
            AlertState::Ok
        };
        SloStatus {
            slo: slo.clone(),
            sli: window.ratio(),
            window,
            budget_remaining,
            tiers,
            alert,
        }
    }
}

/// Orders SLOs worst first: by alert state, then by the budget left.
pub fn worst_first(statuses: &mut [SloStatus]) {
    statuses.sort_by(|a, b| {
        a.alert.cmp(&b.alert).then_with(|| {
            let left = |s: &SloStatus| s.budget_remaining.unwrap_or(f64::INFINITY);
            left(a).total_cmp(&left(b))
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn slo(objective: f64, window: Span, min_events: u64) -> Slo {
        Slo {
            name: "test".into(),
            description: String::new(),
            sli: Indicator::Counters {
                valid: Metric::Deliveries,
                bad: Metric::DeadLetters,
            },
            objective: Objective::try_from(objective).unwrap(),
            window,
            min_events,
        }
    }

    #[test]
    fn the_sli_weighs_every_event_not_every_minute() {
        // Minute one: 1 of 1 good. Minute two: 900 of 1000 good.
        // An average of ratios would say 95%; the SLI is 901 / 1001.
        let a = Events::new(1.0, 1.0);
        let b = Events::new(900.0, 1000.0);
        let total = Events::new(a.good + b.good, a.valid + b.valid);
        assert!(close(total.ratio().unwrap(), 901.0 / 1001.0));
    }

    #[test]
    fn no_valid_events_is_no_data_not_a_perfect_score() {
        assert_eq!(Events::new(0.0, 0.0).ratio(), None);
        assert_eq!(Events::new(0.0, 0.0).burn_rate(Objective(0.999)), None);
    }

    #[test]
    fn budget_and_burn_rate_match_hand_computed_values() {
        let objective = Objective(0.999);
        assert!(close(objective.error_budget(), 0.001));
        // 10,000 events, 5 bad: error ratio 0.0005, half the budget.
        let events = Events::new(9_995.0, 10_000.0);
        assert!(close(events.error_ratio().unwrap(), 0.0005));
        assert!(close(events.burn_rate(objective).unwrap(), 0.5));
        assert!(close(events.budget_remaining(objective).unwrap(), 0.5));
        // 30 bad: three budgets' worth, two budgets overspent.
        let events = Events::new(9_970.0, 10_000.0);
        assert!(close(events.burn_rate(objective).unwrap(), 3.0));
        assert!(close(events.budget_remaining(objective).unwrap(), -2.0));
    }

    #[test]
    fn a_ratio_slo_on_duplicates_burns_on_the_duplicate_share() {
        // Duplicate-claim rate ≤ 1%: objective 0.99. 2% duplicates burn 2×.
        let events = Events::new(98.0, 100.0);
        assert!(close(events.burn_rate(Objective(0.99)).unwrap(), 2.0));
    }

    #[test]
    fn tier_thresholds_for_a_thirty_day_window_are_the_workbooks() {
        let thresholds: Vec<f64> = TIERS.iter().map(|t| t.threshold(Span::days(30))).collect();
        for (got, want) in thresholds.iter().zip([14.4, 6.0, 3.0, 1.0]) {
            assert!(close(*got, want), "{got} != {want}");
        }
    }

    #[test]
    fn tier_thresholds_scale_for_a_twenty_eight_day_window() {
        let thresholds: Vec<f64> = TIERS.iter().map(|t| t.threshold(Span::days(28))).collect();
        for (got, want) in thresholds.iter().zip([13.44, 5.6, 2.8, 0.1 * 28.0 / 3.0]) {
            assert!(close(*got, want), "{got} != {want}");
        }
    }

    #[test]
    fn a_tier_fires_only_when_both_spans_burn_faster_than_its_threshold() {
        let slo = slo(0.999, Span::days(30), 0);
        let page = TIERS[0];
        // 2% errors = 20× burn, over both spans.
        let hot = Events::new(980.0, 1000.0);
        // 1% errors = 10× burn: under 14.4.
        let warm = Events::new(990.0, 1000.0);
        assert!(TierReading::new(&slo, page, hot, hot).firing);
        assert!(
            !TierReading::new(&slo, page, hot, warm).firing,
            "the short span has recovered"
        );
        assert!(
            !TierReading::new(&slo, page, warm, hot).firing,
            "a blip, not a trend"
        );
        // Just under the threshold (14.3×) does not fire.
        let under = Events::new(1000.0 - 14.3, 1000.0);
        assert!(!TierReading::new(&slo, page, under, under).firing);
    }

    #[test]
    fn a_low_traffic_window_below_the_minimum_count_does_not_alert() {
        let slo = slo(0.999, Span::days(28), 100);
        // 3 of 10 bad: 300× burn, but only 10 events.
        let few = Events::new(7.0, 10.0);
        let status = SloStatus::evaluate(&slo, |_| few);
        assert!(status.tiers.iter().all(|t| t.too_few_events && !t.firing));
        assert_eq!(status.alert, AlertState::TooFewEvents);
        // The same error ratio with enough traffic pages.
        let many = Events::new(700.0, 1000.0);
        assert_eq!(SloStatus::evaluate(&slo, |_| many).alert, AlertState::Page);
    }

    #[test]
    fn a_ticket_tier_alone_opens_a_ticket_and_spent_budget_is_named() {
        let slo = slo(0.999, Span::days(30), 0);
        // Burn 4×: over the 3× and 1× ticket tiers, under both page tiers.
        let status = SloStatus::evaluate(&slo, |_| Events::new(996.0, 1000.0));
        assert_eq!(status.alert, AlertState::Ticket);
        let firing: Vec<Severity> = status
            .tiers
            .iter()
            .filter(|t| t.firing)
            .map(|t| t.tier.severity)
            .collect();
        assert_eq!(firing, vec![Severity::Ticket, Severity::Ticket]);
        // Window overspent but the recent spans are clean: budget spent, no alert.
        let status = SloStatus::evaluate(&slo, |span| {
            if span == slo.window {
                Events::new(990.0, 1000.0)
            } else {
                Events::new(1000.0, 1000.0)
            }
        });
        assert_eq!(status.alert, AlertState::BudgetSpent);
        assert!(close(status.budget_remaining.unwrap(), -9.0));
    }

    #[test]
    fn worst_first_puts_pages_first_then_the_least_budget() {
        let slo = slo(0.999, Span::days(30), 0);
        let ok_half = SloStatus::evaluate(&slo, |_| Events::new(9_995.0, 10_000.0));
        let ok_full = SloStatus::evaluate(&slo, |_| Events::new(10_000.0, 10_000.0));
        let page = SloStatus::evaluate(&slo, |_| Events::new(900.0, 1000.0));
        let none = SloStatus::evaluate(&slo, |_| Events::default());
        let mut all = vec![none, ok_full, page, ok_half];
        worst_first(&mut all);
        let order: Vec<(AlertState, Option<f64>)> =
            all.iter().map(|s| (s.alert, s.budget_remaining)).collect();
        assert_eq!(order[0].0, AlertState::Page);
        assert_eq!(order[1].0, AlertState::Ok);
        assert!(close(order[1].1.unwrap(), 0.5));
        assert_eq!(order[2].0, AlertState::Ok);
        assert_eq!(order[3].0, AlertState::NoData);
    }

    #[test]
    fn spans_read_and_print_as_people_write_them() {
        for text in ["90s", "30m", "6h", "28d"] {
            assert_eq!(text.parse::<Span>().unwrap().to_string(), text);
        }
        assert_eq!("60m".parse::<Span>().unwrap().to_string(), "1h");
        for bad in [
            "",
            "28",
            "d",
            "-1d",
            "0s",
            "1w",
            "91d",
            "99999999999999999d",
        ] {
            assert!(bad.parse::<Span>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn the_defaults_are_valid_and_each_says_why() {
        let slos = default_slos();
        assert_eq!(slos.len(), 8);
        for slo in &slos {
            slo.check().unwrap_or_else(|e| panic!("{}: {e}", slo.name));
            assert!(slo.description.len() > 40, "{} explains itself", slo.name);
            assert_eq!(slo.window, Span::days(28));
        }
    }

    #[test]
    fn thresholds_must_be_answerable_from_rollups() {
        let bad = Indicator::Histogram {
            histogram: Metric::OutcomeLatencySeconds,
            at_most_seconds: 800.0,
        };
        assert!(bad.check().unwrap_err().contains("900"));
        let wrong_kind = Indicator::GaugeSlices {
            gauge: Metric::Deliveries,
            at_most_seconds: 60.0,
        };
        assert!(wrong_kind.check().unwrap_err().contains("not a gauge"));
    }
}
