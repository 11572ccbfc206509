//! Admission: how many requests Idem serves at once, how many for one
//! address, how long a body may take to arrive and a request to run, and
//! the page a person sees when a request is refused before any page can be
//! rendered (overload, timeout, sign-in unavailable).
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
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{Html, IntoResponse, Response},
};
use tokio::sync::Semaphore;

use crate::{auth::TrustedProxies, per_address::PerAddress};

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
    let Ok(_client_slot) = admission.per_client(&req) else {
        let mut refused = refusal_to(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests at once",
            "Your address already has many requests being served. Wait for them, then try \
             again in a moment.",
            &back,
        );
        refused
            .headers_mut()
            .insert(header::RETRY_AFTER, RETRY_AFTER);
        return refused;
    };
    let Ok(_permit) = admission.permits.clone().try_acquire_owned() else {
        return refusal_to(
            StatusCode::SERVICE_UNAVAILABLE,
            "Idem is busy",
            "Too many requests are being served right now. Try again in a moment.",
            &back,
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
            if changes_state {
                refusal_to(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "This took too long",
                    "The answer took too long, probably because the database is slow. Your \
                     action may have happened: it is either done completely or not at all, and \
                     the page you acted from shows which. Look there before sending it again \
                     (a form sent again carries the same action id, so it cannot happen twice).",
                    &back,
                )
            } else {
                refusal_to(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "This took too long",
                    "The answer took too long, probably because the database is slow. Reading \
                     a page changes nothing; try again in a moment.",
                    &back,
                )
            }
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
    let (parts, body) = req.into_parts();
    let back = back_link(&parts.method, &parts.headers);
    let read = axum::body::to_bytes(body, deadline.limit);
    match tokio::time::timeout(deadline.timeout, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
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

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// Where a refusal's link leads: for a page read, the page itself (read it
/// again); for a form post, the page the form was on (a local path from
/// `Referer`), never the address it posted to, which only takes posts.
pub fn back_link(method: &Method, headers: &HeaderMap) -> String {
    if is_read(method) {
        return String::new();
    }
    headers
        .get(header::REFERER)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| url::Url::parse(r).ok())
        .map(|u| {
            let local = match u.query() {
                Some(query) => format!("{}?{query}", u.path()),
                None => u.path().to_owned(),
            };
            idem_app::links::safe_next(&local)
        })
        .unwrap_or_else(|| "/".to_owned())
}

/// How long a refused client is asked to wait.
pub const RETRY_AFTER: HeaderValue = HeaderValue::from_static("2");

/// The refusal page's only styling, allowed by its hash in the page's
/// Content-Security-Policy (no inline `style` attribute, which it forbids).
const REFUSAL_STYLE: &str =
    "body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}";

/// A small self-contained page (no scripts, no styles from elsewhere) for an
/// answer given before Idem can render its own pages. 503s carry
/// `Retry-After`. Its "Try again" reloads the address asked for; use
/// [`refusal_to`] for an answer to a form post.
pub fn refusal(status: StatusCode, title: &str, message: &str) -> Response {
    refusal_to(status, title, message, "")
}

/// [`refusal`], with its link leading to `back` (a local path; empty for
/// the address asked for).
pub fn refusal_to(status: StatusCode, title: &str, message: &str, back: &str) -> Response {
    if back.is_empty() {
        refusal_with_link(status, title, message, "", "Try again")
    } else {
        refusal_with_link(
            status,
            title,
            message,
            back,
            "Back to the page you came from",
        )
    }
}

/// [`refusal`], with a link to `href` (a local path; empty for the address
/// asked for) that says `link_text`.
pub fn refusal_with_link(
    status: StatusCode,
    title: &str,
    message: &str,
    href: &str,
    link_text: &str,
) -> Response {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    let link = format!("<a href=\"{}\">{}</a>", escape(href), escape(link_text));
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Idem</title><style>{REFUSAL_STYLE}</style></head>\
         <body><h1>{title}</h1><p role=\"alert\">{message}</p><p>{link}</p></body></html>",
        title = escape(title),
        message = escape(message),
    );
    let mut response = (status, Html(page)).into_response();
    let style_hash =
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(REFUSAL_STYLE.as_bytes()));
    if let Ok(policy) = HeaderValue::from_str(&format!(
        "default-src 'none'; style-src 'sha256-{style_hash}'; frame-ancestors 'none'; \
         base-uri 'none'; form-action 'none'"
    )) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, RETRY_AFTER);
    }
    response
}

/// Text for HTML: `&`, `<`, `>` and quotes escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_form_post_links_back_to_the_local_page_it_came_from() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::REFERER,
            HeaderValue::from_static("http://idem.example/keys/orders/a%2Fb?range=24h"),
        );
        assert_eq!(
            back_link(&Method::POST, &headers),
            "/keys/orders/a%2Fb?range=24h"
        );
        assert_eq!(
            back_link(&Method::GET, &headers),
            "",
            "a read reloads itself"
        );
        assert_eq!(back_link(&Method::POST, &HeaderMap::new()), "/");
        headers.insert(
            header::REFERER,
            HeaderValue::from_static("http://idem.example//evil.example/"),
        );
        assert_eq!(back_link(&Method::POST, &headers), "/");
    }

    #[tokio::test]
    async fn a_refusal_page_escapes_its_link_and_allows_only_its_own_style() {
        let response = refusal_to(
            StatusCode::SERVICE_UNAVAILABLE,
            "Busy",
            "Try <later>",
            "/keys/a?q=\"><script>",
        );
        let policy = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(policy.contains("style-src 'sha256-"), "{policy}");
        let body = axum::body::to_bytes(response.into_body(), 10_000)
            .await
            .unwrap();
        let page = String::from_utf8(body.to_vec()).unwrap();
        assert!(
            !page.contains("<script>") && !page.contains("<later>"),
            "{page}"
        );
        assert!(
            !page.contains("style=\""),
            "no inline style attribute: {page}"
        );
    }
}
