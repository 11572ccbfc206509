//! The demo simulator writes, through the claim-in-transaction pattern, every
//! case the console exists for — on both backends.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use idem::demo::{self, Settings, tour};
use idem_domain::{ClaimStatus, DeadLetterState, Metric};
use idem_store::{PageRequest, Store, Ts};

idem_store::on_both_backends!(two_hours_of_demo_history_contain_every_case_of_the_tour);

async fn two_hours_of_demo_history_contain_every_case_of_the_tour(store: &Store) {
    // The demo is quiet at night (UTC), and this test must not depend on when
    // it runs: the history ends at yesterday's 16:00, in the busy afternoon.
    let end = (Utc::now() - TimeDelta::days(1))
        .date_naive()
        .and_hms_opt(16, 0, 0)
        .unwrap()
        .and_utc();
    let facts = demo::write_history(
        store.clone(),
        &Settings {
            seed: 1842,
            backfill: Duration::from_secs(2 * 3600),
        },
        end,
    )
    .await;
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
    let letters = store
        .dead_letters_for_key("order-events", tour::DEAD_LETTERED)
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
        .dead_letters_for_key("order-events", tour::DEAD_LETTER_ALREADY_SENT)
        .await
        .unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].state, DeadLetterState::Open);

    let twice = one(tour::TWO_DEAD_LETTERS).await;
    assert_eq!(twice.status, ClaimStatus::Failed);
    let letters = store
        .dead_letters_for_key("order-events", tour::TWO_DEAD_LETTERS)
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
        .dead_letters_for_key("order-events", tour::UNKNOWN_BESIDE_DEAD_LETTER)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].state, DeadLetterState::Open);

    // The relay published what the consumers wrote to the outbox.
    let backlog = store
        .unpublished_outbox(&PageRequest::first(200))
        .await
        .unwrap();
    let published = store
        .outbox_for_key("payment-webhooks", tour::WEBHOOK_DUPLICATE)
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
