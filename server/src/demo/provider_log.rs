//! The demo's email provider's message log: what it says became of each
//! reminder last delivered in the past day, as a provider's export
//! reads (`message_id,idempotency_key,event,timestamp`; the events are
//! this provider's own words, `dispatched` and `soft_bounce`, which the
//! demo's catalogue maps), for the
//! `/reconcile` page's whole loop. For a claim whose outcome Idem does not
//! know, the simulated provider says whether it acted — yes for 7 in 10,
//! as the simulated on-call finds, decided by the key so the same key
//! always reads the same.

use axum::{
    Extension,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use idem_app::{auth::CurrentUser, serving::AppState};
use idem_domain::ClaimStatus;
use idem_store::Ts;

use super::flows::Flow;

/// How far back the log goes.
const SPAN: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// The most messages the log lists.
const MAX_MESSAGES: i64 = 20_000;

/// `GET /reconcile/demo-provider-log.csv`, in demo mode only.
pub async fn provider_log(
    State(state): State<AppState>,
    Extension(user): Extension<CurrentUser>,
) -> Response {
    let consumer = Flow::Reminders.consumer();
    if !state.console.demo {
        return crate::refusal::refusal(
            StatusCode::NOT_FOUND,
            "Not found",
            "Only the demo's provider offers a message log.",
        );
    }
    if let Err(other) = user
        .rights
        .check(&state.catalogue, consumer, idem_domain::Role::Viewer)
    {
        return crate::refusal::refusal(StatusCode::FORBIDDEN, "Not allowed", &other.to_string());
    }
    let now = chrono::Utc::now();
    let claims = match state
        .store
        .reconcile()
        .claims_delivered_between(consumer, Ts::from(now - SPAN), Ts::from(now), MAX_MESSAGES)
        .await
    {
        Ok(claims) => claims,
        Err(err) => {
            let shown = idem_app::error::AppError::from(err);
            return crate::refusal::refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "Not now",
                &shown.to_string(),
            );
        }
    };
    let mut log = String::from("message_id,idempotency_key,event,timestamp\n");
    for claim in claims.iter().rev() {
        let key = claim.key.as_str();
        if key.contains(['\n', '\r']) {
            continue;
        }
        let reference = || format!("msg_{:012x}", fnv(key) & 0xffff_ffff_ffff);
        let (reference, event, at) = match claim.status {
            ClaimStatus::Sent => (
                claim.provider_ref.clone().unwrap_or_else(reference),
                "dispatched",
                claim.outcome_at.unwrap_or(claim.status_at),
            ),
            ClaimStatus::Failed => (reference(), "soft_bounce", claim.status_at),
            ClaimStatus::Unknown if fnv(key) % 10 < 7 => (
                reference(),
                "delivered",
                claim.status_at - chrono::TimeDelta::seconds(1),
            ),
            ClaimStatus::Unknown | ClaimStatus::Pending => continue,
        };
        log.push_str(&format!(
            "{},{},{event},{}\n",
            cell(&reference),
            cell(key),
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        ));
    }
    let mut response = log.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"email-provider-messages.csv\""),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A CSV field, quoted where it holds a comma, a quote or edge spaces.
fn cell(text: &str) -> String {
    if text.contains([',', '"']) || text.starts_with(' ') || text.ends_with(' ') {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
