#![recursion_limit = "256"]

//! Idem's pages and server functions.
//!
//! Built twice: with `ssr` into the server (server functions run their
//! bodies, pages render to HTML) and with `hydrate` into the WASM. Pages are
//! Leptos islands: only the components marked `#[island]` run in the
//! browser (they take serializable props and no context from the page), so
//! the WASM holds those and no page's view code, and no page's data is sent
//! a second time for hydration. Everything that touches the database sits
//! behind `#[cfg(feature = "ssr")]`; the WASM never links it.

pub mod api;
pub mod auth;
#[cfg(feature = "ssr")]
pub mod cache;
#[cfg(feature = "ssr")]
mod charts;
mod components;
pub mod console;
pub mod error;
#[cfg(feature = "ssr")]
pub mod fingerprint;
pub mod format;
pub mod links;
mod pages;
pub mod ranges;
#[cfg(feature = "ssr")]
pub mod republish;
#[cfg(feature = "ssr")]
pub mod serving;
#[cfg(feature = "ssr")]
mod span;
pub mod zones;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::{
    ParamSegment, SsrMode, StaticSegment,
    components::{Route, Router, Routes},
};

use crate::{components::Layout, pages::*};

pub use pages::CREATE_TOKEN_PATH;

/// The HTML document around the app (server only renders it).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    serving::content_security_policy();
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="icon" href="data:,"/>
                // Here rather than in `App`: the address depends on the
                // build (`/pkg/<hash>/` when the assets are in the binary).
                <link
                    rel="stylesheet"
                    id="leptos"
                    href=format!("/{}/{}.css", options.site_pkg_dir, options.output_name)
                />
                <AutoReload options=options.clone()/>
                <HydrationScripts options islands=true/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Every page has a stable URL that can be pasted into an alert or a ticket.
/// Pages that show data render on the server with their data (`SsrMode::Async`),
/// so they are complete without JavaScript.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let data = SsrMode::Async;
    view! {
        <Title formatter=|title: String| format!("{title} · Idem")/>
        <Router>
            <Layout>
                <Routes fallback=NotFoundPage>
                    <Route path=StaticSegment("") view=OverviewPage ssr=data.clone()/>
                    <Route path=StaticSegment("keys") view=SearchPage ssr=data.clone()/>
                    <Route path=(StaticSegment("keys"), ParamSegment("key")) view=KeyLookupPage ssr=data.clone()/>
                    <Route
                        path=(StaticSegment("keys"), ParamSegment("consumer"), ParamSegment("key"))
                        view=KeyPage
                        ssr=data.clone()
                    />
                    <Route path=StaticSegment("unknown") view=UnknownPage ssr=data.clone()/>
                    <Route path=StaticSegment("dead-letters") view=DeadLettersPage ssr=data.clone()/>
                    <Route path=(StaticSegment("dead-letters"), ParamSegment("id")) view=DeadLetterPage ssr=data.clone()/>
                    <Route path=(StaticSegment("redrives"), ParamSegment("id")) view=RedrivePage ssr=data.clone()/>
                    <Route path=StaticSegment("reconcile") view=ReconcilePage ssr=data.clone()/>
                    <Route path=(StaticSegment("reconciliations"), ParamSegment("id")) view=ReconciliationPage ssr=data.clone()/>
                    <Route path=StaticSegment("outbox") view=OutboxPage ssr=data.clone()/>
                    <Route path=StaticSegment("login") view=LoginPage ssr=data.clone()/>
                    <Route path=StaticSegment("consumers") view=ConsumersPage ssr=data.clone()/>
                    <Route path=(StaticSegment("consumers"), ParamSegment("name")) view=ConsumerPage ssr=data.clone()/>
                    <Route path=StaticSegment("slo") view=SloPage ssr=data.clone()/>
                    <Route path=(StaticSegment("slo"), ParamSegment("name")) view=SloDetailPage ssr=data.clone()/>
                    <Route path=(StaticSegment("slo"), ParamSegment("name"), ParamSegment("consumer")) view=SloDetailPage ssr=data.clone()/>
                    <Route path=StaticSegment("audit") view=AuditPage/>
                    <Route path=StaticSegment("tokens") view=TokensPage ssr=data.clone()/>
                    <Route path=StaticSegment("checks") view=ChecksPage ssr=data.clone()/>
                    <Route path=(StaticSegment("checks"), ParamSegment("check")) view=ChecksPage ssr=data.clone()/>
                </Routes>
            </Layout>
        </Router>
    }
}
