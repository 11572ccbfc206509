//! The API's actions: the pages' own action functions (role, rights,
//! compare-and-set and audit row in one transaction), called with an
//! action id derived from the request's `Idempotency-Key`
//! (`idempotency::ActionKey`), so a retry is the same action.

use axum::{
    Extension,
    body::Bytes,
    extract::{Request, State},
    http::{StatusCode, request::Parts},
    response::{IntoResponse, Response},
};
use idem_app::{api, error::AppError, serving::AppState};
use idem_domain::action::ActionOutcome;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use utoipa::ToSchema;

use super::{
    call::call,
    idempotency::ActionKey,
    problem::Problem,
    reads::{segments, try_or_answer},
};

/// What an action did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Acted {
    /// The audit entry that records it.
    pub audit_id: i64,
    /// The outbox row it wrote (a replay, a resolution with retry).
    pub outbox_id: Option<i64>,
    /// What was done, in the pages' words.
    pub summary: String,
}

/// Replaying a dead letter.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ReplayBody {
    /// Why, for the audit log.
    #[schema(max_length = 2000)]
    pub reason: String,
    /// Replay even though the verdict says not to (its key is already sent).
    pub override_verdict: bool,
}

/// Discarding a dead letter.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DiscardBody {
    /// Why, for the audit log.
    #[schema(max_length = 2000)]
    pub reason: String,
}

/// Resolving an unknown outcome.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveBody {
    /// The claim's version as read (compare-and-set: a claim changed since is a 409).
    pub version: i64,
    /// `sent` (with `provider_ref`), `failed-retry` (retried through the
    /// outbox, same key) or `failed`.
    #[schema(pattern = "^(sent|failed-retry|failed)$")]
    pub outcome: String,
    /// The provider's reference, for `sent` (at most 256 bytes).
    #[serde(default)]
    #[schema(max_length = 256)]
    pub provider_ref: String,
    /// Why, for the audit log.
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub reason: String,
}

/// The body as `T`; anything else is a 400 problem.
pub fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, Problem> {
    let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { bytes };
    serde_json::from_slice(bytes)
        .map_err(|err| Problem::bad_request(format!("The body is not this action's JSON: {err}.")))
}

/// An action's outcome as the API answers it.
pub fn acted(result: Result<ActionOutcome, AppError>) -> Response {
    match result {
        Ok(ActionOutcome::Done {
            audit_id,
            outbox_id,
            summary,
        }) => axum::Json(Acted {
            audit_id,
            outbox_id,
            summary,
        })
        .into_response(),
        Ok(ActionOutcome::Conflict { by, at, now }) => {
            let at = at
                .map(|at| format!(" at {}", at.to_rfc3339()))
                .unwrap_or_default();
            Problem::new(
                StatusCode::CONFLICT,
                "changed",
                "Changed since you looked",
                format!("Nothing was changed: {by} got there first{at}. It is now {now}."),
            )
            .answer()
        }
        Ok(ActionOutcome::Refused { reason }) => Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "refused",
            "Not done",
            format!("Not done: {reason}"),
        )
        .answer(),
        Ok(ActionOutcome::FormReused { first }) => {
            Problem::from(&AppError::FormReused(first)).answer()
        }
        Err(err) => Problem::from(&err).answer(),
    }
}

/// The dead letter an action under `/api/v1/dead-letters/{id}/…` names,
/// the request's parts and its body as `T`; a malformed one is a 400.
async fn dead_letter_action<T: DeserializeOwned>(req: Request) -> Result<(i64, Parts, T), Problem> {
    let [id, _] = segments::<2>(&req, "/api/v1/dead-letters/")?;
    let (parts, bytes) = super::idempotency::read(req).await?;
    let b = body(&bytes)?;
    let id = id.parse::<i64>().map_err(|_| {
        Problem::bad_request(format!("“{id}” is not a dead letter id (a whole number)."))
    })?;
    Ok((id, parts, b))
}

/// Replays one dead letter through the outbox with the same key.
#[utoipa::path(post, path = "/api/v1/dead-letters/{id}/replay", tag = "actions",
    params(("id" = i64, Path, minimum = 1, description = "The dead letter's id."), super::IdempotencyKeyHeader),
    request_body(content = ReplayBody, content_type = "application/json"),
    responses((status = 200, body = Acted), super::Problems))]
pub async fn replay(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let (id, parts, b): (i64, _, ReplayBody) = try_or_answer!(dead_letter_action(req).await);
    let override_verdict = b.override_verdict.then(|| "on".to_owned());
    acted(
        call(
            &state,
            parts,
            api::replay_dead_letter(id, action_id, override_verdict, b.reason),
        )
        .await,
    )
}

/// Discards one dead letter whose key is already sent.
#[utoipa::path(post, path = "/api/v1/dead-letters/{id}/discard", tag = "actions",
    params(("id" = i64, Path, minimum = 1, description = "The dead letter's id."), super::IdempotencyKeyHeader),
    request_body(content = DiscardBody, content_type = "application/json"),
    responses((status = 200, body = Acted), super::Problems))]
pub async fn discard(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let (id, parts, b): (i64, _, DiscardBody) = try_or_answer!(dead_letter_action(req).await);
    acted(
        call(
            &state,
            parts,
            api::discard_dead_letter(id, action_id, b.reason),
        )
        .await,
    )
}

/// Resolves one unknown outcome.
#[utoipa::path(post, path = "/api/v1/keys/{consumer}/{key}/resolve", tag = "actions",
    params(
        ("consumer" = String, Path, description = "The consumer, percent-encoded."),
        ("key" = String, Path, description = "The idempotency key, percent-encoded (its `/` as `%2F`)."),
        super::IdempotencyKeyHeader,
    ),
    request_body(content = ResolveBody, content_type = "application/json"),
    responses((status = 200, body = Acted), super::Problems))]
pub async fn resolve(
    State(state): State<AppState>,
    Extension(ActionKey(action_id)): Extension<ActionKey>,
    req: Request,
) -> Response {
    let [consumer, key, _] = try_or_answer!(segments::<3>(&req, "/api/v1/keys/"));
    let (parts, bytes) = try_or_answer!(super::idempotency::read(req).await);
    let b: ResolveBody = try_or_answer!(body(&bytes));
    let decoded = idem_domain::ConsumerName::from_segment(&consumer)
        .map_err(AppError::from)
        .and_then(|c| Ok((c, idem_domain::IdempotencyKey::from_segment(&key)?)));
    let (consumer, key) = match decoded {
        Ok(pair) => pair,
        Err(err) => return Problem::from(&err).answer(),
    };
    let resolve = api::resolve_unknown(
        consumer.as_str().to_owned(),
        key.as_str().to_owned(),
        b.version,
        action_id,
        b.outcome,
        b.provider_ref,
        b.reason,
    );
    acted(call(&state, parts, resolve).await)
}
