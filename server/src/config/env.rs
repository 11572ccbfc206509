//! [`Config::from_env`]: every setting read, parsed and checked, one
//! concern at a time (in the order their errors are reported).

use std::{net::SocketAddr, time::Duration};

use idem_store::{DEFAULT_DATABASE_URL, StoreConfig};
use leptos::prelude::LeptosOptions;

use super::{Config, ConfigError, DemoSetting, Limits, number, or_default, parse, switch, var};
use crate::auth::{AuthSettings, TrustedProxies};

impl Config {
    pub fn from_env() -> Result<Config, ConfigError> {
        let (database, embedded_default) = database()?;
        let limits = limits()?;
        let addr = addr()?;
        let demo = demo()?;
        let demo_seed = var("IDEM_DEMO_SEED")
            .map(|v| parse("IDEM_DEMO_SEED", &v))
            .transpose()?;
        let backfill_hours: u64 = or_default("IDEM_DEMO_BACKFILL_HOURS", 48)?;
        let read_cache_ttl = Duration::from_millis(or_default("IDEM_READ_CACHE_MS", 2000)?);
        let claim_retention = claim_retention()?;
        let auth = auth(addr)?;
        let log_json = var("IDEM_LOG_FORMAT").is_some_and(|v| v.eq_ignore_ascii_case("json"));
        let log_keys_full = log_keys_full()?;
        let leptos = leptos(addr)?;
        Ok(Config {
            read_database: replica(&database),
            database,
            embedded_default,
            addr,
            demo,
            demo_seed,
            demo_backfill: Duration::from_secs(backfill_hours * 3600),
            log_json,
            log_keys_full,
            log_key_secret: var("IDEM_LOG_KEY_SECRET").map(super::LogKeySecret),
            read_cache_ttl,
            claim_retention,
            redrive_per_second: redrive_per_second()?,
            read_only: read_only()?,
            slo_file: var("IDEM_SLO_FILE").map(Into::into),
            consumers_file: var("IDEM_CONSUMERS_FILE").map(Into::into),
            brokers_file: var("IDEM_BROKERS_FILE").map(Into::into),
            metrics_token: var("IDEM_METRICS_TOKEN").map(crate::metrics::MetricsToken::new),
            auth,
            limits,
            background_lease: Duration::from_secs(
                number("IDEM_BACKGROUND_LEASE_SECONDS")?
                    .unwrap_or(30)
                    .max(3),
            ),
            leptos,
        })
    }
}

/// `IDEM_REDRIVE_PER_SECOND`: 1 to 100 dead letters a second.
fn redrive_per_second() -> Result<u32, ConfigError> {
    let per_second: u32 = or_default("IDEM_REDRIVE_PER_SECOND", 5)?;
    if !(1..=100).contains(&per_second) {
        return Err(ConfigError::Invalid {
            name: "IDEM_REDRIVE_PER_SECOND",
            value: per_second.to_string(),
            reason: "a redrive replays 1 to 100 dead letters a second".into(),
        });
    }
    Ok(per_second)
}

/// `IDEM_CLAIM_RETENTION_DAYS`: days for every consumer, then any
/// consumer's own (`30, payments=90`).
fn claim_retention() -> Result<idem_domain::ClaimRetention, ConfigError> {
    match var("IDEM_CLAIM_RETENTION_DAYS") {
        None => Ok(idem_domain::ClaimRetention::default()),
        Some(value) => {
            idem_domain::ClaimRetention::parse(&value).map_err(|reason| ConfigError::Invalid {
                name: "IDEM_CLAIM_RETENTION_DAYS",
                value,
                reason,
            })
        }
    }
}

/// `IDEM_LOG_KEYS`: `full` logs keys as they are; `fingerprint` (the
/// default) logs a keyed fingerprint instead.
fn log_keys_full() -> Result<bool, ConfigError> {
    match var("IDEM_LOG_KEYS").as_deref().map(str::trim) {
        None | Some("fingerprint") => Ok(false),
        Some("full") => Ok(true),
        Some(other) => Err(ConfigError::Invalid {
            name: "IDEM_LOG_KEYS",
            value: other.to_owned(),
            reason: "expected fingerprint or full".into(),
        }),
    }
}

/// `DATABASE_URL` and the pool's settings; whether the URL is the embedded default.
fn database() -> Result<(StoreConfig, bool), ConfigError> {
    let url = var("DATABASE_URL");
    let embedded_default = url.is_none();
    let mut database = StoreConfig::new(url.unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()));
    if let Some(size) = number("IDEM_DB_POOL_SIZE")? {
        database.max_connections = u32::try_from(size.max(1)).unwrap_or(u32::MAX);
    }
    if let Some(ms) = number("IDEM_DB_ACQUIRE_TIMEOUT_MS")? {
        database.acquire_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = number("IDEM_STATEMENT_TIMEOUT_MS")? {
        database.statement_timeout = (ms > 0).then(|| Duration::from_millis(ms));
    }
    Ok((database, embedded_default))
}

/// `IDEM_READ_DATABASE_URL`: a replica, with the primary's pool settings.
fn replica(database: &StoreConfig) -> Option<StoreConfig> {
    var("IDEM_READ_DATABASE_URL").map(|url| {
        let mut replica = StoreConfig::new(url);
        replica.max_connections = database.max_connections;
        replica.acquire_timeout = database.acquire_timeout;
        replica.statement_timeout = database.statement_timeout;
        replica
    })
}

fn limits() -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    Ok(Limits {
        max_in_flight: number("IDEM_MAX_IN_FLIGHT")?
            .map_or(defaults.max_in_flight, |n| n.max(1) as usize),
        request_timeout: number("IDEM_REQUEST_TIMEOUT_SECONDS")?
            .map_or(defaults.request_timeout, Duration::from_secs),
        body_limit: defaults.body_limit,
        shutdown_grace: number("IDEM_SHUTDOWN_GRACE_SECONDS")?
            .map_or(defaults.shutdown_grace, Duration::from_secs),
        max_connections: number("IDEM_MAX_CONNECTIONS")?
            .map_or(defaults.max_connections, |n| n.max(1) as usize),
        max_connections_per_client: number("IDEM_MAX_CONNECTIONS_PER_CLIENT")?
            .map_or(defaults.max_connections_per_client, |n| n.max(1) as usize),
        header_timeout: number("IDEM_HEADER_TIMEOUT_SECONDS")?
            .map_or(defaults.header_timeout, |n| Duration::from_secs(n.max(1))),
        max_in_flight_per_client: number("IDEM_MAX_IN_FLIGHT_PER_CLIENT")?
            .map_or(defaults.max_in_flight_per_client, |n| n.max(1) as usize),
        body_timeout: number("IDEM_BODY_TIMEOUT_SECONDS")?
            .map_or(defaults.body_timeout, |n| Duration::from_secs(n.max(1))),
    })
}

/// `IDEM_ADDR`, else `LEPTOS_SITE_ADDR`, else `127.0.0.1:3000`.
fn addr() -> Result<SocketAddr, ConfigError> {
    let addr_var = if var("IDEM_ADDR").is_some() {
        "IDEM_ADDR"
    } else {
        "LEPTOS_SITE_ADDR"
    };
    Ok(match var(addr_var) {
        Some(v) => parse(addr_var, &v)?,
        None => SocketAddr::from(([127, 0, 0, 1], 3000)),
    })
}

fn demo() -> Result<DemoSetting, ConfigError> {
    Ok(match var("IDEM_DEMO") {
        None => DemoSetting::Auto,
        Some(v) if switch("IDEM_DEMO", &v)? => DemoSetting::On,
        Some(_) => DemoSetting::Off,
    })
}

/// Sign-in and sessions; `addr` makes the default public address.
fn auth(addr: SocketAddr) -> Result<AuthSettings, ConfigError> {
    let public_url = var("IDEM_PUBLIC_URL").unwrap_or_else(|| format!("http://{addr}"));
    let public_url = url::Url::parse(&public_url).map_err(|e| ConfigError::Invalid {
        name: "IDEM_PUBLIC_URL",
        value: public_url.clone(),
        reason: e.to_string(),
    })?;
    let minutes = |name: &'static str, default: u64| -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs(60 * or_default(name, default)?))
    };
    let trusted = var("IDEM_TRUSTED_PROXIES").unwrap_or_default();
    Ok(AuthSettings {
        public_url,
        idle_timeout: minutes("IDEM_SESSION_IDLE_MINUTES", 30)?,
        absolute_timeout: minutes("IDEM_SESSION_ABSOLUTE_HOURS", 12)? * 60,
        trusted_proxies: TrustedProxies::parse(&trusted).map_err(|reason| {
            ConfigError::Invalid {
                name: "IDEM_TRUSTED_PROXIES",
                value: trusted.clone(),
                reason,
            }
        })?,
        hash_concurrency: or_default("IDEM_HASH_CONCURRENCY", 2)?,
        proxy: proxy_auth()?,
        oidc: super::oidc_env::oidc()?,
        password_login: match var("IDEM_PASSWORD_LOGIN") {
            None => true,
            Some(v) => switch("IDEM_PASSWORD_LOGIN", &v)?,
        },
        sign_in: idem_domain::sign_in::SignInLimits::default(),
        hash_wait: Duration::from_secs(5),
    })
}

/// Where the site is and what it is called, for the listen address `addr`:
/// cargo-leptos's variables, whose defaults are what `cargo xtask site` builds.
fn leptos(addr: SocketAddr) -> Result<LeptosOptions, ConfigError> {
    let reload_port = or_default("LEPTOS_RELOAD_PORT", 3001)?;
    Ok(LeptosOptions::builder()
        .output_name(var("LEPTOS_OUTPUT_NAME").unwrap_or_else(|| "idem".into()))
        .site_root(var("LEPTOS_SITE_ROOT").unwrap_or_else(|| "target/site".into()))
        .site_pkg_dir(var("LEPTOS_SITE_PKG_DIR").unwrap_or_else(|| "pkg".into()))
        .site_addr(addr)
        .reload_port(reload_port)
        .env(match var("LEPTOS_ENV").as_deref() {
            Some("PROD" | "prod" | "production") => leptos::config::Env::PROD,
            _ => leptos::config::Env::DEV,
        })
        .build())
}

/// `IDEM_READ_ONLY_CONSUMERS`.
fn read_only() -> Result<idem_domain::ReadOnlyConsumers, ConfigError> {
    let list = var("IDEM_READ_ONLY_CONSUMERS").unwrap_or_default();
    idem_domain::ReadOnlyConsumers::parse(&list).map_err(|err| ConfigError::Invalid {
        name: "IDEM_READ_ONLY_CONSUMERS",
        value: list.clone(),
        reason: err.to_string(),
    })
}

/// `IDEM_AUTH_PROXY_*`: sign-in through an identity-aware proxy, if configured.
fn proxy_auth() -> Result<Option<crate::auth::proxy::ProxyAuth>, ConfigError> {
    let Some(user_header) = var("IDEM_AUTH_PROXY_HEADER") else {
        return Ok(None);
    };
    let invalid = |name: &'static str, value: String, reason: String| ConfigError::Invalid {
        name,
        value,
        reason,
    };
    let roles_text = var("IDEM_AUTH_PROXY_ROLES").unwrap_or_default();
    let roles = crate::auth::proxy::ProxyAuth::parse_roles(&roles_text)
        .map_err(|reason| invalid("IDEM_AUTH_PROXY_ROLES", roles_text.clone(), reason))?;
    let default_role = match var("IDEM_AUTH_PROXY_DEFAULT_ROLE").as_deref() {
        None => Some(idem_domain::Role::Viewer),
        Some("none") => None,
        Some(text) => Some(text.parse().map_err(|e: idem_domain::UnknownValue| {
            invalid(
                "IDEM_AUTH_PROXY_DEFAULT_ROLE",
                text.to_owned(),
                e.to_string(),
            )
        })?),
    };
    let addresses_text = var("IDEM_AUTH_PROXY_ADDRESSES").unwrap_or_default();
    let addresses = TrustedProxies::parse(&addresses_text)
        .map_err(|reason| invalid("IDEM_AUTH_PROXY_ADDRESSES", addresses_text.clone(), reason))?;
    if addresses_text.trim().is_empty() {
        return Err(invalid(
            "IDEM_AUTH_PROXY_HEADER",
            user_header,
            "the header is believed only from the identity proxy's addresses: set \
             IDEM_AUTH_PROXY_ADDRESSES too"
                .into(),
        ));
    }
    Ok(Some(crate::auth::proxy::ProxyAuth {
        addresses,
        user_header: user_header.trim().to_ascii_lowercase(),
        groups_header: var("IDEM_AUTH_PROXY_GROUPS_HEADER").map(|h| h.trim().to_ascii_lowercase()),
        roles,
        default_role,
    }))
}
