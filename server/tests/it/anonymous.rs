//! Nothing anonymous writes anything that lasts: requests nobody was let in
//! for leave every table as it was, whatever they name.

use std::time::Duration;

use idem_store::{
    Delivery, Ts,
    testing::{TestDatabase, count_rows},
};

use crate::common::{get, new_client, spawn_with};

/// Tables a request could be made to add rows to.
const TABLES: [&str; 5] = [
    "key_fingerprints",
    "audit_log",
    "sessions",
    "refusal_counts",
    "login_failures",
];

async fn counts(store: &idem_store::Store) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in TABLES {
        counts.push(count_rows(store, table).await);
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_signed_out_key_links_store_no_fingerprint() {
    let app = spawn_with(|_| {}, TestDatabase::sqlite().await).await;
    let mut tx = app.store.begin().await.unwrap();
    let key = "refund:EU/2026/Ø-1842";
    tx.claim(&Delivery {
        consumer: "orders",
        key,
        payload_hash: None,
        at: Ts::now(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let before = counts(&app.store).await;
    let anonymous = new_client();
    for n in 0..300 {
        // Every kind of segment: a real key, made-up keys, one far over the
        // key bound, the same through the link that names no consumer.
        let path = match n % 4 {
            0 => "/keys/orders/refund%3AEU%2F2026%2F%C3%98-1842".to_owned(),
            1 => format!("/keys/orders/made-up-{n}-{}", "x".repeat(n)),
            2 => format!("/keys/orders/{}", "y".repeat(50_000)),
            _ => format!("/keys/made-up-{n}"),
        };
        let (status, _) = get(&anonymous, &app.url(&path)).await;
        assert!(matches!(status, 303 | 400 | 414 | 431), "{path}: {status}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(counts(&app.store).await, before, "{TABLES:?}");

    // A signed-in viewer reading a key Idem holds nothing about, or one
    // over the bound, stores nothing either; reading the real one does.
    for path in [
        "/keys/orders/made-up-by-the-viewer".to_owned(),
        format!("/keys/orders/{}", "z".repeat(600)),
    ] {
        let (status, _) = app.get(&path).await;
        assert!(matches!(status, 400 | 404), "{path}: {status}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count_rows(&app.store, "key_fingerprints").await, 0);
    let (status, _) = app
        .get("/keys/orders/refund%3AEU%2F2026%2F%C3%98-1842")
        .await;
    assert_eq!(status, 200);
    for _ in 0..50 {
        if count_rows(&app.store, "key_fingerprints").await == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the key the viewer read has its fingerprint kept");
}
