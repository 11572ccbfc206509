//! Calling server functions as the page's own code does.

use super::TestApp;

/// Asks Idem to replay dead letter `id` under `action_id`, as the page's
/// own code does (the answer is data, not a redirect).
pub async fn replay(
    app: &TestApp,
    client: &reqwest::Client,
    id: i64,
    action_id: &str,
) -> reqwest::Response {
    replay_at(client, &app.base, id, action_id)
        .await
        .expect("the server answers")
}

/// The same, to the server (or proxy) at `base`; an error if nothing answers.
pub async fn replay_at(
    client: &reqwest::Client,
    base: &str,
    id: i64,
    action_id: &str,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{base}{}", server_fn("replay_dead_letter")))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[("id", id.to_string().as_str()), ("action_id", action_id)])
        .send()
        .await
}

/// The registered path of the server function whose name is `name`.
pub fn server_fn(name: &str) -> &'static str {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path)
        .find(|path| {
            // The name, then the hash Leptos adds (digits): `get_slo` is not
            // `get_slo_charts`.
            path.rsplit('/').next().is_some_and(|last| {
                last.strip_prefix(name)
                    .is_some_and(|hash| hash.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .unwrap_or_else(|| panic!("no server function named {name}"))
}

/// Calls the server function `name` with `fields`, as the page's own code
/// does (a GET with the query, or a same-origin form post).
pub async fn call(
    app: &TestApp,
    client: &reqwest::Client,
    name: &str,
    fields: &[(&str, String)],
) -> reqwest::Response {
    let path = server_fn(name);
    let method = leptos::server_fn::axum::server_fn_paths()
        .find(|(p, _)| *p == path)
        .map(|(_, m)| m)
        .expect("a registered function");
    let request = if method == axum::http::Method::GET {
        client.get(app.url(path)).query(fields)
    } else {
        client.request(method, app.url(path)).form(fields)
    };
    request
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .send()
        .await
        .expect("the server answers")
}
