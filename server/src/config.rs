//! Configuration, from the environment and, for what the environment does
//! not set, a settings file (`--config FILE` or `IDEM_CONFIG`; `NAME=value`
//! lines, the format of systemd's `EnvironmentFile`). The environment wins.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `DATABASE_URL` | `postgres://…` (production) or `sqlite:…` | `sqlite://idem.db` in the working directory |
//! | `IDEM_READ_DATABASE_URL` | a read replica (Postgres) for read-only pages and charts; actions, audit and sessions use `DATABASE_URL` | none |
//! | `IDEM_ADDR` (or `LEPTOS_SITE_ADDR`) | address to listen on | `127.0.0.1:3000` |
//! | `IDEM_DEMO` | `1` runs the demo simulator, `0` never does | on for the embedded default when its database is empty or already holds demo data |
//! | `IDEM_DEMO_SEED` | seed for the simulator's randomness | random |
//! | `IDEM_DEMO_BACKFILL_HOURS` | history the demo writes on first start | `48` |
//! | `IDEM_PUBLIC_URL` | where people reach Idem; `https://…` makes cookies Secure | `http://` + the listen address |
//! | `IDEM_SESSION_IDLE_MINUTES` | a session unused this long ends | `30` |
//! | `IDEM_SESSION_ABSOLUTE_HOURS` | a session ends this long after sign-in | `12` |
//! | `IDEM_TRUSTED_PROXIES` | proxies whose `X-Forwarded-For` is believed (addresses or networks, comma-separated) | none |
//! | `IDEM_AUTH_PROXY_HEADER` | the header an identity-aware proxy names the user in (e.g. `X-Forwarded-User`); believed only from `IDEM_AUTH_PROXY_ADDRESSES` | off |
//! | `IDEM_AUTH_PROXY_ADDRESSES` | the identity proxy's own addresses (required with the header) | none |
//! | `IDEM_AUTH_PROXY_GROUPS_HEADER` | the header carrying the user's groups, comma-separated | none |
//! | `IDEM_AUTH_PROXY_ROLES` | `group=role, …`: the highest role of the user's groups applies | none |
//! | `IDEM_AUTH_PROXY_DEFAULT_ROLE` | the role of a user in no mapped group, or `none` to refuse them | `viewer` |
//! | `IDEM_OIDC_ISSUER` | sign-in with this OpenID provider (discovery from `{issuer}/.well-known/openid-configuration`) | off |
//! | `IDEM_OIDC_CLIENT_ID`, `IDEM_OIDC_CLIENT_SECRET` | Idem's client at the provider (the secret may come from `IDEM_OIDC_CLIENT_SECRET_FILE`; none for a public client) | none |
//! | `IDEM_OIDC_NAME` | the provider's name on the button ("Sign in with Okta") | `your identity provider` |
//! | `IDEM_OIDC_SCOPES` | scopes asked for (`openid` always) | `openid email profile` |
//! | `IDEM_OIDC_USERNAME_CLAIM` | the claim accounts are named by | `email` |
//! | `IDEM_OIDC_ROLES_CLAIM`, `IDEM_OIDC_ROLES` | the claim with groups or roles, and `group=role, …` | `groups`, none |
//! | `IDEM_OIDC_DEFAULT_ROLE` | the role of a person in no mapped group, or `none` to refuse them | `viewer` |
//! | `IDEM_OIDC_RECHECK_MINUTES` | how often a session asks the provider again without a prompt (the role follows the claims, a session the provider ended ends); a due recheck refuses actions until a page went through it; `0`: only at sign-in | `60` |
//! | `IDEM_OIDC_RECHECK_GRACE_MINUTES` | while the provider cannot be reached, how long after a recheck fell due pages and actions go on with the claims last confirmed | `60` |
//! | `IDEM_OIDC_CLOCK_SKEW_SECONDS` | how far the provider's clock may be off (at most 300) | `60` |
//! | `IDEM_PASSWORD_LOGIN` | `0` turns password sign-in off (the proxy or the OpenID provider signs people in) | `1` |
//! | `IDEM_HASH_CONCURRENCY` | password hashes computed at once | `2` |
//! | `IDEM_READ_ONLY_CONSUMERS` | consumers read through an adapter over their own tables (comma-separated): their pages work, actions on them are refused with the reason (but a resolution the adapter writes back) | none |
//! | `IDEM_CLAIM_RETENTION_DAYS` | how long consumers keep claims, in days, then any consumer's own (`30, payments=90`); replaying an older key is flagged, `/checks` lists such dead letters | `30` |
//! | `IDEM_REDRIVE_PER_SECOND` | how many dead letters a redrive replays per second at most (1–100), so a fixed provider is not flooded again | `5` |
//! | `IDEM_READ_CACHE_MS` | how long one dashboard read serves every viewer (0 turns the cache off) | `2000` |
//! | `IDEM_SLO_FILE` | a TOML file of SLOs (see `slo_config`) | the built-in defaults |
//! | `IDEM_CONSUMERS_FILE` | a TOML file of the consumer catalogue: each consumer's team, description, runbook, provider contract, claim retention, queue and dead-letter source (see `consumers_config`); a consumer's retention here replaces `IDEM_CLAIM_RETENTION_DAYS`'s per-consumer part | none (the demo brings its own) |
//! | `IDEM_BROKERS_FILE` | a TOML file naming the RabbitMQ dead-letter queues Idem moves into its dead letters and publishes replays back to (see `brokers`) | none |
//! | `IDEM_METRICS_TOKEN` | bearer token a Prometheus scrape of `/metrics` must send; unset turns the export off | unset |
//! | `IDEM_DB_POOL_SIZE` | database connections Idem holds at most | `10` |
//! | `IDEM_DB_ACQUIRE_TIMEOUT_MS` | how long a request waits for a connection before it is told the database is unavailable | `3000` |
//! | `IDEM_STATEMENT_TIMEOUT_MS` | Postgres: the longest one statement of Idem's may run (migrations excepted) | `10000` |
//! | `IDEM_MAX_IN_FLIGHT` | requests served at once; more are refused at once with 503 (health probes excepted) | `64` |
//! | `IDEM_MAX_IN_FLIGHT_PER_CLIENT` | requests served at once for one address (an IPv6 client by its /64; trusted proxies exempt); more are refused at once with 429 | `16` |
//! | `IDEM_BODY_TIMEOUT_SECONDS` | a request's body must arrive whole this long after its head, or it is answered 408 and the connection closed; it is read before the request takes an in-flight slot | `10` |
//! | `IDEM_REQUEST_TIMEOUT_SECONDS` | a request still running this long is answered 503 | `20` |
//! | `IDEM_MAX_CONNECTIONS` | open client connections at most; more wait to be accepted | `1024` |
//! | `IDEM_MAX_CONNECTIONS_PER_CLIENT` | open connections from one address at most (trusted proxies exempt); more are answered 503 and closed | `64` |
//! | `IDEM_HEADER_TIMEOUT_SECONDS` | a connection that has not sent a whole request head this long is closed | `10` |
//! | `IDEM_SHUTDOWN_GRACE_SECONDS` | on SIGTERM, how long in-flight requests and the demo may take to finish | `15` |
//! | `IDEM_BACKGROUND_LEASE_SECONDS` | rollups, the demo and the session sweeper run on one replica at a time; when it dies, its lease expires after this and another takes over | `30` |
//! | `IDEM_LOG_FORMAT` | `json` for JSON lines, else human-readable | text |
//! | `IDEM_LOG_KEYS` | `fingerprint`: a request about a key logs a keyed fingerprint of it (`key_fp`), never the key; `full`: the key itself | `fingerprint` |
//! | `IDEM_LOG_KEY_SECRET` | the secret fingerprints are keyed with | one generated per install, kept in the database |
//! | `RUST_LOG` | log filter | `info` |
//! | `LEPTOS_SITE_ROOT`, `LEPTOS_SITE_PKG_DIR`, `LEPTOS_OUTPUT_NAME`, `LEPTOS_ENV`, `LEPTOS_RELOAD_PORT` | where the site is, and what it is called (`cargo leptos` sets them too) | `target/site`, `pkg`, `idem`, `DEV`, `3001` |

use std::{net::SocketAddr, time::Duration};

use idem_store::StoreConfig;
use leptos::prelude::LeptosOptions;

use crate::auth::{AuthSettings, TrustedProxies};

mod env;
mod oidc_env;
#[cfg(test)]
mod tests;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("settings file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("{name}={value:?} is not valid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
}

/// Whether the demo simulator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoSetting {
    /// `IDEM_DEMO=1`
    On,
    /// `IDEM_DEMO=0`
    Off,
    /// Unset: on for the embedded default with an empty (or demo) database.
    Auto,
}

/// How much Idem takes on at once, and how long anything may take.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests served at once (health probes and static files excepted);
    /// one more is refused at once with 503 and `Retry-After`.
    pub max_in_flight: usize,
    /// A request still running this long is answered 503 (its transaction,
    /// if any, rolls back).
    pub request_timeout: Duration,
    /// The largest request body accepted (forms and server-function
    /// arguments are small; anything larger is refused with 413).
    pub body_limit: usize,
    /// On shutdown, how long in-flight requests, the demo and the
    /// background tasks may take before they are cut off.
    pub shutdown_grace: Duration,
    /// Client connections open at once; the next waits to be accepted
    /// until one closes.
    pub max_connections: usize,
    /// Connections one address may hold (trusted proxies exempt); one more
    /// is answered 503 and closed.
    pub max_connections_per_client: usize,
    /// A connection that has not sent a whole request head (request line
    /// and headers) this long after it was opened, or after its previous
    /// answer, is closed: slow senders cannot hold connections for free.
    pub header_timeout: Duration,
    /// Requests served at once for one address (an IPv6 client by its /64;
    /// trusted proxies exempt): well below `max_in_flight`, so one address
    /// cannot take every slot.
    pub max_in_flight_per_client: usize,
    /// A request's body must arrive whole this long after its head; it is
    /// read before the request is admitted, so a slow body holds a
    /// connection, never an in-flight slot — but for a provider's export,
    /// which is streamed within the request timeout (`crate::reconcile`).
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_in_flight: 64,
            request_timeout: Duration::from_secs(20),
            body_limit: 64 * 1024,
            shutdown_grace: Duration::from_secs(15),
            max_connections: 1024,
            max_connections_per_client: 64,
            header_timeout: Duration::from_secs(10),
            max_in_flight_per_client: 16,
            body_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub database: StoreConfig,
    /// `IDEM_READ_DATABASE_URL`: a read replica for read-only pages and charts.
    pub read_database: Option<StoreConfig>,
    /// `DATABASE_URL` was not set: Idem runs on its embedded SQLite file.
    pub embedded_default: bool,
    pub addr: SocketAddr,
    pub demo: DemoSetting,
    pub demo_seed: Option<u64>,
    pub demo_backfill: Duration,
    pub log_json: bool,
    /// `IDEM_LOG_KEYS=full`: keys in the logs as they are, not fingerprinted.
    pub log_keys_full: bool,
    /// `IDEM_LOG_KEY_SECRET`; without it, one is generated and kept in the database.
    pub log_key_secret: Option<LogKeySecret>,
    pub read_cache_ttl: Duration,
    pub claim_retention: idem_domain::ClaimRetention,
    /// `IDEM_REDRIVE_PER_SECOND`: a redrive's pace, dead letters per second.
    pub redrive_per_second: u32,
    /// `IDEM_READ_ONLY_CONSUMERS`: consumers read through an adapter.
    pub read_only: idem_domain::ReadOnlyConsumers,
    /// `IDEM_SLO_FILE`; `None` uses the built-in SLOs.
    pub slo_file: Option<std::path::PathBuf>,
    /// The consumer catalogue (`IDEM_CONSUMERS_FILE`).
    pub consumers_file: Option<std::path::PathBuf>,
    /// The brokers whose dead-letter queues Idem reads (`IDEM_BROKERS_FILE`).
    pub brokers_file: Option<std::path::PathBuf>,
    /// `IDEM_METRICS_TOKEN`: `/metrics` is off without it.
    pub metrics_token: Option<crate::metrics::MetricsToken>,
    pub auth: AuthSettings,
    pub limits: Limits,
    /// How long the background lease lasts unrenewed (renewed every quarter
    /// of it): after a replica dies, another takes over the background
    /// work within this.
    pub background_lease: Duration,
    pub leptos: LeptosOptions,
}

/// `IDEM_LOG_KEY_SECRET`. Never printed: `Debug` shows only that it is set.
#[derive(Clone)]
pub struct LogKeySecret(pub String);

impl std::fmt::Debug for LogKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogKeySecret(set)")
    }
}

/// Every setting's name (a settings file may hold only these).
pub const SETTINGS: &[&str] = &[
    "DATABASE_URL",
    "IDEM_ADDR",
    "IDEM_AUTH_PROXY_ADDRESSES",
    "IDEM_AUTH_PROXY_DEFAULT_ROLE",
    "IDEM_AUTH_PROXY_GROUPS_HEADER",
    "IDEM_AUTH_PROXY_HEADER",
    "IDEM_AUTH_PROXY_ROLES",
    "IDEM_BACKGROUND_LEASE_SECONDS",
    "IDEM_BODY_TIMEOUT_SECONDS",
    "IDEM_BROKERS_FILE",
    "IDEM_CLAIM_RETENTION_DAYS",
    "IDEM_CONSUMERS_FILE",
    "IDEM_DB_ACQUIRE_TIMEOUT_MS",
    "IDEM_DB_POOL_SIZE",
    "IDEM_DEMO",
    "IDEM_DEMO_BACKFILL_HOURS",
    "IDEM_DEMO_SEED",
    "IDEM_HASH_CONCURRENCY",
    "IDEM_HEADER_TIMEOUT_SECONDS",
    "IDEM_LOG_FORMAT",
    "IDEM_LOG_KEYS",
    "IDEM_LOG_KEY_SECRET",
    "IDEM_MAX_CONNECTIONS",
    "IDEM_MAX_CONNECTIONS_PER_CLIENT",
    "IDEM_MAX_IN_FLIGHT",
    "IDEM_MAX_IN_FLIGHT_PER_CLIENT",
    "IDEM_METRICS_TOKEN",
    "IDEM_OIDC_CLIENT_ID",
    "IDEM_OIDC_CLIENT_SECRET",
    "IDEM_OIDC_CLIENT_SECRET_FILE",
    "IDEM_OIDC_CLOCK_SKEW_SECONDS",
    "IDEM_OIDC_DEFAULT_ROLE",
    "IDEM_OIDC_ISSUER",
    "IDEM_OIDC_NAME",
    "IDEM_OIDC_RECHECK_GRACE_MINUTES",
    "IDEM_OIDC_RECHECK_MINUTES",
    "IDEM_OIDC_ROLES",
    "IDEM_OIDC_ROLES_CLAIM",
    "IDEM_OIDC_SCOPES",
    "IDEM_OIDC_USERNAME_CLAIM",
    "IDEM_PASSWORD_LOGIN",
    "IDEM_PUBLIC_URL",
    "IDEM_READ_CACHE_MS",
    "IDEM_READ_DATABASE_URL",
    "IDEM_READ_ONLY_CONSUMERS",
    "IDEM_REDRIVE_PER_SECOND",
    "IDEM_REQUEST_TIMEOUT_SECONDS",
    "IDEM_SESSION_ABSOLUTE_HOURS",
    "IDEM_SESSION_IDLE_MINUTES",
    "IDEM_SHUTDOWN_GRACE_SECONDS",
    "IDEM_SLO_FILE",
    "IDEM_STATEMENT_TIMEOUT_MS",
    "IDEM_TRUSTED_PROXIES",
    "LEPTOS_ENV",
    "LEPTOS_OUTPUT_NAME",
    "LEPTOS_RELOAD_PORT",
    "LEPTOS_SITE_ADDR",
    "LEPTOS_SITE_PKG_DIR",
    "LEPTOS_SITE_ROOT",
    "RUST_LOG",
];

/// Settings read from the file named by `--config` or `IDEM_CONFIG`.
static FILE: std::sync::OnceLock<std::collections::HashMap<String, String>> =
    std::sync::OnceLock::new();

/// One setting: from the environment, else from the settings file.
pub fn setting(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .or_else(|| FILE.get()?.get(name).cloned())
        .filter(|v| !v.trim().is_empty())
}

fn var(name: &str) -> Option<String> {
    setting(name)
}

/// A whole number, if set.
pub(super) fn number(name: &'static str) -> Result<Option<u64>, ConfigError> {
    var(name).map(|v| parse(name, &v)).transpose()
}

/// A setting's value, or `default` when it is not set.
pub(super) fn or_default<T: std::str::FromStr>(
    name: &'static str,
    default: T,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    Ok(var(name)
        .map(|v| parse(name, &v))
        .transpose()?
        .unwrap_or(default))
}

/// An on/off setting's value.
pub(super) fn switch(name: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        other => Err(ConfigError::Invalid {
            name,
            value: other.to_owned(),
            reason: "expected 1 or 0".into(),
        }),
    }
}

/// Reads a settings file: `NAME=value` lines (a value may be quoted), `#`
/// comments and blank lines — the format of systemd's `EnvironmentFile`, so
/// one file serves both. Only Idem's own names are accepted, so a typo is
/// an error with its line, not a setting silently ignored. Call once,
/// before [`Config::from_env`]; the environment overrides the file.
pub fn load_file(path: &std::path::Path) -> Result<(), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let settings = parse_file(&text).map_err(|reason| ConfigError::File {
        path: path.display().to_string(),
        reason,
    })?;
    let _ = FILE.set(settings);
    Ok(())
}

fn parse_file(text: &str) -> Result<std::collections::HashMap<String, String>, String> {
    let mut settings = std::collections::HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected NAME=value", number + 1))?;
        let name = name.trim();
        if !SETTINGS.contains(&name) {
            return Err(format!(
                "line {}: {name} is not a setting of Idem's",
                number + 1
            ));
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        settings.insert(name.to_owned(), value.to_owned());
    }
    Ok(settings)
}

fn parse<T: std::str::FromStr>(name: &'static str, value: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    value
        .trim()
        .parse()
        .map_err(|e: T::Err| ConfigError::Invalid {
            name,
            value: value.to_owned(),
            reason: e.to_string(),
        })
}

impl Config {
    /// A configuration for tests: the given database, port 0, no demo.
    pub fn for_tests(database_url: &str) -> Config {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Config {
            database: StoreConfig::new(database_url),
            read_database: None,
            embedded_default: false,
            addr,
            demo: DemoSetting::Off,
            demo_seed: Some(1842),
            demo_backfill: Duration::from_secs(3600),
            log_json: false,
            log_keys_full: false,
            log_key_secret: None,
            read_cache_ttl: idem_app::serving::READ_CACHE_TTL,
            claim_retention: idem_domain::ClaimRetention::default(),
            // Tests follow a redrive to its end without waiting long.
            redrive_per_second: 100,
            read_only: idem_domain::ReadOnlyConsumers::default(),
            slo_file: None,
            consumers_file: None,
            brokers_file: None,
            metrics_token: None,
            auth: AuthSettings {
                public_url: url::Url::parse("http://127.0.0.1").expect("a valid URL"),
                idle_timeout: Duration::from_secs(30 * 60),
                absolute_timeout: Duration::from_secs(12 * 3600),
                trusted_proxies: TrustedProxies::default(),
                hash_concurrency: 2,
                proxy: None,
                oidc: None,
                password_login: true,
                sign_in: idem_domain::sign_in::SignInLimits::default(),
                hash_wait: Duration::from_secs(5),
            },
            limits: Limits::default(),
            background_lease: Duration::from_secs(3),
            leptos: LeptosOptions::builder()
                .output_name("idem")
                .site_root("target/site")
                .site_addr(addr)
                .build(),
        }
    }
}
