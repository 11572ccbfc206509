//! SLO events per consumer on both backends: each consumer's own, adding
//! up to the fleet's, the same from minutes and from rollups.

use chrono::TimeDelta;
use idem_domain::slo::{Events, Indicator};
use idem_store::{NewAuditEntry, Store, Ts};

use super::slo::{
    a_day_and_a_half_of_metrics, at, delete_hours, not_dead_lettered, queue_age_60s,
    reconciled_15m, three_hours_of_metrics,
};

idem_store::on_both_backends!(
    each_consumers_events_add_up_to_the_fleets_from_minutes_and_from_rollups,
    recoveries_count_for_the_consumer_they_recovered,
    a_long_first_span_reads_the_same_from_six_hour_blocks,
);

async fn each_consumers_events_add_up_to_the_fleets_from_minutes_and_from_rollups(store: &Store) {
    three_hours_of_metrics(store).await;
    let froms: Vec<Ts> = [7, 59, 60, 125, 181, 184].iter().map(|m| at(*m)).collect();
    let indicators = [not_dead_lettered(), queue_age_60s(), reconciled_15m()];
    let indicators: Vec<&Indicator> = indicators.iter().collect();
    let consumers = ["orders", "reminders", "nobody"].map(String::from);
    let read = async || {
        store
            .metrics()
            .indicator_events_by_consumer(&indicators, &froms, at(185), &consumers)
            .await
            .unwrap()
    };
    let from_minutes = read().await;
    let fleet = store
        .metrics()
        .indicator_events_since(&indicators, &froms, at(185))
        .await
        .unwrap();

    // Minutes 7..185, `orders` alone: 1780 deliveries, 18 dead letters;
    // `reminders` none; a consumer with no rows has no events.
    assert_eq!(
        from_minutes["orders"][0][0],
        Events::new(1780.0 - 18.0, 1780.0)
    );
    assert_eq!(from_minutes["reminders"][0][0], Events::new(1780.0, 1780.0));
    assert!(
        from_minutes["nobody"]
            .concat()
            .iter()
            .all(|e| *e == Events::default())
    );
    for (i, spans) in fleet.iter().enumerate() {
        for (j, whole) in spans.iter().enumerate() {
            let (a, b) = (
                from_minutes["orders"][i][j],
                from_minutes["reminders"][i][j],
            );
            assert_eq!(
                Events::new(a.good + b.good, a.valid + b.valid),
                *whole,
                "indicator {i}, span {j}: the consumers' events add up to the fleet's"
            );
        }
    }

    store.metrics().roll_up_hours(at(4 * 60)).await.unwrap();
    assert_eq!(
        read().await,
        from_minutes,
        "the rollups say what the minutes said"
    );
}

async fn recoveries_count_for_the_consumer_they_recovered(store: &Store) {
    let now = Ts::now();
    for (consumer, seconds) in [("orders", 300.0), ("orders", 7200.0), ("reminders", 60.0)] {
        store
            .audit()
            .append_audit(&NewAuditEntry {
                consumer: Some(consumer),
                recovery_seconds: Some(seconds),
                ..NewAuditEntry::new(
                    "olga",
                    "operator",
                    idem_domain::AuditAction::Replay,
                    idem_domain::AuditResult::Ok,
                )
            })
            .await
            .unwrap();
    }
    let recovery = Indicator::Recovery {
        within_seconds: 3600.0,
    };
    let by_consumer = store
        .metrics()
        .indicator_events_by_consumer(
            &[&recovery],
            &[now - TimeDelta::hours(1)],
            now + TimeDelta::minutes(1),
            &["orders".to_owned(), "reminders".to_owned()],
        )
        .await
        .unwrap();
    assert_eq!(by_consumer["orders"][0][0], Events::new(1.0, 2.0));
    assert_eq!(by_consumer["reminders"][0][0], Events::new(1.0, 1.0));
}

/// A first span long enough to hold whole six-hour blocks reads them from
/// the six-hour tier: with the hours under them gone, the answer stands.
async fn a_long_first_span_reads_the_same_from_six_hour_blocks(store: &Store) {
    a_day_and_a_half_of_metrics(store).await;
    let froms: Vec<Ts> = [7, 20 * 60 + 13, 30 * 60, 35 * 60 + 30].map(at).to_vec();
    let indicators = [not_dead_lettered(), queue_age_60s(), reconciled_15m()];
    let indicators: Vec<&Indicator> = indicators.iter().collect();
    let consumers = ["orders", "reminders"].map(String::from);
    let read = async || {
        store
            .metrics()
            .indicator_events_by_consumer(&indicators, &froms, at(36 * 60), &consumers)
            .await
            .unwrap()
    };
    let from_minutes = read().await;
    assert!(from_minutes["orders"][0][0].valid > 0.0);
    store
        .metrics()
        .roll_up_hours(at(36 * 60 + 5))
        .await
        .unwrap();
    assert_eq!(
        read().await,
        from_minutes,
        "the rollups say what the minutes said"
    );
    // The first span, 00:07 to 20:13, holds the blocks 06:00–12:00 and 12:00–18:00.
    delete_hours(store, at(6 * 60), at(18 * 60)).await;
    assert_eq!(
        read().await,
        from_minutes,
        "those blocks come from the six-hour tier"
    );
    // Hours outside the blocks are still read hour by hour.
    delete_hours(store, at(18 * 60), at(19 * 60)).await;
    assert_ne!(read().await, from_minutes, "18:00–19:00 is read from hours");
}
