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
