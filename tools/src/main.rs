use std::{process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use idem_store::{DEFAULT_DATABASE_URL, Store, StoreConfig};
use idem_tools::{bench, cause_chain, compression, load, plans, reconcile, seed};

/// Idem's tooling for benchmarks and plan checks (not shipped in `idem`).
/// The database is DATABASE_URL (default: Idem's embedded SQLite file).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fill DATABASE_URL with a production-sized synthetic data set.
    /// Refuses a database that holds anything it did not seed, unless --force.
    Seed {
        #[arg(long, default_value_t = 1_000_000)]
        claims: u64,
        /// Outbox rows (default: a tenth of the claims).
        #[arg(long)]
        outbox: Option<u64>,
        /// Dead letters (default: a hundredth of the claims).
        #[arg(long)]
        dead_letters: Option<u64>,
        /// Consumers the rows spread over (1 to 1,000; past ten the names
        /// repeat as `reminders-2`, `payment-webhooks-2`, …).
        #[arg(long, default_value_t = 10)]
        consumers: u32,
        #[arg(long, default_value_t = 30)]
        days: u32,
        /// Also write per-minute metrics for every consumer and day.
        #[arg(long)]
        metrics: bool,
        /// Deliveries per consumer and minute in those metrics (default: the claims' rate).
        #[arg(long)]
        metrics_rate: Option<f64>,
        #[arg(long, default_value_t = 1842)]
        seed: u64,
        /// Write even into a database holding claims, accounts or demo data.
        #[arg(long)]
        force: bool,
    },
    /// Print the plan and time of every dashboard read on DATABASE_URL (Postgres);
    /// fail if any scans a whole table.
    Plans {
        /// Also print the whole plans, with buffers, of the reads whose
        /// name contains this (repeatable), e.g. `--show "/unknown first"`.
        #[arg(long)]
        show: Vec<String>,
    },
    /// Time every dashboard read on each Postgres database (seeded with
    /// `idem-tools seed`) beside the naive form of the same question, and the
    /// growth from the first database to the last; see docs/BENCHMARKS.md.
    Bench {
        /// postgres:// URLs, smallest first (for example 1M, then 10M claims).
        #[arg(required = true)]
        urls: Vec<String>,
        /// Timed runs of each of Idem's reads.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Timed runs of each naive query.
        #[arg(long, default_value_t = 5)]
        naive_runs: usize,
        /// Seconds a naive query may run before it counts as timed out.
        #[arg(long, default_value_t = 30)]
        naive_timeout: u64,
        /// Rows deep for the deep keyset page.
        #[arg(long, default_value_t = 1_000_000)]
        depth: u64,
        /// Measure without the pending → sent/failed workload.
        #[arg(long)]
        no_workload: bool,
    },
    /// Load an Idem on loopback at a fixed rate for some rounds and print
    /// each round's latency from when each request was due (p50, p99,
    /// p99.9), then the median and range over the rounds.
    Load {
        /// The server, e.g. http://127.0.0.1:3950 (loopback only).
        #[arg(long)]
        base: String,
        /// A path to request (repeatable); requests rotate over them.
        #[arg(long = "path")]
        paths: Vec<String>,
        /// A file of paths, one per line, added to the rotation.
        #[arg(long)]
        paths_file: Option<std::path::PathBuf>,
        /// The Cookie header (a signed-in session).
        #[arg(long)]
        cookie: Option<String>,
        /// Requests per second.
        #[arg(long)]
        rate: f64,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Requests in flight at most.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// A name for the printed rows.
        #[arg(long, default_value = "load")]
        name: String,
    },
    /// Reconcile an export of a consumer's latest claims (written here from
    /// them) against DATABASE_URL and print the time and memory it took.
    Reconcile {
        #[arg(long, default_value = "reminders")]
        consumer: String,
        #[arg(long, default_value_t = 50_000)]
        records: usize,
    },
    /// Bytes and CPU time of every brotli and gzip level on saved pages
    /// (HTML or JSON as Idem served them), as a Markdown table per file.
    Compression {
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// Timed runs per level (the median is printed).
        #[arg(long, default_value_t = 50)]
        runs: usize,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse().command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("idem-tools: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The paths listed in `file`, one a line, if a file is given.
fn listed_paths(file: Option<&std::path::Path>) -> Result<Vec<String>, String> {
    let Some(file) = file else {
        return Ok(Vec::new());
    };
    let listed = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(listed
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// DATABASE_URL, else Idem's embedded SQLite file.
fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned())
}

/// Runs one command; `Err` is the line to print.
async fn run(command: Command) -> Result<(), String> {
    let database_url = database_url();
    match command {
        Command::Seed {
            claims,
            outbox,
            dead_letters,
            consumers,
            days,
            metrics,
            metrics_rate,
            seed,
            force,
        } => {
            let plan = seed::SeedPlan {
                claims,
                outbox: outbox.unwrap_or(claims / 10),
                dead_letters: dead_letters.unwrap_or(claims / 100),
                consumers,
                days,
                metrics,
                metrics_rate,
                seed,
            };
            let store = connect(&database_url).await?;
            seed::check_target(&store, force)
                .await
                .map_err(|e| cause_chain(&e))?;
            eprintln!("seeding {} with {plan:?}", store_url(&database_url));
            seed::run(&store, &plan).await.map_err(|e| cause_chain(&e))
        }
        Command::Plans { show } => plans::run(&database_url, &show).await,
        Command::Bench {
            urls,
            runs,
            naive_runs,
            naive_timeout,
            depth,
            no_workload,
        } => {
            let options = bench::BenchOptions {
                urls,
                runs,
                naive_runs,
                naive_timeout: Duration::from_secs(naive_timeout),
                depth,
                workload: !no_workload,
            };
            bench::run(&options).await
        }
        Command::Load {
            base,
            mut paths,
            paths_file,
            cookie,
            rate,
            seconds,
            rounds,
            connections,
            name,
        } => {
            paths.extend(listed_paths(paths_file.as_deref())?);
            let options = load::LoadOptions {
                base,
                paths,
                cookie,
                rate,
                duration: Duration::from_secs(seconds),
                connections,
            };
            load_rounds(&name, &options, rounds).await
        }
        Command::Compression { files, runs } => compression::run(&files, runs),
        Command::Reconcile { consumer, records } => {
            reconcile::run(&connect(&database_url).await?, &consumer, records).await
        }
    }
}

/// Runs `rounds` rounds and prints a Markdown row for each and a summary.
async fn load_rounds(name: &str, options: &load::LoadOptions, rounds: usize) -> Result<(), String> {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut results = Vec::new();
    for _ in 0..rounds {
        let round = load::round(options).await?;
        let why: Vec<String> = round
            .failed_as
            .iter()
            .map(|(what, count)| format!("{what}: {count}"))
            .collect();
        println!(
            "| {name} | {:.0} req/s | {:.2} | {:.2} | {:.2} | {:.2} | {} of {} failed{} |",
            round.achieved,
            ms(round.p50),
            ms(round.p99),
            ms(round.p999),
            ms(round.max),
            round.failures,
            round.requests,
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            }
        );
        results.push(round);
    }
    let column = |f: &dyn Fn(&load::Round) -> f64| {
        let values: Vec<f64> = results.iter().map(f).collect();
        load::median_and_range(&values, |v| format!("{v:.2}"))
    };
    println!(
        "| {name}, median (range) of {rounds} | {:.0} req/s | {} | {} | {} | {} | {} failed |",
        options.rate,
        column(&|r| ms(r.p50)),
        column(&|r| ms(r.p99)),
        column(&|r| ms(r.p999)),
        column(&|r| ms(r.max)),
        results.iter().map(|r| r.failures).sum::<usize>()
    );
    Ok(())
}

/// The database, migrated, with no statement timeout: bulk loads of
/// millions of rows are long statements by design.
async fn connect(url: &str) -> Result<Store, String> {
    let mut config = StoreConfig::new(url);
    config.statement_timeout = None;
    let store = Store::connect(&config).map_err(|e| cause_chain(&e))?;
    store.migrate().await.map_err(|e| cause_chain(&e))?;
    Ok(store)
}

/// The URL without its password, for a progress line.
fn store_url(url: &str) -> String {
    StoreConfig::new(url).redacted_url()
}
