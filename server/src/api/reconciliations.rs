//! Reconciliations through the API, for a nightly job: send the
//! provider's export as the body (streamed, as the page's upload), read
//! what each class holds, and apply a class as a guarded bulk resolve.
//! Reading and applying are the pages' own server functions.

use axum::{
    Extension,
    body::Body,
    extract::{Query, Request, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use idem_app::{api, auth::CurrentUser, serving::AppState};
use idem_domain::Reconciliation;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    actions::body,
    call::{answer, call},
    idempotency::ActionKey,
    problem::Problem,
    reads::{segments, try_or_answer},
    redrives::started,
    token::Caller,
};
use crate::reconcile::{Intake, IntakeError, Request as Upload, intake_broken, may_reconcile};

/// One reconciliation: who ran it on which file, and each class with its
/// count, what is left to apply, the runs that applied it, and its first
/// 50 rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReconciliationRecord {
    pub as_of: DateTime<Utc>,
    pub reconciliation: Reconciliation,
}

/// What the export is of.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UploadParams {
    /// The consumer whose claims the export is held against.
    #[param(min_length = 1, max_length = 128)]
    pub consumer: String,
    /// How long the provider may take to show a call in its export
    /// (seconds, 0 to 86400; 300 when left out).
    #[serde(default)]
    #[param(minimum = 0, maximum = 86400)]
    pub latency_seconds: Option<i64>,
    /// Status words besides the usual ones: `queued=accepted,soft_bounce=failed`.
    #[serde(default)]
    #[param(max_length = 2000)]
    pub status_words: Option<String>,
    /// The file's name, for the record.
    #[serde(default)]
    #[param(max_length = 200)]
    pub file_name: Option<String>,
    /// When the export was taken (RFC 3339, not in the future): it covers
    /// every call up to then, though its last record may be older.
    #[serde(default)]
    #[param(value_type = Option<String>, format = DateTime)]
    pub covers_until: Option<String>,
}

/// Reconciles a provider's export (the body: CSV with a header naming
/// `reference`/`key`/`status`/`time`, or JSON lines; up to 64 MiB) against
/// one consumer's claims, and keeps what each class holds. Nothing in the
/// claims changes. Sent again with the same Idempotency-Key and file, the
/// first reconciliation answers.
#[utoipa::path(post, path = "/api/v1/reconciliations", tag = "reconciliations",
    params(UploadParams, super::IdempotencyKeyHeader),
    request_body(content = String, content_type = "text/plain",
        description = "The export: CSV with a header, or JSON lines (any text type is read the same)."),
    responses((status = 201, body = ReconciliationRecord), super::Problems))]
pub async fn upload(
    State(state): State<AppState>,
    Extension(user): Extension<CurrentUser>,
    Extension(caller): Extension<Caller>,
    params: Result<Query<UploadParams>, axum::extract::rejection::QueryRejection>,
    req: Request,
) -> Response {
    let Query(params) = match params {
        Ok(params) => params,
        Err(rejection) => return Problem::bad_request(rejection.body_text()).answer(),
    };
    let key = req
        .headers()
        .get(super::IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty() && k.len() <= super::idempotency::MAX_KEY_BYTES);
    let Some(key) = key else {
        return Problem::bad_request(
            "A reconciliation needs an Idempotency-Key header (1 to 255 bytes): a new value per export.",
        )
        .answer();
    };
    let too_long = [
        ("file_name", params.file_name.as_deref(), 200),
        ("status_words", params.status_words.as_deref(), 2000),
    ]
    .into_iter()
    .find(|(_, text, most)| text.is_some_and(|t| t.chars().count() > *most));
    if let Some((name, _, most)) = too_long {
        return Problem::bad_request(format!("`{name}` is longer than {most} characters."))
            .answer();
    }
    let action_id = super::idempotency::action_id(caller.token_id, key);
    let latency = params
        .latency_seconds
        .map(|s| s.to_string())
        .unwrap_or_default();
    let upload = match Upload::parse(
        &params.consumer,
        &latency,
        params.status_words.as_deref().unwrap_or_default(),
        params.file_name.as_deref().unwrap_or_default(),
        action_id,
    ) {
        Ok(upload) => upload,
        Err(err) => return problem(err),
    };
    let mut upload = upload.with_catalogue(&state.catalogue);
    if let Some(text) = params.covers_until.as_deref() {
        let now = Utc::now();
        match DateTime::parse_from_rfc3339(text.trim()) {
            Ok(at) if at.with_timezone(&Utc) <= now + chrono::TimeDelta::minutes(1) => {
                upload.covers_until = Some(at.with_timezone(&Utc));
            }
            _ => {
                return Problem::bad_request(format!(
                    "`covers_until` “{text}” is not an RFC 3339 time up to now."
                ))
                .answer();
            }
        }
    }
    let kept = reconcile(&state, &user, &upload, req.into_body()).await;
    let id = match kept {
        Ok(id) => id,
        Err(err) => return problem(err),
    };
    created(&state, &user, id).await
}

/// The reconciliation `id` just kept, as a 201 with its address.
async fn created(
    state: &AppState,
    user: &CurrentUser,
    id: idem_domain::ReconciliationId,
) -> Response {
    let scope = user
        .rights
        .within(&state.catalogue, idem_domain::Role::Viewer);
    let read = state
        .store
        .reconcile()
        .reconciliation(id, api::CLASS_SAMPLE, &scope)
        .await;
    match read {
        Ok(Some(reconciliation)) => {
            let record = ReconciliationRecord {
                as_of: Utc::now(),
                reconciliation,
            };
            let mut response = (StatusCode::CREATED, axum::Json(record)).into_response();
            if let Ok(location) = HeaderValue::from_str(&format!("/api/v1/reconciliations/{id}")) {
                response.headers_mut().insert(header::LOCATION, location);
            }
            response
        }
        Ok(None) => problem(IntakeError::Broken),
        Err(err) => Problem::from(err).answer(),
    }
}

async fn reconcile(
    state: &AppState,
    user: &CurrentUser,
    upload: &Upload,
    body: Body,
) -> Result<idem_domain::ReconciliationId, IntakeError> {
    may_reconcile(state, user, upload.consumer.as_str()).await?;
    let mut intake = Intake::new(&state.store, upload);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| intake_broken(&intake))?;
        intake.push(&chunk).await?;
    }
    let actor = idem_store::Actor {
        name: &user.username,
        role: user.role.as_str(),
        client_addr: None,
    };
    intake.finish(upload, actor).await
}

fn problem(err: IntakeError) -> Response {
    match err {
        IntakeError::Store(store) => {
            tracing::error!(error = %idem_app::error::cause_chain(&store), "a reconciliation failed");
            Problem::from(store).answer()
        }
        IntakeError::Forbidden(why) => {
            Problem::new(StatusCode::FORBIDDEN, "forbidden", "Not allowed", why).answer()
        }
        other => Problem::new(
            other.status(),
            "not-reconciled",
            "Not reconciled",
            format!("{other}; nothing was kept."),
        )
        .answer(),
    }
}

/// One reconciliation and what each class holds.
#[utoipa::path(get, path = "/api/v1/reconciliations/{id}", tag = "reconciliations",
    params(("id" = i64, Path, minimum = 1, description = "The reconciliation's number.")),
    responses((status = 200, body = ReconciliationRecord), super::Problems))]
pub async fn reconciliation(State(state): State<AppState>, req: Request) -> Response {
    let [id] = try_or_answer!(segments::<1>(&req, "/api/v1/reconciliations/"));
    let (parts, _) = req.into_parts();
    let detail = call(&state, parts, api::get_reconciliation(id)).await;
    answer(detail.map(|d| ReconciliationRecord {
        as_of: d.clock.as_of,
        reconciliation: d.reconciliation,
    }))
}

/// Applying one class of a reconciliation.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyBody {
    /// `unknown-accepted` (resolved as sent with the provider's reference)
    /// or `unknown-absent` (failed, retried through the outbox).
    #[schema(pattern = "^(unknown-accepted|unknown-absent)$")]
    pub class: String,
    /// The class's `to_apply` as read (at most 500): if it changed since,
    /// nothing starts.
    #[schema(minimum = 1, maximum = 500)]
    pub count: i64,
    /// Added to each key's audit row after the reconciliation's number.
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub reason: Option<String>,
}

/// Applies one class as a guarded bulk resolve of exactly the rows the
/// reconciliation kept for it (each key at the version it was read at): a
/// key someone changed since is skipped and named. Follow it, and stop it,
/// as a redrive.
#[utoipa::path(post, path = "/api/v1/reconciliations/{id}/apply", tag = "reconciliations",
    params(("id" = i64, Path, minimum = 1, description = "The reconciliation's number."), super::IdempotencyKeyHeader),
    request_body(content = ApplyBody, content_type = "application/json"),
    responses((status = 201, body = super::redrives::Started), super::Problems))]
pub async fn apply(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let [id, _] = try_or_answer!(segments::<2>(&req, "/api/v1/reconciliations/"));
    let (parts, bytes) = try_or_answer!(super::idempotency::read(req).await);
    let b: ApplyBody = try_or_answer!(body(&bytes));
    let apply = api::apply_reconciliation(
        action_id,
        id,
        b.class,
        b.count.to_string(),
        b.reason.unwrap_or_default(),
    );
    started(&state, call(&state, parts, apply).await).await
}
