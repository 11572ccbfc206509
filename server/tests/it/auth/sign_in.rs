//! Signing in and out: where it lands, the cookie it sets, a new session id
//! each time, and a session destroyed on the server.

use idem_domain::Role;
use idem_store::testing::TestDatabase;

use super::{
    app,
    common::{get, new_client, spawn_with, visible},
    cookie_value, location, session_cookie, sign_in_with,
};

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
        audit.iter().any(|e| e.action.as_str() == "logout"
            && e.actor == "viewer"
            && e.result.as_str() == "ok"),
        "{audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_page_says_a_sign_in_failed_only_when_the_server_said_so() {
    let app = app().await;
    let browser = new_client();
    // A link someone sends: the address alone says nothing.
    for crafted in ["/login?failed=1", "/login?throttled=1&next=%2F"] {
        let (status, html) = get(&browser, &app.url(crafted)).await;
        assert_eq!(status, 200);
        let page = visible(&html);
        assert!(!page.contains("Sign-in failed"), "{crafted}: {page}");
        assert!(
            !page.contains("Too many failed sign-ins"),
            "{crafted}: {page}"
        );
    }
    // A real failure: said once, on the page the server sent the browser to.
    let failed = sign_in_with(&app, &browser, "viewer", "not the password", "/").await;
    let back = location(&failed);
    assert!(back.starts_with("/login?failed=1"), "{back}");
    let (_, html) = get(&browser, &app.url(&back)).await;
    assert!(visible(&html).contains("Sign-in failed. Check the name and password"));
    let (_, html) = get(&browser, &app.url(&back)).await;
    assert!(!visible(&html).contains("Sign-in failed"), "shown once");
}
