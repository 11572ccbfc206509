//! `/api/v1`: Idem for runbooks and scripts, as JSON, with its OpenAPI
//! document at `/api/v1/openapi.json`.
//!
//! The API is another face of the pages: every operation calls the server
//! function its page calls (`call`), so the role, the team rights, the
//! compare-and-set and the audit row are the pages' own. What differs is
//! at the edge:
//!
//! - who calls: a token (`token`), never a session cookie; the routes sit
//!   outside the session layer and the guard, so cross-site checks do not
//!   apply (no cookie, nothing a browser would send on its own);
//! - every write carries an `Idempotency-Key` (`idempotency`);
//! - errors are `application/problem+json` (`problem`), worded as the pages
//!   word them.
//!
//! Rooms, each importing only those before it: `problem` → `token`, `call`
//! → `types`, `idempotency` → `reads` → `actions`, `exports` → `redrives`
//! → `reconciliations`.

mod actions;
mod call;
mod exports;
mod idempotency;
mod problem;
mod reads;
mod reconciliations;
mod redrives;
mod token;
mod types;

use std::sync::{Arc, OnceLock};

use axum::{
    Router,
    http::{HeaderValue, StatusCode, header},
    middleware::from_fn_with_state,
    response::{IntoResponse, Response},
    routing::{any, get, post},
};
use idem_app::serving::AppState;
use utoipa::{
    Modify, OpenApi,
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
};

pub use exports::{EXPORT_MAX_ROWS, csv_cell, export};
pub use idempotency::{HEADER as IDEMPOTENCY_KEY, REPLAYED as IDEMPOTENT_REPLAYED};
pub use problem::{PROBLEM_JSON, Problem};
pub use token::{SECRET_PREFIX, actor_name, new_secret, secret_hash};

use crate::auth::AuthContext;

/// The answers every operation may give besides its own: problems.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only described, never built: the document's list of problems.
enum Problems {
    /// The request is wrong: a malformed key, cursor, filter or body, or a
    /// write without its Idempotency-Key.
    #[response(status = 400, content_type = "application/problem+json")]
    BadRequest(Problem),
    /// No token, or one that opens nothing (unknown, revoked, expired).
    #[response(status = 401, content_type = "application/problem+json")]
    Unauthorized(Problem),
    /// The token's role may not do this, or the consumer is another team's.
    #[response(status = 403, content_type = "application/problem+json")]
    Forbidden(Problem),
    #[response(status = 404, content_type = "application/problem+json")]
    NotFound(Problem),
    /// Changed since it was read (compare-and-set), read-only, or the first
    /// request with this Idempotency-Key is still running.
    #[response(status = 409, content_type = "application/problem+json")]
    Conflict(Problem),
    /// The body is larger than Idem accepts: nothing was read or done.
    #[response(status = 413, content_type = "application/problem+json")]
    TooLarge(Problem),
    /// Not done as asked, or the Idempotency-Key was used for another request.
    #[response(status = 422, content_type = "application/problem+json")]
    Unprocessable(Problem),
    /// The database is down or busy: retry after `Retry-After` seconds.
    #[response(status = 503, content_type = "application/problem+json")]
    Unavailable(Problem),
}

/// The `Idempotency-Key` header every write sends.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // Only described: `idempotency` reads the header.
struct IdempotencyKeyHeader {
    /// A new value (a UUID) per action; sent again with the same request,
    /// the first answer comes back (with `Idempotent-Replayed: true`).
    #[param(rename = "Idempotency-Key", min_length = 1, max_length = 255)]
    idempotency_key: String,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Idem",
        version = "1",
        description = "The console for idempotent queue consumers, for runbooks and scripts: \
            read a key's story, the lists, checks and objectives; replay, discard and resolve, \
            one at a time or in guarded bulk runs; reconcile with a provider's export. \
            Send a token as `Authorization: Bearer idem_…` (`idem token create`). Every write \
            needs an `Idempotency-Key`. Lists are keyset-paged: send `next` back as `cursor`."
    ),
    paths(
        reads::key, reads::search, reads::unknown, reads::dead_letters, reads::dead_letter,
        reads::outbox, reads::audit, reads::checks, reads::findings, reads::slos,
        actions::replay, actions::discard, actions::resolve, exports::export,
        redrives::redrive, redrives::start, redrives::stop, redrives::discard,
        redrives::resolve, reconciliations::upload, reconciliations::reconciliation,
        reconciliations::apply,
    ),
    components(schemas(Problem)),
    modifiers(&BearerToken),
    security(("token" = [])),
)]
struct Document;

/// Adds the bearer-token scheme every operation uses.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An Idem token: `idem token create NAME --owner ACCOUNT --role viewer`.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI 3.1 document, generated once from the code.
pub fn document() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        Document::openapi()
            .to_pretty_json()
            .expect("the API's document serialises")
    })
}

async fn openapi_json() -> Response {
    let mut response = document().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn no_such_operation() -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        "There is no such address in the API; /api/v1/openapi.json lists them.",
    )
    .answer()
}

/// The API's routes: the document for anyone, everything else for a token.
pub fn router(state: &AppState, auth: Arc<AuthContext>) -> Router<AppState> {
    // Each write once per Idempotency-Key; only for POST, so another
    // method is a 405, never a write.
    let once = from_fn_with_state(state.store.clone(), idempotency::once);
    Router::new()
        .route("/api/v1/keys", get(reads::search))
        .route("/api/v1/keys/{consumer}/{key}", get(reads::key))
        .route("/api/v1/unknown", get(reads::unknown))
        .route("/api/v1/dead-letters", get(reads::dead_letters))
        .route("/api/v1/dead-letters/{id}", get(reads::dead_letter))
        .route("/api/v1/outbox", get(reads::outbox))
        .route("/api/v1/audit", get(reads::audit))
        .route("/api/v1/checks", get(reads::checks))
        .route("/api/v1/checks/{check}", get(reads::findings))
        .route("/api/v1/slo", get(reads::slos))
        .route("/api/v1/redrives/{id}", get(redrives::redrive))
        .route(
            "/api/v1/redrives",
            post(redrives::start).route_layer(once.clone()),
        )
        .route(
            "/api/v1/redrives/{id}/stop",
            post(redrives::stop).route_layer(once.clone()),
        )
        .route(
            "/api/v1/bulk/discard",
            post(redrives::discard).route_layer(once.clone()),
        )
        .route(
            "/api/v1/bulk/resolve",
            post(redrives::resolve).route_layer(once.clone()),
        )
        // Streamed (`crate::reconcile`): its Idempotency-Key is checked by
        // the handler, the file's hash binding it, never the body read whole.
        .route(
            "/api/v1/reconciliations",
            post(reconciliations::upload).layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .route(
            "/api/v1/reconciliations/{id}",
            get(reconciliations::reconciliation),
        )
        .route(
            "/api/v1/reconciliations/{id}/apply",
            post(reconciliations::apply).route_layer(once.clone()),
        )
        .route("/api/v1/exports/{file}", get(exports::export))
        .route(
            "/api/v1/dead-letters/{id}/replay",
            post(actions::replay).route_layer(once.clone()),
        )
        .route(
            "/api/v1/dead-letters/{id}/discard",
            post(actions::discard).route_layer(once.clone()),
        )
        .route(
            "/api/v1/keys/{consumer}/{key}/resolve",
            post(actions::resolve).route_layer(once),
        )
        .layer(from_fn_with_state(auth, token::authenticate))
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/v1", any(no_such_operation))
        .route("/api/v1/", any(no_such_operation))
        .route("/api/v1/{*rest}", any(no_such_operation))
}
