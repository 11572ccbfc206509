//! What a page costs the database, counted on the wire: the key page and
//! the overview's reads each fit in five round trips to Postgres, so a
//! slower network or a busier database cannot multiply their latency.

use idem_store::{Outcome, Store, StoreConfig, testing::TestDatabase};

use super::{
    claim,
    common::{self, Wiretap, spawn_with, visible},
};

/// The most round trips to Postgres one key page may take, end to end:
/// signed in, with a claim, a shared provider reference, a dead letter and
/// an audit entry on it.
const KEY_PAGE_BUDGET: u64 = 5;
/// The most the overview's reads may take.
const OVERVIEW_BUDGET: u64 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_page_costs_at_most_five_round_trips_to_postgres() {
    let db = TestDatabase::postgres().await;
    let direct = db.store.clone();
    let (tap, through_tap) = Wiretap::to_postgres(&db.url).await;
    let key = "refund:EU/2026/Ø-1842";
    let sent = |r| {
        Some(Outcome::Sent {
            provider_ref: Some(r),
        })
    };
    claim(&direct, "orders", key, sent("msg_7")).await;
    claim(&direct, "orders", "refund:EU/2026/Ø-1843", sent("msg_7")).await;
    common::dead_letter(&direct, key).await;
    let app = spawn_with(
        |config| config.database = StoreConfig::new(&through_tap),
        db,
    )
    .await;
    let path = idem_app::links::key_href("orders", key);

    let page = || async {
        let (status, html) = app.get(&path).await;
        assert_eq!(status, 200, "{html:.300}");
        visible(&html)
    };
    let shown = page().await;
    assert!(shown.contains(key), "the page shows its key: {shown:.300}");
    assert!(
        shown.contains("refund:EU/2026/Ø-1843"),
        "and the other key with its provider reference: {shown:.600}"
    );
    // Warm every pooled connection first: the background work opens several
    // at start-up, the pool hands idle ones out oldest first, and a
    // connection's first use of a statement prepares it (a round trip more,
    // once per connection, not per page).
    for _ in 0..2 * StoreConfig::new(&through_tap).max_connections {
        page().await;
    }
    let cost = tap
        .fewest(5, || async {
            page().await;
        })
        .await;
    eprintln!("a key page: {cost} round trips to Postgres");
    assert!(
        (1..=KEY_PAGE_BUDGET).contains(&cost),
        "a key page took {cost} round trips to Postgres (budget {KEY_PAGE_BUDGET})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_s_reads_cost_at_most_five_round_trips_to_postgres() {
    let db = TestDatabase::postgres().await;
    claim(
        &db.store,
        "orders",
        "stuck",
        Some(Outcome::Unknown { error: "timeout" }),
    )
    .await;
    common::dead_letter(&db.store, "dead").await;
    let (tap, through_tap) = Wiretap::to_postgres(&db.url).await;
    let store = Store::connect(&StoreConfig::new(&through_tap)).unwrap();

    let read = || async {
        let overview = idem_app::api::overview::read_overview(&store, &idem_domain::Within::Every)
            .await
            .unwrap();
        assert_eq!(overview.unknown_count.to_string(), "1");
        assert_eq!(overview.dead_letters[0].key, "dead");
    };
    read().await;
    let cost = tap.fewest(3, read).await;
    eprintln!("the overview's reads: {cost} round trips to Postgres");
    assert!(
        (1..=OVERVIEW_BUDGET).contains(&cost),
        "the overview's reads took {cost} round trips to Postgres (budget {OVERVIEW_BUDGET})"
    );
}
