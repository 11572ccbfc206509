//! `/slo` and `/slo/{name}`: each objective with its SLI, error budget,
//! burn rates and alert state, worst first.

use idem_domain::slo::{AlertState, Events, Scope, SloStatus, TierReading};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{Chart, SloBoard, get_slo, get_slo_charts, get_slos},
    components::{ChartFigure, LiveRefresh, Loaded, TeamSelect},
    format::percent,
    links,
};

/// `/slo?team=`: every SLO, grouped by team (fleet-wide objectives first),
/// each group worst first.
#[component]
pub fn SloPage() -> impl IntoView {
    let location = use_location();
    let team = Memo::new(move |_| {
        links::query_param(&location.search.get(), "team").filter(|v| !v.is_empty())
    });
    let data = Resource::new(move || team.get(), get_slos);
    let render = move |board: SloBoard| {
        // Every team at once shows a consumer's objective only when it needs
        // attention: a hundred consumers' met objectives are one line each
        // group, and a team's page shows them all.
        let whole = team.get_untracked().is_some();
        let groups = groups(&board)
            .into_iter()
            .map(|(heading, statuses)| {
                let team = statuses.iter().find_map(|s| s.scope.team().map(str::to_owned));
                let (shown, met): (Vec<SloStatus>, Vec<SloStatus>) = statuses
                    .into_iter()
                    .partition(|s| whole || s.scope.consumer().is_none() || s.alert != AlertState::Ok);
                view! {
                    <h2 class="slo-group">{heading}</h2>
                    {(!shown.is_empty()).then(|| view! { <SloTable unobservable=board.duplicates_unobservable.clone() statuses=shown/> })}
                    <MetElsewhere met=met.len() team/>
                }
            })
            .collect_view();
        view! {
            <SloTeamFilter teams=board.teams.clone() listed=board.statuses.len() team=team.get_untracked()/>
            <p class="count-line">{format!("Objectives from {}; each over its own rolling window.", board.source)}</p>
            {groups}
            <NotObservable consumers=board.duplicates_unobservable.clone()/>
            <p class="hint">
                "Burn rate 1× spends exactly the error budget over the window. A tier pages (or opens a ticket) "
                "only when both its long and its short window burn faster than its threshold."
            </p>
        }
    };
    view! {
        <Title text="SLOs"/>
        <div class="page-head">
            <h1>"Service level objectives"</h1>
            <LiveRefresh/>
        </div>
        <Loaded resource=data render/>
    }
}

/// The board's statuses in groups: the fleet's objectives, then each
/// team's (the team with the worst state first), then the consumers no
/// team owns. The board is worst first, so each group is too.
fn groups(board: &SloBoard) -> Vec<(String, Vec<SloStatus>)> {
    let mut groups: Vec<(String, Vec<SloStatus>)> = Vec::new();
    for status in &board.statuses {
        let heading = match (&status.scope, status.scope.team()) {
            (Scope::Fleet, _) => "Every consumer".to_owned(),
            (_, Some(team)) => format!("Team {team}"),
            (Scope::Consumer { .. }, None) => "Consumers not in the catalogue".to_owned(),
            (_, None) => "Consumers of several teams".to_owned(),
        };
        match groups.iter_mut().find(|(h, _)| *h == heading) {
            Some((_, list)) => list.push(status.clone()),
            None => groups.push((heading, vec![status.clone()])),
        }
    }
    // The fleet's group first, the rest as their worst member came.
    groups.sort_by_key(|(heading, _)| heading != "Every consumer");
    groups
}

/// How many consumers' objectives of a group are met and not listed, and
/// where they are (nothing when none is hidden).
#[component]
fn MetElsewhere(met: usize, team: Option<String>) -> impl IntoView {
    (met > 0).then(|| {
        let what = if met == 1 {
            "1 more consumer objective is met".to_owned()
        } else {
            format!("{met} more consumer objectives are met")
        };
        let link = match team {
            Some(team) => view! { <a href=links::with_query("/slo", &[("team", &team)])>{format!("every objective of team {team}")}</a> }.into_any(),
            None => view! { "each objective's page" }.into_any(),
        };
        view! { <p class="hint met-elsewhere">{what}" and not listed here: see "{link}"."</p> }
    })
}

/// The team picker: the teams that own an objective.
#[component]
fn SloTeamFilter(teams: Vec<String>, listed: usize, team: Option<String>) -> impl IntoView {
    if teams.is_empty() {
        return ().into_any();
    }
    let objectives = match listed {
        1 => "1 objective".to_owned(),
        n => format!("{n} objectives"),
    };
    let count = match &team {
        Some(team) => format!("{objectives} of team {team}"),
        None => objectives,
    };
    view! {
        <form method="get" action="/slo" class="filters">
            <TeamSelect teams chosen=team.clone()/>
            <button type="submit">"Show"</button>
            <span class="count-line">{count}</span>
        </form>
    }
    .into_any()
}

/// One group's table: each objective (and its consumer, when it is per
/// consumer), its state, SLI, budget and burn rates.
#[component]
fn SloTable(unobservable: Vec<String>, statuses: Vec<SloStatus>) -> impl IntoView {
    let rows = statuses
        .iter()
        .map(|s| {
            let blind_spots = crate::api::slo_blind_spots(s, &unobservable).to_vec();
            let href = links::slo_href(&s.slo.name, s.scope.consumer());
            let burns = s
                .tiers
                .iter()
                .map(|t| view! { <td class="num">{burn(t.long_burn)}</td> })
                .collect_view();
            let counts = match &s.scope {
                Scope::Consumer { name, .. } => view! {
                    <a href=links::consumer_href(name)><bdi>{name.clone()}</bdi></a>
                }
                .into_any(),
                scope => view! { <span>{scope.label()}</span> }.into_any(),
            };
            view! {
                <tr class=format!("slo-row {}", alert_class(s.alert))>
                    <td><a href=href>{s.slo.name.clone()}</a></td>
                    <td>{counts}</td>
                    <td><AlertBadge state=s.alert/></td>
                    <td class="num">{percent(s.slo.objective.get())}</td>
                    <td class="num">
                        {s.sli.map_or_else(|| "no data".to_owned(), percent)}
                        {(!blind_spots.is_empty()).then(|| view! { <span class="not-observable" title="Some consumers' bad events cannot be observed">" *"</span> })}
                    </td>
                    <td><BudgetBar remaining=s.budget_remaining/></td>
                    {burns}
                    <td class="num">{events_text(s.window)}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="slo-table">
            <thead>
                <tr>
                    <th>"SLO"</th><th>"Counts"</th><th>"State"</th><th class="num">"Objective"</th><th class="num">"SLI"</th>
                    <th>"Budget remaining"</th>
                    <th class="num" title="Burn rate over the last hour">"Burn 1h"</th>
                    <th class="num" title="Burn rate over the last 6 hours">"Burn 6h"</th>
                    <th class="num" title="Burn rate over the last day">"Burn 1d"</th>
                    <th class="num" title="Burn rate over the last 3 days">"Burn 3d"</th>
                    <th class="num">"Valid events"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// The consumers whose duplicates cannot be observed, said where a
/// duplicate-claim SLO is shown (nothing when there are none).
#[component]
fn NotObservable(consumers: Vec<String>) -> impl IntoView {
    (!consumers.is_empty()).then(|| {
        view! {
            <p class="notice not-observable">
                "* Duplicates not observable for "{consumers.join(", ")}": their workers never "
                "reach a table Idem reads when a key repeats (their adapter says so). Their deliveries "
                "count in the duplicate-claim rate, their duplicates cannot: it may read better than it is."
            </p>
        }
    })
}

/// `/slo/{name}`: one SLO in depth, with its alert tiers; for a
/// per-consumer SLO, its consumers in a table, each to
/// `/slo/{name}/{consumer}`, which shows that consumer's in depth.
#[component]
pub fn SloDetailPage() -> impl IntoView {
    let location = use_location();
    let data = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            let segments = links::raw_segments(&path, "/slo/");
            let name = segments.first().map(|s| s.to_string()).unwrap_or_default();
            let consumer = segments.get(1).map(|s| s.to_string());
            get_slo(name, consumer).await
        },
    );
    let render = move |board: SloBoard| {
        let Some(s) = board.statuses.first().cloned() else {
            return view! { <p>"No such SLO."</p> }.into_any();
        };
        let asked_consumer =
            links::raw_segments(&location.pathname.get_untracked(), "/slo/").len() > 1;
        if s.slo.per_consumer && !asked_consumer {
            return view! { <PerConsumer board/> }.into_any();
        }
        view! { <OneObjective board status=s/> }.into_any()
    };
    view! {
        <Title text="SLO"/>
        <Loaded resource=data render/>
    }
}

/// One objective in depth: what it counts, its state, its charts and its
/// alert tiers.
#[component]
fn OneObjective(board: SloBoard, status: SloStatus) -> impl IntoView {
    let s = status;
    let tiers = s
        .tiers
        .iter()
        .map(|t| view! { <TierRow tier=t.clone()/> })
        .collect_view();
    let consumer = s.scope.consumer().map(str::to_owned);
    let heading = match &consumer {
        Some(consumer) => {
            view! { {s.slo.name.clone()}" · "<bdi>{consumer.clone()}</bdi> }.into_any()
        }
        None => view! { {s.slo.name.clone()} }.into_any(),
    };
    let counts = match &s.scope {
        Scope::Consumer { name, team } => view! {
            <a href=links::consumer_href(name)><bdi>{name.clone()}</bdi></a>
            {team.clone().map(|t| format!(" (team {t})"))}
        }
        .into_any(),
        scope => view! { {scope.label()} }.into_any(),
    };
    let back = match &consumer {
        Some(_) => view! { <p><a href=links::slo_href(&s.slo.name, None)>{format!("Every consumer of {}", s.slo.name)}</a>" · "<a href="/slo">"All SLOs"</a></p> }.into_any(),
        None => view! { <p><a href="/slo">"All SLOs"</a></p> }.into_any(),
    };
    view! {
        <Title text=format!("SLO {}", s.slo.name)/>
        <div class="page-head">
            <h1>{heading}</h1>
            <AlertBadge state=s.alert/>
        </div>
        <p class="lede">{s.slo.description.clone()}</p>
        <dl class="facts">
            <dt>"Counts"</dt><dd>{s.slo.sli.describe()}</dd>
            <dt>"Of"</dt><dd>{counts}</dd>
            <dt>"Objective"</dt><dd>{format!("{} over {}", percent(s.slo.objective.get()), s.slo.window)}</dd>
            <dt>"Error budget"</dt><dd>{percent(s.slo.objective.error_budget())}" of valid events"</dd>
            <dt>"SLI"</dt><dd>{s.sli.map_or_else(|| "no data in the window".to_owned(), percent)}" ("{events_text(s.window)}")"</dd>
            <dt>"Budget remaining"</dt><dd><BudgetBar remaining=s.budget_remaining/></dd>
            <dt>"Minimum events to alert"</dt><dd>{s.slo.min_events}</dd>
            <dt>"Defined in"</dt><dd>{board.source.clone()}</dd>
        </dl>
        <NotObservable consumers=board.blind_spots(&s).to_vec()/>
        <SloCharts name=s.slo.name.clone() consumer=consumer.map(|c| idem_domain::encode_segment(&c))/>
        <h2>"Alert tiers"</h2>
        <table>
            <thead>
                <tr>
                    <th>"Tier"</th><th>"Windows"</th><th class="num">"Threshold"</th>
                    <th class="num">"Burn (long)"</th><th class="num">"Burn (short)"</th>
                    <th class="num">"Events (long)"</th><th>"State"</th>
                </tr>
            </thead>
            <tbody>{tiers}</tbody>
        </table>
        {back}
    }
    .into_any()
}

/// A per-consumer SLO's page: what it counts, and each consumer's state.
#[component]
fn PerConsumer(board: SloBoard) -> impl IntoView {
    let first = board.statuses[0].clone();
    let statuses = board.statuses.clone();
    let selects = match (&first.slo.team, first.slo.consumers.is_empty()) {
        (Some(team), _) => format!("each consumer of team {team}"),
        (None, false) => "each consumer it names".to_owned(),
        (None, true) => "each consumer".to_owned(),
    };
    view! {
        <Title text=format!("SLO {}", first.slo.name)/>
        <div class="page-head">
            <h1>{first.slo.name.clone()}</h1>
        </div>
        <p class="lede">{first.slo.description.clone()}</p>
        <dl class="facts">
            <dt>"Counts"</dt><dd>{first.slo.sli.describe()}</dd>
            <dt>"Of"</dt><dd>{format!("{selects}, on its own: its own SLI, budget, burn rates and alerts")}</dd>
            <dt>"Window"</dt><dd>{first.slo.window.to_string()}</dd>
            <dt>"Defined in"</dt><dd>{board.source.clone()}</dd>
        </dl>
        <SloTable unobservable=board.duplicates_unobservable.clone() statuses/>
        <p><a href="/slo">"All SLOs"</a></p>
    }
}

/// The SLO's SLI, budget remaining and burn rates over its window, drawn
/// on the server.
#[component]
fn SloCharts(name: String, consumer: Option<String>) -> impl IntoView {
    let data = Resource::new(
        move || (name.clone(), consumer.clone()),
        |(name, consumer)| get_slo_charts(name, consumer),
    );
    let render = |charts: Vec<Chart>| {
        let figures = charts
            .into_iter()
            .map(|chart| view! { <ChartFigure chart/> })
            .collect_view();
        view! { <div class="chart-grid">{figures}</div> }
    };
    view! {
        <section class="chart-section" aria-label="Over time">
            <Loaded resource=data render/>
        </section>
    }
}

#[component]
fn TierRow(tier: TierReading) -> impl IntoView {
    let state = if tier.firing {
        "firing"
    } else if tier.too_few_events {
        "too few events"
    } else {
        "quiet"
    };
    view! {
        <tr class=if tier.firing { "firing" } else { "" }>
            <td>{tier.tier.severity.as_str()}</td>
            <td>{format!("{} and {}", tier.tier.long, tier.tier.short)}</td>
            <td class="num">{format!("{:.2}×", tier.threshold)}</td>
            <td class="num">{burn(tier.long_burn)}</td>
            <td class="num">{burn(tier.short_burn)}</td>
            <td class="num">{events_text(tier.long)}</td>
            <td>{state}</td>
        </tr>
    }
}

#[component]
fn AlertBadge(state: AlertState) -> impl IntoView {
    view! { <span class=format!("alert-badge {}", alert_class(state))>{state.as_str()}</span> }
}

/// Green above zero, red below; the text says the number either way. The
/// bar is an SVG whose fill has the remaining share as its width attribute:
/// the page's Content-Security-Policy allows no inline `style`, which a
/// `width: …%` would need (and which the browser would refuse, drawing
/// every bar full).
#[component]
fn BudgetBar(remaining: Option<f64>) -> impl IntoView {
    let Some(left) = remaining else {
        return view! { <span class="muted">"no data"</span> }.into_any();
    };
    let (class, width) = budget_fill(left);
    let label = format!("{:.1}%", left * 100.0);
    view! {
        <svg class="budget" viewBox="0 0 100 10" preserveAspectRatio="none" role="img"
            aria-label=format!("Error budget remaining: {label}")>
            <rect class="budget-track" x="0" y="0" width="100" height="10"/>
            <rect class=class x="0" y="0" width=format!("{width:.1}") height="10"/>
        </svg>
        <span class="budget-label">{label}</span>
    }
    .into_any()
}

/// The fill's class and width (0–100) for a remaining budget share: what is
/// left, in green, or a full red bar once the budget is spent.
fn budget_fill(left: f64) -> (&'static str, f64) {
    if left >= 0.0 {
        ("budget-fill ok", left.min(1.0) * 100.0)
    } else {
        ("budget-fill spent", 100.0)
    }
}

fn alert_class(state: AlertState) -> &'static str {
    match state {
        AlertState::Page => "alert-page",
        AlertState::Ticket => "alert-ticket",
        AlertState::BudgetSpent => "alert-spent",
        AlertState::Ok => "alert-ok",
        AlertState::TooFewEvents | AlertState::NoData => "alert-none",
    }
}

/// `99.95%`: three decimals near the top, where objectives live.
fn burn(rate: Option<f64>) -> String {
    rate.map_or_else(|| "—".to_owned(), |b| format!("{b:.2}×"))
}

fn events_text(events: Events) -> String {
    format!("{} of {} good", events.good.round(), events.valid.round())
}

/// The overview's row of SLO tiles: each SLO's state and SLI, linking to
/// its page; a per-consumer SLO by its worst consumer, so a hundred
/// consumers still make one tile per objective.
#[component]
pub fn SloTiles() -> impl IntoView {
    let data = Resource::new(|| (), |()| get_slos(None));
    let render = |board: SloBoard| {
        let tiles = tiles(board.statuses)
            .into_iter()
            .map(|s| {
                let sli = s.sli.map_or_else(|| "no data".to_owned(), percent);
                let name = match s.scope.consumer() {
                    Some(consumer) => format!("{} · {consumer}", s.slo.name),
                    None => s.slo.name.clone(),
                };
                view! {
                    <li class=format!("tile slo-tile {}", alert_class(s.alert))>
                        <a href=links::slo_href(&s.slo.name, s.scope.consumer())>
                            <span class="tile-count">{sli}</span>
                            " "
                            <span class="slo-name"><bdi>{name}</bdi></span>
                            " "
                            <AlertBadge state=s.alert/>
                        </a>
                    </li>
                }
            })
            .collect_view();
        view! { <ul class="tiles slo-tiles" aria-label="Service level objectives">{tiles}</ul> }
    };
    view! {
        <section aria-labelledby="slo-heading">
            <h2 id="slo-heading"><a href="/slo">"SLOs"</a></h2>
            <Loaded resource=data render/>
        </section>
    }
}

/// The statuses the overview's tiles show (the board is worst first):
/// every one but a per-consumer SLO's, of which only its worst consumer's.
fn tiles(statuses: Vec<SloStatus>) -> Vec<SloStatus> {
    let mut shown: Vec<SloStatus> = Vec::new();
    for status in statuses {
        let per_consumer = status.scope.consumer().is_some();
        if !per_consumer || !shown.iter().any(|s| s.slo.name == status.slo.name) {
            shown.push(status);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::budget_fill;

    #[test]
    fn a_budget_bar_is_as_long_as_what_is_left_and_full_red_once_spent() {
        assert_eq!(budget_fill(0.375), ("budget-fill ok", 37.5));
        assert_eq!(
            budget_fill(1.2),
            ("budget-fill ok", 100.0),
            "never past the end"
        );
        assert_eq!(budget_fill(0.0), ("budget-fill ok", 0.0));
        assert_eq!(budget_fill(-15.8), ("budget-fill spent", 100.0));
    }
}
