//! `/checks` and `/checks/{check}`: what the key page flags for one key,
//! asked of every key, with each check's findings a page at a time.

use idem_domain::{Check, Finding, Page};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::lists::{Pager, use_cursor};
use crate::{
    api::{CheckCount, Checks, get_checks},
    components::{KeyLink, LiveRefresh, Loaded, Time, provide_clock},
    format::duration,
    links,
};

/// `/checks`: every check's count; `/checks/{check}`: also its findings.
#[component]
pub fn ChecksPage() -> impl IntoView {
    let location = use_location();
    let check = Memo::new(move |_| {
        links::raw_segments(&location.pathname.get(), "/checks/")
            .first()
            .map(|s| s.to_string())
    });
    let cursor = use_cursor();
    let data = Resource::new(
        move || (check.get(), cursor.get()),
        |(check, cursor)| get_checks(check, cursor),
    );
    let render = move |checks: Checks| {
        provide_clock(checks.clock);
        let on_first_page = cursor.get_untracked().is_none();
        let picked = checks.findings.as_ref().map(|(check, _)| *check);
        let note = format!(
            "Measured against the objective for unknown outcomes ({}) and the claim retention ({}).",
            duration(checks.objective_seconds.round() as i64),
            checks.retention
        );
        view! {
            <CheckTable counts=checks.counts.clone() picked/>
            <p class="window-note">{note}</p>
            {checks.findings.map(|(check, page)| {
                let count = checks.counts.iter().find(|c| c.check == check).map(|c| c.count);
                view! {
                    <section class="check-findings" aria-labelledby="findings-heading">
                        <h2 id="findings-heading">{check.title()}</h2>
                        <p class="lede">{check.explanation()}</p>
                        <p class="count-line">{count.map(|c| format!("{c} found · oldest first"))}</p>
                        <FindingTable check page=page.clone()/>
                        <Pager path=check_path(check) next=page.next on_first_page/>
                    </section>
                }
            })}
        }
    };
    view! {
        <Title text="Consistency checks"/>
        <div class="page-head">
            <h1>"Consistency checks"</h1>
            <LiveRefresh/>
        </div>
        <p class="lede">
            "What a key's page flags for that key, asked of every key at once: after an incident, "
            "start here to find the keys that need a person."
        </p>
        <Loaded resource=data render/>
    }
}

/// The address of a check's list.
fn check_path(check: Check) -> String {
    format!("/checks/{}", check.slug())
}

/// Each check with its count; those with findings stand out.
#[component]
fn CheckTable(counts: Vec<CheckCount>, picked: Option<Check>) -> impl IntoView {
    let rows = counts
        .into_iter()
        .map(|CheckCount { check, count }| {
            let current = (picked == Some(check)).then_some("page");
            let found = count.value > 0;
            view! {
                <tr class:has-findings=found>
                    <td><a href=check_path(check) aria-current=current>{check.title()}</a></td>
                    <td class="num">{count.to_string()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="check-table">
            <thead><tr><th>"Check"</th><th class="num">"Found"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// One page of a check's findings, with what each check has to say about a key.
#[component]
fn FindingTable(check: Check, page: Page<Finding>) -> impl IntoView {
    if page.items.is_empty() {
        return view! { <p class="empty">"Nothing found."</p> }.into_any();
    }
    let rows = page
        .items
        .into_iter()
        .map(|f| {
            let letter = f.dead_letter_id.map(|id| {
                view! { <a href=format!("/dead-letters/{id}")>"Dead letter #"{id}</a> " " }
            });
            let reference = f
                .provider_ref
                .map(|r| view! { "Provider reference " <code>{r}</code> " " });
            let hashes = f.payload_hashes.map(|(first, latest)| {
                view! { "Payload " <code>{first}</code> " → " <code>{latest}</code> " " }
            });
            view! {
                <tr>
                    <td><KeyLink consumer=f.consumer.clone() key=f.key/></td>
                    <td>{f.consumer}</td>
                    <td><Time at=f.at/></td>
                    <td>{letter}{reference}{hashes}</td>
                    <td class="error-text">{f.last_error}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table>
            <thead>
                <tr>
                    <th>"Key"</th><th>"Consumer"</th><th>{check.time_heading()}</th>
                    <th>"Detail"</th><th>"Last error"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
