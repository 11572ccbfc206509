use leptos::prelude::*;
use leptos_router::hooks::use_location;

use super::{AutoSubmit, HydrationMark};
use crate::{
    api::{ConsoleInfo, get_console_info},
    zones,
};

/// The navigation bar, the key search box, and the outage and demo banners
/// around every page.
#[component]
pub fn Layout(children: Children) -> impl IntoView {
    let info = Resource::new(|| (), |_| get_console_info());
    let location = use_location();
    let nav_link = move |href: &'static str, label: &'static str| {
        let current = move || {
            let path = location.pathname.get();
            if href == "/" {
                path == "/"
            } else {
                path == href || path.starts_with(&format!("{href}/"))
            }
        };
        view! {
            <li>
                <a href=href aria-current=move || current().then_some("page")>{label}</a>
            </li>
        }
    };
    view! {
        <a class="skip-link" href="#main">"Skip to content"</a>
        <header class="topbar">
            <nav aria-label="Main">
                <a class="brand" href="/">"Idem"</a>
                <ul>
                    {nav_link("/", "Overview")}
                    {nav_link("/keys", "Keys")}
                    {nav_link("/unknown", "Unknown")}
                    {nav_link("/dead-letters", "Dead letters")}
                    {nav_link("/outbox", "Outbox")}
                    {nav_link("/consumers", "Consumers")}
                    {nav_link("/checks", "Checks")}
                    {nav_link("/reconcile", "Reconcile")}
                    {nav_link("/slo", "SLOs")}
                    // Only what the person's role opens: the audit log is
                    // for operators and admins, the tokens for admins.
                    <Suspense fallback=|| ()>
                        {move || Suspend::new(async move {
                            let role = info.await.ok()?.user?.role;
                            let audit = role.includes(idem_domain::Role::Operator).then(|| nav_link("/audit", "Audit"));
                            let tokens = (role == idem_domain::Role::Admin).then(|| nav_link("/tokens", "Tokens"));
                            Some((audit, tokens))
                        })}
                    </Suspense>
                </ul>
            </nav>
            <form class="key-search" method="get" action="/keys" role="search">
                <label for="key-search-q" class="visually-hidden">"Find a key"</label>
                <input
                    id="key-search-q"
                    type="search"
                    name="q"
                    placeholder="Key, provider reference or message id"
                    maxlength="512"
                    autocomplete="off"
                    spellcheck="false"
                />
                <button type="submit">"Find"</button>
            </form>
        </header>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let info = info.await.ok()?;
                Some(console_bar(info))
            })}
        </Suspense>
        <main id="main" tabindex="-1">{children()}</main>
        // Last, so the mark means every island of the page has hydrated; a
        // page without JavaScript never carries it.
        <HydrationMark/>
    }
}

/// The outage and demo banners, who is signed in, and the time zone switch.
fn console_bar(info: ConsoleInfo) -> impl IntoView {
    let banner = info.demo.then(|| {
        view! {
            <p class="demo-banner" role="note">
                <strong>"Demo data. "</strong>
                "Everything on these pages was written by Idem's built-in simulator, "
                "a small fleet of fake consumers. Nothing here is real."
            </p>
        }
    });
    let outage = info.database_down_since.map(|since| {
        view! {
            <p class="outage-banner" role="alert">
                <strong>"Database unavailable since " {since} ". "</strong>
                "Read-only views may be stale; actions are disabled until it answers again. "
                "This page keeps working and recovers by itself."
            </p>
        }
    });
    let recheck = info.user.as_ref().filter(|u| u.recheck_pending).map(|_| {
        view! {
            <p class="outage-banner" role="status">
                <strong>"Your identity provider cannot be reached right now. "</strong>
                "Idem could not confirm your sign-in with it, so it goes on with the role it last "
                "confirmed, for a while; it asks again in a minute."
            </p>
        }
    });
    let account = info.user.map(|user| {
        let everywhere = user.provider_sign_out.then(|| view! {
            " · "
            <button type="submit" name="provider" value="1" class="link-button">
                "Sign out here and at your identity provider"
            </button>
        });
        view! {
            <form class="account" method="post" action="/logout">
                <span>"Signed in as " <strong>{user.username}</strong> " (" {rights_words(&user.rights, user.role)} ") "</span>
                <button type="submit" class="link-button">"Sign out"</button>
                {everywhere}
            </form>
        }
    });
    view! {
        {outage}
        {recheck}
        {banner}
        <div class="subbar">
            {account}
            <ZoneSwitch current=info.zone/>
        </div>
    }
}

/// "Times in UTC [change]": a plain form, so it works without JavaScript;
/// with JavaScript ([`super::AutoSubmit`]), choosing a zone submits it at once.
#[component]
fn ZoneSwitch(current: String) -> impl IntoView {
    let location = use_location();
    let here = move || {
        let search = location.search.get();
        let path = location.pathname.get();
        if search.is_empty() {
            path
        } else {
            format!("{path}?{}", search.trim_start_matches('?'))
        }
    };
    let mut offered: Vec<String> = zones::OFFERED.iter().map(|z| (*z).to_owned()).collect();
    if !offered.contains(&current) {
        offered.insert(1, current.clone());
    }
    let options = offered
        .into_iter()
        .map(|zone| {
            let selected = zone == current;
            view! { <option value=zone.clone() selected=selected>{zone.clone()}</option> }
        })
        .collect_view();
    view! {
        <form class="zone-switch" method="post" action="/preferences/zone">
            <label for="zone-select">"Times in "</label>
            <AutoSubmit>
                <select id="zone-select" name="tz">{options}</select>
            </AutoSubmit>
            <input type="hidden" name="next" value=here/>
            <noscript><button type="submit">"Change"</button></noscript>
        </form>
    }
}

/// A person's rights in a few words: `operator`, or `operator of payments`,
/// or `viewer; operator of payments, growth`.
fn rights_words(rights: &idem_domain::Rights, role: idem_domain::Role) -> String {
    if !rights.is_limited() {
        return role.as_str().to_owned();
    }
    let mut by_role: Vec<(idem_domain::Role, Vec<&str>)> = Vec::new();
    for (team, role) in rights.teams() {
        match by_role.iter_mut().find(|(r, _)| *r == role) {
            Some((_, teams)) => teams.push(team),
            None => by_role.push((role, vec![team])),
        }
    }
    let limited = by_role
        .iter()
        .map(|(role, teams)| format!("{role} of {}", teams.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    match rights.role_on(None) {
        Some(everywhere) => format!("{everywhere}; {limited}"),
        None => limited,
    }
}
