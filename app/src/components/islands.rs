//! The small islands every page may carry: the only code of a page that
//! runs in the browser, besides [`super::LiveRefresh`]. Each works on the
//! server-rendered HTML it wraps, so without JavaScript the page is the
//! same, less the behaviour each adds. Islands take no context from the
//! page around them (in the browser there is none), only their props.

use leptos::prelude::*;

/// Marks the document `data-hydrated` once the islands before it have
/// hydrated (islands hydrate in document order; this one comes last), and
/// lets a form's busy button be pressed again when the browser restores the
/// page from its back/forward cache.
#[island]
pub fn HydrationMark() -> impl IntoView {
    Effect::new(move |_| {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
    let _ = window_event_listener(leptos::ev::pageshow, |ev| {
        if ev.persisted() {
            release_busy_buttons();
        }
    });
}

/// Submits its form as soon as a select inside it changes: choosing a time
/// zone applies it. Without JavaScript the form keeps its own button.
#[island]
pub fn AutoSubmit(children: Children) -> impl IntoView {
    let submit = |ev: leptos::ev::Event| {
        if let Some(form) = event_target::<web_sys::HtmlSelectElement>(&ev).form() {
            let _ = form.submit();
        }
    };
    view! { <span class="auto-submit" on:change=submit>{children()}</span> }
}

/// Wraps an action's form: once it is submitted, its button says what is
/// under way (`data-busy`) and cannot be pressed again while the post is
/// in flight. The post itself is the browser's own; the server answers it
/// as it answers any form.
#[island]
pub fn SubmitOnce(children: Children) -> impl IntoView {
    let busy = |ev: leptos::ev::SubmitEvent| {
        use leptos::wasm_bindgen::JsCast;
        let button = ev
            .submitter()
            .and_then(|b| b.dyn_into::<web_sys::HtmlButtonElement>().ok());
        if let Some(button) = button {
            if let Some(text) = button.get_attribute("data-busy") {
                let idle = button.text_content().unwrap_or_default();
                let _ = button.set_attribute("data-idle", &idle);
                button.set_text_content(Some(&text));
            }
            // After the submit event has started the post: disabling it
            // now stops a second press, not this one.
            button.set_disabled(true);
        }
    };
    view! { <div class="submit-once" on:submit=busy>{children()}</div> }
}

/// Gives every busy button its words back and lets it be pressed.
fn release_busy_buttons() {
    use leptos::wasm_bindgen::JsCast;
    let Ok(buttons) = document().query_selector_all("button[data-idle]") else {
        return;
    };
    for button in (0..buttons.length()).filter_map(|i| buttons.item(i)) {
        if let Some(button) = button.dyn_ref::<web_sys::HtmlButtonElement>() {
            if let Some(idle) = button.get_attribute("data-idle") {
                button.set_text_content(Some(&idle));
            }
            button.set_disabled(false);
        }
    }
}
