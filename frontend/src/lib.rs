//! The WASM entry point. cargo-leptos builds this crate for
//! `wasm32-unknown-unknown`; the generated JS calls [`hydrate`] once the
//! server-rendered page has loaded.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(idem_app::App);
}
