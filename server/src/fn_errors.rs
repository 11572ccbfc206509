//! The status of a server function's error answer, and an action's answer
//! that could not wait in the session.
//!
//! Leptos answers every server-function error with 500 unless the function
//! body set a status (`idem_app::serving::serve` does). When the request fails
//! before the body runs — arguments that do not parse, a missing field —
//! the answer is Idem's `AppError::BadRequest`, but with a 500. This layer
//! reads such an answer back and gives it the status its error names, so a
//! malformed request is a 400, never a server error.
//!
//! A plain form's answer normally waits in the session for the form's page
//! (`idem_app::serving::answer_form`). When the session could not be written —
//! after the action itself committed — the function marks its answer
//! instead, and this layer turns it into a page of its own: what was done,
//! and that the page it came from will not say so.

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
    let back = crate::refusal::back_link(req.method(), req.headers());
    let response = next.run(req).await;
    if response
        .headers()
        .contains_key(idem_app::serving::ANSWER_IN_PLACE_HEADER)
    {
        return answer_page(response, &back).await;
    }
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
        if matches!(err, AppError::Unavailable | AppError::Busy) {
            parts.headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(idem_app::serving::RETRY_AFTER_SECONDS),
            );
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// An action's answer as a page: its outcome (or the error that stopped
/// it), carried by the marking header, with a warning that the page it
/// came from will not show it.
async fn answer_page(response: Response, back: &str) -> Response {
    use base64::Engine;
    use idem_domain::action::ActionOutcome;
    let answer: Option<Result<ActionOutcome, AppError>> = response
        .headers()
        .get(idem_app::serving::ANSWER_IN_PLACE_HEADER)
        .and_then(|v| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(v.as_bytes())
                .ok()
        })
        .and_then(|json| serde_json::from_slice(&json).ok());
    let (status, title, said) = match answer {
        Some(Ok(ActionOutcome::Done { summary, .. })) => (StatusCode::OK, "Done", summary),
        Some(Ok(ActionOutcome::Conflict { by, now, .. })) => (
            StatusCode::OK,
            "Not done",
            format!("Nothing was changed: {by} got there first. It is now {now}."),
        ),
        Some(Ok(ActionOutcome::Refused { reason })) => {
            (StatusCode::OK, "Not done", format!("Not done: {reason}"))
        }
        Some(Ok(ActionOutcome::FormReused { first })) => (
            StatusCode::CONFLICT,
            "Not done",
            AppError::FormReused(first).to_string(),
        ),
        Some(Err(err)) => (
            StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "Not done",
            err.to_string(),
        ),
        None => (
            StatusCode::OK,
            "Sent",
            "Your action was sent; its answer could not be read back.".to_owned(),
        ),
    };
    let text = format!(
        "{said} (Idem could not keep this answer for the page you came from: its database did \
         not take the write. That page shows the state as it is now.)"
    );
    crate::refusal::refusal_with_link(status, title, &text, back, "Back to the page you came from")
}
