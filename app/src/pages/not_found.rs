use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFoundPage() -> impl IntoView {
    #[cfg(feature = "ssr")]
    crate::serving::set_status(404);
    view! {
        <Title text="Not found"/>
        <section class="error-panel" role="alert">
            <h1>"Not found"</h1>
            <p>"There is no page at this address. Keys live under " <code>"/keys/{consumer}/{key}"</code> "; the search box above finds them."</p>
        </section>
    }
}
