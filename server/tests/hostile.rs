//! Hostile input over every page a URL can reach: whatever text lands in a
//! path segment or a query value, the answer is a page (2xx, 3xx or 4xx),
//! never a 5xx, and NFC and NFD spellings of a key stay two keys.

mod common;

use common::spawn_app;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hostile_value_in_any_route_gets_a_server_error() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    claimed(&app.store, "orders", "key-1").await;
    let mut failures = Vec::new();
    for route in ROUTES {
        for (what, value) in hostile() {
            let path = route.replace("{}", &value);
            let response = app
                .client
                .get(app.url(&path))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{route} with {what}: no answer: {e}"));
            let status = response.status().as_u16();
            if status >= 500 {
                failures.push(format!("{status} for {route} with {what}"));
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
