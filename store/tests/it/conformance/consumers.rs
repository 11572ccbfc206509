//! The consumer table's reads: every consumer's open work, last hour and
//! queue age in a fixed number of statements.

use chrono::TimeDelta;
use idem_domain::{ConsumerName, Metric};
use idem_store::{MetricSample, NewDeadLetter, Outcome, Store, testing};

use super::{at, claim_once, dead_letter, delivery, settle};

idem_store::on_both_backends!(
    open_work_is_counted_per_consumer_each_to_its_own_cap,
    the_last_hour_and_the_queue_age_are_per_consumer,
);

async fn open_work_is_counted_per_consumer_each_to_its_own_cap(store: &Store) {
    // payments: three unknown outcomes; reminders: one, and one sent.
    // Two open dead letters for orders, one for "🧾 رسيد" (a name as hostile as a key).
    for (consumer, key, outcome) in [
        ("payments", "p:1", Outcome::Unknown { error: "timeout" }),
        ("payments", "p/2", Outcome::Unknown { error: "timeout" }),
        ("payments", "p%3", Outcome::Unknown { error: "timeout" }),
        ("reminders", "r 1", Outcome::Unknown { error: "reset" }),
        ("reminders", "r#2", Outcome::Sent { provider_ref: None }),
    ] {
        claim_once(store, delivery(consumer, key, 10)).await;
        settle(store, consumer, key, outcome, 10).await;
    }
    let mut tx = store.begin().await.unwrap();
    tx.dead_letter(&dead_letter("o-1", 20)).await.unwrap();
    tx.dead_letter(&dead_letter("o-2", 21)).await.unwrap();
    tx.dead_letter(&NewDeadLetter {
        consumer: "🧾 رسيد",
        ..dead_letter("x-1", 22)
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();

    // Every consumer with claims, by name, each once, however many claims.
    assert_eq!(
        store
            .metrics()
            .claiming_consumers(10, &idem_domain::Within::Every)
            .await
            .unwrap(),
        ["payments", "reminders"]
    );
    assert_eq!(
        store
            .metrics()
            .claiming_consumers(1, &idem_domain::Within::Every)
            .await
            .unwrap(),
        ["payments"]
    );

    let names: Vec<ConsumerName> = ["payments", "reminders", "orders", "🧾 رسيد"]
        .into_iter()
        .map(testing::consumer)
        .collect();
    let open = store.lists().open_by_consumer(&names, 100).await.unwrap();
    assert_eq!(open.unknown("payments").to_string(), "3");
    assert_eq!(open.unknown("reminders").to_string(), "1");
    assert!(open.unknown("orders").is_zero());
    assert_eq!(open.dead_letters("orders").to_string(), "2");
    assert_eq!(open.dead_letters("🧾 رسيد").to_string(), "1");
    assert!(open.dead_letters("payments").is_zero());

    // Each consumer is counted on its own to the cap: one's backlog never
    // makes another's count a guess.
    let capped = store.lists().open_by_consumer(&names, 2).await.unwrap();
    assert_eq!(capped.unknown("payments").to_string(), "2+");
    assert_eq!(capped.unknown("reminders").to_string(), "1");
    assert!(!capped.unknown("reminders").capped);
    assert_eq!(capped.dead_letters("orders").to_string(), "2");
    assert_eq!(
        capped.dead_letters("🧾 رسيد").to_string(),
        "1",
        "exact below the cap, whatever another consumer holds"
    );
    let only_reminders = store
        .lists()
        .open_by_consumer(&[testing::consumer("reminders")], 100)
        .await
        .unwrap();
    assert!(
        only_reminders.unknown("payments").is_zero(),
        "not asked, not counted"
    );
}

async fn the_last_hour_and_the_queue_age_are_per_consumer(store: &Store) {
    let now = at(7200);
    let sample = |consumer: &str, metric: Metric, minutes_ago: i64, value: f64| MetricSample {
        consumer: consumer.into(),
        metric,
        at: now - TimeDelta::minutes(minutes_ago),
        bucket: String::new(),
        value,
    };
    store
        .metrics()
        .record_metrics(&[
            sample("payments", Metric::Deliveries, 5, 100.0),
            sample("payments", Metric::Deliveries, 50, 20.0),
            sample("payments", Metric::DuplicateClaims, 5, 3.0),
            // Two hours ago: outside the hour.
            sample("payments", Metric::Deliveries, 120, 1000.0),
            sample("reminders", Metric::Deliveries, 10, 7.0),
            sample("reminders", Metric::Sends, 10, 7.0),
            sample("payments", Metric::QueueOldestAgeSeconds, 2, 12.0),
            sample("payments", Metric::QueueOldestAgeSeconds, 3, 40.0),
            sample("reminders", Metric::QueueOldestAgeSeconds, 4, 2.0),
            // Ten minutes ago: older than the five minutes asked for.
            sample("reminders", Metric::QueueOldestAgeSeconds, 10, 900.0),
        ])
        .await
        .unwrap();
    let mut sums = store
        .metrics()
        .sums_by_consumer(
            &[Metric::Deliveries, Metric::DuplicateClaims],
            now - TimeDelta::hours(1),
            now,
            &idem_domain::Within::Every,
        )
        .await
        .unwrap();
    sums.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    assert_eq!(
        sums,
        [
            ("payments".to_owned(), Metric::Deliveries, 120.0),
            ("payments".to_owned(), Metric::DuplicateClaims, 3.0),
            ("reminders".to_owned(), Metric::Deliveries, 7.0),
        ]
    );
    let ages = store
        .metrics()
        .gauge_max_by_consumer(
            Metric::QueueOldestAgeSeconds,
            now - TimeDelta::minutes(5),
            now,
            &idem_domain::Within::Every,
        )
        .await
        .unwrap();
    assert_eq!(ages.get("payments"), Some(&40.0));
    assert_eq!(ages.get("reminders"), Some(&2.0));
    assert_eq!(ages.len(), 2);
}
