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
    match call(&state, parts, start).await {
        Ok(ActionOutcome::Done {
            audit_id, summary, ..
        }) => {
            let redrive_id = match state.store.redrive_of_audit(audit_id).await {
                Ok(Some(id)) => id,
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
        other => acted(other),
    }
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
