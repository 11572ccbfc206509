//! Logs and request spans.
//!
//! Every request runs in a `request` span carrying its method, route (the
//! pattern it matched, not the raw path), and — on a key's page or a list
//! narrowed to one consumer — the consumer and the key's fingerprint
//! (`key_fp`; the key itself, `key`, only with `IDEM_LOG_KEYS=full`; see
//! `idem_app::fingerprint`); when it is answered, one event adds the status
//! and latency. The span only computes what it logs: it runs before the
//! guard, so it writes nothing (which key a fingerprint stands for is kept
//! by the key page's server function, for a signed-in person; see
//! `idem_app::fingerprint`), and a segment that is not a valid consumer
//! name or key gets no fingerprint at all. Errors are logged once, where they are
//! turned into a status (`idem_app::error::internal`), with their cause
//! chain; tower-http's own failure log is off so nothing is logged twice.
//!
//! Never logged: passwords, session ids, cookies, the metrics token. Request
//! headers are not recorded at all, and a test signs in and out with
//! logging at its most verbose and searches the output for each of them.

use std::time::Duration;

use axum::{extract::MatchedPath, http};
use idem_app::fingerprint::{LogKeys, Logged};
use tower_http::{
    classify::{ServerErrorsAsFailures, SharedClassifier},
    trace::{MakeSpan, OnResponse, TraceLayer},
};
use tracing::{Span, field::Empty};
use tracing_subscriber::{EnvFilter, fmt, fmt::MakeWriter, prelude::*};

/// The filter when `RUST_LOG` is not set.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tower_http=info";

/// Logs to standard output: human-readable lines, or JSON lines when `json`.
pub fn init(json: bool) {
    let filter = crate::config::setting("RUST_LOG")
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER));
    init_with(json, filter, std::io::stdout);
}

/// Logs through `writer` (tests capture them this way).
pub fn init_with<W>(json: bool, filter: EnvFilter, writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_writer(writer),
            )
            .init();
    } else {
        registry.with(fmt::layer().with_writer(writer)).init();
    }
}

/// The request span and the event that closes it.
pub fn request_layer(
    log_keys: LogKeys,
) -> TraceLayer<SharedClassifier<ServerErrorsAsFailures>, RequestSpan, (), ResponseEvent, (), (), ()>
{
    TraceLayer::new_for_http()
        .make_span_with(RequestSpan { log_keys })
        .on_request(())
        .on_response(ResponseEvent)
        .on_body_chunk(())
        .on_eos(())
        // The error was logged where it became a status, with its cause.
        .on_failure(())
}

#[derive(Clone, Debug)]
pub struct RequestSpan {
    log_keys: LogKeys,
}

impl RequestSpan {
    /// Records what the log says about `key` of `consumer` (empty for a
    /// link naming no consumer).
    fn record_key(&self, span: &Span, consumer: &str, key: &str) {
        match self.log_keys.logged(consumer, key) {
            Logged::Key(key) => {
                span.record("key", key.as_str());
            }
            Logged::Fingerprint(fingerprint) => {
                span.record("key_fp", fingerprint.as_str());
            }
            Logged::Withheld => {}
        }
    }
}

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, request: &http::Request<B>) -> Span {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map_or("(unmatched)", MatchedPath::as_str);
        let span = tracing::info_span!(
            "request",
            method = %request.method(),
            route,
            consumer = Empty,
            key = Empty,
            key_fp = Empty,
            status = Empty,
            latency_ms = Empty,
        );
        let (consumer, key) = subject(route, request.uri());
        if let Some(consumer) = &consumer {
            span.record("consumer", consumer.as_str());
        }
        if let Some(key) = key {
            self.record_key(&span, consumer.as_deref().unwrap_or(""), &key);
        }
        span
    }
}

/// The consumer and key a request is about, decoded from the segments its
/// route names, or from `?consumer=`. Text that is not a valid consumer
/// name or key (undecodable, too long, control characters) is left out.
fn subject(route: &str, uri: &http::Uri) -> (Option<String>, Option<String>) {
    use idem_domain::{ConsumerName, IdempotencyKey};
    let mut consumer = None;
    let mut key = None;
    for (pattern, segment) in route.split('/').zip(uri.path().split('/')) {
        match pattern {
            "{consumer}" => {
                consumer = ConsumerName::from_segment(segment)
                    .ok()
                    .map(|c| c.to_string())
            }
            "{key}" => {
                key = IdempotencyKey::from_segment(segment)
                    .ok()
                    .map(|k| k.to_string())
            }
            _ => {}
        }
    }
    if consumer.is_none() {
        consumer = uri.query().and_then(|query| {
            url::form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == "consumer")
                .and_then(|(_, value)| ConsumerName::parse(value.into_owned()).ok())
                .map(|c| c.to_string())
        });
    }
    (consumer, key)
}

#[derive(Clone, Copy, Debug)]
pub struct ResponseEvent;

impl<B> OnResponse<B> for ResponseEvent {
    fn on_response(self, response: &http::Response<B>, latency: Duration, span: &Span) {
        let status = response.status().as_u16();
        let latency_ms = latency.as_secs_f64() * 1000.0;
        span.record("status", status);
        span.record("latency_ms", latency_ms);
        tracing::info!(status, latency_ms, "answered");
    }
}
