//! The outbox backlog: narrowed to a consumer and a topic, paged oldest
//! first without skipping or repeating, and left by the rows a relay
//! publishes.

use super::{at, outbox_row};
use idem_domain::CappedCount;
use idem_store::{PageRequest, Store, testing};

idem_store::on_both_backends!(
    the_outbox_backlog_narrows_to_a_consumer_and_a_topic,
    unpublished_outbox_rows_page_oldest_first_without_skipping_or_repeating,
    a_relay_publishes_the_oldest_rows_and_they_leave_the_backlog,
);

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
        let rows = store
            .lists()
            .unpublished_outbox_in(&page, &filter)
            .await
            .unwrap();
        let count = store
            .lists()
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
        let result = store
            .lists()
            .unpublished_outbox_in(&page, &idem_store::OutboxFilter::default())
            .await
            .unwrap();
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
        store
            .lists()
            .count_unpublished_outbox_in(&idem_store::OutboxFilter::default(), 100)
            .await
            .unwrap(),
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
        .lists()
        .unpublished_outbox_in(
            &PageRequest::first(10),
            &idem_store::OutboxFilter::default(),
        )
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
        .claims()
        .outbox_for_key(&testing::consumer("orders"), &testing::key("k0"))
        .await
        .unwrap()[0];
    assert_eq!(
        (published.published_at, published.attempts),
        (Some(at(10).0), 1)
    );
}
