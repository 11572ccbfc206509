//! `/reconcile`: upload a provider's export for one consumer; and
//! `/reconciliations/{id}`: what a reconciliation found, class by class,
//! with the form that applies a class as a guarded bulk resolve.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use idem_domain::{ClassSummary, ReconcileClass, ReconcileRow, Reconciliation, ResolveAs};

use crate::{
    api::{
        DEMO_PROVIDER_LOG_PATH, RECONCILE_UPLOAD_PATH, ReconcileHome, ReconciliationDetail,
        get_reconcile_home, get_reconciliation,
    },
    components::actions::{ActionAnswer, form_id},
    components::{KeyLink, Loaded, Time, provide_clock},
    links,
};

/// `/reconcile`.
#[component]
pub fn ReconcilePage() -> impl IntoView {
    let data = Resource::new(|| (), |()| get_reconcile_home());
    view! {
        <Title text="Reconcile with a provider"/>
        <ActionAnswer/>
        <h1>"Reconcile with a provider"</h1>
        <p class="hint">
            "Hold a provider's own export (what it accepted, what failed) against one consumer's claims. "
            "Nothing changes until you apply a class: each is then a guarded bulk resolve of the rows the reconciliation kept for it, each key as it was read."
        </p>
        <Loaded resource=data render=move |home: ReconcileHome| {
            provide_clock(home.clock.clone());
            let demo = home.demo.then(|| view! {
                <p class="notice">
                    "The demo's email provider offers its message log for the open incident: "
                    <a href=DEMO_PROVIDER_LOG_PATH download="email-provider-messages.csv">"Download the message log"</a>
                    ", then upload it below for “reminders”."
                </p>
            });
            let form = upload_form(&home);
            let recent = recent_table(home.recent);
            view! { {demo} {form} {recent} }
        }/>
    }
}

fn upload_form(home: &ReconcileHome) -> AnyView {
    if home.consumers.is_empty() {
        return view! { <p class="hint">"You operate no consumer Idem can reconcile, so there is nothing to upload for."</p> }
            .into_any();
    }
    let options = home
        .consumers
        .iter()
        .map(|c| view! { <option value=c.clone()>{c.clone()}</option> })
        .collect_view();
    view! {
        <section class="action-form">
        <h3>"Upload an export"</h3>
        <form method="post" action=RECONCILE_UPLOAD_PATH enctype="multipart/form-data" class="reconcile-form">
            <input type="hidden" name="action_id" value=form_id(&home.action_id, "reconcile")/>
            <label>"Consumer" <select name="consumer" required>{options}</select></label>
            <label>
                "Provider latency bound (seconds)"
                <input type="number" name="latency_seconds" value="300" min="0" max="86400" required/>
                <small>"How long the provider may take to show a call in its export. Only calls further than this from the export's first and last records are judged absent."</small>
            </label>
            <label>
                "Status words besides the usual ones"
                <input type="text" name="status_words" maxlength="2000" placeholder="queued=accepted, soft_bounce=failed"/>
                <small>"Accepted: accepted, delivered, sent, succeeded, paid, completed. Failed: failed, bounced, rejected, dropped, declined."</small>
            </label>
            <label class="check">
                <input type="checkbox" name="covers_now" value="yes"/>
                " The export covers every call up to now (it was taken just now)"
                <small>"Tick it only for an export taken within the latency bound of now; else it is taken to cover calls up to its last record only."</small>
            </label>
            <label>
                "Export file (CSV with a header, or JSON lines)"
                <input type="file" name="export" accept=".csv,.jsonl,.ndjson,.json,.txt,text/csv,application/json"/>
                <small>"Columns: reference (or message_id, id), key (or idempotency_key), status (or event), time (RFC 3339 or Unix seconds). Up to 64 MiB."</small>
            </label>
            <label>"Or paste it" <textarea name="pasted" rows="6" maxlength="1000000"></textarea></label>
            <button type="submit">"Reconcile"</button>
        </form>
        </section>
    }
    .into_any()
}

fn counts_line(r: &Reconciliation) -> String {
    let parts: Vec<String> = r
        .classes
        .iter()
        .filter(|c| c.count > 0)
        .map(|c| format!("{} {}", c.count, c.class.title().to_lowercase()))
        .collect();
    if parts.is_empty() {
        "nothing differs".to_owned()
    } else {
        parts.join(" · ")
    }
}

fn recent_table(recent: Vec<Reconciliation>) -> AnyView {
    if recent.is_empty() {
        return view! { <p class="hint">"No reconciliation yet."</p> }.into_any();
    }
    let rows = recent
        .into_iter()
        .map(|r| {
            let counts = counts_line(&r);
            view! {
                <tr>
                    <td><a href=format!("/reconciliations/{}", r.id)>{format!("#{}", r.id)}</a></td>
                    <td>{r.consumer}</td>
                    <td><bdi>{r.file_name}</bdi></td>
                    <td>{r.actor} " at " <Time at=r.created_at/></td>
                    <td class="num">{r.records}</td>
                    <td>{counts}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>"Latest reconciliations"</h2>
        <table>
            <thead><tr><th>"#"</th><th>"Consumer"</th><th>"File"</th><th>"By"</th><th class="num">"Records"</th><th>"Found"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// `/reconciliations/{id}`.
#[component]
pub fn ReconciliationPage() -> impl IntoView {
    let location = use_location();
    let data = Resource::new(
        move || location.pathname.get(),
        |path| async move {
            let id = links::raw_segments(&path, "/reconciliations/")
                .first()
                .map(|s| s.to_string())
                .unwrap_or_default();
            get_reconciliation(id).await
        },
    );
    view! {
        <Title text="Reconciliation"/>
        <ActionAnswer/>
        <Loaded resource=data render=move |detail: ReconciliationDetail| {
            provide_clock(detail.clock.clone());
            let r = detail.reconciliation.clone();
            let span = match (r.span_from, r.span_to) {
                (Some(from), Some(to)) => view! { <Time at=from/> " to " <Time at=to/> }.into_any(),
                _ => view! { "no record was read" }.into_any(),
            };
            let words = (!r.status_words.is_empty()).then(|| view! { <dt>"Status words"</dt><dd><code>{r.status_words.clone()}</code></dd> });
            let bad = bad_lines(&r);
            let classes = r
                .classes
                .iter()
                .cloned()
                .map(|c| class_section(&detail, &r.consumer, c))
                .collect_view();
            view! {
                <h1>{format!("Reconciliation #{}", r.id)}</h1>
                <dl class="fields">
                    <dt>"Consumer"</dt><dd><a href=links::consumer_href(&r.consumer)>{r.consumer.clone()}</a></dd>
                    <dt>"Run by"</dt><dd>{r.actor.clone()} " at " <Time at=r.created_at/></dd>
                    <dt>"File"</dt><dd><bdi>{r.file_name.clone()}</bdi> {format!(" ({} bytes), SHA-256 ", r.file_bytes)} <code>{r.file_sha256.clone()}</code></dd>
                    <dt>"Records"</dt><dd>{format!("{} read, {} bad lines", r.records, r.bad_lines)}</dd>
                    <dt>"Export covers"</dt><dd>{span}</dd>
                    <dt>"Latency bound"</dt><dd>{format!("{} s", r.latency_seconds)}</dd>
                    {words}
                    <dt>"Found"</dt><dd>{counts_line(&r)}</dd>
                </dl>
                {bad}
                {classes}
            }
        }/>
    }
}

fn bad_lines(r: &Reconciliation) -> Option<impl IntoView + use<>> {
    (r.bad_lines > 0).then(|| {
        let items = r
            .bad_sample
            .iter()
            .cloned()
            .map(|b| view! { <li>{b}</li> })
            .collect_view();
        let more = (r.bad_lines > r.bad_sample.len() as i64).then(
            || view! { <li>{format!("and {} more", r.bad_lines - r.bad_sample.len() as i64)}</li> },
        );
        view! {
            <section class="bad-lines">
                <h2>"Lines not read"</h2>
                <ul>{items}{more}</ul>
            </section>
        }
    })
}

fn class_section(
    detail: &ReconciliationDetail,
    consumer: &str,
    c: ClassSummary,
) -> impl IntoView + use<> {
    let id = detail.reconciliation.id;
    let applied = (!c.applied_runs.is_empty()).then(|| {
        let links = c
            .applied_runs
            .iter()
            .map(|run| view! { <a href=format!("/redrives/{run}")>{format!("Bulk resolve #{run}")}</a> " " })
            .collect_view();
        view! { <p class="notice">"Applied by " {links}</p> }
    });
    let apply = (detail.can_apply && c.to_apply > 0)
        .then(|| {
            c.class
                .resolves_as()
                .map(|how| apply_form(detail, id, c.class, how, c.to_apply))
        })
        .flatten();
    let shown = c.sample.len() as i64;
    let more = (c.count > shown).then(
        || view! { <p class="hint">{format!("Showing the first {shown} of {}.", c.count)}</p> },
    );
    let table = (!c.sample.is_empty()).then(|| {
        let rows = c
            .sample
            .iter()
            .cloned()
            .map(|row| class_row(consumer, row))
            .collect_view();
        view! {
            <table>
                <thead><tr><th class="num">"Line"</th><th>"Key"</th><th>"Here"</th><th>"There"</th><th>"Reference"</th><th>"Note"</th><th>"Applied"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
    });
    view! {
        <section class="reconcile-class" id=c.class.as_str()>
            <h2>{c.class.title()} " " <span class="count">{format!("({})", c.count)}</span></h2>
            <p class="hint">{c.class.meaning()}</p>
            {applied}
            {apply}
            {table}
            {more}
        </section>
    }
}

fn apply_form(
    detail: &ReconciliationDetail,
    id: i64,
    class: ReconcileClass,
    how: ResolveAs,
    to_apply: i64,
) -> impl IntoView + use<> {
    let path = <crate::api::ApplyReconciliation as leptos::server_fn::ServerFn>::PATH;
    let shown = to_apply.min(idem_domain::REDRIVE_MAX);
    let label = match how {
        ResolveAs::Sent => format!("Resolve these {shown} as sent, with the provider's references"),
        _ => format!("Mark these {shown} failed and retry them"),
    };
    let note = (to_apply > shown).then(|| {
        view! { <small>{format!("One run takes {shown} of the {to_apply}; apply again for the rest.")}</small> }
    });
    view! {
        <div class="action-form">
        <form method="post" action=path class="apply-form">
            <input type="hidden" name="action_id" value=form_id(&detail.action_id, class.as_str())/>
            <input type="hidden" name="id" value=id.to_string()/>
            <input type="hidden" name="class" value=class.as_str()/>
            <input type="hidden" name="shown" value=shown.to_string()/>
            <label>"Reason (optional)" <input type="text" name="reason" maxlength="1900"/></label>
            <button type="submit">{label}</button>
            {note}
        </form>
        </div>
    }
}

fn class_row(consumer: &str, row: ReconcileRow) -> impl IntoView + use<> {
    let key = row
        .key
        .clone()
        .map(|k| view! { <KeyLink consumer=consumer.to_owned() key=k/> }.into_any())
        .unwrap_or_else(|| view! { <span class="hint">"no key"</span> }.into_any());
    let here = match (row.claim_status, row.version) {
        (Some(status), Some(version)) => format!("{status} (version {version})"),
        _ => "no claim".to_owned(),
    };
    let there = match (row.provider_status, row.provider_at) {
        (Some(status), Some(at)) => view! { {status.as_str()} " at " <Time at/> }.into_any(),
        _ => view! { "no record" }.into_any(),
    };
    view! {
        <tr>
            <td class="num">{row.line}</td>
            <td>{key}</td>
            <td>{here}</td>
            <td>{there}</td>
            <td><code>{row.provider_ref}</code></td>
            <td>{row.note}</td>
            <td>{row.applied_run.map(|run| view! { <a href=format!("/redrives/{run}")>{format!("#{run}")}</a> })}</td>
        </tr>
    }
}
