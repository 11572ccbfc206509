//! Sign-in through an identity-aware proxy: a small reverse proxy in front
//! of Idem (on its own loopback address, 127.0.0.2) names the person in a
//! header, as oauth2-proxy or Pomerium do. Idem believes it from there and
//! nowhere else.

use crate::common;
use std::sync::Arc;

use crate::common::{dead_letter, new_client, spawn_bare, visible};
use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    response::Response,
};
use idem::auth::{TrustedProxies, proxy::ProxyAuth};
use idem_domain::Role;
use idem_store::testing::TestDatabase;

const PROXY_ADDRESS: [u8; 4] = [127, 0, 0, 2];

/// Forwards everything to `idem`, replacing whatever identity headers the
/// browser sent with the proxy's own: alice, in the `sre` group.
async fn forward(State(idem): State<Arc<(reqwest::Client, String)>>, req: Request) -> Response {
    let (client, base) = &*idem;
    let url = format!(
        "{base}{}",
        req.uri().path_and_query().map_or("/", |pq| pq.as_str())
    );
    let method = req.method().clone();
    let mut headers = req.headers().clone();
    for hop in ["host", "connection", "content-length", "transfer-encoding"] {
        headers.remove(hop);
    }
    headers.insert("x-forwarded-user", "alice@example.com".parse().unwrap());
    headers.insert("x-forwarded-groups", "payments, sre".parse().unwrap());
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap();
    let answer = client
        .request(method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .unwrap();
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        // Hop-by-hop and framing headers belong to each connection.
        if !matches!(
            name.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "content-length"
        ) {
            response = response.header(name, value);
        }
    }
    response
        .body(Body::from(answer.bytes().await.unwrap()))
        .unwrap()
}

/// The identity proxy at 127.0.0.2: `sre` are operators, `idem-admins`
/// admins, anyone else a viewer.
fn proxy_settings() -> ProxyAuth {
    ProxyAuth {
        addresses: TrustedProxies::parse("127.0.0.2").unwrap(),
        user_header: "x-forwarded-user".into(),
        groups_header: Some("x-forwarded-groups".into()),
        roles: ProxyAuth::parse_roles("sre=operator, idem-admins=admin").unwrap(),
        default_role: Some(Role::Viewer),
    }
}

/// The proxy, listening on 127.0.0.1 and connecting to Idem from 127.0.0.2.
async fn proxy_to(idem: &str) -> String {
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(PROXY_ADDRESS))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let app = Router::new()
        .fallback(forward)
        .with_state(Arc::new((client, idem.to_owned())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_signs_people_in_with_their_groups_role_and_nobody_else_can_claim_a_name() {
    let app = spawn_bare(
        |config| {
            config.auth.proxy = Some(proxy_settings());
            config.auth.password_login = false;
        },
        TestDatabase::postgres().await,
    )
    .await;
    let proxy = proxy_to(&app.base).await;
    let letter = dead_letter(&app.store, "refund:EU/2026/Ø-1842").await;
    let browser = new_client();

    // Through the proxy: signed in as alice, an operator by her `sre` group.
    let (status, html) = common::get(&browser, &format!("{proxy}/")).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("Signed in as alice@example.com ( operator )"),
        "{page:.400}"
    );
    let alice = app
        .store
        .people()
        .user_by_name(&idem_store::testing::account("alice@example.com"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alice.role, Role::Operator);
    assert!(
        alice.password_hash.is_none(),
        "a proxy user has no password"
    );

    // Her actions are audited under her name, and so was her account.
    let replayed = common::replay_at(&browser, &proxy, letter, "proxy-replay-1")
        .await
        .unwrap();
    assert_eq!(replayed.status().as_u16(), 200);
    let audit = app.store.latest_audit(20).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action_id.as_deref() == Some("proxy-replay-1")
                && e.actor == "alice@example.com"),
        "{audit:?}"
    );
    assert!(
        audit
            .iter()
            .any(|e| e.action.as_str() == "user created by identity proxy"
                && e.target.as_deref() == Some("alice@example.com")
                && e.state_after.as_ref().map(ToString::to_string).as_deref() == Some("operator")),
        "{audit:?}"
    );

    // The same header straight from a browser (127.0.0.1) is ignored.
    let forged = browser
        .get(app.url("/"))
        .header("x-forwarded-user", "alice@example.com")
        .header("x-forwarded-groups", "idem-admins")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 303, "not signed in");
    assert!(
        forged.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/login")
    );

    // Password sign-in is off, and the sign-in page says how to sign in.
    app.create_user("bob", Role::Admin).await;
    let refused = app
        .post_form(
            &browser,
            "/login",
            &[("username", "bob"), ("password", "bob-password")],
        )
        .await;
    assert_eq!(refused.status().as_u16(), 403);
    let (status, html) = common::get(&browser, &app.url("/login")).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("Sign in through your company's sign-in"),
        "{page}"
    );
    assert!(!html.contains("type=\"password\""), "no password field");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_identity_header_is_refused_and_a_proxy_name_never_takes_a_password_account() {
    let app = spawn_bare(
        |config| {
            config.auth.proxy = Some(proxy_settings());
        },
        TestDatabase::sqlite().await,
    )
    .await;
    // Requests straight from the proxy's address.
    let from_proxy = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(PROXY_ADDRESS))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |user: &[&str], groups: &[&str]| {
        let mut request = from_proxy.get(app.url("/"));
        for u in user {
            request = request.header("x-forwarded-user", *u);
        }
        for g in groups {
            request = request.header("x-forwarded-groups", *g);
        }
        request.send()
    };

    // A browser's header passed through beside the proxy's: which is meant?
    for (users, groups) in [
        (&["mallory", "alice"][..], &["payments"][..]),
        (&["mallory"][..], &["payments", "idem-admins"][..]),
    ] {
        let response = get(users, groups).await.unwrap();
        assert_eq!(response.status().as_u16(), 400, "{users:?} {groups:?}");
        let page = visible(&response.text().await.unwrap());
        assert!(page.contains("more than once"), "{page}");
    }
    assert!(
        app.store
            .people()
            .user_by_name(&idem_store::testing::account("mallory"))
            .await
            .unwrap()
            .is_none()
    );

    // A password account's name from the proxy: refused, audited, unchanged.
    app.create_user("bob", Role::Viewer).await;
    let response = get(&["bob"], &["idem-admins"]).await.unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let page = visible(&response.text().await.unwrap());
    assert!(page.contains("never merged"), "{page}");
    let bob = app
        .store
        .people()
        .user_by_name(&idem_store::testing::account("bob"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        bob.role,
        Role::Viewer,
        "the proxy did not rewrite bob's role"
    );
    assert_eq!(bob.origin, idem_domain::AccountOrigin::Password);
    let later = idem_store::Ts::from(chrono::Utc::now() + idem_store::REFUSAL_WINDOW);
    app.store
        .people()
        .close_refusal_windows(later)
        .await
        .unwrap();
    let audit = app.store.latest_audit(10).await.unwrap();
    assert!(
        audit.iter().any(|e| e.action.as_str() == "denied"
            && e.actor == "bob"
            && e.reason
                .as_deref()
                .is_some_and(|r| r.contains("password account"))),
        "{audit:?}"
    );
    // And bob's password still works, as a viewer.
    assert_eq!(
        common::location(
            &app.post_form(
                &new_client(),
                "/login",
                &[
                    ("username", "bob"),
                    ("password", "bob-password"),
                    ("next", "/")
                ]
            )
            .await
        ),
        "/"
    );
    // A proxy account gets no password from the command line either.
    let ok = get(&["carol"], &["sre"]).await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let hash = idem::auth::Passwords::new(1)
        .hash("carols-new".into())
        .await
        .unwrap();
    assert!(
        !app.store
            .people()
            .set_password(&idem_store::testing::account("carol"), &hash)
            .await
            .unwrap(),
        "a proxy account has no password to set"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_mapped_to_a_team_limits_its_role_to_that_team_s_consumers() {
    let dir = tempfile::tempdir().unwrap();
    let catalogue = dir.path().join("consumers.toml");
    std::fs::write(
        &catalogue,
        "[[consumer]]\nname = \"orders\"\nteam = \"growth\"\nprovider_contract = \"neither\"\n\n\
         [[consumer]]\nname = \"ledger\"\nteam = \"payments\"\nprovider_contract = \"neither\"\n",
    )
    .unwrap();
    let app = spawn_bare(
        |config| {
            // alice's groups, `payments` and `sre`: operator of payments,
            // viewer of everything else.
            config.auth.proxy = Some(ProxyAuth {
                roles: ProxyAuth::parse_roles("payments=operator@payments, sre=viewer").unwrap(),
                default_role: None,
                ..proxy_settings()
            });
            config.auth.password_login = false;
            config.consumers_file = Some(catalogue);
        },
        TestDatabase::sqlite().await,
    )
    .await;
    let proxy = proxy_to(&app.base).await;
    let growth_letter = dead_letter(&app.store, "refund:EU/2026/Ø-1842").await;
    let browser = new_client();

    let (status, html) = common::get(&browser, &format!("{proxy}/")).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("Signed in as alice@example.com ( viewer; operator of payments )"),
        "{page:.400}"
    );
    // She reads growth's dead letter (a viewer everywhere) and may not replay it.
    let (status, _) = common::get(&browser, &format!("{proxy}/dead-letters/{growth_letter}")).await;
    assert_eq!(status, 200);
    let refused = common::replay_at(&browser, &proxy, growth_letter, "proxy-team-replay-1")
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let said = refused.text().await.unwrap();
    assert!(said.contains("belongs to the team “growth”"), "{said}");
    let letter = app.store.letter(growth_letter).await;
    assert_eq!(letter.state, idem_domain::DeadLetterState::Open);
    let audit = app.store.latest_audit(20).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action.as_str() == "user created by identity proxy"
                && e.state_after.as_ref().map(ToString::to_string).as_deref()
                    == Some("viewer operator@payments")),
        "{audit:?}"
    );
}
