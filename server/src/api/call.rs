//! Runs one of the pages' server functions for an API request: the same
//! function, with the token's person, client address and the state in its
//! context, as `leptos_axum` provides them to a page's call. The API is
//! another face of the pages, not a second implementation of them.

use axum::{
    http::{HeaderValue, header, request::Parts},
    response::{IntoResponse, Response},
};
use idem_app::{error::AppError, serving::AppState};
use leptos::{
    prelude::provide_context,
    reactive::{computed::ScopedFuture, owner::Owner},
};
use serde::Serialize;

use super::problem::Problem;

/// `body` (a server function's future) run in a request context built from
/// `parts`, which carry the caller the token middleware put there.
pub async fn call<T>(
    state: &AppState,
    mut parts: Parts,
    body: impl Future<Output = Result<T, AppError>>,
) -> Result<T, AppError> {
    // The functions answer a browser's form post with a redirect; an API
    // call is never one.
    parts
        .headers
        .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let state = state.clone();
    Owner::new()
        .with(|| {
            ScopedFuture::new(async move {
                provide_context(parts);
                provide_context(leptos_axum::ResponseOptions::default());
                provide_context(state);
                body.await
            })
        })
        .await
}

/// A result as the API answers it: 200 with JSON, or the problem.
pub fn answer<T: Serialize>(result: Result<T, AppError>) -> Response {
    match result {
        Ok(value) => axum::Json(value).into_response(),
        Err(err) => Problem::from(&err).answer(),
    }
}
