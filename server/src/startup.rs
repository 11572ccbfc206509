//! Building and running the server: connect and migrate, decide on the demo,
//! assemble the router, serve until told to stop.

use std::{
    net::SocketAddr,
    sync::{Arc, OnceLock},
};

use axum::{
    Router,
    routing::{get, post},
};
use idem_app::{App, api::ConsoleInfo, serving::AppState, shell};
use idem_store::{DEMO_DATA, Store, StoreError};
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use tokio::{net::TcpListener, sync::watch};

use crate::{
    auth::{self, AuthContext},
    config::{Config, DemoSetting},
    health, preferences,
};

mod background;
mod prepare;

use background::{background, delete_ended_sessions};
use prepare::{Prepared, prepare};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Slo(#[from] crate::slo_config::SloConfigError),
    #[error(transparent)]
    Consumers(#[from] crate::consumers_config::ConsumersConfigError),
    #[error("{0}")]
    Retention(String),
    #[error(transparent)]
    Brokers(#[from] crate::brokers::BrokersConfigError),
    #[error("cannot create the demo accounts: {0}")]
    DemoAccounts(String),
    #[error(
        "the demo's accounts (viewer, operator, admin; each name is its password) would be \
         reachable on {addr}: listen on a loopback address, or set IDEM_DEMO=1 to run the demo \
         there anyway"
    )]
    DemoOffLoopback { addr: SocketAddr },
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The catalogue and SLOs Idem uses: the files', or the demo's when the
/// demo runs without them (they describe the demo's consumers and teams,
/// and only them). The catalogue's retention replaces
/// `IDEM_CLAIM_RETENTION_DAYS`'s per-consumer part; every SLO's team must
/// own a consumer of the catalogue.
fn catalogue_in_force(
    config: &mut Config,
    loaded: (idem_domain::slo::SloSet, idem_domain::Catalogue),
    prepared: Option<&Prepared>,
) -> Result<(idem_domain::slo::SloSet, idem_domain::Catalogue), StartError> {
    let demo = prepared.is_some_and(|p| p.demo.is_some());
    let (mut slos, mut catalogue) = loaded;
    if demo && config.consumers_file.is_none() {
        catalogue = crate::consumers_config::demo();
    }
    if demo && config.slo_file.is_none() {
        slos = crate::slo_config::demo();
    }
    crate::slo_config::check_against(&slos, &catalogue)?;
    warn_of_unknown_teams(config, &catalogue);
    config.claim_retention =
        crate::consumers_config::retention(&catalogue, config.claim_retention.clone())
            .map_err(StartError::Retention)?;
    Ok((slos, catalogue))
}

/// Says, once at start-up, which team a proxy or OpenID group is mapped to
/// that the catalogue does not name: a role on it reaches no consumer. Not
/// refused, as the directory and the catalogue change on their own days.
fn warn_of_unknown_teams(config: &Config, catalogue: &idem_domain::Catalogue) {
    let known = catalogue.teams();
    let proxy = config
        .auth
        .proxy
        .iter()
        .map(|p| ("IDEM_AUTH_PROXY_ROLES", &p.roles));
    let oidc = config
        .auth
        .oidc
        .iter()
        .map(|o| ("IDEM_OIDC_ROLES", &o.roles));
    for (setting, roles) in proxy.chain(oidc) {
        for (group, rights) in roles {
            for (team, _) in rights.teams().filter(|(t, _)| !known.contains(t)) {
                tracing::warn!(
                    setting,
                    group = group.as_str(),
                    team,
                    "a group is mapped to a team the consumer catalogue does not name: its role reaches no consumer"
                );
            }
        }
    }
}

/// A built server, bound to its port, not yet serving.
pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
    auth: Arc<AuthContext>,
    config: Config,
    /// What start-up learned from the database; `None` when it was
    /// unreachable, in which case serving starts with the outage banner and
    /// the same preparation is retried until the database appears.
    prepared: Option<Prepared>,
    /// This process among the replicas on the database.
    replica: Replica,
    /// The brokers whose dead letters Idem moves in and replays to.
    brokers: Arc<crate::brokers::Brokers>,
}

/// This process as the background lease knows it.
#[derive(Clone)]
struct Replica {
    /// The lease holder's name: host, process id and a random tag.
    name: String,
    /// True while this replica runs the background work.
    running: Arc<std::sync::atomic::AtomicBool>,
    /// This replica's caches of reads, emptied once the demo's history is
    /// written: a chart read while it was being written showed too little,
    /// and would otherwise be served until its next interval completes.
    caches: Vec<idem_app::cache::ReadCache>,
    /// How requests log keys; its secret is set once the database is prepared.
    log_keys: idem_app::fingerprint::LogKeys,
}

impl Application {
    /// Loads the SLOs, builds the pool, and — if the database answers —
    /// migrates it and decides whether the demo runs; then binds. An
    /// unreachable database does not stop start-up (Idem serves the outage
    /// banner and connects when it appears); a migration that fails against
    /// a reachable one does.
    pub async fn build(mut config: Config) -> Result<Application, StartError> {
        let slos = crate::slo_config::load(config.slo_file.as_deref())?;
        let catalogue = crate::consumers_config::load(config.consumers_file.as_deref())?;
        let brokers = crate::brokers::BrokersConfig::load(config.brokers_file.as_deref())?;
        let store = Store::connect(&config.database)?;
        let database = idem_app::serving::DatabaseStatus::default();
        let auth = AuthContext::new(config.auth.clone(), store.clone(), database.clone());
        let prepared = match prepare(&config, &auth).await {
            Ok(prepared) => Some(prepared),
            Err(StartError::Store(err)) if err.is_unavailable() => {
                tracing::warn!(
                    database = %config.database.redacted_url(),
                    error = %idem_app::error::cause_chain(&err),
                    "database unavailable at start; serving, and connecting when it appears"
                );
                database.mark_down();
                None
            }
            Err(err) => return Err(err),
        };
        let (slos, catalogue) =
            catalogue_in_force(&mut config, (slos, catalogue), prepared.as_ref())?;
        let console = console_info(&store, prepared.as_ref(), &config).await?;
        let mut leptos = config.leptos.clone();
        if let Some(pkg_dir) = crate::assets::pkg_dir() {
            leptos.site_pkg_dir = pkg_dir.into();
        }
        let mut state = AppState::new(leptos, store, console, config.read_cache_ttl);
        state.claim_retention = config.claim_retention.clone();
        state.read_only = Arc::new(config.read_only.clone());
        state.slos = Arc::new(slos);
        state.catalogue = Arc::new(catalogue);
        state.database = database;
        state.password_login = config.auth.password_login;
        (state.oidc_name, state.oidc_origin) = oidc_for_pages(&config.auth);
        state.log_keys = idem_app::fingerprint::LogKeys::new(config.log_keys_full);
        let brokers = Arc::new(crate::brokers::Brokers::new(state.store.clone(), brokers));
        if !brokers.is_empty() {
            state.republisher = idem_app::republish::Republisher::new(brokers.clone());
        }
        if let Some(prepared) = &prepared {
            state
                .log_keys
                .set_secret(prepared.log_key_secret.as_bytes());
        }
        // Never migrated or written: a replica follows the primary.
        state.replica = config
            .read_database
            .as_ref()
            .map(Store::connect)
            .transpose()?;
        let background_running = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let token = config.metrics_token.clone();
        let metrics = crate::metrics::MetricsState::new(&state, token, &background_running);
        let router = router(state.clone(), auth.clone(), metrics, &config.limits);
        let listener = TcpListener::bind(config.addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.addr,
                source,
            })?;
        let replica = Replica {
            name: replica_name(),
            running: background_running,
            caches: vec![state.reads.clone(), state.per_interval.clone()],
            log_keys: state.log_keys.clone(),
        };
        Ok(Application {
            listener,
            router,
            state,
            auth,
            config,
            prepared,
            replica,
            brokers,
        })
    }

    /// This replica's name, as the background lease records it.
    pub fn replica(&self) -> &str {
        &self.replica.name
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn store(&self) -> &Store {
        &self.state.store
    }

    /// The password checker (its count of checks shows what sign-in costs).
    pub fn passwords(&self) -> &crate::auth::Passwords {
        &self.auth.passwords
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets in-flight
    /// requests finish (for at most the grace period), stops the demo and
    /// the background tasks, and closes the pool. Returns an error only when
    /// the database appeared after start-up and its migration failed.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (fatal_tx, mut fatal_rx) = tokio::sync::mpsc::channel::<StartError>(1);
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(self.prepared.is_some()));
        let watcher = tokio::spawn(health::watch_database(
            self.state.store.clone(),
            self.state.database.clone(),
            ready.clone(),
            stop_rx.clone(),
        ));
        let ended_sessions =
            tokio::spawn(delete_ended_sessions(self.auth.clone(), stop_rx.clone()));
        // Every replica drains the dead-letter queues and publishes replays:
        // the broker gives each message to one, the store keeps each once,
        // and a publication is leased to one attempt at a time.
        let brokers = tokio::spawn(self.brokers.clone().run(stop_rx.clone()));
        let background = tokio::spawn(background(
            self.config.clone(),
            self.auth.clone(),
            self.prepared,
            ready,
            self.replica.clone(),
            fatal_tx,
            stop_rx.clone(),
        ));

        let fatal = Arc::new(std::sync::Mutex::new(None));
        let stopped_at = Arc::new(std::sync::OnceLock::new());
        let limits = crate::serve::ConnectionLimits {
            max_connections: self.config.limits.max_connections,
            per_client: self.config.limits.max_connections_per_client,
            header_timeout: self.config.limits.header_timeout,
            exempt: exempt_addresses(&self.config.auth),
        };
        let serve = crate::serve::serve(self.listener, self.router, limits, {
            let (fatal, stopped_at) = (fatal.clone(), stopped_at.clone());
            async move {
                tokio::select! {
                    () = shutdown => {}
                    Some(err) = fatal_rx.recv() => {
                        *fatal.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                    }
                }
                let _ = stopped_at.set(tokio::time::Instant::now());
                let _ = stop_tx.send(true);
            }
        });
        let mut serving = tokio::spawn(serve);
        let grace = self.config.limits.shutdown_grace;
        let mut stopping = stop_rx.clone();
        // One deadline for everything, from the stop signal: requests, then
        // the background work, within the grace period together.
        let served = tokio::select! {
            served = &mut serving => served.unwrap_or_else(|e| Err(std::io::Error::other(e))),
            () = async {
                let _ = stopping.wait_for(|stop| *stop).await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!(grace_seconds = grace.as_secs(), "requests still running after the grace period were cut off");
                serving.abort();
                Ok(())
            }
        };
        let deadline = *stopped_at.get_or_init(tokio::time::Instant::now) + grace;
        // The simulator stops at its next step (it never holds a transaction
        // across one); a rollup step is one short transaction.
        if tokio::time::timeout_at(deadline, background).await.is_err() {
            tracing::warn!("background tasks did not stop within the grace period");
        }
        watcher.abort();
        ended_sessions.abort();
        if tokio::time::timeout_at(deadline, brokers).await.is_err() {
            tracing::warn!("the broker tasks did not stop within the grace period");
        }
        self.state.store.close().await;
        if let Some(err) = fatal.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(std::io::Error::other(idem_app::error::cause_chain(&err)));
        }
        served
    }
}

/// The addresses not limited per address: the proxies every client comes
/// through (trusted proxies and the identity proxy).
fn exempt_addresses(auth: &crate::auth::AuthSettings) -> Vec<crate::auth::TrustedProxies> {
    std::iter::once(auth.trusted_proxies.clone())
        .chain(auth.proxy.as_ref().map(|p| p.addresses.clone()))
        .collect()
}

/// `host-pid-tag`: unique among replicas, readable in the lease table.
fn replica_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "idem".to_owned());
    let tag: u32 = rand::random();
    format!("{host}-{}-{tag:08x}", std::process::id())
}

/// The app's routes, generated once per process. Generating them sets a
/// process-wide flag that stops resources from loading (leptos-rs/leptos#4773),
/// so it must never overlap a render: several servers in one process (the
/// tests) share the first generation, which happens before any server exists.
fn route_list() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// What pages need of the OpenID provider: its name for the sign-in
/// button, and its origin as a form target (sign-out there too).
fn oidc_for_pages(auth: &crate::auth::AuthSettings) -> (Option<String>, Option<String>) {
    let Some(oidc) = &auth.oidc else {
        return (None, None);
    };
    let origin = url::Url::parse(&oidc.issuer)
        .ok()
        .map(|url| url.origin())
        .filter(|origin| origin.is_tuple())
        .map(|origin| origin.ascii_serialization());
    (Some(oidc.name.clone()), origin)
}

/// The whole HTTP surface: health probes, the pages and their server
/// functions, and the static assets `cargo xtask site` built.
///
/// Layers, outermost first: the request span → compression (brotli or
/// gzip, `compression`) → the body limit → security headers → the
/// cross-site check → (the health probes) → the body read whole within its
/// deadline → admission (in-flight limits, overall and per address, and
/// the request timeout) → the session → the guard → the routes. The API
/// (`/api/v1`, `crate::api`) joins after admission, with its own token
/// check instead of the session and the guard.
pub fn router(
    state: AppState,
    auth: Arc<AuthContext>,
    metrics: crate::metrics::MetricsState,
    limits: &crate::config::Limits,
) -> Router {
    let routes = route_list();
    let context_state = state.clone();
    let router = Router::new()
        .route("/metrics", get(crate::metrics::export).with_state(metrics))
        .route("/preferences/zone", post(preferences::set_zone))
        // A list as CSV or JSON, for a signed-in person (the guard's session).
        .route("/exports/{file}", get(crate::api::export))
        // The /tokens page's form: answered with a page showing the secret once.
        .route(
            idem_app::CREATE_TOKEN_PATH,
            post(crate::tokens::create_from_page),
        )
        // A provider's export, streamed into a reconciliation.
        .merge(crate::reconcile::page_routes())
        .route("/login", post(auth::login).with_state(auth.clone()))
        .route("/logout", post(auth::logout).with_state(auth.clone()))
        .route(
            "/auth/oidc/start",
            get(auth::oidc::start).with_state(auth.clone()),
        )
        .route(
            "/auth/oidc/callback",
            get(auth::oidc::callback).with_state(auth.clone()),
        )
        .leptos_routes_with_context(
            &state,
            routes,
            move || leptos::prelude::provide_context(context_state.clone()),
            {
                let options = state.leptos_options.clone();
                move || shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn(crate::fn_errors::error_status))
        .layer(axum::middleware::from_fn_with_state(
            auth.clone(),
            auth::guard,
        ))
        .layer(auth.session_layer())
        // The API: outside the session and the guard (a token, never a
        // cookie), inside admission and the body's deadline.
        .merge(crate::api::router(&state, auth.clone()))
        .layer(axum::middleware::from_fn_with_state(
            crate::limits::Admission::new(
                limits,
                auth.settings.trusted_proxies.clone(),
                exempt_addresses(&auth.settings),
            ),
            crate::limits::admit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            crate::limits::BodyDeadline {
                timeout: limits.body_timeout,
                limit: limits.body_limit,
            },
            crate::limits::read_body,
        ))
        // Probes (and embedded assets) are added after the layers above, so
        // they never wait for a session, an admission permit or the database
        // (except readiness, which asks it, within its own timeout).
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/pkg/{hash}/{name}", get(crate::assets::serve))
        .layer(axum::middleware::from_fn_with_state(
            auth.clone(),
            auth::csrf,
        ))
        .layer(axum::middleware::from_fn_with_state(
            auth.clone(),
            auth::security_headers,
        ))
        // Every body but an export's is read whole (and bounded by
        // `body_limit`) in `limits::read_body`; an export is streamed.
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            limits.body_limit.max(crate::reconcile::UPLOAD_BODY_LIMIT),
        ));
    crate::compression::compress(router)
        .layer(crate::telemetry::request_layer(state.log_keys.clone()))
        .with_state(state)
}

/// What every page's header says about this console: whether it shows
/// demo data, and which backend.
async fn console_info(
    store: &Store,
    prepared: Option<&Prepared>,
    config: &Config,
) -> Result<ConsoleInfo, StartError> {
    let demo_data = match prepared {
        Some(prepared) => {
            prepared.demo.is_some() || store.system().meta(DEMO_DATA).await?.is_some()
        }
        None => config.demo == DemoSetting::On,
    };
    Ok(ConsoleInfo {
        demo: demo_data,
        backend: store.backend().to_owned(),
        zone: "UTC".to_owned(),
        user: None,
        database_down_since: None,
    })
}
