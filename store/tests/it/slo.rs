//! SLO event counts on both backends: from minutes, from hourly rollups, and
//! from the audit log — the same answer whichever the data comes from.

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::{
    Metric,
    slo::{Events, Indicator},
};
use idem_store::{MetricSample, Store, Ts, testing};

idem_store::on_both_backends!(
    hourly_rollups_give_the_same_answer_as_minutes,
    rolling_up_an_hour_again_counts_nothing_twice,
    minutes_past_the_watermark_are_still_counted,
    an_hour_still_being_written_is_not_rolled_up,
    every_span_read_at_once_matches_each_span_read_alone,
    chart_intervals_read_the_same_from_minutes_and_rollups_for_one_consumer_or_all,
    long_chart_intervals_read_the_same_from_minutes_hours_and_six_hour_blocks,
    consumers_are_listed_by_name_once_each,
);

/// Midnight, so hour boundaries fall on whole multiples of 60 minutes from here.
fn base() -> Ts {
    Ts::from(
        DateTime::parse_from_rfc3339("2026-11-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc),
    )
}

pub(crate) fn at(minutes: i64) -> Ts {
    base() + TimeDelta::minutes(minutes)
}

fn sample(consumer: &str, metric: Metric, minute: i64, value: f64) -> MetricSample {
    MetricSample {
        consumer: consumer.into(),
        metric,
        at: at(minute),
        bucket: metric.bucket_for(value),
        value,
    }
}

/// One histogram observation of `value` seconds: a count of one in its bucket.
fn observation(consumer: &str, metric: Metric, minute: i64, value: f64) -> MetricSample {
    MetricSample {
        value: 1.0,
        ..sample(consumer, metric, minute, value)
    }
}

/// Three hours and a bit of two consumers' minutes:
/// - 10 deliveries a minute each, and a dead letter every 10th minute for `orders`;
/// - queue age 30 s, except 120 s in every 20th minute for `orders`;
/// - one outcome a minute each, 2 s after delivery, except 1200 s every 15th minute.
pub(crate) async fn three_hours_of_metrics(store: &Store) {
    let mut samples = Vec::new();
    for minute in 0..190 {
        for consumer in ["orders", "reminders"] {
            samples.push(sample(consumer, Metric::Deliveries, minute, 10.0));
            let age = if consumer == "orders" && minute % 20 == 0 {
                120.0
            } else {
                30.0
            };
            samples.push(sample(consumer, Metric::QueueOldestAgeSeconds, minute, age));
            let latency = if minute % 15 == 0 { 1200.0 } else { 2.0 };
            samples.push(observation(
                consumer,
                Metric::OutcomeLatencySeconds,
                minute,
                latency,
            ));
        }
        if minute % 10 == 0 {
            samples.push(sample("orders", Metric::DeadLetters, minute, 1.0));
        }
    }
    store.metrics().record_metrics(&samples).await.unwrap();
}

pub(crate) fn not_dead_lettered() -> Indicator {
    Indicator::Counters {
        valid: Metric::Deliveries,
        bad: Metric::DeadLetters,
    }
}

pub(crate) fn queue_age_60s() -> Indicator {
    Indicator::GaugeSlices {
        gauge: Metric::QueueOldestAgeSeconds,
        at_most_seconds: 60.0,
    }
}

pub(crate) fn reconciled_15m() -> Indicator {
    Indicator::Histogram {
        histogram: Metric::OutcomeLatencySeconds,
        at_most_seconds: 900.0,
    }
}

async fn events(store: &Store, indicator: &Indicator, from: i64, to: i64) -> Events {
    store
        .indicator_events(indicator, at(from), at(to))
        .await
        .unwrap()
}

/// Minutes 7 to 185: a ragged first hour, two whole hours, a ragged last one.
async fn every_indicator(store: &Store) -> [Events; 3] {
    [
        events(store, &not_dead_lettered(), 7, 185).await,
        events(store, &queue_age_60s(), 7, 185).await,
        events(store, &reconciled_15m(), 7, 185).await,
    ]
}

async fn hourly_rollups_give_the_same_answer_as_minutes(store: &Store) {
    three_hours_of_metrics(store).await;

    let from_minutes = every_indicator(store).await;
    // Minutes 7..185 are 178 minutes; 2 consumers × 10 deliveries each.
    // Dead letters at minutes 10, 20, …, 180: 18 of them.
    assert_eq!(from_minutes[0], Events::new(3560.0 - 18.0, 3560.0));
    // 356 consumer-minutes; `orders` is over 60 s at minutes 20, 40, …, 180: 9.
    assert_eq!(from_minutes[1], Events::new(356.0 - 9.0, 356.0));
    // 356 outcomes; slow ones at minutes 15, 30, …, 180 for both: 24.
    assert_eq!(from_minutes[2], Events::new(356.0 - 24.0, 356.0));

    let hours = store.metrics().roll_up_hours(at(4 * 60)).await.unwrap();
    assert_eq!(hours, 3, "hours 0, 1 and 2 have settled; hour 3 has not");
    assert_eq!(
        store.metrics().rollup_watermark().await.unwrap(),
        Some(at(3 * 60))
    );

    assert_eq!(every_indicator(store).await, from_minutes);
}

async fn rolling_up_an_hour_again_counts_nothing_twice(store: &Store) {
    three_hours_of_metrics(store).await;
    store.metrics().roll_up_hours(at(4 * 60)).await.unwrap();
    let once = every_indicator(store).await;

    // Wind the watermark back: the same hours are rolled up a second time.
    store
        .system()
        .set_meta(idem_store::ROLLUP_WATERMARK, &at(0).micros().to_string())
        .await
        .unwrap();
    assert_eq!(store.metrics().roll_up_hours(at(4 * 60)).await.unwrap(), 3);

    assert_eq!(every_indicator(store).await, once);
}

async fn minutes_past_the_watermark_are_still_counted(store: &Store) {
    three_hours_of_metrics(store).await;
    store.metrics().roll_up_hours(at(4 * 60)).await.unwrap();
    let before = events(store, &not_dead_lettered(), 0, 240).await;

    // A consumer writes minute 200 (after the watermark at 180).
    store
        .metrics()
        .record_metrics(&[sample("orders", Metric::Deliveries, 200, 5.0)])
        .await
        .unwrap();

    let after = events(store, &not_dead_lettered(), 0, 240).await;
    assert_eq!(after.valid, before.valid + 5.0);
    assert_eq!(after.good, before.good + 5.0);
}

async fn an_hour_still_being_written_is_not_rolled_up(store: &Store) {
    three_hours_of_metrics(store).await;
    // Three minutes after hour 2 ends, consumers may still be flushing it.
    assert_eq!(
        store.metrics().roll_up_hours(at(3 * 60 + 3)).await.unwrap(),
        2
    );
    assert_eq!(
        store.metrics().rollup_watermark().await.unwrap(),
        Some(at(2 * 60))
    );
    // Nothing new has settled: a second run does nothing.
    assert_eq!(
        store.metrics().roll_up_hours(at(3 * 60 + 3)).await.unwrap(),
        0
    );
}

async fn every_span_read_at_once_matches_each_span_read_alone(store: &Store) {
    three_hours_of_metrics(store).await;
    // Span starts mid-hour, on an hour, and after the rollup's watermark.
    let froms = [7, 59, 60, 125, 181, 184];
    let mut alone = Vec::new();
    for indicator in [not_dead_lettered(), queue_age_60s(), reconciled_15m()] {
        for from in froms {
            alone.push(events(store, &indicator, from, 185).await);
        }
    }
    store.metrics().roll_up_hours(at(4 * 60)).await.unwrap();

    let indicators = [not_dead_lettered(), queue_age_60s(), reconciled_15m()];
    let starts: Vec<Ts> = froms.iter().map(|m| at(*m)).collect();
    let at_once: Vec<Events> = store
        .metrics()
        .indicator_events_since(&indicators.iter().collect::<Vec<_>>(), &starts, at(185))
        .await
        .unwrap()
        .concat();
    assert_eq!(at_once, alone);
    // Minutes 181..185: 4 minutes, 2 consumers, 10 deliveries each; no dead letter.
    assert_eq!(alone[4], Events::new(80.0, 80.0));
}

async fn chart_intervals_read_the_same_from_minutes_and_rollups_for_one_consumer_or_all(
    store: &Store,
) {
    three_hours_of_metrics(store).await;
    // Quarter hours: every hour is cut, so the read mixes rollups and minutes.
    let starts: Vec<Ts> = (0..12).map(|q| at(q * 15)).collect();
    let orders = testing::consumer("orders");
    let read = async |metric, consumer: Option<&str>| {
        let consumer = consumer.map(testing::consumer);
        store
            .metrics()
            .metric_buckets(&[metric], &starts, at(180), consumer.as_ref())
            .await
            .unwrap()
            .remove(&metric)
            .unwrap()
    };
    let total =
        |sums: &[idem_domain::Histogram]| -> Vec<f64> { sums.iter().map(|s| s.total()).collect() };
    let before = read(Metric::Deliveries, None).await;
    assert_eq!(
        total(&before),
        vec![300.0; 12],
        "two consumers, 10 a minute"
    );
    assert_eq!(
        total(&read(Metric::Deliveries, Some("orders")).await),
        vec![150.0; 12]
    );
    // The first quarter of `orders`: minute 0 read 120 s, the other 14 read 30 s.
    let ages = read(Metric::QueueOldestAgeSeconds, Some("orders")).await;
    assert_eq!(ages[0].count(120.0), 1.0);
    assert_eq!(ages[0].count(30.0), 14.0);

    store.metrics().roll_up_hours(at(240)).await.unwrap();
    assert_eq!(read(Metric::Deliveries, None).await, before);
    assert_eq!(
        read(Metric::QueueOldestAgeSeconds, Some("orders")).await,
        ages
    );
    // Whole hours come from the rollup and still split by consumer.
    let hours: Vec<Ts> = (0..3).map(|h| at(h * 60)).collect();
    let hourly = store
        .metrics()
        .metric_buckets(
            &[Metric::DeadLetters],
            &hours,
            at(180),
            Some(&testing::consumer("reminders")),
        )
        .await
        .unwrap()
        .remove(&Metric::DeadLetters)
        .unwrap();
    assert!(hourly.iter().all(|h| h.is_empty()), "reminders had none");
    let hourly = store
        .metrics()
        .metric_buckets(&[Metric::DeadLetters], &hours, at(180), Some(&orders))
        .await
        .unwrap()
        .remove(&Metric::DeadLetters)
        .unwrap();
    assert_eq!(total(&hourly), vec![6.0, 6.0, 6.0]);
    let everyone = store
        .metrics()
        .metric_buckets(&[Metric::Deliveries], &hours, at(180), None)
        .await
        .unwrap()
        .remove(&Metric::Deliveries)
        .unwrap();
    assert_eq!(
        total(&everyone),
        vec![1200.0; 3],
        "the rolled-up sum over all"
    );
}

/// A day and a half of two consumers' minutes, one sample every seventh
/// minute: deliveries (a counter), queue age (a gauge) and outcome latency
/// (a histogram), varying with the minute.
pub(crate) async fn a_day_and_a_half_of_metrics(store: &Store) {
    let mut samples = Vec::new();
    for minute in (0..36 * 60).step_by(7) {
        for consumer in ["orders", "reminders"] {
            let wave = (minute % 97) as f64;
            samples.push(sample(consumer, Metric::Deliveries, minute, 1.0 + wave));
            samples.push(sample(
                consumer,
                Metric::QueueOldestAgeSeconds,
                minute,
                wave * 3.0,
            ));
            samples.push(observation(
                consumer,
                Metric::OutcomeLatencySeconds,
                minute,
                wave * 20.0,
            ));
        }
    }
    store.metrics().record_metrics(&samples).await.unwrap();
}

/// Deletes the hourly rollup rows before `before` (to show what reads them).
async fn delete_hours_before(store: &Store, before: Ts) {
    delete_hours(store, Ts::from_micros(0).unwrap(), before).await;
}

/// Deletes the hourly rollup's rows of `[from, to)`, as if never rolled up.
pub(crate) async fn delete_hours(store: &Store, from: Ts, to: Ts) {
    const SQL: &str = "DELETE FROM consumer_metrics_hourly WHERE hour >= $1 AND hour < $2";
    match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(pool), _) => {
            sqlx::query(SQL)
                .bind(from)
                .bind(to)
                .execute(pool)
                .await
                .unwrap();
        }
        (_, Some(pool)) => {
            sqlx::query(SQL)
                .bind(from)
                .bind(to)
                .execute(pool)
                .await
                .unwrap();
        }
        (None, None) => unreachable!("a store has one pool or the other"),
    }
}

async fn long_chart_intervals_read_the_same_from_minutes_hours_and_six_hour_blocks(store: &Store) {
    a_day_and_a_half_of_metrics(store).await;
    let metrics = [
        Metric::Deliveries,
        Metric::QueueOldestAgeSeconds,
        Metric::OutcomeLatencySeconds,
    ];
    // The charts' long intervals: six hours (28 days) and two hours (7 days),
    // each a whole number of intervals since the epoch, as `base()` is.
    let six_hours: Vec<Ts> = (0..5).map(|i| at(i * 6 * 60)).collect();
    let two_hours: Vec<Ts> = (0..15).map(|i| at(i * 2 * 60)).collect();
    let read = async |starts: &[Ts], consumer: Option<&str>| {
        let consumer = consumer.map(testing::consumer);
        let mut read = store
            .metrics()
            .metric_buckets(&metrics, starts, at(30 * 60), consumer.as_ref())
            .await
            .unwrap();
        metrics.map(|m| read.remove(&m).unwrap())
    };
    let from_minutes = [
        read(&six_hours, None).await,
        read(&six_hours, Some("orders")).await,
        read(&two_hours, None).await,
    ];
    assert_eq!(
        from_minutes[0][0][0].total(),
        (0..6 * 60)
            .step_by(7)
            .map(|m| 2.0 * (1.0 + (m % 97) as f64))
            .sum::<f64>(),
        "the first six hours' deliveries, both consumers"
    );
    // Days (a custom span's intervals), the last ending inside a block.
    let days = [at(0), at(24 * 60)];
    let read_days = async || {
        store
            .metrics()
            .metric_buckets(&metrics, &days, at(33 * 60), None)
            .await
            .unwrap()
            .remove(&Metric::Deliveries)
            .unwrap()
    };
    let days_from_minutes = read_days().await;
    // Rolled up to 15:00: the block 12:00–18:00 is not complete, so it is
    // read from hours and minutes; then to the end, every block complete.
    for now in [at(15 * 60 + 5), at(36 * 60 + 5)] {
        store.metrics().roll_up_hours(now).await.unwrap();
        let read_now = [
            read(&six_hours, None).await,
            read(&six_hours, Some("orders")).await,
            read(&two_hours, None).await,
        ];
        assert_eq!(read_now, from_minutes, "rolled up to {now:?}");
        assert_eq!(read_days().await, days_from_minutes, "rolled up to {now:?}");
    }
    // Complete blocks are read from the six-hour tier, not from hours: with
    // the hours under them gone, six-hour and daily intervals read the same.
    delete_hours_before(store, at(30 * 60)).await;
    assert_eq!(read(&six_hours, None).await, from_minutes[0]);
    assert_eq!(read(&six_hours, Some("orders")).await, from_minutes[1]);
    assert_eq!(read_days().await, days_from_minutes);
}

async fn consumers_are_listed_by_name_once_each(store: &Store) {
    assert!(
        store
            .metrics()
            .consumers(10, &idem_domain::Within::Every)
            .await
            .unwrap()
            .is_empty()
    );
    three_hours_of_metrics(store).await;
    assert_eq!(
        store
            .metrics()
            .consumers(10, &idem_domain::Within::Every)
            .await
            .unwrap(),
        ["orders", "reminders"]
    );
    assert_eq!(
        store
            .metrics()
            .consumers(1, &idem_domain::Within::Every)
            .await
            .unwrap(),
        ["orders"]
    );
}
