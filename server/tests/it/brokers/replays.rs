//! Replays of RabbitMQ's dead letters, published back by Idem: once, with
//! the key and message id, and again only when the broker did not confirm.

use std::time::Duration;

use idem_domain::{DeadLetterState, Role};
use lapin::types::AMQPValue;

use super::{HEADER, Topology, amqp_url, dead_letters_in_idem, idem_with_broker};
use crate::common::{self, Gate, visible};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_reaches_the_bound_queue_once_with_its_key_and_message_id() {
    let topology = Topology::declare("replay-once").await;
    let key = "reminder:account 1842/2026-09-30 ⏰";
    topology
        .publish(key, "msg-1842", r#"{"reminder": 1842}"#, None)
        .await;
    topology.reject_next().await;
    topology.wait_until_dead(1).await;
    let (app, _file) = idem_with_broker(&topology, "reminders", &amqp_url()).await;
    let letter = dead_letters_in_idem(&app, "msg-1842", 1).await.remove(0);
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;

    let answer = common::replay(&app, &olga, letter.id, "replay-1842").await;
    assert_eq!(answer.status().as_u16(), 200);
    let said = answer.text().await.unwrap();
    assert!(said.contains("Published to RabbitMQ exchange"), "{said}");
    assert!(said.contains("the broker confirmed it"), "{said}");
    // Pressed twice: the same action is answered again, nothing is published again.
    let again = common::replay(&app, &olga, letter.id, "replay-1842").await;
    assert_eq!(again.status().as_u16(), 200);
    assert!(
        again
            .text()
            .await
            .unwrap()
            .contains("it was not sent again")
    );

    let delivered = topology.take_all(&topology.work).await;
    assert_eq!(delivered.len(), 1, "one copy reached the consumer's queue");
    let message = &delivered[0];
    assert_eq!(message.data, br#"{"reminder": 1842}"#);
    assert_eq!(
        message.properties.message_id().as_ref().map(|m| m.as_str()),
        Some("msg-1842")
    );
    let headers = message.properties.headers().clone().unwrap_or_default();
    let header_key = match headers.inner().get(HEADER) {
        Some(AMQPValue::LongString(s)) => String::from_utf8(s.as_bytes().to_vec()).unwrap(),
        other => panic!("the key header is missing: {other:?}"),
    };
    assert_eq!(header_key, key);
    assert!(
        !headers.inner().contains_key("x-death"),
        "published as it first was, without the broker's death headers"
    );
    let replayed = app.store.letter(letter.id).await;
    assert_eq!(replayed.state, DeadLetterState::Replayed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_the_broker_did_not_confirm_is_published_once_when_it_is_back() {
    let topology = Topology::declare("broker-away").await;
    topology.publish("payout:9", "msg-9", "{}", None).await;
    topology.publish("payout:10", "msg-10", "{}", None).await;
    topology.reject_next().await;
    topology.reject_next().await;
    topology.wait_until_dead(2).await;
    let (gate, through) = Gate::to_rabbitmq(&amqp_url()).await;
    let (app, _file) = idem_with_broker(&topology, "payouts", &through).await;
    let nine = dead_letters_in_idem(&app, "msg-9", 1).await.remove(0);
    let ten = dead_letters_in_idem(&app, "msg-10", 1).await.remove(0);
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;

    // The broker goes away; both replays are recorded, neither is published.
    gate.close().await;
    for (letter, action) in [(&nine, "replay-9"), (&ten, "replay-10")] {
        let answer = common::replay(&app, &olga, letter.id, action).await;
        assert_eq!(answer.status().as_u16(), 200);
        let said = answer.text().await.unwrap();
        assert!(said.contains("did not confirm it"), "{said}");
        assert!(said.contains("Submit the same form again"), "{said}");
        assert!(
            !said.contains("guest:guest"),
            "no password in an answer: {said}"
        );
    }
    // The dead letter's page says where its replay stands.
    let page = |id: i64| {
        let (olga, url) = (olga.clone(), app.url(&format!("/dead-letters/{id}")));
        async move { visible(&common::get(&olga, &url).await.1) }
    };
    let shown = page(nine.id).await;
    assert!(
        shown.contains("Its replay not confirmed by the broker after 1 attempt(s)")
            && shown.contains("Idem tries again"),
        "{shown}"
    );
    gate.open();

    // The operator submits the same form again: published, once.
    let answer = common::replay(&app, &olga, nine.id, "replay-9").await;
    let said = answer.text().await.unwrap();
    assert!(said.contains("the broker confirmed it"), "{said}");
    let shown = page(nine.id).await;
    assert!(
        shown.contains("Its replay published; the broker confirmed it"),
        "{shown}"
    );
    // Left alone, the other is published by Idem's relay when it is due
    // (brought forward here: the relay waits a minute after a failure).
    let outbox = app
        .store
        .letter(ten.id)
        .await
        .replay_outbox_id
        .expect("the replay's outbox row");
    app.store
        .brokers()
        .publication_failed(outbox, "brought forward by the test", idem_store::Ts::now())
        .await
        .unwrap();
    let mut published = None;
    for _ in 0..200 {
        published = app
            .store
            .brokers()
            .broker_replay(outbox)
            .await
            .unwrap()
            .unwrap()
            .published_at;
        if published.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(published.is_some(), "the relay published it within 10 s");

    let delivered = topology.take_all(&topology.work).await;
    let mut ids: Vec<_> = delivered
        .iter()
        .map(|m| m.properties.message_id().as_ref().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        ["msg-10", "msg-9"],
        "each replay reached the queue once"
    );
    // The relay keeps looking; nothing more arrives.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(topology.count(&topology.work).await, 0);
}
