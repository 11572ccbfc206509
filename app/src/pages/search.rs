use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{SearchResults, search_keys},
    components::{KeyLink, Loaded, StatusBadge, Time},
    links,
};

/// `/keys?q=`: exact and prefix search over keys.
#[component]
pub fn SearchPage() -> impl IntoView {
    let location = use_location();
    let query =
        Memo::new(move |_| links::query_param(&location.search.get(), "q").unwrap_or_default());
    let results = Resource::new(
        move || query.get(),
        |q| async move {
            if q.is_empty() {
                Ok(None)
            } else {
                search_keys(q).await.map(Some)
            }
        },
    );
    view! {
        <Title text="Keys"/>
        <h1>"Keys"</h1>
        <form class="search-form" method="get" action="/keys" role="search">
            <label for="keys-q">"Key or key prefix"</label>
            <input id="keys-q" type="search" name="q" value=move || query.get() maxlength="512" autocomplete="off" spellcheck="false"/>
            <button type="submit">"Search"</button>
        </form>
        <Loaded resource=results render={|r: Option<SearchResults>| match r {
            None => view! { <p class="lede">"Type a whole key, or the start of one (matched literally, case-sensitive)."</p> }.into_any(),
            Some(r) if r.claims.is_empty() => view! {
                <p class="empty">"No key starts with “" <bdi>{r.query}</bdi> "”."</p>
            }.into_any(),
            Some(r) => {
                let truncated = r.truncated.then(|| view! { <p class="notice">"More keys match; type more of the key to narrow the list."</p> });
                let rows = r.claims.into_iter().map(|c| view! {
                    <tr>
                        <td><KeyLink consumer=c.consumer.clone() key=c.key/></td>
                        <td>{c.consumer}</td>
                        <td><StatusBadge status=c.status/></td>
                        <td><Time at=c.last_delivery_at/></td>
                    </tr>
                }).collect_view();
                view! {
                    <table>
                        <thead><tr><th>"Key"</th><th>"Consumer"</th><th>"Status"</th><th>"Last delivery"</th></tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                    {truncated}
                }.into_any()
            }
        }}/>
    }
}
