//! Counts and metric samples.

use chrono::TimeDelta;
use idem_domain::{ClaimStatus, Metric};
use idem_store::{MetricSample, Outcome, Store, Ts};

use super::{at, claim_once, dead_letter, delivery, outbox_row, settle};

idem_store::on_both_backends!(
    counts_are_exact_when_small_and_capped_when_large,
    the_overview_counts_what_needs_a_person_and_what_the_last_hour_brought,
    metric_upserts_add_counters_and_buckets_and_keep_the_largest_gauge,
    an_adapter_counter_survives_a_rollback_and_is_sampled_once,
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
    let sent = store
        .lists()
        .count_claims(ClaimStatus::Sent, 5)
        .await
        .unwrap();
    assert_eq!(sent.to_string(), "5+");
    let unknown = store
        .lists()
        .count_claims(ClaimStatus::Unknown, 5)
        .await
        .unwrap();
    assert_eq!(unknown.to_string(), "3");
    assert!(
        store
            .lists()
            .count_claims(ClaimStatus::Failed, 5)
            .await
            .unwrap()
            .is_zero()
    );
    assert_eq!(
        store
            .lists()
            .count_claims(ClaimStatus::Sent, 9)
            .await
            .unwrap()
            .to_string(),
        "9"
    );
}

async fn the_overview_counts_what_needs_a_person_and_what_the_last_hour_brought(store: &Store) {
    // Two hours before the overview's clock: one pending, one failed, one
    // unknown. Within its last hour: one pending, two failed, two more
    // unknown (the oldest unknown first), six sent.
    let hour = 3600;
    let now = at(2 * hour);
    for (i, seconds) in (0..3)
        .map(|i| (i, i))
        .chain((3..14).map(|i| (i, hour + 60 * i)))
    {
        let key = format!("r{i:02}");
        claim_once(store, delivery("reminders", &key, seconds)).await;
        let outcome = match i {
            0 | 3 => continue,
            1 | 4 | 5 => Outcome::Permanent { error: "400" },
            2 | 6 | 7 => Outcome::Unknown { error: "timeout" },
            _ => Outcome::Sent { provider_ref: None },
        };
        settle(store, "reminders", &key, outcome, seconds).await;
    }
    let mut tx = store.begin().await.unwrap();
    tx.dead_letter(&dead_letter("dl-1", 5)).await.unwrap();
    tx.enqueue(&outbox_row("ob-1", 6)).await.unwrap();
    tx.commit().await.unwrap();
    // Sends 10 and 30 minutes ago count; two hours ago does not.
    let sends = |minutes_ago: i64, value: f64| MetricSample {
        consumer: "reminders".into(),
        metric: Metric::Sends,
        at: now - TimeDelta::minutes(minutes_ago),
        bucket: String::new(),
        value,
    };
    store
        .metrics()
        .record_metrics(&[sends(10, 4.0), sends(30, 3.0), sends(120, 100.0)])
        .await
        .unwrap();

    let overview = store
        .lists()
        .overview(2, 2, now, &idem_domain::Within::Every)
        .await
        .unwrap();
    let counts = [
        overview.pending_last_hour,
        overview.failed_last_hour,
        overview.unknown,
        overview.open_dead_letters,
        overview.unpublished_outbox,
    ]
    .map(|c| c.to_string());
    assert_eq!(counts, ["1", "2", "2+", "1", "1"]);
    assert_eq!(overview.sends_last_hour, 7);
    let oldest: Vec<_> = overview
        .oldest_unknown
        .iter()
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(oldest, ["r02", "r06"], "the two oldest unknown outcomes");
    assert_eq!(overview.oldest_dead_letters[0].key, "dl-1");
    assert_eq!(overview.oldest_outbox[0].key, "ob-1");
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
        .metrics()
        .record_metrics(&[
            sample(Metric::Deliveries, "", 3.0, 1),
            sample(Metric::QueueOldestAgeSeconds, "", 12.5, 2),
            sample(Metric::DuplicateDelaySeconds, "600", 1.0, 3),
        ])
        .await
        .unwrap();
    store
        .metrics()
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

/// Sums a consumer's counter over the test's day.
async fn counted(store: &Store, consumer: &str, metric: Metric) -> f64 {
    let rows = store
        .metric_rows(consumer, metric, at(0), at(86_400))
        .await
        .unwrap();
    rows.iter().map(|r| r.value).sum()
}

async fn an_adapter_counter_survives_a_rollback_and_is_sampled_once(store: &Store) {
    store
        .metrics()
        .register_adapter_counter("legacy", Metric::DuplicateClaims, None)
        .await
        .unwrap();
    store
        .metrics()
        .register_adapter_counter("jobs", Metric::DuplicateClaims, Some("jobs_duplicates"))
        .await
        .unwrap();
    assert_eq!(
        store
            .metrics()
            .unobservable(Metric::DuplicateClaims, &idem_domain::Within::Every)
            .await
            .unwrap(),
        ["legacy"],
        "a registration without a sequence declares a blind spot"
    );
    assert!(
        store
            .metrics()
            .unobservable(Metric::Deliveries, &idem_domain::Within::Every)
            .await
            .unwrap()
            .is_empty()
    );

    // Two duplicates counted by transactions that roll back, one by one that
    // commits (SQLite has neither sequences nor adapters: nothing to sample).
    for bump in [
        "CREATE SEQUENCE jobs_duplicates",
        "BEGIN; SELECT nextval('jobs_duplicates'); ROLLBACK;",
        "BEGIN; SELECT nextval('jobs_duplicates'); ROLLBACK;",
        "SELECT nextval('jobs_duplicates')",
    ] {
        idem_store::testing::execute_raw(store, "SELECT 1", bump)
            .await
            .unwrap();
    }
    let expected = if store.backend() == "postgres" {
        3.0
    } else {
        0.0
    };
    store
        .metrics()
        .sample_adapter_counters(at(60))
        .await
        .unwrap();
    assert_eq!(
        counted(store, "jobs", Metric::DuplicateClaims).await,
        expected
    );
    // Sampling again (another replica, the next minute) adds nothing new.
    let metrics = store.metrics();
    let (again, later) = tokio::join!(
        metrics.sample_adapter_counters(at(120)),
        metrics.sample_adapter_counters(at(180)),
    );
    assert_eq!((again.unwrap(), later.unwrap()), (0, 0));
    assert_eq!(
        counted(store, "jobs", Metric::DuplicateClaims).await,
        expected
    );
    // The next duplicate lands in the minute it was sampled in.
    idem_store::testing::execute_raw(store, "SELECT 1", "SELECT nextval('jobs_duplicates')")
        .await
        .unwrap();
    store
        .metrics()
        .sample_adapter_counters(at(240))
        .await
        .unwrap();
    let rows = store
        .metric_rows("jobs", Metric::DuplicateClaims, at(240).minute(), at(300))
        .await
        .unwrap();
    let in_minute: f64 = rows.iter().map(|r| r.value).sum();
    assert_eq!(
        in_minute,
        if store.backend() == "postgres" {
            1.0
        } else {
            0.0
        }
    );
    assert!(counted(store, "legacy", Metric::DuplicateClaims).await == 0.0);
}
