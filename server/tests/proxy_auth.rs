//! Sign-in through an identity-aware proxy: a small reverse proxy in front
//! of Idem (on its own loopback address, 127.0.0.2) names the person in a
//! header, as oauth2-proxy or Pomerium do. Idem believes it from there and
//! nowhere else.

mod common;

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    response::Response,
};
use common::{dead_letter, new_client, spawn_bare, visible};
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
            config.auth.proxy = Some(ProxyAuth {
                addresses: TrustedProxies::parse("127.0.0.2").unwrap(),
                user_header: "x-forwarded-user".into(),
                groups_header: Some("x-forwarded-groups".into()),
                roles: ProxyAuth::parse_roles("sre=operator, idem-admins=admin").unwrap(),
                default_role: Some(Role::Viewer),
            });
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
        .user_by_name("alice@example.com")
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
            .any(|e| e.action == "user created by identity proxy"
                && e.target.as_deref() == Some("alice@example.com")
                && e.state_after.as_deref() == Some("operator")),
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
