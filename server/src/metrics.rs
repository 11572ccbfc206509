//! `GET /metrics`: SLIs, budgets, burn rates, work-list counts and the oldest
//! stuck keys in the Prometheus text format.
//!
//! Off until `IDEM_METRICS_TOKEN` is set; a scrape then sends
//! `Authorization: Bearer <token>` (Prometheus: `authorization: { credentials_file: … }`).
//! A scrape reads what the pages read, through the same short-lived cache, so
//! it never costs more than a page view. Stuck keys are bounded: at most
//! [`STUCK_KEYS_PER_CONSUMER`] per consumer and reason, taken from the oldest
//! of each list, so an alert can name a key without the series exploding.

use std::{collections::HashMap, fmt::Write, sync::Arc};

use axum::{
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use idem_app::{
    api::{CheckCount, Overview, SloBoard},
    error::AppError,
    serving::AppState,
};
use idem_domain::{Catalogue, slo::SloStatus};
use sha2::{Digest, Sha256};

mod exposition;

use exposition::{Exposition, slo_labels};

/// The most stuck keys exported per consumer and reason.
pub const STUCK_KEYS_PER_CONSUMER: usize = 3;

/// The scrape token. Never printed: `Debug` shows only that it is set.
#[derive(Clone)]
pub struct MetricsToken(String);

impl MetricsToken {
    pub fn new(token: String) -> Self {
        Self(token)
    }

    /// Compares digests, so the comparison's time does not depend on how
    /// much of a guess matches.
    fn admits(&self, presented: &str) -> bool {
        Sha256::digest(presented.as_bytes()) == Sha256::digest(self.0.as_bytes())
    }
}

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(set)")
    }
}

#[derive(Clone)]
pub struct MetricsState {
    pub app: AppState,
    pub token: Option<Arc<MetricsToken>>,
    /// Whether this replica runs the background work now (it holds the lease).
    pub background: Arc<std::sync::atomic::AtomicBool>,
    /// The consumers' counters, totalled since this replica started.
    pub events: Arc<crate::consumer_events::EventTotals>,
}

impl MetricsState {
    /// The export's state, with its counter totals starting now.
    pub fn new(
        app: &AppState,
        token: Option<MetricsToken>,
        background: &Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        MetricsState {
            app: app.clone(),
            token: token.map(Arc::new),
            background: background.clone(),
            events: Default::default(),
        }
    }
}

pub async fn export(State(state): State<MetricsState>, headers: HeaderMap) -> Response {
    let Some(token) = &state.token else {
        return (
            StatusCode::NOT_FOUND,
            "The metrics export is off; set IDEM_METRICS_TOKEN to turn it on.\n",
        )
            .into_response();
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !presented.is_some_and(|p| token.admits(p.trim())) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))],
            "A scrape needs the bearer token set in IDEM_METRICS_TOKEN.\n",
        )
            .into_response();
    }
    let read = async {
        let board = idem_app::api::load_slo_board(&state.app).await?;
        let overview = idem_app::api::load_overview(&state.app, idem_domain::Within::Every).await?;
        let (_, checks) =
            idem_app::api::load_check_counts(&state.app, idem_domain::Within::Every).await?;
        let events = state
            .events
            .advance(&state.app.store, idem_store::Ts::now())
            .await
            .map_err(AppError::from)?;
        let catalogue = &state.app.catalogue;
        let mut text = render(&board, &overview, &checks, catalogue);
        consumer_events(&mut text, &events, catalogue);
        let running = state.background.load(std::sync::atomic::Ordering::Acquire);
        let _ = write!(
            text,
            "# HELP idem_background_work_running Whether this replica runs the background work \
             (rollups, the demo, the sweepers) now: 1 while it holds the lease.\n\
             # TYPE idem_background_work_running gauge\n\
             idem_background_work_running {}\n",
            u8::from(running)
        );
        Ok::<_, AppError>(text)
    };
    match read.await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            )],
            text,
        )
            .into_response(),
        // The cause was logged where the error was made.
        Err(err) => (
            StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            format!("{}\n", err.title()),
        )
            .into_response(),
    }
}

/// The exposition text: one `# HELP`/`# TYPE` pair per family, then its samples.
pub fn render(
    board: &SloBoard,
    overview: &Overview,
    checks: &[CheckCount],
    catalogue: &Catalogue,
) -> String {
    let mut out = Exposition {
        catalogue,
        text: String::new(),
    };
    out.family("idem_build_info", "gauge", "Idem's version; always 1.");
    out.sample(
        "idem_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    slo_gauges(&mut out, &board.statuses);
    burn_rates(&mut out, &board.statuses);
    alerts_firing(&mut out, &board.statuses);
    work_counts(&mut out, overview);
    oldest_ages(&mut out, overview);
    stuck_keys(&mut out, overview);
    check_findings(&mut out, checks);
    out.text
}

/// The consumers' counters (`consumer_metrics`), totalled since this
/// replica started (see `consumer_events`); `event` is the contract's name.
fn consumer_events(
    text: &mut String,
    events: &[(String, idem_domain::Metric, f64)],
    catalogue: &Catalogue,
) {
    let mut out = Exposition {
        catalogue,
        text: String::new(),
    };
    out.family(
        "idem_consumer_events_total",
        "counter",
        "Events the consumers counted in consumer_metrics, since this replica started; event is the metric's name in the data contract.",
    );
    for (consumer, metric, total) in events {
        out.sample(
            "idem_consumer_events_total",
            &[("consumer", consumer), ("event", metric.name())],
            *total,
        );
    }
    text.push_str(&out.text);
}

/// What each consistency check found (`/checks/{check}` lists them).
fn check_findings(out: &mut Exposition, checks: &[CheckCount]) {
    out.capped_counts(
        "idem_check_findings",
        "Keys (or dead letters) each consistency check found, counted up to a cap (10000); see idem_check_findings_capped.",
        "check",
        checks.iter().map(|c| (c.check.slug(), c.count)),
    );
}

/// Each SLO's objective, window, SLI, traffic and budget.
fn slo_gauges(out: &mut Exposition, slos: &[SloStatus]) {
    out.per_slo(
        slos,
        "idem_slo_objective_ratio",
        "Share of valid events that must be good.",
        |s| Some(s.slo.objective.get()),
    );
    out.per_slo(
        slos,
        "idem_slo_window_seconds",
        "Length of the SLO's rolling window.",
        |s| Some(s.slo.window.as_seconds() as f64),
    );
    out.per_slo(
        slos,
        "idem_slo_sli_ratio",
        "Good events / valid events over the window (absent without valid events).",
        |s| s.sli,
    );
    out.per_slo(
        slos,
        "idem_slo_valid_events",
        "Valid events in the window (the traffic behind the ratio).",
        |s| Some(s.window.valid),
    );
    out.per_slo(
        slos,
        "idem_slo_error_budget_remaining_ratio",
        "Share of the window's error budget not yet spent; negative when overspent.",
        |s| s.budget_remaining,
    );
}

/// Each SLO's burn rate over every window its tiers use (once per window).
fn burn_rates(out: &mut Exposition, slos: &[SloStatus]) {
    out.family(
        "idem_slo_burn_rate",
        "gauge",
        "Error ratio over the window / error budget; 1 spends the budget exactly.",
    );
    for s in slos {
        let mut seen = Vec::new();
        for t in &s.tiers {
            for (span, burn) in [(t.tier.long, t.long_burn), (t.tier.short, t.short_burn)] {
                if let Some(burn) = burn
                    && !seen.contains(&span)
                {
                    seen.push(span);
                    let window = span.to_string();
                    out.sample(
                        "idem_slo_burn_rate",
                        &slo_labels(s, &[("window", &window)]),
                        burn,
                    );
                }
            }
        }
    }
}

/// Whether each SLO's burn-rate tiers fire.
fn alerts_firing(out: &mut Exposition, slos: &[SloStatus]) {
    out.family(
        "idem_slo_alert_firing",
        "gauge",
        "1 when a multi-window burn-rate tier fires (both windows over the threshold).",
    );
    for s in slos {
        for t in &s.tiers {
            let (long, short) = (t.tier.long.to_string(), t.tier.short.to_string());
            out.sample(
                "idem_slo_alert_firing",
                &slo_labels(
                    s,
                    &[
                        ("severity", t.tier.severity.as_str()),
                        ("long_window", &long),
                        ("short_window", &short),
                    ],
                ),
                f64::from(u8::from(t.firing)),
            );
        }
    }
}

/// Unknown outcomes, claims that went pending or failed in the last hour,
/// open dead letters and unpublished outbox rows.
fn work_counts(out: &mut Exposition, overview: &Overview) {
    out.capped_counts(
        "idem_claims",
        "Claims in a status that waits for a person (unknown), counted up to a cap (10000); see idem_claims_capped.",
        "status",
        [("unknown", overview.unknown_count)].into_iter(),
    );
    out.capped_counts(
        "idem_claims_last_hour",
        "Claims that went pending (and still are) or failed in the last hour, counted up to a cap (10000); see idem_claims_last_hour_capped.",
        "status",
        [
            ("pending", overview.last_hour.pending),
            ("failed", overview.last_hour.failed),
        ]
        .into_iter(),
    );
    out.family(
        "idem_dead_letters_open",
        "gauge",
        "Open dead letters, counted up to a cap.",
    );
    out.sample(
        "idem_dead_letters_open",
        &[],
        overview.dead_letter_count.value as f64,
    );
    out.family(
        "idem_outbox_unpublished",
        "gauge",
        "Unpublished outbox rows, counted up to a cap.",
    );
    out.sample(
        "idem_outbox_unpublished",
        &[],
        overview.outbox_count.value as f64,
    );
}

/// Seconds from `at` to the overview's clock (never negative).
fn age(overview: &Overview, at: DateTime<Utc>) -> f64 {
    (overview.clock.as_of - at).num_milliseconds().max(0) as f64 / 1000.0
}

/// The age of the oldest item in each work list.
fn oldest_ages(out: &mut Exposition, overview: &Overview) {
    out.family(
        "idem_oldest_age_seconds",
        "gauge",
        "Age of the oldest item in each work list (absent when the list is empty).",
    );
    let oldest = [
        (
            "unknown_outcome",
            overview.unknown.first().map(|c| c.status_at),
        ),
        (
            "dead_letter",
            overview.dead_letters.first().map(|d| d.dead_lettered_at),
        ),
        ("outbox", overview.outbox.first().map(|o| o.created_at)),
    ];
    for (list, at) in oldest {
        if let Some(at) = at {
            out.sample(
                "idem_oldest_age_seconds",
                &[("list", list)],
                age(overview, at),
            );
        }
    }
}

/// The oldest stuck keys, at most [`STUCK_KEYS_PER_CONSUMER`] per consumer
/// and reason.
fn stuck_keys(out: &mut Exposition, overview: &Overview) {
    out.family(
        "idem_stuck_key_age_seconds",
        "gauge",
        "The oldest stuck keys (a few per consumer and reason), so an alert can link to the key's page.",
    );
    let unknown = overview
        .unknown
        .iter()
        .map(|c| (c.consumer.as_str(), c.key.as_str(), c.status_at));
    let dead = overview
        .dead_letters
        .iter()
        .map(|d| (d.consumer.as_str(), d.key.as_str(), d.dead_lettered_at));
    for (reason, items) in [
        ("unknown_outcome", unknown.collect::<Vec<_>>()),
        ("dead_letter", dead.collect()),
    ] {
        let mut per_consumer: HashMap<&str, usize> = HashMap::new();
        for (consumer, key, at) in items {
            let n = per_consumer.entry(consumer).or_default();
            if *n == STUCK_KEYS_PER_CONSUMER {
                continue;
            }
            *n += 1;
            out.sample(
                "idem_stuck_key_age_seconds",
                &[
                    ("consumer", consumer),
                    ("idempotency_key", key),
                    ("reason", reason),
                ],
                age(overview, at),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_admits_only_itself() {
        let token = MetricsToken::new("s3cret".into());
        assert!(token.admits("s3cret"));
        assert!(!token.admits("s3cre"));
        assert!(!token.admits(""));
        assert_eq!(format!("{token:?}"), "MetricsToken(set)");
    }
}
