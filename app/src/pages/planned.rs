//! Pages whose place in the console exists before their content does. Each
//! says plainly what it will show, so the navigation never leads to a 404.

use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn SloPage() -> impl IntoView {
    view! {
        <Title text="SLOs"/>
        <h1>"Service level objectives"</h1>
        <p class="notice">
            "Not built yet. This page will show each SLO — duplicate-claim rate, queue and outbox age, "
            "unknown outcomes resolved in time, recovery — with its error budget and burn-rate alerts."
        </p>
    }
}

#[component]
pub fn AuditPage() -> impl IntoView {
    view! {
        <Title text="Audit"/>
        <h1>"Audit log"</h1>
        <p class="notice">
            "Not built yet. Every replay, resolution and sign-in will be recorded here, "
            "with who did it, when, from where, and the state before and after."
        </p>
    }
}
