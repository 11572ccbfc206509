//! Each way a sign-in through the provider can fail: a page a person can
//! act on (never a 500) and, when someone was turned away, an audit row.

use super::{
    DEEP_LINK, alice,
    common::{get, location, new_client, visible},
    free_port,
    provider::{Defect, Provider},
    refused_logins, sign_in, signed_in_as, spawn, start, to_callback,
};
use idem_store::testing::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_id_token_that_fails_a_check_is_refused_with_a_page_that_says_which_and_an_audit_row()
{
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    let cases = [
        (Defect::OtherAudience, "issued for another application"),
        (Defect::Expired, "it has expired"),
        (
            Defect::ForeignSignature,
            "its signature is not the provider",
        ),
        (Defect::OtherNonce, "it belongs to another sign-in (nonce)"),
        (Defect::OtherIssuer, "issued by another provider"),
        (Defect::SharedSecret, "not signed with one of the provider"),
        (Defect::OtherAccessToken, "access token hash does not match"),
        (
            Defect::OtherIss,
            "the answer came from another provider (iss)",
        ),
    ];
    for (defect, says) in cases {
        provider.set_defect(defect);
        let browser = new_client();
        let (_, back) = sign_in(&app, &browser, DEEP_LINK).await;
        assert_eq!(back.status().as_u16(), 403, "{defect:?}");
        let html = back.text().await.unwrap();
        assert!(html.contains("answer was refused"), "{defect:?}: {html}");
        assert!(html.contains(says), "{defect:?}: {html}");
        assert!(html.contains("Sign in again"), "{defect:?}: {html}");
        assert_eq!(signed_in_as(&app, &browser).await, None, "{defect:?}");
    }
    assert_eq!(refused_logins(&app).await.len(), cases.len());
    assert!(
        app.store
            .people()
            .user_by_name(&idem_store::testing::account("alice@example.com"))
            .await
            .unwrap()
            .is_none()
    );

    // Twenty seconds past its expiry is within the allowed clock skew.
    provider.set_defect(Defect::JustExpired);
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, DEEP_LINK).await;
    assert_eq!(location(&back), DEEP_LINK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_callback_and_one_from_another_browser_are_refused_and_sign_nobody_in() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |_| {}).await;
    let browser = new_client();
    let (callback, back) = sign_in(&app, &browser, "/").await;
    assert_eq!(back.status().as_u16(), 303);
    let again = browser.get(&callback).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 400);
    assert!(
        again
            .text()
            .await
            .unwrap()
            .contains("This sign-in has expired")
    );

    // A callback address taken from someone else's sign-in (a link sent in
    // chat, an attacker's own code) means nothing in this browser.
    let victim = new_client();
    let theirs = to_callback(&app, &victim, "/").await;
    let other = new_client();
    let refused = other.get(&theirs).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    assert_eq!(signed_in_as(&app, &other).await, None);
    // The browser that started it still finishes it.
    let finished = victim.get(&theirs).send().await.unwrap();
    assert_eq!(finished.status().as_u16(), 303);
    assert!(signed_in_as(&app, &victim).await.is_some());

    // A callback refused once (a token for another audience) is not taken
    // to the provider a second time: its state was used up.
    provider.set_defect(Defect::OtherAudience);
    let third = new_client();
    let (callback, back) = sign_in(&app, &third, "/").await;
    assert_eq!(back.status().as_u16(), 403);
    provider.set_defect(Defect::None);
    let again = third.get(&callback).send().await.unwrap();
    assert_eq!(again.status().as_u16(), 400);
    // Only the refused token is audited: a callback in a browser with no
    // sign-in under way is something anyone can send, so it is logged, not
    // kept for good.
    assert_eq!(
        refused_logins(&app).await,
        ["ID token refused: it was issued for another application (audience)"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_consent_says_so_and_is_audited() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    provider.deny(true);
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, DEEP_LINK).await;
    assert_eq!(back.status().as_u16(), 403);
    let html = back.text().await.unwrap();
    assert!(html.contains("Sign-in was declined"), "{html}");
    assert!(
        html.contains("Example SSO did not let you sign in"),
        "{html}"
    );
    assert_eq!(refused_logins(&app).await, ["the provider denied access"]);
    // The way back starts over towards the same page.
    assert!(
        html.contains("href=\"/login?next=%2Fkeys%2Forders%2F"),
        "{html}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_client_secret_is_an_administrators_problem_and_the_page_says_so() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |config| {
        config.auth.oidc.as_mut().unwrap().client_secret = Some("not-the-secret".into());
    })
    .await;
    let browser = new_client();
    let (_, back) = sign_in(&app, &browser, "/").await;
    assert_eq!(back.status().as_u16(), 502);
    let html = back.text().await.unwrap();
    assert!(
        html.contains("The identity provider refused Idem"),
        "{html}"
    );
    assert!(html.contains("IDEM_OIDC_CLIENT_SECRET"), "{html}");
    assert!(
        !html.contains("not-the-secret"),
        "the secret is never shown"
    );
    assert_eq!(
        refused_logins(&app).await,
        ["the provider refused Idem's client credentials"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_provider_is_a_page_to_try_again_not_a_500() {
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |config| {
        config.auth.oidc.as_mut().unwrap().issuer = nobody;
    })
    .await;
    let browser = new_client();
    let start = start(&app, &browser, "/").await;
    assert_eq!(start.status().as_u16(), 503);
    assert!(start.headers().contains_key("retry-after"));
    let html = start.text().await.unwrap();
    assert!(
        html.contains("The identity provider did not answer"),
        "{html}"
    );
    // The password form is still there for whoever has a password.
    let (status, login) = get(&browser, &app.url("/login")).await;
    assert_eq!(status, 200);
    assert!(login.contains("type=\"password\""));
    assert!(visible(&login).contains("Sign in with Example SSO"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_left_at_the_provider_too_long_has_expired_and_says_to_start_again() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |config| {
        config.auth.oidc.as_mut().unwrap().sign_in_ttl = std::time::Duration::from_secs(1);
    })
    .await;
    let browser = new_client();
    let callback = to_callback(&app, &browser, "/dead-letters").await;
    // The person went for coffee at the provider's sign-in page.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let back = browser.get(&callback).send().await.unwrap();
    assert_eq!(back.status().as_u16(), 400);
    let html = back.text().await.unwrap();
    assert!(html.contains("This sign-in has expired"), "{html}");
    assert!(html.contains("start again"), "{html}");
    assert_eq!(signed_in_as(&app, &browser).await, None);
    // Her browser did start it: audited, unlike the stray callbacks of the
    // replay test.
    assert_eq!(
        refused_logins(&app).await,
        ["unknown, expired or reused state"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_sent_back_with_markup_in_it_is_shown_as_a_bare_error_code() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |_| {}).await;
    let browser = new_client();
    let at_provider = url::Url::parse(&location(&start(&app, &browser, "/").await)).unwrap();
    let state = at_provider
        .query_pairs()
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
        .unwrap();
    // Whoever answers the browser's way back writes what they like.
    let hostile = idem_app::links::with_query(
        "/auth/oidc/callback",
        &[
            ("state", &state),
            ("error", "<script>alert(1)</script>"),
            ("error_description", "<img src=x onerror=alert(2)>"),
        ],
    );
    let back = browser.get(app.url(&hostile)).send().await.unwrap();
    assert_eq!(back.status().as_u16(), 502);
    let html = back.text().await.unwrap();
    assert!(html.contains("&quot;scriptalert1script&quot;"), "{html}");
    assert!(
        !html.contains("<script") && !html.contains("<img"),
        "{html}"
    );
    assert_eq!(signed_in_as(&app, &browser).await, None);
}

/// A started sign-in lives in the browser's own cookie: two hundred
/// sign-ins started without a session store nothing on the server, and a
/// hundred callbacks with states this browser never started are logged,
/// not audited, whatever the browser has under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bogus_callbacks_and_cookieless_starts_write_nothing_that_lasts() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::postgres().await, &provider, |_| {}).await;
    let rows = |table: &'static str| idem_store::testing::count_rows(&app.store, table);
    let (sessions, audit) = (rows("sessions").await, rows("audit_log").await);
    for _ in 0..200 {
        let cookieless = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        assert_eq!(start(&app, &cookieless, "/").await.status().as_u16(), 303);
    }
    assert_eq!(rows("sessions").await, sessions, "no session row per start");

    // One real sign-in under way in this browser, and a hundred callbacks
    // whose states it never started.
    let browser = new_client();
    let callback = to_callback(&app, &browser, "/").await;
    for n in 0..100 {
        let bogus = idem_app::links::with_query(
            "/auth/oidc/callback",
            &[("state", &format!("bogus-{n}")), ("code", "stolen")],
        );
        let refused = browser.get(app.url(&bogus)).send().await.unwrap();
        assert_eq!(refused.status().as_u16(), 400);
    }
    assert_eq!(
        rows("audit_log").await,
        audit,
        "stray callbacks are not audited"
    );
    assert_eq!(rows("sessions").await, sessions);
    // The real one still finishes.
    assert_eq!(
        browser
            .get(&callback)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    assert!(signed_in_as(&app, &browser).await.is_some());
}
