//! The WASM entry point. `cargo xtask site` builds this crate for
//! `wasm32-unknown-unknown`; the generated JS calls [`hydrate`] once the
//! server-rendered page has loaded.
//!
//! Idem's pages are Leptos islands: the server renders every page, and the
//! browser hydrates only the `#[island]` components in it (the refresh
//! control, the zone switch's select, the action forms' busy buttons, the
//! hydration mark). The WASM holds those and nothing of the pages.

// Links idem-app, whose islands are this module's exports: without a use
// of the crate, rustc may leave it out of the cdylib, and no island would
// hydrate (leptos issue #2083).
use idem_app as _;

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
