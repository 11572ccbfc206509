//! The seeded data set loads on both backends and has the shape it promises.

use idem_domain::{ClaimStatus, DeadLetterState, Role};
use idem_store::{ClaimSearch, DEMO_DATA, PageRequest, Store, testing};
use idem_tools::seed::{SeedPlan, SeedRefused, check_target, run};

idem_store::on_both_backends!(
    a_seeded_data_set_has_the_promised_mix_and_reads_back,
    seeding_refuses_a_database_with_accounts_or_demo_data_unless_forced,
    a_database_seeded_once_may_be_seeded_again_without_force,
);

/// A data set small enough for a test.
fn small_plan() -> SeedPlan {
    SeedPlan {
        claims: 200,
        outbox: 20,
        dead_letters: 10,
        consumers: 2,
        days: 1,
        metrics: false,
        metrics_rate: None,
        seed: 3,
    }
}

async fn seeding_refuses_a_database_with_accounts_or_demo_data_unless_forced(store: &Store) {
    check_target(store, false)
        .await
        .expect("an empty database may be seeded");

    store
        .people()
        .create_user(
            &idem_domain::AccountName::parse("alice").unwrap(),
            Role::Operator,
            None,
        )
        .await
        .unwrap();
    let refused = check_target(store, false).await.unwrap_err();
    assert!(
        matches!(refused, SeedRefused::NotOurs("accounts")),
        "{refused}"
    );
    assert!(refused.to_string().contains("--force"), "{refused}");
    assert!(
        !store.claims().has_claims().await.unwrap(),
        "a refusal writes nothing"
    );

    store.system().set_meta(DEMO_DATA, "1").await.unwrap();
    let refused = check_target(store, false).await.unwrap_err();
    assert!(
        matches!(refused, SeedRefused::NotOurs("the demo's history")),
        "{refused}"
    );
    check_target(store, true)
        .await
        .expect("--force seeds anything");
}

async fn a_database_seeded_once_may_be_seeded_again_without_force(store: &Store) {
    run(store, &small_plan()).await.unwrap();
    assert!(store.claims().has_claims().await.unwrap());
    check_target(store, false)
        .await
        .expect("data seed wrote is seed's to add to");
}

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
        .lists()
        .count_claims(ClaimStatus::Sent, 100_000)
        .await
        .unwrap();
    assert!(
        (19_000..=19_800).contains(&sent.value),
        "about 97% sent: {sent}"
    );
    let unknown = store
        .lists()
        .count_claims(ClaimStatus::Unknown, 100_000)
        .await
        .unwrap();
    assert!(
        unknown.value > 0 && unknown.value < 100,
        "about 0.1% unknown: {unknown}"
    );
    let open = store
        .lists()
        .count_dead_letters(DeadLetterState::Open, 100_000)
        .await
        .unwrap();
    assert!(
        open.value > 10 && open.value < 120,
        "about 5% of 1,000 open: {open}"
    );
    assert!(
        store
            .lists()
            .count_unpublished_outbox_in(&idem_store::OutboxFilter::default(), 100_000)
            .await
            .unwrap()
            .value
            < 20
    );

    let newest = store
        .claims()
        .search_claims(&ClaimSearch::default(), &PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(newest.page.items.len(), 5);
    let key = &newest.page.items[0];
    let (consumer, typed_key) = (testing::consumer(&key.consumer), testing::key(&key.key));
    assert_eq!(
        store
            .claims()
            .claim(&consumer, &typed_key)
            .await
            .unwrap()
            .as_ref(),
        Some(key)
    );
    assert!(
        store
            .claims()
            .audit_for_key(&consumer, &typed_key)
            .await
            .unwrap()
            .len()
            <= 1
    );
}
