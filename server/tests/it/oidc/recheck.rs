//! A session that came through the provider asks it again, without a
//! prompt, every `IDEM_OIDC_RECHECK_MINUTES` (a second here): the role
//! follows the claims without anyone signing in again, and a session the
//! provider ended ends in Idem too.

use std::time::Duration;

use idem_store::testing::TestDatabase;

use super::{
    alice,
    common::{TestApp, location, new_client},
    provider::Provider,
    sign_in, signed_in_as, spawn,
};

async fn with_recheck(provider: &Provider, db: TestDatabase) -> TestApp {
    spawn(db, provider, |config| {
        config.auth.oidc.as_mut().unwrap().recheck = Some(Duration::from_secs(1));
    })
    .await
}

/// Follows a page request through a recheck: Idem → provider → Idem; the
/// callback's answer.
async fn through_recheck(
    app: &TestApp,
    browser: &reqwest::Client,
    page: &str,
) -> reqwest::Response {
    let asked = browser.get(app.url(page)).send().await.unwrap();
    assert_eq!(asked.status().as_u16(), 303);
    let start = location(&asked);
    assert_eq!(
        start,
        idem_app::links::with_query("/auth/oidc/start", &[("next", page), ("silent", "1")])
    );
    let to_provider = browser.get(app.url(&start)).send().await.unwrap();
    let back = browser.get(location(&to_provider)).send().await.unwrap();
    browser.get(location(&back)).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_dropped_at_the_provider_follows_at_the_next_recheck_without_a_new_sign_in() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = with_recheck(&provider, TestDatabase::postgres().await).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    provider.sign_in_as(alice(&["payments"]));
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let back = through_recheck(&app, &browser, "/dead-letters?state=open").await;
    assert_eq!(location(&back), "/dead-letters?state=open");
    assert_eq!(
        signed_in_as(&app, &browser).await.as_deref(),
        Some("Signed in as alice@example.com ( viewer )")
    );
    assert_eq!(
        provider.prompts(),
        [None, Some("none".to_owned())],
        "the recheck asks the provider not to prompt"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_provider_ended_ends_at_the_next_recheck_and_sign_in_leads_back() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = with_recheck(&provider, TestDatabase::sqlite().await).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    // Within the interval nothing happens.
    assert!(signed_in_as(&app, &browser).await.is_some());
    provider.sign_out();
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let back = through_recheck(&app, &browser, "/unknown").await;
    assert_eq!(location(&back), "/login?next=%2Funknown");
    assert_eq!(signed_in_as(&app, &browser).await, None);
}

/// A dead letter of a key that never went out, for an operator to replay.
async fn dead_letter(store: &idem_store::Store) -> i64 {
    crate::common::dead_letter(store, "renewal:account-1842/😴").await
}

/// A replay posted as a browser does (a plain form, same origin).
async fn replay(app: &TestApp, browser: &reqwest::Client, id: i64) -> reqwest::Response {
    browser
        .post(app.url(crate::common::server_fn("replay_dead_letter")))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "text/html")
        .header("referer", app.url(&format!("/dead-letters/{id}")))
        .form(&[
            ("id", id.to_string()),
            ("action_id", format!("recheck-0123456789-{id}")),
            ("reason", "the provider is back".to_owned()),
        ])
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_after_the_recheck_fell_due_is_refused_until_the_provider_has_confirmed_the_person()
 {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = with_recheck(&provider, TestDatabase::sqlite().await).await;
    let letter = dead_letter(&app.store).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    // Removed from the operators' group at the provider; the recheck falls due.
    provider.sign_in_as(alice(&["payments"]));
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let refused = replay(&app, &browser, letter).await;
    assert_eq!(refused.status().as_u16(), 401);
    let page = crate::common::visible(&refused.text().await.unwrap());
    assert!(page.contains("Sign in again"), "{page}");
    assert!(page.contains("Nothing was done"), "{page}");
    let still = app.store.letter(letter).await;
    assert_eq!(still.state, idem_domain::DeadLetterState::Open);

    // The next page goes through the provider: the role follows the groups,
    // and the same action is now refused for the role.
    through_recheck(&app, &browser, "/dead-letters").await;
    assert_eq!(
        signed_in_as(&app, &browser).await.as_deref(),
        Some("Signed in as alice@example.com ( viewer )")
    );
    assert_eq!(replay(&app, &browser, letter).await.status().as_u16(), 403);
    let still = app.store.letter(letter).await;
    assert_eq!(still.state, idem_domain::DeadLetterState::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_denied_on_a_recheck_ends_the_session_as_a_required_sign_in_does() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = with_recheck(&provider, TestDatabase::postgres().await).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    // Unassigned from the application: what Okta answers a silent request.
    provider.deny(true);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let back = through_recheck(&app, &browser, "/checks").await;
    assert_eq!(location(&back), "/login?next=%2Fchecks");
    assert_eq!(signed_in_as(&app, &browser).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_provider_is_down_pages_and_actions_go_on_within_the_grace_and_say_so() {
    let provider = Provider::start(alice(&["sre"])).await;
    let app = spawn(TestDatabase::sqlite().await, &provider, |config| {
        let oidc = config.auth.oidc.as_mut().unwrap();
        oidc.recheck = Some(Duration::from_secs(1));
        oidc.recheck_grace = Duration::from_secs(3);
    })
    .await;
    let letter = dead_letter(&app.store).await;
    let browser = new_client();
    sign_in(&app, &browser, "/").await;
    provider.set_down(true);
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // The page goes to Idem's recheck, which finds the provider down and
    // sends it back at once; the page says the recheck is pending.
    let asked = browser.get(app.url("/unknown")).send().await.unwrap();
    assert_eq!(asked.status().as_u16(), 303);
    let start = browser
        .get(app.url(&location(&asked)))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status().as_u16(), 303);
    assert_eq!(
        location(&start),
        "/unknown",
        "back to the page, not to the provider"
    );
    let (status, html) = crate::common::get(&browser, &app.url("/unknown")).await;
    assert_eq!(status, 200);
    let page = crate::common::visible(&html);
    assert!(
        page.contains("Your identity provider cannot be reached right now"),
        "{page}"
    );
    assert!(
        page.contains("Signed in as alice@example.com ( operator )"),
        "{page}"
    );
    // Actions too, within the grace.
    assert_eq!(replay(&app, &browser, letter).await.status().as_u16(), 303);
    let replayed = app.store.letter(letter).await;
    assert_eq!(replayed.state, idem_domain::DeadLetterState::Replayed);

    // Past the grace, nothing is served on the old claims.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let asked = browser.get(app.url("/unknown")).send().await.unwrap();
    assert_eq!(asked.status().as_u16(), 303);
    let start = browser
        .get(app.url(&location(&asked)))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status().as_u16(), 503);
    let page = crate::common::visible(&start.text().await.unwrap());
    assert!(
        page.contains("The identity provider did not answer"),
        "{page}"
    );
}
