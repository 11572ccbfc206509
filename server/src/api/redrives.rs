//! Redrives through the API: the offer comes with the dead-letter list
//! (`redrive` in its answer), a start takes exactly that offer, and the
//! run is read and stopped by its number. Each is the page's own server
//! function; a run a token starts reads the token's owner's account again
//! before each item, and stops once the token is revoked or expired.

use axum::{
    Extension,
    extract::{Request, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use idem_app::{api, error::AppError, serving::AppState};
use idem_domain::{Redrive, RedriveItem, action::ActionOutcome};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    actions::{acted, body},
    call::{answer, call},
    idempotency::ActionKey,
    problem::Problem,
    reads::{segments, try_or_answer},
};

/// One run and each of its dead letters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RedriveRecord {
    pub as_of: DateTime<Utc>,
    pub run: Redrive,
    pub items: Vec<RedriveItem>,
}

/// Starting a redrive of what the dead-letter list offered.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StartBody {
    /// The list's `redrive.offer`, as read with the same filters.
    pub offer: String,
    pub consumer: Option<String>,
    /// Only letters whose last error contains this text.
    pub error: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// A started run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Started {
    pub redrive_id: i64,
    pub audit_id: i64,
    pub summary: String,
}

/// A run's progress: its state and each item's outcome.
#[utoipa::path(get, path = "/api/v1/redrives/{id}", tag = "redrives",
    params(("id" = i64, Path, minimum = 1, description = "The run's number.")),
    responses((status = 200, body = RedriveRecord), super::Problems))]
pub async fn redrive(State(state): State<AppState>, req: Request) -> Response {
    let [id] = try_or_answer!(segments::<1>(&req, "/api/v1/redrives/"));
    let (parts, _) = req.into_parts();
    let detail = call(&state, parts, api::get_redrive(id)).await;
    answer(detail.map(|d| RedriveRecord {
        as_of: d.clock.as_of,
        run: d.run,
        items: d.items,
    }))
}

/// Starts a guarded redrive of exactly the letters the list offered (the
/// oldest 500 at most); a list that changed since is a 409 and starts nothing.
#[utoipa::path(post, path = "/api/v1/redrives", tag = "redrives",
    params(super::IdempotencyKeyHeader),
    request_body(content = StartBody, content_type = "application/json"),
    responses((status = 201, body = Started), super::Problems))]
pub async fn start(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let (parts, bytes) = try_or_answer!(super::idempotency::read(req).await);
    let b: StartBody = try_or_answer!(body(&bytes));
    let start = api::start_redrive(action_id, b.offer, b.consumer, b.error, b.from, b.to);
    started(&state, call(&state, parts, start).await).await
}

/// A start's answer: 201 with the run's number and `Location`, or the
/// problem that says why nothing started.
pub(super) async fn started(
    state: &AppState,
    outcome: Result<ActionOutcome, AppError>,
) -> Response {
    let Ok(ActionOutcome::Done {
        audit_id, summary, ..
    }) = outcome
    else {
        return acted(outcome);
    };
    let redrive_id = match state.store.runs().redrive_of_audit(audit_id).await {
        Ok(Some(id)) => id.get(),
        Ok(None) => return Problem::from(&AppError::NotFound(summary)).answer(),
        Err(err) => return Problem::from(err).answer(),
    };
    let mut response = (
        axum::http::StatusCode::CREATED,
        axum::Json(Started {
            redrive_id,
            audit_id,
            summary,
        }),
    )
        .into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/api/v1/redrives/{redrive_id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// A bulk discard of what a check offered.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BulkDiscardBody {
    /// `discard.offer` of `GET /api/v1/checks/dead-letter-already-sent`.
    pub offer: String,
    /// Recorded on every letter's audit row; required.
    #[schema(max_length = 2000)]
    pub reason: String,
}

/// Starts a guarded bulk discard of exactly the open dead letters whose
/// key is already sent that the check offered (the oldest 500 at most):
/// each discarded in turn through the single discard, with the reason. A
/// set that changed since is a 409 and starts nothing. Follow it, and stop
/// it, as a redrive.
#[utoipa::path(post, path = "/api/v1/bulk/discard", tag = "redrives",
    params(super::IdempotencyKeyHeader),
    request_body(content = BulkDiscardBody, content_type = "application/json"),
    responses((status = 201, body = Started), super::Problems))]
pub async fn discard(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let (parts, bytes) = try_or_answer!(super::idempotency::read(req).await);
    let b: BulkDiscardBody = try_or_answer!(body(&bytes));
    let start = api::start_bulk_discard(action_id, b.offer, None, b.reason);
    started(&state, call(&state, parts, start).await).await
}

/// One key of a bulk resolve.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyToResolve {
    pub consumer: String,
    pub key: String,
    /// The claim version read (from `/api/v1/unknown` or a check's
    /// findings): a key changed since is skipped. Without it, the version
    /// the claim has when the run starts.
    #[serde(default)]
    pub version: Option<i64>,
    /// Required to resolve as sent; none to resolve as failed.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub provider_ref: Option<String>,
}

/// A bulk resolve: every key the same way.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkResolveBody {
    /// `sent`, `failed-retry` (failed, and retried through the outbox with
    /// the same key) or `failed` (for good; needs a reason).
    #[schema(pattern = "^(sent|failed-retry|failed)$")]
    pub resolve_as: String,
    /// Why, for each key's audit row.
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub reason: Option<String>,
    /// At most 500, none twice.
    #[schema(max_items = 500)]
    pub keys: Vec<KeyToResolve>,
}

/// Starts a guarded bulk resolve of exactly these keys: each resolved in
/// turn through the single resolution, only while its claim is at the
/// version given and unresolved; a key changed meanwhile is skipped and
/// listed with who changed it. A list with a bad key is a 400 naming each,
/// and starts nothing.
#[utoipa::path(post, path = "/api/v1/bulk/resolve", tag = "redrives",
    params(super::IdempotencyKeyHeader),
    request_body(content = BulkResolveBody, content_type = "application/json"),
    responses((status = 201, body = Started), super::Problems))]
pub async fn resolve(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let (parts, bytes) = try_or_answer!(super::idempotency::read(req).await);
    let b: BulkResolveBody = try_or_answer!(body(&bytes));
    // Each key named by its place in the list, every bad one at once.
    let bad: Vec<String> = b
        .keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            let why = idem_domain::ConsumerName::parse(k.consumer.as_str())
                .and_then(|_| idem_domain::IdempotencyKey::parse(k.key.as_str()))
                .err()?;
            Some(format!("line {}: {why}", i + 1))
        })
        .collect();
    if !bad.is_empty() {
        let detail = format!(
            "Nothing was started; fix these keys and send the list again: {}.",
            bad.join("; ")
        );
        return Problem::from(&AppError::BadRequest(detail)).answer();
    }
    let keys = match serde_json::to_string(&b.keys) {
        Ok(keys) => keys,
        Err(err) => return Problem::from(&AppError::BadRequest(err.to_string())).answer(),
    };
    let reason = b.reason.unwrap_or_default();
    let start = api::start_bulk_resolve(action_id, b.resolve_as, reason, Some(keys), None, None);
    started(&state, call(&state, parts, start).await).await
}

/// Stops a running redrive after the item in flight; the letters it had
/// not taken stay open.
#[utoipa::path(post, path = "/api/v1/redrives/{id}/stop", tag = "redrives",
    params(("id" = i64, Path, minimum = 1, description = "The run's number."), super::IdempotencyKeyHeader),
    responses((status = 200, body = super::actions::Acted), super::Problems))]
pub async fn stop(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let [id, _] = try_or_answer!(segments::<2>(&req, "/api/v1/redrives/"));
    let (parts, _) = req.into_parts();
    acted(call(&state, parts, api::stop_redrive(id, action_id)).await)
}
