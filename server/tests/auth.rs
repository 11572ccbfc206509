//! Authentication and the hardened session, over real HTTP: every rule is
//! checked on the server.

mod common;

use std::{
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use common::{TestApp, get, new_client, spawn_bare, spawn_with, visible};
use idem_domain::Role;
use idem_store::testing::TestDatabase;

/// Log lines of this test binary, to check what errors write (and never write).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Writer(writer.clone()))
            .try_init();
        buffer
    })
    .clone()
}

struct Writer(Arc<Mutex<Vec<u8>>>);
impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn app() -> TestApp {
    logs();
    spawn_with(|_| {}, TestDatabase::sqlite().await).await
}

fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn session_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

async fn sign_in_with(
    app: &TestApp,
    client: &reqwest::Client,
    name: &str,
    password: &str,
    next: &str,
) -> reqwest::Response {
    app.post_form(
        client,
        "/login",
        &[("username", name), ("password", password), ("next", next)],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_deep_link_goes_through_sign_in_and_lands_on_that_page_and_query() {
    let app = app().await;
    let client = new_client();
    let deep = "/keys/orders/refund:EU%2F2026%2F%C3%98-1842?from=alert#ignored";
    let response = client.get(app.url(deep)).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
    let to_login = location(&response);
    assert_eq!(
        to_login,
        "/login?next=%2Fkeys%2Forders%2Frefund%3AEU%252F2026%252F%25C3%2598-1842%3Ffrom%3Dalert"
    );
    let next = idem_app::links::query_param(to_login.split_once('?').unwrap().1, "next").unwrap();

    let response = sign_in_with(&app, &client, "viewer", "viewer-password", &next).await;
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(
        location(&response),
        "/keys/orders/refund:EU%2F2026%2F%C3%98-1842?from=alert"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sign_in_next_is_followed_only_to_a_local_path() {
    let app = app().await;
    for hostile in [
        "//evil.example/",
        "/\\evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        "/%2F%2Fevil.example",
        "/%5Cevil.example",
        "%2F%2Fevil.example",
        "/\tevil",
        "",
        &format!("/{}", "a".repeat(5000)),
    ] {
        let response =
            sign_in_with(&app, &new_client(), "viewer", "viewer-password", hostile).await;
        assert_eq!(response.status().as_u16(), 303, "{hostile:?}");
        assert_eq!(location(&response), "/", "{hostile:?}");
    }
    let response = sign_in_with(
        &app,
        &new_client(),
        "viewer",
        "viewer-password",
        "/unknown?cursor=x",
    )
    .await;
    assert_eq!(location(&response), "/unknown?cursor=x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_is_http_only_and_lax_and_over_https_secure_with_a_host_prefix() {
    let app = app().await;
    let response = sign_in_with(&app, &new_client(), "viewer", "viewer-password", "/").await;
    let cookie = session_cookie(&response, "idem_session").expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");

    let secure = spawn_with(
        |c| c.auth.public_url = url::Url::parse("https://idem.example.com").unwrap(),
        TestDatabase::sqlite().await,
    )
    .await;
    secure.create_user("alice", Role::Viewer).await;
    let response = sign_in_with(&secure, &new_client(), "alice", "alice-password", "/").await;
    let cookie =
        session_cookie(&response, "__Host-idem_session").expect("a __Host- cookie over HTTPS");
    for attribute in ["Secure", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Domain"),
        "__Host- cookies carry no Domain"
    );
    assert!(response.headers().contains_key("strict-transport-security"));
}

fn cookie_value(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_issues_a_new_session_id_and_the_old_one_stops_working() {
    let app = app().await;
    app.create_user("olga", Role::Operator).await;
    let client = new_client();
    let first = sign_in_with(&app, &client, "viewer", "viewer-password", "/").await;
    let before = cookie_value(&session_cookie(&first, "idem_session").unwrap());
    let second = sign_in_with(&app, &client, "olga", "olga-password", "/").await;
    let after = cookie_value(&session_cookie(&second, "idem_session").unwrap());
    assert_ne!(before, after, "the id is rotated at sign-in");

    let stale = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = stale
        .get(app.url("/unknown"))
        .header("cookie", &before)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        303,
        "the pre-sign-in id is no longer a session"
    );
    let response = stale
        .get(app.url("/unknown"))
        .header("cookie", &after)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_destroys_the_session_on_the_server() {
    let app = app().await;
    let client = new_client();
    let response = sign_in_with(&app, &client, "viewer", "viewer-password", "/").await;
    let cookie = cookie_value(&session_cookie(&response, "idem_session").unwrap());
    let out = app.post_form(&client, "/logout", &[]).await;
    assert_eq!(
        (out.status().as_u16(), location(&out)),
        (303, "/login".to_owned())
    );

    let replay = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = replay
        .get(app.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        303,
        "a copied cookie does not outlive sign-out"
    );
    let audit = app.store.latest_audit(5).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action == "logout" && e.actor == "viewer" && e.result == "ok"),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_ends_but_reading_pages_keeps_it_alive() {
    let app = spawn_with(
        |c| c.auth.idle_timeout = Duration::from_secs(3),
        TestDatabase::sqlite().await,
    )
    .await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(app.get("/unknown").await.0, 200, "reads count as activity");
    }
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let response = app.client.get(app.url("/unknown")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303, "idle past the timeout");
}

/// Every stored session expiry, as text (SQLite stores text, Postgres a timestamp).
async fn stored_expiries(app: &TestApp) -> Vec<String> {
    const SQL: &str = "SELECT CAST(expiry_date AS TEXT) FROM sessions ORDER BY 1";
    match (app.store.sqlite_pool(), app.store.postgres_pool()) {
        (Some(pool), _) => sqlx::query_scalar(SQL).fetch_all(pool).await,
        (_, Some(pool)) => sqlx::query_scalar(SQL).fetch_all(pool).await,
        (None, None) => unreachable!("a store has one pool or the other"),
    }
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_pages_does_not_rewrite_the_session_on_every_request() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let app = spawn_with(|_| {}, db).await;
        assert_eq!(app.get("/unknown").await.0, 200);
        let stored = stored_expiries(&app).await;
        assert_eq!(stored.len(), 1, "one signed-in session: {stored:?}");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        for _ in 0..3 {
            assert_eq!(app.get("/unknown").await.0, 200);
        }
        assert_eq!(
            stored_expiries(&app).await,
            stored,
            "with a 30-minute idle timeout, reads a second later leave the stored expiry alone"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_at_the_absolute_timeout_however_busy() {
    let app = spawn_with(
        |c| c.auth.absolute_timeout = Duration::from_secs(3),
        TestDatabase::sqlite().await,
    )
    .await;
    assert_eq!(app.get("/unknown").await.0, 200);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let _ = app.get("/unknown").await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response = app.client.get(app.url("/unknown")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_a_role_or_disabling_a_user_ends_their_sessions() {
    let app = app().await;
    assert_eq!(app.get("/").await.0, 200);
    app.store.set_role("viewer", Role::Operator).await.unwrap();
    assert_eq!(
        app.client
            .get(app.url("/"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );

    let again = app.sign_in("viewer").await;
    assert_eq!(get(&again, &app.url("/")).await.0, 200);
    app.store.set_disabled("viewer", true).await.unwrap();
    assert_eq!(
        again
            .get(app.url("/"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    let refused = sign_in_with(&app, &new_client(), "viewer", "viewer-password", "/").await;
    assert!(
        location(&refused).starts_with("/login?failed=1"),
        "a disabled user cannot sign in"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_post_is_refused_and_a_same_origin_post_accepted() {
    let app = app().await;
    let form = [
        ("username", "viewer"),
        ("password", "viewer-password"),
        ("next", "/"),
    ];
    let post = |headers: &[(&'static str, &'static str)]| {
        let mut request = new_client().post(app.url("/login")).form(&form);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request.send()
    };
    assert_eq!(
        post(&[("sec-fetch-site", "cross-site")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        post(&[("sec-fetch-site", "same-site")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        post(&[("origin", "https://evil.example")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        post(&[]).await.unwrap().status().as_u16(),
        403,
        "no proof of origin at all"
    );
    assert_eq!(
        post(&[("sec-fetch-site", "same-origin")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    // Without Sec-Fetch-Site, an Origin equal to the public origin is enough.
    assert_eq!(
        post(&[("origin", "http://127.0.0.1")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    // Sign-out is a state change too.
    let out = app
        .client
        .post(app.url("/logout"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(out.status().as_u16(), 403);
    assert_eq!(app.get("/").await.0, 200, "still signed in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_server_function_called_properly_answers_its_role_and_refuses_the_others() {
    let app = app().await;
    app.create_user("olga", Role::Operator).await;
    app.create_user("ada", Role::Admin).await;
    let operator = app.sign_in("olga").await;
    let admin = app.sign_in("ada").await;
    let anonymous = new_client();
    let fixture = common::Fixture::write(&app.store).await;

    // The table of valid calls covers every registered function.
    let mut registered: Vec<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.to_owned())
        .collect();
    let mut covered: Vec<String> = fixture
        .valid_calls("any")
        .iter()
        .map(|(name, _)| common::server_fn(name).to_owned())
        .collect();
    registered.sort();
    covered.sort();
    assert_eq!(
        registered, covered,
        "a server function without valid arguments to test"
    );

    for (who, client, role) in [
        ("anonymous", &anonymous, None),
        ("viewer", &app.client, Some(Role::Viewer)),
        ("operator", &operator, Some(Role::Operator)),
        ("admin", &admin, Some(Role::Admin)),
    ] {
        for (name, fields) in fixture.valid_calls(who) {
            let path = common::server_fn(name);
            let needed = idem_app::auth::role_for_api_path(path).unwrap_or_else(|()| {
                panic!("{path} is under no authorization rule: it would be refused to everyone")
            });
            let response = common::call(&app, client, name, &fields).await;
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            let expected = match (needed, role) {
                (None, _) => 200,
                (Some(_), None) => 401,
                (Some(needed), Some(role)) if role.includes(needed) => 200,
                (Some(_), Some(_)) => 403,
            };
            assert_eq!(status, expected, "{name} as {who}: {body:.300}");
        }
    }
    // The calls did what they say: the operator's replay and resolution
    // reached the database (the admin's came second and found them done).
    let audit = app.store.audit_for_key("orders", "key-1").await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action == "replay" && e.actor == "olga")
            && audit
                .iter()
                .any(|e| e.action == "resolve:sent" && e.actor == "olga"),
        "{audit:?}"
    );

    // A path no rule covers is refused even to an admin (deny by default),
    // and a viewer calling an operator action is refused and audited.
    let call = |client: &reqwest::Client, path: &str| {
        client
            .post(app.url(path))
            .header("sec-fetch-site", "same-origin")
            .send()
    };
    assert_eq!(
        call(&admin, "/api/new_function_without_a_rule")
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        call(&app.client, "/api/act/replay_dead_letter")
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    let audit = app.store.latest_audit(10).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action == "denied"
            && e.actor == "viewer"
            && e.target.as_deref() == Some("/api/act/replay_dead_letter")),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_from_a_trusted_proxy_names_the_client() {
    let app = spawn_with(
        |c| c.auth.trusted_proxies = idem::auth::TrustedProxies::parse("127.0.0.1").unwrap(),
        TestDatabase::sqlite().await,
    )
    .await;
    let attempt = |ip: &'static str, name: &'static str, password: &'static str| {
        new_client()
            .post(app.url("/login"))
            .header("sec-fetch-site", "same-origin")
            .header("x-forwarded-for", ip)
            .form(&[("username", name), ("password", password), ("next", "/")])
            .send()
    };
    for i in 0..20 {
        let name: &'static str = Box::leak(format!("nobody-{i}").into_boxed_str());
        attempt("198.51.100.1", name, "x").await.unwrap();
    }
    let other_client = attempt("198.51.100.2", "viewer", "viewer-password")
        .await
        .unwrap();
    assert_eq!(
        location(&other_client),
        "/",
        "another client behind the same proxy is not locked"
    );
    let audit = app.store.latest_audit(5).await.unwrap();
    assert_eq!(audit[0].client_addr.as_deref(), Some("198.51.100.2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_carry_security_headers_and_the_csp_nonce_is_the_hydration_scripts_nonce() {
    let app = app().await;
    let response = app.client.get(app.url("/")).send().await.unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let csp = header("content-security-policy");
    for directive in [
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "object-src 'none'",
        "'wasm-unsafe-eval'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("referrer-policy"), "same-origin");
    assert_eq!(header("cache-control"), "no-store");
    assert!(
        !response.headers().contains_key("strict-transport-security"),
        "no HSTS over plain HTTP"
    );
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("a nonce")
        .to_owned();
    let html = response.text().await.unwrap();
    assert!(
        html.contains(&format!(r#"<script type="module" nonce="{nonce}">"#)),
        "the hydration script carries the nonce"
    );

    let other = app.client.get(app.url("/")).send().await.unwrap();
    let other_csp = other.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!other_csp.contains(&nonce), "a fresh nonce per response");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_query_shows_a_reference_and_logs_the_cause_without_secrets() {
    let db = TestDatabase::sqlite().await;
    let url = db.url.clone();
    let app = spawn_with(|_| {}, db).await;
    // Break the schema under the running server.
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("ALTER TABLE dead_letters RENAME TO dead_letters_gone")
        .execute(&pool)
        .await
        .unwrap();

    let (status, html) = app.get("/dead-letters").await;
    assert_eq!(status, 500);
    let page = visible(&html);
    assert!(
        page.contains("Something went wrong on the server. Reference: "),
        "{page}"
    );
    assert!(
        !page.contains("no such table") && !page.contains("dead_letters_gone"),
        "internals stay off the page"
    );
    let reference = page
        .split("Reference: ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let logged = String::from_utf8(logs().lock().unwrap().clone()).unwrap();
    let line = logged
        .lines()
        .find(|l| l.contains(&reference))
        .expect("the reference is in the log");
    assert!(
        line.contains("no such table"),
        "the log has the cause: {line}"
    );
    assert!(
        !logged.contains("viewer-password"),
        "no password in the logs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_live_in_postgres_too() {
    logs();
    let app = spawn_with(|_| {}, TestDatabase::postgres().await).await;
    assert_eq!(app.get("/unknown").await.0, 200);
    let client = new_client();
    let response = sign_in_with(&app, &client, "viewer", "viewer-password", "/").await;
    let cookie = cookie_value(&session_cookie(&response, "idem_session").unwrap());
    assert_eq!(get(&client, &app.url("/")).await.0, 200);
    app.post_form(&client, "/logout", &[]).await;
    let replay = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = replay
        .get(app.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_mode_and_only_demo_mode_has_the_three_demo_accounts() {
    logs();
    let quiet = spawn_with(|_| {}, TestDatabase::sqlite().await).await;
    let names: Vec<String> = quiet
        .store
        .users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.username)
        .collect();
    assert_eq!(
        names,
        ["viewer"],
        "outside demo mode only the accounts someone created exist"
    );

    let demo = spawn_bare(
        |c| {
            c.demo = idem::config::DemoSetting::On;
            c.demo_backfill = Duration::ZERO;
        },
        TestDatabase::sqlite().await,
    )
    .await;
    for name in ["viewer", "operator", "admin"] {
        let response = sign_in_with(&demo, &new_client(), name, name, "/").await;
        assert_eq!(location(&response), "/", "{name} / {name}");
    }
    let login_page = get(&new_client(), &demo.url("/login")).await.1;
    assert!(visible(&login_page).contains("Demo accounts"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_refuses_to_listen_beyond_loopback_unless_asked_for_by_name() {
    logs();
    let db = TestDatabase::sqlite().await;
    let beyond = |demo| {
        let mut config = idem::Config::for_tests(&db.url);
        // An address of no machine here (TEST-NET-1): refused before binding.
        config.addr = "192.0.2.1:0".parse().unwrap();
        config.embedded_default = true;
        config.demo = demo;
        config.demo_backfill = Duration::ZERO;
        config
    };
    let refused = idem::Application::build(beyond(idem::config::DemoSetting::Auto))
        .await
        .err()
        .expect("the demo is refused on a non-loopback address");
    let said = refused.to_string();
    assert!(
        said.contains("IDEM_DEMO=1") && said.contains("192.0.2.1"),
        "{said}"
    );
    // Asked for by name, start-up goes on (and here fails only to bind).
    let asked = idem::Application::build(beyond(idem::config::DemoSetting::On))
        .await
        .err()
        .expect("192.0.2.1 is not this machine's");
    assert!(
        matches!(asked, idem::startup::StartError::Bind { .. }),
        "{asked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_s_accounts_are_disabled_when_its_database_is_served_without_the_demo() {
    logs();
    let db = TestDatabase::sqlite().await;
    let start = |demo| {
        let mut config = idem::Config::for_tests(&db.url);
        config.demo = demo;
        config.demo_backfill = Duration::ZERO;
        idem::Application::build(config)
    };
    drop(start(idem::config::DemoSetting::On).await.unwrap());
    // Someone else's account named like a demo one keeps working.
    db.store
        .set_password(
            "viewer",
            &idem::auth::Passwords::new(1)
                .hash("a real one".into())
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    drop(start(idem::config::DemoSetting::Off).await.unwrap());
    let disabled = |name: &'static str| {
        let store = db.store.clone();
        async move { store.user_by_name(name).await.unwrap().unwrap().disabled }
    };
    assert!(disabled("admin").await, "admin / admin would let anyone in");
    assert!(disabled("operator").await);
    assert!(
        !disabled("viewer").await,
        "its password is no longer its name"
    );
    // The demo back on brings its accounts back.
    drop(start(idem::config::DemoSetting::On).await.unwrap());
    assert!(!disabled("admin").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_s_debug_output_never_holds_the_database_password() {
    let url = "postgres://idem:s3cr3t-pa55@127.0.0.1:1/idem";
    let store = idem_store::Store::connect(&idem_store::StoreConfig::new(url)).unwrap();
    let state = idem_app::ssr::AppState::new(
        leptos::prelude::LeptosOptions::builder()
            .output_name("idem")
            .build(),
        store.clone(),
        idem_app::api::ConsoleInfo {
            demo: false,
            backend: "postgres".into(),
            zone: "UTC".into(),
            user: None,
            database_down_since: None,
        },
        Duration::ZERO,
    );
    for printed in [
        format!("{store:?}"),
        format!("{state:?}"),
        format!("{state:#?}"),
    ] {
        assert!(!printed.contains("s3cr3t-pa55"), "{printed}");
    }
    assert!(format!("{store:?}").contains("postgres"));
}

fn idem(database_url: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the idem binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_manages_accounts_and_never_takes_a_password_as_an_argument() {
    logs();
    let db = TestDatabase::sqlite().await;
    let url = db.url.clone();
    let ok = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        )
    };

    ok(&idem(
        &url,
        &["user", "add", "alice", "--role", "admin"],
        "a long enough secret\n",
    ));
    let refused = idem(
        &url,
        &[
            "user",
            "add",
            "mallory",
            "--role",
            "viewer",
            "--password",
            "x",
        ],
        "",
    );
    assert!(!refused.status.success(), "there is no --password argument");
    let short = idem(
        &url,
        &["user", "add", "shorty", "--role", "viewer"],
        "short\n",
    );
    assert!(
        !short.status.success()
            && String::from_utf8_lossy(&short.stderr).contains("at least 12 characters")
    );
    let taken = idem(
        &url,
        &["user", "add", "alice", "--role", "viewer"],
        "another long secret\n",
    );
    assert!(String::from_utf8_lossy(&taken.stderr).contains("already exists"));

    let app = spawn_with(|_| {}, db).await;
    let response = sign_in_with(&app, &new_client(), "alice", "a long enough secret", "/").await;
    assert_eq!(location(&response), "/");

    ok(&idem(&url, &["user", "role", "alice", "operator"], ""));
    ok(&idem(
        &url,
        &["user", "reset-password", "alice"],
        "a brand new secret!\n",
    ));
    let response = sign_in_with(&app, &new_client(), "alice", "a brand new secret!", "/").await;
    assert_eq!(location(&response), "/");
    ok(&idem(&url, &["user", "disable", "alice"], ""));
    let list = idem(&url, &["user", "list"], "");
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(
        listed.contains("alice") && listed.contains("operator") && listed.contains("disabled"),
        "{listed}"
    );
    assert!(!listed.contains("argon2"), "hashes are never printed");
}
