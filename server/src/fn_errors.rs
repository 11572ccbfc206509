//! The status of a server function's error answer.
//!
//! Leptos answers every server-function error with 500 unless the function
//! body set a status (`idem_app::ssr::serve` does). When the request fails
//! before the body runs — arguments that do not parse, a missing field —
//! the answer is Idem's `AppError::BadRequest`, but with a 500. This layer
//! reads such an answer back and gives it the status its error names, so a
//! malformed request is a 400, never a server error.

use axum::{
    body::{Body, HttpBody as _},
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::Response,
};
use idem_app::error::AppError;

/// Error answers are a few hundred bytes of JSON; anything larger is left as is.
const MAX_ERROR_BODY: usize = 64 * 1024;

pub async fn error_status(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    if response.status() != StatusCode::INTERNAL_SERVER_ERROR
        || !response.headers().contains_key("serverfnerror")
    {
        return response;
    }
    // Only an answer whose whole length is known and small is read back.
    let small = response
        .body()
        .size_hint()
        .upper()
        .is_some_and(|length| length <= MAX_ERROR_BODY as u64);
    if !small {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        // Shorter than it said: nothing sensible is left to send.
        return Response::from_parts(parts, Body::empty());
    };
    if let Ok(err) = serde_json::from_slice::<AppError>(&bytes)
        && let Ok(status) = StatusCode::from_u16(err.status())
    {
        parts.status = status;
        if err == AppError::Unavailable {
            parts.headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(idem_app::ssr::RETRY_AFTER_SECONDS),
            );
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}
