//! What requests and answers carry: forwarded addresses, security headers,
//! and error references without secrets.

use idem_store::testing::TestDatabase;

use super::{
    app,
    common::{new_client, spawn_with, visible},
    location, logs,
};

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
