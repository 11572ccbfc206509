//! `idem-tools plans`: runs every dashboard read against a (large, seeded)
//! Postgres database with `auto_explain`, prints each statement's plan and
//! time, and fails when any of them scans a whole table.
//!
//! The plans are those of the real statements with real parameters: the
//! store's own methods run them, and `auto_explain` sends each executed
//! statement's plan back as a notice, which this command collects.

use std::time::Instant;

use idem_domain::{ClaimStatus, ConsumerName, DeadLetterState, IdempotencyKey};
use idem_store::{
    AuditFilter, ClaimSearch, DeadLetterFilter, PageRequest, Store, StoreConfig, StoreError,
    StoreResult, Ts,
};
use tracing_subscriber::prelude::*;

mod notices;
mod scans;

use notices::Notices;
use scans::{scans, sequential_scans};

struct Measured {
    name: String,
    millis: f64,
    scans: Vec<String>,
    /// Rows read by sequential scans of large tables that stop at a LIMIT
    /// (the capped counts).
    bounded_rows: u64,
    /// Whether a table small enough to read whole was read whole.
    small_tables: bool,
    full_scan: bool,
}

/// A sequential scan is acceptable only under a LIMIT and when it read few
/// rows: then its cost is the cap's, not the table's.
const BOUNDED_SCAN_ROWS: u64 = 100_000;

/// Or when its whole table is this small (the one-row `idem_meta`, the
/// accounts): reading it costs less than an index would, and Postgres
/// rightly does.
const SMALL_TABLE_ROWS: u64 = 1_000;

/// Runs `read` eight times (past the five executions after which Postgres may
/// switch a prepared statement to a generic plan); keeps the plans of the last
/// run and the median time of the last five.
async fn measure<F, Fut, T>(notices: &Notices, name: &str, read: F) -> StoreResult<Measured>
where
    F: Fn() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    eprintln!("plans: {name}");
    let mut times = Vec::new();
    let mut plans = Vec::new();
    for _ in 0..8 {
        notices.take();
        let started = Instant::now();
        read().await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        plans = notices.take();
    }
    let mut last: Vec<f64> = times[3..].to_vec();
    last.sort_by(f64::total_cmp);
    let best = last[last.len() / 2];
    let scans: Vec<String> = plans.iter().flat_map(|p| scans(p)).collect();
    let sequential: Vec<(bool, u64)> = plans.iter().flat_map(|p| sequential_scans(p)).collect();
    let full_scan = sequential.iter().any(|(under_limit, rows)| {
        *rows > SMALL_TABLE_ROWS && (!under_limit || *rows > BOUNDED_SCAN_ROWS)
    });
    let bounded_rows = sequential
        .iter()
        .map(|(_, rows)| rows)
        .filter(|rows| **rows > SMALL_TABLE_ROWS)
        .sum();
    let small_tables = sequential.iter().any(|(_, rows)| *rows <= SMALL_TABLE_ROWS);
    Ok(Measured {
        name: name.to_owned(),
        millis: best,
        scans,
        bounded_rows,
        small_tables,
        full_scan,
    })
}

/// A cursor `pages` pages into a list (how deep a person could page).
async fn deep_cursor<F, Fut, T>(pages: usize, mut read: F) -> StoreResult<Option<String>>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: Future<Output = StoreResult<idem_domain::Page<T>>>,
{
    let mut cursor = None;
    for _ in 0..pages {
        let page = read(PageRequest::new(PageRequest::MAX_LIMIT, cursor.clone())).await?;
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(cursor)
}

/// Migrates the database and rolls its metrics up to the last complete
/// hour, as the running console keeps it (a freshly seeded one holds only
/// minutes, and its charts would read them all), then vacuums the rollups
/// as autovacuum would.
async fn bring_up_to_date(database_url: &str) -> Result<(), String> {
    let store = Store::connect(&StoreConfig::new(database_url)).map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| crate::cause_chain(&e))?;
    let hours = store
        .roll_up_hours(Ts::now())
        .await
        .map_err(|e| crate::cause_chain(&e))?;
    store.close().await;
    let pool = sqlx::PgPool::connect(database_url)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query("VACUUM ANALYZE consumer_metrics_hourly, consumer_metrics_6h")
        .execute(&pool)
        .await
        .map_err(|e| e.to_string())?;
    pool.close().await;
    eprintln!("plans: rolled up {hours} hours of metrics first");
    Ok(())
}

/// Prints a Markdown table of every dashboard read; `Err` when one scans a table.
pub async fn run(database_url: &str) -> Result<(), String> {
    let notices = Notices::default();
    tracing_subscriber::registry().with(notices.clone()).init();
    let mut config = StoreConfig::new(database_url);
    config.max_connections = 1;
    config.postgres_settings = [
        ("session_preload_libraries", "auto_explain"),
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_buffers", "on"),
        ("auto_explain.log_level", "notice"),
        ("client_min_messages", "notice"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    if !config.is_postgres() {
        return Err(
            "idem-tools plans needs a postgres:// DATABASE_URL (it reads plans with auto_explain)"
                .into(),
        );
    }
    bring_up_to_date(database_url).await?;
    let store = Store::connect(&config).map_err(|e| e.to_string())?;
    match measure_all(&store, &notices).await {
        Ok(true) => Err("a dashboard read scans a whole table".into()),
        Ok(false) => Ok(()),
        Err(err) => Err(crate::cause_chain(&err)),
    }
}

/// Prints the table; `Ok(true)` when a read scans a whole table.
async fn measure_all(store: &Store, notices: &Notices) -> Result<bool, StoreError> {
    let sample = store
        .search_claims(&ClaimSearch::default(), &PageRequest::first(1))
        .await?
        .page
        .items
        .into_iter()
        .next()
        .ok_or_else(|| {
            StoreError::Contract("the database holds no claims: run `idem-tools seed` first".into())
        })?;
    let contract = |e: idem_domain::KeyError| StoreError::Contract(e.to_string());
    let key = SampleKey {
        prefix: sample.key.chars().take(12).collect(),
        consumer: ConsumerName::parse(sample.consumer).map_err(contract)?,
        key: IdempotencyKey::parse(sample.key).map_err(contract)?,
        provider_ref: sample.provider_ref.unwrap_or_default(),
    };
    let reads = Reads { store, notices };
    let mut rows = reads.overview().await?;
    rows.extend(reads.lists().await?);
    rows.extend(reads.key_page(&key).await?);
    rows.extend(reads.searches(&key).await?);
    rows.extend(reads.charts_slos_audit_sign_in().await?);
    rows.extend(reads.checks().await?);
    Ok(print_table(&rows))
}

/// The newest claim, whose key page and searches are measured.
struct SampleKey {
    consumer: ConsumerName,
    key: IdempotencyKey,
    provider_ref: String,
    /// The key's first 12 characters, for a prefix search.
    prefix: String,
}

/// Every dashboard read, measured one family at a time.
struct Reads<'a> {
    store: &'a Store,
    notices: &'a Notices,
}

impl Reads<'_> {
    async fn overview(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        Ok(vec![
            measure(
                notices,
                "overview: every count and list (one connection)",
                || store.overview(5, 10_000, Ts::now()),
            )
            .await?,
        ])
    }

    /// The work lists' first pages, and pages as deep as a person could go.
    async fn lists(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let unknown_deep =
            deep_cursor(25, |p| async move { store.unknown_claims(&p).await }).await?;
        let dead_deep = deep_cursor(10, |p| async move {
            store.dead_letters(DeadLetterState::Open, &p).await
        })
        .await?;
        let unknown_deep = PageRequest::new(PageRequest::DEFAULT_LIMIT, unknown_deep);
        let dead_deep = PageRequest::new(PageRequest::DEFAULT_LIMIT, dead_deep);
        let open = DeadLetterState::Open;
        // What a redrive takes has this shape too (the open ones, filtered).
        let rate_limited = DeadLetterFilter {
            error: Some("429".into()),
            ..DeadLetterFilter::default()
        };
        Ok(vec![
            measure(notices, "/unknown first page", || {
                store.unknown_claims(&first)
            })
            .await?,
            measure(notices, "/unknown page 5,000 rows deep", || {
                store.unknown_claims(&unknown_deep)
            })
            .await?,
            measure(notices, "/dead-letters first page", || {
                store.dead_letters(open, &first)
            })
            .await?,
            measure(notices, "/dead-letters page 2,000 rows deep", || {
                store.dead_letters(open, &dead_deep)
            })
            .await?,
            measure(
                notices,
                "/dead-letters whose error contains 429, first page",
                || store.dead_letters_in(open, &first, &rate_limited),
            )
            .await?,
            measure(
                notices,
                "/dead-letters whose error contains 429, counted",
                || store.count_dead_letters_in(open, &rate_limited, 10_000),
            )
            .await?,
            measure(notices, "/outbox first page", || {
                store.unpublished_outbox(&first)
            })
            .await?,
        ])
    }

    async fn key_page(&self, sample: &SampleKey) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let SampleKey {
            consumer,
            key,
            provider_ref,
            ..
        } = sample;
        Ok(vec![
            measure(notices, "key page: every read (one connection)", || {
                store.key_records(consumer, key)
            })
            .await?,
            measure(notices, "key page: claim", || store.claim(consumer, key)).await?,
            measure(notices, "key page: outbox rows", || {
                store.outbox_for_key(consumer, key)
            })
            .await?,
            measure(notices, "key page: dead letters", || {
                store.dead_letters_for_key(consumer, key)
            })
            .await?,
            measure(notices, "key page: audit entries", || {
                store.audit_for_key(consumer, key)
            })
            .await?,
            measure(notices, "key page: same provider reference", || {
                store.claims_with_provider_ref(provider_ref, (consumer, key), 5)
            })
            .await?,
            measure(notices, "/keys/{key}: every consumer", || {
                store.claims_with_key(key, 50)
            })
            .await?,
        ])
    }

    /// `/keys` with each kind of filter, and newest activity paged deep.
    async fn searches(&self, sample: &SampleKey) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let browse_deep = deep_cursor(25, |p| async move {
            Ok(store.search_claims(&ClaimSearch::default(), &p).await?.page)
        })
        .await?;
        let search =
            |prefix: Option<&str>, consumer: bool, status: Option<ClaimStatus>| ClaimSearch {
                prefix: prefix.map(str::to_owned),
                consumer: consumer.then(|| sample.consumer.clone()),
                status,
                ..Default::default()
            };
        let searches = [
            ("/keys newest activity", ClaimSearch::default()),
            (
                "/keys?q= (12-character prefix)",
                search(Some(&sample.prefix), false, None),
            ),
            (
                "/keys?q=renewal: (10,000+ matches, capped)",
                search(Some("renewal:"), false, None),
            ),
            ("/keys?consumer=", search(None, true, None)),
            (
                "/keys?status=unknown",
                search(None, false, Some(ClaimStatus::Unknown)),
            ),
            (
                "/keys?status=failed&consumer=",
                search(None, true, Some(ClaimStatus::Failed)),
            ),
        ];
        let mut rows = Vec::new();
        for (name, search) in searches {
            rows.push(measure(notices, name, || store.search_claims(&search, &first)).await?);
        }
        let deep = PageRequest::new(PageRequest::DEFAULT_LIMIT, browse_deep);
        let everything = ClaimSearch::default();
        rows.push(
            measure(notices, "/keys newest activity, 5,000 rows deep", || {
                store.search_claims(&everything, &deep)
            })
            .await?,
        );
        Ok(rows)
    }
}

impl Reads<'_> {
    /// The chart and SLO reads over thirty days of metrics, the audit log's
    /// first pages and sign-in's reads.
    async fn charts_slos_audit_sign_in(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let now = chrono::Utc::now();
        let app = |e: idem_app::error::AppError| StoreError::Contract(e.to_string());
        let slos = idem_domain::slo::SloSet::default();
        let indicators: Vec<_> = slos.slos.iter().map(|s| &s.sli).collect();
        let to = Ts::from(now);
        let froms: Vec<Ts> = [30 * 24, 6, 1]
            .map(|hours| to - chrono::TimeDelta::hours(hours))
            .to_vec();
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let everyone = AuditFilter::default();
        let by_actor = AuditFilter {
            actor: Some("operator".into()),
            ..AuditFilter::default()
        };
        let recoveries = AuditFilter {
            from: Some(to - chrono::TimeDelta::days(1)),
            recoveries: true,
            ..AuditFilter::default()
        };
        let limits = idem_domain::sign_in::SignInLimits::default();
        Ok(vec![
            measure(notices, "charts, 24h: every metric", || async {
                idem_app::api::charts::chart_reads(store, "24h", now)
                    .await
                    .map_err(app)
            })
            .await?,
            measure(notices, "charts, 28d: every metric", || async {
                idem_app::api::charts::chart_reads(store, "28d", now)
                    .await
                    .map_err(app)
            })
            .await?,
            measure(notices, "SLO board: every indicator, 30d/6h/1h", || {
                store.indicator_events_since(&indicators, &froms, to)
            })
            .await?,
            measure(
                notices,
                "/metrics: consumer counters of a settled minute",
                || {
                    let settled = (to - chrono::TimeDelta::minutes(5)).minute();
                    store.counter_sums(settled - chrono::TimeDelta::minutes(1), settled)
                },
            )
            .await?,
            measure(notices, "/audit first page", || {
                store.audit_log(&everyone, &first)
            })
            .await?,
            measure(notices, "/audit by actor", || {
                store.audit_log(&by_actor, &first)
            })
            .await?,
            measure(notices, "/audit recoveries of the last day", || {
                store.audit_log(&recoveries, &first)
            })
            .await?,
            measure(notices, "sign-in: the account", || {
                store.user_by_name("operator")
            })
            .await?,
            measure(notices, "sign-in: a known device", || {
                store.known_device(&limits, "operator", "0000", to)
            })
            .await?,
        ])
    }
}

impl Reads<'_> {
    /// `/checks`: every check's count in one statement, and each check's
    /// first page, against the default objective and retention.
    async fn checks(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let limits = idem_store::CheckLimits {
            now: Ts::now(),
            unknown_objective: chrono::TimeDelta::minutes(15),
            claim_retention: idem_domain::ClaimRetention::days(30)
                .with("payments", chrono::TimeDelta::days(90)),
        };
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let mut rows = vec![
            measure(notices, "/checks: every count", || {
                store.count_check_findings(&limits, 10_000)
            })
            .await?,
        ];
        for check in idem_domain::Check::ALL {
            let name = format!("/checks/{check} first page");
            rows.push(
                measure(notices, &name, || {
                    store.check_findings(check, &limits, &first)
                })
                .await?,
            );
        }
        Ok(rows)
    }
}

/// Prints the Markdown table; `true` when a read scans a whole table.
fn print_table(rows: &[Measured]) -> bool {
    println!("| read | median (ms) | scans | verdict |");
    println!("|---|---:|---|---|");
    let mut failed = false;
    for row in rows {
        failed |= row.full_scan;
        let mut scans = row.scans.clone();
        scans.dedup();
        let verdict = if row.full_scan {
            "**scans a table**".to_owned()
        } else if row.bounded_rows > 0 {
            format!("bounded: a LIMIT stops it after {} rows", row.bounded_rows)
        } else if row.small_tables {
            format!("index, and a table of at most {SMALL_TABLE_ROWS} rows read whole")
        } else {
            "index".to_owned()
        };
        println!(
            "| {} | {:.2} | {} | {verdict} |",
            row.name,
            row.millis,
            scans.join("; ")
        );
    }
    failed
}
