//! The demo simulator writes, through the claim-in-transaction pattern, every
//! case the console exists for — on both backends.

use std::{sync::Arc, time::Duration};

use chrono::{TimeDelta, Utc};
use idem::demo::{
    self, Settings,
    incidents::{Incident, Timeline},
    tour,
};
use idem_domain::{
    ClaimStatus, DeadLetterState, Metric,
    slo::{Slo, SloSet, SloStatus, default_slos},
};
use idem_store::{PageRequest, Store, Ts, Window, testing};

idem_store::on_both_backends!(
    two_hours_of_demo_history_contain_every_case_of_the_tour,
    a_day_of_demo_history_is_healthy_but_for_its_incidents_at_their_times,
);

async fn two_hours_of_demo_history_contain_every_case_of_the_tour(store: &Store) {
    // The demo is quiet at night (UTC), and this test must not depend on when
    // it runs: the history ends at yesterday's 16:00, in the busy afternoon.
    let end = (Utc::now() - TimeDelta::days(1))
        .date_naive()
        .and_hms_opt(16, 0, 0)
        .unwrap()
        .and_utc();
    let facts = write_hours_of_history(store, 2, end).await;
    assert!(
        facts > 100,
        "the fleet published {facts} facts in two hours"
    );

    let one = |key: &str| {
        let store = store.clone();
        let key = key.to_owned();
        async move {
            let mut claims = store.claims_with_key_prefix(&key, 2).await.unwrap();
            assert_eq!(claims.len(), 1, "exactly one claim starts with {key:?}");
            claims.remove(0)
        }
    };

    let late = one(&format!("renewal:{}:", tour::LATE_DUPLICATE_ACCOUNT)).await;
    assert_eq!(late.status, ClaimStatus::Sent);
    assert!(late.duplicate_count >= 1);
    assert!(
        late.last_delivery_at - late.first_delivery_at > TimeDelta::minutes(5),
        "the duplicate came after the FIFO window"
    );

    let webhook = one(tour::WEBHOOK_DUPLICATE).await;
    assert_eq!(
        (webhook.consumer.as_str(), webhook.status),
        ("payment-webhooks", ClaimStatus::Sent)
    );
    assert!(webhook.duplicate_count >= 1);
    assert!(
        webhook.last_delivery_at - webhook.first_delivery_at < TimeDelta::minutes(5),
        "inside the window"
    );
    assert!(
        webhook
            .provider_ref
            .as_deref()
            .is_some_and(|r| r.starts_with("ledger:"))
    );

    let crashed = one(&format!("renewal:{}:", tour::CRASHED_ACCOUNT)).await;
    assert_eq!(
        crashed.status,
        ClaimStatus::Unknown,
        "a crash after acceptance ends unknown"
    );
    assert!(crashed.last_error.unwrap().contains("lease expired"));

    let lost = one(tour::LOST_RESPONSE).await;
    assert_eq!(lost.status, ClaimStatus::Unknown);

    let refund = one(tour::DEAD_LETTERED).await;
    assert_eq!(refund.status, ClaimStatus::Failed);
    assert_eq!(refund.attempts, 3);
    let order_events = testing::consumer("order-events");
    let letters = store
        .claims()
        .dead_letters_for_key(&order_events, &testing::key(tour::DEAD_LETTERED))
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].state, letters[0].delivery_count),
        (DeadLetterState::Open, 3)
    );
    assert!(
        letters[0]
            .last_error
            .as_deref()
            .unwrap()
            .starts_with("429 Too Many Requests")
    );

    let shipped = one(tour::DEAD_LETTER_ALREADY_SENT).await;
    assert_eq!(
        shipped.status,
        ClaimStatus::Sent,
        "redriven after the dead letter, and sent"
    );
    let open = store
        .claims()
        .dead_letters_for_key(&order_events, &testing::key(tour::DEAD_LETTER_ALREADY_SENT))
        .await
        .unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].state, DeadLetterState::Open);

    let twice = one(tour::TWO_DEAD_LETTERS).await;
    assert_eq!(twice.status, ClaimStatus::Failed);
    let letters = store
        .claims()
        .dead_letters_for_key(&order_events, &testing::key(tour::TWO_DEAD_LETTERS))
        .await
        .unwrap();
    assert_eq!(
        letters.iter().map(|d| d.state).collect::<Vec<_>>(),
        [DeadLetterState::Open, DeadLetterState::Open],
        "two open dead letters on one key"
    );

    let charge = one(tour::UNKNOWN_BESIDE_DEAD_LETTER).await;
    assert_eq!(
        charge.status,
        ClaimStatus::Unknown,
        "the redrive lost its response"
    );
    let letters = store
        .claims()
        .dead_letters_for_key(
            &order_events,
            &testing::key(tour::UNKNOWN_BESIDE_DEAD_LETTER),
        )
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].state, DeadLetterState::Open);

    // The relay published what the consumers wrote to the outbox.
    let backlog = store
        .lists()
        .unpublished_outbox_in(
            &PageRequest::first(200),
            &idem_store::OutboxFilter::default(),
        )
        .await
        .unwrap();
    let published = store
        .claims()
        .outbox_for_key(
            &testing::consumer("payment-webhooks"),
            &testing::key(tour::WEBHOOK_DUPLICATE),
        )
        .await
        .unwrap();
    assert_eq!(
        published.len(),
        1,
        "one invoice.paid event for one webhook, however often delivered"
    );
    assert!(
        published[0].published_at.is_some()
            || backlog.items.iter().any(|r| r.id == published[0].id)
    );

    // Per-minute metrics for every consumer.
    let to = Ts(end);
    let from = Ts(end - TimeDelta::hours(3));
    for consumer in ["reminders", "payment-webhooks", "order-events"] {
        let deliveries = store
            .metric_rows(consumer, Metric::Deliveries, from, to)
            .await
            .unwrap();
        assert!(
            deliveries.len() > 30,
            "{consumer}: {} minutes with deliveries",
            deliveries.len()
        );
        let new_claims: f64 = store
            .metric_rows(consumer, Metric::NewClaims, from, to)
            .await
            .unwrap()
            .iter()
            .map(|r| r.value)
            .sum();
        assert!(new_claims > 10.0, "{consumer}: {new_claims} new claims");
        assert!(
            !store
                .metric_rows(consumer, Metric::QueueDepth, from, to)
                .await
                .unwrap()
                .is_empty()
        );
    }
    let delays = store
        .metric_rows("reminders", Metric::DuplicateDelaySeconds, from, to)
        .await
        .unwrap();
    assert!(
        delays.iter().any(|r| r.bucket == "600"),
        "the late duplicate landed in the (300, 600] bucket"
    );
}

/// The demo's history at the tests' fixed seed: `hours` of it up to `end`.
/// Returns how many facts the fleet published.
pub(crate) async fn write_hours_of_history(
    store: &Store,
    hours: u64,
    end: chrono::DateTime<Utc>,
) -> u64 {
    let settings = Settings {
        seed: 1842,
        backfill: Duration::from_secs(hours * 3600),
    };
    demo::write_history(store.clone(), &settings, end).await
}

/// Yesterday at `hour`:00 UTC: a history ending then is the same whenever
/// the test runs (the demo's traffic follows the time of day).
pub(crate) fn yesterday_at(hour: u32) -> chrono::DateTime<Utc> {
    (Utc::now() - TimeDelta::days(1))
        .date_naive()
        .and_hms_opt(hour, 0, 0)
        .unwrap()
        .and_utc()
}

/// The demo starts at any hour: its incidents then land at other times of
/// day, in the quiet of the night as in the busy afternoon.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_day_of_demo_history_ending_at_night_or_in_the_morning_is_as_healthy_and_as_broken() {
    for hour in [3, 9, 22] {
        let db = idem_store::testing::TestDatabase::sqlite().await;
        a_day_of_demo_history_ending_at(&db.store, yesterday_at(hour)).await;
    }
}

fn slo(name: &str) -> Slo {
    default_slos().into_iter().find(|s| s.name == name).unwrap()
}

async fn a_day_of_demo_history_is_healthy_but_for_its_incidents_at_their_times(store: &Store) {
    a_day_of_demo_history_ending_at(store, yesterday_at(16)).await;
}

async fn a_day_of_demo_history_ending_at(store: &Store, end: chrono::DateTime<Utc>) {
    write_hours_of_history(store, 24, end).await;
    let start = end - TimeDelta::hours(24);
    let timeline = Timeline::new(start, end);
    let tour = tour::starts_at(start, end);
    let ratio = |name: &'static str, from, to| {
        let store = store.clone();
        async move {
            let events = store
                .indicator_events(&slo(name).sli, Ts(from), Ts(to))
                .await
                .unwrap();
            (events.ratio(), events.valid)
        }
    };
    let objective = |name: &str| slo(name).objective.get();

    // Healthy hours — neither in an incident nor in the half hour after one
    // (a storm's late retries arrive then), nor in the tour's stories —:
    // every default SLO meets its objective in at least one of them, and
    // the counters' SLOs over all of them together.
    let healthy: Vec<_> = (1..24)
        .map(|h| end - TimeDelta::hours(h))
        .filter(|hour| {
            (-30..60).all(|m| timeline.incidents(*hour + TimeDelta::minutes(m)).count() == 0)
                && (*hour + TimeDelta::hours(1) <= tour || *hour >= tour + TimeDelta::hours(2))
        })
        .collect();
    assert!(healthy.len() > 12, "{} healthy hours", healthy.len());
    let mut unmet = Vec::new();
    for slo in default_slos() {
        let mut ok = 0;
        let mut seen = Vec::new();
        for start in &healthy {
            let (sli, valid) = ratio(leak(&slo.name), *start, *start + TimeDelta::hours(1)).await;
            if sli.is_some_and(|sli| sli >= slo.objective.get()) {
                ok += 1;
            }
            seen.push(format!(
                "{:?}/{valid}",
                sli.map(|s| (s * 1000.0).round() / 1000.0)
            ));
        }
        if ok == 0 {
            unmet.push(format!("{}: {}", slo.name, seen.join(" ")));
        }
    }
    assert!(
        unmet.is_empty(),
        "no healthy hour met its objective:\n{}",
        unmet.join("\n")
    );
    for name in [
        "duplicate-claim-rate",
        "not-dead-lettered",
        "transactions-committed",
    ] {
        let mut bad = 0.0;
        let mut valid = 0.0;
        let mut hours = Vec::new();
        for start in &healthy {
            let events = store
                .indicator_events(&slo(name).sli, Ts(*start), Ts(*start + TimeDelta::hours(1)))
                .await
                .unwrap();
            bad += events.valid - events.good;
            valid += events.valid;
            hours.push(format!(
                "{}:{}/{}",
                start.format("%H"),
                events.valid - events.good,
                events.valid
            ));
        }
        let hours = hours.join(" ");
        assert!(valid > 500.0, "{name}: {valid} events in the healthy hours");
        assert!(
            1.0 - bad / valid >= objective(name),
            "{name}: {bad} bad of {valid} in the healthy hours: {hours}"
        );
    }

    // The retry storm: duplicates over the objective's 1% while it lasts.
    let (from, to) = timeline.span(Incident::RetryStorm);
    let (sli, valid) = ratio("duplicate-claim-rate", from, to).await;
    assert!(valid > 0.0);
    assert!(
        sli.unwrap() < objective("duplicate-claim-rate"),
        "the storm's duplicate share {:?}",
        sli.map(|s| 1.0 - s)
    );

    // The provider outage: dead letters, queue age and unknown outcomes
    // settled late.
    let (from, to) = timeline.span(Incident::ProviderOutage);
    let (sli, _) = ratio("not-dead-lettered", from, to + TimeDelta::minutes(10)).await;
    assert!(sli.unwrap() < objective("not-dead-lettered"), "{sli:?}");
    let (sli, _) = ratio("queue-age-60s", from, to).await;
    assert!(sli.unwrap() < objective("queue-age-60s"), "{sli:?}");
    let (sli, valid) = ratio("unknown-resolved-15m", from, to + TimeDelta::hours(1)).await;
    assert!(valid > 0.0, "the outage left unknown outcomes");
    assert!(sli.unwrap() < objective("unknown-resolved-15m"), "{sli:?}");

    // The stuck relay: the outbox ages past its 30 seconds.
    let (from, to) = timeline.span(Incident::StuckRelay);
    let (sli, _) = ratio("outbox-age-30s", from, to).await;
    assert!(sli.unwrap() < objective("outbox-age-30s"), "{sli:?}");

    // The incident still open: unknown outcomes nobody has settled yet.
    let (from, _) = timeline.span(Incident::EmailProviderDegraded);
    let incident = Window {
        from: Some(Ts(from)),
        to: Some(Ts(end)),
        consumer: Some(idem_store::testing::consumer("reminders")),
        ..Window::default()
    };
    let open = store
        .lists()
        .unknown_claims_in(&PageRequest::first(100), &incident)
        .await
        .unwrap();
    assert!(
        open.items.len() >= 6,
        "{} open unknown outcomes",
        open.items.len()
    );
    // …and reminders rate limited into the dead-letter queue, waiting for
    // a redrive.
    let waiting = store
        .lists()
        .count_dead_letters_in(
            idem_domain::DeadLetterState::Open,
            &idem_store::DeadLetterFilter {
                window: incident,
                error: Some("429".into()),
                except: Vec::new(),
            },
            100,
        )
        .await
        .unwrap();
    assert!(
        waiting.value >= 4,
        "{waiting} open dead letters of the incident"
    );
    // …while the healthy hours' ones were settled by the on-call, all but
    // the tour's, which are left for people.
    let left_open: Vec<String> = store
        .lists()
        .unknown_claims_in(
            &PageRequest::first(100),
            &Window {
                from: Some(Ts(end - TimeDelta::hours(10))),
                to: Some(Ts(from - TimeDelta::minutes(30))),
                ..Window::default()
            },
        )
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.key)
        .filter(|key| {
            !key.starts_with(&format!("renewal:{}:", tour::CRASHED_ACCOUNT))
                && key != tour::LOST_RESPONSE
                && key != tour::UNKNOWN_BESIDE_DEAD_LETTER
        })
        .collect();
    assert!(
        left_open.is_empty(),
        "unknown outcomes of healthy hours left open: {left_open:?}"
    );
    assert!(
        store
            .audit()
            .audit_log(
                &idem_store::AuditFilter {
                    actor: Some(demo::ON_CALL.into()),
                    ..Default::default()
                },
                &PageRequest::first(10),
            )
            .await
            .unwrap()
            .items
            .len()
            >= 5,
        "the on-call settled the calm hours' unknown outcomes"
    );
}

/// Every default SLO as `/slo` shows it at `end`, worst first.
pub(crate) async fn slo_states_at(store: &Store, end: chrono::DateTime<Utc>) -> Vec<SloStatus> {
    let (slos, catalogue) = (Arc::new(SloSet::default()), Arc::default());
    let board = idem_app::api::evaluate_slos(store.clone(), slos, catalogue, Ts(end));
    board.await.unwrap().statuses
}

/// A name with the lifetime the closures above want.
fn leak(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}
