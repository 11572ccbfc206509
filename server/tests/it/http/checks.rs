//! `/checks` over HTTP, on both backends: what a viewer reads after an
//! incident, keys shown as text, and addresses that name no check refused.

use chrono::TimeDelta;
use idem_app::links::key_href;
use idem_store::{Delivery, Outcome, Store, Ts, testing::TestDatabase};

use super::common::{spawn_app, text, visible};

/// A key that would be markup if it were not escaped.
const HOSTILE: &str = "<script>alert(1)</script> refund:EU/%2F #7 🧾 עברית";

/// A claim sent ten minutes ago (behind the sweep's settling time).
async fn sent(store: &Store, consumer: &str, key: &str, provider_ref: Option<&str>) {
    let at = Ts::now() - TimeDelta::minutes(10);
    let mut tx = store.begin().await.unwrap();
    let delivery = Delivery {
        consumer,
        key,
        payload_hash: Some("h1"),
        at,
    };
    tx.claim(&delivery).await.unwrap();
    tx.lease(consumer, key, at, at).await.unwrap();
    tx.record(consumer, key, Outcome::Sent { provider_ref }, at)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checks_page_counts_each_check_and_lists_one_check_s_keys_as_text() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let app = spawn_app(db).await;
        sent(&app.store, "payments", "healthy", Some("pi_1")).await;
        sent(&app.store, "payments", HOSTILE, None).await;
        sent(&app.store, "payments", "refund-a", Some("re_9")).await;
        sent(&app.store, "refunds", "refund-b", Some("re_9")).await;
        app.store
            .checks()
            .sweep_shared_provider_refs(Ts::now())
            .await
            .unwrap();

        let (status, html) = app.get("/checks").await;
        assert_eq!(status, 200, "{html}");
        let page = visible(&html);
        assert!(
            page.contains("Sent without a provider reference 1"),
            "{page}"
        );
        assert!(page.contains("Provider references on two keys 2"), "{page}");
        assert!(page.contains("Abandoned leases 0"), "{page}");

        let (status, html) = app.get("/checks/sent-without-provider-ref").await;
        assert_eq!(status, 200, "{html}");
        assert!(
            !html.contains("<script>alert"),
            "the key is text, not markup"
        );
        assert!(text(&html).contains(HOSTILE));
        assert!(html.contains(&key_href("payments", HOSTILE)));
        assert!(!visible(&html).contains("healthy"));

        let (_, html) = app.get("/checks/shared-provider-ref").await;
        let shared = visible(&html);
        assert!(
            shared.contains("refund-a") && shared.contains("refund-b"),
            "{shared}"
        );
        assert!(shared.contains("Provider reference re_9"), "{shared}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_naming_no_check_or_a_forged_cursor_is_refused_with_a_reason() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let (status, html) = app.get("/checks/no-such-check").await;
    assert_eq!(status, 404);
    assert!(
        visible(&html).contains("There is no check called “no-such-check”"),
        "{html}"
    );

    let (status, html) = app
        .get("/checks/payload-drift?cursor=bm90LWEtY3Vyc29y")
        .await;
    assert_eq!(status, 400, "{html}");
    let (status, _) = app
        .get("/checks/payload-drift?cursor=%27%3B%20DROP%20TABLE%20claims%3B%20--")
        .await;
    assert_eq!(status, 400);
}
