use chrono::{DateTime, Utc};
use idem_domain::ClaimStatus;
use leptos::prelude::*;
use serde::{Serialize, de::DeserializeOwned};

use crate::{error::AppError, format, links};

/// The claim status in its colour, with its meaning for screen readers and on hover.
#[component]
pub fn StatusBadge(status: ClaimStatus) -> impl IntoView {
    view! {
        <span class=format!("badge status-{}", status.as_str()) title=status.meaning()>
            {status.as_str()}
        </span>
    }
}

/// A key, linking to its page. The key is isolated from the text around it
/// (`<bdi>`), so right-to-left characters inside it cannot reorder what
/// surrounds it.
#[component]
pub fn KeyLink(#[prop(into)] consumer: String, #[prop(into)] key: String) -> impl IntoView {
    let href = links::key_href(&consumer, &key);
    view! {
        <a class="key" href=href rel="external">
            <bdi>{key}</bdi>
        </a>
    }
}

/// An absolute time in UTC, with the full timestamp for machines.
#[component]
pub fn Time(at: DateTime<Utc>) -> impl IntoView {
    view! { <time datetime=at.to_rfc3339()>{format::utc(at)}</time> }
}

/// How long ago `at` was, as of when the data was read.
#[component]
pub fn Age(as_of: DateTime<Utc>, at: DateTime<Utc>) -> impl IntoView {
    view! {
        <time class="age" datetime=at.to_rfc3339() title=format::utc(at)>
            {format::age(as_of, at)}
        </time>
    }
}

/// What went wrong, in words for the person who asked.
#[component]
pub fn ErrorPanel(error: AppError) -> impl IntoView {
    let hint = match &error {
        AppError::NotFound(_) | AppError::BadRequest(_) => Some(view! {
            <p>"Check the link, or look the key up with the search box above."</p>
        }),
        _ => None,
    };
    view! {
        <section class="error-panel" role="alert">
            <h2>{error.title()}</h2>
            <p>{error.to_string()}</p>
            {hint}
        </section>
    }
}

/// Renders a server function's result once it has loaded: the page on
/// success, an [`ErrorPanel`] on failure.
#[component]
pub fn Loaded<T, V>(
    resource: Resource<Result<T, AppError>>,
    render: impl Fn(T) -> V + Clone + Send + Sync + 'static,
) -> impl IntoView
where
    T: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
    V: IntoView + 'static,
{
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || {
                let render = render.clone();
                Suspend::new(async move {
                    match resource.await {
                        Ok(value) => render(value).into_any(),
                        Err(error) => view! { <ErrorPanel error/> }.into_any(),
                    }
                })
            }}
        </Suspense>
    }
}
