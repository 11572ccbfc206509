//! Sign-in through an OpenID provider, over real HTTP: Idem on its own port,
//! the test provider of `provider.rs` on another, and a client that follows
//! each redirect by hand, as a browser would, keeping cookies.

mod accounts;
use crate::common;
mod failures;
mod provider;
mod recheck;

use std::{collections::HashMap, net::SocketAddr, time::Duration};

use common::{TestApp, get, location, new_client, spawn_bare, visible};
use idem::{Config, auth::oidc::OidcSettings};
use idem_domain::{AccountOrigin, Role};
use idem_store::testing::TestDatabase;
use provider::{CLIENT_ID, CLIENT_SECRET, Person, Provider};

/// The key page an alert links to: a key with `:`, `/`, `%`, a space and
/// an `Ø`, and a query.
const DEEP_LINK: &str = "/keys/orders/refund%3AEU%2F2026%2F%25%20%C3%98-1842?tab=history";

fn alice(groups: &[&str]) -> Person {
    Person {
        sub: "00u-alice".into(),
        email: "alice@example.com".into(),
        email_verified: true,
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn settings(issuer: &str) -> OidcSettings {
    OidcSettings {
        issuer: issuer.to_owned(),
        client_id: CLIENT_ID.into(),
        client_secret: Some(CLIENT_SECRET.into()),
        scopes: vec!["email".into(), "profile".into()],
        name: "Example SSO".into(),
        username_claim: "email".into(),
        roles_claim: "groups".into(),
        roles: idem::auth::proxy::ProxyAuth::parse_roles(
            "sre=operator, idem-admins=admin, payments-oncall=operator@payments",
        )
        .unwrap(),
        default_role: Some(Role::Viewer),
        clock_skew: Duration::from_secs(60),
        sign_in_ttl: Duration::from_secs(600),
        recheck: None,
        recheck_grace: Duration::from_secs(3600),
    }
}

/// A port nobody listens on at this moment.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Idem at an address known before it starts (the redirect URI registered
/// at the provider names it), signing in through `provider`.
async fn spawn(db: TestDatabase, provider: &Provider, adjust: impl FnOnce(&mut Config)) -> TestApp {
    let port = free_port();
    let issuer = provider.issuer.clone();
    spawn_bare(
        |config| {
            config.addr = SocketAddr::from(([127, 0, 0, 1], port));
            config.auth.public_url = url::Url::parse(&format!("http://127.0.0.1:{port}")).unwrap();
            config.auth.oidc = Some(settings(&issuer));
            adjust(config);
        },
        db,
    )
    .await
}

/// Starts a sign-in towards `next`: Idem's answer, a redirect to the
/// provider (a test that stops here holds the provider's address).
async fn start(app: &TestApp, browser: &reqwest::Client, next: &str) -> reqwest::Response {
    let path = idem_app::links::with_query("/auth/oidc/start", &[("next", next)]);
    browser.get(app.url(&path)).send().await.unwrap()
}

/// Starts a sign-in and lets the provider answer: the callback's address
/// the browser is sent back to (not followed yet).
async fn to_callback(app: &TestApp, browser: &reqwest::Client, next: &str) -> String {
    let start = start(app, browser, next).await;
    assert_eq!(
        start.status().as_u16(),
        303,
        "Idem sends the browser to the provider"
    );
    let at_provider = browser.get(location(&start)).send().await.unwrap();
    assert_eq!(
        at_provider.status().as_u16(),
        303,
        "the provider sends it back"
    );
    location(&at_provider)
}

/// Follows a sign-in from Idem to the provider and back; the callback's
/// address and Idem's answer to it.
async fn sign_in(
    app: &TestApp,
    browser: &reqwest::Client,
    next: &str,
) -> (String, reqwest::Response) {
    let callback = to_callback(app, browser, next).await;
    assert!(
        callback.starts_with(&app.url("/auth/oidc/callback?")),
        "{callback}"
    );
    let answer = browser.get(&callback).send().await.unwrap();
    (callback, answer)
}

/// Who the page says is signed in, or `None` when it sends the browser to
/// sign in (anything else fails the test).
async fn signed_in_as(app: &TestApp, browser: &reqwest::Client) -> Option<String> {
    let page = browser.get(app.url("/")).send().await.unwrap();
    if page.status().as_u16() == 303 {
        assert!(location(&page).starts_with("/login"), "{}", location(&page));
        return None;
    }
    assert_eq!(page.status().as_u16(), 200);
    let page = visible(&page.text().await.unwrap());
    let at = page.find("Signed in as ")?;
    Some(page[at..].split(')').next()?.to_owned() + ")")
}

async fn refused_logins(app: &TestApp) -> Vec<String> {
    app.store
        .latest_audit(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action.as_str() == "login" && e.result.as_str() == "refused")
        .map(|e| e.reason.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signed_in_by_the_provider_lands_on_the_deep_linked_key_page_with_their_groups_role()
 {
    let provider = Provider::start(alice(&["payments", "sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |_| {}).await;
    common::dead_letter(&app.store, "refund:EU/2026/% Ø-1842").await;
    let browser = new_client();

    let (_, back) = sign_in(&app, &browser, DEEP_LINK).await;
    assert_eq!(back.status().as_u16(), 303);
    assert_eq!(
        location(&back),
        DEEP_LINK,
        "exactly the address the alert linked to"
    );
    let (status, html) = get(&browser, &app.url(DEEP_LINK)).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(page.contains("refund:EU/2026/% Ø-1842"), "{page:.600}");
    assert!(
        page.contains("Signed in as alice@example.com ( operator )"),
        "{page:.600}"
    );

    let account = app
        .store
        .people()
        .user_by_name(&idem_store::testing::account("alice@example.com"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(account.origin, AccountOrigin::Oidc);
    assert_eq!(
        account.subject,
        Some(format!("{} 00u-alice", provider.issuer))
    );
    assert!(account.password_hash.is_none());
    let audit = app.store.latest_audit(20).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action.as_str() == "user created by OpenID Connect"
                && e.target.as_deref() == Some("alice@example.com")
                && e.state_after.as_ref().map(ToString::to_string).as_deref() == Some("operator")),
        "{audit:?}"
    );
    assert!(
        audit.iter().any(|e| e.action.as_str() == "login"
            && e.actor == "alice@example.com"
            && e.result.as_str() == "ok"),
        "{audit:?}"
    );

    // A `next` that leaves Idem is not followed.
    let elsewhere = new_client();
    let (_, back) = sign_in(&app, &elsewhere, "//evil.example/keys").await;
    assert_eq!(location(&back), "/");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_role_follows_the_groups_at_every_sign_in_and_a_dropped_role_ends_the_other_sessions() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    let laptop = new_client();
    sign_in(&app, &laptop, "/").await;
    assert_eq!(
        signed_in_as(&app, &laptop).await.as_deref(),
        Some("Signed in as alice@example.com ( operator )")
    );

    // Removed from `sre` in the directory; she signs in again on her phone.
    provider.sign_in_as(alice(&["payments"]));
    let phone = new_client();
    let (_, back) = sign_in(&app, &phone, "/").await;
    assert_eq!(back.status().as_u16(), 303);
    assert_eq!(
        signed_in_as(&app, &phone).await.as_deref(),
        Some("Signed in as alice@example.com ( viewer )")
    );
    assert_eq!(
        signed_in_as(&app, &laptop).await,
        None,
        "the operator session on the laptop ended"
    );
    let audit = app.store.latest_audit(20).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action.as_str() == "role changed by OpenID Connect"
                && e.state_before.as_ref().map(ToString::to_string).as_deref() == Some("operator")
                && e.state_after.as_ref().map(ToString::to_string).as_deref() == Some("viewer")),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_whose_groups_map_to_no_role_is_refused_and_their_sessions_end() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |config| {
        config.auth.oidc.as_mut().unwrap().default_role = None;
    })
    .await;
    let laptop = new_client();
    sign_in(&app, &laptop, "/").await;
    assert!(signed_in_as(&app, &laptop).await.is_some());

    provider.sign_in_as(alice(&["payments"]));
    let phone = new_client();
    let (_, back) = sign_in(&app, &phone, "/").await;
    assert_eq!(back.status().as_u16(), 403);
    let html = back.text().await.unwrap();
    assert!(
        html.contains("Your groups give you no role in Idem"),
        "{html}"
    );
    assert!(
        html.contains("signed you in as alice@example.com"),
        "{html}"
    );
    assert_eq!(signed_in_as(&app, &phone).await, None);
    assert_eq!(
        signed_in_as(&app, &laptop).await,
        None,
        "her earlier session ended too"
    );
    assert_eq!(refused_logins(&app).await, ["no role from the claims"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_sign_in_never_takes_over_a_password_account_of_the_same_name() {
    let provider = Provider::start(alice(&["idem-admins"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |_| {}).await;
    app.create_user("alice@example.com", Role::Viewer).await;
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, "/").await;
    assert_eq!(back.status().as_u16(), 403);
    assert!(
        back.text()
            .await
            .unwrap()
            .contains("belongs to another account")
    );
    assert_eq!(signed_in_as(&app, &browser).await, None);
    let account = app
        .store
        .people()
        .user_by_name(&idem_store::testing::account("alice@example.com"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (account.origin, account.role),
        (AccountOrigin::Password, Role::Viewer)
    );
    // Her password still signs her in, as a viewer.
    let own = app.sign_in("alice@example.com").await;
    assert_eq!(
        signed_in_as(&app, &own).await.as_deref(),
        Some("Signed in as alice@example.com ( viewer )")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_may_end_the_session_at_the_provider_too() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    let page = browser.get(app.url("/")).send().await.unwrap();
    // The browser follows the form's redirect to the provider only if the
    // page allows the provider as a form target.
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains(&format!("form-action 'self' {};", provider.issuer)),
        "{policy}"
    );
    let html = page.text().await.unwrap();
    assert!(visible(&html).contains("Sign out here and at your identity provider"));

    let out = app
        .post_form(&browser, "/logout", &[("provider", "1")])
        .await;
    assert_eq!(out.status().as_u16(), 303);
    let to = url::Url::parse(&location(&out)).unwrap();
    assert_eq!(
        to.as_str().split('?').next(),
        Some(format!("{}/session/end", provider.issuer).as_str())
    );
    let query: HashMap<_, _> = to.query_pairs().into_owned().collect();
    assert_eq!(query["post_logout_redirect_uri"], app.url("/login"));
    assert_eq!(query["client_id"], CLIENT_ID);
    assert_eq!(
        query["id_token_hint"].split('.').count(),
        3,
        "the ID token of the sign-in"
    );
    assert_eq!(
        signed_in_as(&app, &browser).await,
        None,
        "Idem's session ended first"
    );

    // Signed in again, a plain sign-out stays in Idem.
    sign_in(&app, &browser, "/").await;
    let out = app.post_form(&browser, "/logout", &[]).await;
    assert_eq!(location(&out), "/login");
    // A password account has no provider to sign out of.
    app.create_user("bob", Role::Viewer).await;
    let bob = app.sign_in("bob").await;
    let (_, html) = get(&bob, &app.url("/")).await;
    assert!(!visible(&html).contains("at your identity provider"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_provider_is_the_only_way_in_a_deep_link_goes_straight_to_it() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |config| {
        config.auth.password_login = false;
    })
    .await;
    let browser = new_client();
    let first = browser.get(app.url(DEEP_LINK)).send().await.unwrap();
    assert_eq!(first.status().as_u16(), 303);
    let start = location(&first);
    assert_eq!(
        start,
        idem_app::links::with_query("/auth/oidc/start", &[("next", DEEP_LINK)])
    );
    let (status, login) = get(&browser, &app.url("/login")).await;
    assert_eq!(status, 200);
    assert!(visible(&login).contains("Sign in with Example SSO"));
    assert!(!login.contains("type=\"password\""), "no password form");
}
