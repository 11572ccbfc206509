//! Every check's finding has its way out: each row of `/checks/{check}`
//! links to a page where the runbook's step is a button — or, where Idem
//! has nothing to change, a plain statement of why not and who to ask.
//! One test per check, each following the row's link as an operator would
//! at 3 a.m.; the abandoned lease on both backends, pressed to the end.

use chrono::TimeDelta;
use idem_app::links::key_href;
use idem_domain::{ClaimStatus, Role};
use idem_store::{Delivery, NewDeadLetter, Outcome, Store, Ts, testing::TestDatabase};

use super::common::{self, Form, TestApp, forms, post_as_browser, spawn_app, visible};

fn ago(minutes: i64) -> Ts {
    Ts::now() - TimeDelta::minutes(minutes)
}

/// `key` delivered to `consumer` at `at` with payload `hash`, then leased
/// until `lease_until` and, when given, ended with `outcome`.
async fn delivered(
    store: &Store,
    consumer: &str,
    key: &str,
    at: Ts,
    lease_until: Ts,
    outcome: Option<Outcome<'_>>,
) {
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: Some("h1"),
        at,
    })
    .await
    .unwrap();
    tx.lease(consumer, key, lease_until, at).await.unwrap();
    if let Some(outcome) = outcome {
        tx.record(consumer, key, outcome, at).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// `key` of `consumer` sent an hour ago, with `provider_ref`.
async fn sent_an_hour_ago(store: &Store, consumer: &str, key: &str, provider_ref: Option<&str>) {
    let outcome = Outcome::Sent { provider_ref };
    delivered(store, consumer, key, ago(60), ago(59), Some(outcome)).await;
}

async fn dead_letter(store: &Store, key: &str, first_failure_at: Ts) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: "payments",
            queue: "payments.dlq",
            key,
            message_id: "m-1",
            payload: "{}",
            delivery_count: 3,
            first_failure_at,
            last_error: Some("503 from the provider"),
            at: first_failure_at,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// Signs in an operator, opens `/checks/{slug}`, and follows the row's
/// link (`link` is the href the row must carry); the page and its forms.
async fn follow(app: &TestApp, slug: &str, link: &str) -> (reqwest::Client, String, Vec<Form>) {
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let (status, list) = common::get(&olga, &app.url(&format!("/checks/{slug}"))).await;
    assert_eq!(status, 200, "{list}");
    assert!(
        list.contains(&format!("href=\"{}\"", link.replace('&', "&amp;"))),
        "the row of /checks/{slug} links to {link}: {}",
        visible(&list)
    );
    let (status, html) = common::get(&olga, &app.url(link)).await;
    assert_eq!(status, 200, "{html}");
    let page_forms = forms(&html);
    (olga, visible(&html), page_forms)
}

fn posting_to<'f>(page_forms: &'f [Form], function: &str) -> Option<&'f Form> {
    page_forms
        .iter()
        .find(|f| f.action == common::server_fn(function))
}

async fn still_found(app: &TestApp, slug: &str) -> bool {
    let (_, html) = app.get(&format!("/checks/{slug}")).await;
    !visible(&html).contains("Nothing found.")
}

/// Whether `/checks/{slug}` stops listing `link` within five seconds (the
/// list may come from the two-second read cache every viewer shares).
async fn leaves_the_list(app: &TestApp, slug: &str, link: &str) -> bool {
    for _ in 0..50 {
        let (_, html) = app.get(&format!("/checks/{slug}")).await;
        if !html.contains(&format!("href=\"{link}\"")) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_lease_is_resolved_from_its_key_page_and_leaves_the_check() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let app = spawn_app(db).await;
        let key = "charge:7 / 50% #1 🔒 حساب";
        delivered(&app.store, "payments", key, ago(40), ago(30), None).await;
        let href = key_href("payments", key);
        let (olga, page, page_forms) = follow(&app, "abandoned-lease", &href).await;
        assert!(page.contains("Abandoned lease"), "{page}");
        assert!(page.contains("Resolve the abandoned attempt"), "{page}");
        assert!(page.contains("Lease expired"), "not \"held\": {page}");
        let form = posting_to(&page_forms, "resolve_unknown").expect("a resolve form");

        let mut fields: Vec<(&str, &str)> = form
            .fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        fields.retain(|(n, _)| *n != "provider_ref" && *n != "reason");
        fields.extend([
            ("outcome", "sent"),
            ("provider_ref", "ch_3Nx"),
            ("reason", "the provider's dashboard shows the charge"),
        ]);
        let answer = post_as_browser(&app, &olga, &href, &form.action, &fields).await;
        assert!(answer.status().is_redirection(), "{}", answer.status());
        let after = common::location(&answer);
        let after = if after.starts_with("http") {
            after
        } else {
            app.url(&after)
        };
        let (_, html) = common::get(&olga, &after).await;
        let shown = common::answer_shown(&html).unwrap_or_default();
        assert!(
            shown.contains("sent"),
            "the answer says what was done: {shown}"
        );

        let claim = app
            .store
            .claims()
            .claim(
                &idem_store::testing::consumer("payments"),
                &idem_store::testing::key(key),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claim.status, ClaimStatus::Sent);
        assert_eq!(claim.provider_ref.as_deref(), Some("ch_3Nx"));
        assert!(
            leaves_the_list(&app, "abandoned-lease", &href).await,
            "the finding is gone"
        );
        // The same form again (pressed twice): no second change, no error page.
        let again = post_as_browser(&app, &olga, &href, &form.action, &fields).await;
        assert!(again.status().is_redirection(), "{}", again.status());
        let audit = app
            .store
            .claims()
            .audit_for_key(
                &idem_store::testing::consumer("payments"),
                &idem_store::testing::key(key),
            )
            .await
            .unwrap();
        assert_eq!(audit.len(), 1, "{audit:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_still_held_is_not_listed_and_its_page_offers_nothing_to_press() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "charge:8";
    delivered(&app.store, "payments", key, ago(1), ago(-10), None).await;
    assert!(!still_found(&app, "abandoned-lease").await);
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let (_, html) = common::get(&olga, &app.url(&key_href("payments", key))).await;
    assert!(posting_to(&forms(&html), "resolve_unknown").is_none());
    assert!(
        visible(&html).contains("Lease held until"),
        "{}",
        visible(&html)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_past_its_objective_leads_to_its_resolve_form() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "charge:9";
    delivered(
        &app.store,
        "payments",
        key,
        ago(3 * 24 * 60),
        ago(3 * 24 * 60 - 1),
        Some(Outcome::Unknown { error: "timeout" }),
    )
    .await;
    let (_, page, page_forms) =
        follow(&app, "unknown-past-objective", &key_href("payments", key)).await;
    assert!(page.contains("Resolve the unknown outcome"), "{page}");
    assert!(posting_to(&page_forms, "resolve_unknown").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_for_a_key_already_sent_leads_to_its_discard_button() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "charge:10";
    sent_an_hour_ago(&app.store, "payments", key, Some("ch_10")).await;
    let id = dead_letter(&app.store, key, ago(50)).await;
    let (_, page, page_forms) = follow(
        &app,
        "dead-letter-already-sent",
        &format!("/dead-letters/{id}"),
    )
    .await;
    assert!(
        page.contains("Blocked: the effect already happened"),
        "{page}"
    );
    let discard = posting_to(&page_forms, "discard_dead_letter").expect("a discard form");
    assert_eq!(discard.field("id"), Some(id.to_string().as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_beyond_the_retention_says_why_a_replay_needs_care() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "charge:11";
    let id = dead_letter(&app.store, key, ago(40 * 24 * 60)).await;
    let (_, page, page_forms) = follow(
        &app,
        "dead-letter-beyond-retention",
        &format!("/dead-letters/{id}"),
    )
    .await;
    assert!(
        page.contains("Caution: no claim for this key")
            || page.contains("Caution: the claim is older than the retention horizon"),
        "{page}"
    );
    assert!(
        page.contains("would not deduplicate") || page.contains("may not deduplicate"),
        "{page}"
    );
    assert!(
        posting_to(&page_forms, "replay_dead_letter").is_some(),
        "the replay is there, with the caution above it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_provider_reference_links_the_other_key_and_says_idem_changes_neither() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    for key in ["refund:a", "refund:b"] {
        sent_an_hour_ago(&app.store, "refunds", key, Some("re_9")).await;
    }
    app.store
        .checks()
        .sweep_shared_provider_refs(Ts::now())
        .await
        .unwrap();
    let (_, page, page_forms) = follow(
        &app,
        "shared-provider-ref",
        &key_href("refunds", "refund:a"),
    )
    .await;
    assert!(page.contains("Idem changes neither"), "{page}");
    assert!(page.contains("refund:b"), "{page}");
    assert!(posting_to(&page_forms, "resolve_unknown").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_claim_without_a_reference_says_there_is_nothing_to_change_here() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "charge:12";
    sent_an_hour_ago(&app.store, "payments", key, None).await;
    let (_, page, _) = follow(
        &app,
        "sent-without-provider-ref",
        &key_href("payments", key),
    )
    .await;
    assert!(
        page.contains("Nothing to change here: the outcome stands"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_drift_says_to_take_it_to_the_publisher() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "charge:13";
    delivered(&app.store, "payments", key, ago(60), ago(59), None).await;
    let mut tx = app.store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer: "payments",
        key,
        payload_hash: Some("h2"),
        at: ago(30),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (_, page, _) = follow(&app, "payload-drift", &key_href("payments", key)).await;
    assert!(page.contains("take it to the publisher's owners"), "{page}");
}
