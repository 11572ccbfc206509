//! Hostile input over every page a URL can reach: whatever text lands in a
//! path segment or a query value, the answer is a page (2xx, 3xx or 4xx),
//! never a 5xx, markup in it comes back escaped, and NFC and NFD spellings
//! of a key stay two keys. Every server function is called with all its
//! arguments valid but one, so each hostile value reaches the code that
//! reads that argument (not a "missing field" refusal in front of it), as
//! an admin, who may call them all.

use crate::common;
use crate::common::spawn_app;
use idem_store::{Delivery, Store, Ts, testing::TestDatabase};

/// Values a person, a bookmarklet or an attacker might put in a URL: raw
/// (already escaped, possibly badly) or to be percent-encoded.
fn hostile() -> Vec<(&'static str, String)> {
    let encode = idem_domain::encode_segment;
    vec![
        ("empty", String::new()),
        ("10 KB", "k".repeat(10 * 1024)),
        ("NUL", encode("a\0b")),
        ("control characters", encode("a\u{1}\u{7f}\u{1b}[31mb")),
        ("SQL", encode("'; DROP TABLE claims; --")),
        ("LIKE metacharacters", encode("%_%")),
        ("a bare percent", "%".to_owned()),
        ("a truncated escape", "%e2%9c".to_owned()),
        ("invalid UTF-8 escapes", "%ff%fe%00".to_owned()),
        ("dot segments", "../../etc/passwd".to_owned()),
        ("encoded dot segments", "%2e%2e%2f%2e%2e%2f".to_owned()),
        ("emoji", encode("🧾💸")),
        ("right-to-left override", encode("\u{202e}gnp.exe")),
        ("NFD", encode("cafe\u{301}")),
        (
            "a very large number",
            "99999999999999999999999999".to_owned(),
        ),
        ("negative", "-1".to_owned()),
        ("JSON", encode(r#"{"a":[1,2]}"#)),
        ("HTML", encode("<script>alert(1)</script>")),
        (
            "an attribute breaking out",
            encode("\"><img src=x onerror=alert(1)>"),
        ),
    ]
}

/// Every page with a `{}` where the hostile value goes.
const ROUTES: &[&str] = &[
    "/keys/orders/{}",
    "/keys/{}/key-1",
    "/keys/{}",
    "/keys?q={}",
    "/keys?consumer={}",
    "/keys?status={}",
    "/keys?cursor={}",
    "/keys?q=key&cursor={}",
    "/unknown?cursor={}",
    "/unknown?from={}",
    "/unknown?to={}",
    "/unknown?consumer={}",
    "/dead-letters?state={}",
    "/dead-letters?cursor={}",
    "/dead-letters?from={}&to={}",
    "/dead-letters?consumer={}",
    "/dead-letters/{}",
    "/outbox?cursor={}",
    "/?range={}",
    "/?from={}&to=2026-11-30T00:00Z",
    "/?from=2026-11-01T00:00Z&to={}",
    "/?consumer={}",
    "/slo/{}",
    "/login?next={}",
    "/audit?cursor={}",
    "/audit?actor={}",
    "/audit?action={}",
    "/audit?key={}",
];

async fn claimed(store: &Store, consumer: &str, key: &str) {
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: None,
        at: Ts::now(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

/// Markup an attacker hopes to see run, as it would stand in a page that
/// failed to escape a hostile value.
const MARKUP: &[&str] = &["<script>alert(1)</script>", "<img src=x onerror=alert(1)>"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_value_in_any_route_gets_a_server_error_or_comes_back_unescaped() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    app.create_user("olga", idem_domain::Role::Operator).await;
    let operator = app.sign_in("olga").await;
    claimed(&app.store, "orders", "key-1").await;
    let mut failures = Vec::new();
    for route in ROUTES {
        for (what, value) in hostile() {
            let path = route.replace("{}", &value);
            let response = operator
                .get(app.url(&path))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{route} with {what}: no answer: {e}"));
            let status = response.status().as_u16();
            if status >= 500 {
                failures.push(format!("{status} for {route} with {what}"));
            }
            if status == 403 {
                failures.push(format!(
                    "403 for {route} with {what}: the value never reached the page"
                ));
            }
            let body = response.text().await.unwrap_or_default();
            if MARKUP.iter().any(|markup| body.contains(markup)) {
                failures.push(format!("{route} with {what} came back as markup"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "server errors:\n{}",
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_in_the_address_is_refused_without_a_server_error() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let huge = "k".repeat(1024 * 1024);
    for path in [format!("/keys/orders/{huge}"), format!("/keys?q={huge}")] {
        match app.client.get(app.url(&path)).send().await {
            Ok(response) => assert!(
                response.status().is_client_error(),
                "{} for a 1 MB address",
                response.status()
            ),
            // hyper may close the connection on a request line this long:
            // refused, and the server goes on serving.
            Err(err) => assert!(!err.is_timeout(), "{err}"),
        }
    }
    let (status, _) = app.get("/keys/orders/still-serving").await;
    assert_eq!(status, 404, "the server still answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nfc_and_nfd_spellings_of_a_key_are_two_different_keys() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let nfc = "caf\u{e9}";
    let nfd = "cafe\u{301}";
    claimed(&app.store, "orders", nfc).await;
    let encode = |s: &str| idem_domain::encode_segment(s);
    let (status, _) = app.get(&format!("/keys/orders/{}", encode(nfc))).await;
    assert_eq!(status, 200, "the key as written");
    let (status, _) = app.get(&format!("/keys/orders/{}", encode(nfd))).await;
    assert_eq!(
        status, 404,
        "its NFD twin is another key, which was never claimed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_value_in_any_one_server_function_argument_or_form_field_gets_a_server_error_on_sqlite()
 {
    hostile_arguments(TestDatabase::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_value_in_any_one_server_function_argument_or_form_field_gets_a_server_error_on_postgres()
 {
    hostile_arguments(TestDatabase::postgres().await).await;
}

async fn hostile_arguments(db: TestDatabase) {
    // Every hostile sign-in reaches the password check: no throttling.
    let app = common::spawn_with(
        |c| {
            c.auth.sign_in.per_pair = u32::MAX;
            c.auth.sign_in.per_address = u32::MAX;
        },
        db,
    )
    .await;
    app.create_user("olga", idem_domain::Role::Admin).await;
    let operator = app.sign_in("olga").await;
    let fixture = common::Fixture::write(&app.store).await;

    let mut failures = Vec::new();
    let mut reached = 0;
    for (name, valid) in fixture.valid_calls("hostile") {
        let acts = common::server_fn(name).starts_with(idem_app::auth::prefix::ACT);
        for field in 0..valid.len() {
            for (call, (what, value)) in hostile().into_iter().enumerate() {
                // An action meets each hostile value with everything else
                // fresh — its own dead letter or unknown claim, its own
                // action id — so the value reaches the checks behind the
                // first outcome, not a resubmission's answer.
                let valid = if acts {
                    common::Fixture::write_named(&app.store, &format!("{name}-{field}-{call}"))
                        .await
                        .valid_calls(&format!("call-{field}-{call}"))
                        .into_iter()
                        .find(|(n, _)| n == &name)
                        .map(|(_, fields)| fields)
                        .expect("the same function")
                } else {
                    valid.clone()
                };
                // Values arrive form-decoded: undo the percent-encoding the
                // URL-path values above were given.
                let value = percent_encoding::percent_decode_str(&value)
                    .decode_utf8_lossy()
                    .into_owned();
                let mut fields = valid.clone();
                fields[field].1 = value;
                let response = common::call(&app, &operator, name, &fields).await;
                let status = response.status().as_u16();
                let body = response.text().await.unwrap_or_default();
                if status >= 500 || status == 401 || status == 403 {
                    failures.push(format!(
                        "{status} for {name} with {what} in {}: {body:.200}",
                        valid[field].0
                    ));
                }
                if body.contains("missing field") {
                    failures.push(format!(
                        "{name}: {} never reached the function: {body:.200}",
                        valid[field].0
                    ));
                }
                reached += 1;
            }
        }
    }
    // The plain handlers, every field hostile in turn.
    for (path, valid) in [
        (
            "/preferences/zone",
            vec![("tz", "Europe/Berlin"), ("next", "/")],
        ),
        (
            "/login",
            vec![("username", "nobody"), ("password", "x"), ("next", "/")],
        ),
    ] {
        for field in 0..valid.len() {
            for (what, value) in hostile() {
                let mut fields: Vec<(&str, String)> =
                    valid.iter().map(|(n, v)| (*n, v.to_string())).collect();
                fields[field].1 = value;
                let response = app
                    .post_form(
                        &operator,
                        path,
                        &fields
                            .iter()
                            .map(|(n, v)| (*n, v.as_str()))
                            .collect::<Vec<_>>(),
                    )
                    .await;
                let status = response.status().as_u16();
                if status >= 500 {
                    failures.push(format!(
                        "{status} for {path} with {what} in {}",
                        valid[field].0
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures of {reached} calls:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // A megabyte of form is refused before it is read.
    let huge = format!("reason={}", "r".repeat(1024 * 1024));
    let response = operator
        .post(app.url(common::server_fn("replay_dead_letter")))
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(app.get("/").await.0, 200, "the server still answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_value_in_a_header_gets_a_server_error() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let headers = [
        "cookie",
        "x-forwarded-for",
        "referer",
        "origin",
        "accept",
        "accept-language",
        "sec-fetch-site",
        "user-agent",
    ];
    let mut failures = Vec::new();
    for header in headers {
        for (what, value) in hostile() {
            // Header values are bytes, not UTF-8: a value with bytes HTTP
            // forbids (NUL, controls) cannot be sent at all.
            let Ok(value) = reqwest::header::HeaderValue::from_str(&value) else {
                continue;
            };
            for (method, path) in [
                ("GET", "/"),
                ("GET", "/keys/orders/key-1"),
                ("POST", "/logout"),
            ] {
                let request = match method {
                    "GET" => app.client.get(app.url(path)),
                    _ => app.client.post(app.url(path)),
                };
                let response = request
                    .header(header, value.clone())
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{header} with {what}: no answer: {e}"));
                let status = response.status().as_u16();
                if status >= 500 {
                    failures.push(format!(
                        "{status} for {method} {path} with {header}: {what}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "server errors:\n{}",
        failures.join("\n")
    );
    assert_eq!(app.get("/").await.0, 200, "still signed in and serving");
}
