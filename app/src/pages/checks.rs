//! `/checks` and `/checks/{check}`: what the key page flags for one key,
//! asked of every key, with each check's findings a page at a time.

use idem_domain::{Check, Finding, Page};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::lists::{Pager, use_cursor};
use crate::{
    api::{BulkForms, CheckCount, Checks, get_checks},
    components::actions::{ActionAnswer, form_id},
    components::{KeyLink, LiveRefresh, Loaded, SubmitOnce, Time, provide_clock},
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
        let bulk = checks.bulk.map(|forms| view! { <BulkActions forms/> });
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
            {bulk}
        }
    };
    view! {
        <Title text="Consistency checks"/>
        <ActionAnswer/>
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

/// The bulk actions a check offers an operator: each starts a run on the
/// redrive's machinery (paced, stoppable, each item through the single
/// action and audited), and the answer is the run's page.
#[component]
fn BulkActions(forms: BulkForms) -> impl IntoView {
    let discard = forms
        .discard
        .map(|form| view! { <BulkDiscardForm form action_id=forms.action_id.clone()/> });
    let resolve = forms.resolve.map(|form| {
        view! {
            <ResolveShownForm form action_id=forms.action_id.clone()/>
            <ResolveWithReferencesForm action_id=forms.action_id.clone()/>
        }
    });
    view! { {discard} {resolve} }
}

/// "Discard these N": the open dead letters whose key is already sent (the
/// oldest 500 of those the person operates), bound to what the page offered.
#[component]
fn BulkDiscardForm(form: crate::api::RedriveForm, action_id: String) -> impl IntoView {
    let n = form.count;
    let how_many = match n {
        1 => "the one dead letter".to_owned(),
        n if n >= idem_domain::REDRIVE_MAX => format!("the oldest {n} dead letters"),
        n => format!("these {n} dead letters"),
    };
    let only_of = form.only_of.map(|names| {
        view! {
            <p class="only-of">"Only the dead letters of the consumers you operate are taken: " {names.join(", ")} "."</p>
        }
    });
    let except = (!form.except.is_empty()).then(|| {
        view! {
            <p class="only-of">
                "Not taken: the dead letters of " {form.except.join(", ")}
                ", read through an adapter (Idem does not act on those)."
            </p>
        }
    });
    let path = <crate::api::StartBulkDiscard as leptos::server_fn::ServerFn>::PATH;
    view! {
        <section class="action-form" aria-labelledby="bulk-discard-heading">
            <h2 id="bulk-discard-heading">"Discard " {how_many.clone()}</h2>
            <p>
                "Each is discarded in turn through the single discard, with your reason on its audit row, "
                "only while its key is still sent and the letter still open; anything changed meanwhile is "
                "skipped and listed. Letters that arrive after this page was drawn are not taken. "
                "You can stop it between two items."
            </p>
            {only_of}
            {except}
            <SubmitOnce>
                <form method="post" action=path>
                    <input type="hidden" name="action_id" value=form_id(&action_id, "bulk-discard")/>
                    <input type="hidden" name="offer" value=form.offer/>
                    <label>"Reason (required)" <textarea name="reason" rows="2" maxlength="2000" required></textarea></label>
                    <button type="submit" data-busy="Starting…">"Discard " {how_many}</button>
                </form>
            </SubmitOnce>
        </section>
    }
}

/// "Resolve the N shown as failed": the findings on this page the person
/// operates, each at the version it had when the page was drawn.
#[component]
fn ResolveShownForm(form: crate::api::ResolveForm, action_id: String) -> impl IntoView {
    let path = <crate::api::StartBulkResolve as leptos::server_fn::ServerFn>::PATH;
    let these = match (form.count, form.of) {
        (1, 1) => "the one shown".to_owned(),
        (n, of) if n == of => format!("the {n} shown"),
        (n, _) => format!("{n} of those shown"),
    };
    let only = (form.count < form.of).then(|| {
        let taken = format!(
            "{} of the {} shown are taken: those of consumers you operate that Idem may resolve.",
            form.count, form.of
        );
        view! { <p class="only-of">{taken}</p> }
    });
    view! {
        <section class="action-form" aria-labelledby="bulk-resolve-heading">
            <h2 id="bulk-resolve-heading">"Resolve " {these.clone()} " as failed"</h2>
            <p>
                "When the provider did not act on any of them. Each key is resolved in turn through the "
                "single resolution, only while its claim is still as it was when this page was drawn "
                "(the same attempt, still unresolved); a key someone changed meanwhile is skipped and "
                "listed. You can stop it between two items."
            </p>
            {only}
            <SubmitOnce>
                <form method="post" action=path>
                    <input type="hidden" name="action_id" value=form_id(&action_id, "bulk-resolve-shown")/>
                    <input type="hidden" name="keys" value=form.keys/>
                    <input type="hidden" name="shown_on" value=form.check.slug()/>
                    <fieldset>
                        <legend>"The provider…"</legend>
                        <label><input type="radio" name="resolve_as" value="failed-retry" required/>" did not act: mark failed and retry each (same key, through the outbox)"</label>
                        <label><input type="radio" name="resolve_as" value="failed"/>" did not act, and they must not be retried: mark failed"</label>
                    </fieldset>
                    <label>"Reason (required for “failed” without a retry)" <textarea name="reason" rows="2" maxlength="2000"></textarea></label>
                    <button type="submit" data-busy="Starting…">"Resolve " {these}</button>
                </form>
            </SubmitOnce>
        </section>
    }
}

/// "Resolve as sent with references": a pasted `consumer,key,reference`
/// list (from the provider's export, say): only those keys, each while it
/// is still unresolved.
#[component]
fn ResolveWithReferencesForm(action_id: String) -> impl IntoView {
    let path = <crate::api::StartBulkResolve as leptos::server_fn::ServerFn>::PATH;
    let max = idem_domain::REDRIVE_MAX;
    view! {
        <section class="action-form" aria-labelledby="bulk-sent-heading">
            <h2 id="bulk-sent-heading">"Resolve as sent, with the provider's references"</h2>
            <p>
                "Paste one line per key, " <code>"consumer,key,reference"</code> " (up to " {max} " keys; "
                "quote a field that holds a comma or a quote, doubling the quote). Every line is checked first: "
                "if one is not a consumer, a key and a reference, or names a key twice, nothing starts and "
                "the answer names each bad line. Each key is then marked sent with its reference, only while "
                "it is still unresolved; a key with no claim, or already resolved, is skipped and listed on "
                "the run's page."
            </p>
            <SubmitOnce>
                <form method="post" action=path>
                    <input type="hidden" name="action_id" value=form_id(&action_id, "bulk-resolve-sent")/>
                    <input type="hidden" name="resolve_as" value="sent"/>
                    <label>"Keys and references" <textarea name="references" rows="6" required placeholder="payments,invoice:2026-11:8812,ch_3P9xQ2"></textarea></label>
                    <label>"Reason" <textarea name="reason" rows="2" maxlength="2000"></textarea></label>
                    <button type="submit" data-busy="Starting…">"Resolve as sent"</button>
                </form>
            </SubmitOnce>
        </section>
    }
}
