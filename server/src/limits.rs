//! Admission: how many requests Idem serves at once, how many for one
//! address, and how long a body may take to arrive and a request to run.
//! What a refused person sees is `crate::refusal`.
//!
//! Refusing at once is the point: when the database is slow, requests that
//! would wait for a connection pile up, and a person at 3 a.m. is better
//! served by "busy, try again in a second" than by a spinner that ends in a
//! timeout. Health probes are routed outside admission (see
//! `startup::router`), so an overloaded replica is not restarted for being
//! busy.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    body::Body,
    extract::{ConnectInfo, Request, State},
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::Response,
};
use tokio::sync::Semaphore;

use crate::{
    auth::TrustedProxies,
    per_address::PerAddress,
    refusal::{RETRY_AFTER, back_link, is_read, refusal_to},
};

/// What admission needs: the permits, the per-address counts and the time
/// limit.
#[derive(Clone, Debug)]
pub struct Admission {
    permits: Arc<Semaphore>,
    per_client: Arc<PerAddress>,
    /// Who the client is behind a trusted proxy.
    trusted: TrustedProxies,
    /// Clients not counted per address (the proxies every client comes
    /// through when nothing names the client behind them).
    exempt: Vec<TrustedProxies>,
    timeout: Duration,
}

impl Admission {
    pub fn new(
        limits: &crate::config::Limits,
        trusted: TrustedProxies,
        exempt: Vec<TrustedProxies>,
    ) -> Self {
        Admission {
            permits: Arc::new(Semaphore::new(limits.max_in_flight)),
            per_client: PerAddress::new(limits.max_in_flight_per_client),
            trusted,
            exempt,
            timeout: limits.request_timeout,
        }
    }

    /// The client's place among its address's requests in flight (`None`
    /// when exempt); `Err` when the address holds its limit.
    fn per_client(&self, req: &Request) -> Result<Option<crate::per_address::Slot>, ()> {
        let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() else {
            return Ok(None);
        };
        let client = self.trusted.client(*peer, req.headers());
        if self.exempt.iter().any(|p| p.trusts(client)) {
            return Ok(None);
        }
        PerAddress::take(&self.per_client, client)
            .map(Some)
            .ok_or(())
    }
}

/// Serves a request if fewer than `max_in_flight` are being served, and
/// fewer than `max_in_flight_per_client` for its address, within
/// `request_timeout`; otherwise answers at once: 429 for an address over
/// its share, 503 for a full server, each with `Retry-After`. A request cut
/// off by the timeout is dropped where it stands: its transaction, if it
/// had one, rolls back — unless its commit was already under way, so a
/// cut-off action may have happened, and its answer says so.
pub async fn admit(State(admission): State<Admission>, req: Request, next: Next) -> Response {
    let back = back_link(req.method(), req.headers());
    // The API's callers get its problems, as JSON; people get a page.
    let api = req.uri().path().starts_with("/api/v1/");
    let refuse = |status, title: &str, text: &str| {
        if api {
            let slug = if status == StatusCode::TOO_MANY_REQUESTS {
                "too-many"
            } else {
                "busy"
            };
            crate::api::Problem::new(status, slug, title, text).answer()
        } else {
            refusal_to(status, title, text, &back)
        }
    };
    let Ok(_client_slot) = admission.per_client(&req) else {
        let mut refused = refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests at once",
            "Your address already has many requests being served. Wait for them, then try \
             again in a moment.",
        );
        refused
            .headers_mut()
            .insert(header::RETRY_AFTER, RETRY_AFTER);
        return refused;
    };
    let Ok(_permit) = admission.permits.clone().try_acquire_owned() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Idem is busy",
            "Too many requests are being served right now. Try again in a moment.",
        );
    };
    let changes_state = !is_read(req.method());
    match tokio::time::timeout(admission.timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(
                timeout_seconds = admission.timeout.as_secs(),
                "request cut off by the request timeout"
            );
            let text = if changes_state {
                "The answer took too long, probably because the database is slow. Your \
                 action may have happened: it is either done completely or not at all, and \
                 the page you acted from shows which. Look there before sending it again \
                 (a form sent again carries the same action id, so it cannot happen twice)."
            } else {
                "The answer took too long, probably because the database is slow. Reading \
                 a page changes nothing; try again in a moment."
            };
            refuse(StatusCode::SERVICE_UNAVAILABLE, "This took too long", text)
        }
    }
}

/// How long a request's body may take to arrive, and how large it may be.
#[derive(Clone, Copy, Debug)]
pub struct BodyDeadline {
    pub timeout: Duration,
    pub limit: usize,
}

/// Reads a request's whole body before the request goes on to admission,
/// within `timeout` of its head: a client sending its body a byte at a time
/// holds its connection (at most `IDEM_MAX_CONNECTIONS_PER_CLIENT` of them),
/// never one of the in-flight slots everyone shares. Too slow: 408 and the
/// connection closed. Too large: 413.
pub async fn read_body(State(deadline): State<BodyDeadline>, req: Request, next: Next) -> Response {
    if is_read(req.method()) && !req.headers().contains_key(header::CONTENT_LENGTH) {
        return next.run(req).await;
    }
    // A provider's export is streamed into its reconciliation, which
    // bounds it (`crate::reconcile`); it still takes an in-flight slot and
    // the request timeout.
    if req.method() == axum::http::Method::POST && crate::reconcile::is_upload(req.uri().path()) {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let back = back_link(&parts.method, &parts.headers);
    let read = axum::body::to_bytes(body, deadline.limit);
    match tokio::time::timeout(deadline.timeout, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        // The API answers in its own media type, as its document says.
        Ok(Err(_)) if parts.uri.path().starts_with("/api/v1/") => crate::api::Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            "Too large",
            "The request was larger than Idem accepts. Nothing was done.",
        )
        .answer(),
        Ok(Err(_)) => refusal_to(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Too large",
            "The request was larger than Idem accepts. Nothing was done.",
            &back,
        ),
        Err(_) => {
            tracing::info!(
                timeout_seconds = deadline.timeout.as_secs(),
                "a request body did not arrive in time"
            );
            let mut late = refusal_to(
                StatusCode::REQUEST_TIMEOUT,
                "The request arrived too slowly",
                "Its body did not arrive in time. Nothing was done; send it again.",
                &back,
            );
            late.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            late
        }
    }
}
