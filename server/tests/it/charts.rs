//! Server-drawn charts over real HTTP.

use crate::common;
use crate::common::{spawn_app, visible};
use chrono::TimeDelta;
use idem_domain::Metric;
use idem_store::{Delivery, MetricSample, Outcome, Store, Ts, testing::TestDatabase};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_charts_duplicate_delays_against_the_five_minute_window() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let at = Ts::now() - TimeDelta::minutes(10);
    let observed = |delay: f64, count: f64| MetricSample {
        consumer: "payments".into(),
        metric: Metric::DuplicateDelaySeconds,
        at,
        bucket: Metric::DuplicateDelaySeconds.bucket_for(delay),
        value: count,
    };
    app.store
        .metrics()
        .record_metrics(&[
            observed(4.0, 45.0),
            observed(200.0, 30.0),
            observed(7200.0, 25.0),
        ])
        .await
        .unwrap();

    let (status, html) = app.get("/?range=1h").await;
    assert_eq!(status, 200);
    assert!(
        html.contains("<svg"),
        "the chart is in the page, drawn on the server"
    );
    assert!(html.contains("<title>Duplicate delays, last 1h</title>"));
    assert!(visible(&html).contains("Showing the last 1h, in 1 min intervals, up to "));
    let page = visible(&html);
    assert!(
        page.contains("25 of 100 duplicates (25.0%) arrived more than five minutes after"),
        "{page}"
    );
    assert!(page.contains("FIFO dedupe window (5 min)"));

    // Another range reads another window: nothing older than the data here.
    let (_, html) = app.get("/?range=6h").await;
    assert!(visible(&html).contains("25 of 100 duplicates"));

    let (_, html) = app.get("/?range=forever").await;
    assert!(
        visible(&html).contains("The range must be one of 1h, 6h, 24h, 7d, 28d."),
        "a bad range says which ranges exist"
    );
}

/// Ten minutes ago, `payments` and `refunds` each took 100 deliveries;
/// `payments` also saw duplicates, a dead letter, a rolled-back transaction,
/// an unknown outcome and a queue over its threshold.
async fn ten_minutes_ago_of_two_consumers(store: &Store) {
    let at = Ts::now() - TimeDelta::minutes(10);
    let sample = |consumer: &str, metric: Metric, value: f64| MetricSample {
        consumer: consumer.into(),
        metric,
        at,
        bucket: metric.bucket_for(value),
        value,
    };
    let observed = |consumer: &str, metric: Metric, seconds: f64, count: f64| MetricSample {
        value: count,
        ..sample(consumer, metric, seconds)
    };
    store
        .metrics()
        .record_metrics(&[
            sample("payments", Metric::Deliveries, 100.0),
            sample("refunds", Metric::Deliveries, 100.0),
            sample("payments", Metric::DuplicateClaims, 5.0),
            sample("payments", Metric::DeadLetters, 1.0),
            sample("payments", Metric::TransactionFailures, 1.0),
            sample("payments", Metric::UnknownOutcomes, 1.0),
            sample("payments", Metric::QueueOldestAgeSeconds, 90.0),
            sample("refunds", Metric::QueueOldestAgeSeconds, 20.0),
            sample("payments", Metric::OutboxOldestAgeSeconds, 4.0),
            observed("payments", Metric::OutcomeLatencySeconds, 2.0, 95.0),
            observed("payments", Metric::OutcomeLatencySeconds, 1200.0, 5.0),
            observed("payments", Metric::DuplicateDelaySeconds, 30.0, 5.0),
            sample("payments", Metric::DedupeSuppressed, 4.0),
            sample("payments", Metric::RetryableFailures, 6.0),
            sample("payments", Metric::RateLimited, 4.0),
            sample("payments", Metric::RetryAfterHonoured, 3.0),
            sample("payments", Metric::QueueDepth, 250.0),
            sample("refunds", Metric::QueueDepth, 12.0),
            sample("payments", Metric::Replays, 2.0),
        ])
        .await
        .unwrap();
}

async fn unknown_outcome(store: &Store, consumer: &str, key: &str, at: Ts) {
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: None,
        at,
    })
    .await
    .unwrap();
    tx.lease(consumer, key, at + TimeDelta::seconds(30), at)
        .await
        .unwrap();
    tx.record(consumer, key, Outcome::Unknown { error: "timeout" }, at)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_draws_every_chart_with_its_summary() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    ten_minutes_ago_of_two_consumers(&app.store).await;

    let (status, html) = app.get("/?range=1h").await;
    assert_eq!(status, 200);
    for id in [
        "duplicate-rate",
        "duplicate-delays",
        "queue-age",
        "outbox-age",
        "unknown-open",
        "unknown-outcomes",
        "dead-letters",
        "transaction-failures",
        "outcome-latency",
        "recovery-times",
        "duplicates-suppressed",
        "retries",
        "queue-depth",
        "replays",
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "the {id} chart is on the page"
        );
    }
    // Every chart with data is drawn; recovery has none and says so.
    assert_eq!(html.matches("<svg").count(), 12, "twelve charts drawn");
    let page = visible(&html);
    for sentence in [
        "5 of 200 deliveries (2.50%) found their key already claimed in the last 1h. \
         1 of 1 intervals with 100 deliveries or more were over the objective of 1.00%.",
        "The oldest queued message was at most 2 min at its worst in the last 1h. \
         1 of 1 intervals with readings went over 1 min.",
        "1 of 200 deliveries (0.50%) were dead-lettered in the last 1h.",
        "1 outcomes became unknown in the last 1h.",
        "No unknown outcomes are open.",
        "No unknown outcome or dead letter was recovered in the last 1h.",
        "5 deliveries found their key already claimed in the last 1h; 4 were acknowledged \
         without repeating the effect",
        "6 retryable failures in the last 1h, 4 of them rate-limited (429); 3 retries waited \
         as the provider's Retry-After asked. Most failures are rate limiting",
        "The deepest queue held at most 300 messages in the last 1h.",
        "2 replays published in the last 1h.",
    ] {
        assert!(page.contains(sentence), "“{sentence}” in {page}");
    }
    assert!(
        page.contains("59 intervals had no data and are left blank."),
        "minutes without metrics are gaps: {page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_consumer_narrows_every_chart_and_the_filter_lists_the_consumers() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    ten_minutes_ago_of_two_consumers(&app.store).await;

    let (_, html) = app.get("/?range=1h&consumer=refunds").await;
    let page = visible(&html);
    assert!(
        page.contains("0 of 100 deliveries (0%) found their key already claimed"),
        "{page}"
    );
    assert!(page.contains("The oldest queued message was at most 30 s at its worst"));
    assert!(
        html.contains(r#"<option value="payments""#)
            && html.contains(r#"<option value="refunds" selected"#)
    );
    // The range links keep the consumer.
    assert!(html.contains(r#"href="/?range=7d&amp;consumer=refunds""#));

    let (_, html) = app.get("/?range=1h&consumer=bad%00name").await;
    assert!(
        visible(&html).contains("control character"),
        "a malformed consumer name is refused with the reason"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_links_to_the_keys_behind_it_for_its_span_and_consumer() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    ten_minutes_ago_of_two_consumers(&app.store).await;
    let now = Ts::now();
    let key = "inv:2026/11#7 ✓ 100%";
    unknown_outcome(&app.store, "payments", key, now - TimeDelta::minutes(10)).await;
    unknown_outcome(
        &app.store,
        "payments",
        "last-week",
        now - TimeDelta::days(7),
    )
    .await;
    unknown_outcome(
        &app.store,
        "refunds",
        "refund-1",
        now - TimeDelta::minutes(10),
    )
    .await;

    let (_, html) = app.get("/?range=1h&consumer=payments").await;
    let figure = &html[html
        .find(r#"id="unknown-outcomes""#)
        .expect("the unknown chart")..];
    let at = figure
        .find(r#"href="/unknown?"#)
        .expect("a link to the keys")
        + r#"href=""#.len();
    let href = figure[at..]
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    assert!(href.starts_with("/unknown?from="), "{href}");

    let (status, html) = app.get(&href).await;
    assert_eq!(status, 200);
    let page = common::text(&html);
    assert!(page.contains(key), "the key in the span is listed");
    assert!(!page.contains("last-week"), "older keys are not");
    assert!(!page.contains("refund-1"), "other consumers' keys are not");
    assert!(visible(&html).contains("1 unknown"));
    assert!(visible(&html).contains("for consumer payments"));

    let (status, html) = app.get("/unknown?from=yesterday").await;
    assert_eq!(status, 400);
    assert!(visible(&html).contains("“yesterday” is not a time"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_and_to_show_that_span_and_bad_spans_say_why() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    ten_minutes_ago_of_two_consumers(&app.store).await;
    let now = chrono::Utc::now();
    let format = |at: chrono::DateTime<chrono::Utc>| at.format("%Y-%m-%dT%H:%M").to_string();
    let (from, to) = (format(now - TimeDelta::hours(2)), format(now));
    let (status, html) = app.get(&format!("/?from={from}&to={to}")).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("5 of 200 deliveries (2.50%) found their key already claimed"),
        "{page}"
    );
    assert!(page.contains(" UTC."), "the span is named: {page}");

    let (_, html) = app.get(&format!("/?from={to}&to={from}")).await;
    assert!(visible(&html).contains("from must be before to."));
}
