//! Liveness and readiness probes.

use std::time::Duration;

use axum::{extract::State, http::StatusCode};
use idem_app::ssr::AppState;

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
        Err(err) => {
            tracing::warn!(error = %err, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n")
        }
    }
}
