//! Liveness and readiness probes.

use std::time::Duration;

use axum::{extract::State, http::StatusCode};
use idem_app::serving::{AppState, DatabaseStatus};
use idem_store::Store;

/// How long readiness waits for the database.
pub const READINESS_TIMEOUT: Duration = Duration::from_millis(500);

/// The process is up. Never touches the database: a database outage must not
/// get Idem restarted.
pub async fn livez() -> &'static str {
    "ok\n"
}

/// Ready unless the background check has declared the database down. It
/// answers from that check's state and takes no connection: a probe must
/// not queue behind the requests of a busy pool, and a busy pool is not an
/// outage (only the check, on its own connection, decides that).
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match state.database.down_since() {
        None => (StatusCode::OK, "ready\n"),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n"),
    }
}

/// How often the background check asks the database whether it answers.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Checks that fail in a row before the database counts as down (one slow
/// answer from a busy pool is not an outage).
pub const FAILURES_FOR_OUTAGE: u32 = 2;

/// Keeps `status` true to the database: asks it every [`CHECK_EVERY`]
/// (within [`READINESS_TIMEOUT`]) on a connection of its own, never one of
/// the pool's, so a pool saturated by slow statements is not an outage;
/// [`FAILURES_FOR_OUTAGE`] failures in a row mark it down, the first
/// success after start-up's preparation (`ready`) marks it up. Logs each
/// outage once when it starts and once when it ends. Pages show the outage
/// banner while it lasts.
pub async fn watch_database(
    store: Store,
    status: DatabaseStatus,
    ready: std::sync::Arc<std::sync::atomic::AtomicBool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let probe = store.health_probe();
    let mut failures = 0;
    loop {
        match probe.ping(READINESS_TIMEOUT).await {
            // Up only once migrated: before that its tables may not exist.
            Ok(()) if ready.load(std::sync::atomic::Ordering::Acquire) => {
                failures = 0;
                if let Some(since) = status.mark_up() {
                    let seconds = (chrono::Utc::now() - since).num_seconds();
                    tracing::info!(down_seconds = seconds, "database answers again");
                }
            }
            Ok(()) => {}
            Err(err) => {
                failures += 1;
                if failures == FAILURES_FOR_OUTAGE {
                    status.mark_down();
                    tracing::warn!(error = %idem_app::error::cause_chain(&err), "database unavailable");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(CHECK_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}
