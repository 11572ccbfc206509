//! What Idem writes to its log, captured at the most verbose level as JSON
//! lines: each request is one span with its route, status and latency (and
//! the consumer and the fingerprint of the key it is about), and no
//! password, session id, cookie or key ever appears, through a whole
//! sign-in, browse and sign-out. The fingerprint is the one the key page
//! shows, and searching it finds the key.
//!
//! One test per file: the log subscriber is global to the process.

mod common;

use std::sync::{Arc, Mutex};

use common::{new_client, spawn_with};
use idem_domain::Role;
use idem_store::testing::TestDatabase;

const PASSWORD: &str = "correct horse battery staple 42";
const WRONG_PASSWORD: &str = "Tr0ub4dor&3 guessed wrong";
/// The key the test browses to; it never appears in the log.
const KEY: &str = "refund:EU/2026/Ø-1842";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_browse_and_sign_out_logs_spans_and_never_a_password_or_session_id() {
    let captured = Captured::default();
    let writer = captured.clone();
    idem::telemetry::init_with(
        true,
        // Everything, except the test's own HTTP client (its cookie jar logs
        // the cookies it receives; that is the browser's side, not Idem's).
        tracing_subscriber::EnvFilter::new("trace,cookie_store=off,reqwest=off"),
        move || writer.clone(),
    );

    let app = spawn_with(|_| {}, TestDatabase::sqlite().await).await;
    let hash = idem::auth::Passwords::new(1)
        .hash(PASSWORD.into())
        .await
        .unwrap();
    app.store
        .create_user("olga", Role::Operator, Some(&hash))
        .await
        .unwrap();

    let client = new_client();
    let wrong = app
        .post_form(
            &client,
            "/login",
            &[("username", "olga"), ("password", WRONG_PASSWORD)],
        )
        .await;
    assert!(
        wrong.headers()["location"]
            .to_str()
            .unwrap()
            .contains("failed=1")
    );
    let signed_in = app
        .post_form(
            &client,
            "/login",
            &[("username", "olga"), ("password", PASSWORD), ("next", "/")],
        )
        .await;
    assert_eq!(signed_in.status().as_u16(), 303);
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    let session_id = cookie
        .split(';')
        .next()
        .and_then(|pair| pair.split_once('='))
        .map(|(_, value)| value.to_owned())
        .expect("a session cookie");
    assert!(session_id.len() >= 16, "{cookie}");

    let mut tx = app.store.begin().await.unwrap();
    let delivery = idem_store::Delivery {
        consumer: "orders",
        key: KEY,
        payload_hash: None,
        at: idem_store::Ts::now(),
    };
    tx.claim(&delivery).await.unwrap();
    tx.commit().await.unwrap();
    let (status, page) = common::get(
        &client,
        &app.url("/keys/orders/refund%3AEU%2F2026%2F%C3%98-1842?consumer=orders"),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    let shown = common::visible(&page);
    let fingerprint = shown
        .split_once("in Idem's logs as ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the key page shows the key's fingerprint: {shown}"))
        .to_owned();
    // Stored in the background the first time it is logged: searching it
    // soon finds the key.
    let mut found = String::new();
    for _ in 0..50 {
        let (status, html) =
            common::get(&client, &app.url(&format!("/keys?q={fingerprint}"))).await;
        assert_eq!(status, 200, "{html}");
        found = common::visible(&html);
        if found.contains(KEY) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        found.contains(KEY),
        "searching {fingerprint} finds the key: {found}"
    );
    assert_eq!(common::get(&client, &app.url("/")).await.0, 200);
    let out = app.post_form(&client, "/logout", &[]).await;
    assert_eq!(out.status().as_u16(), 303);

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.lines().count() > 20, "logging is on: {logs}");
    for (secret, what) in [
        (PASSWORD, "the password"),
        (WRONG_PASSWORD, "a mistyped password"),
        (session_id.as_str(), "the session id"),
        ("idem_session=", "the session cookie"),
        (KEY, "the key"),
        ("refund:EU", "part of the key"),
        ("refund%3AEU", "the key as a link writes it"),
    ] {
        let leaks: Vec<&str> = logs.lines().filter(|line| line.contains(secret)).collect();
        assert!(leaks.is_empty(), "{what} is in the log: {leaks:#?}");
    }

    // The key page's request: one event with the route, consumer, key,
    // status and latency.
    let answered: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|event: &serde_json::Value| event["message"] == "answered")
        .collect();
    let key_page = answered
        .iter()
        .find(|event| event["span"]["route"] == "/keys/{consumer}/{key}")
        .unwrap_or_else(|| panic!("no answered event for the key page in {answered:#?}"));
    assert_eq!(key_page["span"]["method"], "GET");
    assert_eq!(key_page["span"]["consumer"], "orders");
    assert_eq!(key_page["span"]["key_fp"], fingerprint.as_str());
    assert!(key_page["span"].get("key").is_none(), "{key_page}");
    assert!(key_page["status"].is_u64(), "{key_page}");
    assert!(key_page["latency_ms"].is_f64(), "{key_page}");
    assert!(
        answered
            .iter()
            .any(|event| event["span"]["route"] == "/login" && event["status"] == 303),
        "the sign-in is a request like any other"
    );
}
