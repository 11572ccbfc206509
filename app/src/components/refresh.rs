use std::time::Duration;

use leptos::prelude::*;

/// The choices offered, in seconds (0 is off).
const CHOICES: [u64; 5] = [0, 5, 15, 30, 60];
const DEFAULT_SECONDS: u64 = 30;
/// Where the browser remembers the choice.
const STORAGE_KEY: &str = "idem.refresh";

/// "Refresh every 30 s": reloads the page's data on an interval the viewer
/// picks (or never), and not while the tab is hidden. The server answers
/// repeated reads of a list from a short shared cache, so many open tabs do
/// not multiply database load.
#[component]
pub fn LiveRefresh(on_tick: Callback<()>) -> impl IntoView {
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
                if !hidden {
                    on_tick.run(());
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

fn storage() -> Option<web_sys::Storage> {
    window().local_storage().ok().flatten()
}
