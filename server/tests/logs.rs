//! What Idem writes to its log, captured at the most verbose level as JSON
//! lines: each request is one span with its route, status and latency (and
//! the consumer and the fingerprint of the key it is about), and no
//! password, session id, cookie or key ever appears, through a whole
//! sign-in, browse and sign-out. The fingerprint is the one the key page
//! shows, and searching it finds the key.
//!
//! A test binary of its own (the others are in `tests/it/`): the log
//! subscriber it installs is global to the process, and it reads everything
//! the process logged. So it starts Idem itself, without the shared harness.

// A test's length follows the story it tells (the 80-line limit is for
// the product's functions).
#![allow(clippy::too_many_lines)]

use std::sync::{Arc, Mutex};

use idem::{Application, Config};
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

    let db = TestDatabase::sqlite().await;
    let app = Application::build(Config::for_tests(&db.url))
        .await
        .expect("Idem starts");
    let base = format!("http://{}", app.local_addr());
    let store = app.store().clone();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    let url = |path: &str| format!("{base}{path}");
    let hash = idem::auth::Passwords::new(1)
        .hash(PASSWORD.into())
        .await
        .unwrap();
    store
        .people()
        .create_user(
            &idem_store::testing::account("olga"),
            Role::Operator,
            Some(&hash),
        )
        .await
        .unwrap();

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap();
    let post_form = |path: &str, form: &[(&str, &str)]| {
        client
            .post(url(path))
            .header("sec-fetch-site", "same-origin")
            .form(form)
            .send()
    };
    let get = |path: String| {
        let request = client.get(url(&path)).send();
        async move {
            let response = request.await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let wrong = post_form(
        "/login",
        &[("username", "olga"), ("password", WRONG_PASSWORD)],
    )
    .await
    .unwrap();
    assert!(
        wrong.headers()["location"]
            .to_str()
            .unwrap()
            .contains("failed=1")
    );
    let signed_in = post_form(
        "/login",
        &[("username", "olga"), ("password", PASSWORD), ("next", "/")],
    )
    .await
    .unwrap();
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

    let mut tx = store.begin().await.unwrap();
    let delivery = idem_store::Delivery {
        consumer: "orders",
        key: KEY,
        payload_hash: None,
        at: idem_store::Ts::now(),
    };
    tx.claim(&delivery).await.unwrap();
    tx.commit().await.unwrap();
    let (status, page) =
        get("/keys/orders/refund%3AEU%2F2026%2F%C3%98-1842?consumer=orders".into()).await;
    assert_eq!(status, 200, "{page}");
    let fingerprint = page
        .split_once("in Idem&#x27;s logs as ")
        .or_else(|| page.split_once("in Idem's logs as "))
        .and_then(|(_, rest)| rest.split_once("kf_"))
        .map(|(_, rest)| format!("kf_{}", &rest[..16]))
        .unwrap_or_else(|| panic!("the key page shows the key's fingerprint: {page}"));
    // Stored the first time it is logged: searching it soon finds the key.
    let mut found = String::new();
    for _ in 0..50 {
        let (status, html) = get(format!("/keys?q={fingerprint}")).await;
        assert_eq!(status, 200, "{html}");
        found = html;
        if found.contains(KEY) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        found.contains(KEY),
        "searching {fingerprint} finds the key: {found}"
    );
    assert_eq!(get("/".into()).await.0, 200);
    let out = post_form("/logout", &[]).await.unwrap();
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
