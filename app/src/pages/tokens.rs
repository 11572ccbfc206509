//! `/tokens`: the API's tokens, for admins. Each is listed with its owner,
//! rights, state, expiry and last use (never its secret), and a live one
//! can be revoked. A new one is made by a plain form posting to
//! `/tokens/create`, whose answer is a page of its own showing the secret
//! this once (see `api::tokens`).

use leptos::{prelude::*, server_fn::ServerFn};
use leptos_meta::Title;

use crate::{
    api::{RevokeToken, TokenList, TokenRow, list_tokens},
    components::actions::{ActionAnswer, form_id},
    components::{Loaded, Time, provide_clock},
};

/// Where the create form posts (the server's own route, not a server function).
pub const CREATE_TOKEN_PATH: &str = "/tokens/create";

#[component]
pub fn TokensPage() -> impl IntoView {
    let data = Resource::new(|| (), |_| list_tokens());
    let render = move |list: TokenList| {
        provide_clock(list.clock);
        let action_id = list.action_id;
        let rows = list
            .tokens
            .into_iter()
            .map(|t| token_row(t, &action_id))
            .collect_view();
        view! {
            <table>
                <thead><tr><th>"Name"</th><th>"Owner"</th><th>"Rights"</th><th>"State"</th><th>"Created"</th><th>"Expires"</th><th>"Last used"</th><th><span class="visually-hidden">"Action"</span></th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
    };
    view! {
        <Title text="Tokens"/>
        <h1>"Tokens"</h1>
        <ActionAnswer/>
        <p class="lede">
            "Tokens open the API (/api/v1) for runbooks and scripts, never a page. A token acts "
            "with no more than its owner holds now, and the audit log names both. The secret is "
            "shown once, when the token is made; Idem keeps only its hash."
        </p>
        <Loaded resource=data render/>
        <CreateTokenForm/>
    }
}

fn token_row(t: TokenRow, action_id: &str) -> impl IntoView + use<> {
    let revoke = (t.state == "live").then(|| {
        let id = form_id(action_id, &format!("revoke-{}", t.name));
        view! {
            <form method="post" action=RevokeToken::PATH class="inline-form">
                <input type="hidden" name="name" value=t.name.clone()/>
                <input type="hidden" name="action_id" value=id/>
                <button type="submit">"Revoke"</button>
            </form>
        }
    });
    let ended = t.state != "live";
    view! {
        <tr class:ended=ended>
            <td><bdi>{t.name}</bdi></td>
            <td><bdi>{t.owner}</bdi></td>
            <td>{t.rights}</td>
            <td>{t.state}</td>
            <td><Time at=t.created_at/> " by " <bdi>{t.created_by}</bdi></td>
            <td>{t.expires_at.map_or_else(|| view! { "never" }.into_any(), |at| view! { <Time at/> }.into_any())}</td>
            <td>{t.last_used_at.map_or_else(|| view! { "never" }.into_any(), |at| view! { <Time at/> }.into_any())}</td>
            <td>{revoke}</td>
        </tr>
    }
}

#[component]
fn CreateTokenForm() -> impl IntoView {
    view! {
        <section class="action-form" aria-labelledby="create-token">
            <h2 id="create-token">"Make a token"</h2>
            <form method="post" action=CREATE_TOKEN_PATH>
                <label>"Name " <input type="text" name="name" required maxlength="64" autocomplete="off" spellcheck="false"/></label>
                <label>"Owner (an account) " <input type="text" name="owner" required maxlength="64" autocomplete="off" spellcheck="false"/></label>
                <label>
                    "Role "
                    <select name="role">
                        <option value="viewer">"viewer"</option>
                        <option value="operator">"operator"</option>
                        <option value="admin">"admin"</option>
                    </select>
                </label>
                <label>"Only on teams (comma-separated; empty: every team) " <input type="text" name="teams" maxlength="512" autocomplete="off" spellcheck="false"/></label>
                <label>"Expires after (30d, 12h; empty: never) " <input type="text" name="expires" maxlength="8" autocomplete="off" spellcheck="false"/></label>
                <button type="submit">"Make the token"</button>
            </form>
        </section>
    }
}
