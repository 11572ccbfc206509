//! Counts and metric samples.

use chrono::TimeDelta;
use idem_domain::{ClaimStatus, Metric};
use idem_store::{MetricSample, Outcome, Store, Ts};

use crate::{at, claim_once, delivery, settle};

idem_store::on_both_backends!(
    counts_are_exact_when_small_and_capped_when_large,
    metric_upserts_add_counters_and_buckets_and_keep_the_largest_gauge,
);

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
