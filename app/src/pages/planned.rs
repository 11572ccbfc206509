//! Pages whose place in the console exists before their content does. Each
//! says plainly what it will show, so the navigation never leads to a 404.

use leptos::prelude::*;
use leptos_meta::Title;

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
