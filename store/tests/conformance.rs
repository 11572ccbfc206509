//! The storage conformance suite: every body runs against SQLite and against
//! Postgres (a fresh database per test). A Postgres server that cannot be
//! reached fails the suite; it never skips.

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use idem_domain::{CappedCount, ClaimStatus, DeadLetterState, Metric, OutboxOrigin};
use idem_store::{
    ClaimSearch, Claimed, Delivery, MetricSample, NewDeadLetter, NewOutboxRow, Outcome,
    PageRequest, Store, StoreError, Ts, Window, testing::TestDatabase,
};
use tokio::sync::Barrier;

idem_store::on_both_backends!(
    concurrent_deliveries_of_one_key_make_exactly_one_claim,
    a_claim_moves_from_pending_to_sent_with_its_provider_reference,
    a_retryable_failure_keeps_the_claim_pending_and_releases_the_lease,
    permanent_and_unknown_outcomes_record_when_the_status_changed,
    a_duplicate_delivery_is_counted_without_changing_the_version,
    a_different_payload_under_the_same_key_is_recorded_as_drift,
    a_rolled_back_claim_leaves_no_trace,
    keys_with_any_unicode_are_stored_and_found_byte_exactly,
    unpublished_outbox_rows_page_oldest_first_without_skipping_or_repeating,
    a_relay_publishes_the_oldest_rows_and_they_leave_the_backlog,
    dead_letters_page_oldest_first_within_their_state,
    unknown_outcomes_page_oldest_first,
    a_cursor_from_another_list_or_an_edited_one_is_refused,
    counts_are_exact_when_small_and_capped_when_large,
    metric_upserts_add_counters_and_buckets_and_keep_the_largest_gauge,
    the_key_page_reads_find_every_row_of_one_key,
    a_key_longer_than_the_contract_allows_is_refused_by_the_database,
    prefix_search_treats_like_metacharacters_as_ordinary_characters,
    key_search_pages_newest_activity_first_without_skipping_or_repeating_while_keys_arrive,
    key_search_filters_by_prefix_consumer_and_status,
    a_prefix_with_more_matches_than_the_candidate_cap_says_so,
    a_provider_reference_on_two_keys_is_found_from_either,
    a_window_narrows_unknown_outcomes_and_dead_letters_by_time_and_consumer,
    a_lease_is_held_by_one_replica_until_it_expires_or_is_released,
    replicas_racing_for_a_free_lease_end_with_exactly_one_holder,
);

/// A fixed instant a day ago, plus `seconds`: every call in a test agrees.
fn at(seconds: i64) -> Ts {
    static BASE: std::sync::LazyLock<chrono::DateTime<Utc>> =
        std::sync::LazyLock::new(|| Utc::now() - TimeDelta::days(1));
    Ts::from(*BASE + TimeDelta::seconds(seconds))
}

fn delivery<'a>(consumer: &'a str, key: &'a str, seconds: i64) -> Delivery<'a> {
    Delivery {
        consumer,
        key,
        payload_hash: Some("h1"),
        at: at(seconds),
    }
}

async fn claim_once(store: &Store, d: Delivery<'_>) -> Claimed {
    let mut tx = store.begin().await.unwrap();
    let claimed = tx.claim(&d).await.unwrap();
    tx.commit().await.unwrap();
    claimed
}

async fn settle(store: &Store, consumer: &str, key: &str, outcome: Outcome<'_>, seconds: i64) {
    let mut tx = store.begin().await.unwrap();
    tx.lease(consumer, key, at(seconds + 30), at(seconds))
        .await
        .unwrap();
    tx.record(consumer, key, outcome, at(seconds + 1))
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

async fn concurrent_deliveries_of_one_key_make_exactly_one_claim(store: &Store) {
    const WORKERS: usize = 8;
    let barrier = Arc::new(Barrier::new(WORKERS));
    let tasks: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let mut tx = store.begin().await.unwrap();
                let claimed = tx.claim(&delivery("payments", "pay_7f3", 0)).await.unwrap();
                // Hold the transaction open so the others really overlap it.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                tx.commit().await.unwrap();
                claimed
            })
        })
        .collect();
    let mut new = 0;
    for task in tasks {
        if matches!(task.await.unwrap(), Claimed::New(_)) {
            new += 1;
        }
    }
    assert_eq!(new, 1, "exactly one worker wins the claim");
    let claim = store.claim("payments", "pay_7f3").await.unwrap().unwrap();
    assert_eq!(claim.delivery_count, WORKERS as i64);
    assert_eq!(claim.duplicate_count, WORKERS as i64 - 1);
    assert_eq!(claim.status, ClaimStatus::Pending);
}

async fn a_claim_moves_from_pending_to_sent_with_its_provider_reference(store: &Store) {
    let Claimed::New(claim) = claim_once(
        store,
        delivery("reminders", "renewal:account-1842:2026-09-30", 0),
    )
    .await
    else {
        panic!("first delivery is a new claim");
    };
    assert_eq!(
        (claim.status, claim.version, claim.attempts),
        (ClaimStatus::Pending, 1, 0)
    );

    let mut tx = store.begin().await.unwrap();
    let leased = tx
        .lease(
            "reminders",
            "renewal:account-1842:2026-09-30",
            at(30),
            at(1),
        )
        .await
        .unwrap();
    assert_eq!(leased.lease_until, Some(at(30).0));
    assert_eq!((leased.attempts, leased.version), (1, 2));
    let sent = tx
        .record(
            "reminders",
            "renewal:account-1842:2026-09-30",
            Outcome::Sent {
                provider_ref: Some("msg_01H"),
            },
            at(2),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(sent.status, ClaimStatus::Sent);
    assert_eq!(sent.provider_ref.as_deref(), Some("msg_01H"));
    assert_eq!(sent.outcome_at, Some(at(2).0));
    assert_eq!(sent.status_at, at(2).0);
    assert_eq!(sent.lease_until, None);
    assert_eq!(sent.version, 3);
    assert_eq!(
        store
            .claim("reminders", "renewal:account-1842:2026-09-30")
            .await
            .unwrap(),
        Some(sent)
    );
}

async fn a_retryable_failure_keeps_the_claim_pending_and_releases_the_lease(store: &Store) {
    claim_once(store, delivery("orders", "ship:42", 0)).await;
    settle(
        store,
        "orders",
        "ship:42",
        Outcome::Retryable {
            error: "429 Too Many Requests (Retry-After: 20)",
        },
        1,
    )
    .await;
    let claim = store.claim("orders", "ship:42").await.unwrap().unwrap();
    assert_eq!(claim.status, ClaimStatus::Pending);
    assert_eq!(claim.status_at, at(0).0, "the status did not change");
    assert_eq!(claim.lease_until, None);
    assert_eq!(claim.attempts, 1);
    assert_eq!(claim.outcome_at, None);
    assert_eq!(
        claim.last_error.as_deref(),
        Some("429 Too Many Requests (Retry-After: 20)")
    );
}

async fn permanent_and_unknown_outcomes_record_when_the_status_changed(store: &Store) {
    claim_once(store, delivery("orders", "ship:1", 0)).await;
    claim_once(store, delivery("orders", "ship:2", 0)).await;
    settle(
        store,
        "orders",
        "ship:1",
        Outcome::Permanent {
            error: "400 Bad Request",
        },
        10,
    )
    .await;
    settle(
        store,
        "orders",
        "ship:2",
        Outcome::Unknown {
            error: "connection reset after send",
        },
        20,
    )
    .await;

    let failed = store.claim("orders", "ship:1").await.unwrap().unwrap();
    assert_eq!(
        (failed.status, failed.status_at),
        (ClaimStatus::Failed, at(11).0)
    );
    let unknown = store.claim("orders", "ship:2").await.unwrap().unwrap();
    assert_eq!(
        (unknown.status, unknown.status_at),
        (ClaimStatus::Unknown, at(21).0)
    );
    assert_eq!(
        unknown.last_error.as_deref(),
        Some("connection reset after send")
    );
}

async fn a_duplicate_delivery_is_counted_without_changing_the_version(store: &Store) {
    claim_once(store, delivery("payments", "evt_1", 0)).await;
    let Claimed::Duplicate(dup) = claim_once(store, delivery("payments", "evt_1", 360)).await
    else {
        panic!("second delivery is a duplicate");
    };
    assert_eq!(
        (dup.delivery_count, dup.duplicate_count, dup.version),
        (2, 1, 1)
    );
    assert_eq!(dup.first_delivery_at, at(0).0);
    assert_eq!(dup.last_delivery_at, at(360).0);
    // A late, out-of-order redelivery does not move last delivery backwards.
    claim_once(store, delivery("payments", "evt_1", 100)).await;
    let claim = store.claim("payments", "evt_1").await.unwrap().unwrap();
    assert_eq!(claim.last_delivery_at, at(360).0);
    assert_eq!(claim.last_payload_hash, None, "same payload, no drift");
}

async fn a_different_payload_under_the_same_key_is_recorded_as_drift(store: &Store) {
    claim_once(store, delivery("payments", "evt_2", 0)).await;
    let drifted = Delivery {
        payload_hash: Some("h2"),
        ..delivery("payments", "evt_2", 60)
    };
    let Claimed::Duplicate(claim) = claim_once(store, drifted).await else {
        panic!()
    };
    assert_eq!(claim.payload_hash.as_deref(), Some("h1"));
    assert_eq!(claim.last_payload_hash.as_deref(), Some("h2"));
}

async fn a_rolled_back_claim_leaves_no_trace(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    tx.claim(&delivery("payments", "evt_rollback", 0))
        .await
        .unwrap();
    tx.enqueue(&NewOutboxRow {
        consumer: "payments",
        topic: "invoice.paid",
        key: "evt_rollback",
        payload: "{}",
        origin: OutboxOrigin::Application,
        dead_letter_id: None,
        audit_id: None,
        at: at(0),
    })
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(store.claim("payments", "evt_rollback").await.unwrap(), None);
    assert!(
        store
            .outbox_for_key("payments", "evt_rollback")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!store.has_claims().await.unwrap());
}

async fn keys_with_any_unicode_are_stored_and_found_byte_exactly(store: &Store) {
    let keys = [
        "refund:EU/2026/Ø-1842",
        "x%20y",
        "50% off #7?a=b&c",
        "💸 pay_7f3",
        "حساب-1842",
        "\u{202E}txt.exe",
        "caf\u{e9}",   // NFC
        "cafe\u{301}", // NFD: a different key
        "a_b",
        "a%b", // LIKE metacharacters are ordinary characters
    ];
    for (i, key) in keys.iter().enumerate() {
        claim_once(store, delivery("orders", key, i as i64)).await;
    }
    for key in keys {
        let claim = store
            .claim("orders", key)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key:?} is found"));
        assert_eq!(claim.key.as_bytes(), key.as_bytes());
        let found = store.claims_with_key(key, 10).await.unwrap();
        assert_eq!(found.len(), 1, "{key:?} matches only itself");
    }
}

fn outbox_row<'a>(key: &'a str, seconds: i64) -> NewOutboxRow<'a> {
    NewOutboxRow {
        consumer: "orders",
        topic: "order.shipped",
        key,
        payload: r#"{"order":"42"}"#,
        origin: OutboxOrigin::Application,
        dead_letter_id: None,
        audit_id: None,
        at: at(seconds),
    }
}

async fn unpublished_outbox_rows_page_oldest_first_without_skipping_or_repeating(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    let mut expected = Vec::new();
    for i in 0..25 {
        // Pairs of rows share a timestamp: the id breaks the tie.
        let id = tx
            .enqueue(&outbox_row(&format!("k{i}"), i / 2))
            .await
            .unwrap();
        expected.push(id);
    }
    let published = tx.enqueue(&outbox_row("done", -10)).await.unwrap();
    tx.mark_publish_attempt(published, None, at(0))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut seen = Vec::new();
    let mut page = PageRequest::first(10);
    let mut pages = 0;
    loop {
        let result = store.unpublished_outbox(&page).await.unwrap();
        pages += 1;
        seen.extend(result.items.iter().map(|r| r.id));
        // A row that arrives while paging is newer than every cursor: it shows up on a later page, never twice.
        if pages == 1 {
            let mut tx = store.begin().await.unwrap();
            let id = tx.enqueue(&outbox_row("late", 100)).await.unwrap();
            tx.commit().await.unwrap();
            expected.push(id);
        }
        match result.next {
            Some(next) => page = PageRequest::new(10, Some(next)),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(pages, 3);
    assert_eq!(
        store.count_unpublished_outbox(100).await.unwrap(),
        CappedCount {
            value: 26,
            capped: false
        }
    );
}

async fn a_relay_publishes_the_oldest_rows_and_they_leave_the_backlog(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    for i in 0..5 {
        tx.enqueue(&outbox_row(&format!("k{i}"), i)).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let batch = tx.claim_unpublished(3).await.unwrap();
    assert_eq!(
        batch.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["k0", "k1", "k2"]
    );
    tx.mark_publish_attempt(batch[0].id, None, at(10))
        .await
        .unwrap();
    tx.mark_publish_attempt(batch[1].id, Some("broker unavailable"), at(10))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let backlog = store
        .unpublished_outbox(&PageRequest::first(10))
        .await
        .unwrap()
        .items;
    assert_eq!(
        backlog.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["k1", "k2", "k3", "k4"]
    );
    assert_eq!(backlog[0].attempts, 1);
    assert_eq!(backlog[0].last_error.as_deref(), Some("broker unavailable"));
    let published = &store.outbox_for_key("orders", "k0").await.unwrap()[0];
    assert_eq!(
        (published.published_at, published.attempts),
        (Some(at(10).0), 1)
    );
}

fn dead_letter<'a>(key: &'a str, seconds: i64) -> NewDeadLetter<'a> {
    NewDeadLetter {
        consumer: "orders",
        queue: "orders.fifo",
        key,
        message_id: "m-1",
        payload: "{}",
        delivery_count: 3,
        first_failure_at: at(seconds - 60),
        last_error: Some("429 Too Many Requests"),
        at: at(seconds),
    }
}

async fn dead_letters_page_oldest_first_within_their_state(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(
            tx.dead_letter(&dead_letter(&format!("dl{i}"), 100 - i))
                .await
                .unwrap(),
        );
    }
    tx.commit().await.unwrap();
    ids.reverse(); // oldest first

    let first = store
        .dead_letters(DeadLetterState::Open, &PageRequest::first(4))
        .await
        .unwrap();
    let second = store
        .dead_letters(
            DeadLetterState::Open,
            &PageRequest::new(4, first.next.clone()),
        )
        .await
        .unwrap();
    let seen: Vec<i64> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|d| d.id)
        .collect();
    assert_eq!(seen, ids);
    assert_eq!(second.next, None);
    assert!(
        first
            .items
            .iter()
            .all(|d| d.state == DeadLetterState::Open && d.delivery_count == 3)
    );

    let replayed = store
        .dead_letters(DeadLetterState::Replayed, &PageRequest::first(4))
        .await
        .unwrap();
    assert!(replayed.items.is_empty());
    assert_eq!(store.dead_letter(ids[0]).await.unwrap().unwrap().key, "dl6");
    assert_eq!(store.dead_letter(-1).await.unwrap(), None);
}

async fn unknown_outcomes_page_oldest_first(store: &Store) {
    for i in 0..5 {
        let key = format!("pay_{i}");
        claim_once(store, delivery("payments", &key, 0)).await;
        settle(
            store,
            "payments",
            &key,
            Outcome::Unknown { error: "timeout" },
            50 - i,
        )
        .await;
    }
    claim_once(store, delivery("payments", "pay_sent", 0)).await;
    settle(
        store,
        "payments",
        "pay_sent",
        Outcome::Sent {
            provider_ref: Some("ch_1"),
        },
        1,
    )
    .await;

    let first = store.unknown_claims(&PageRequest::first(3)).await.unwrap();
    let second = store
        .unknown_claims(&PageRequest::new(3, first.next.clone()))
        .await
        .unwrap();
    let keys: Vec<&str> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(keys, ["pay_4", "pay_3", "pay_2", "pay_1", "pay_0"]);
    assert_eq!(second.next, None);
}

async fn a_cursor_from_another_list_or_an_edited_one_is_refused(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    for i in 0..3 {
        tx.enqueue(&outbox_row(&format!("k{i}"), i)).await.unwrap();
    }
    tx.commit().await.unwrap();
    let outbox_cursor = store
        .unpublished_outbox(&PageRequest::first(1))
        .await
        .unwrap()
        .next
        .unwrap();

    let foreign = store
        .dead_letters(
            DeadLetterState::Open,
            &PageRequest::new(5, Some(outbox_cursor.clone())),
        )
        .await;
    assert!(matches!(foreign, Err(StoreError::BadCursor)));
    let edited = format!("{}x", &outbox_cursor[..outbox_cursor.len() - 2]);
    assert!(matches!(
        store
            .unpublished_outbox(&PageRequest::new(5, Some(edited)))
            .await,
        Err(StoreError::BadCursor)
    ));
    let injected = Some("'; DROP TABLE claims; --".to_owned());
    assert!(matches!(
        store.unknown_claims(&PageRequest::new(5, injected)).await,
        Err(StoreError::BadCursor)
    ));
}

async fn counts_are_exact_when_small_and_capped_when_large(store: &Store) {
    for i in 0..12 {
        let key = format!("r{i}");
        claim_once(store, delivery("reminders", &key, i)).await;
        let outcome = if i < 3 {
            Outcome::Unknown { error: "timeout" }
        } else {
            Outcome::Sent { provider_ref: None }
        };
        settle(store, "reminders", &key, outcome, i).await;
    }
    let sent = store.count_claims(ClaimStatus::Sent, 5).await.unwrap();
    assert_eq!(sent.to_string(), "5+");
    let unknown = store.count_claims(ClaimStatus::Unknown, 5).await.unwrap();
    assert_eq!(unknown.to_string(), "3");
    assert!(
        store
            .count_claims(ClaimStatus::Failed, 5)
            .await
            .unwrap()
            .is_zero()
    );
    assert_eq!(
        store
            .count_claims(ClaimStatus::Sent, 9)
            .await
            .unwrap()
            .to_string(),
        "9"
    );
}

async fn metric_upserts_add_counters_and_buckets_and_keep_the_largest_gauge(store: &Store) {
    let minute = at(0).minute();
    let sample = |metric: Metric, bucket: &str, value: f64, offset: i64| MetricSample {
        consumer: "reminders".into(),
        metric,
        at: Ts(minute.0 + TimeDelta::seconds(offset)),
        bucket: bucket.into(),
        value,
    };
    store
        .record_metrics(&[
            sample(Metric::Deliveries, "", 3.0, 1),
            sample(Metric::QueueOldestAgeSeconds, "", 12.5, 2),
            sample(Metric::DuplicateDelaySeconds, "600", 1.0, 3),
        ])
        .await
        .unwrap();
    store
        .record_metrics(&[
            sample(Metric::Deliveries, "", 4.0, 40),
            sample(Metric::QueueOldestAgeSeconds, "", 7.0, 41),
            sample(Metric::DuplicateDelaySeconds, "600", 2.0, 42),
            sample(Metric::DuplicateDelaySeconds, "60", 1.0, 43),
            // The next minute is its own row.
            sample(Metric::Deliveries, "", 1.0, 61),
        ])
        .await
        .unwrap();

    let to = Ts(minute.0 + TimeDelta::minutes(5));
    let values = |rows: Vec<idem_store::MetricRow>| {
        rows.into_iter()
            .map(|r| (r.minute, r.bucket, r.value))
            .collect::<Vec<_>>()
    };
    let next = Ts(minute.0 + TimeDelta::minutes(1));
    assert_eq!(
        values(
            store
                .metric_rows("reminders", Metric::Deliveries, minute, to)
                .await
                .unwrap()
        ),
        [(minute, String::new(), 7.0), (next, String::new(), 1.0)]
    );
    assert_eq!(
        values(
            store
                .metric_rows("reminders", Metric::QueueOldestAgeSeconds, minute, to)
                .await
                .unwrap()
        ),
        [(minute, String::new(), 12.5)]
    );
    assert_eq!(
        values(
            store
                .metric_rows("reminders", Metric::DuplicateDelaySeconds, minute, to)
                .await
                .unwrap()
        ),
        [
            (minute, "60".to_owned(), 1.0),
            (minute, "600".to_owned(), 3.0)
        ]
    );
}

async fn the_key_page_reads_find_every_row_of_one_key(store: &Store) {
    let key = "refund:EU/2026/Ø-1842";
    claim_once(store, delivery("orders", key, 0)).await;
    claim_once(store, delivery("billing", key, 0)).await;
    let mut tx = store.begin().await.unwrap();
    tx.enqueue(&outbox_row(key, 5)).await.unwrap();
    tx.enqueue(&outbox_row("someone-else", 5)).await.unwrap();
    let dl = tx.dead_letter(&dead_letter(key, 9)).await.unwrap();
    tx.commit().await.unwrap();

    let claims = store.claims_with_key(key, 10).await.unwrap();
    assert_eq!(
        claims
            .iter()
            .map(|c| c.consumer.as_str())
            .collect::<Vec<_>>(),
        ["billing", "orders"]
    );
    let outbox = store.outbox_for_key("orders", key).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].key, key);
    let dead = store.dead_letters_for_key("orders", key).await.unwrap();
    assert_eq!(dead.iter().map(|d| d.id).collect::<Vec<_>>(), [dl]);
    assert!(
        store
            .dead_letters_for_key("billing", key)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_key_longer_than_the_contract_allows_is_refused_by_the_database(store: &Store) {
    let long = "k".repeat(513);
    let mut tx = store.begin().await.unwrap();
    let result = tx.claim(&delivery("orders", &long, 0)).await;
    assert!(matches!(result, Err(StoreError::Database(_))), "{result:?}");
}

async fn prefix_search_treats_like_metacharacters_as_ordinary_characters(store: &Store) {
    for (i, key) in [
        "50%_off",
        "50%x",
        "50_off",
        "500",
        "renewal:a",
        "renewal:b",
        "renewal;",
        "Renewal:c",
        "renewal:💸",
    ]
    .iter()
    .enumerate()
    {
        claim_once(store, delivery("orders", key, i as i64)).await;
    }
    let keys =
        |claims: Vec<idem_domain::Claim>| claims.into_iter().map(|c| c.key).collect::<Vec<_>>();
    assert_eq!(
        keys(store.claims_with_key_prefix("50%", 10).await.unwrap()),
        ["50%_off", "50%x"]
    );
    assert_eq!(
        keys(store.claims_with_key_prefix("50_", 10).await.unwrap()),
        ["50_off"]
    );
    assert_eq!(
        keys(store.claims_with_key_prefix("renewal:", 10).await.unwrap()),
        ["renewal:a", "renewal:b", "renewal:💸"],
        "case-sensitive, byte order"
    );
    assert_eq!(
        keys(store.claims_with_key_prefix("renewal:", 2).await.unwrap()).len(),
        2
    );
}

#[tokio::test]
async fn a_postgres_test_database_is_really_postgres() {
    let db = TestDatabase::postgres().await;
    assert_eq!(db.store.backend(), "postgres");
    let db = TestDatabase::sqlite().await;
    assert_eq!(db.store.backend(), "sqlite");
}

async fn search_keys_page(store: &Store, search: &ClaimSearch, size: u32) -> Vec<String> {
    let mut seen = Vec::new();
    let mut page = PageRequest::first(size);
    loop {
        let result = store.search_claims(search, &page).await.unwrap();
        seen.extend(result.page.items.iter().map(|c| c.key.clone()));
        match result.page.next {
            Some(next) => page = PageRequest::new(size, Some(next)),
            None => return seen,
        }
    }
}

async fn key_search_pages_newest_activity_first_without_skipping_or_repeating_while_keys_arrive(
    store: &Store,
) {
    // 12 keys; pairs share a delivery time so the tie-break is exercised.
    for i in 0..12 {
        claim_once(store, delivery("orders", &format!("k{i:02}"), i / 2)).await;
    }
    let search = ClaimSearch::default();
    let first = store
        .search_claims(&search, &PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(first.order, idem_store::SearchOrder::Activity);
    // Keys arriving while someone pages are newer than every cursor: later pages never repeat or skip.
    claim_once(store, delivery("orders", "late-1", 100)).await;
    claim_once(store, delivery("orders", "late-2", 100)).await;
    let mut seen: Vec<String> = first.page.items.iter().map(|c| c.key.clone()).collect();
    let mut next = first.page.next;
    while let Some(cursor) = next {
        let page = store
            .search_claims(&search, &PageRequest::new(5, Some(cursor)))
            .await
            .unwrap();
        seen.extend(page.page.items.iter().map(|c| c.key.clone()));
        next = page.page.next;
    }
    let expected: Vec<String> = (0..12).rev().map(|i| format!("k{i:02}")).collect();
    assert_eq!(seen, expected);
    // A fresh search sees the new keys first.
    assert_eq!(
        search_keys_page(store, &search, 5).await[..2],
        ["late-2", "late-1"]
    );
}

async fn key_search_filters_by_prefix_consumer_and_status(store: &Store) {
    claim_once(store, delivery("reminders", "renewal:a", 1)).await;
    claim_once(store, delivery("reminders", "renewal:b", 2)).await;
    claim_once(store, delivery("billing", "renewal:c", 3)).await;
    claim_once(store, delivery("reminders", "50%_off", 4)).await;
    claim_once(store, delivery("reminders", "50xx_off", 5)).await;
    settle(
        store,
        "reminders",
        "renewal:a",
        Outcome::Unknown { error: "timeout" },
        20,
    )
    .await;
    settle(
        store,
        "reminders",
        "renewal:b",
        Outcome::Unknown { error: "timeout" },
        10,
    )
    .await;

    let prefix = |p: &str| ClaimSearch {
        prefix: Some(p.into()),
        ..Default::default()
    };
    assert_eq!(
        search_keys_page(store, &prefix("renewal:"), 2).await,
        ["renewal:c", "renewal:b", "renewal:a"]
    );
    assert_eq!(
        search_keys_page(store, &prefix("50%_"), 2).await,
        ["50%_off"],
        "% and _ are literal"
    );

    let reminders = ClaimSearch {
        consumer: Some("reminders".into()),
        ..prefix("renewal:")
    };
    assert_eq!(
        search_keys_page(store, &reminders, 10).await,
        ["renewal:b", "renewal:a"]
    );
    assert_eq!(
        search_keys_page(
            store,
            &ClaimSearch {
                consumer: Some("billing".into()),
                ..Default::default()
            },
            10
        )
        .await,
        ["renewal:c"]
    );

    // A small status without a prefix: newest status change first (from its partial index).
    let unknown = ClaimSearch {
        status: Some(ClaimStatus::Unknown),
        ..Default::default()
    };
    let result = store
        .search_claims(&unknown, &PageRequest::first(1))
        .await
        .unwrap();
    assert_eq!(result.order, idem_store::SearchOrder::StatusChange);
    assert_eq!(
        search_keys_page(store, &unknown, 1).await,
        ["renewal:a", "renewal:b"]
    );
    let pending = ClaimSearch {
        status: Some(ClaimStatus::Pending),
        consumer: Some("reminders".into()),
        ..Default::default()
    };
    assert_eq!(
        search_keys_page(store, &pending, 10).await,
        ["50xx_off", "50%_off"]
    );
}

async fn a_prefix_with_more_matches_than_the_candidate_cap_says_so(store: &Store) {
    for i in 0..8 {
        claim_once(store, delivery("orders", &format!("ship:{i}"), 100 - i)).await;
    }
    let capped = ClaimSearch {
        prefix: Some("ship:".into()),
        candidates: 5,
        ..Default::default()
    };
    let result = store
        .search_claims(&capped, &PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(
        result.matches,
        Some(CappedCount {
            value: 5,
            capped: true
        })
    );
    // The newest among the first five in key order.
    let keys: Vec<_> = result.page.items.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["ship:0", "ship:1", "ship:2", "ship:3", "ship:4"]);
    let all = ClaimSearch {
        prefix: Some("ship:".into()),
        ..Default::default()
    };
    let result = store
        .search_claims(&all, &PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(
        result.matches,
        Some(CappedCount {
            value: 8,
            capped: false
        })
    );
}

async fn a_provider_reference_on_two_keys_is_found_from_either(store: &Store) {
    for key in ["renewal:a", "renewal:b", "renewal:c"] {
        claim_once(store, delivery("reminders", key, 0)).await;
    }
    settle(
        store,
        "reminders",
        "renewal:a",
        Outcome::Sent {
            provider_ref: Some("msg_same"),
        },
        1,
    )
    .await;
    settle(
        store,
        "reminders",
        "renewal:b",
        Outcome::Sent {
            provider_ref: Some("msg_same"),
        },
        2,
    )
    .await;
    settle(
        store,
        "reminders",
        "renewal:c",
        Outcome::Sent {
            provider_ref: Some("msg_other"),
        },
        3,
    )
    .await;
    let others = store
        .claims_with_provider_ref("msg_same", ("reminders", "renewal:a"), 5)
        .await
        .unwrap();
    assert_eq!(others, [("reminders".to_owned(), "renewal:b".to_owned())]);
    assert!(
        store
            .claims_with_provider_ref("msg_other", ("reminders", "renewal:c"), 5)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_window_narrows_unknown_outcomes_and_dead_letters_by_time_and_consumer(store: &Store) {
    // Unknown at 100 s, 200 s, 300 s for payments and at 200 s for refunds.
    for (consumer, key, seconds) in [
        ("payments", "p/1", 100),
        ("payments", "p/2", 200),
        ("payments", "p/3", 300),
        ("refunds", "r:1 🧾", 200),
    ] {
        claim_once(store, delivery(consumer, key, seconds - 10)).await;
        settle(
            store,
            consumer,
            key,
            Outcome::Unknown { error: "timeout" },
            seconds - 1,
        )
        .await;
    }
    let window = Window {
        from: Some(at(150)),
        to: Some(at(301)),
        consumer: Some("payments".into()),
    };
    let page = store
        .unknown_claims_in(&PageRequest::first(1), &window)
        .await
        .unwrap();
    let next = store
        .unknown_claims_in(&PageRequest::new(1, page.next.clone()), &window)
        .await
        .unwrap();
    let keys: Vec<&str> = page
        .items
        .iter()
        .chain(&next.items)
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(keys, ["p/2", "p/3"], "in the span, for payments, in order");
    assert_eq!(next.next, None);
    assert_eq!(
        store.count_unknown_in(&window, 100).await.unwrap(),
        CappedCount::from_limited(2, 100)
    );
    let every_consumer = Window {
        consumer: None,
        ..window.clone()
    };
    assert_eq!(
        store.count_unknown_in(&every_consumer, 100).await.unwrap(),
        CappedCount::from_limited(3, 100)
    );

    // When each open one became unknown, oldest first, for the age chart.
    let since = store.unknown_since(Some("payments"), 10).await.unwrap();
    assert_eq!(since, [at(100), at(200), at(300)]);
    assert_eq!(store.unknown_since(None, 10).await.unwrap().len(), 4);
    assert_eq!(store.unknown_since(None, 1).await.unwrap(), [at(100)]);

    let mut tx = store.begin().await.unwrap();
    for (key, seconds) in [("d1", 100), ("d2", 200), ("d3", 400)] {
        tx.dead_letter(&dead_letter(key, seconds)).await.unwrap();
    }
    tx.commit().await.unwrap();
    let window = Window {
        from: Some(at(150)),
        to: None,
        consumer: Some("orders".into()),
    };
    let letters = store
        .dead_letters_in(DeadLetterState::Open, &PageRequest::first(10), &window)
        .await
        .unwrap();
    let keys: Vec<&str> = letters.items.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(keys, ["d2", "d3"]);
    assert_eq!(
        store
            .count_dead_letters_in(DeadLetterState::Open, &window, 100)
            .await
            .unwrap(),
        CappedCount::from_limited(2, 100)
    );
    let elsewhere = Window {
        consumer: Some("payments".into()),
        ..window
    };
    assert!(
        store
            .dead_letters_in(DeadLetterState::Open, &PageRequest::first(10), &elsewhere)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

async fn a_lease_is_held_by_one_replica_until_it_expires_or_is_released(store: &Store) {
    let lease = idem_store::BACKGROUND_LEASE;
    assert!(
        store
            .hold_lease(lease, "replica-a", at(0), at(30))
            .await
            .unwrap()
    );
    assert!(
        !store
            .hold_lease(lease, "replica-b", at(10), at(40))
            .await
            .unwrap(),
        "b cannot take a lease a holds"
    );
    assert!(
        store
            .hold_lease(lease, "replica-a", at(20), at(50))
            .await
            .unwrap(),
        "a renews its own lease"
    );
    assert!(
        !store
            .hold_lease(lease, "replica-b", at(40), at(70))
            .await
            .unwrap(),
        "the renewal moved the expiry"
    );
    assert!(
        store
            .hold_lease(lease, "replica-b", at(51), at(81))
            .await
            .unwrap(),
        "b takes over once a's lease expired"
    );
    assert_eq!(
        store.lease_holder(lease).await.unwrap(),
        Some(("replica-b".to_owned(), at(81)))
    );
    assert!(
        !store
            .hold_lease(lease, "replica-a", at(60), at(90))
            .await
            .unwrap()
    );
    store.release_lease(lease, "replica-a").await.unwrap();
    assert_eq!(
        store
            .lease_holder(lease)
            .await
            .unwrap()
            .map(|(holder, _)| holder),
        Some("replica-b".to_owned()),
        "only the holder can release"
    );
    store.release_lease(lease, "replica-b").await.unwrap();
    assert!(
        store
            .hold_lease(lease, "replica-a", at(61), at(91))
            .await
            .unwrap(),
        "a released lease is free at once"
    );
}

async fn replicas_racing_for_a_free_lease_end_with_exactly_one_holder(store: &Store) {
    const REPLICAS: usize = 12;
    let barrier = Arc::new(Barrier::new(REPLICAS));
    let tasks: Vec<_> = (0..REPLICAS)
        .map(|n| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let holder = format!("replica-{n}");
                store
                    .hold_lease("race", &holder, at(0), at(30))
                    .await
                    .unwrap()
                    .then_some(holder)
            })
        })
        .collect();
    let mut holders = Vec::new();
    for task in tasks {
        holders.extend(task.await.unwrap());
    }
    assert_eq!(holders.len(), 1, "holders: {holders:?}");
    assert_eq!(
        store
            .lease_holder("race")
            .await
            .unwrap()
            .map(|(holder, _)| holder),
        holders.pop()
    );
}
