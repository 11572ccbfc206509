//! The background lease: one holder at a time.

use std::sync::Arc;

use idem_store::Store;
use tokio::sync::Barrier;

use super::at;

idem_store::on_both_backends!(
    a_lease_is_held_by_one_replica_until_it_expires_or_is_released,
    replicas_racing_for_a_free_lease_end_with_exactly_one_holder,
);

async fn a_lease_is_held_by_one_replica_until_it_expires_or_is_released(store: &Store) {
    let lease = idem_store::BACKGROUND_LEASE;
    assert!(
        store
            .system()
            .hold_lease(lease, "replica-a", at(0), at(30))
            .await
            .unwrap()
    );
    assert!(
        !store
            .system()
            .hold_lease(lease, "replica-b", at(10), at(40))
            .await
            .unwrap(),
        "b cannot take a lease a holds"
    );
    assert!(
        store
            .system()
            .hold_lease(lease, "replica-a", at(20), at(50))
            .await
            .unwrap(),
        "a renews its own lease"
    );
    assert!(
        !store
            .system()
            .hold_lease(lease, "replica-b", at(40), at(70))
            .await
            .unwrap(),
        "the renewal moved the expiry"
    );
    assert!(
        store
            .system()
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
            .system()
            .hold_lease(lease, "replica-a", at(60), at(90))
            .await
            .unwrap()
    );
    store
        .system()
        .release_lease(lease, "replica-a")
        .await
        .unwrap();
    assert_eq!(
        store
            .lease_holder(lease)
            .await
            .unwrap()
            .map(|(holder, _)| holder),
        Some("replica-b".to_owned()),
        "only the holder can release"
    );
    store
        .system()
        .release_lease(lease, "replica-b")
        .await
        .unwrap();
    assert!(
        store
            .system()
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
                    .system()
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
