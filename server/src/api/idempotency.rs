//! `Idempotency-Key` on every write (the IETF httpapi draft): required,
//! bound per token to the request's fingerprint (method, path, body), and
//! answered with the first answer when sent again (`idem_store::Begun` says
//! what happens when). The action itself takes an id derived from the
//! token and the key, so even a retry after a crash between the action and
//! its kept answer returns the first outcome (the audit log's unique
//! action id), never a second action.

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use idem_store::{Begun, Store};
use sha2::{Digest, Sha256};

use super::{problem::Problem, token::Caller};

/// The header a write carries.
pub const HEADER: &str = "idempotency-key";

/// The header a kept answer is sent again with.
pub const REPLAYED: &str = "idempotent-replayed";

/// The longest key taken (a UUID is 36).
pub const MAX_KEY_BYTES: usize = 255;

/// After this long, a first request that never answered is taken to have
/// died, and the same key may run again (as the same action).
pub const STALE_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The action id of a write, derived from its token and key.
#[derive(Debug, Clone)]
pub struct ActionKey(pub String);

/// The action id for `key` sent by token `token_id`: 32 hex digits, never
/// the same for two tokens.
pub fn action_id(token_id: i64, key: &str) -> String {
    let digest = Sha256::digest(format!("idem-api:{token_id}:{key}").as_bytes());
    format!("api-{}", &hex::encode(digest)[..32])
}

/// A request's parts and its whole body (already read within its deadline
/// by the body layer).
pub async fn read(req: Request) -> Result<(Parts, Bytes), Problem> {
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => Ok((parts, bytes)),
        Err(_) => Err(Problem::bad_request("The body could not be read.")),
    }
}

fn fingerprint(parts: &Parts, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(parts.method.as_str().as_bytes());
    hash.update(b"\n");
    hash.update(parts.uri.path().as_bytes());
    hash.update(b"\n");
    hash.update(body);
    hex::encode(hash.finalize())
}

/// The key as sent: 1 to 255 visible ASCII characters, quotes of a
/// structured-field string taken off.
fn key_of(parts: &Parts) -> Result<String, Problem> {
    let Some(value) = parts.headers.get(HEADER) else {
        return Err(Problem::bad_request(
            "Send an Idempotency-Key header with every write (a new UUID per action): a retry with the same key is answered with the first outcome, never done twice.",
        ));
    };
    let text = value.to_str().unwrap_or("");
    let text = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    let valid = !text.is_empty()
        && text.len() <= MAX_KEY_BYTES
        && text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(Problem::bad_request(format!(
            "The Idempotency-Key must be 1 to {MAX_KEY_BYTES} visible ASCII characters."
        )))
    }
}

/// Runs a write once per key; see the module's comment.
pub async fn once(State(store): State<Store>, req: Request, next: Next) -> Response {
    let Some(caller) = req.extensions().get::<Caller>().cloned() else {
        return Problem::from(&idem_app::error::AppError::Unauthorized).answer();
    };
    let (mut parts, body) = match read(req).await {
        Ok(read) => read,
        Err(problem) => return problem.answer(),
    };
    let key = match key_of(&parts) {
        Ok(key) => key,
        Err(problem) => return problem.answer(),
    };
    let print = fingerprint(&parts, &body);
    let begun = store
        .tokens()
        .begin_idempotent(
            caller.token_id,
            &key,
            &print,
            idem_store::Ts::now(),
            STALE_AFTER,
        )
        .await;
    match begun {
        Ok(Begun::New) => {}
        Ok(Begun::Replay { status, body }) => return replayed(status, body),
        Ok(Begun::Mismatch) => {
            return Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-reused",
                "Idempotency-Key already used",
                "This Idempotency-Key was sent before with another request; nothing was done. Use a new key for a new action.",
            )
            .answer();
        }
        Ok(Begun::InProgress) => {
            return Problem::new(
                StatusCode::CONFLICT,
                "idempotency-key-in-progress",
                "Still in progress",
                "The first request with this Idempotency-Key has not been answered yet; send it again in a moment.",
            )
            .answer();
        }
        Err(err) => return Problem::from(err).answer(),
    }
    parts
        .extensions
        .insert(ActionKey(action_id(caller.token_id, &key)));
    let mut unanswered = Unanswered {
        store: store.clone(),
        token_id: caller.token_id,
        key: Some(key.clone()),
    };
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    let answered = keep(&store, caller.token_id, &key, response).await;
    unanswered.key = None;
    answered
}

/// A key begun and not yet answered: if its request is dropped midway (the
/// request timeout, a client gone), the key is forgotten, so a retry runs
/// at once rather than waiting out [`STALE_AFTER`] (the action, if it
/// committed, answers the retry with its first outcome).
struct Unanswered {
    store: Store,
    token_id: i64,
    key: Option<String>,
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        let (Some(key), Ok(runtime)) = (self.key.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (store, token_id) = (self.store.clone(), self.token_id);
        runtime.spawn(async move {
            if let Err(err) = store.tokens().abandon_idempotent(token_id, &key).await {
                tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not forget an unanswered Idempotency-Key");
            }
        });
    }
}

/// Keeps the answer for the key (a 5xx is forgotten instead, so the
/// client may retry) and sends it.
async fn keep(store: &Store, token_id: i64, key: &str, response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        let _ = store.tokens().abandon_idempotent(token_id, key).await;
        return Problem::from(&idem_app::error::AppError::Busy).answer();
    };
    let status = parts.status.as_u16();
    let kept = match std::str::from_utf8(&bytes) {
        Ok(text) if status < 500 => {
            store
                .tokens()
                .finish_idempotent(token_id, key, status, text)
                .await
        }
        _ => store.tokens().abandon_idempotent(token_id, key).await,
    };
    if let Err(err) = kept {
        tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not keep an API answer for its Idempotency-Key");
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// A kept answer, sent again.
fn replayed(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let kind = if status.is_success() {
        "application/json"
    } else {
        super::problem::PROBLEM_JSON
    };
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}
