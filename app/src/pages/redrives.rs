use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{RedriveDetail, RedriveRow, get_redrive},
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
        <Loaded resource=data render=move |run: RedriveDetail| {
            provide_clock(run.clock.clone());
            // Follow a running redrive; a finished one does not change.
            let refresh = run.is_running().then(|| view! {
                <LiveRefresh/>
            });
            let stop_path = <crate::api::StopRedrive as leptos::server_fn::ServerFn>::PATH;
            let stop = (run.is_running() && run.can_act).then(|| view! {
                <form method="post" action=stop_path class="inline-form">
                    <input type="hidden" name="id" value=run.id.to_string()/>
                    <input type="hidden" name="action_id" value=form_id(&run.action_id, "stop")/>
                    <button type="submit">"Stop the redrive"</button>
                </form>
            });
            let total = run.items.len();
            let (replayed, skipped, waiting) = (run.count("replayed"), run.count("skipped"), run.waiting());
            let progress = format!("{} of {total} taken", total - waiting);
            let ended = match (&run.ended_at, run.state.as_str()) {
                (Some(at), "stopped") => view! {
                    <p class="notice">
                        "Stopped by " {run.ended_by.clone().unwrap_or_default()} " at " <Time at=*at/>
                        {format!(": {waiting} not taken, still open.")}
                    </p>
                }.into_any(),
                (Some(at), _) => view! { <p class="notice">"Finished at " <Time at=*at/> "."</p> }.into_any(),
                (None, _) => view! { <p class="notice">"Running: one dead letter at a time, paced."</p> }.into_any(),
            };
            let rows = run.items.iter().cloned().map(item_row).collect_view();
            view! {
                <div class="page-head">
                    <h1>"Redrive #" {run.id}</h1>
                    {refresh}
                </div>
                <dl class="fields">
                    <dt>"Started by"</dt><dd>{run.actor.clone()} " at " <Time at=run.started_at/></dd>
                    <dt>"Took"</dt><dd>{run.selection.clone()}</dd>
                    <dt>"State"</dt><dd>{run.state.clone()}</dd>
                    <dt>"Progress"</dt><dd><progress max=total.to_string() value=(total - waiting).to_string()></progress> " " {progress}</dd>
                    <dt>"Tally"</dt><dd>{format!("{replayed} replayed, {skipped} skipped, {waiting} waiting")}</dd>
                </dl>
                {ended}
                {stop}
                <table>
                    <thead><tr><th class="num">"#"</th><th>"Dead letter"</th><th>"Key"</th><th>"Outcome"</th><th>"Why"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            }
        }/>
    }
}

fn item_row(item: RedriveRow) -> impl IntoView {
    let outcome = item.outcome.unwrap_or_else(|| "waiting".into());
    view! {
        <tr>
            <td class="num">{item.position}</td>
            <td><a href=format!("/dead-letters/{}", item.dead_letter_id)>"#"{item.dead_letter_id}</a></td>
            <td><KeyLink consumer=item.consumer key=item.key/></td>
            <td class=format!("redrive-{outcome}")>{outcome.clone()}</td>
            <td>{item.reason}</td>
        </tr>
    }
}
