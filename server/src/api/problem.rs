//! The API's errors: `application/problem+json` (RFC 9457), worded as the
//! pages word them (an [`AppError`]'s text), never an internal cause.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use idem_app::error::AppError;
use serde::Serialize;

/// The media type of every error the API answers.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One problem. `type` names its kind under `/api/v1/problems/`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Problem {
    /// What kind of problem: `/api/v1/problems/not-found`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The kind in a few words, as a page's heading says it.
    pub title: String,
    pub status: u16,
    /// What went wrong with this request, in the pages' words.
    pub detail: String,
}

impl Problem {
    pub fn new(status: StatusCode, slug: &str, title: &str, detail: impl Into<String>) -> Self {
        Problem {
            kind: format!("/api/v1/problems/{slug}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
        }
    }

    /// A request the API cannot take as sent (a missing header, a body
    /// that is not the operation's JSON).
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Bad request",
            detail,
        )
    }

    /// The answer as JSON; a database that is down or busy says when to
    /// retry, and a missing token how to send one.
    pub fn answer(&self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(self).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(idem_app::serving::RETRY_AFTER_SECONDS),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"idem\""),
            );
        }
        response
    }
}

impl From<&AppError> for Problem {
    fn from(err: &AppError) -> Self {
        let slug = match err {
            AppError::NotFound(_) => "not-found",
            AppError::BadRequest(_) => "bad-request",
            AppError::Unauthorized => "unauthorized",
            AppError::Forbidden { .. } => "forbidden",
            AppError::OtherTeam(_) => "other-team",
            AppError::ReadOnly(_) => "read-only",
            AppError::FormReused(_) => "reused",
            AppError::Changed(_) => "changed",
            AppError::Unavailable => "unavailable",
            AppError::Busy => "busy",
            AppError::Internal { .. } => "internal",
            AppError::Transport(_) => "transport",
        };
        let status =
            StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Problem::new(status, slug, err.title(), err.to_string())
    }
}

impl From<idem_store::StoreError> for Problem {
    fn from(err: idem_store::StoreError) -> Self {
        Problem::from(&AppError::from(err))
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        self.answer()
    }
}
