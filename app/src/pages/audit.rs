use idem_domain::AuditEntry;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use super::lists::{ExportLinks, Pager};
use crate::{
    api::{AUDIT_ACTIONS, AuditLog, AuditQuery, list_audit},
    components::{KeyLink, Loaded, Time, provide_clock},
    links,
};

/// `/audit?actor=&action=&key=&from=&to=&recoveries=1&cursor=`: who did
/// what, newest first.
#[component]
pub fn AuditPage() -> impl IntoView {
    let location = use_location();
    let query = Memo::new(move |_| {
        let search = location.search.get();
        let param = |name| links::query_param(&search, name).unwrap_or_default();
        AuditQuery {
            actor: param("actor"),
            action: param("action"),
            key: param("key"),
            from: param("from"),
            to: param("to"),
            recoveries: param("recoveries"),
            cursor: param("cursor"),
        }
    });
    let log = Resource::new(move || query.get(), list_audit);
    let render = move |log: AuditLog| {
        let current = query.get_untracked();
        provide_clock(log.clock);
        let keep: Vec<(&'static str, String)> = [
            ("actor", current.actor.clone()),
            ("action", current.action.clone()),
            ("key", current.key.clone()),
            ("from", current.from.clone()),
            ("to", current.to.clone()),
            ("recoveries", current.recoveries.clone()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
        let list = if log.page.items.is_empty() {
            view! { <p class="empty">"No audit entry matches."</p> }.into_any()
        } else {
            view! { <AuditTable entries=log.page.items/> }.into_any()
        };
        view! {
            {list}
            <ExportLinks list="audit" keep=keep.clone()/>
            <Pager path="/audit" next=log.page.next on_first_page=current.cursor.is_empty() keep/>
        }
    };
    view! {
        <Title text="Audit"/>
        <h1>"Audit log"</h1>
        <p class="lede">
            "Every replay, discard and resolution, every sign-in and sign-out, and every refused "
            "request: who, when, from where, and the state before and after. Newest first; "
            "entries are never changed or deleted."
        </p>
        <AuditFilters query/>
        <Loaded resource=log render/>
    }
}

/// The audit page's filters, as the address has them.
#[component]
fn AuditFilters(query: Memo<AuditQuery>) -> impl IntoView {
    let actor = move || query.get().actor;
    let key = move || query.get().key;
    let action_options = move || {
        let current = query.get().action;
        // An action typed into the address that the list does not name
        // stays selected rather than silently becoming "any".
        let typed = (!current.is_empty() && !AUDIT_ACTIONS.contains(&current.as_str()))
            .then(|| current.clone());
        std::iter::once(String::new())
            .chain(AUDIT_ACTIONS.iter().map(|a| (*a).to_owned()))
            .chain(typed)
            .map(|value| {
                let selected = value == current;
                let label = if value.is_empty() {
                    "any action".to_owned()
                } else {
                    value.clone()
                };
                view! { <option value=value selected=selected>{label}</option> }
            })
            .collect_view()
    };
    view! {
        <form class="search-form filters" method="get" action="/audit" role="search">
            <label>
                "Actor "
                <input type="text" name="actor" value=actor maxlength="256" autocomplete="off" spellcheck="false"/>
            </label>
            <label>"Action " <select name="action">{action_options}</select></label>
            <label>
                "Key "
                <input type="search" name="key" value=key maxlength="512" autocomplete="off" spellcheck="false"/>
            </label>
            <label>
                "From "
                <input type="text" name="from" value=move || query.get().from placeholder="2026-11-30T14:00Z" maxlength="40" autocomplete="off" spellcheck="false"/>
            </label>
            <label>
                "Until "
                <input type="text" name="to" value=move || query.get().to placeholder="2026-11-30T15:00Z" maxlength="40" autocomplete="off" spellcheck="false"/>
            </label>
            <label class="check">
                <input type="checkbox" name="recoveries" value="1" checked=move || !query.get().recoveries.is_empty()/>
                " Recoveries only"
            </label>
            <button type="submit">"Filter"</button>
        </form>
    }
}

#[component]
fn AuditTable(entries: Vec<AuditEntry>) -> impl IntoView {
    let rows = entries
        .into_iter()
        .map(|e| {
            let actor_href = links::with_query("/audit", &[("actor", e.actor.as_str())]);
            let action_href = links::with_query("/audit", &[("action", e.action.as_str())]);
            let subject = match (e.consumer, e.key) {
                (Some(consumer), Some(key)) => view! {
                    <KeyLink consumer=consumer.clone() key=key/>
                    <span class="muted">" " {consumer}</span>
                }
                .into_any(),
                _ => view! { <bdi>{e.target.unwrap_or_default()}</bdi> }.into_any(),
            };
            let change = match (e.state_before, e.state_after) {
                (Some(before), Some(after)) => format!("{before} → {after}"),
                (None, Some(after)) => format!("→ {after}"),
                (Some(before), None) => before.to_string(),
                (None, None) => String::new(),
            };
            view! {
                <tr>
                    <td><Time at=e.at/></td>
                    <td>
                        <a href=actor_href rel="external"><bdi>{e.actor}</bdi></a>
                        <span class="muted">" " {e.actor_role}</span>
                    </td>
                    <td><a href=action_href rel="external">{e.action.to_string()}</a></td>
                    <td>{subject}</td>
                    <td>{change}</td>
                    <td><bdi>{e.reason.unwrap_or_default()}</bdi></td>
                    <td>
                        {e.result.to_string()}
                        {e.recovery_seconds.map(|s| format!(" · recovered after {}", crate::format::duration(s.round() as i64)))}
                    </td>
                    <td>{e.client_addr.unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="audit">
            <thead>
                <tr>
                    <th>"When"</th>
                    <th>"Who"</th>
                    <th>"Action"</th>
                    <th>"Key or target"</th>
                    <th>"Before → after"</th>
                    <th>"Reason"</th>
                    <th>"Result"</th>
                    <th>"From"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
