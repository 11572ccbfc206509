//! A broker's dead letters: stored once however often the broker delivers
//! them, and their replays published by one attempt at a time.

use idem_domain::{DeadLetterState, Metric, action::ActionOutcome};
use idem_store::{Actor, NewBrokerDeadLetter, PUBLISH_LEASE, ReplayRequest, Store, Ts, testing};

use super::at;

idem_store::on_both_backends!(
    a_dead_letter_the_broker_delivers_again_is_stored_once,
    a_replay_is_published_by_one_attempt_at_a_time_and_confirmed_once,
);

fn from_rabbitmq(broker_ref: &str) -> NewBrokerDeadLetter {
    NewBrokerDeadLetter {
        consumer: "reminders".into(),
        broker: "rabbitmq".into(),
        broker_ref: broker_ref.into(),
        queue: "reminders.work".into(),
        key: "reminder:1842 / ⏰".into(),
        message_id: "msg-1842".into(),
        payload: r#"{"reminder":1842}"#.into(),
        delivery_count: 1,
        first_failure_at: at(0),
        dead_lettered_at: at(0),
        last_error: "rejected by a consumer".into(),
        death_exchange: Some("reminders".into()),
        death_routing_key: Some("due".into()),
        death_reason: Some("rejected".into()),
        death_count: Some(1),
        death_at: Some(at(0)),
        properties: r#"{"properties":{},"body_base64":false}"#.into(),
    }
}

async fn a_dead_letter_the_broker_delivers_again_is_stored_once(store: &Store) {
    let (first, new) = store
        .brokers()
        .record_broker_dead_letter(&from_rabbitmq("ref-a"), at(1))
        .await
        .unwrap();
    assert!(new);
    let (again, new) = store
        .brokers()
        .record_broker_dead_letter(&from_rabbitmq("ref-a"), at(2))
        .await
        .unwrap();
    assert_eq!((again, new), (first, false), "the same death, the same row");
    // The same message dying again after a replay is another death.
    let (later, new) = store
        .brokers()
        .record_broker_dead_letter(&from_rabbitmq("ref-b"), at(3))
        .await
        .unwrap();
    assert!(new && later != first);

    let stored = store
        .claims()
        .dead_letter(
            idem_domain::DeadLetterId::of_row(first),
            &idem_domain::Within::Every,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.key, "reminder:1842 / ⏰");
    assert_eq!(stored.state, DeadLetterState::Open);
    let death = stored.broker.expect("the broker's facts");
    assert_eq!(death.reason.as_deref(), Some("rejected"));
    assert_eq!(death.exchange.as_deref(), Some("reminders"));
    assert_eq!(death.routing_key.as_deref(), Some("due"));
    assert_eq!(
        testing::count_rows(store, "dead_letters").await,
        2,
        "stored once per death"
    );
    let counted: f64 = store
        .metric_rows("reminders", Metric::DeadLetters, at(-60), at(60))
        .await
        .unwrap()
        .iter()
        .map(|r| r.value)
        .sum();
    assert_eq!(
        counted, 2.0,
        "the dead-letter metric counts each death once"
    );
}

async fn a_replay_is_published_by_one_attempt_at_a_time_and_confirmed_once(store: &Store) {
    let (id, _) = store
        .brokers()
        .record_broker_dead_letter(&from_rabbitmq("ref-c"), at(1))
        .await
        .unwrap();
    let action_id = testing::action_id("replay-broker-1");
    let retention = idem_domain::ClaimRetention::days(30);
    let ActionOutcome::Done {
        outbox_id: Some(outbox),
        ..
    } = store
        .actions()
        .replay_dead_letter(&ReplayRequest {
            scope: &idem_domain::Within::Every,
            dead_letter_id: idem_domain::DeadLetterId::of_row(id),
            action_id: &action_id,
            actor: Actor {
                name: "olga",
                role: "operator",
                client_addr: None,
            },
            override_verdict: false,
            reason: None,
            retention: &retention,
        })
        .await
        .unwrap()
    else {
        panic!("the replay writes an outbox row");
    };
    let replay = store
        .brokers()
        .broker_replay(outbox)
        .await
        .unwrap()
        .expect("Idem's to publish");
    assert_eq!(
        (
            replay.exchange.as_str(),
            replay.routing_key.as_str(),
            replay.message_id.as_str()
        ),
        ("reminders", "due", "msg-1842")
    );
    let now = Ts::now();
    assert_eq!(
        store
            .brokers()
            .broker_replays_due(now, 10)
            .await
            .unwrap()
            .len(),
        1
    );

    // Two attempts at once (a person's second press and the relay): one wins.
    assert!(
        store
            .brokers()
            .lease_publication(outbox, now)
            .await
            .unwrap()
    );
    assert!(
        !store
            .brokers()
            .lease_publication(outbox, now)
            .await
            .unwrap()
    );
    assert!(
        store
            .brokers()
            .broker_replays_due(now, 10)
            .await
            .unwrap()
            .is_empty(),
        "held by the attempt"
    );
    // Not confirmed: tried again when due, not before.
    let later = now + chrono::TimeDelta::minutes(1);
    store
        .brokers()
        .publication_failed(outbox, "connection refused", later)
        .await
        .unwrap();
    assert!(
        store
            .brokers()
            .broker_replays_due(now, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .brokers()
            .broker_replays_due(later, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    // An attempt that died holding the row frees it when its lease ends.
    assert!(
        store
            .brokers()
            .lease_publication(outbox, later)
            .await
            .unwrap()
    );
    let after_lease = later + PUBLISH_LEASE + chrono::TimeDelta::seconds(1);
    assert!(
        store
            .brokers()
            .lease_publication(outbox, after_lease)
            .await
            .unwrap()
    );
    store
        .brokers()
        .publication_confirmed(outbox, after_lease)
        .await
        .unwrap();
    let published = store
        .brokers()
        .broker_replay(outbox)
        .await
        .unwrap()
        .unwrap();
    assert!(published.published_at.is_some());
    assert_eq!(published.attempts, 3);
    assert!(
        !store
            .brokers()
            .lease_publication(outbox, after_lease)
            .await
            .unwrap(),
        "published once"
    );
    assert!(
        store
            .brokers()
            .broker_replays_due(after_lease, 10)
            .await
            .unwrap()
            .is_empty()
    );
}
