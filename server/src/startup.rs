//! Building and running the server: connect and migrate, decide on the demo,
//! assemble the router, serve until told to stop.

use std::{
    net::SocketAddr,
    sync::{Arc, OnceLock},
    time::Duration,
};

use axum::{
    Router,
    routing::{get, post},
};
use idem_app::{App, api::ConsoleInfo, shell, ssr::AppState};
use idem_store::{BACKGROUND_LEASE, DEMO_DATA, Store, StoreError};
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use tokio::{net::TcpListener, sync::watch};

use crate::{
    auth::{self, AuthContext},
    config::{Config, DemoSetting},
    demo, health, preferences,
};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Slo(#[from] crate::slo_config::SloConfigError),
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
}

/// What start-up decides once the database answers.
struct Prepared {
    demo: Option<demo::Settings>,
}

/// How often start-up tries again while the database is unreachable.
const PREPARE_RETRY: Duration = Duration::from_secs(2);

impl Application {
    /// Loads the SLOs, builds the pool, and — if the database answers —
    /// migrates it and decides whether the demo runs; then binds. An
    /// unreachable database does not stop start-up (Idem serves the outage
    /// banner and connects when it appears); a migration that fails against
    /// a reachable one does.
    pub async fn build(config: Config) -> Result<Application, StartError> {
        let slos = crate::slo_config::load(config.slo_file.as_deref())?;
        let store = Store::connect(&config.database)?;
        let database = idem_app::ssr::DatabaseStatus::default();
        let auth = AuthContext::new(config.auth.clone(), store.clone(), database.clone());
        let prepared = match prepare(&config, &auth).await {
            Ok(prepared) => Some(prepared),
            Err(StartError::Store(err)) if err.is_unavailable() => {
                tracing::warn!(
                    database = %config.database.redacted_url(),
                    error = %idem_app::ssr::cause_chain(&err),
                    "database unavailable at start; serving, and connecting when it appears"
                );
                database.mark_down();
                None
            }
            Err(err) => return Err(err),
        };
        let demo_data = match &prepared {
            Some(prepared) => prepared.demo.is_some() || store.meta(DEMO_DATA).await?.is_some(),
            None => config.demo == DemoSetting::On,
        };
        let console = ConsoleInfo {
            demo: demo_data,
            backend: store.backend().to_owned(),
            zone: "UTC".to_owned(),
            user: None,
            database_down_since: None,
        };
        let mut leptos = config.leptos.clone();
        if let Some(pkg_dir) = crate::assets::pkg_dir() {
            leptos.site_pkg_dir = pkg_dir.into();
        }
        let mut state = AppState::new(leptos, store, console, config.read_cache_ttl);
        state.claim_retention = config.claim_retention;
        state.read_only = Arc::new(config.read_only.clone());
        state.slos = Arc::new(slos);
        state.database = database;
        state.password_login = config.auth.password_login;
        // Never migrated or written: a replica follows the primary.
        state.replica = config
            .read_database
            .as_ref()
            .map(Store::connect)
            .transpose()?;
        let background_running = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let metrics = crate::metrics::MetricsState {
            app: state.clone(),
            token: config.metrics_token.clone().map(Arc::new),
            background: background_running.clone(),
        };
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
        };
        Ok(Application {
            listener,
            router,
            state,
            auth,
            config,
            prepared,
            replica,
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
        let auth = &self.config.auth;
        let limits = crate::serve::ConnectionLimits {
            max_connections: self.config.limits.max_connections,
            per_client: self.config.limits.max_connections_per_client,
            header_timeout: self.config.limits.header_timeout,
            exempt: std::iter::once(auth.trusted_proxies.clone())
                .chain(auth.proxy.as_ref().map(|p| p.addresses.clone()))
                .collect(),
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
        self.state.store.close().await;
        if let Some(err) = fatal.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(std::io::Error::other(idem_app::ssr::cause_chain(&err)));
        }
        served
    }
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

/// Migrates, decides whether the demo runs and creates its accounts.
async fn prepare(config: &Config, auth: &AuthContext) -> Result<Prepared, StartError> {
    let store = &auth.store;
    store.migrate().await?;
    tracing::info!(database = %config.database.redacted_url(), backend = store.backend(), "database ready");
    let demo = decide_demo(config, store).await?;
    if demo.is_none() && store.meta(DEMO_DATA).await?.is_some() {
        retire_demo_accounts(auth).await?;
    }
    if demo.is_some() {
        demo_may_listen(config)?;
        store.set_meta(DEMO_DATA, "1").await?;
        ensure_demo_accounts(auth).await?;
    }
    Ok(Prepared { demo })
}

/// The work beside serving: once the database is prepared (at start-up, or
/// here when it was unreachable then), and while this replica holds the
/// background lease, the expired-session sweeper, the hourly rollups and
/// the demo — once across every replica on the database. Returns when told
/// to stop (releasing the lease); a preparation that fails for any reason
/// but an unreachable database is sent to `fatal`, which stops the server.
async fn background(
    config: Config,
    auth: Arc<AuthContext>,
    prepared: Option<Prepared>,
    ready: Arc<std::sync::atomic::AtomicBool>,
    replica: Replica,
    fatal: tokio::sync::mpsc::Sender<StartError>,
    mut stop: watch::Receiver<bool>,
) {
    let Replica {
        name: replica,
        running,
        caches,
    } = replica;
    let prepared = match prepared {
        Some(prepared) => prepared,
        None => loop {
            tokio::select! {
                () = tokio::time::sleep(PREPARE_RETRY) => {}
                _ = stop.changed() => return,
            }
            match prepare(&config, &auth).await {
                Ok(prepared) => {
                    ready.store(true, std::sync::atomic::Ordering::Release);
                    break prepared;
                }
                Err(StartError::Store(err)) if err.is_unavailable() => {}
                Err(err) => {
                    tracing::error!(error = %idem_app::ssr::cause_chain(&err), "the database appeared, but Idem cannot use it");
                    let _ = fatal.send(err).await;
                    return;
                }
            }
        },
    };
    let mut demo = prepared.demo;
    let store = auth.store.clone();
    let ttl = config.background_lease;
    // Renewed every quarter of its life; a renewal and a stop may take a
    // quarter each, so even a slow renewal followed by a failed one ends the
    // work before the lease can expire.
    let renew_every = ttl / 4;
    let hold = || {
        let now = idem_store::Ts::now();
        let until =
            idem_store::Ts::from(now.0 + chrono::TimeDelta::from_std(ttl).unwrap_or_default());
        store.hold_lease(BACKGROUND_LEASE, &replica, now, until)
    };
    // A renewal that takes longer than this counts as failed, and the work
    // then gets as long again to stop: both within the lease's life, so the
    // work has stopped before another replica can take the lease.
    let bounded = |future| tokio::time::timeout(renew_every, future);
    loop {
        // Wait until this replica holds the lease (another may be running the work).
        if !matches!(bounded(hold()).await, Ok(Ok(true))) {
            tokio::select! {
                () = tokio::time::sleep(renew_every) => continue,
                _ = stop.changed() => return,
            }
        }
        tracing::info!(%replica, "this replica runs the background work");
        let (work_stop_tx, work_stop_rx) = watch::channel(false);
        let mut work = tokio::spawn(background_work(
            auth.clone(),
            demo.clone(),
            caches.clone(),
            work_stop_rx,
        ));
        running.store(true, std::sync::atomic::Ordering::Release);
        // A later turn (the lease lost and taken back) continues the demo live.
        if let Some(settings) = &mut demo {
            settings.backfill = Duration::ZERO;
        }
        let stopping = loop {
            tokio::select! {
                () = tokio::time::sleep(renew_every) => {}
                _ = stop.changed() => break true,
            }
            match bounded(hold()).await.unwrap_or(Ok(false)) {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(%replica, "the background lease was lost or not renewed in time; stopping the background work here");
                    break false;
                }
                Err(err) => {
                    // Without a renewal another replica may take over after
                    // the lease expires; stop first, so it is never both.
                    tracing::warn!(%replica, error = %idem_app::ssr::cause_chain(&err), "cannot renew the background lease; stopping the background work here");
                    break false;
                }
            }
        };
        let _ = work_stop_tx.send(true);
        if tokio::time::timeout(renew_every, &mut work).await.is_err() {
            // Cut off mid-step: a step is one transaction, which rolls back.
            work.abort();
        }
        running.store(false, std::sync::atomic::Ordering::Release);
        if stopping {
            // Hand over at once instead of after the lease expires.
            let _ = store.release_lease(BACKGROUND_LEASE, &replica).await;
            return;
        }
    }
}

/// The work that runs once across replicas: the demo (if any), the session
/// sweeper and the hourly rollups, until `stop` turns true.
async fn background_work(
    auth: Arc<AuthContext>,
    demo: Option<demo::Settings>,
    caches: Vec<idem_app::cache::ReadCache>,
    stop: watch::Receiver<bool>,
) {
    // Without a demo the sender is dropped at once, which lets rollups start.
    let (history_tx, history_rx) = tokio::sync::oneshot::channel();
    let demo = {
        let (store, stop) = (auth.store.clone(), stop.clone());
        async move {
            match demo {
                Some(settings) => demo::run(store, settings, stop, history_tx).await,
                None => drop(history_tx),
            }
        }
    };
    tokio::join!(
        demo,
        sweep_expired_sessions(auth.clone(), stop.clone()),
        close_sign_in_windows(auth.clone(), stop.clone()),
        maintain_rollups(auth.store.clone(), history_rx, caches, stop),
    );
}

/// Closes ended sign-in windows every minute (one audit row for each pair
/// that saw failures) and forgets known-good clients not seen for months.
async fn close_sign_in_windows(auth: Arc<AuthContext>, mut stop: watch::Receiver<bool>) {
    loop {
        let limits = &auth.settings.sign_in;
        match auth
            .store
            .close_sign_in_windows(limits, idem_store::Ts::now())
            .await
        {
            Ok(0) => {}
            Ok(closed) => tracing::debug!(closed, "sign-in windows closed"),
            Err(err) => tracing::warn!(error = %err, "could not close sign-in windows"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// On every replica: deletes the rows of sessions that ended (signed out)
/// while the database could not be written, as soon as it answers again.
async fn delete_ended_sessions(auth: Arc<AuthContext>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(health::CHECK_EVERY) => {}
            _ = stop.changed() => return,
        }
        if auth.database.down_since().is_none() {
            auth.sessions().retry_deletes().await;
        }
    }
}

/// The demo's accounts have their names as passwords: the demo listens on
/// a loopback address only, unless `IDEM_DEMO=1` asks for it explicitly
/// (then with a warning).
fn demo_may_listen(config: &Config) -> Result<(), StartError> {
    if config.addr.ip().is_loopback() {
        return Ok(());
    }
    if config.demo != DemoSetting::On {
        return Err(StartError::DemoOffLoopback { addr: config.addr });
    }
    tracing::warn!(
        addr = %config.addr,
        "the demo runs on a non-loopback address: anyone who reaches it can sign in as admin \
         with the password \"admin\""
    );
    eprintln!(
        "\n  WARNING: the demo listens on {}; its accounts (viewer, operator, admin) have their \
         names as passwords.\n",
        config.addr
    );
    Ok(())
}

/// In demo mode (only then), `viewer`, `operator` and `admin` exist, each
/// with its own name as password.
async fn ensure_demo_accounts(auth: &AuthContext) -> Result<(), StartError> {
    for role in idem_domain::Role::ALL {
        let name = role.as_str();
        match auth.store.user_by_name(name).await? {
            None => {
                let hash = auth
                    .passwords
                    .hash(name.to_owned())
                    .await
                    .map_err(|e| StartError::DemoAccounts(e.to_string()))?;
                auth.store.create_user(name, *role, Some(&hash)).await?;
            }
            // Retired when Idem last ran without the demo: back again.
            Some(user) if user.disabled && has_demo_password(auth, &user).await => {
                auth.store.set_disabled(name, false).await?;
            }
            Some(_) => {}
        }
    }
    println!("\n  Demo accounts (password = name): viewer, operator, admin");
    Ok(())
}

/// Whether `user` is one of the demo's accounts, its password still its name.
async fn has_demo_password(auth: &AuthContext, user: &idem_store::UserRecord) -> bool {
    idem_domain::Role::ALL
        .iter()
        .any(|role| role.as_str() == user.username)
        && auth
            .passwords
            .verify(user.username.clone(), user.password_hash.clone())
            .await
            .is_ok_and(|(matches, _)| matches)
}

/// Outside demo mode, on a database that once held the demo, the demo's
/// accounts (each name its own password) are disabled: they would let
/// anyone in as admin.
async fn retire_demo_accounts(auth: &AuthContext) -> Result<(), StartError> {
    for role in idem_domain::Role::ALL {
        let name = role.as_str();
        if let Some(user) = auth.store.user_by_name(name).await?
            && !user.disabled
            && has_demo_password(auth, &user).await
        {
            auth.store.set_disabled(name, true).await?;
            tracing::warn!(
                account = name,
                "the demo is off: its account (password = name) is disabled"
            );
        }
    }
    Ok(())
}

/// Deletes expired sessions every ten minutes (they are refused anyway).
async fn sweep_expired_sessions(auth: Arc<AuthContext>, mut stop: watch::Receiver<bool>) {
    let sessions = auth.sessions().clone();
    loop {
        if let Err(err) = sessions.delete_expired().await {
            tracing::warn!(error = %err, "could not delete expired sessions");
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(600)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Rolls up settled hours of consumer metrics every minute, once the demo's
/// history (if any) is written (and then empties the read caches). The upsert is idempotent, so a second
/// replica doing the same work costs time, not correctness.
async fn maintain_rollups(
    store: Store,
    history_written: tokio::sync::oneshot::Receiver<()>,
    caches: Vec<idem_app::cache::ReadCache>,
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        _ = history_written => {}
        _ = stop.changed() => return,
    }
    // Whatever was read while the demo's history was being written showed
    // too little of it.
    for cache in &caches {
        cache.clear();
    }
    loop {
        match store.roll_up_hours(idem_store::Ts::now()).await {
            Ok(0) => {}
            Ok(hours) => tracing::debug!(hours, "consumer metrics rolled up"),
            Err(err) => tracing::warn!(error = %err, "could not roll up consumer metrics"),
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = stop.changed() => return,
        }
    }
}

async fn decide_demo(config: &Config, store: &Store) -> Result<Option<demo::Settings>, StoreError> {
    let run = match config.demo {
        DemoSetting::On => true,
        DemoSetting::Off => false,
        DemoSetting::Auto => {
            config.embedded_default
                && (!store.has_claims().await? || store.meta(DEMO_DATA).await?.is_some())
        }
    };
    if !run {
        return Ok(None);
    }
    let backfill = if store.has_claims().await? {
        Duration::ZERO
    } else {
        config.demo_backfill
    };
    Ok(Some(demo::Settings {
        seed: config.demo_seed.unwrap_or_else(rand::random),
        backfill,
    }))
}

/// The app's routes, generated once per process. Generating them sets a
/// process-wide flag that stops resources from loading (leptos-rs/leptos#4773),
/// so it must never overlap a render: several servers in one process (the
/// tests) share the first generation, which happens before any server exists.
fn route_list() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

/// The whole HTTP surface: health probes, the pages and their server
/// functions, and the static assets cargo-leptos built.
///
/// Layers, outermost first: the request span → the body limit → security
/// headers → the cross-site check → (the health probes) → admission
/// (in-flight limit and request timeout) → the session → the guard → the
/// routes.
pub fn router(
    state: AppState,
    auth: Arc<AuthContext>,
    metrics: crate::metrics::MetricsState,
    limits: &crate::config::Limits,
) -> Router {
    let routes = route_list();
    let context_state = state.clone();
    Router::new()
        .route("/metrics", get(crate::metrics::export).with_state(metrics))
        .route("/preferences/zone", post(preferences::set_zone))
        .route("/login", post(auth::login).with_state(auth.clone()))
        .route("/logout", post(auth::logout).with_state(auth.clone()))
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
        .layer(axum::middleware::from_fn_with_state(
            crate::limits::Admission::new(limits),
            crate::limits::admit,
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
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            limits.body_limit,
        ))
        .layer(crate::telemetry::request_layer())
        .with_state(state)
}
