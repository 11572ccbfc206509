use std::{process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use idem_store::{DEFAULT_DATABASE_URL, Store, StoreConfig};
use idem_tools::{bench, cause_chain, plans, seed};

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
    Plans,
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

/// Runs one command; `Err` is the line to print.
async fn run(command: Command) -> Result<(), String> {
    let database_url =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned());
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
        Command::Plans => plans::run(&database_url).await,
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
    }
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
