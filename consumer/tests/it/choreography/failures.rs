//! Failures the consumer recovers from: a dead letter replayed days later,
//! rate limits then a rejection, and an effect that rolls the claim back.

use std::time::Duration;

use chrono::TimeDelta;
use idem_consumer::{ClaimStatus, Consumer, Decision, IdempotencyKey, derive_key};
use idem_domain::{DeadLetterState, OutboxOrigin, action::ActionOutcome};
use idem_store::{ReplayRequest, Store, Ts, testing};

use super::{
    Handled, OLGA, Provider, Reply, at, claim, deliver, redeliver_replay, reminders, renewal_key,
};

idem_store::on_both_backends!(
    a_dead_letter_replayed_seven_days_later_under_the_same_key_is_sent_once,
    a_rate_limit_with_retry_after_then_a_permanent_rejection_ends_failed,
    a_failing_in_transaction_effect_rolls_the_claim_back_with_it,
);

async fn a_dead_letter_replayed_seven_days_later_under_the_same_key_is_sent_once(store: &Store) {
    let consumer = reminders();
    let key = renewal_key();
    let provider =
        Provider::scripted(&[Reply::Unavailable, Reply::Unavailable, Reply::Unavailable]);
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(0)).await,
        Handled::RetryIn(Duration::from_secs(5))
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 2, at(5)).await,
        Handled::RetryIn(Duration::from_secs(10))
    );
    let Handled::DeadLettered(id) = deliver(store, &consumer, &provider, &key, 3, at(15)).await
    else {
        panic!("the third failed delivery is dead-lettered");
    };
    let dead = store.letter(id).await;
    assert_eq!(dead.key, key.as_str());
    assert_eq!(claim(store, &key).await.status, ClaimStatus::Failed);

    // Seven days later the provider is back and an operator replays it.
    let replayed = store
        .actions()
        .replay_dead_letter(&ReplayRequest {
            dead_letter_id: testing::dead_letter_id(id),
            action_id: &testing::action_id("replay-renewal-1842"),
            actor: OLGA,
            scope: &idem_domain::Within::Every,
            override_verdict: false,
            reason: Some(testing::reason("provider outage is over")),
            retention: &idem_domain::ClaimRetention::days(30),
        })
        .await
        .unwrap();
    let ActionOutcome::Done {
        outbox_id: Some(outbox_id),
        ..
    } = replayed
    else {
        panic!("the replay is done through the outbox: {replayed:?}");
    };
    // The relay publishes the replay; it arrives with the same key.
    let mut tx = store.begin().await.unwrap();
    let published = tx.claim_unpublished(10).await.unwrap();
    let row = published.iter().find(|r| r.id == outbox_id).unwrap();
    assert_eq!(
        (row.key.as_str(), row.origin),
        (key.as_str(), OutboxOrigin::Replay)
    );
    tx.mark_publish_attempt(row.id, None, Ts::now())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let week_later = at(15) + TimeDelta::days(7);
    let redelivered = IdempotencyKey::parse(row.key.clone()).unwrap();
    // An ordinary copy of the old message would not try a failed key again;
    // the replay is the operator's redrive, and does.
    assert_eq!(
        deliver(store, &consumer, &provider, &redelivered, 1, week_later).await,
        Handled::Suppressed(ClaimStatus::Failed)
    );
    assert_eq!(
        redeliver_replay(store, &consumer, &provider, &redelivered, week_later).await,
        Handled::Sent
    );
    // A stray copy of the original message changes nothing.
    assert_eq!(
        deliver(
            store,
            &consumer,
            &provider,
            &key,
            1,
            week_later + TimeDelta::minutes(1)
        )
        .await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 4, "three failures and one success");
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.attempts, 4);
    let dead = store.letter(id).await;
    assert_eq!(dead.state, DeadLetterState::Replayed);
}

async fn a_rate_limit_with_retry_after_then_a_permanent_rejection_ends_failed(store: &Store) {
    let consumer = reminders();
    let key = renewal_key();
    let provider = Provider::scripted(&[
        Reply::RateLimited {
            retry_after: Duration::from_secs(30),
        },
        Reply::Reject,
    ]);
    // Retry-After (30 s) outweighs the first backoff step (5 s).
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(0)).await,
        Handled::RetryIn(Duration::from_secs(30))
    );
    let pending = claim(store, &key).await;
    assert_eq!(pending.status, ClaimStatus::Pending);
    assert_eq!(
        pending.lease_until, None,
        "a retryable failure releases the lease"
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 2, at(30)).await,
        Handled::Failed
    );
    // A publisher's retry of the rejected message does not call again.
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(600)).await,
        Handled::Suppressed(ClaimStatus::Failed)
    );
    assert_eq!(provider.calls(), 2);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Failed);
    assert_eq!(
        claim.last_error.as_deref(),
        Some("400 Bad Request: recipient address is invalid")
    );
    assert_eq!(claim.attempts, 2);
}

async fn a_failing_in_transaction_effect_rolls_the_claim_back_with_it(store: &Store) {
    // An effect that is itself a database write joins the claim's
    // transaction: if it fails, the claim was never made and the next
    // delivery starts afresh.
    let consumer = Consumer::new("payment-webhooks").unwrap();
    let key = derive_key("payment", &["pay_7f3"]).unwrap();
    let mut tx = store.begin().await.unwrap();
    let first = consumer.claim(tx.conn(), &key, None, at(0)).await.unwrap();
    assert_eq!(first.decision, Decision::Proceed);
    tx.rollback().await.unwrap();
    let webhooks = testing::consumer("payment-webhooks");
    assert_eq!(store.claims().claim(&webhooks, &key).await.unwrap(), None);

    let mut tx = store.begin().await.unwrap();
    let again = consumer.claim(tx.conn(), &key, None, at(5)).await.unwrap();
    assert!(again.new, "the rolled-back claim left nothing behind");
    consumer
        .enqueue(tx.conn(), &key, "invoice.paid", "{}", at(5))
        .await
        .unwrap();
    consumer
        .record_sent(tx.conn(), &key, Some("ledger-77"), at(5))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let claim = store
        .claims()
        .claim(&webhooks, &key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((claim.status, claim.delivery_count), (ClaimStatus::Sent, 1));
    let outbox = store
        .claims()
        .outbox_for_key(&webhooks, &key)
        .await
        .unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].key, key.as_str());
}
