//! `idem-tools seed`: fills a database with a production-sized, realistic data set
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
use idem_store::{DEMO_DATA, MetricSample, Store, StoreError, StoreResult, Ts};
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

/// The most consumers a seed writes (a fleet of many teams).
pub const MAX_CONSUMERS: u32 = 1_000;

/// The `n`th consumer: the ten names, then `reminders-2`, `payment-webhooks-2`, …
fn consumer_name(n: u32) -> String {
    let base = CONSUMERS[(n % 10) as usize];
    match n / 10 {
        0 => base.to_owned(),
        round => format!("{base}-{}", round + 1),
    }
}

fn consumer_of(i: u64, consumers: u32) -> String {
    let n = i % u64::from(consumers.clamp(1, MAX_CONSUMERS));
    consumer_name(u32::try_from(n).unwrap_or(0))
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
        consumer: consumer_of(i, plan.consumers),
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

/// Set (in `idem_meta`) on a database `seed` has written to, so a second
/// run may add to it without `--force`.
pub const SEEDED_DATA: &str = "seeded_data";

/// Why `seed` will not write to a database.
#[derive(Debug, thiserror::Error)]
pub enum SeedRefused {
    #[error(
        "this database already holds {0} that `idem-tools seed` did not write; \
         seeding would mix millions of synthetic rows into it (pass --force to do it anyway)"
    )]
    NotOurs(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Refuses a database holding anything but data seeded before: claims,
/// accounts or the demo's history. An empty database, or one `seed` wrote
/// to, passes; `force` passes anything.
pub async fn check_target(store: &Store, force: bool) -> Result<(), SeedRefused> {
    if force || store.system().meta(SEEDED_DATA).await?.is_some() {
        return Ok(());
    }
    if store.system().meta(DEMO_DATA).await?.is_some() {
        return Err(SeedRefused::NotOurs("the demo's history"));
    }
    if store.claims().has_claims().await? {
        return Err(SeedRefused::NotOurs("claims"));
    }
    if !store.people().users().await?.is_empty() {
        return Err(SeedRefused::NotOurs("accounts"));
    }
    Ok(())
}

/// Writes the plan into `store` (which should be freshly migrated, or pass
/// [`check_target`]) and reports progress on stderr.
pub async fn run(store: &Store, plan: &SeedPlan) -> StoreResult<()> {
    store
        .system()
        .set_meta(SEEDED_DATA, &Utc::now().to_rfc3339())
        .await?;
    let span = TimeDelta::days(i64::from(plan.days.max(1)));
    let mut run = Run {
        store,
        plan,
        timeline: Timeline {
            start: Utc::now() - span,
            span_ms: span.num_milliseconds(),
            claims: plan.claims.max(1),
        },
        // One source drawn from in a fixed order: a seed gives one data set.
        rng: StdRng::seed_from_u64(plan.seed),
        started: Instant::now(),
    };
    run.claims().await?;
    run.outbox().await?;
    run.dead_letters().await?;
    run.audit().await?;
    if plan.metrics {
        run.metrics(span).await?;
    }
    store.analyze().await?;
    eprintln!("seeded in {:.0} s", run.started.elapsed().as_secs_f64());
    Ok(())
}

/// When each claim arrived: evenly spread over the plan's days.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    start: DateTime<Utc>,
    span_ms: i64,
    claims: u64,
}

impl Timeline {
    /// When the `i`-th claim arrived.
    fn arrival(self, i: u64) -> DateTime<Utc> {
        self.start + TimeDelta::milliseconds(self.span_ms * i as i64 / self.claims as i64)
    }
}

/// `0..total` in ranges of at most [`BATCH`]: one bulk insert each.
fn batches(total: u64) -> impl Iterator<Item = std::ops::Range<u64>> {
    (0..total)
        .step_by(BATCH as usize)
        .map(move |from| from..(from + BATCH).min(total))
}

/// One seeding run: what every table's writer shares.
struct Run<'a> {
    store: &'a Store,
    plan: &'a SeedPlan,
    timeline: Timeline,
    rng: StdRng,
    started: Instant,
}

impl Run<'_> {
    fn progress(&self, what: &str, written: u64) {
        eprintln!(
            "  {what}: {written} ({:.0} s)",
            self.started.elapsed().as_secs_f64()
        );
    }

    /// The claims, in arrival order.
    async fn claims(&mut self) -> StoreResult<()> {
        let (plan, timeline) = (self.plan, self.timeline);
        for range in batches(plan.claims) {
            let batch: Vec<Claim> = range
                .clone()
                .map(|i| claim(i, plan, timeline.start, timeline.span_ms, &mut self.rng))
                .collect();
            self.store.bulk_insert_claims(&batch).await?;
            if range.end % 1_000_000 == 0 || range.end == plan.claims {
                self.progress("claims", range.end);
            }
        }
        Ok(())
    }

    /// One outbox row for every `claims / outbox`-th claim; 0.1% still unpublished.
    async fn outbox(&mut self) -> StoreResult<()> {
        let (plan, timeline) = (self.plan, self.timeline);
        let stride = (plan.claims / plan.outbox.max(1)).max(1);
        for range in batches(plan.outbox) {
            let batch: Vec<OutboxRow> = range
                .map(|j| {
                    let i = (j * stride) % timeline.claims;
                    outbox_row(i, plan, timeline.arrival(i), &mut self.rng)
                })
                .collect();
            self.store.bulk_insert_outbox(&batch).await?;
        }
        self.progress("outbox", plan.outbox);
        Ok(())
    }

    /// Dead letters: 5% still open, the rest replayed or discarded.
    async fn dead_letters(&mut self) -> StoreResult<()> {
        let (plan, timeline) = (self.plan, self.timeline);
        let stride = (plan.claims / plan.dead_letters.max(1)).max(1);
        for range in batches(plan.dead_letters) {
            let batch: Vec<DeadLetter> = range
                .map(|j| {
                    let i = (j * stride + stride / 2) % timeline.claims;
                    dead_letter(i, plan, timeline.arrival(i), &mut self.rng)
                })
                .collect();
            self.store.bulk_insert_dead_letters(&batch).await?;
        }
        self.progress("dead letters", plan.dead_letters);
        Ok(())
    }

    /// Audit entries for one claim in a hundred: a realistic trail to index.
    async fn audit(&mut self) -> StoreResult<()> {
        let (plan, timeline) = (self.plan, self.timeline);
        let audits = plan.claims / 100;
        for range in batches(audits) {
            let batch: Vec<AuditEntry> = range
                .map(|j| {
                    let i = (j * 100 + 7) % timeline.claims;
                    resolution(j, i, plan, timeline.arrival(i) + TimeDelta::hours(1))
                })
                .collect();
            self.store.bulk_insert_audit(&batch).await?;
        }
        self.progress("audit entries", audits);
        Ok(())
    }

    /// Per-minute metrics for every consumer over the whole span, then the
    /// rollups rebuilt (the history lies behind their watermark).
    async fn metrics(&mut self, span: TimeDelta) -> StoreResult<()> {
        let plan = self.plan;
        let minutes = span.num_minutes();
        let per_minute = plan
            .metrics_rate
            .unwrap_or(plan.claims as f64 / minutes as f64 / f64::from(plan.consumers.max(1)));
        let mut batch = Vec::with_capacity(BATCH as usize);
        let mut rows = 0u64;
        for n in 0..plan.consumers.clamp(1, MAX_CONSUMERS) {
            let consumer = &consumer_name(n);
            for m in 0..minutes {
                let at = Ts::from(self.timeline.start + TimeDelta::minutes(m));
                minute_samples(consumer, at, per_minute, &mut self.rng, &mut batch);
                if batch.len() >= BATCH as usize {
                    rows += batch.len() as u64;
                    self.store.bulk_insert_metrics(&batch).await?;
                    batch.clear();
                }
            }
        }
        rows += batch.len() as u64;
        self.store.bulk_insert_metrics(&batch).await?;
        self.store.metrics().reset_rollups().await?;
        self.progress("metric rows", rows);
        Ok(())
    }
}

/// The outbox row of claim `i`, created at `created`.
fn outbox_row(i: u64, plan: &SeedPlan, created: DateTime<Utc>, rng: &mut StdRng) -> OutboxRow {
    let pending = rng.random_bool(0.001);
    OutboxRow {
        id: 0,
        consumer: consumer_of(i, plan.consumers),
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
}

/// The dead letter of claim `i`, first failing at `at`.
fn dead_letter(i: u64, plan: &SeedPlan, at: DateTime<Utc>, rng: &mut StdRng) -> DeadLetter {
    let state = match rng.random::<f64>() {
        r if r < 0.05 => DeadLetterState::Open,
        r if r < 0.8 => DeadLetterState::Replayed,
        _ => DeadLetterState::Discarded,
    };
    DeadLetter {
        id: 0,
        consumer: consumer_of(i, plan.consumers),
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
        broker: None,
    }
}

/// The `j`-th audit entry: an operator resolving claim `i` at `at`.
fn resolution(j: u64, i: u64, plan: &SeedPlan, at: DateTime<Utc>) -> AuditEntry {
    AuditEntry {
        id: 0,
        action_id: Some(format!("seed-{j}")),
        at,
        actor: "operator".into(),
        actor_role: "operator".into(),
        action: idem_domain::AuditAction::ResolveSent,
        consumer: Some(consumer_of(i, plan.consumers)),
        key: Some(key_of(i)),
        target: None,
        state_before: Some(idem_domain::AuditState::parse("unknown (version 1)")),
        state_after: Some(idem_domain::AuditState::parse("sent (version 2)")),
        reason: Some("checked with the provider".into()),
        result: idem_domain::AuditResult::Ok,
        client_addr: None,
        recovery_seconds: None,
    }
}

/// One consumer's minute of metrics at `at`, appended to `batch`: counters,
/// ages, and histograms with outcomes mostly within a second (a few slow)
/// and duplicates mostly inside the FIFO window (a few after it).
fn minute_samples(
    consumer: &str,
    at: Ts,
    per_minute: f64,
    rng: &mut StdRng,
    batch: &mut Vec<MetricSample>,
) {
    let deliveries = (per_minute * rng.random_range(0.5..1.5)).round();
    let duplicates = (deliveries * 0.03).round();
    let rare = |rng: &mut StdRng, p: f64| f64::from(u8::from(rng.random_bool(p)));
    let readings = [
        (Metric::Deliveries, deliveries),
        (Metric::NewClaims, deliveries - duplicates),
        (Metric::DuplicateClaims, duplicates),
        (Metric::Sends, (deliveries - duplicates) * 0.97),
        (Metric::DeadLetters, rare(rng, 0.02)),
        (Metric::TransactionFailures, rare(rng, 0.05)),
        (Metric::UnknownOutcomes, rare(rng, 0.01)),
        (Metric::QueueOldestAgeSeconds, rng.random_range(0.0..90.0)),
        (Metric::OutboxOldestAgeSeconds, rng.random_range(0.0..40.0)),
    ];
    let outcomes = deliveries - duplicates;
    let histograms = [
        (Metric::OutcomeLatencySeconds, 0.4, (outcomes * 0.9).round()),
        (
            Metric::OutcomeLatencySeconds,
            4.0,
            (outcomes * 0.09).round(),
        ),
        (Metric::OutcomeLatencySeconds, 1200.0, rare(rng, 0.2)),
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
    let sample = |metric: Metric, bucket: String, value: f64| MetricSample {
        consumer: consumer.to_owned(),
        metric,
        at,
        bucket,
        value,
    };
    for (metric, value) in readings {
        // Consumers flush what they counted; a zero count is no row.
        if value == 0.0 && metric.kind() == idem_domain::MetricKind::Counter {
            continue;
        }
        batch.push(sample(metric, String::new(), value));
    }
    for (metric, seconds, count) in histograms {
        if count > 0.0 {
            batch.push(sample(metric, metric.bucket_for(seconds), count));
        }
    }
}
