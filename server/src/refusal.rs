//! The page a person sees when a request is refused before any of Idem's
//! own pages can be rendered (overload, timeout, sign-in unavailable, a
//! provider's refusal): small, self-contained, no scripts, its one style
//! allowed by hash, and a link that leads somewhere useful.

use axum::{
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{Html, IntoResponse, Response},
};
use idem_app::format::html_escape;

pub(crate) fn is_read(method: &Method) -> bool {
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
    let link = format!(
        "<a href=\"{}\">{}</a>",
        html_escape(href),
        html_escape(link_text)
    );
    let page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Idem</title><style>{REFUSAL_STYLE}</style></head>\
         <body><h1>{title}</h1><p role=\"alert\">{message}</p><p>{link}</p></body></html>",
        title = html_escape(title),
        message = html_escape(message),
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
