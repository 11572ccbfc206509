use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use idem_domain::{Redrive, RedriveItem, RedriveState, RunKind};

use crate::{
    api::{RedriveDetail, get_redrive},
    components::actions::{ActionAnswer, form_id},
    components::{KeyLink, LiveRefresh, Loaded, Time, provide_clock},
    links,
};

/// `/redrives/{id}`: a guarded redrive's progress, its tally and what became
/// of each dead letter (replayed, or skipped and why), with the stop button
/// while it runs.
#[component]
pub fn RedrivePage() -> impl IntoView {
    let location = use_location();
    let data = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            let id = links::raw_segments(&path, "/redrives/")
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default();
            get_redrive(id).await
        },
    );
    view! {
        <Title text="Redrive"/>
        <ActionAnswer/>
        <Loaded resource=data render=move |detail: RedriveDetail| {
            provide_clock(detail.clock.clone());
            let run = &detail.run;
            // Follow a running redrive; an ended one does not change.
            let refresh = run.is_running().then(|| view! {
                <LiveRefresh/>
            });
            let stop_path = <crate::api::StopRedrive as leptos::server_fn::ServerFn>::PATH;
            let stop = (run.is_running() && detail.can_act).then(|| view! {
                <form method="post" action=stop_path class="inline-form">
                    <input type="hidden" name="id" value=run.id.to_string()/>
                    <input type="hidden" name="action_id" value=form_id(&detail.action_id, "stop")/>
                    <button type="submit">"Stop the redrive"</button>
                </form>
            });
            let total = detail.items.len();
            let kind = run.kind;
            let (done, skipped, waiting) = (
                detail.count(kind.done()),
                detail.count(idem_domain::ItemOutcome::Skipped),
                detail.waiting(),
            );
            let progress = format!("{} of {total} taken", total - waiting);
            let ended = ended_note(run, waiting);
            let rows = detail.items.iter().cloned().map(|i| item_row(kind, i)).collect_view();
            let how = run.resolve_as.map(|how| view! { <dt>"Resolving as"</dt><dd>{how.as_str()}</dd> });
            let reason = run.reason.clone().map(|r| view! { <dt>"Reason"</dt><dd>{r}</dd> });
            let headings = match kind {
                RunKind::Resolve => view! { <th>"Key"</th><th class="num">"Version"</th><th>"Reference"</th> }.into_any(),
                RunKind::Replay | RunKind::Discard => view! { <th>"Dead letter"</th><th>"Key"</th> }.into_any(),
            };
            view! {
                <div class="page-head">
                    <h1>{kind.title()} " #" {run.id}</h1>
                    {refresh}
                </div>
                <dl class="fields">
                    <dt>"Started by"</dt><dd>{run.actor.clone()} " at " <Time at=run.started_at/></dd>
                    <dt>"Took"</dt><dd>{run.selection.clone()}</dd>
                    {how}
                    {reason}
                    <dt>"State"</dt><dd>{run.state.as_str()}</dd>
                    <dt>"Progress"</dt><dd><progress max=total.to_string() value=(total - waiting).to_string()></progress> " " {progress}</dd>
                    <dt>"Tally"</dt><dd>{format!("{done} {}, {skipped} skipped, {waiting} waiting", kind.done())}</dd>
                </dl>
                {ended}
                {stop}
                <table>
                    <thead><tr><th class="num">"#"</th>{headings}<th>"Outcome"</th><th>"When"</th><th>"Why"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            }
        }/>
    }
}

/// How the run ended (who stopped it, or why it stopped), or that it runs.
fn ended_note(run: &Redrive, waiting: usize) -> AnyView {
    let Some(at) = run.ended_at else {
        return view! { <p class="notice">"Running: one item at a time, paced."</p> }.into_any();
    };
    let left = match run.kind {
        RunKind::Resolve => "left as they were",
        RunKind::Replay | RunKind::Discard => "still open",
    };
    match (run.state, &run.ended_by, &run.end_reason) {
        (RedriveState::Stopped, Some(by), _) => view! {
            <p class="notice">
                "Stopped by " {by.clone()} " at " <Time at/>
                {format!(": {waiting} not taken, {left}.")}
            </p>
        }
        .into_any(),
        (RedriveState::Stopped, None, reason) => view! {
            <p class="notice" role="alert">
                "Stopped at " <Time at/> " because " {reason.clone().unwrap_or_default()}
                {format!(": {waiting} not taken, {left}.")}
            </p>
        }
        .into_any(),
        _ => view! { <p class="notice">"Finished at " <Time at/> "."</p> }.into_any(),
    }
}

fn item_row(kind: RunKind, item: RedriveItem) -> impl IntoView {
    let outcome = item.outcome.map_or("waiting", |o| o.as_str());
    let key = view! { <td><KeyLink consumer=item.consumer key=item.key/></td> };
    let what = match (kind, item.dead_letter_id) {
        (RunKind::Resolve, _) | (_, None) => view! {
            {key}
            <td class="num">{item.version}</td>
            <td><code>{item.provider_ref}</code></td>
        }
        .into_any(),
        (_, Some(id)) => view! {
            <td><a href=format!("/dead-letters/{id}")>"#"{id}</a></td>
            {key}
        }
        .into_any(),
    };
    view! {
        <tr>
            <td class="num">{item.position}</td>
            {what}
            <td class=format!("redrive-{outcome}")>{outcome}</td>
            <td>{item.done_at.map(|at| view! { <Time at/> })}</td>
            <td>{item.reason}</td>
        </tr>
    }
}
