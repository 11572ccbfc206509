//! The `/tokens` page: an admin makes a token (its secret shown once, on a
//! page of its own), lists it (never its secret) and revokes it; nobody
//! else does any of it.

use idem_domain::Role;

use super::{get, on_both_backends};
use crate::common::{TestApp, spawn_app, visible};

on_both_backends!(
    an_admin_makes_lists_and_revokes_a_token_on_the_tokens_page,
    only_an_admin_makes_lists_or_revokes_tokens,
);

async fn make(app: &TestApp, client: &reqwest::Client, fields: &[(&str, &str)]) -> (u16, String) {
    let response = app.post_form(client, "/tokens/create", fields).await;
    let status = response.status().as_u16();
    assert_eq!(response.headers()["cache-control"], "no-store");
    (status, response.text().await.unwrap())
}

async fn an_admin_makes_lists_and_revokes_a_token_on_the_tokens_page(
    db: idem_store::testing::TestDatabase,
) {
    let app = spawn_app(db).await;
    crate::common::Fixture::write(&app.store).await;
    app.create_user("ada", Role::Admin).await;
    app.create_user("olga", Role::Operator).await;
    let admin = app.sign_in("ada").await;
    let fields = [
        ("name", "ci-bot"),
        ("owner", "olga"),
        ("role", "operator"),
        ("teams", ""),
        ("expires", "30d"),
    ];
    let (status, page) = make(&app, &admin, &fields).await;
    assert_eq!(status, 201, "{page}");
    let shown = visible(&page);
    assert!(shown.contains("Token created"), "{shown}");
    let secret = shown
        .split_whitespace()
        .find(|w| w.starts_with("idem_"))
        .expect("the secret, shown once")
        .to_owned();
    assert_eq!(
        get(&app, &secret, "/api/v1/unknown").await.0,
        200,
        "it opens the API"
    );

    let (status, listed) = crate::common::get(&admin, &app.url("/tokens")).await;
    assert_eq!(status, 200);
    let listed = visible(&listed);
    assert!(listed.contains("ci-bot olga operator live"), "{listed}");
    assert!(listed.contains("by ada"), "{listed}");
    assert!(!listed.contains(&secret), "never shown again");

    let (status, again) = make(&app, &admin, &fields).await;
    assert_eq!(status, 400, "{again}");
    assert!(visible(&again).contains("names are never reused"));

    let revoke = [
        ("name", "ci-bot"),
        ("action_id", "page-0123456789-revoke-ci-bot"),
    ];
    let response = app
        .post_form(&admin, crate::common::server_fn("revoke_token"), &revoke)
        .await;
    assert_eq!(
        response.status().as_u16(),
        200,
        "{:?}",
        response.text().await
    );
    assert_eq!(
        get(&app, &secret, "/api/v1/unknown").await.0,
        401,
        "revoked at once"
    );
    let response = app
        .post_form(&admin, crate::common::server_fn("revoke_token"), &revoke)
        .await;
    assert!(
        response.text().await.unwrap().contains("Refused"),
        "pressed twice: nothing more"
    );

    let audit = app.store.latest_audit(10).await.unwrap();
    let actions: Vec<(&str, &str)> = audit
        .iter()
        .map(|e| (e.action.as_str(), e.actor.as_str()))
        .collect();
    assert!(actions.contains(&("token created", "ada")), "{actions:?}");
    assert!(actions.contains(&("token revoked", "ada")), "{actions:?}");
}

async fn only_an_admin_makes_lists_or_revokes_tokens(db: idem_store::testing::TestDatabase) {
    let app = spawn_app(db).await;
    app.create_user("olga", Role::Operator).await;
    app.create_user("ada", Role::Admin).await;
    let operator = app.sign_in("olga").await;
    let fields = [("name", "sneaky"), ("owner", "olga"), ("role", "admin")];
    let (status, page) = make(&app, &operator, &fields).await;
    assert_eq!(status, 403, "{page}");
    assert!(visible(&page).contains("it needs admin"));
    assert!(
        app.store.tokens().list().await.unwrap().is_empty(),
        "nothing made"
    );
    let (status, _) = crate::common::get(&operator, &app.url("/tokens")).await;
    assert_eq!(status, 403);
    let anonymous = crate::common::new_client();
    let response = app.post_form(&anonymous, "/tokens/create", &fields).await;
    assert_eq!(response.status().as_u16(), 401, "sign in first");

    // A hostile name is refused and shown escaped; a bad role or expiry too.
    let admin = app.sign_in("ada").await;
    for (field, value, says) in [
        ("name", "<script>alert(1)</script>", "is not a token name"),
        ("role", "root", "not a valid role"),
        ("expires", "forever", "--expires"),
        ("owner", "nobody", "no user named"),
    ] {
        let mut fields = vec![
            ("name", "bot-1"),
            ("owner", "olga"),
            ("role", "viewer"),
            ("expires", ""),
        ];
        fields.retain(|(k, _)| *k != field);
        fields.push((field, value));
        let (status, page) = make(&app, &admin, &fields).await;
        assert_eq!(status, 400, "{field}: {page}");
        assert!(!page.contains("<script>alert"), "escaped");
        assert!(visible(&page).contains(says), "{field}: {}", visible(&page));
    }
    assert!(app.store.tokens().list().await.unwrap().is_empty());
}
