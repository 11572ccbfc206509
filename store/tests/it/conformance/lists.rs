//! Work lists: the outbox, dead letters and unknown outcomes, paged, windowed
//! and behind cursors that cannot be forged.

use idem_domain::{CappedCount, DeadLetterState};
use idem_store::{DeadLetterFilter, Outcome, PageRequest, Store, StoreError, Window, testing};

use super::{at, claim_once, dead_letter, delivery, outbox_row, settle};

idem_store::on_both_backends!(
    dead_letters_page_oldest_first_within_their_state,
    unknown_outcomes_page_oldest_first,
    a_cursor_from_another_list_or_an_edited_one_is_refused,
    a_window_narrows_unknown_outcomes_and_dead_letters_by_time_and_consumer,
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
                .lists()
                .dead_letters_in(DeadLetterState::Open, &PageRequest::first(10), &filter)
                .await
                .unwrap();
            let count = store
                .lists()
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
        .lists()
        .dead_letters_in(
            DeadLetterState::Open,
            &PageRequest::first(4),
            &idem_store::DeadLetterFilter::default(),
        )
        .await
        .unwrap();
    let second = store
        .lists()
        .dead_letters_in(
            DeadLetterState::Open,
            &PageRequest::new(4, first.next.clone()),
            &idem_store::DeadLetterFilter::default(),
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
        .lists()
        .dead_letters_in(
            DeadLetterState::Replayed,
            &PageRequest::first(4),
            &idem_store::DeadLetterFilter::default(),
        )
        .await
        .unwrap();
    assert!(replayed.items.is_empty());
    assert_eq!(
        store
            .claims()
            .dead_letter(
                idem_domain::DeadLetterId::of_row(ids[0]),
                &idem_domain::Within::Every
            )
            .await
            .unwrap()
            .unwrap()
            .key,
        "dl6"
    );
    assert_eq!(
        store
            .claims()
            .dead_letter(
                idem_domain::DeadLetterId::of_row(-1),
                &idem_domain::Within::Every
            )
            .await
            .unwrap(),
        None
    );
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

    let first = store
        .lists()
        .unknown_claims_in(&PageRequest::first(3), &idem_store::Window::default())
        .await
        .unwrap();
    let second = store
        .lists()
        .unknown_claims_in(
            &PageRequest::new(3, first.next.clone()),
            &idem_store::Window::default(),
        )
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
        .lists()
        .unpublished_outbox_in(&PageRequest::first(1), &idem_store::OutboxFilter::default())
        .await
        .unwrap()
        .next
        .unwrap();

    let foreign = store
        .lists()
        .dead_letters_in(
            DeadLetterState::Open,
            &PageRequest::new(5, Some(outbox_cursor.clone())),
            &idem_store::DeadLetterFilter::default(),
        )
        .await;
    assert!(matches!(foreign, Err(StoreError::BadCursor)));
    let edited = format!("{}x", &outbox_cursor[..outbox_cursor.len() - 2]);
    assert!(matches!(
        store
            .lists()
            .unpublished_outbox_in(
                &PageRequest::new(5, Some(edited)),
                &idem_store::OutboxFilter::default()
            )
            .await,
        Err(StoreError::BadCursor)
    ));
    let injected = Some("'; DROP TABLE claims; --".to_owned());
    assert!(matches!(
        store
            .lists()
            .unknown_claims_in(
                &PageRequest::new(5, injected),
                &idem_store::Window::default()
            )
            .await,
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
        .lists()
        .unknown_claims_in(&PageRequest::first(1), &window)
        .await
        .unwrap();
    let next = store
        .lists()
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
        store.lists().count_unknown_in(&window, 100).await.unwrap(),
        CappedCount::from_limited(2, 100)
    );
    let every_consumer = Window {
        consumer: None,
        ..window.clone()
    };
    assert_eq!(
        store
            .lists()
            .count_unknown_in(&every_consumer, 100)
            .await
            .unwrap(),
        CappedCount::from_limited(3, 100)
    );

    // When each open one became unknown, oldest first, for the age chart.
    let since = store
        .lists()
        .unknown_since(
            &Window {
                consumer: Some(testing::consumer("payments")),
                ..Window::default()
            },
            10,
        )
        .await
        .unwrap();
    assert_eq!(since, [at(100), at(200), at(300)]);
    assert_eq!(
        store
            .lists()
            .unknown_since(&Window::default(), 10)
            .await
            .unwrap()
            .len(),
        4
    );
    assert_eq!(
        store
            .lists()
            .unknown_since(&Window::default(), 1)
            .await
            .unwrap(),
        [at(100)]
    );

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
        .lists()
        .dead_letters_in(DeadLetterState::Open, &PageRequest::first(10), &of(&window))
        .await
        .unwrap();
    let keys: Vec<&str> = letters.items.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(keys, ["d2", "d3"]);
    assert_eq!(
        store
            .lists()
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
            .lists()
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
