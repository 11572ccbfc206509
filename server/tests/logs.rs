//! What Idem writes to its log, captured at the most verbose level as JSON
//! lines: each request is one span with its route, status and latency (and
//! the consumer and key it is about), and no password, session id or
//! cookie ever appears, through a whole sign-in, browse and sign-out.
//!
//! One test per file: the log subscriber is global to the process.

mod common;

use std::sync::{Arc, Mutex};

use common::{new_client, spawn_with};
use idem_domain::Role;
use idem_store::testing::TestDatabase;

const PASSWORD: &str = "correct horse battery staple 42";
const WRONG_PASSWORD: &str = "Tr0ub4dor&3 guessed wrong";

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

    let (status, _) = common::get(
        &client,
        &app.url("/keys/orders/refund%3AEU%2F2026?consumer=orders"),
    )
    .await;
    assert!(status == 200 || status == 404, "{status}");
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
    assert_eq!(key_page["span"]["key"], "refund:EU/2026");
    assert!(key_page["status"].is_u64(), "{key_page}");
    assert!(key_page["latency_ms"].is_f64(), "{key_page}");
    assert!(
        answered
            .iter()
            .any(|event| event["span"]["route"] == "/login" && event["status"] == 303),
        "the sign-in is a request like any other"
    );
}
