//! The answer to an action posted from a plain form: kept in the person's
//! session and shown once on the page the form was on (or another it
//! names), never taken from the page's address.

use leptos::prelude::*;

use super::{
    answered::set_status,
    reader::{READ_PRIMARY_COOKIE, READ_PRIMARY_SECONDS},
    state::AppState,
};
use crate::error::AppError;

/// The session entry holding the answer to the person's latest action from
/// a plain form post, until the page it was sent back to shows it.
const ACTION_ANSWER: &str = "action_answer";

/// The query parameter naming the action whose answer a page shows.
pub const ANSWER_PARAM: &str = "answer";

/// An action's answer, as kept in the session for the page to show.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredAnswer {
    action_id: String,
    answer: Result<idem_domain::action::ActionOutcome, AppError>,
}

fn session() -> Option<tower_sessions::Session> {
    use_context::<http::request::Parts>()?
        .extensions
        .get::<tower_sessions::Session>()
        .cloned()
}

/// The page a plain form's answer is shown on, when it is not the form's
/// own page (a started redrive answers on the run's page).
#[derive(Clone)]
struct AnswerOn(String);

/// Shows this action's answer on `path` (a local path) instead of the page
/// the form was on.
pub fn answer_on(path: &str) {
    provide_context(AnswerOn(crate::links::safe_next(path)));
}

/// Whether this request is a browser's own form post (it asks for HTML;
/// the page's code asks for data).
fn plain_form() -> bool {
    use_context::<http::request::Parts>().is_some_and(|parts| {
        parts
            .headers
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
    })
}

/// The page a plain form was posted from (a local path, never another
/// site), without any earlier answer or Leptos error parameters.
fn form_page() -> String {
    let referer = use_context::<http::request::Parts>()
        .and_then(|p| {
            p.headers
                .get(http::header::REFERER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .and_then(|r| url::Url::parse(&r).ok())
        .map(|u| {
            let query: Vec<(String, String)> = u
                .query_pairs()
                .filter(|(k, _)| {
                    ![ANSWER_PARAM, "outcome", "__err", "__path"].contains(&k.as_ref())
                })
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let pairs: Vec<(&str, &str)> = query
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            crate::links::with_query(u.path(), &pairs)
        })
        .unwrap_or_else(|| "/".to_owned());
    crate::links::safe_next(&referer)
}

/// An action's answer. From the page's own code it is returned as data,
/// with its status. From a plain form post (no JavaScript) the person is
/// sent back (303) to the page the form was on with `?answer=<action id>`,
/// and the answer waits in their session until that page shows it, once.
/// Nothing a page shows comes from its address: an `answer` that does not
/// name the session's latest action shows nothing.
pub async fn answer_form(
    action_id: &str,
    result: Result<idem_domain::action::ActionOutcome, AppError>,
) -> Result<idem_domain::action::ActionOutcome, AppError> {
    // With a read replica, the author reads the primary for a while.
    if result.is_ok()
        && use_context::<AppState>().is_some_and(|s| s.replica.is_some())
        && let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        && let Ok(cookie) = http::HeaderValue::from_str(&format!(
            "{READ_PRIMARY_COOKIE}=1; Max-Age={READ_PRIMARY_SECONDS}; Path=/; HttpOnly; SameSite=Lax"
        ))
    {
        response.append_header(http::header::SET_COOKIE, cookie);
    }
    if !plain_form() {
        return result;
    }
    // The id names the answer in the address; anything but a well-formed
    // id (which was refused anyway) is kept under a fixed name.
    let well_formed = (8..=64).contains(&action_id.len())
        && action_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let action_id = if well_formed { action_id } else { "malformed" };
    let stored = StoredAnswer {
        action_id: action_id.to_owned(),
        answer: result.clone(),
    };
    let kept = match session() {
        Some(session) => match session.insert(ACTION_ANSWER, &stored).await {
            // Saved now, not after the answer has gone: if the session
            // cannot be written (the database refused it just after the
            // action committed), the answer is a page that says what was
            // done, not an empty 500 from the session layer.
            Ok(()) => match session.save().await {
                Ok(()) => true,
                Err(err) => {
                    tracing::warn!(error = %err, "could not keep an action's answer in the session; answering with a page");
                    let _ = session.remove_value(ACTION_ANSWER).await;
                    answer_in_place(&result);
                    return result;
                }
            },
            Err(_) => false,
        },
        None => false,
    };
    let back = use_context::<AnswerOn>()
        .map(|page| page.0)
        .unwrap_or_else(form_page);
    let separator = if back.contains('?') { '&' } else { '?' };
    leptos_axum::redirect(&if kept {
        format!("{back}{separator}{ANSWER_PARAM}={action_id}")
    } else {
        back
    });
    // See Other: the browser follows with a GET, whatever the status the
    // answer itself would have had.
    set_status(303);
    result
}

/// The header that asks the server to turn this answer into a page of its
/// own (see `server/src/fn_errors.rs`), carrying it (JSON, URL-safe base64):
/// the session that would have carried it to the form's page could not be
/// written.
pub const ANSWER_IN_PLACE_HEADER: &str = "idem-answer-in-place";

fn answer_in_place(result: &Result<idem_domain::action::ActionOutcome, AppError>) {
    use base64::Engine;
    let Ok(json) = serde_json::to_vec(result) else {
        return;
    };
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        && let Ok(value) = http::HeaderValue::from_str(&encoded)
    {
        response.insert_header(http::HeaderName::from_static(ANSWER_IN_PLACE_HEADER), value);
    }
}

/// The answer to the action `action_id`, if it is the one this person's
/// session holds; it is shown once.
pub async fn take_answer(
    action_id: &str,
) -> Option<Result<idem_domain::action::ActionOutcome, AppError>> {
    let session = session()?;
    let stored: StoredAnswer = session.get(ACTION_ANSWER).await.ok()??;
    if stored.action_id != action_id {
        return None;
    }
    let _ = session.remove_value(ACTION_ANSWER).await;
    Some(stored.answer)
}
