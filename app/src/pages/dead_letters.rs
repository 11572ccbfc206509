use idem_domain::{DeadLetter, DeadLetterState};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::lists::{ExportLinks, Pager, WindowNote, use_cursor, use_window};
use idem_domain::action::Verdict;

use crate::{
    api::{DeadLetterDetail, DeadLetterList, get_dead_letter, list_dead_letters},
    components::actions::{ActionAnswer, DiscardForm, ReplayForm},
    components::{Age, KeyLink, LiveRefresh, Loaded, StatusBadge, Time, provide_clock},
    links,
};

/// `/dead-letters?state=open|replayed|discarded`, oldest first; filtered
/// by consumer, time span and a text of the last error, and — for open
/// ones, to an operator — the form that redrives what the filter shows.
#[component]
pub fn DeadLettersPage() -> impl IntoView {
    let location = use_location();
    let param = move |name: &'static str| {
        Memo::new(move |_| {
            links::query_param(&location.search.get(), name).filter(|s| !s.is_empty())
        })
    };
    let state = param("state");
    let error = param("error");
    let cursor = use_cursor();
    let window = use_window();
    let data = Resource::new(
        move || (state.get(), cursor.get(), window.get(), error.get()),
        |(state, cursor, w, error)| {
            list_dead_letters(state, cursor, w.from, w.to, w.consumer, error)
        },
    );
    // What every link of the page keeps: the filter.
    let filter_pairs = move || {
        let mut keep = window.get().keep();
        keep.extend(error.get().map(|e| ("error", e)));
        keep
    };
    let tabs = move || state_tabs(state.get(), filter_pairs());
    let render = move |list: DeadLetterList| {
        let p = list.list;
        let on_first_page = cursor.get_untracked().is_none();
        let window = window.get_untracked();
        let by_state: Vec<(&'static str, String)> = state
            .get_untracked()
            .map(|s| vec![("state", s)])
            .unwrap_or_default();
        let mut keep = by_state.clone();
        keep.extend(filter_pairs());
        let redrive = list
            .redrive
            .filter(|_| state.get_untracked().is_none())
            .map(|form| {
                view! {
                    <RedriveForm window=window.clone() error=error.get_untracked() form/>
                }
            });
        provide_clock(p.clock);
        let rows = p.page.items.into_iter().map(dead_letter_row).collect_view();
        view! {
            <p class="count-line">{crate::format::count_of(p.total, "dead letter", "dead letters")}</p>
            <WindowNote window path="/dead-letters" keep=by_state/>
            {error.get_untracked().map(|e| view! { <p class="window-note">"Only those whose last error contains “" {e} "”."</p> })}
            <table>
                <thead><tr><th>"Letter"</th><th>"Key"</th><th>"Consumer"</th><th>"Dead-lettered"</th><th class="num">"Dead for"</th><th class="num">"Deliveries"</th><th>"Last error"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
            <ExportLinks list="dead-letters" keep=keep.clone()/>
            <Pager path="/dead-letters" next=p.page.next on_first_page keep/>
            {redrive}
        }
    };
    view! {
        <Title text="Dead letters"/>
        <ActionAnswer/>
        <div class="page-head">
            <h1>"Dead letters"</h1>
            <LiveRefresh/>
        </div>
        <nav class="tabs" aria-label="State">{tabs}</nav>
        <DeadLetterFilters state=state.get_untracked() window=window.get_untracked() error=error.get_untracked()/>
        <Loaded resource=data render/>
    }
}

/// One link per state, each keeping the filter; `current` is marked.
fn state_tabs(current: Option<String>, keep: Vec<(&'static str, String)>) -> impl IntoView {
    let current = current.unwrap_or_else(|| "open".into());
    DeadLetterState::ALL
        .iter()
        .map(|s| {
            let mut pairs: Vec<(&str, &str)> = keep.iter().map(|(k, v)| (*k, v.as_str())).collect();
            if *s != DeadLetterState::Open {
                pairs.insert(0, ("state", s.as_str()));
            }
            let href = links::with_query("/dead-letters", &pairs);
            view! { <a href=href rel="external" aria-current=(current == s.as_str()).then_some("page")>{s.as_str()}</a> }
        })
        .collect_view()
}

fn dead_letter_row(d: DeadLetter) -> impl IntoView {
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
}

/// The list's filter as a plain `GET` form: consumer, a text of the last
/// error, and a span (as the charts' links write it).
#[component]
fn DeadLetterFilters(
    state: Option<String>,
    window: super::lists::ListWindow,
    error: Option<String>,
) -> impl IntoView {
    view! {
        <form class="search-form filters" method="get" action="/dead-letters">
            {state.map(|s| view! { <input type="hidden" name="state" value=s/> })}
            <label>
                "Consumer "
                <input type="text" name="consumer" value=window.consumer.unwrap_or_default() maxlength="128" autocomplete="off" spellcheck="false"/>
            </label>
            <label>
                "Last error contains "
                <input type="text" name="error" value=error.unwrap_or_default() maxlength="256" autocomplete="off" spellcheck="false" placeholder="429"/>
            </label>
            <label>
                "From (UTC) "
                <input type="text" name="from" value=window.from.unwrap_or_default() maxlength="40" autocomplete="off" placeholder="2026-11-30T14:00Z"/>
            </label>
            <label>
                "Until (UTC) "
                <input type="text" name="to" value=window.to.unwrap_or_default() maxlength="40" autocomplete="off" placeholder="2026-11-30T15:00Z"/>
            </label>
            <button type="submit">"Filter"</button>
        </form>
    }
}

/// "Redrive these": a guarded replay of the open dead letters the filter
/// shows (the oldest 500 at most), posted as a plain form that carries what
/// it offers; the answer is the run's page, or — when the list changed
/// meanwhile — this page again, saying how.
#[component]
fn RedriveForm(
    window: super::lists::ListWindow,
    error: Option<String>,
    form: crate::api::RedriveForm,
) -> impl IntoView {
    let max = idem_domain::REDRIVE_MAX;
    let how_many = match (form.count, &form.only_of) {
        (1, None) => "this one".to_owned(),
        (n, None) if n >= max => format!("the oldest {n} of these"),
        (n, None) => format!("these {n}"),
        (1, Some(_)) => "the one of your consumers".to_owned(),
        (n, Some(_)) if n >= max => format!("the oldest {n} of your consumers'"),
        (n, Some(_)) => format!("the {n} of your consumers"),
    };
    // The person reads more teams than they operate: say which letters go.
    let only_of = form.only_of.map(|names| {
        view! {
            <p class="only-of">
                "Only the dead letters of the consumers you operate are taken: " {names.join(", ")} "."
            </p>
        }
    });
    let hidden = [
        ("consumer", window.consumer),
        ("error", error),
        ("from", window.from),
        ("to", window.to),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| view! { <input type="hidden" name=name value=v/> }))
    .collect_view();
    let start_path = <crate::api::StartRedrive as leptos::server_fn::ServerFn>::PATH;
    view! {
        <section class="action-form" aria-labelledby="redrive-heading">
            <h2 id="redrive-heading">"Redrive " {how_many.clone()}</h2>
            <p>
                "Each dead letter is replayed in turn through the same single replay, with the same key, "
                "only when its verdict is “safe”. Those whose key is already sent, whose outcome is unknown "
                "or whose claim is beyond retention are skipped and listed with why. Letters that arrive "
                "after this page was drawn are not taken. You can stop it between two items."
            </p>
            {only_of}
            <form method="post" action=start_path>
                <input type="hidden" name="action_id" value=crate::components::actions::form_id(&form.action_id, "redrive")/>
                <input type="hidden" name="offer" value=form.offer/>
                {hidden}
                <button type="submit">"Redrive " {how_many}</button>
            </form>
        </section>
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
                    <DiscardForm dead_letter_id=dl.id action_id=d.action_id.clone()/>
                });
                view! {
                    <ReplayForm dead_letter=dl.clone() verdict=d.verdict.clone() action_id=d.action_id.clone()/>
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
                {dl.broker.map(|death| view! { <BrokerDeathFacts death publication=d.publication.clone()/> })}
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

/// What the broker recorded about the death (RabbitMQ's `x-death`), and
/// where a replay publishes the message again.
#[component]
fn BrokerDeathFacts(
    death: idem_domain::BrokerDeath,
    publication: Option<idem_domain::ReplayPublication>,
) -> impl IntoView {
    let exchange = match death.exchange.as_deref() {
        Some("") => "the default exchange".to_owned(),
        Some(name) => format!("exchange “{name}”"),
        None => "an exchange the broker did not name".to_owned(),
    };
    let routing_key = death.routing_key.clone().unwrap_or_default();
    let broker = match death.broker.as_str() {
        "rabbitmq" => "RabbitMQ".to_owned(),
        other => other.to_owned(),
    };
    view! {
        <section class="broker-death" aria-labelledby="broker-death-heading">
            <h2 id="broker-death-heading">"What " {broker} " recorded"</h2>
            <dl class="fields">
                <dt>"First published to"</dt>
                <dd>{exchange} ", routing key " <code>{routing_key}</code></dd>
                <dt>"Why it died"</dt><dd>{death_reason(death.reason.as_deref())}</dd>
                <dt>"Times dead-lettered"</dt><dd>{death.count.map_or_else(|| "not recorded".into(), |c| c.to_string())}</dd>
                <dt>"Dead-lettered at"</dt>
                <dd>{death.at.map(|at| view! { <Time at/> })}</dd>
                {publication.map(|p| view! { <dt>"Its replay"</dt><dd>{replay_publication(p)}</dd> })}
            </dl>
            <p class="lede">"A replay publishes the message there again, with the same key and message id, and waits for the broker's confirm."</p>
        </section>
    }
}

/// A broker's reason for a death in words, with the broker's own word after it.
fn death_reason(reason: Option<&str>) -> String {
    match reason {
        None => "not recorded".to_owned(),
        Some(reason) => match idem_domain::BrokerDeath::reason_in_words(reason) {
            Some(words) => format!("{words} ({reason})"),
            None => reason.to_owned(),
        },
    }
}

/// Where Idem's publication of a replay stands, in words: confirmed, or why
/// not yet and when it is tried again.
fn replay_publication(p: idem_domain::ReplayPublication) -> AnyView {
    match (p.published_at, p.next_attempt_at) {
        (Some(at), _) => view! { "published; the broker confirmed it " <Time at/> }.into_any(),
        (None, Some(next)) => view! {
            "not confirmed by the broker after " {p.attempts} " attempt(s)"
            {p.last_error.map(|e| format!(" ({e})"))}
            "; Idem tries again " <Time at=next/>
            " (the replay itself is not repeated)"
        }
        .into_any(),
        (None, None) => "being published".into_any(),
    }
}
