use std::process::ExitCode;

use clap::{Parser, Subcommand};
use idem::{Application, Config, accounts, seed, telemetry};
use idem_domain::Role;
use idem_store::{Store, StoreConfig};

/// Idem, the console for idempotent queue consumers.
#[derive(Parser)]
#[command(version = VERSION, about)]
struct Cli {
    /// A file of settings (NAME=value lines, as systemd's EnvironmentFile);
    /// the environment overrides it. Also IDEM_CONFIG.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// `0.1.0 (commit 1a2b3c4d5e6f, built 2026-11-30)`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("IDEM_BUILD_COMMIT"),
    ", built ",
    env!("IDEM_BUILD_DATE"),
    ")"
);

#[derive(Subcommand)]
enum Command {
    /// Serve the console (the default). Settings come from the environment; see README.
    Serve,
    /// Fill DATABASE_URL with a production-sized synthetic data set (benchmarks, plan checks).
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
    },
    /// Print the plan and time of every dashboard read on DATABASE_URL (Postgres);
    /// fail if any scans a whole table.
    Plans,
    /// Time every dashboard read on each Postgres database (seeded with
    /// `idem seed`) beside the naive form of the same question, and the
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
    /// Print Prometheus alerting rules for the SLOs in force (IDEM_SLO_FILE or the
    /// defaults), with links to IDEM_PUBLIC_URL; see deploy/prometheus/.
    Rules {
        /// Where docs/RUNBOOK.md is published; each alert links to its section.
        #[arg(long)]
        runbook_url: Option<String>,
    },
    /// Manage accounts (passwords are read from standard input or a prompt).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create an account.
    Add {
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
    },
    /// Change an account's role (ends its sessions).
    Role {
        name: String,
        #[arg(value_parser = parse_role)]
        role: Role,
    },
    /// Set a new password (ends the account's sessions).
    ResetPassword { name: String },
    /// Disable an account (ends its sessions).
    Disable { name: String },
    /// Enable a disabled account.
    Enable { name: String },
    /// List accounts.
    List,
}

fn parse_role(value: &str) -> Result<Role, String> {
    value
        .parse()
        .map_err(|e: idem_domain::UnknownValue| e.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let file = cli
        .config
        .clone()
        .or_else(|| std::env::var_os("IDEM_CONFIG").map(Into::into));
    if let Some(file) = file
        && let Err(err) = idem::config::load_file(&file)
    {
        eprintln!("idem: {err}");
        return ExitCode::FAILURE;
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("idem: {err}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await,
        Command::Seed {
            claims,
            outbox,
            dead_letters,
            consumers,
            days,
            metrics,
            metrics_rate,
            seed,
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
            // Bulk loads of millions of rows are long statements by design.
            let mut database = config.database.clone();
            database.statement_timeout = None;
            let store = match connect(&database).await {
                Ok(store) => store,
                Err(code) => return code,
            };
            eprintln!("seeding {} with {plan:?}", config.database.redacted_url());
            match seed::run(&store, &plan).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("idem seed: {}", idem_app::ssr::cause_chain(&err));
                    ExitCode::FAILURE
                }
            }
        }
        Command::User { command } => {
            let store = match connect(&config.database).await {
                Ok(store) => store,
                Err(code) => return code,
            };
            let done = match command {
                UserCommand::Add { name, role } => match accounts::read_password() {
                    Ok(password) => accounts::add(&store, &name, role, password)
                        .await
                        .map(|()| format!("created {name} ({role})")),
                    Err(err) => Err(err),
                },
                UserCommand::Role { name, role } => accounts::set_role(&store, &name, role)
                    .await
                    .map(|()| format!("{name} is now {role}; their sessions ended")),
                UserCommand::ResetPassword { name } => match accounts::read_password() {
                    Ok(password) => accounts::reset_password(&store, &name, password)
                        .await
                        .map(|()| format!("new password set for {name}; their sessions ended")),
                    Err(err) => Err(err),
                },
                UserCommand::Disable { name } => accounts::set_disabled(&store, &name, true)
                    .await
                    .map(|()| format!("{name} is disabled; their sessions ended")),
                UserCommand::Enable { name } => accounts::set_disabled(&store, &name, false)
                    .await
                    .map(|()| format!("{name} is enabled")),
                UserCommand::List => accounts::list(&store).await,
            };
            match done {
                Ok(message) => {
                    println!("{}", message.trim_end());
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("idem user: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Rules { runbook_url } => {
            match idem::slo_config::load(config.slo_file.as_deref()) {
                Ok(slos) => {
                    let links = idem::rules::RuleLinks {
                        public_url: config
                            .auth
                            .public_url
                            .as_str()
                            .trim_end_matches('/')
                            .to_owned(),
                        runbook_url,
                    };
                    print!("{}", idem::rules::render(&slos, &links));
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("idem rules: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Bench {
            urls,
            runs,
            naive_runs,
            naive_timeout,
            depth,
            no_workload,
        } => {
            let options = idem::bench::BenchOptions {
                urls,
                runs,
                naive_runs,
                naive_timeout: std::time::Duration::from_secs(naive_timeout),
                depth,
                workload: !no_workload,
            };
            match idem::bench::run(&options).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("idem bench: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Plans => match idem::plans::run(config.database.url()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("idem plans: {err}");
                ExitCode::FAILURE
            }
        },
    }
}

async fn connect(config: &StoreConfig) -> Result<Store, ExitCode> {
    let store = Store::connect(config).map_err(|err| {
        eprintln!("idem: {err}");
        ExitCode::FAILURE
    })?;
    store.migrate().await.map_err(|err| {
        eprintln!("idem: {}", idem_app::ssr::cause_chain(&err));
        ExitCode::FAILURE
    })?;
    Ok(store)
}

async fn serve(config: Config) -> ExitCode {
    telemetry::init(config.log_json);
    let app = match Application::build(config).await {
        Ok(app) => app,
        Err(err) => {
            tracing::error!(error = %idem_app::ssr::cause_chain(&err), "Idem cannot start");
            return ExitCode::FAILURE;
        }
    };
    let url = format!("http://{}", app.local_addr());
    tracing::info!(%url, "Idem is serving");
    println!("\n  Idem is running at {url}\n");

    match app.run_until_stopped(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "server stopped with an error");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
