use idem_domain::OutboxRow;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{ListPage, UnknownList, list_outbox, list_unknown},
    components::{Age, KeyLink, LiveRefresh, Loaded, Time, provide_clock},
    format::duration,
    links,
};

/// "Next page" (and "First page" when not on it) for a keyset-paginated
/// list. `keep` are the filters every page link carries.
#[component]
pub fn Pager(
    #[prop(into)] path: String,
    next: Option<String>,
    on_first_page: bool,
    #[prop(optional)] keep: Vec<(&'static str, String)>,
) -> impl IntoView {
    let pairs = |cursor: Option<&str>| {
        let mut pairs: Vec<(&str, &str)> = keep.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor));
        }
        links::with_query(&path, &pairs)
    };
    let first =
        (!on_first_page).then(|| view! { <a href=pairs(None) rel="external">"First page"</a> });
    let next =
        next.map(|cursor| view! { <a href=pairs(Some(&cursor)) rel="external">"Next page →"</a> });
    view! { <nav class="pager" aria-label="Pages">{first} {next}</nav> }
}

/// Links to this whole list (every page, as filtered by `keep`) as CSV and
/// as JSON: `/exports/{list}.csv`, read with the person's own rights.
#[component]
pub fn ExportLinks(list: &'static str, keep: Vec<(&'static str, String)>) -> impl IntoView {
    let href = |ext: &str| {
        let pairs: Vec<(&str, &str)> = keep.iter().map(|(k, v)| (*k, v.as_str())).collect();
        links::with_query(&format!("/exports/{list}.{ext}"), &pairs)
    };
    view! {
        <p class="exports">
            "Export this list, every page of it (up to 100,000 rows): "
            <a href=href("csv") rel="external" download="">"CSV"</a>
            " · "
            <a href=href("json") rel="external" download="">"JSON"</a>
        </p>
    }
}

/// The raw `cursor` query parameter of the current location.
pub fn use_cursor() -> Memo<Option<String>> {
    let location = use_location();
    Memo::new(move |_| {
        links::query_param(&location.search.get(), "cursor").filter(|c| !c.is_empty())
    })
}

/// The part of a list the address asks for: `from`, `to` and `consumer`
/// (charts link to their keys this way), raw as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListWindow {
    pub from: Option<String>,
    pub to: Option<String>,
    pub consumer: Option<String>,
}

impl ListWindow {
    /// The query pairs that keep this window on the next page.
    pub fn keep(&self) -> Vec<(&'static str, String)> {
        [
            ("from", &self.from),
            ("to", &self.to),
            ("consumer", &self.consumer),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.clone().map(|v| (name, v)))
        .collect()
    }
}

pub fn use_window() -> Memo<ListWindow> {
    let location = use_location();
    Memo::new(move |_| {
        let search = location.search.get();
        let param = |name| links::query_param(&search, name).filter(|v| !v.is_empty());
        ListWindow {
            from: param("from"),
            to: param("to"),
            consumer: param("consumer"),
        }
    })
}

/// "Only those from … to … for …", with a way back to the whole list.
#[component]
pub fn WindowNote(
    window: ListWindow,
    path: &'static str,
    keep: Vec<(&'static str, String)>,
) -> impl IntoView {
    if window == ListWindow::default() {
        return None;
    }
    let mut only = String::from("Only those");
    if let Some(from) = &window.from {
        only += &format!(" from {from}");
    }
    if let Some(to) = &window.to {
        only += &format!(" until {to}");
    }
    if let Some(consumer) = &window.consumer {
        only += &format!(" for consumer {consumer}");
    }
    let pairs: Vec<(&str, &str)> = keep.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let all = links::with_query(path, &pairs);
    Some(view! {
        <p class="window-note">{only} ". " <a href=all rel="external">"Show all"</a></p>
    })
}

/// `/unknown`: claims whose outcome is unknown, oldest first, with their age
/// against the resolution objective.
#[component]
pub fn UnknownPage() -> impl IntoView {
    let cursor = use_cursor();
    let window = use_window();
    let data = Resource::new(
        move || (cursor.get(), window.get()),
        |(cursor, w)| list_unknown(cursor, w.from, w.to, w.consumer),
    );
    let render = move |unknown: UnknownList| {
        let (p, objective_seconds) = (unknown.list, unknown.objective_seconds);
        let on_first_page = cursor.get_untracked().is_none();
        let window = window.get_untracked();
        let as_of = p.clock.as_of;
        provide_clock(p.clock);
        let rows = p
            .page
            .items
            .into_iter()
            .map(|c| {
                let breached = (as_of - c.status_at).num_seconds() as f64 > objective_seconds;
                let resolve = format!("{}#resolve", links::key_href(&c.consumer, &c.key));
                view! {
                    <tr class:breach=breached>
                        <td><KeyLink consumer=c.consumer.clone() key=c.key/></td>
                        <td>{c.consumer}</td>
                        <td><Time at=c.status_at/></td>
                        <td class="num">
                            <Age at=c.status_at/>
                            {breached.then_some(" ⚠")}
                            <span class="visually-hidden">{if breached { " (past the objective)" } else { "" }}</span>
                        </td>
                        <td class="num">{c.attempts}</td>
                        <td class="error-text">{c.last_error}</td>
                        <td><a href=resolve rel="external">"Resolve"</a></td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <p class="count-line">
                {format!("{} unknown", p.total)}
                " · objective: resolved within "
                {duration(objective_seconds.round() as i64)}
                "; older ones are marked ⚠"
            </p>
            <WindowNote window=window.clone() path="/unknown" keep=Vec::new()/>
            <table>
                <thead><tr><th>"Key"</th><th>"Consumer"</th><th>"Unknown since"</th><th class="num">"For"</th><th class="num">"Attempts"</th><th>"Last error"</th><th><span class="visually-hidden">"Action"</span></th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <Pager path="/unknown" next=p.page.next on_first_page keep=window.keep()/>
            <ExportLinks list="unknown" keep=window.keep()/>
        }
    };
    view! {
        <Title text="Unknown outcomes"/>
        <div class="page-head">
            <h1>"Unknown outcomes"</h1>
            <LiveRefresh/>
        </div>
        <p class="lede">
            "The provider may or may not have acted on these keys. Each one needs a person to find out "
            "(with the provider reference) and resolve it. Oldest first."
        </p>
        <Loaded resource=data render/>
    }
}

/// `/outbox?consumer=&topic=`: unpublished outbox rows, oldest first, with
/// how long the oldest has waited (the relay's publish lag).
#[component]
pub fn OutboxPage() -> impl IntoView {
    let cursor = use_cursor();
    let location = use_location();
    let filter = Memo::new(move |_| {
        let search = location.search.get();
        let param = |name| links::query_param(&search, name).filter(|v| !v.is_empty());
        (param("consumer"), param("topic"))
    });
    let data = Resource::new(
        move || (cursor.get(), filter.get()),
        |(cursor, (consumer, topic))| list_outbox(cursor, consumer, topic),
    );
    let render = move |p: ListPage<OutboxRow>| {
        let on_first_page = cursor.get_untracked().is_none();
        let (consumer, topic) = filter.get_untracked();
        let keep: Vec<(&'static str, String)> = [("consumer", consumer), ("topic", topic)]
            .into_iter()
            .filter_map(|(name, value)| value.map(|v| (name, v)))
            .collect();
        // The oldest row waiting is the first of the first page.
        let lag = on_first_page
            .then(|| p.page.items.first().map(|r| r.created_at))
            .flatten()
            .map(|at| view! { " · publish lag: the oldest has waited " <Age at/> });
        provide_clock(p.clock);
        let rows = p
            .page
            .items
            .into_iter()
            .map(|r| {
                view! {
                    <tr>
                        <td><KeyLink consumer=r.consumer.clone() key=r.key/></td>
                        <td>{r.consumer}</td>
                        <td>{r.topic}</td>
                        <td>{r.origin.as_str()}</td>
                        <td><Time at=r.created_at/></td>
                        <td class="num"><Age at=r.created_at/></td>
                        <td class="num">{r.attempts}</td>
                        <td class="error-text">{r.last_error}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <p class="count-line">{format!("{} waiting", p.total)} {lag}</p>
            <table>
                <thead><tr><th>"Key"</th><th>"Consumer"</th><th>"Topic"</th><th>"Origin"</th><th>"Written"</th><th class="num">"Waiting"</th><th class="num">"Attempts"</th><th>"Last error"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <ExportLinks list="outbox" keep=keep.clone()/>
            <Pager path="/outbox" next=p.page.next on_first_page keep/>
        }
    };
    let (consumer, topic) = filter.get_untracked();
    view! {
        <Title text="Outbox"/>
        <div class="page-head">
            <h1>"Outbox backlog"</h1>
            <LiveRefresh/>
        </div>
        <p class="lede">"Rows written by consumers (and by replays) that the relay has not published yet. Oldest first."</p>
        <form class="search-form filters" method="get" action="/outbox">
            <label>
                "Consumer "
                <input type="text" name="consumer" value=consumer.unwrap_or_default() maxlength="128" autocomplete="off" spellcheck="false"/>
            </label>
            <label>
                "Topic "
                <input type="text" name="topic" value=topic.unwrap_or_default() maxlength="256" autocomplete="off" spellcheck="false"/>
            </label>
            <button type="submit">"Filter"</button>
        </form>
        <Loaded resource=data render/>
    }
}
