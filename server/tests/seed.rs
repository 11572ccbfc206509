//! The seeded data set loads on both backends and has the shape it promises.

use idem::seed::{SeedPlan, run};
use idem_domain::{ClaimStatus, DeadLetterState};
use idem_store::{ClaimSearch, PageRequest, Store};

idem_store::on_both_backends!(a_seeded_data_set_has_the_promised_mix_and_reads_back);

async fn a_seeded_data_set_has_the_promised_mix_and_reads_back(store: &Store) {
    let plan = SeedPlan {
        claims: 20_000,
        outbox: 2_000,
        dead_letters: 1_000,
        consumers: 10,
        days: 2,
        metrics: true,
        metrics_rate: None,
        seed: 7,
    };
    run(store, &plan).await.unwrap();

    let sent = store
        .count_claims(ClaimStatus::Sent, 100_000)
        .await
        .unwrap();
    assert!(
        (19_000..=19_800).contains(&sent.value),
        "about 97% sent: {sent}"
    );
    let unknown = store
        .count_claims(ClaimStatus::Unknown, 100_000)
        .await
        .unwrap();
    assert!(
        unknown.value > 0 && unknown.value < 100,
        "about 0.1% unknown: {unknown}"
    );
    let open = store
        .count_dead_letters(DeadLetterState::Open, 100_000)
        .await
        .unwrap();
    assert!(
        open.value > 10 && open.value < 120,
        "about 5% of 1,000 open: {open}"
    );
    assert!(store.count_unpublished_outbox(100_000).await.unwrap().value < 20);

    let newest = store
        .search_claims(&ClaimSearch::default(), &PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(newest.page.items.len(), 5);
    let key = &newest.page.items[0];
    assert_eq!(
        store.claim(&key.consumer, &key.key).await.unwrap().as_ref(),
        Some(key)
    );
    assert!(
        store
            .audit_for_key(&key.consumer, &key.key)
            .await
            .unwrap()
            .len()
            <= 1
    );
}
