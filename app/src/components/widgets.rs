use chrono::{DateTime, Utc};
use idem_domain::ClaimStatus;
use leptos::prelude::*;
use serde::{Serialize, de::DeserializeOwned};

use crate::{error::AppError, format::Clock, links};

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

/// The page's [`Clock`], provided by its body; UTC "now" if a page forgot.
fn clock() -> Clock {
    use_context::<Clock>().unwrap_or_else(|| Clock::utc(now()))
}

/// Now, on the server.
#[cfg(feature = "ssr")]
fn now() -> chrono::DateTime<Utc> {
    Utc::now()
}

/// The browser build has no clock for widgets: they render on the server
/// only (an island takes what it shows as props, its clock included), and
/// chrono's clock is not built for WASM.
#[cfg(not(feature = "ssr"))]
fn now() -> chrono::DateTime<Utc> {
    unreachable!("a time widget runs on the server; an island takes its clock as a prop")
}

/// Makes `clock` the one this page's times and ages use.
pub fn provide_clock(clock: Clock) {
    provide_context(clock);
}

/// An absolute time in the viewer's zone (named), with the UTC instant for machines.
#[component]
pub fn Time(at: DateTime<Utc>) -> impl IntoView {
    view! { <time datetime=at.to_rfc3339()>{clock().time(at)}</time> }
}

/// How long before the data was read `at` was, with the time on hover.
#[component]
pub fn Age(at: DateTime<Utc>) -> impl IntoView {
    let clock = clock();
    view! {
        <time class="age" datetime=at.to_rfc3339() title=clock.time(at)>
            {clock.age(at)}
        </time>
    }
}

/// What went wrong, in words for the person who asked.
/// A missing key offers a search box pre-filled with what was asked for.
#[component]
pub fn ErrorPanel(
    error: AppError,
    #[prop(default = None)] search: Option<String>,
) -> impl IntoView {
    let hint = match (&error, search) {
        (AppError::NotFound(_), Some(query)) => Some(
            view! {
                <form class="search-form" method="get" action="/keys" role="search">
                    <label for="not-found-q">"Search keys starting with"</label>
                    <input id="not-found-q" type="search" name="q" value=query maxlength="512" autocomplete="off" spellcheck="false"/>
                    <button type="submit">"Search"</button>
                </form>
            }
            .into_any(),
        ),
        (AppError::NotFound(_) | AppError::BadRequest(_), _) => {
            Some(view! { <p>"Check the link, or look the key up with the search box above."</p> }.into_any())
        }
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
    /// For a page about a key: what a "not found" offers to search for.
    #[prop(default = None)]
    search: Option<String>,
) -> impl IntoView
where
    T: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
    V: IntoView + 'static,
{
    view! {
        <Transition fallback=|| view! { <p class="loading">"Loading…"</p> }>
            {move || {
                let (render, search) = (render.clone(), search.clone());
                Suspend::new(async move {
                    match resource.await {
                        Ok(value) => render(value).into_any(),
                        Err(error) => view! { <ErrorPanel error search/> }.into_any(),
                    }
                })
            }}
        </Transition>
    }
}

/// A server-drawn chart, its summary in words, and a link to the keys
/// behind it where there is one.
#[component]
pub fn ChartFigure(chart: crate::api::Chart) -> impl IntoView {
    let link = chart.link.map(|link| {
        view! { <a class="chart-link" href=link.href rel="external">{link.text}" →"</a> }
    });
    let label = chart.title.clone();
    view! {
        <figure class="chart" id=chart.id>
            <h3>{chart.title}</h3>
            // A box that may scroll sideways on a phone: reachable and
            // scrollable from the keyboard too.
            {chart.svg.map(|svg| view! {
                <div class="chart-svg" role="region" tabindex="0" aria-label=label inner_html=svg></div>
            })}
            <figcaption>{chart.summary} " " {link}</figcaption>
        </figure>
    }
}

/// Said on a page read from the read replica: it may not show an action
/// someone took a moment ago (the author's own pages read the primary).
pub fn replica_note(from_replica: bool) -> impl IntoView {
    from_replica.then(|| {
        view! {
            <p class="replica-note" role="note">
                "Read from a read replica, which can lag behind the primary by a few seconds: "
                "an action someone took a moment ago may not show here yet. Your own actions show at once."
            </p>
        }
    })
}

/// The team picker of a filter form: "every team", then each of `teams`,
/// `chosen` selected.
#[component]
pub fn TeamSelect(teams: Vec<String>, chosen: Option<String>) -> impl IntoView {
    let chosen = chosen.unwrap_or_default();
    let options = teams
        .into_iter()
        .map(|t| {
            let selected = t == chosen;
            let label = t.clone();
            view! { <option value=t selected=selected>{label}</option> }
        })
        .collect_view();
    view! {
        <label>"Team "
            <select name="team">
                <option value="">"every team"</option>
                {options}
            </select>
        </label>
    }
}
