//! Work lists: the outbox, dead letters and unknown outcomes, paged, windowed
//! and behind cursors that cannot be forged.

use idem_domain::{CappedCount, DeadLetterState};
use idem_store::{DeadLetterFilter, Outcome, PageRequest, Store, StoreError, Window, testing};

use super::{at, claim_once, dead_letter, delivery, outbox_row, settle};

idem_store::on_both_backends!(
    unpublished_outbox_rows_page_oldest_first_without_skipping_or_repeating,
    a_relay_publishes_the_oldest_rows_and_they_leave_the_backlog,
    dead_letters_page_oldest_first_within_their_state,
    unknown_outcomes_page_oldest_first,
    a_cursor_from_another_list_or_an_edited_one_is_refused,
    a_window_narrows_unknown_outcomes_and_dead_letters_by_time_and_consumer,
    the_outbox_backlog_narrows_to_a_consumer_and_a_topic,
    dead_letters_narrow_to_a_text_their_last_error_contains_taken_literally,
);

/// The dead letters of `window`, whatever their error.
fn of(window: &Window) -> DeadLetterFilter {
    DeadLetterFilter {
        window: window.clone(),
        error: None,
        except: Vec::new(),
    }
}

async fn dead_letters_narrow_to_a_text_their_last_error_contains_taken_literally(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    for (key, error) in [
        ("a", "429 Too Many Requests"),
        ("b", "too many requests (429)"),
        ("c", "disk 100% full"),
        ("d", "disk 1000 full"),
        ("e", "relay_timeout"),
        ("f", "relayXtimeout"),
    ] {
        let letter = idem_store::NewDeadLetter {
            last_error: Some(error),
            ..dead_letter(key, 100)
        };
        tx.dead_letter(&letter).await.unwrap();
    }
    tx.commit().await.unwrap();
    let shown = |error: &str| {
        let filter = DeadLetterFilter {
            error: Some(error.to_owned()),
            ..DeadLetterFilter::default()
        };
        async move {
            let page = store
                .dead_letters_in(DeadLetterState::Open, &PageRequest::first(10), &filter)
                .await
                .unwrap();
            let count = store
                .count_dead_letters_in(DeadLetterState::Open, &filter, 100)
                .await
                .unwrap();
            let keys: Vec<String> = page.items.into_iter().map(|d| d.key).collect();
            assert_eq!(CappedCount::from_limited(keys.len() as u64, 100), count);
            keys
        }
    };
    assert_eq!(shown("Too Many").await, ["a"], "case counts");
    assert_eq!(shown("429").await, ["a", "b"]);
    assert_eq!(
        shown("100%").await,
        ["c"],
        "% is a character, not a wildcard"
    );
    assert_eq!(
        shown("relay_").await,
        ["e"],
        "_ is a character, not a wildcard"
    );
    assert!(shown("'; DROP TABLE dead_letters; --").await.is_empty());
    assert_eq!(shown("").await.len(), 6, "an empty text filters nothing");
}

async fn the_outbox_backlog_narrows_to_a_consumer_and_a_topic(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    let mut ids = std::collections::HashMap::new();
    for (i, (consumer, topic)) in [
        ("orders", "order.shipped"),
        ("orders", "order.refunded"),
        ("refunds", "order.refunded"),
        ("orders", "order.shipped"),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("k{i}");
        let row = idem_store::NewOutboxRow {
            consumer,
            topic,
            ..outbox_row(&key, i as i64)
        };
        ids.insert(i, tx.enqueue(&row).await.unwrap());
    }
    tx.commit().await.unwrap();
    let shown = |filter: idem_store::OutboxFilter| async move {
        let page = PageRequest::first(10);
        let rows = store.unpublished_outbox_in(&page, &filter).await.unwrap();
        let count = store
            .count_unpublished_outbox_in(&filter, 100)
            .await
            .unwrap();
        assert_eq!(count.value as usize, rows.items.len());
        rows.items.iter().map(|r| r.id).collect::<Vec<_>>()
    };
    let consumer = |name: &str| Some(testing::consumer(name));
    let orders = idem_store::OutboxFilter {
        consumer: consumer("orders"),
        ..Default::default()
    };
    assert_eq!(shown(orders.clone()).await, [ids[&0], ids[&1], ids[&3]]);
    let refunded = idem_store::OutboxFilter {
        topic: Some("order.refunded".into()),
        ..Default::default()
    };
    assert_eq!(shown(refunded).await, [ids[&1], ids[&2]]);
    let both = idem_store::OutboxFilter {
        topic: Some("order.shipped".into()),
        ..orders
    };
    assert_eq!(shown(both).await, [ids[&0], ids[&3]]);
    assert_eq!(shown(idem_store::OutboxFilter::default()).await.len(), 4);
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
    let published = &store
        .outbox_for_key(&testing::consumer("orders"), &testing::key("k0"))
        .await
        .unwrap()[0];
    assert_eq!(
        (published.published_at, published.attempts),
        (Some(at(10).0), 1)
    );
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
        consumer: Some(testing::consumer("payments")),
        ..Window::default()
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
    let since = store
        .unknown_since(Some(&testing::consumer("payments")), 10)
        .await
        .unwrap();
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
        consumer: Some(testing::consumer("orders")),
        ..Window::default()
    };
    let letters = store
        .dead_letters_in(DeadLetterState::Open, &PageRequest::first(10), &of(&window))
        .await
        .unwrap();
    let keys: Vec<&str> = letters.items.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(keys, ["d2", "d3"]);
    assert_eq!(
        store
            .count_dead_letters_in(DeadLetterState::Open, &of(&window), 100)
            .await
            .unwrap(),
        CappedCount::from_limited(2, 100)
    );
    let elsewhere = Window {
        consumer: Some(testing::consumer("payments")),
        ..window
    };
    assert!(
        store
            .dead_letters_in(
                DeadLetterState::Open,
                &PageRequest::first(10),
                &of(&elsewhere)
            )
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
