//! Headers every response carries. The Content-Security-Policy of pages
//! (with the per-response nonce of Leptos's scripts) is set where the page
//! is rendered (`idem_app::shell`); other responses get a policy that allows
//! nothing.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{HeaderValue, header},
    middleware::Next,
    response::Response,
};

use super::AuthContext;

pub async fn security_headers(
    State(ctx): State<Arc<AuthContext>>,
    req: Request,
    next: Next,
) -> Response {
    let static_asset = req.uri().path().starts_with("/pkg/");
    let mut res = next.run(req).await;
    let headers = res.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Keys appear in URLs: never send them to another site.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
        ));
    if !static_asset {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if ctx.settings.secure() {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000; includeSubDomains"),
        );
    }
    res
}
