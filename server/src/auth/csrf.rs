//! Refuses state-changing requests that did not come from Idem's own pages.

use std::sync::Arc;

use axum::{
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};

use super::AuthContext;

/// Every request that is not `GET`, `HEAD` or `OPTIONS` must say it comes
/// from this origin: `Sec-Fetch-Site: same-origin`, or, from a browser that
/// does not send that header, an `Origin` equal to the public origin.
/// Forms keep working without JavaScript: browsers send both on a form post.
pub async fn csrf(State(ctx): State<Arc<AuthContext>>, req: Request, next: Next) -> Response {
    // The API reads no cookie (a token opens it, `crate::api`), so a
    // request another site makes a browser send carries nothing to abuse.
    // Every path under `/api/v1/` is the API router's (its own 404 included).
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        || req.uri().path().starts_with("/api/v1/")
    {
        return next.run(req).await;
    }
    let headers = req.headers();
    let same_origin = match headers.get("sec-fetch-site") {
        Some(site) => site.as_bytes() == b"same-origin",
        None => headers
            .get(header::ORIGIN)
            .is_some_and(|o| o.as_bytes() == ctx.settings.origin().as_bytes()),
    };
    if same_origin {
        next.run(req).await
    } else {
        (
            StatusCode::FORBIDDEN,
            "Cross-site request refused: it did not come from Idem's own pages.\n",
        )
            .into_response()
    }
}
