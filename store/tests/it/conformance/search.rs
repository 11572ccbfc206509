//! Finding keys: the key page's reads, prefix and filtered search, and
//! provider references.

use idem_domain::{CappedCount, ClaimStatus, Within};
use idem_store::{ClaimSearch, Outcome, PageRequest, Store, testing};

use super::{claim_once, dead_letter, delivery, outbox_row, settle};

idem_store::on_both_backends!(
    the_key_page_reads_find_every_row_of_one_key,
    prefix_search_treats_like_metacharacters_as_ordinary_characters,
    key_search_pages_newest_activity_first_without_skipping_or_repeating_while_keys_arrive,
    key_search_filters_by_prefix_consumer_and_status,
    a_prefix_with_more_matches_than_the_candidate_cap_says_so,
    a_provider_reference_on_two_keys_is_found_from_either,
    what_support_quotes_finds_the_key_exactly_and_nothing_like_it,
);

async fn the_key_page_reads_find_every_row_of_one_key(store: &Store) {
    let key = "refund:EU/2026/Ø-1842";
    claim_once(store, delivery("orders", key, 0)).await;
    claim_once(store, delivery("billing", key, 0)).await;
    let mut tx = store.begin().await.unwrap();
    tx.enqueue(&outbox_row(key, 5)).await.unwrap();
    tx.enqueue(&outbox_row("someone-else", 5)).await.unwrap();
    let dl = tx.dead_letter(&dead_letter(key, 9)).await.unwrap();
    tx.commit().await.unwrap();

    let (orders, typed_key) = (testing::consumer("orders"), testing::key(key));
    let claims = store
        .claims()
        .claims_with_key(&typed_key, 10, &idem_domain::Within::Every)
        .await
        .unwrap();
    assert_eq!(
        claims
            .iter()
            .map(|c| c.consumer.as_str())
            .collect::<Vec<_>>(),
        ["billing", "orders"]
    );
    let outbox = store
        .claims()
        .outbox_for_key(&orders, &typed_key)
        .await
        .unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].key, key);
    let dead = store
        .claims()
        .dead_letters_for_key(&orders, &typed_key)
        .await
        .unwrap();
    assert_eq!(dead.iter().map(|d| d.id).collect::<Vec<_>>(), [dl]);
    assert!(
        store
            .claims()
            .dead_letters_for_key(&testing::consumer("billing"), &typed_key)
            .await
            .unwrap()
            .is_empty()
    );
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

async fn search_keys_page(store: &Store, search: &ClaimSearch, size: u32) -> Vec<String> {
    let mut seen = Vec::new();
    let mut page = PageRequest::first(size);
    loop {
        let result = store.claims().search_claims(search, &page).await.unwrap();
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
        .claims()
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
            .claims()
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
        consumer: Some(testing::consumer("reminders")),
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
                consumer: Some(testing::consumer("billing")),
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
        .claims()
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
        consumer: Some(testing::consumer("reminders")),
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
        .claims()
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
        .claims()
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
    let reminders = testing::consumer("reminders");
    let others = store
        .claims()
        .key_records(&reminders, &testing::key("renewal:a"), &Within::Every)
        .await
        .unwrap()
        .shared_ref;
    assert_eq!(others, [("reminders".to_owned(), "renewal:b".to_owned())]);
    assert!(
        store
            .claims()
            .key_records(&reminders, &testing::key("renewal:c"), &Within::Every)
            .await
            .unwrap()
            .shared_ref
            .is_empty()
    );
    assert!(
        store
            .claims()
            .key_records(
                &reminders,
                &testing::key("renewal:a"),
                &Within::Only(vec![])
            )
            .await
            .unwrap()
            .is_empty(),
        "a key of a consumer out of reach is, to its reader, no key at all"
    );
    // The key page reads the same with the claim, in one statement.
    let page = store
        .claims()
        .key_records(
            &reminders,
            &testing::key("renewal:b"),
            &idem_domain::Within::Every,
        )
        .await
        .unwrap();
    assert_eq!(page.claim.map(|c| c.key).as_deref(), Some("renewal:b"));
    assert_eq!(
        page.shared_ref,
        [("reminders".to_owned(), "renewal:a".to_owned())]
    );
    let alone = store
        .claims()
        .key_records(
            &reminders,
            &testing::key("renewal:c"),
            &idem_domain::Within::Every,
        )
        .await
        .unwrap();
    assert_eq!(alone.claim.map(|c| c.key).as_deref(), Some("renewal:c"));
    assert!(alone.shared_ref.is_empty());
}

async fn what_support_quotes_finds_the_key_exactly_and_nothing_like_it(store: &Store) {
    // A provider's reference and a broker's message id, as support quotes them.
    let quoted_ref = "pi_3N%_ 'x'/#🙂";
    for (i, (consumer, key, reference)) in [
        ("payments", "pay:1", quoted_ref),
        ("refunds", "refund:1", quoted_ref),
        ("payments", "pay:2", "pi_3N%_ 'x'/#🙂 "),
        ("payments", "pay:3", "pi_3NA_ 'x'/#🙂"),
    ]
    .into_iter()
    .enumerate()
    {
        claim_once(store, delivery(consumer, key, 0)).await;
        settle(
            store,
            consumer,
            key,
            Outcome::Sent {
                provider_ref: Some(reference),
            },
            i64::try_from(i).unwrap() + 1,
        )
        .await;
    }
    let found = store
        .claims()
        .claims_by_provider_ref(quoted_ref, &Within::Every, 10)
        .await
        .unwrap();
    assert_eq!(
        found
            .iter()
            .map(|c| (c.consumer.as_str(), c.key.as_str()))
            .collect::<Vec<_>>(),
        [("payments", "pay:1"), ("refunds", "refund:1")],
        "exactly that reference: not a LIKE pattern, not trimmed"
    );
    let payments = testing::consumer("payments");
    let one = store
        .claims()
        .claims_by_provider_ref(quoted_ref, &Within::Only(vec![payments]), 10)
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert!(
        store
            .claims()
            .claims_by_provider_ref("pi_3N", &Within::Every, 10)
            .await
            .unwrap()
            .is_empty(),
        "a prefix is not a match"
    );

    let mut tx = store.begin().await.unwrap();
    let quoted_id = "msg 42/ב%";
    let mut first = dead_letter("order:1", 10);
    first.message_id = quoted_id;
    let first = tx.dead_letter(&first).await.unwrap();
    let mut second = dead_letter("order:2", 20);
    second.message_id = quoted_id;
    let second = tx.dead_letter(&second).await.unwrap();
    let mut other = dead_letter("order:3", 30);
    other.message_id = "msg 42/בX";
    tx.dead_letter(&other).await.unwrap();
    tx.commit().await.unwrap();
    let letters = store
        .claims()
        .dead_letters_by_message_id(quoted_id, &Within::Every, 10)
        .await
        .unwrap();
    assert_eq!(
        letters.iter().map(|d| d.id).collect::<Vec<_>>(),
        [second, first],
        "newest first, exactly that id"
    );
    assert!(
        store
            .claims()
            .dead_letters_by_message_id(
                quoted_id,
                &Within::Only(vec![testing::consumer("billing")]),
                10
            )
            .await
            .unwrap()
            .is_empty()
    );
}
