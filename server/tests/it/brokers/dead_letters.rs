//! Dead letters RabbitMQ keeps, moved into Idem: with what the broker said
//! about each death, acknowledged only once stored, stored once.

use std::time::Duration;

use idem::brokers::{self, rabbitmq::Queue};
use idem_domain::{DeadLetterState, Role};
use idem_store::testing::TestDatabase;

use super::{Topology, amqp_url, dead_letters_in_idem, idem_with_broker};
use crate::common::{self, visible};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rejected_and_an_expired_message_are_kept_in_idem_with_what_rabbitmq_said() {
    let topology = Topology::declare("rejected-expired").await;
    let key = "invoice:7/2026 #3 💸 فاتورة";
    topology
        .publish(key, "msg-rejected", r#"{"invoice": 7}"#, None)
        .await;
    topology.reject_next().await;
    topology
        .publish("invoice:8", "msg-expired", r#"{"invoice": 8}"#, Some("1"))
        .await;
    topology.wait_until_dead(2).await;

    let (app, _file) = idem_with_broker(&topology, "invoices", &amqp_url()).await;
    let rejected = dead_letters_in_idem(&app, "msg-rejected", 1)
        .await
        .remove(0);
    let expired = dead_letters_in_idem(&app, "msg-expired", 1).await.remove(0);
    assert_eq!(rejected.key, key, "the key is the header's, byte for byte");
    assert_eq!(rejected.consumer, "invoices");
    assert_eq!(rejected.queue, topology.work, "the queue it died in");
    assert_eq!(rejected.payload, r#"{"invoice": 7}"#);
    assert_eq!(rejected.state, DeadLetterState::Open);
    let death = rejected.broker.clone().expect("RabbitMQ's facts");
    assert_eq!(death.reason.as_deref(), Some("rejected"));
    assert_eq!(death.exchange.as_deref(), Some(topology.exchange.as_str()));
    assert_eq!(death.routing_key.as_deref(), Some("due"));
    assert_eq!(death.count, Some(1));
    assert_eq!(
        expired.broker.expect("RabbitMQ's facts").reason.as_deref(),
        Some("expired")
    );
    assert_eq!(
        topology.count(&topology.dead).await,
        0,
        "stored, then acknowledged: the broker no longer holds them"
    );

    // The operator reads them as any dead letter, with what RabbitMQ said.
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let (status, html) =
        common::get(&olga, &app.url(&format!("/dead-letters/{}", rejected.id))).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(page.contains("What RabbitMQ recorded"), "{page}");
    assert!(
        page.contains(&format!("exchange “{}”", topology.exchange)),
        "{page}"
    );
    assert!(page.contains("rejected by a consumer"), "{page}");
    assert!(page.contains("فاتورة"), "the key is shown as it is: {page}");
    let (_, html) = common::get(&olga, &app.url(&format!("/dead-letters/{}", expired.id))).await;
    assert!(visible(&html).contains("its time to live ran out"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_letter_delivered_again_after_idem_died_before_acknowledging_it_is_stored_once() {
    let topology = Topology::declare("died-before-ack").await;
    topology.publish("refund:42", "msg-42", "{}", None).await;
    topology.reject_next().await;
    topology.wait_until_dead(1).await;
    let db = TestDatabase::sqlite().await;
    let store = db.store.clone();
    let config = topology.config("refunds", &amqp_url());

    // Idem takes the message and commits its row, then dies before the
    // acknowledgement reaches the broker.
    {
        let connection = brokers::rabbitmq::connect(&config.url).await.unwrap();
        let queue = Queue::open(&connection, &config).await.unwrap();
        let (taken, dead_letter) = brokers::DeadLetterQueue::take(&queue)
            .await
            .unwrap()
            .expect("the dead letter");
        let (_, new) = store
            .brokers()
            .record_broker_dead_letter(&dead_letter, idem_store::Ts::now())
            .await
            .unwrap();
        assert!(new);
        drop(taken);
        // The connection ends without a word: what a killed process leaves.
        drop(queue);
        drop(connection);
    }
    // RabbitMQ delivers it again; the next run stores nothing new.
    for _ in 0..100 {
        if topology.count(&topology.dead).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        topology.count(&topology.dead).await,
        1,
        "the broker kept it"
    );
    let connection = brokers::rabbitmq::connect(&config.url).await.unwrap();
    let queue = Queue::open(&connection, &config).await.unwrap();
    let stored = brokers::drain(&queue, &store).await.unwrap();
    assert_eq!(stored, 0, "the same death is not stored twice");
    assert_eq!(
        topology.count(&topology.dead).await,
        0,
        "and now it is acknowledged"
    );
    let rows = store
        .claims()
        .dead_letters_by_message_id("msg-42", &idem_domain::Within::Every, 10)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
}
