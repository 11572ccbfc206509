//! Building and running the server: connect and migrate, decide on the demo,
//! assemble the router, serve until told to stop.

use std::{net::SocketAddr, sync::OnceLock, time::Duration};

use axum::{
    Router,
    routing::{get, post},
};
use idem_app::{App, api::ConsoleInfo, shell, ssr::AppState};
use idem_store::{DEMO_DATA, Store, StoreError};
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use tokio::{net::TcpListener, sync::watch};
use tower_http::trace::TraceLayer;

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
    auth: std::sync::Arc<AuthContext>,
    demo: Option<demo::Settings>,
}

impl Application {
    /// Connects to the database and applies migrations (a failure stops
    /// start-up with the reason), decides whether the demo runs, and binds.
    pub async fn build(config: Config) -> Result<Application, StartError> {
        let slos = crate::slo_config::load(config.slo_file.as_deref())?;
        let store = Store::connect(&config.database)?;
        store.migrate().await?;
        tracing::info!(database = %config.database.redacted_url(), backend = store.backend(), "database ready");

        let demo = decide_demo(&config, &store).await?;
        if demo.is_some() {
            store.set_meta(DEMO_DATA, "1").await?;
        }
        let console = ConsoleInfo {
            demo: demo.is_some() || store.meta(DEMO_DATA).await?.is_some(),
            backend: store.backend().to_owned(),
            zone: "UTC".to_owned(),
            user: None,
        };
        let auth = AuthContext::new(config.auth.clone(), store.clone());
        if demo.is_some() {
            ensure_demo_accounts(&auth).await?;
        }
        let mut state = AppState::new(config.leptos.clone(), store, console, config.read_cache_ttl);
        state.claim_retention = config.claim_retention;
        state.slos = std::sync::Arc::new(slos);
        let metrics = crate::metrics::MetricsState {
            app: state.clone(),
            token: config.metrics_token.clone().map(std::sync::Arc::new),
        };
        let router = router(state.clone(), auth.clone(), metrics);
        let listener = TcpListener::bind(config.addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.addr,
                source,
            })?;
        Ok(Application {
            listener,
            router,
            state,
            auth,
            demo,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn store(&self) -> &Store {
        &self.state.store
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets in-flight
    /// requests finish, stops the demo and closes the pool.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        // Without a demo the sender is dropped at once, which lets rollups start.
        let (history_tx, history_rx) = tokio::sync::oneshot::channel();
        let demo_task = self.demo.map(|settings| {
            tokio::spawn(demo::run(
                self.state.store.clone(),
                settings,
                stop_rx.clone(),
                history_tx,
            ))
        });
        let sweeper = tokio::spawn(sweep_expired_sessions(self.auth.clone(), stop_rx.clone()));
        let rollups = tokio::spawn(maintain_rollups(
            self.state.store.clone(),
            history_rx,
            stop_rx.clone(),
        ));
        let service = self
            .router
            .into_make_service_with_connect_info::<SocketAddr>();
        let serve = axum::serve(self.listener, service).with_graceful_shutdown(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        });
        let served = serve.await;
        sweeper.abort();
        // A rollup step is one short transaction; stopping mid-way loses nothing.
        rollups.abort();
        if let Some(task) = demo_task {
            // The simulator stops at its next step; it never holds a transaction across one.
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        self.state.store.close().await;
        served
    }
}

/// In demo mode (only then), `viewer`, `operator` and `admin` exist, each
/// with its own name as password.
async fn ensure_demo_accounts(auth: &AuthContext) -> Result<(), StartError> {
    for role in idem_domain::Role::ALL {
        let name = role.as_str();
        if auth.store.user_by_name(name).await?.is_none() {
            let hash = auth
                .passwords
                .hash(name.to_owned())
                .await
                .map_err(|e| StartError::DemoAccounts(e.to_string()))?;
            auth.store.create_user(name, *role, Some(&hash)).await?;
        }
    }
    println!("\n  Demo accounts (password = name): viewer, operator, admin");
    Ok(())
}

/// Deletes expired sessions every ten minutes (they are refused anyway).
async fn sweep_expired_sessions(
    auth: std::sync::Arc<AuthContext>,
    mut stop: watch::Receiver<bool>,
) {
    let sessions = auth::DbSessionStore::new(&auth.store);
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
/// history (if any) is written. The upsert is idempotent, so a second
/// replica doing the same work costs time, not correctness.
async fn maintain_rollups(
    store: Store,
    history_written: tokio::sync::oneshot::Receiver<()>,
    mut stop: watch::Receiver<bool>,
) {
    tokio::select! {
        _ = history_written => {}
        _ = stop.changed() => return,
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
pub fn router(
    state: AppState,
    auth: std::sync::Arc<AuthContext>,
    metrics: crate::metrics::MetricsState,
) -> Router {
    let routes = route_list();
    let context_state = state.clone();
    Router::new()
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
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
        .layer(axum::middleware::from_fn_with_state(
            auth.clone(),
            auth::guard,
        ))
        .layer(auth.session_layer())
        .layer(axum::middleware::from_fn_with_state(
            auth.clone(),
            auth::csrf,
        ))
        .layer(axum::middleware::from_fn_with_state(
            auth.clone(),
            auth::security_headers,
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
