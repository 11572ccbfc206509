//! `idem-tools plans`: runs every dashboard read against a (large, seeded)
//! Postgres database with `auto_explain`, prints each statement's plan and
//! time, and fails when any of them scans a whole table.
//!
//! The plans are those of the real statements with real parameters: the
//! store's own methods run them, and `auto_explain` sends each executed
//! statement's plan back as a notice, which this command collects.

use std::time::Instant;

use idem_domain::{ConsumerName, IdempotencyKey};
use idem_store::{ClaimSearch, PageRequest, Store, StoreConfig, StoreError, StoreResult, Ts};
use tracing_subscriber::prelude::*;

mod notices;
mod reads;
mod scans;

use notices::Notices;
use reads::{Reads, SampleKey};
use scans::{scans, sequential_scans};

struct Measured {
    name: String,
    millis: f64,
    /// The last run's plans, as `auto_explain` wrote them (with buffers).
    plans: Vec<String>,
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
        plans,
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
        .metrics()
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

/// Prints a Markdown table of every dashboard read, then the whole plans
/// (`EXPLAIN (ANALYZE, BUFFERS)`, as `auto_explain` logs it) of each read
/// whose name contains one of `show`; `Err` when one scans a table.
pub async fn run(database_url: &str, show: &[String]) -> Result<(), String> {
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
    match measure_all(&store, &notices, show).await {
        Ok(true) => Err("a dashboard read scans a whole table".into()),
        Ok(false) => Ok(()),
        Err(err) => Err(crate::cause_chain(&err)),
    }
}

/// Prints the table; `Ok(true)` when a read scans a whole table.
async fn measure_all(
    store: &Store,
    notices: &Notices,
    show: &[String],
) -> Result<bool, StoreError> {
    let sample = store
        .claims()
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
    rows.extend(reads.consumer_table().await?);
    rows.extend(reads.charts_slos_audit_sign_in().await?);
    rows.extend(reads.checks().await?);
    let failed = print_table(&rows);
    for row in rows
        .iter()
        .filter(|r| show.iter().any(|s| r.name.contains(s.as_str())))
    {
        println!("\n### {}\n\n```", row.name);
        for plan in &row.plans {
            println!("{}", plan.trim_end());
        }
        println!("```");
    }
    Ok(failed)
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
