//! When nobody knows whether the provider acted: a killed worker, a lost
//! response, a worker that gives up while another holds the lease.

use idem_consumer::{ClaimStatus, Decision, GiveUp};
use idem_domain::action::ActionOutcome;
use idem_store::{ResolveRequest, Store, testing};

use super::{
    Handled, OLGA, Provider, QUEUE, at, claim, deliver, redeliver_replay, reminders, renewal_key,
};

idem_store::on_both_backends!(
    a_worker_killed_after_the_provider_accepted_leaves_an_unknown_outcome_to_resolve,
    a_lost_response_is_recorded_unknown_and_never_called_again,
    giving_up_while_another_worker_holds_the_lease_leaves_the_outcome_to_that_worker,
);

async fn a_worker_killed_after_the_provider_accepted_leaves_an_unknown_outcome_to_resolve(
    store: &Store,
) {
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    // The worker claims, commits its lease, and the provider accepts — then
    // the process dies before the outcome is written.
    let mut tx = store.begin().await.unwrap();
    let first = consumer.claim(tx.conn(), &key, None, at(0)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(first.decision, Decision::Proceed);
    let (_accepted, lost_ref) = provider.call();

    // The queue redelivers after its 45 s visibility timeout: the lease is
    // still held, so the new worker hands the message back without calling.
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 2, at(45)).await,
        Handled::Busy
    );
    // After the lease runs out nobody can know whether the call acted:
    // `unknown`, not a second call.
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 3, at(120)).await,
        Handled::LeaseExpired
    );
    assert_eq!(provider.calls(), 1);
    let unknown = claim(store, &key).await;
    assert_eq!(unknown.status, ClaimStatus::Unknown);

    // An operator checks the provider's dashboard and resolves it as sent.
    let resolved = store
        .actions()
        .resolve_unknown(&ResolveRequest {
            consumer: &testing::consumer("reminders"),
            key: &key,
            version: unknown.version,
            resolution: testing::sent(&lost_ref),
            action_id: &testing::action_id("resolve-renewal-1842"),
            actor: OLGA,
            scope: &idem_domain::Within::Every,
            reason: Some(testing::reason(
                "the provider's dashboard shows it delivered",
            )),
        })
        .await
        .unwrap();
    assert!(
        matches!(resolved, ActionOutcome::Done { .. }),
        "{resolved:?}"
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(600)).await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 1);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.provider_ref, Some(lost_ref));
}

async fn a_lost_response_is_recorded_unknown_and_never_called_again(store: &Store) {
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    let mut tx = store.begin().await.unwrap();
    let first = consumer.claim(tx.conn(), &key, None, at(0)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(first.decision, Decision::Proceed);
    // The request went out; the connection reset before the answer came.
    provider.call();
    let mut tx = store.begin().await.unwrap();
    consumer
        .record_unknown(
            tx.conn(),
            &key,
            "connection reset after the request was sent",
            at(30),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    for later in [60, 6 * 60, 86_400] {
        assert_eq!(
            deliver(store, &consumer, &provider, &key, 2, at(later)).await,
            Handled::Suppressed(ClaimStatus::Unknown)
        );
    }
    assert_eq!(provider.calls(), 1);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Unknown);
    assert_eq!(claim.status_at, at(30));
}

async fn giving_up_while_another_worker_holds_the_lease_leaves_the_outcome_to_that_worker(
    store: &Store,
) {
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    // A worker claims and calls; its call is slow.
    let mut tx = store.begin().await.unwrap();
    let first = consumer.claim(tx.conn(), &key, None, at(0)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(first.decision, Decision::Proceed);
    let (_accepted, provider_ref) = provider.call();
    // Meanwhile the queue runs out of deliveries and the message is
    // dead-lettered: the claim is not marked failed under the live lease.
    let give_up = GiveUp {
        key: &key,
        queue: QUEUE,
        message_id: "m-1",
        payload: "payload-v1",
        deliveries: 3,
        first_failure_at: at(0),
        error: "the worker did not acknowledge within the visibility timeout",
    };
    let mut tx = store.begin().await.unwrap();
    let id = consumer
        .dead_letter(tx.conn(), &give_up, at(45))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(claim(store, &key).await.status, ClaimStatus::Pending);
    // The slow call returns and is recorded.
    let mut tx = store.begin().await.unwrap();
    consumer
        .record_sent(tx.conn(), &key, Some(&provider_ref), at(50))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // So a replay of the dead letter is a suppressed duplicate, not a second send.
    assert_eq!(
        redeliver_replay(store, &consumer, &provider, &key, at(3600)).await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 1);
    assert_eq!(store.letter(id).await.key, key.as_str());
    assert_eq!(claim(store, &key).await.provider_ref, Some(provider_ref));
}
