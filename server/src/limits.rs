//! Admission: how many requests Idem serves at once and for how long, and
//! the page a person sees when a request is refused before any page can be
//! rendered (overload, timeout, sign-in unavailable).
//!
//! Refusing at once is the point: when the database is slow, requests that
//! would wait for a connection pile up, and a person at 3 a.m. is better
//! served by "busy, try again in a second" than by a spinner that ends in a
//! timeout. Health probes are routed outside admission (see
//! `startup::router`), so an overloaded replica is not restarted for being
//! busy.

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{Html, IntoResponse, Response},
};
use tokio::sync::Semaphore;

/// What admission needs: the permits and the time limit.
#[derive(Clone, Debug)]
pub struct Admission {
    permits: Arc<Semaphore>,
    timeout: Duration,
}

impl Admission {
    pub fn new(limits: &crate::config::Limits) -> Self {
        Admission {
            permits: Arc::new(Semaphore::new(limits.max_in_flight)),
            timeout: limits.request_timeout,
        }
    }
}

/// Serves a request if fewer than `max_in_flight` are being served, within
/// `request_timeout`; otherwise answers 503 with `Retry-After` at once.
/// A request cut off by the timeout is dropped where it stands: its
/// transaction, if it had one, rolls back.
pub async fn admit(State(admission): State<Admission>, req: Request, next: Next) -> Response {
    let Ok(_permit) = admission.permits.clone().try_acquire_owned() else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "Idem is busy",
            "Too many requests are being served right now. Try again in a moment.",
        );
    };
    match tokio::time::timeout(admission.timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                timeout_seconds = admission.timeout.as_secs(),
                "request cut off by the request timeout"
            );
            refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "This took too long",
                "The answer took too long, probably because the database is slow. Nothing was \
                 changed by this request; try again in a moment.",
            )
        }
    }
}

/// How long a refused client is asked to wait.
pub const RETRY_AFTER: HeaderValue = HeaderValue::from_static("2");

/// A small self-contained page (no scripts, no styles from elsewhere) for an
/// answer given before Idem can render its own pages. 503s carry
/// `Retry-After`.
pub fn refusal(status: StatusCode, title: &str, message: &str) -> Response {
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Idem</title></head>\
         <body style=\"font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem\">\
         <h1>{title}</h1><p role=\"alert\">{message}</p><p><a href=\"\">Try again</a></p></body></html>"
    );
    let mut response = (status, Html(page)).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, RETRY_AFTER);
    }
    response
}
