use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_location;

use crate::{
    api::{LoginInfo, LoginNote, get_login_info},
    components::Loaded,
    links,
};

/// `/login?next=…`: a plain form (it works without JavaScript) that posts to
/// the server's `/login`, which signs in and sends the person on to `next`.
#[component]
pub fn LoginPage() -> impl IntoView {
    let location = use_location();
    let search = location.search.get_untracked();
    let next = links::query_param(&search, "next")
        .map(|n| links::safe_next(&n))
        .unwrap_or_else(|| "/".into());
    let info = Resource::new(|| (), |_| get_login_info());
    let render = move |info: LoginInfo| {
        // What the server said of this browser's last sign-in (never what
        // the address says: a link with `?failed=1` shows nothing).
        let note = info.note.map(note_view);
        let provider = info
            .oidc_name
            .clone()
            .map(|name| provider_sign_in(&name, &next, info.password_login));
        if !info.password_login {
            return match provider {
                Some(button) => button.into_any(),
                None => proxy_sign_in_notice().into_any(),
            };
        }
        let form = view! {
            <form method="post" action="/login" class="login-form">
                <input type="hidden" name="next" value=next.clone()/>
                <label for="login-username">"Name"</label>
                <input id="login-username" name="username" autocomplete="username" required maxlength="128" autofocus/>
                <label for="login-password">"Password"</label>
                <input id="login-password" name="password" type="password" autocomplete="current-password" required maxlength="1024"/>
                <button type="submit">"Sign in"</button>
            </form>
        };
        let demo = demo_accounts_notice(&info.demo_accounts);
        let empty = (!info.any_accounts).then(|| {
            view! {
                <section class="notice">
                    <h2>"No accounts yet"</h2>
                    <p>"Create the first administrator on the server:"</p>
                    <pre>"idem user add alice --role admin"</pre>
                </section>
            }
        });
        view! { {note} {provider} {form} {demo} {empty} }.into_any()
    };
    view! {
        <Title text="Sign in"/>
        <div class="login">
            <h1>"Sign in to Idem"</h1>
            <Loaded resource=info render/>
        </div>
    }
}

fn note_view(note: LoginNote) -> impl IntoView {
    let text = match note {
        LoginNote::Failed => "Sign-in failed. Check the name and password, and try again.",
        LoginNote::Throttled => {
            "Too many failed sign-ins for this name from your address: it was not checked. \
             Wait a little and try again — at most a minute if you have signed in from here \
             before, otherwise up to 15 minutes."
        }
    };
    view! { <p class="error-panel" role="alert">{text}</p> }
}

/// "Sign in with Okta": a plain link to the server, which sends the browser
/// to the provider and back to `next`.
fn provider_sign_in(name: &str, next: &str, password_too: bool) -> impl IntoView + use<> {
    let href = links::with_query("/auth/oidc/start", &[("next", next)]);
    view! {
        <section class="sign-in-provider">
            <a class="button" href=href>"Sign in with " {name.to_owned()}</a>
            {password_too.then(|| view! { <p class="or">"or with a password"</p> })}
        </section>
    }
}

/// Where password sign-in is off: sign in through the identity proxy.
fn proxy_sign_in_notice() -> impl IntoView {
    view! {
        <section class="notice" role="note">
            <h2>"Sign in through your company's sign-in"</h2>
            <p>
                "This Idem takes who you are from the company's identity proxy; "
                "password sign-in is off. Open Idem through its usual address and "
                "sign in there when asked."
            </p>
            <p>
                "Reached this page through that address? Then the proxy did not say "
                "who you are, or your groups give you no role in Idem: ask an Idem administrator."
            </p>
        </section>
    }
}

/// The demo's accounts and their passwords; nothing outside the demo.
fn demo_accounts_notice(accounts: &[String]) -> Option<impl IntoView + use<>> {
    (!accounts.is_empty()).then(|| {
        let accounts = accounts
            .iter()
            .map(|a| view! { <li><code>{a.clone()}</code> " / " <code>{a.clone()}</code></li> })
            .collect_view();
        view! {
            <section class="notice" aria-labelledby="demo-accounts">
                <h2 id="demo-accounts">"Demo accounts"</h2>
                <p>"This is the demo. Each account's password is its name:"</p>
                <ul>{accounts}</ul>
            </section>
        }
    })
}
