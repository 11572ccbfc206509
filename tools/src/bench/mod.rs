//! `idem-tools bench URL…`: every dashboard read against seeded Postgres
//! databases, timed over repeated runs (p50, p99), side by side with the
//! naive form of the same question — `GROUP BY status`, a total count plus
//! `OFFSET`, raw time-bucket aggregation over the per-minute metrics — as a
//! ratio measured in the same run, and the growth of each from the first
//! database to the last (seed one with 1M claims and one with 10M).
//!
//! Before measuring, the hourly rollup is brought up to date, as the running
//! console keeps it. Idem's side runs the same code the pages run (`idem_app`'s overview and
//! chart reads, the store's list, key and search methods). While it
//! measures, a workload moves pending claims to sent or failed and claims
//! new keys, as a live fleet would. Naive queries run under a statement
//! timeout and are reported as timed out when they hit it.

mod reads;
mod workload;

use std::{
    future::Future,
    time::{Duration, Instant},
};

use idem_store::{ClaimSearch, PageRequest, Store, StoreConfig};
use reads::Reads;
use sqlx::{
    Executor, PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use workload::Workload;

/// How `idem-tools bench` runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub urls: Vec<String>,
    /// Timed runs of each of Idem's reads (after two warm-up runs).
    pub runs: usize,
    /// Timed runs of each naive query (after one warm-up run).
    pub naive_runs: usize,
    /// The statement timeout naive queries run under.
    pub naive_timeout: Duration,
    /// How deep the deep keyset page is, in rows.
    pub depth: u64,
    /// Run the pending → sent/failed workload while measuring.
    pub workload: bool,
}

/// p50 and p99 of one query's runs, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Sample {
    p50: f64,
    p99: f64,
}

impl Sample {
    fn of(mut millis: Vec<f64>) -> Sample {
        millis.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((millis.len() as f64 - 1.0) * q).round() as usize;
            millis.get(i).copied().unwrap_or(f64::NAN)
        };
        Sample {
            p50: at(0.50),
            p99: at(0.99),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Naive {
    /// The query has no naive form distinct from Idem's.
    None,
    Measured(Sample),
    /// It ran into the statement timeout.
    TimedOut,
}

struct Row {
    name: &'static str,
    idem: Sample,
    naive: Naive,
}

struct Run {
    url: String,
    claims: i64,
    rows: Vec<Row>,
    /// Workload updates per second while measuring.
    workload_rate: Option<f64>,
}

async fn time_idem<F, Fut, T, E>(runs: usize, mut read: F) -> Result<Sample, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    for _ in 0..2 {
        read().await.map_err(|e| e.to_string())?;
    }
    let mut millis = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        read().await.map_err(|e| e.to_string())?;
        millis.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(Sample::of(millis))
}

/// Runs `statements` in order as one sample; a statement timeout ends the
/// measurement as [`Naive::TimedOut`].
async fn time_naive(pool: &PgPool, runs: usize, statements: &[String]) -> Result<Naive, String> {
    let mut millis = Vec::with_capacity(runs);
    for run in 0..=runs {
        let started = Instant::now();
        for sql in statements {
            match pool.execute(sql.as_str()).await {
                Ok(_) => {}
                Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("57014") => {
                    return Ok(Naive::TimedOut);
                }
                Err(err) => return Err(format!("{sql}: {err}")),
            }
        }
        if run > 0 {
            millis.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    Ok(Naive::Measured(Sample::of(millis)))
}

/// A cursor `rows` rows into the newest-activity key list.
async fn deep_cursor(store: &Store, rows: u64) -> Result<Option<String>, String> {
    let mut cursor = None;
    let mut seen = 0;
    while seen + u64::from(PageRequest::MAX_LIMIT) <= rows {
        let page = PageRequest::new(PageRequest::MAX_LIMIT, cursor.clone());
        let found = store
            .claims()
            .search_claims(&ClaimSearch::default(), &page)
            .await
            .map_err(|e| e.to_string())?
            .page;
        seen += found.items.len() as u64;
        match found.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(cursor)
}

/// Measures one database: prepares it, runs the workload (if asked) while
/// every read is timed, then removes what the workload wrote.
async fn measure(url: &str, options: &BenchOptions) -> Result<Run, String> {
    let target = Target::prepare(url, options).await?;
    let workload = Workload::start(url, options.workload).await?;
    let reads = Reads {
        target: &target,
        options,
    };
    let mut rows = vec![reads.overview().await?];
    rows.extend(reads.lists().await?);
    rows.push(reads.deep_page().await?);
    rows.push(reads.key_page().await?);
    rows.extend(reads.charts().await?);
    let workload_rate = workload.stop(url).await?;
    target.naive_pool.close().await;
    target.store.close().await;
    Ok(Run {
        url: redact(url),
        claims: target.claims,
        rows,
        workload_rate,
    })
}

/// A database brought to the state the running console keeps it in, with
/// what the reads need: a claim to open and a cursor deep in the key list.
struct Target {
    store: Store,
    /// One connection under the naive timeout, for the naive queries.
    naive_pool: PgPool,
    claims: i64,
    sample: idem_domain::Claim,
    depth: u64,
    deep: Option<String>,
}

impl Target {
    async fn prepare(url: &str, options: &BenchOptions) -> Result<Target, String> {
        let store = Store::connect(&StoreConfig::new(url)).map_err(|e| e.to_string())?;
        let base: PgConnectOptions = url.parse().map_err(|e: sqlx::Error| e.to_string())?;
        let naive_timeout = format!("{}ms", options.naive_timeout.as_millis());
        let naive_pool = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(base.options([("statement_timeout", naive_timeout.as_str())]))
            .await
            .map_err(|e| e.to_string())?;
        // The running console migrates its database and keeps the rollups
        // current; bring a database seeded earlier (perhaps by an older Idem)
        // to that state, and vacuum it, as autovacuum would.
        store.migrate().await.map_err(|e| e.to_string())?;
        let rolling = Instant::now();
        let hours = store
            .metrics()
            .roll_up_hours(idem_store::Ts::now())
            .await
            .map_err(|e| e.to_string())?;
        naive_pool
            .execute("VACUUM ANALYZE consumer_metrics_hourly, consumer_metrics_6h")
            .await
            .map_err(|e| e.to_string())?;
        eprintln!(
            "{}: rolled up {hours} hours of metrics in {:.1} s",
            redact(url),
            rolling.elapsed().as_secs_f64()
        );
        let claims: i64 = sqlx::query_scalar("SELECT count(*) FROM claims")
            .fetch_one(&naive_pool)
            .await
            .map_err(|e| e.to_string())?;
        let sample = store
            .claims()
            .search_claims(&ClaimSearch::default(), &PageRequest::first(1))
            .await
            .map_err(|e| e.to_string())?
            .page
            .items
            .into_iter()
            .next()
            .ok_or("the database holds no claims: run `idem-tools seed` first")?;
        let depth = options
            .depth
            .min(u64::try_from(claims).unwrap_or(0).saturating_sub(200));
        eprintln!("{url}: {claims} claims; paging {depth} rows deep for the deep keyset page");
        let deep = deep_cursor(&store, depth).await?;
        Ok(Target {
            store,
            naive_pool,
            claims,
            sample,
            depth,
            deep,
        })
    }
}

fn redact(url: &str) -> String {
    StoreConfig::new(url).redacted_url()
}

fn cell(naive: Naive, pick: impl Fn(Sample) -> f64) -> String {
    match naive {
        Naive::None => "—".into(),
        Naive::TimedOut => "timed out".into(),
        Naive::Measured(s) => format!("{:.2}", pick(s)),
    }
}

/// Measures every database in turn and prints the tables (Markdown).
pub async fn run(options: &BenchOptions) -> Result<(), String> {
    if options.urls.iter().any(|u| !u.starts_with("postgres")) {
        return Err("idem-tools bench needs postgres:// URLs".into());
    }
    let mut runs = Vec::new();
    for url in &options.urls {
        runs.push(measure(url, options).await?);
    }
    for run in &runs {
        println!("\n### {} claims ({})\n", run.claims, run.url);
        if let Some(rate) = run.workload_rate {
            println!(
                "Workload while measuring: {rate:.0} claim writes/s (pending → sent/failed, new claims).\n"
            );
        }
        println!(
            "| read | Idem p50 (ms) | Idem p99 (ms) | naive p50 (ms) | naive p99 (ms) | naive ÷ Idem (p50) |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for row in &run.rows {
            let ratio = match row.naive {
                Naive::Measured(s) => format!("{:.0}×", s.p50 / row.idem.p50),
                Naive::TimedOut => format!(
                    "> {:.0}×",
                    options.naive_timeout.as_secs_f64() * 1000.0 / row.idem.p50
                ),
                Naive::None => "—".into(),
            };
            println!(
                "| {} | {:.2} | {:.2} | {} | {} | {ratio} |",
                row.name,
                row.idem.p50,
                row.idem.p99,
                cell(row.naive, |s| s.p50),
                cell(row.naive, |s| s.p99),
            );
        }
    }
    if let [small, .., large] = runs.as_slice() {
        println!(
            "\n### Growth from {} to {} claims (p50)\n",
            small.claims, large.claims
        );
        println!("| read | Idem | naive |");
        println!("|---|---:|---:|");
        for (a, b) in small.rows.iter().zip(&large.rows) {
            let naive = match (a.naive, b.naive) {
                (Naive::Measured(x), Naive::Measured(y)) => format!("{:.1}×", y.p50 / x.p50),
                (Naive::Measured(_), Naive::TimedOut) => "timed out at the larger size".into(),
                _ => "—".into(),
            };
            println!("| {} | {:.2}× | {naive} |", a.name, b.idem.p50 / a.idem.p50);
        }
    }
    Ok(())
}
