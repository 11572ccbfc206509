//! How a server function's outcome becomes a status: a failure sets the
//! response's, and a database that is down or busy says when to retry.

use leptos::prelude::*;

use super::state::AppState;
use crate::error::AppError;

/// How long a client is asked to wait before retrying while the database is down.
pub const RETRY_AFTER_SECONDS: u32 = 5;

/// Runs a server function body; a failure also sets the response status (of
/// the page being rendered, or of the server function call).
///
/// While the database is known to be down the body is not run: the answer
/// is 503 at once rather than after a wait for a connection that will not
/// come. Only the background check decides that the database is down: a
/// database that did not answer in time otherwise (a busy pool, one slow
/// statement) is "busy", not "unavailable". Both say when to retry.
pub async fn serve<T>(body: impl Future<Output = Result<T, AppError>>) -> Result<T, AppError> {
    let known_down = use_context::<AppState>().is_some_and(|s| s.database.down_since().is_some());
    let result = if known_down {
        Err(AppError::Unavailable)
    } else {
        body.await.map_err(|err| match err {
            AppError::Unavailable => AppError::Busy,
            other => other,
        })
    };
    if let Err(err) = &result {
        set_status(err.status());
        if matches!(err, AppError::Unavailable | AppError::Busy)
            && let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        {
            response.insert_header(
                http::header::RETRY_AFTER,
                http::HeaderValue::from(RETRY_AFTER_SECONDS),
            );
        }
    }
    result
}

/// Sets the status of the current response, if there is one.
pub fn set_status(status: u16) {
    if let (Some(options), Ok(code)) = (
        use_context::<leptos_axum::ResponseOptions>(),
        http::StatusCode::from_u16(status),
    ) {
        options.set_status(code);
    }
}
