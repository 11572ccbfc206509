//! The one error type server functions return, and what a person sees of it.
//!
//! Which type to use where: storage code returns `idem_store::StoreError`;
//! server functions convert it into [`AppError`] with `?` (which logs the
//! cause once, with a correlation id, and keeps it off the page); components
//! render an [`AppError`] with `ErrorPanel`. Nothing else crosses the wire.

use leptos::server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    /// The thing asked for does not exist. The text says what was looked for.
    #[error("{0}")]
    NotFound(String),
    /// The request itself is wrong (a malformed key, cursor or filter). The
    /// text says what was wrong, for the person who typed or pasted it.
    #[error("{0}")]
    BadRequest(String),
    /// Nobody is signed in.
    #[error("Sign in to see this.")]
    Unauthorized,
    /// The signed-in person's role does not allow this.
    #[error("Your role ({role}) may not do this; it needs {needed}.")]
    Forbidden { role: String, needed: String },
    /// The signed-in person's rights are limited to teams, and the consumer
    /// belongs to another (or to none). The text names its team.
    #[error("{0}")]
    OtherTeam(String),
    /// The action cannot be taken on this target at all (a consumer Idem
    /// reads through an adapter). The text says why and where to act instead.
    #[error("{0}")]
    ReadOnly(String),
    /// A form's action id was already used for something else (another
    /// target, another action, another person): nothing was done. The text
    /// says what the id did.
    #[error(
        "This form was already used for another action ({0}); nothing was done. Reload the page and try again."
    )]
    FormReused(String),
    /// What the form acted on changed after its page was drawn (a redrive
    /// of a list that grew): nothing was done. The text says what it is now.
    #[error("{0}")]
    Changed(String),
    /// The database cannot be reached right now.
    #[error("The database is unavailable right now; try again in a few seconds.")]
    Unavailable,
    /// The database is up but did not answer in time (every connection
    /// busy, a statement over its time limit): not an outage.
    #[error("Idem is busy: its database did not answer in time. Try again in a moment.")]
    Busy,
    /// A failure on the server. Its cause is in the server log under this id.
    #[error("Something went wrong on the server. Reference: {correlation_id}")]
    Internal { correlation_id: String },
    /// The browser could not reach the server or read its answer.
    #[error("The server could not be reached: {0}")]
    Transport(String),
}

impl AppError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            AppError::NotFound(_) => 404,
            AppError::BadRequest(_) => 400,
            AppError::Unauthorized => 401,
            AppError::Forbidden { .. } | AppError::OtherTeam(_) => 403,
            AppError::ReadOnly(_) | AppError::FormReused(_) | AppError::Changed(_) => 409,
            AppError::Unavailable | AppError::Busy => 503,
            AppError::Internal { .. } => 500,
            AppError::Transport(_) => 502,
        }
    }

    /// A short title for an error page.
    pub fn title(&self) -> &'static str {
        match self {
            AppError::NotFound(_) => "Not found",
            AppError::BadRequest(_) => "Bad request",
            AppError::Unauthorized => "Sign in",
            AppError::Forbidden { .. } => "Not allowed",
            AppError::OtherTeam(_) => "Another team's consumer",
            AppError::ReadOnly(_) => "Not possible here",
            AppError::FormReused(_) => "Form already used",
            AppError::Changed(_) => "Changed since you looked",
            AppError::Unavailable => "Database unavailable",
            AppError::Busy => "Idem is busy",
            AppError::Internal { .. } => "Server error",
            AppError::Transport(_) => "Server unreachable",
        }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            // Malformed arguments: the request was wrong, not the server.
            ServerFnErrorErr::Args(detail) | ServerFnErrorErr::MissingArg(detail) => {
                AppError::BadRequest(format!("Invalid request: {detail}"))
            }
            ServerFnErrorErr::Request(detail)
            | ServerFnErrorErr::Response(detail)
            | ServerFnErrorErr::Deserialization(detail)
            | ServerFnErrorErr::Serialization(detail) => AppError::Transport(detail),
            other => internal(&other),
        }
    }
}

impl From<idem_domain::action::TextError> for AppError {
    fn from(err: idem_domain::action::TextError) -> Self {
        AppError::BadRequest(err.to_string())
    }
}

impl From<idem_domain::BadId> for AppError {
    fn from(err: idem_domain::BadId) -> Self {
        AppError::BadRequest(err.to_string())
    }
}

impl From<idem_domain::KeyError> for AppError {
    fn from(err: idem_domain::KeyError) -> Self {
        AppError::BadRequest(capitalize(&err.to_string()))
    }
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Logs `err` with a fresh correlation id (server) and returns the error the
/// person sees, which carries only that id.
#[cfg(feature = "ssr")]
pub fn internal(err: &(dyn std::error::Error + 'static)) -> AppError {
    let correlation_id = correlation_id();
    tracing::error!(%correlation_id, error = %cause_chain(err), "request failed");
    AppError::Internal { correlation_id }
}

#[cfg(not(feature = "ssr"))]
pub fn internal(err: &(dyn std::error::Error + 'static)) -> AppError {
    AppError::Transport(err.to_string())
}

#[cfg(feature = "ssr")]
impl From<idem_store::StoreError> for AppError {
    fn from(err: idem_store::StoreError) -> Self {
        use idem_store::StoreError;
        match err {
            StoreError::BadCursor => AppError::BadRequest(
                "That page link is invalid or out of date; start again from the first page.".into(),
            ),
            StoreError::Unavailable(ref cause) => {
                tracing::warn!(error = %cause, "database unavailable");
                AppError::Unavailable
            }
            other => internal(&other),
        }
    }
}

/// A short random id that ties an error page to its log line.
#[cfg(feature = "ssr")]
pub fn correlation_id() -> String {
    hex::encode(rand::random::<[u8; 6]>())
}

/// `error: cause: cause`, for one log line.
#[cfg(feature = "ssr")]
pub fn cause_chain(err: &(dyn std::error::Error + 'static)) -> String {
    use std::fmt::Write as _;
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}
