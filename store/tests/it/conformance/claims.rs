//! Claims: one per key, their outcomes, duplicates, drift and rollbacks.

use std::sync::Arc;

use idem_domain::{ClaimStatus, OutboxOrigin};
use idem_store::{Claimed, Delivery, NewOutboxRow, Outcome, Store, StoreError, testing};
use tokio::sync::Barrier;

use super::{at, claim_once, delivery, settle};

idem_store::on_both_backends!(
    concurrent_deliveries_of_one_key_make_exactly_one_claim,
    a_claim_moves_from_pending_to_sent_with_its_provider_reference,
    a_retryable_failure_keeps_the_claim_pending_and_releases_the_lease,
    permanent_and_unknown_outcomes_record_when_the_status_changed,
    a_duplicate_delivery_is_counted_without_changing_the_version,
    a_different_payload_under_the_same_key_is_recorded_as_drift,
    a_rolled_back_claim_leaves_no_trace,
    keys_with_any_unicode_are_stored_and_found_byte_exactly,
    a_key_longer_than_the_contract_allows_is_refused_by_the_database,
);

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
    let claim = store
        .claims()
        .claim(&testing::consumer("payments"), &testing::key("pay_7f3"))
        .await
        .unwrap()
        .unwrap();
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
            .claims()
            .claim(
                &testing::consumer("reminders"),
                &testing::key("renewal:account-1842:2026-09-30")
            )
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
    let claim = store
        .claims()
        .claim(&testing::consumer("orders"), &testing::key("ship:42"))
        .await
        .unwrap()
        .unwrap();
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

    let orders = testing::consumer("orders");
    let failed = store
        .claims()
        .claim(&orders, &testing::key("ship:1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (failed.status, failed.status_at),
        (ClaimStatus::Failed, at(11).0)
    );
    let unknown = store
        .claims()
        .claim(&orders, &testing::key("ship:2"))
        .await
        .unwrap()
        .unwrap();
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
    let claim = store
        .claims()
        .claim(&testing::consumer("payments"), &testing::key("evt_1"))
        .await
        .unwrap()
        .unwrap();
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
    let (payments, evt_rollback) = (testing::consumer("payments"), testing::key("evt_rollback"));
    assert_eq!(
        store
            .claims()
            .claim(&payments, &evt_rollback)
            .await
            .unwrap(),
        None
    );
    assert!(
        store
            .claims()
            .outbox_for_key(&payments, &evt_rollback)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!store.claims().has_claims().await.unwrap());
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
    let orders = testing::consumer("orders");
    for key in keys {
        let typed = testing::key(key);
        let claim = store
            .claims()
            .claim(&orders, &typed)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key:?} is found"));
        assert_eq!(claim.key.as_bytes(), key.as_bytes());
        let found = store
            .claims()
            .claims_with_key(&typed, 10, &idem_domain::Within::Every)
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "{key:?} matches only itself");
    }
}

async fn a_key_longer_than_the_contract_allows_is_refused_by_the_database(store: &Store) {
    let long = "k".repeat(513);
    let mut tx = store.begin().await.unwrap();
    let result = tx.claim(&delivery("orders", &long, 0)).await;
    assert!(matches!(result, Err(StoreError::Database(_))), "{result:?}");
}
