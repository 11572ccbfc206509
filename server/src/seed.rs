//! `idem seed`: fills a database with a production-sized, realistic data set
//! for plan checks and benchmarks. Deterministic for a given seed.
//!
//! Claims spread over the last `days` in arrival order, with the status mix
//! of a healthy fleet (about 97% sent, 2% failed, 0.9% pending, 0.1%
//! unknown), a few percent duplicates (some after the five-minute window),
//! outbox rows (a small backlog unpublished), dead letters (a small share
//! open) and, optionally, per-minute metrics for every consumer.

use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::{
    AuditEntry, Claim, ClaimStatus, DeadLetter, DeadLetterState, Metric, OutboxOrigin, OutboxRow,
};
use idem_store::{MetricSample, Store, StoreResult, Ts};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// What to generate.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    pub claims: u64,
    pub outbox: u64,
    pub dead_letters: u64,
    pub consumers: u32,
    pub days: u32,
    pub metrics: bool,
    /// Deliveries per consumer and minute in the metrics (default: the rate
    /// the claims imply), so a small claim set can carry production-rate metrics.
    pub metrics_rate: Option<f64>,
    pub seed: u64,
}

pub const CONSUMERS: [&str; 10] = [
    "reminders",
    "payment-webhooks",
    "order-events",
    "invoices",
    "refunds",
    "shipments",
    "notifications",
    "ledger-sync",
    "subscriptions",
    "payouts",
];

const BATCH: u64 = 50_000;

/// A bijection on 0..2^40 that scatters sequential numbers, so keys do not
/// arrive in index order.
fn scramble(i: u64) -> u64 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 7)) & 0xFF_FFFF_FFFF
}

fn consumer_of(i: u64, consumers: u32) -> &'static str {
    CONSUMERS[(i % u64::from(consumers.clamp(1, 10))) as usize]
}

fn key_of(i: u64) -> String {
    let kind = ["renewal", "pay", "ship", "refund", "invoice"][(i % 5) as usize];
    format!("{kind}:{:010x}:{i}", scramble(i))
}

fn claim(i: u64, plan: &SeedPlan, start: DateTime<Utc>, span_ms: i64, rng: &mut StdRng) -> Claim {
    let first = start + TimeDelta::milliseconds(span_ms * i as i64 / plan.claims.max(1) as i64);
    let roll: f64 = rng.random();
    let status = match roll {
        r if r < 0.97 => ClaimStatus::Sent,
        r if r < 0.99 => ClaimStatus::Failed,
        r if r < 0.999 => ClaimStatus::Pending,
        _ => ClaimStatus::Unknown,
    };
    let outcome = first + TimeDelta::milliseconds(rng.random_range(150..30_000));
    let duplicates = if rng.random_bool(0.03) {
        rng.random_range(1..3)
    } else {
        0
    };
    let last = if duplicates > 0 {
        first
            + TimeDelta::seconds(if rng.random_bool(0.3) {
                rng.random_range(301..3600)
            } else {
                rng.random_range(1..300)
            })
    } else {
        first
    };
    let (status_at, outcome_at, provider_ref, last_error) = match status {
        ClaimStatus::Sent => (
            outcome,
            Some(outcome),
            Some(format!("ref_{:x}", scramble(i))),
            None,
        ),
        ClaimStatus::Failed => (
            outcome,
            Some(outcome),
            None,
            Some("400 Bad Request".to_owned()),
        ),
        ClaimStatus::Pending => (
            first,
            None,
            None,
            Some("429 Too Many Requests (Retry-After: 20 s)".to_owned()),
        ),
        ClaimStatus::Unknown => (
            outcome,
            Some(outcome),
            None,
            Some("no response within 30 s".to_owned()),
        ),
    };
    Claim {
        consumer: consumer_of(i, plan.consumers).to_owned(),
        key: key_of(i),
        status,
        status_at,
        first_delivery_at: first,
        last_delivery_at: last,
        delivery_count: 1 + duplicates,
        duplicate_count: duplicates,
        attempts: 1,
        provider_ref,
        last_error,
        outcome_at,
        payload_hash: Some(format!("{:016x}", scramble(i) ^ 0xABCD)),
        last_payload_hash: None,
        lease_until: None,
        version: 3,
    }
}

/// Writes the plan into `store` (which should be freshly migrated) and
/// reports progress on stderr.
pub async fn run(store: &Store, plan: &SeedPlan) -> StoreResult<()> {
    let started = Instant::now();
    let now = Utc::now();
    let span = TimeDelta::days(i64::from(plan.days.max(1)));
    let start = now - span;
    let span_ms = span.num_milliseconds();
    let mut rng = StdRng::seed_from_u64(plan.seed);

    let mut written = 0;
    while written < plan.claims {
        let n = BATCH.min(plan.claims - written);
        let batch: Vec<Claim> = (written..written + n)
            .map(|i| claim(i, plan, start, span_ms, &mut rng))
            .collect();
        store.bulk_insert_claims(&batch).await?;
        written += n;
        if written % 1_000_000 == 0 || written == plan.claims {
            eprintln!(
                "  claims: {written} ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
    }

    // One outbox row for every `claims / outbox`-th claim; 0.1% still unpublished.
    let stride = (plan.claims / plan.outbox.max(1)).max(1);
    let mut written = 0;
    while written < plan.outbox {
        let n = BATCH.min(plan.outbox - written);
        let batch: Vec<OutboxRow> = (written..written + n)
            .map(|j| {
                let i = (j * stride) % plan.claims.max(1);
                let created =
                    start + TimeDelta::milliseconds(span_ms * i as i64 / plan.claims.max(1) as i64);
                let pending = rng.random_bool(0.001);
                OutboxRow {
                    id: 0,
                    consumer: consumer_of(i, plan.consumers).to_owned(),
                    topic: "event.published".into(),
                    key: key_of(i),
                    payload: format!(r#"{{"n":{i}}}"#),
                    created_at: created,
                    published_at: (!pending)
                        .then(|| created + TimeDelta::milliseconds(rng.random_range(50..2000))),
                    attempts: if pending { rng.random_range(0..4) } else { 1 },
                    last_error: pending.then(|| "broker unavailable".to_owned()),
                    origin: OutboxOrigin::Application,
                    dead_letter_id: None,
                    audit_id: None,
                }
            })
            .collect();
        store.bulk_insert_outbox(&batch).await?;
        written += n;
    }
    eprintln!(
        "  outbox: {written} ({:.0} s)",
        started.elapsed().as_secs_f64()
    );

    // Dead letters: 5% still open, the rest replayed or discarded.
    let stride = (plan.claims / plan.dead_letters.max(1)).max(1);
    let mut written = 0;
    while written < plan.dead_letters {
        let n = BATCH.min(plan.dead_letters - written);
        let batch: Vec<DeadLetter> = (written..written + n)
            .map(|j| {
                let i = (j * stride + stride / 2) % plan.claims.max(1);
                let at =
                    start + TimeDelta::milliseconds(span_ms * i as i64 / plan.claims.max(1) as i64);
                let state = match rng.random::<f64>() {
                    r if r < 0.05 => DeadLetterState::Open,
                    r if r < 0.8 => DeadLetterState::Replayed,
                    _ => DeadLetterState::Discarded,
                };
                DeadLetter {
                    id: 0,
                    consumer: consumer_of(i, plan.consumers).to_owned(),
                    queue: format!("{}.fifo", consumer_of(i, plan.consumers)),
                    key: key_of(i),
                    message_id: format!("m-{i}"),
                    payload: format!(r#"{{"n":{i}}}"#),
                    delivery_count: 3,
                    first_failure_at: at,
                    dead_lettered_at: at + TimeDelta::seconds(90),
                    last_error: Some("429 Too Many Requests".into()),
                    state,
                    resolved_by: (state != DeadLetterState::Open).then(|| "operator".to_owned()),
                    resolved_at: (state != DeadLetterState::Open).then(|| at + TimeDelta::hours(1)),
                    replay_outbox_id: None,
                }
            })
            .collect();
        store.bulk_insert_dead_letters(&batch).await?;
        written += n;
    }
    eprintln!(
        "  dead letters: {written} ({:.0} s)",
        started.elapsed().as_secs_f64()
    );

    // Audit entries for one claim in a hundred: a realistic trail to index.
    let audits = plan.claims / 100;
    let mut written = 0;
    while written < audits {
        let n = BATCH.min(audits - written);
        let batch: Vec<AuditEntry> = (written..written + n)
            .map(|j| {
                let i = (j * 100 + 7) % plan.claims.max(1);
                let at = start
                    + TimeDelta::milliseconds(span_ms * i as i64 / plan.claims.max(1) as i64)
                    + TimeDelta::hours(1);
                AuditEntry {
                    id: 0,
                    action_id: Some(format!("seed-{j}")),
                    at,
                    actor: "operator".into(),
                    actor_role: "operator".into(),
                    action: "resolve".into(),
                    consumer: Some(consumer_of(i, plan.consumers).to_owned()),
                    key: Some(key_of(i)),
                    target: None,
                    state_before: Some("unknown".into()),
                    state_after: Some("sent".into()),
                    reason: Some("checked with the provider".into()),
                    result: "ok".into(),
                    client_addr: None,
                    recovery_seconds: None,
                }
            })
            .collect();
        store.bulk_insert_audit(&batch).await?;
        written += n;
    }
    eprintln!(
        "  audit entries: {written} ({:.0} s)",
        started.elapsed().as_secs_f64()
    );

    if plan.metrics {
        let minutes = span.num_minutes();
        let per_minute = plan
            .metrics_rate
            .unwrap_or(plan.claims as f64 / minutes as f64 / f64::from(plan.consumers.max(1)));
        let mut batch = Vec::with_capacity(BATCH as usize);
        let mut rows = 0u64;
        for consumer in CONSUMERS.iter().take(plan.consumers.clamp(1, 10) as usize) {
            for m in 0..minutes {
                let at = Ts::from(start + TimeDelta::minutes(m));
                let deliveries = (per_minute * rng.random_range(0.5..1.5)).round();
                let duplicates = (deliveries * 0.03).round();
                let rare = |rng: &mut StdRng, p: f64| f64::from(u8::from(rng.random_bool(p)));
                let readings = [
                    (Metric::Deliveries, deliveries),
                    (Metric::NewClaims, deliveries - duplicates),
                    (Metric::DuplicateClaims, duplicates),
                    (Metric::Sends, (deliveries - duplicates) * 0.97),
                    (Metric::DeadLetters, rare(&mut rng, 0.02)),
                    (Metric::TransactionFailures, rare(&mut rng, 0.05)),
                    (Metric::UnknownOutcomes, rare(&mut rng, 0.01)),
                    (Metric::QueueOldestAgeSeconds, rng.random_range(0.0..90.0)),
                    (Metric::OutboxOldestAgeSeconds, rng.random_range(0.0..40.0)),
                ];
                // Histograms: outcomes mostly within a second, a few slow;
                // duplicates mostly inside the FIFO window, a few after it.
                let outcomes = deliveries - duplicates;
                let histograms = [
                    (Metric::OutcomeLatencySeconds, 0.4, (outcomes * 0.9).round()),
                    (
                        Metric::OutcomeLatencySeconds,
                        4.0,
                        (outcomes * 0.09).round(),
                    ),
                    (Metric::OutcomeLatencySeconds, 1200.0, rare(&mut rng, 0.2)),
                    (
                        Metric::DuplicateDelaySeconds,
                        20.0,
                        (duplicates * 0.8).round(),
                    ),
                    (
                        Metric::DuplicateDelaySeconds,
                        2000.0,
                        (duplicates * 0.2).round(),
                    ),
                ];
                for (metric, value) in readings {
                    // Consumers flush what they counted; a zero count is no row.
                    if value == 0.0 && metric.kind() == idem_domain::MetricKind::Counter {
                        continue;
                    }
                    batch.push(MetricSample {
                        consumer: (*consumer).to_owned(),
                        metric,
                        at,
                        bucket: String::new(),
                        value,
                    });
                }
                for (metric, seconds, count) in histograms {
                    if count == 0.0 {
                        continue;
                    }
                    batch.push(MetricSample {
                        consumer: (*consumer).to_owned(),
                        metric,
                        at,
                        bucket: metric.bucket_for(seconds),
                        value: count,
                    });
                }
                if batch.len() >= BATCH as usize {
                    rows += batch.len() as u64;
                    store.bulk_insert_metrics(&batch).await?;
                    batch.clear();
                }
            }
        }
        rows += batch.len() as u64;
        store.bulk_insert_metrics(&batch).await?;
        // History written behind the rollup's watermark: roll it all up again.
        store.reset_rollups().await?;
        eprintln!(
            "  metric rows: {rows} ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }

    store.analyze().await?;
    eprintln!("seeded in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
