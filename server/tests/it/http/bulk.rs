//! The bulk actions on the check pages, as an operator uses them after an
//! incident: the unknown outcomes past their objective resolved as failed
//! in one press, a key settled by someone else meanwhile skipped and named,
//! a pasted list of references with a bad line refused whole, naming it —
//! on both backends.

use chrono::TimeDelta;
use idem_domain::{ClaimStatus, Role};
use idem_store::{Outcome, Store, Ts, testing::TestDatabase};

use super::{
    common::{forms, get, location, post_as_browser, spawn_with, visible},
    ended, payments_claim_at, payments_status,
};

const CHECK: &str = "/checks/unknown-past-objective";

/// A claim of `payments` for `key` whose outcome became unknown six hours
/// ago (past any objective); its version.
async fn unknown_long_ago(store: &Store, key: &str) -> i64 {
    let at = Ts::now() - TimeDelta::hours(6);
    payments_claim_at(store, key, Outcome::Unknown { error: "timeout" }, at).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_resolves_the_outcomes_shown_as_failed_and_a_settled_key_is_skipped() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        resolve_the_shown(db).await;
    }
}

async fn resolve_the_shown(db: TestDatabase) {
    let app = spawn_with(|c| c.redrive_per_second = 100, db).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let keys = ["pay:1 💶", "<b>pay/2%#</b>", "pay:3 ‏مرحبا"];
    let mut versions = Vec::new();
    for key in keys {
        versions.push(unknown_long_ago(&app.store, key).await);
    }

    // A viewer reads the findings but is offered no bulk action.
    let (status, html) = get(&app.client, &app.url(CHECK)).await;
    assert_eq!(status, 200);
    assert!(
        !html.contains("start_bulk_resolve"),
        "a viewer is offered nothing"
    );

    let (status, html) = get(&olga, &app.url(CHECK)).await;
    assert_eq!(status, 200);
    assert!(
        visible(&html).contains("Resolve the 3 shown as failed"),
        "{}",
        visible(&html)
    );
    assert!(!html.contains("<b>pay/2"), "keys are text, never markup");
    let shown = forms(&html)
        .into_iter()
        .find(|f| f.action.contains("start_bulk_resolve") && f.field("keys").is_some())
        .expect("the form that resolves the findings shown");

    // Someone settles the second by hand while Olga reads the page.
    let by_hand = format!(
        "UPDATE claims SET status = 'sent', provider_ref = 'ch_by_hand', version = version + 1 \
         WHERE idempotency_key = '{}'",
        keys[1].replace('\'', "''")
    );
    idem_store::testing::execute_raw(&app.store, &by_hand, &by_hand)
        .await
        .unwrap();

    let mut fields: Vec<(&str, &str)> = shown
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .filter(|(n, _)| *n != "resolve_as" && *n != "reason")
        .collect();
    fields.push(("resolve_as", "failed-retry"));
    fields.push(("reason", "the provider's log has none of them"));
    let response = post_as_browser(&app, &olga, CHECK, &shown.action, &fields).await;
    assert_eq!(response.status().as_u16(), 303);
    let run = location(&response);
    assert!(run.starts_with("/redrives/"), "{run}");
    let page = ended(&app, &olga, run.split('?').next().unwrap()).await;
    assert!(page.contains("Bulk resolve #"), "{page}");
    assert!(
        page.contains(
            "3 keys from the page of “Unknown outcomes past their objective” (as failed-retry)"
        ),
        "{page}"
    );
    assert!(page.contains("2 resolved, 1 skipped, 0 waiting"), "{page}");
    assert!(
        page.contains("Already sent"),
        "why the settled key was skipped: {page}"
    );
    assert!(
        page.contains("<b>pay/2%#</b>"),
        "the key shown as typed: {page}"
    );
    for key in [keys[0], keys[2]] {
        assert_eq!(
            payments_status(&app.store, key).await,
            ClaimStatus::Failed,
            "{key}"
        );
    }
    assert_eq!(
        payments_status(&app.store, keys[1]).await,
        ClaimStatus::Sent
    );

    // Pressed again (a double click): the same run, nothing resolved twice.
    let again = post_as_browser(&app, &olga, CHECK, &shown.action, &fields).await;
    assert_eq!(location(&again).split('?').next(), run.split('?').next());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_list_with_a_bad_line_starts_nothing_and_the_page_names_the_line() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        paste_a_list(db).await;
    }
}

async fn paste_a_list(db: TestDatabase) {
    let app = spawn_with(|c| c.redrive_per_second = 100, db).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    unknown_long_ago(&app.store, "pay:1").await;
    unknown_long_ago(&app.store, "pay,2 \"quoted\"").await;
    let (_, html) = get(&olga, &app.url(CHECK)).await;
    let form = forms(&html)
        .into_iter()
        .find(|f| f.action.contains("start_bulk_resolve") && f.field("keys").is_none())
        .expect("the form for a pasted list of references");
    let post = |references: &'static str| {
        let mut fields: Vec<(&str, &str)> = form
            .fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .filter(|(n, _)| *n != "references")
            .collect();
        fields.push(("references", references));
        let (app, olga, action) = (&app, &olga, form.action.clone());
        async move { post_as_browser(app, olga, CHECK, &action, &fields).await }
    };

    let response = post("payments,pay:1,ch_1\npayments,<script>alert(1)</script>\n").await;
    assert_eq!(response.status().as_u16(), 303);
    let back = location(&response);
    assert!(back.starts_with(CHECK), "back to the check: {back}");
    let (_, html) = get(&olga, &app.url(&back)).await;
    let page = visible(&html);
    assert!(page.contains("line 2: expected 3 fields"), "{page}");
    assert!(!html.contains("<script>alert(1)"), "the bad line is text");
    assert_eq!(
        payments_status(&app.store, "pay:1").await,
        ClaimStatus::Unknown,
        "nothing started"
    );
    assert!(
        app.store
            .runs()
            .running_redrives()
            .await
            .unwrap()
            .is_empty()
    );

    let response = post(
        "consumer,key,reference\npayments,pay:1,ch_1\npayments,\"pay,2 \"\"quoted\"\"\",ch_2\n",
    )
    .await;
    let run = location(&response);
    assert!(run.starts_with("/redrives/"), "{run}");
    let page = ended(&app, &olga, run.split('?').next().unwrap()).await;
    assert!(page.contains("2 resolved, 0 skipped"), "{page}");
    assert_eq!(
        payments_status(&app.store, "pay,2 \"quoted\"").await,
        ClaimStatus::Sent
    );
}
