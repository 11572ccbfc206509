//! `/consumers`: every consumer in one table — the catalogue's and those
//! only seen in the tables — sortable worst first and filtered by team;
//! `/consumers/{name}`: one consumer's catalogue entry, figures and lists.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{
        ConsumerDetail, ConsumerSort, ConsumerSummary, ConsumerTable, get_consumer, get_consumers,
    },
    components::{LiveRefresh, Loaded, TeamSelect, provide_clock},
    format::{count_of, duration, percent},
    links,
};

/// `/consumers?team=&sort=`
#[component]
pub fn ConsumersPage() -> impl IntoView {
    let location = use_location();
    let query = Memo::new(move |_| {
        let search = location.search.get();
        let param = |name| links::query_param(&search, name).filter(|v| !v.is_empty());
        (param("team"), param("sort"))
    });
    let data = Resource::new(
        move || query.get(),
        |(team, sort)| get_consumers(team, sort),
    );
    let render = move |table: ConsumerTable| {
        provide_clock(table.clock.clone());
        view! { <TeamFilter table=table.clone()/> <ConsumerRows table/> }
    };
    view! {
        <Title text="Consumers"/>
        <div class="page-head">
            <h1>"Consumers"</h1>
            <LiveRefresh/>
        </div>
        <p class="lede">
            "Every consumer, who owns it and how it is doing. Sort by a column to put the worst first."
        </p>
        <Loaded resource=data render/>
    }
}

/// The team picker (keeping the sort), and how many rows it let through.
#[component]
fn TeamFilter(table: ConsumerTable) -> impl IntoView {
    let source = if table.catalogue_source.is_empty() {
        "No consumer catalogue is configured (IDEM_CONSUMERS_FILE): consumers are listed as Idem sees them in its tables.".to_owned()
    } else {
        format!("Catalogue: {}.", table.catalogue_source)
    };
    let count = match (&table.team, table.rows.len()) {
        (Some(team), 0) => format!("No consumer of team {team}."),
        (Some(team), n) => format!("{n} of team {team}"),
        (None, 1) => "1 consumer".to_owned(),
        (None, n) => format!("{n} consumers"),
    };
    view! {
        <form method="get" action="/consumers" class="filters">
            <TeamSelect teams=table.teams.clone() chosen=table.team.clone()/>
            <input type="hidden" name="sort" value=table.sort.as_str()/>
            <button type="submit">"Show"</button>
        </form>
        <p class="count-line">{count} " · " {source}</p>
    }
}

/// The table, each column header a link that sorts by it (keeping the team).
#[component]
fn ConsumerRows(table: ConsumerTable) -> impl IntoView {
    let team = table.team.clone().unwrap_or_default();
    let sort = table.sort;
    let header = move |column: ConsumerSort, label: &'static str, numeric: bool| {
        let href = links::with_query(
            "/consumers",
            &[("team", team.as_str()), ("sort", column.as_str())],
        );
        let current = (column == sort).then_some("true");
        let order = if numeric { "descending" } else { "ascending" };
        let class = if numeric { "num" } else { "" };
        view! { <th class=class aria-sort=current.map(|_| order)><a href=href aria-current=current>{label}</a></th> }
    };
    let rows = table.rows.into_iter().map(consumer_row).collect_view();
    view! {
        <table class="consumer-table">
            <thead><tr>
                {header(ConsumerSort::Name, "Consumer", false)}
                {header(ConsumerSort::Team, "Team", false)}
                {header(ConsumerSort::Deliveries, "Deliveries (1 h)", true)}
                {header(ConsumerSort::DuplicateRate, "Duplicate claims (1 h)", true)}
                {header(ConsumerSort::QueueAge, "Queue age", true)}
                {header(ConsumerSort::Unknown, "Open unknown", true)}
                {header(ConsumerSort::DeadLetters, "Open dead letters", true)}
                <th>"Provider contract"</th>
            </tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

fn consumer_row(s: ConsumerSummary) -> impl IntoView {
    let href = links::consumer_href(&s.name);
    let duplicates = duplicate_cell(&s);
    let age = age_cell(&s);
    let (team, contract) = match &s.entry {
        Some(entry) => (
            view! { <span>{entry.team.clone()}</span> }.into_any(),
            entry.contract.label().into_any(),
        ),
        None => (
            view! { <span class="not-catalogued">"not in the catalogue"</span> }.into_any(),
            "—".into_any(),
        ),
    };
    let flagged = |count: idem_domain::CappedCount| {
        if count.is_zero() {
            "num"
        } else {
            "num open-work"
        }
    };
    view! {
        <tr>
            <td><a href=href rel="external"><bdi>{s.name.clone()}</bdi></a></td>
            <td>{team}</td>
            <td class="num">{s.deliveries}</td>
            <td class="num">{duplicates}</td>
            <td class="num">{age}</td>
            <td class=flagged(s.unknown)>{s.unknown.to_string()}</td>
            <td class=flagged(s.dead_letters)>{s.dead_letters.to_string()}</td>
            <td>{contract}</td>
        </tr>
    }
}

fn duplicate_cell(s: &ConsumerSummary) -> String {
    match s.duplicate_rate() {
        Some(rate) => format!("{} ({})", percent(rate), s.duplicates),
        None => "—".to_owned(),
    }
}

fn age_cell(s: &ConsumerSummary) -> String {
    s.queue_age_seconds
        .map_or_else(|| "—".to_owned(), |age| duration(age.round() as i64))
}

/// `/consumers/{name}`
#[component]
pub fn ConsumerPage() -> impl IntoView {
    let location = use_location();
    let data = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            let name = links::raw_segments(&path, "/consumers/")
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default();
            get_consumer(name).await
        },
    );
    let render = move |detail: ConsumerDetail| {
        provide_clock(detail.clock.clone());
        let s = detail.summary;
        let name = s.name.clone();
        let only = |path: &str| links::with_query(path, &[("consumer", name.as_str())]);
        let catalogue = match &s.entry {
            Some(entry) => {
                let runbook = match entry.runbook.clone() {
                    Some(href) => view! { <a href=href.clone() rel="noopener noreferrer">{href.clone()}</a> }.into_any(),
                    None => "none given".into_any(),
                };
                view! {
                    <dt>"Team"</dt><dd>{entry.team.clone()}</dd>
                    <dt>"Description"</dt><dd>{entry.description.clone()}</dd>
                    <dt>"Runbook"</dt><dd>{runbook}</dd>
                    <dt>"Provider contract"</dt>
                    <dd>{entry.contract.label()} <p class="contract-advice">{entry.contract.retry_advice()}</p></dd>
                    <dt>"Queue"</dt><dd>{entry.queue.clone().unwrap_or_else(|| "not given".to_owned())}</dd>
                    <dt>"Dead letters kept in"</dt><dd>{entry.dead_letters.clone().unwrap_or_else(|| "not given".to_owned())}</dd>
                }
                .into_any()
            }
            None => view! {
                <dt>"Catalogue"</dt>
                <dd class="not-catalogued">
                    "Not in the catalogue: Idem sees this consumer in its tables, but no entry names its team, runbook or provider contract"
                    {(!detail.catalogue_source.is_empty()).then(|| format!(" (add it to {})", detail.catalogue_source))}
                    "."
                </dd>
            }
            .into_any(),
        };
        let read_only = s.read_only.then(|| view! {
            <p class="notice">"Read through an adapter over its own tables: Idem shows its keys, and actions are taken in its own system."</p>
        });
        view! {
            <div class="page-head">
                <h1>"Consumer " <bdi>{s.name.clone()}</bdi></h1>
                <LiveRefresh/>
            </div>
            {read_only}
            <dl class="fields">
                {catalogue}
                <dt>"Claims kept"</dt><dd>{format!("{} days", detail.retention_days)}</dd>
                <dt>"Last hour"</dt>
                <dd>{format!("{} deliveries, duplicate claims {}", s.deliveries, duplicate_cell(&s))}</dd>
                <dt>"Queue age"</dt><dd>{age_cell(&s)}</dd>
            </dl>
            <h2>"Waiting for a person"</h2>
            <ul class="consumer-lists">
                <li><a href=only("/unknown") rel="external">{count_of(s.unknown, "open unknown outcome", "open unknown outcomes")}</a></li>
                <li><a href=only("/dead-letters") rel="external">{count_of(s.dead_letters, "open dead letter", "open dead letters")}</a></li>
                <li><a href=only("/outbox") rel="external">"Its unpublished outbox rows"</a></li>
                <li><a href=only("/") rel="external">"Its charts"</a></li>
            </ul>
            <p><a href="/consumers">"Every consumer"</a></p>
        }
    };
    view! {
        <Title text="Consumer"/>
        <Loaded resource=data render/>
    }
}

/// How many consumers the overview names (the rest are on `/consumers`).
const OVERVIEW_CONSUMERS: usize = 5;

/// The overview's consumer panel: the consumers with the most open work,
/// worst first, so a hundred consumers still say which are in trouble.
#[component]
pub fn ConsumersNeedingAttention() -> impl IntoView {
    let data = Resource::new(|| (), |_| get_consumers(None, Some("unknown".to_owned())));
    let render = |table: ConsumerTable| {
        let total = table.rows.len();
        let mut troubled: Vec<ConsumerSummary> = table
            .rows
            .into_iter()
            .filter(|s| !s.unknown.is_zero() || !s.dead_letters.is_zero())
            .collect();
        troubled.sort_by(|a, b| {
            let open = |s: &ConsumerSummary| s.unknown.value + s.dead_letters.value;
            open(b).cmp(&open(a)).then(a.name.cmp(&b.name))
        });
        let shown = troubled.len().min(OVERVIEW_CONSUMERS);
        let note = match troubled.len() {
            0 => format!("None of the {total} consumers has open work."),
            n if n > shown => {
                format!("{shown} of the {n} consumers with open work, the most first.")
            }
            n => format!("Consumers with open work: {n} of {total}."),
        };
        let rows = troubled
            .into_iter()
            .take(shown)
            .map(|s| {
                let href = links::consumer_href(&s.name);
                view! {
                    <tr>
                        <td><a href=href rel="external"><bdi>{s.name.clone()}</bdi></a></td>
                        <td>{s.team().map_or_else(|| view! { <span class="not-catalogued">"not in the catalogue"</span> }.into_any(), |t| t.to_owned().into_any())}</td>
                        <td class="num">{s.unknown.to_string()}</td>
                        <td class="num">{s.dead_letters.to_string()}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <p class="count-line">{note}</p>
            {(shown > 0).then(|| view! {
                <table class="consumer-table">
                    <thead><tr><th>"Consumer"</th><th>"Team"</th><th class="num">"Open unknown"</th><th class="num">"Open dead letters"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            })}
        }
    };
    view! {
        <section aria-labelledby="consumers-heading">
            <h2 id="consumers-heading"><a href="/consumers">"Consumers with open work"</a></h2>
            <Loaded resource=data render/>
        </section>
    }
}
