//! Liveness and readiness probes.

use std::time::Duration;

use axum::{extract::State, http::StatusCode};
use idem_app::ssr::{AppState, DatabaseStatus};
use idem_store::Store;

/// How long readiness waits for the database.
pub const READINESS_TIMEOUT: Duration = Duration::from_millis(500);

/// The process is up. Never touches the database: a database outage must not
/// get Idem restarted.
pub async fn livez() -> &'static str {
    "ok\n"
}

/// The database answers within [`READINESS_TIMEOUT`].
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match state.store.ping(READINESS_TIMEOUT).await {
        Ok(()) => (StatusCode::OK, "ready\n"),
        Err(_) => {
            // The background check logs the outage once; a probe every few
            // seconds must not.
            state.database.mark_down();
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n")
        }
    }
}

/// How often the background check asks the database whether it answers.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Keeps `status` true to the database: asks it every [`CHECK_EVERY`] (within
/// [`READINESS_TIMEOUT`]), and logs each outage once when it starts and
/// once when it ends. Pages show the outage banner while it lasts.
pub async fn watch_database(
    store: Store,
    status: DatabaseStatus,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut logged_down = false;
    loop {
        match store.ping(READINESS_TIMEOUT).await {
            Ok(()) => {
                if let Some(since) = status.mark_up() {
                    let seconds = (chrono::Utc::now() - since).num_seconds();
                    tracing::info!(down_seconds = seconds, "database answers again");
                }
                logged_down = false;
            }
            Err(err) => {
                status.mark_down();
                if !logged_down {
                    tracing::warn!(error = %idem_app::ssr::cause_chain(&err), "database unavailable");
                    logged_down = true;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(CHECK_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}
