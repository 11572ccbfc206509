//! Evaluating an SLO: event counts, burn rates, alert tiers and the state they add up to.

use serde::{Deserialize, Serialize};

use super::{Objective, Scope, Slo, Span};

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
    /// What it counts: the fleet unless the SLO selects consumers.
    pub scope: Scope,
    pub window: Events,
    pub sli: Option<f64>,
    pub budget_remaining: Option<f64>,
    pub tiers: Vec<TierReading>,
    pub alert: AlertState,
}

impl SloStatus {
    /// `events` answers "good and valid over the last `span`" for each of
    /// [`Slo::spans`]; the scope is the fleet (see [`super::Instance`]).
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
            scope: Scope::Fleet,
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
