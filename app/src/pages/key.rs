use idem_domain::{
    Claim, DeadLetter, OutboxRow,
    story::{Event, EventKind, Flag},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use idem_domain::action::Verdict;

use crate::{
    api::{KeyLookup, KeyStory, get_key_story, lookup_key},
    components::actions::{ActionAnswer, DiscardForm, ReplayForm, ResolveForm},
    components::{Age, Loaded, StatusBadge, Time, provide_clock},
    links,
};

/// The key a key-page address names, decoded for a person to read (a 404
/// pre-fills the search box with it). `None` when it does not decode.
fn key_in(path: &str, segment: usize) -> Option<String> {
    links::raw_segments(path, "/keys/")
        .get(segment)
        .and_then(|s| idem_domain::decode_segment(s, "key").ok())
}

/// `/keys/{consumer}/{key}`
#[component]
pub fn KeyPage() -> impl IntoView {
    let location = use_location();
    let story = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            match links::raw_segments(&path, "/keys/").as_slice() {
                [consumer, key] => get_key_story(consumer.to_string(), key.to_string()).await,
                _ => Err(crate::error::AppError::NotFound(
                    "That is not a key page address.".into(),
                )),
            }
        },
    );
    let search = key_in(&location.pathname.get_untracked(), 1);
    view! {
        <Title text="Key"/>
        <ActionAnswer/>
        <Loaded resource=story search render={move |s: KeyStory| view! { <Story s/> }}/>
    }
}

/// `/keys/{key}`: the key's page when one consumer has it, a chooser when several do.
#[component]
pub fn KeyLookupPage() -> impl IntoView {
    let location = use_location();
    let lookup = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            let key = links::raw_segments(&path, "/keys/")
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default();
            lookup_key(key).await
        },
    );
    let search = key_in(&location.pathname.get_untracked(), 0);
    view! {
        <Title text="Key"/>
        <ActionAnswer/>
        <Loaded
            resource=lookup
            search
            render={move |l: KeyLookup| match l {
                KeyLookup::One(s) => view! { <Story s=*s/> }.into_any(),
                KeyLookup::Several { clock, key, claims } => {
                    provide_clock(clock);
                    view! { <Chooser key claims/> }.into_any()
                }
            }}
        />
    }
}

#[component]
fn Chooser(key: String, claims: Vec<Claim>) -> impl IntoView {
    let rows = claims
        .into_iter()
        .map(|c| {
            let href = links::key_href(&c.consumer, &c.key);
            view! {
                <tr>
                    <td><a href=href rel="external">{c.consumer}</a></td>
                    <td><StatusBadge status=c.status/></td>
                    <td><Time at=c.last_delivery_at/></td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h1>"Key " <code class="key"><bdi>{key}</bdi></code></h1>
        <p>"Several consumers have claimed this key. Choose one:"</p>
        <table>
            <thead><tr><th>"Consumer"</th><th>"Status"</th><th>"Last delivery"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// One key's page: its claim, flags, actions, timeline, outbox rows and
/// dead letters.
#[component]
fn Story(s: KeyStory) -> impl IntoView {
    let as_of = s.clock.as_of;
    // A copy: the action forms below borrow the whole story.
    provide_clock(s.clock.clone());
    let through_adapter = s.read_only.is_some();
    let claim = s
        .claim
        .clone()
        .map(|c| view! { <ClaimDetails c through_adapter as_of/> });
    let flags = flags_section(&s.story.flags);
    // Shown whether or not anything would apply, so it is clear why a
    // consumer read through an adapter never offers an action.
    let read_only = s.read_only.clone().map(|reason| {
        let write_back = s.resolve_writes_back.clone().map(|function| {
            view! {
                " Resolving an outcome is the exception: Idem writes it into "
                {s.consumer.clone()} "’s own table through " <code>{function}</code>
                ", in the same transaction as its audit row (a retry through Idem’s outbox is not offered)."
            }
        });
        view! { <p class="notice read-only">{reason} {write_back}</p> }
    });
    let actions = actions_view(&s);
    let timeline = timeline_items(s.story.events);
    let outbox = outbox_table(s.outbox);
    let dead_letters = dead_letter_table(s.dead_letters);
    view! {
        <h1 class="key-title">
            <span class="label">"Key"</span>
            <code class="key"><bdi>{s.key.clone()}</bdi></code>
        </h1>
        <p class="key-consumer">
            "Consumer " <strong><bdi>{s.consumer.clone()}</bdi></strong>
            " · " <a href=links::key_only_href(&s.key) rel="external">"this key in every consumer"</a>
            {s.log_fingerprint.clone().map(|fingerprint| view! {
                " · in Idem's logs as " <code class="fingerprint">{fingerprint}</code>
            })}
        </p>
        {crate::components::replica_note(s.from_replica)}
        {flags}
        <div class="key-columns">
            <div>
                {claim}
                <section aria-labelledby="actions-heading">
                    <h2 id="actions-heading">"What would apply"</h2>
                    {read_only}
                    {actions}
                </section>
            </div>
            <section aria-labelledby="timeline-heading">
                <h2 id="timeline-heading">"Timeline"</h2>
                <ol class="timeline">{timeline}</ol>
            </section>
        </div>
        <section aria-labelledby="outbox-heading">
            <h2 id="outbox-heading">"Outbox rows"</h2>
            {outbox}
        </section>
        <section aria-labelledby="dead-heading">
            <h2 id="dead-heading">"Dead letters"</h2>
            {dead_letters}
        </section>
        <p class="as-of">"As of " <Time at=as_of/></p>
    }
}

/// The "Needs a second look" section: each flag explained, with the other
/// keys that share a provider reference; nothing when there are no flags.
fn flags_section(flags: &[Flag]) -> Option<impl IntoView + use<>> {
    (!flags.is_empty()).then(|| {
        let items = flags
            .iter()
            .map(|flag| {
                let others = match flag {
                    Flag::SharedProviderRef { others, .. } => others
                        .iter()
                        .map(|(consumer, key)| {
                            view! { " " <a href=links::key_href(consumer, key) rel="external" class="key"><bdi>{key.clone()}</bdi></a> }
                        })
                        .collect_view()
                        .into_any(),
                    _ => ().into_any(),
                };
                view! {
                    <li>
                        <strong>{flag.title()}</strong>
                        ". "
                        {flag.explanation()}
                        {others}
                    </li>
                }
            })
            .collect_view();
        view! {
            <section class="flags" aria-labelledby="flags-heading">
                <h2 id="flags-heading">"Needs a second look"</h2>
                <ul>{items}</ul>
            </section>
        }
    })
}

/// What would apply to the key, and the forms to do it for someone who may.
fn actions_view(s: &KeyStory) -> AnyView {
    if s.story.actions.is_empty() {
        return view! { <p class="empty">"Nothing to do here: no unknown outcome, no abandoned lease and no open dead letter."</p> }
            .into_any();
    }
    let items = s
        .story
        .actions
        .iter()
        .map(|a| view! { <li>{a.describe()}</li> })
        .collect_view();
    let writable = s.read_only.is_none() || s.resolve_writes_back.is_some();
    let forms = (s.can_act && writable).then(|| action_forms(s));
    let viewer_note = (!s.can_act && writable)
        .then(|| view! { <p class="lede">"An operator can do these from this page."</p> });
    view! {
        <ul class="actions">{items}</ul>
        {viewer_note}
        {forms}
    }
    .into_any()
}

/// The forms an operator acts with: resolve an unknown claim (or an
/// abandoned lease), replay (or
/// discard, when it was already sent) each open dead letter.
fn action_forms(s: &KeyStory) -> impl IntoView + use<> {
    let resolve = s
        .claim
        .clone()
        .filter(|c| c.is_resolvable(s.clock.as_of))
        .map(|claim| {
            // A team table written back to cannot take Idem's retry.
            let retry = s.resolve_writes_back.is_none();
            view! { <ResolveForm claim action_id=s.action_id.clone() retry contract=s.contract/> }
        });
    // A read-only consumer's dead letters are its own system's to replay.
    let dead_letters = s
        .dead_letters
        .iter()
        .filter(|_| s.read_only.is_none())
        .filter_map(|dl| {
            let verdict = s.verdicts.iter().find(|(id, _)| *id == dl.id)?.1.clone();
            let discard = (verdict == Verdict::AlreadySent).then(|| {
                view! { <DiscardForm dead_letter_id=dl.id action_id=s.action_id.clone()/> }
            });
            Some(view! {
                <ReplayForm dead_letter=dl.clone() verdict action_id=s.action_id.clone()/>
                {discard}
            })
        })
        .collect_view();
    view! { {resolve} {dead_letters} }
}

/// The class of a timeline entry of `kind` (as `event_kind` names it).
fn event_class(kind: &str, warning: bool) -> String {
    if warning {
        format!("event {kind} warning")
    } else {
        format!("event {kind}")
    }
}

/// How a timeline entry's kind is named in its class.
fn event_kind(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Delivery => "delivery",
        EventKind::Duplicate => "duplicate",
        EventKind::Outcome => "outcome",
        EventKind::Outbox => "outbox",
        EventKind::DeadLetter => "dead-letter",
        EventKind::Audit => "audit",
    }
}

/// The story's events as timeline entries, oldest first.
fn timeline_items(events: Vec<Event>) -> impl IntoView {
    events
        .into_iter()
        .map(|e| {
            let kind = event_kind(e.kind);
            let class = event_class(kind, e.warning);
            view! {
                <li class=class>
                    <span class="event-time"><Time at=e.at/></span>
                    <span class="event-kind">{kind.replace('-', " ")}</span>
                    <span class="event-text">{linked(&e.text)}</span>
                </li>
            }
        })
        .collect_view()
}

/// Where a run an audit row names can be read: its words and its page.
const RUN_LINKS: &[(&str, &str)] = &[
    ("reconciliation #", "/reconciliations/"),
    ("bulk resolve #", "/redrives/"),
    ("bulk discard #", "/redrives/"),
];

/// `text` with each run it names (`reconciliation #5`, `bulk resolve #8`)
/// a link to that run's page.
fn linked(text: &str) -> impl IntoView + use<> {
    let mut parts = Vec::new();
    let mut rest = text;
    loop {
        let found = RUN_LINKS
            .iter()
            .filter_map(|(words, path)| rest.find(words).map(|at| (at, *words, *path)))
            .min_by_key(|(at, ..)| *at);
        let Some((at, words, path)) = found else {
            break;
        };
        let after = &rest[at + words.len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            parts.push(view! { {rest[..at + words.len()].to_owned()} }.into_any());
            rest = after;
            continue;
        }
        let (number, tail) = after.split_at(digits);
        parts.push(view! { {rest[..at].to_owned()} }.into_any());
        let label = format!("{words}{number}");
        parts.push(view! { <a href=format!("{path}{number}")>{label}</a> }.into_any());
        rest = tail;
    }
    parts.push(view! { {rest.to_owned()} }.into_any());
    parts.collect_view()
}

/// The key's outbox rows as a table, or a sentence when there are none.
fn outbox_table(outbox: Vec<OutboxRow>) -> AnyView {
    if outbox.is_empty() {
        return view! { <p class="empty">"No outbox rows for this key."</p> }.into_any();
    }
    let rows = outbox
        .into_iter()
        .map(|r| {
            view! {
                <tr>
                    <td class="num">{r.id}</td>
                    <td>{r.topic}</td>
                    <td>{r.origin.as_str()}</td>
                    <td><Time at=r.created_at/></td>
                    <td>{match r.published_at {
                        Some(at) => view! { <Time at/> }.into_any(),
                        None => view! { <span class="pending-text">"waiting " <Age at=r.created_at/></span> }.into_any(),
                    }}</td>
                    <td class="num">{r.attempts}</td>
                    <td class="error-text">{r.last_error}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th class="num">"Id"</th><th>"Topic"</th><th>"Origin"</th><th>"Created"</th><th>"Published"</th><th class="num">"Attempts"</th><th>"Last error"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// The key's dead letters as a table, or a sentence when there are none.
fn dead_letter_table(dead_letters: Vec<DeadLetter>) -> AnyView {
    if dead_letters.is_empty() {
        return view! { <p class="empty">"No dead letters for this key."</p> }.into_any();
    }
    let rows = dead_letters
        .into_iter()
        .map(|d| {
            view! {
                <tr>
                    <td><a href=format!("/dead-letters/{}", d.id)>"#"{d.id}</a></td>
                    <td>{d.queue}</td>
                    <td><Time at=d.dead_lettered_at/></td>
                    <td class="num">{d.delivery_count}</td>
                    <td>{d.state.as_str()}</td>
                    <td class="error-text">{d.last_error}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead><tr><th>"Letter"</th><th>"Queue"</th><th>"Dead-lettered"</th><th class="num">"Deliveries"</th><th>"State"</th><th>"Last error"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// Deliveries, and what is known of this key's duplicates. Through an
/// adapter the per-key count is only what committed: a worker that rolls
/// back on a duplicate takes its count back, so the page says so rather
/// than show "0 duplicates" (the consumer's rate still counts every one).
fn deliveries(c: &Claim, through_adapter: bool) -> String {
    let duplicates = match c.duplicate_count {
        1 => "1 duplicate".to_owned(),
        n => format!("{n} duplicates"),
    };
    if through_adapter {
        format!(
            "{} ({duplicates} that committed; this key's other duplicates are not known here: a \
             worker that rolls back on a duplicate takes its count back. The consumer's \
             duplicate-claim rate counts every one.)",
            c.delivery_count
        )
    } else {
        format!("{} ({duplicates})", c.delivery_count)
    }
}

#[component]
fn ClaimDetails(
    c: Claim,
    through_adapter: bool,
    as_of: chrono::DateTime<chrono::Utc>,
) -> impl IntoView {
    let deliveries = deliveries(&c, through_adapter);
    let lease = match c.lease_until {
        None => "none".into_any(),
        Some(at) if at < as_of => view! { "expired " <Time at/> }.into_any(),
        Some(at) => view! { "held until " <Time at/> }.into_any(),
    };
    let drift = c
        .last_payload_hash
        .as_ref()
        .filter(|h| c.payload_hash.as_ref() != Some(*h))
        .map(|h| format!(" (a later delivery carried {h})"));
    view! {
        <section aria-labelledby="claim-heading" class="claim">
            <h2 id="claim-heading">"Claim " <StatusBadge status=c.status/></h2>
            <dl class="fields">
                <dt>"Status"</dt>
                <dd>{c.status.meaning()} " — since " <Time at=c.status_at/> " (" <Age at=c.status_at/> ")"</dd>
                <dt>"First delivery"</dt><dd><Time at=c.first_delivery_at/></dd>
                <dt>"Last delivery"</dt><dd><Time at=c.last_delivery_at/></dd>
                <dt>"Deliveries"</dt><dd>{deliveries}</dd>
                <dt>"Attempts"</dt><dd>{c.attempts}</dd>
                <dt>"Provider reference"</dt><dd>{c.provider_ref.unwrap_or_else(|| "—".into())}</dd>
                <dt>"Last error"</dt><dd class="error-text">{c.last_error.unwrap_or_else(|| "—".into())}</dd>
                <dt>"Outcome recorded"</dt><dd>{c.outcome_at.map(|at| view! { <Time at/> }.into_any()).unwrap_or_else(|| "—".into_any())}</dd>
                <dt>"Payload hash"</dt><dd><code>{c.payload_hash.unwrap_or_else(|| "—".into())}</code>{drift}</dd>
                <dt>"Lease"</dt><dd>{lease}</dd>
                <dt>"Version"</dt><dd>{c.version}</dd>
            </dl>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeline_entry_is_classed_by_its_kind_and_whether_it_warns() {
        assert_eq!(event_kind(EventKind::DeadLetter), "dead-letter");
        assert_eq!(event_class("delivery", false), "event delivery");
        assert_eq!(
            event_class(event_kind(EventKind::DeadLetter), true),
            "event dead-letter warning"
        );
    }
}
