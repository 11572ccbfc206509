use idem_domain::{DeadLetter, DeadLetterState};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::lists::{Pager, WindowNote, use_cursor, use_window};
use idem_domain::action::Verdict;

use crate::{
    api::{DeadLetterDetail, ListPage, get_dead_letter, list_dead_letters},
    components::actions::{ActionAnswer, ActionIds, DiscardForm, ReplayForm},
    components::{Age, KeyLink, LiveRefresh, Loaded, StatusBadge, Time, provide_clock},
    links,
};

/// `/dead-letters?state=open|replayed|discarded`, oldest first.
#[component]
pub fn DeadLettersPage() -> impl IntoView {
    let location = use_location();
    let state = Memo::new(move |_| {
        links::query_param(&location.search.get(), "state").filter(|s| !s.is_empty())
    });
    let cursor = use_cursor();
    let window = use_window();
    let data = Resource::new(
        move || (state.get(), cursor.get(), window.get()),
        |(state, cursor, w)| list_dead_letters(state, cursor, w.from, w.to, w.consumer),
    );
    let tabs = move || {
        let current = state.get().unwrap_or_else(|| "open".into());
        let keep = window.get().keep();
        DeadLetterState::ALL
            .iter()
            .map(|s| {
                let mut pairs: Vec<(&str, &str)> =
                    keep.iter().map(|(k, v)| (*k, v.as_str())).collect();
                if *s != DeadLetterState::Open {
                    pairs.insert(0, ("state", s.as_str()));
                }
                let href = links::with_query("/dead-letters", &pairs);
                view! { <a href=href rel="external" aria-current=(current == s.as_str()).then_some("page")>{s.as_str()}</a> }
            })
            .collect_view()
    };
    let render = move |p: ListPage<DeadLetter>| {
        let on_first_page = cursor.get_untracked().is_none();
        let window = window.get_untracked();
        let by_state: Vec<(&'static str, String)> = state
            .get_untracked()
            .map(|s| vec![("state", s)])
            .unwrap_or_default();
        let mut keep = by_state.clone();
        keep.extend(window.keep());
        provide_clock(p.clock);
        let rows = p
            .page
            .items
            .into_iter()
            .map(|d| {
                view! {
                    <tr>
                        <td><a href=format!("/dead-letters/{}", d.id)>"#"{d.id}</a></td>
                        <td><KeyLink consumer=d.consumer.clone() key=d.key/></td>
                        <td>{d.consumer}</td>
                        <td><Time at=d.dead_lettered_at/></td>
                        <td class="num"><Age at=d.dead_lettered_at/></td>
                        <td class="num">{d.delivery_count}</td>
                        <td class="error-text">{d.last_error}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <p class="count-line">{format!("{} dead letters", p.total)}</p>
            <WindowNote window path="/dead-letters" keep=by_state/>
            <table>
                <thead><tr><th>"Letter"</th><th>"Key"</th><th>"Consumer"</th><th>"Dead-lettered"</th><th class="num">"Dead for"</th><th class="num">"Deliveries"</th><th>"Last error"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <Pager path="/dead-letters" next=p.page.next on_first_page keep/>
        }
    };
    view! {
        <Title text="Dead letters"/>
        <div class="page-head">
            <h1>"Dead letters"</h1>
            <LiveRefresh on_tick=Callback::new(move |()| data.refetch())/>
        </div>
        <nav class="tabs" aria-label="State">{tabs}</nav>
        <Loaded resource=data render/>
    }
}

/// `/dead-letters/{id}`
#[component]
pub fn DeadLetterPage() -> impl IntoView {
    let location = use_location();
    let data = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            let id = links::raw_segments(&path, "/dead-letters/")
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default();
            get_dead_letter(id).await
        },
    );
    ActionIds::provide();
    let reload = Callback::new(move |()| data.refetch());
    view! {
        <Title text="Dead letter"/>
        <ActionAnswer/>
        <Loaded resource=data render={move |d: DeadLetterDetail| {
            provide_clock(d.clock);
            let dl = d.dead_letter;
            let read_only = (dl.state == DeadLetterState::Open)
                .then_some(d.read_only.clone())
                .flatten()
                .map(|reason| view! { <p class="notice read-only">{reason}</p> });
            let actions = (d.can_act && d.read_only.is_none() && dl.state == DeadLetterState::Open).then(|| {
                let discard = (d.verdict == Verdict::AlreadySent).then(|| view! {
                    <DiscardForm dead_letter_id=dl.id action_id=d.action_id.clone() reload/>
                });
                view! {
                    <ReplayForm dead_letter=dl.clone() verdict=d.verdict.clone() action_id=d.action_id.clone() reload/>
                    {discard}
                }
            });
            let closed = dl.resolved_by.clone().map(|by| view! {
                <p class="notice">
                    {format!("{} by {by}", dl.state)}
                    {dl.resolved_at.map(|at| view! { " at " <Time at/> })}
                    "."
                </p>
            });
            let claim = match d.claim {
                Some(c) => view! {
                    <p>"The key's claim is " <StatusBadge status=c.status/> " — " {c.status.meaning()} "."</p>
                }.into_any(),
                None => view! {
                    <p class="notice">"The consumer has no claim for this key: it may not deduplicate a replay."</p>
                }.into_any(),
            };
            view! {
                <h1>"Dead letter #" {dl.id}</h1>
                {crate::components::replica_note(d.from_replica)}
                <dl class="fields">
                    <dt>"Key"</dt><dd><KeyLink consumer=dl.consumer.clone() key=dl.key.clone()/></dd>
                    <dt>"Consumer"</dt><dd>{dl.consumer.clone()}</dd>
                    <dt>"Queue"</dt><dd>{dl.queue}</dd>
                    <dt>"Message id"</dt><dd><code>{dl.message_id}</code></dd>
                    <dt>"State"</dt><dd>{dl.state.as_str()}</dd>
                    <dt>"Deliveries"</dt><dd>{dl.delivery_count}</dd>
                    <dt>"First failure"</dt><dd><Time at=dl.first_failure_at/></dd>
                    <dt>"Dead-lettered"</dt><dd><Time at=dl.dead_lettered_at/> " (" <Age at=dl.dead_lettered_at/> " ago)"</dd>
                    <dt>"Last error"</dt><dd class="error-text">{dl.last_error}</dd>
                </dl>
                {claim}
                {closed}
                {read_only}
                {actions}
                <h2>"Payload"</h2>
                <pre class="payload">{dl.payload}</pre>
            }
        }}/>
    }
}
