use idem_domain::{CappedCount, Claim, ClaimStatus, DeadLetter, OutboxRow};
use leptos::prelude::*;
use leptos_meta::Title;

use leptos_router::hooks::use_location;

use crate::{
    api::{ChartSet, DEFAULT_RANGE, LastHour, Overview, RANGES, get_charts, get_overview},
    components::{Age, ChartFigure, KeyLink, LiveRefresh, Loaded, StatusBadge, provide_clock},
    links,
};

#[component]
pub fn OverviewPage() -> impl IntoView {
    let data = Resource::new(|| (), |_| get_overview());
    view! {
        <Title text="Overview"/>
        <div class="page-head">
            <h1>"Overview"</h1>
            <LiveRefresh/>
        </div>
        <Loaded resource=data render=|o: Overview| view! { <OverviewBody o/> }/>
        <super::consumers::ConsumersNeedingAttention/>
        <super::slo::SloTiles/>
        <OverviewCharts/>
    }
}

/// The counts by status, and the oldest of what needs attention.
#[component]
fn OverviewBody(o: Overview) -> impl IntoView {
    let as_of = o.clock.as_of;
    provide_clock(o.clock);
    let tiles = status_tiles(o.last_hour, o.unknown_count);
    let unknown_rows = unknown_rows(o.unknown);
    let dead_rows = dead_rows(o.dead_letters);
    let outbox_rows = outbox_rows(o.outbox);

    view! {
        <section aria-labelledby="claims-heading">
            <h2 id="claims-heading">"Claims"</h2>
            <ul class="tiles">{tiles}</ul>
        </section>
        <div class="attention">
            <section aria-labelledby="unknown-heading">
                <h2 id="unknown-heading">
                    <a href="/unknown">"Oldest unknown outcomes"</a>
                    " " <span class="count">{o.unknown_count.to_string()}</span>
                </h2>
                <AttentionTable empty=o.unknown_count.is_zero() none="No unknown outcomes: every attempt has a known result.">
                    <thead><tr><th>"Key"</th><th>"Consumer"</th><th class="num">"Unknown for"</th><th>"Last error"</th></tr></thead>
                    <tbody>{unknown_rows}</tbody>
                </AttentionTable>
            </section>
            <section aria-labelledby="dead-heading">
                <h2 id="dead-heading">
                    <a href="/dead-letters">"Oldest open dead letters"</a>
                    " " <span class="count">{o.dead_letter_count.to_string()}</span>
                </h2>
                <AttentionTable empty=o.dead_letter_count.is_zero() none="No open dead letters.">
                    <thead><tr><th>"Key"</th><th>"Consumer"</th><th class="num">"Dead for"</th><th class="num">"Deliveries"</th><th>"Letter"</th></tr></thead>
                    <tbody>{dead_rows}</tbody>
                </AttentionTable>
            </section>
            <section aria-labelledby="outbox-heading">
                <h2 id="outbox-heading">
                    <a href="/outbox">"Outbox backlog"</a>
                    " " <span class="count">{o.outbox_count.to_string()}</span>
                </h2>
                <AttentionTable empty=o.outbox_count.is_zero() none="Nothing waiting: the relay has published every outbox row.">
                    <thead><tr><th>"Key"</th><th>"Topic"</th><th>"Origin"</th><th class="num">"Waiting"</th><th class="num">"Attempts"</th></tr></thead>
                    <tbody>{outbox_rows}</tbody>
                </AttentionTable>
            </section>
        </div>
        <p class="as-of">"As of " <crate::components::Time at=as_of/></p>
    }
}

/// The unknown outcomes waiting for a person (all of them, up to the cap),
/// then what the last hour brought: sends the providers confirmed, claims
/// that failed, claims that went pending and still are. Failed and pending
/// link to the keys in that status, newest first.
fn status_tiles(last_hour: LastHour, unknown: CappedCount) -> impl IntoView {
    let tile = |status: ClaimStatus, count: String, note: &'static str, href: Option<String>| {
        let body = view! {
            <span class="tile-count">{count}</span>
            " " <StatusBadge status/> " " <span class="tile-note">{note}</span>
        };
        let body = match href {
            Some(href) => view! { <a href=href>{body}</a> }.into_any(),
            None => body.into_any(),
        };
        view! { <li class=format!("tile status-{}", status.as_str())>{body}</li> }
    };
    let by_status =
        |status: ClaimStatus| Some(links::with_query("/keys", &[("status", status.as_str())]));
    [
        tile(
            ClaimStatus::Unknown,
            unknown.to_string(),
            "waiting for a person",
            Some("/unknown".to_owned()),
        ),
        tile(
            ClaimStatus::Sent,
            CappedCount::exact(last_hour.sent).to_string(),
            "in the last hour",
            None,
        ),
        tile(
            ClaimStatus::Failed,
            last_hour.failed.to_string(),
            "in the last hour",
            by_status(ClaimStatus::Failed),
        ),
        tile(
            ClaimStatus::Pending,
            last_hour.pending.to_string(),
            "in the last hour",
            by_status(ClaimStatus::Pending),
        ),
    ]
    .into_iter()
    .collect_view()
}

/// A row per oldest unknown outcome.
fn unknown_rows(unknown: Vec<Claim>) -> impl IntoView {
    unknown
        .into_iter()
        .map(|c| {
            view! {
                <tr>
                    <td><KeyLink consumer=c.consumer.clone() key=c.key/></td>
                    <td>{c.consumer}</td>
                    <td class="num"><Age at=c.status_at/></td>
                    <td class="error-text">{c.last_error}</td>
                </tr>
            }
        })
        .collect_view()
}

/// A row per oldest open dead letter.
fn dead_rows(dead_letters: Vec<DeadLetter>) -> impl IntoView {
    dead_letters
        .into_iter()
        .map(|d| {
            view! {
                <tr>
                    <td><KeyLink consumer=d.consumer.clone() key=d.key/></td>
                    <td>{d.consumer}</td>
                    <td class="num"><Age at=d.dead_lettered_at/></td>
                    <td class="num">{d.delivery_count}</td>
                    <td><a href=format!("/dead-letters/{}", d.id)>"#"{d.id}</a></td>
                </tr>
            }
        })
        .collect_view()
}

/// A row per oldest unpublished outbox row.
fn outbox_rows(outbox: Vec<OutboxRow>) -> impl IntoView {
    outbox
        .into_iter()
        .map(|r| {
            view! {
                <tr>
                    <td><KeyLink consumer=r.consumer.clone() key=r.key/></td>
                    <td>{r.topic}</td>
                    <td>{r.origin.as_str()}</td>
                    <td class="num"><Age at=r.created_at/></td>
                    <td class="num">{r.attempts}</td>
                </tr>
            }
        })
        .collect_view()
}

/// A "needs attention" table, or a sentence saying there is nothing to attend to.
#[component]
fn AttentionTable(empty: bool, none: &'static str, children: Children) -> impl IntoView {
    if empty {
        view! { <p class="empty">{none}</p> }.into_any()
    } else {
        view! { <table>{children()}</table> }.into_any()
    }
}

/// The overview's charts for the span and consumer in the address
/// (`?range=`, or `?from=&to=`, and `?consumer=`). The choices are plain
/// links and a plain `GET` form, so they work without JavaScript.
#[component]
fn OverviewCharts() -> impl IntoView {
    let location = use_location();
    let param = move |name: &'static str| {
        Memo::new(move |_| {
            links::query_param(&location.search.get(), name).filter(|v| !v.is_empty())
        })
    };
    let (range, from, to, consumer) = (
        param("range"),
        param("from"),
        param("to"),
        param("consumer"),
    );
    let data = Resource::new(
        move || (range.get(), from.get(), to.get(), consumer.get()),
        |(range, from, to, consumer)| get_charts(range, from, to, consumer),
    );
    let ranges = move || {
        let explicit = from.get().is_some();
        let current = range.get().unwrap_or_else(|| DEFAULT_RANGE.to_owned());
        let consumer = consumer.get().unwrap_or_default();
        RANGES
            .iter()
            .map(|(name, _)| {
                let href = links::with_query("/", &[("range", name), ("consumer", &consumer)]);
                view! {
                    <a href=href rel="external"
                        aria-current=(!explicit && current == *name).then_some("page")>{*name}</a>
                }
            })
            .collect_view()
    };
    let render = move |set: ChartSet| {
        let chosen = consumer.get_untracked().unwrap_or_default();
        let options = set
            .consumers
            .into_iter()
            .map(|c| {
                let selected = c == chosen;
                view! { <option value=c.clone() selected=selected>{c.clone()}</option> }
            })
            .collect_view();
        view! {
            <form class="chart-filter" method="get" action="/">
                <label>"Consumer "
                    <select name="consumer">
                        <option value="">"All consumers"</option>
                        {options}
                    </select>
                </label>
                <label>"From (UTC) "
                    <input type="datetime-local" name="from" value=from.get_untracked().unwrap_or_default()/>
                </label>
                <label>"To (UTC) "
                    <input type="datetime-local" name="to" value=to.get_untracked().unwrap_or_default()/>
                </label>
                {range.get_untracked().map(|r| view! { <input type="hidden" name="range" value=r/> })}
                <button type="submit">"Show"</button>
            </form>
            <p class="chart-span">{set.span}</p>
            <div class="chart-grid">
                {set.charts.into_iter().map(|chart| view! { <ChartFigure chart/> }).collect_view()}
            </div>
        }
    };
    view! {
        <section class="chart-section" aria-labelledby="charts-heading">
            <h2 id="charts-heading">"Over time"</h2>
            <nav class="tabs" aria-label="Time range">{ranges}</nav>
            <Loaded resource=data render/>
        </section>
    }
}
