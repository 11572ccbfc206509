use idem_domain::{Claim, OutboxRow};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{ListPage, list_outbox, list_unknown},
    components::{Age, KeyLink, Loaded, Time},
    links,
};

/// "Next page" (and "first page" when not on it) for a keyset-paginated list.
#[component]
pub fn Pager(
    path: &'static str,
    #[prop(into)] next: Option<String>,
    on_first_page: bool,
    #[prop(default = &[])] keep: &'static [(&'static str, &'static str)],
) -> impl IntoView {
    let first = (!on_first_page)
        .then(|| view! { <a href=links::with_query(path, keep) rel="external">"First page"</a> });
    let next = next.map(|cursor| {
        let mut pairs: Vec<(&str, &str)> = keep.to_vec();
        pairs.push(("cursor", &cursor));
        view! { <a href=links::with_query(path, &pairs) rel="external">"Next page →"</a> }
    });
    view! { <nav class="pager" aria-label="Pages">{first} {next}</nav> }
}

/// The raw `cursor` query parameter of the current location.
pub fn use_cursor() -> Memo<Option<String>> {
    let location = use_location();
    Memo::new(move |_| {
        links::query_param(&location.search.get(), "cursor").filter(|c| !c.is_empty())
    })
}

/// `/unknown`: claims whose outcome is unknown, oldest first.
#[component]
pub fn UnknownPage() -> impl IntoView {
    let cursor = use_cursor();
    let data = Resource::new(move || cursor.get(), list_unknown);
    view! {
        <Title text="Unknown outcomes"/>
        <h1>"Unknown outcomes"</h1>
        <p class="lede">
            "The provider may or may not have acted on these keys. Each one needs a person to find out "
            "(with the provider reference) and resolve it. Oldest first."
        </p>
        <Loaded resource=data render={move |p: ListPage<Claim>| {
            let on_first_page = cursor.get_untracked().is_none();
            let as_of = p.as_of;
            let rows = p.page.items.into_iter().map(|c| view! {
                <tr>
                    <td><KeyLink consumer=c.consumer.clone() key=c.key/></td>
                    <td>{c.consumer}</td>
                    <td><Time at=c.status_at/></td>
                    <td class="num"><Age as_of at=c.status_at/></td>
                    <td class="num">{c.attempts}</td>
                    <td class="error-text">{c.last_error}</td>
                </tr>
            }).collect_view();
            view! {
                <p class="count-line">{format!("{} unknown", p.total)}</p>
                <table>
                    <thead><tr><th>"Key"</th><th>"Consumer"</th><th>"Unknown since"</th><th class="num">"For"</th><th class="num">"Attempts"</th><th>"Last error"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
                <Pager path="/unknown" next=p.page.next on_first_page/>
            }
        }}/>
    }
}

/// `/outbox`: unpublished outbox rows, oldest first.
#[component]
pub fn OutboxPage() -> impl IntoView {
    let cursor = use_cursor();
    let data = Resource::new(move || cursor.get(), list_outbox);
    view! {
        <Title text="Outbox"/>
        <h1>"Outbox backlog"</h1>
        <p class="lede">"Rows written by consumers (and by replays) that the relay has not published yet. Oldest first."</p>
        <Loaded resource=data render={move |p: ListPage<OutboxRow>| {
            let on_first_page = cursor.get_untracked().is_none();
            let as_of = p.as_of;
            let rows = p.page.items.into_iter().map(|r| view! {
                <tr>
                    <td><KeyLink consumer=r.consumer.clone() key=r.key/></td>
                    <td>{r.consumer}</td>
                    <td>{r.topic}</td>
                    <td>{r.origin.as_str()}</td>
                    <td class="num"><Age as_of at=r.created_at/></td>
                    <td class="num">{r.attempts}</td>
                    <td class="error-text">{r.last_error}</td>
                </tr>
            }).collect_view();
            view! {
                <p class="count-line">{format!("{} waiting", p.total)}</p>
                <table>
                    <thead><tr><th>"Key"</th><th>"Consumer"</th><th>"Topic"</th><th>"Origin"</th><th class="num">"Waiting"</th><th class="num">"Attempts"</th><th>"Last error"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
                <Pager path="/outbox" next=p.page.next on_first_page/>
            }
        }}/>
    }
}
