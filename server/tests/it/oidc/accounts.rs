//! Whose account a sign-in through the provider opens: the one made for
//! the provider's subject, whatever it is called now, and never one made
//! another way or for someone else.

use idem_domain::Role;
use idem_store::testing::TestDatabase;

use super::{
    DEEP_LINK, alice,
    common::{get, location, new_client, visible},
    provider::{Person, Provider},
    refused_logins, sign_in, signed_in_as, spawn,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_the_provider_rotated_are_read_again_without_a_restart() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    let (_, back) = sign_in(&app, &new_client(), "/").await;
    assert_eq!(back.status().as_u16(), 303);
    // Idem holds the first key now; the provider signs with a new one.
    provider.rotate_keys();
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, DEEP_LINK).await;
    assert_eq!(location(&back), DEEP_LINK);
    assert_eq!(
        signed_in_as(&app, &browser).await.as_deref(),
        Some("Signed in as alice@example.com ( operator )")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_email_still_opens_the_account_made_for_that_person() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |_| {}).await;
    sign_in(&app, &new_client(), "/").await;
    provider.sign_in_as(Person {
        email: "alice.liddell@example.com".into(),
        ..alice(&["sre"])
    });
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, "/").await;
    assert_eq!(back.status().as_u16(), 303);
    assert_eq!(
        signed_in_as(&app, &browser).await.as_deref(),
        Some("Signed in as alice@example.com ( operator )"),
        "the account keeps the name it was made with"
    );
    assert_eq!(app.store.people().users().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_made_for_another_person_a_disabled_account_and_an_unverified_email_are_refused() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    sign_in(&app, &new_client(), "/").await;

    // The directory gave her address to someone new (another subject).
    provider.sign_in_as(Person {
        sub: "00u-someone-new".into(),
        ..alice(&["idem-admins"])
    });
    let (_, back) = sign_in(&app, &new_client(), "/").await;
    assert_eq!(back.status().as_u16(), 403);
    assert!(
        back.text()
            .await
            .unwrap()
            .contains("made for another person")
    );

    // An address the provider has not verified names nobody.
    provider.sign_in_as(Person {
        sub: "00u-mallory".into(),
        email: "ceo@example.com".into(),
        email_verified: false,
        ..alice(&["sre"])
    });
    let (_, back) = sign_in(&app, &new_client(), "/").await;
    assert_eq!(back.status().as_u16(), 403);
    assert!(back.text().await.unwrap().contains("has not verified"));
    assert!(
        app.store
            .people()
            .user_by_name(&idem_store::testing::account("ceo@example.com"))
            .await
            .unwrap()
            .is_none()
    );

    // A name that would read as another (a zero-width space inside, a
    // right-to-left override) names nobody either.
    for sneaky in ["adm\u{200B}in@example.com", "\u{202E}moc.elpmaxe@nimda"] {
        provider.sign_in_as(Person {
            sub: format!("00u-{}", sneaky.len()),
            email: sneaky.into(),
            email_verified: true,
            ..alice(&["idem-admins"])
        });
        let (_, back) = sign_in(&app, &new_client(), "/").await;
        assert_eq!(back.status().as_u16(), 403, "{sneaky:?}");
        assert!(back.text().await.unwrap().contains("no name Idem can use"));
        assert!(
            app.store
                .people()
                .user_by_name(&idem_domain::AccountName::of_row(sneaky.to_owned()))
                .await
                .unwrap()
                .is_none()
        );
    }

    // Disabled by an administrator: the provider's word does not undo it.
    app.store
        .people()
        .set_disabled(&idem_store::testing::account("alice@example.com"), true)
        .await
        .unwrap();
    provider.sign_in_as(alice(&["sre"]));
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, "/").await;
    assert_eq!(back.status().as_u16(), 403);
    assert!(
        back.text()
            .await
            .unwrap()
            .contains("Your account is disabled")
    );
    assert_eq!(signed_in_as(&app, &browser).await, None);

    let mut reasons = refused_logins(&app).await;
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "Disabled",
            "OtherSubject",
            "no usable (or verified) name claim",
            "no usable (or verified) name claim",
            "no usable (or verified) name claim"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_sign_in_in_the_same_browser_keeps_nothing_of_the_provider_session() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |_| {}).await;
    app.create_user("bob", Role::Viewer).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    let (_, html) = get(&browser, &app.url("/")).await;
    assert!(visible(&html).contains("at your identity provider"));

    // Bob signs in on the same browser without signing alice out first.
    let response = app
        .post_form(
            &browser,
            "/login",
            &[
                ("username", "bob"),
                ("password", "bob-password"),
                ("next", "/"),
            ],
        )
        .await;
    assert_eq!(response.status().as_u16(), 303);
    let (_, html) = get(&browser, &app.url("/")).await;
    let page = visible(&html);
    assert!(page.contains("Signed in as bob ( viewer )"), "{page:.400}");
    assert!(
        !page.contains("at your identity provider"),
        "alice's ID token is gone with her session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_at_a_provider_on_another_origin_is_a_link_the_browser_may_follow() {
    let provider = Provider::start(alice(&["sre"])).await;
    provider.end_session_elsewhere();
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    let out = app
        .post_form(&browser, "/logout", &[("provider", "1")])
        .await;
    // A redirect there would be blocked by the page's form-action policy.
    assert_eq!(out.status().as_u16(), 200);
    let html = out.text().await.unwrap();
    assert!(html.contains("You are signed out of Idem"), "{html}");
    let elsewhere = provider.issuer.replace("127.0.0.1", "localhost");
    assert!(
        html.contains(&format!("href=\"{elsewhere}/session/end?id_token_hint=")),
        "{html}"
    );
    assert_eq!(signed_in_as(&app, &browser).await, None);
}
