//! The `idem` command line: `serve` (the default), `rules`, `user …` and `token …`.
//! It reads the settings file and the environment and calls the library
//! (`Application`, `accounts`, `rules`), so tests run the same server on
//! port 0. The team's tooling (`seed`, `plans`, `bench`) is not here: it is
//! `idem-tools`, which the shipped binary does not depend on.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use idem::{
    Application, Config, StartError, accounts, accounts::AccountError, config::ConfigError,
    slo_config::SloConfigError, telemetry,
};
use idem_app::error::cause_chain;
use idem_domain::Role;
use idem_store::{Store, StoreConfig, StoreError};

/// mimalloc: a page is many small allocations freed at once, which glibc's
/// malloc spent a sixth of a key page's instructions on (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Manage tokens for the API (/api/v1); a new token's secret is shown once.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print its secret (shown this once).
    Create {
        name: String,
        /// The account answerable for it: the token never holds more than
        /// this account does, and stops when it is disabled.
        #[arg(long)]
        owner: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Limit the role to these teams' consumers (comma-separated).
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
        /// Expire after this long: 30d, 12h (default: never).
        #[arg(long)]
        expires: Option<String>,
    },
    /// Revoke a token: refused at once on every replica.
    Revoke { name: String },
    /// List tokens (never their secrets).
    List,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create an account.
    Add {
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Limit the role to these teams' consumers (comma-separated).
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
    },
    /// Change an account's role, on every team or only on `--teams` (ends
    /// its sessions).
    Role {
        name: String,
        #[arg(value_parser = parse_role)]
        role: Role,
        /// Limit the role to these teams' consumers (comma-separated).
        #[arg(long, value_delimiter = ',')]
        teams: Vec<String>,
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

/// Why a command failed: the one line `main` prints before it exits.
#[derive(Debug, thiserror::Error)]
enum CliError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{}", cause_chain(.0))]
    Database(#[from] StoreError),
    #[error("idem user: {0}")]
    Account(#[from] AccountError),
    #[error("idem rules: {0}")]
    Slos(#[from] SloConfigError),
    #[error("Idem cannot start: {}", cause_chain(.0))]
    Start(#[from] StartError),
    #[error("the server stopped with an error: {0}")]
    Serve(#[from] std::io::Error),
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err @ (CliError::Start(_) | CliError::Serve(_))) => {
            // Serving had set up logging: the failure goes where its logs go.
            tracing::error!(error = %err, "Idem stopped");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("idem: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let file = cli
        .config
        .or_else(|| std::env::var_os("IDEM_CONFIG").map(Into::into));
    if let Some(file) = file {
        idem::config::load_file(&file)?;
    }
    let config = Config::from_env()?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config).await,
        Command::User { command } => {
            let store = connect(&config.database).await?;
            let message = user(&store, command).await?;
            println!("{}", message.trim_end());
            Ok(())
        }
        Command::Token { command } => {
            let store = connect(&config.database).await?;
            let message = token(&store, command).await?;
            println!("{}", message.trim_end());
            Ok(())
        }
        Command::Rules { runbook_url } => {
            let slos = idem::slo_config::load(config.slo_file.as_deref())?;
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
            Ok(())
        }
    }
}

/// Runs one `idem user` command; `Ok` is what to tell the person.
async fn user(store: &Store, command: UserCommand) -> Result<String, AccountError> {
    Ok(match command {
        UserCommand::Add { name, role, teams } => {
            let rights = accounts::rights(role, &teams)?;
            let password = accounts::read_password()?;
            accounts::add(store, &name, &rights, password).await?;
            format!("created {name} ({rights})")
        }
        UserCommand::Role { name, role, teams } => {
            let rights = accounts::rights(role, &teams)?;
            accounts::set_rights(store, &name, &rights).await?;
            format!("{name} is now {rights}; their sessions ended")
        }
        UserCommand::ResetPassword { name } => {
            let password = accounts::read_password()?;
            accounts::reset_password(store, &name, password).await?;
            format!("new password set for {name}; their sessions ended")
        }
        UserCommand::Disable { name } => {
            accounts::set_disabled(store, &name, true).await?;
            format!("{name} is disabled; their sessions ended")
        }
        UserCommand::Enable { name } => {
            accounts::set_disabled(store, &name, false).await?;
            format!("{name} is enabled")
        }
        UserCommand::List => accounts::list(store).await?,
    })
}

/// Runs one `idem token` command; `Ok` is what to tell the person.
async fn token(store: &Store, command: TokenCommand) -> Result<String, AccountError> {
    Ok(match command {
        TokenCommand::Create {
            name,
            owner,
            role,
            teams,
            expires,
        } => {
            let rights = accounts::rights(role, &teams)?;
            let expires = expires.as_deref().map(idem::tokens::lifetime).transpose()?;
            let request = idem::tokens::Request {
                name: &name,
                owner: &owner,
                rights: &rights,
                expires,
            };
            let secret = idem::tokens::create(store, &request).await?;
            format!(
                "created token {name} ({rights}, owned by {owner})\n{secret}\n\
                 This secret is shown once; Idem keeps only its hash. Send it as \
                 `Authorization: Bearer {secret}`."
            )
        }
        TokenCommand::Revoke { name } => {
            idem::tokens::revoke(store, &name).await?;
            format!("token {name} is revoked")
        }
        TokenCommand::List => idem::tokens::list(store).await?,
    })
}

async fn connect(config: &StoreConfig) -> Result<Store, StoreError> {
    let store = Store::connect(config)?;
    store.migrate().await?;
    Ok(store)
}

async fn serve(config: Config) -> Result<(), CliError> {
    telemetry::init(config.log_json);
    let app = Application::build(config).await?;
    let url = format!("http://{}", app.local_addr());
    tracing::info!(%url, "Idem is serving");
    println!("\n  Idem is running at {url}\n");
    app.run_until_stopped(shutdown_signal()).await?;
    Ok(())
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
