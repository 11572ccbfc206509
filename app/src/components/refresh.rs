use std::time::Duration;

use leptos::prelude::*;

/// The choices offered, in seconds (0 is off).
const CHOICES: [u64; 5] = [0, 5, 15, 30, 60];
const DEFAULT_SECONDS: u64 = 30;
/// Where the browser remembers the choice.
const STORAGE_KEY: &str = "idem.refresh";

/// "Refresh every 30 s": reloads the page on an interval the viewer picks
/// (or never), not while the tab is hidden and not while the person is
/// writing in one of its fields. The server answers repeated reads from a
/// short shared cache, so many open tabs do not multiply database load.
///
/// An island: the page around it is rendered by the server only, so a tick
/// reloads the whole page rather than re-reading its data in place.
#[island]
pub fn LiveRefresh() -> impl IntoView {
    let seconds = RwSignal::new(DEFAULT_SECONDS);
    let paused = RwSignal::new(false);

    // Browser only (effects never run on the server): restore the choice.
    Effect::new(move |_| {
        let saved = storage()
            .and_then(|s| s.get_item(STORAGE_KEY).ok().flatten())
            .and_then(|v| v.parse().ok())
            .filter(|s| CHOICES.contains(s));
        if let Some(saved) = saved {
            seconds.set(saved);
        }
    });
    Effect::new(move |previous: Option<Option<IntervalHandle>>| {
        if let Some(Some(handle)) = previous {
            handle.clear();
        }
        let every = seconds.get();
        if every == 0 {
            return None;
        }
        set_interval_with_handle(
            move || {
                let hidden = document().hidden();
                paused.set(hidden);
                if !hidden && !writing() {
                    let _ = window().location().reload();
                }
            },
            Duration::from_secs(every),
        )
        .ok()
    });

    let on_change = move |ev| {
        let value: u64 = event_target_value(&ev).parse().unwrap_or(0);
        seconds.set(value);
        if let Some(storage) = storage() {
            let _ = storage.set_item(STORAGE_KEY, &value.to_string());
        }
    };
    view! {
        <label class="refresh">
            "Refresh "
            <select on:change=on_change prop:value=move || seconds.get().to_string()>
                {CHOICES
                    .iter()
                    .map(|s| {
                        let label = if *s == 0 { "off".to_owned() } else { format!("every {s} s") };
                        view! { <option value=s.to_string() selected=move || seconds.get() == *s>{label}</option> }
                    })
                    .collect_view()}
            </select>
            {move || paused.get().then_some(" (paused while this tab is hidden)")}
        </label>
    }
}

/// Whether the person is in the middle of filling a field of the page: one
/// (other than this control) has the focus, or a text field holds something
/// other than what the page came with. A reload would throw their words
/// away.
fn writing() -> bool {
    use leptos::wasm_bindgen::JsCast;
    let document = document();
    let focused = document.active_element().is_some_and(|e| {
        matches!(e.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT")
            && e.closest(".refresh").ok().flatten().is_none()
    });
    let Ok(fields) = document.query_selector_all("input[type=text], input[type=search], textarea")
    else {
        return focused;
    };
    let edited = (0..fields.length())
        .filter_map(|i| fields.item(i))
        .any(|node| {
            if let Some(input) = node.dyn_ref::<web_sys::HtmlInputElement>() {
                input.value() != input.default_value()
            } else if let Some(area) = node.dyn_ref::<web_sys::HtmlTextAreaElement>() {
                area.default_value()
                    .is_ok_and(|initial| area.value() != initial)
            } else {
                false
            }
        });
    focused || edited
}

fn storage() -> Option<web_sys::Storage> {
    window().local_storage().ok().flatten()
}
