//! The server over real HTTP: each test starts Idem on port 0 with its own
//! database and talks to it with an HTTP client, signed in as a viewer.
//!
//! The tests live in themed modules; the claims they read are written here.

// The harness every server test binary shares, one folder up.
use crate::common;

mod bulk;
mod checks;
mod compression;
mod consumers;
mod key_pages;
mod lists_and_search;
mod reconcile;
mod redrives;
mod round_trips;
mod ways_out;
mod zones_and_audit;

use common::spawn_app;
use idem_store::{Delivery, Outcome, Store, Ts, testing::TestDatabase};

/// A run's page (a redrive, a bulk discard or resolve) once it has ended:
/// the server paces it in the background.
pub(crate) async fn ended(app: &common::TestApp, client: &reqwest::Client, page: &str) -> String {
    for _ in 0..200 {
        let (status, html) = common::get(client, &app.url(page)).await;
        assert_eq!(status, 200, "{page}");
        let shown = common::visible(&html);
        if !shown.contains("State running") {
            return shown;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the run on {page} did not end");
}

pub(crate) async fn claim(store: &Store, consumer: &str, key: &str, outcome: Option<Outcome<'_>>) {
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: Some("abc123"),
        at: now,
    })
    .await
    .unwrap();
    if let Some(outcome) = outcome {
        tx.lease(consumer, key, now, now).await.unwrap();
        tx.record(consumer, key, outcome, now).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// A claim of `payments` for `key`, delivered at `at`, with `outcome`
/// recorded then; its version.
pub(crate) async fn payments_claim_at(
    store: &Store,
    key: &str,
    outcome: Outcome<'_>,
    at: Ts,
) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let delivery = Delivery {
        consumer: "payments",
        key,
        payload_hash: None,
        at,
    };
    tx.claim(&delivery).await.unwrap();
    tx.lease("payments", key, at, at).await.unwrap();
    let claim = tx.record("payments", key, outcome, at).await.unwrap();
    tx.commit().await.unwrap();
    claim.version
}

/// Where `payments`' claim of `key` stands.
pub(crate) async fn payments_status(store: &Store, key: &str) -> idem_domain::ClaimStatus {
    let (c, k) = (
        idem_store::testing::consumer("payments"),
        idem_store::testing::key(key),
    );
    store.claims().claim(&c, &k).await.unwrap().unwrap().status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn livez_and_readyz_answer_ok_when_the_database_is_there() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    assert_eq!(app.get("/livez").await, (200, "ok\n".into()));
    assert_eq!(app.get("/readyz").await, (200, "ready\n".into()));
}
