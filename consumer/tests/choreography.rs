//! The failure choreography: what goes wrong around an idempotent consumer,
//! and what a consumer built on `idem_consumer` does about it. Each test
//! drives real workers against a real database (SQLite and Postgres, a fresh
//! one per test) and a provider that counts its calls, then asserts the two
//! things that matter: how many times the provider acted, and what the claim
//! says afterwards.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, TimeDelta, Utc};
use idem_consumer::{
    Backoff, ClaimStatus, Consumer, Decision, Failure, GiveUp, IdempotencyKey, Next, derive_key,
};
use idem_domain::{
    Claim, DeadLetterState, OutboxOrigin,
    action::{ActionOutcome, Resolution},
};
use idem_store::{Actor, ReplayRequest, ResolveRequest, Store, Ts};
use tokio::sync::Barrier;

idem_store::on_both_backends!(
    the_same_key_twice_within_five_minutes_calls_the_provider_once,
    the_same_key_again_after_six_minutes_calls_the_provider_once,
    two_workers_claiming_one_key_at_once_call_the_provider_once,
    a_worker_killed_after_the_provider_accepted_leaves_an_unknown_outcome_to_resolve,
    a_dead_letter_replayed_seven_days_later_under_the_same_key_is_sent_once,
    a_rate_limit_with_retry_after_then_a_permanent_rejection_ends_failed,
    a_failing_in_transaction_effect_rolls_the_claim_back_with_it,
    a_lost_response_is_recorded_unknown_and_never_called_again,
    giving_up_while_another_worker_holds_the_lease_leaves_the_outcome_to_that_worker,
);

const QUEUE: &str = "reminders.fifo";

/// A fixed instant eight days ago, plus `seconds`: "now" for the workers.
fn at(seconds: i64) -> DateTime<Utc> {
    static BASE: std::sync::LazyLock<DateTime<Utc>> =
        std::sync::LazyLock::new(|| Ts::from(Utc::now() - TimeDelta::days(8)).0);
    *BASE + TimeDelta::seconds(seconds)
}

fn reminders() -> Consumer {
    Consumer::new("reminders")
        .unwrap()
        .with_lease(TimeDelta::seconds(60))
        .with_max_deliveries(3)
        .with_backoff(Backoff {
            base: Duration::from_secs(5),
            max: Duration::from_secs(120),
        })
}

fn renewal_key() -> IdempotencyKey {
    derive_key("renewal", &["account-1842", "2026-09-30"]).unwrap()
}

/// How the provider answers one call.
#[derive(Debug, Clone)]
enum Reply {
    Accept,
    RateLimited { retry_after: Duration },
    Unavailable,
    Reject,
}

/// The external provider: answers from a script (accepting once it runs
/// out) and counts every call, including ones whose answer is lost.
#[derive(Default)]
struct Provider {
    calls: AtomicU32,
    script: Mutex<VecDeque<Reply>>,
}

impl Provider {
    fn scripted(replies: &[Reply]) -> Provider {
        Provider {
            calls: AtomicU32::new(0),
            script: Mutex::new(replies.iter().cloned().collect()),
        }
    }

    fn call(&self) -> (Reply, String) {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let reply = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Reply::Accept);
        (reply, format!("msg_{n:04}"))
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

/// What one delivery came to, as the queue sees it.
#[derive(Debug, Clone, PartialEq)]
enum Handled {
    Sent,
    Suppressed(ClaimStatus),
    Busy,
    LeaseExpired,
    RetryIn(Duration),
    DeadLettered(i64),
    Failed,
}

/// One worker handling one delivery of a reminder, the way the library's
/// documentation says to: claim and commit, call, record in a second
/// transaction; dead-letter when the deliveries run out.
async fn deliver(
    store: &Store,
    consumer: &Consumer,
    provider: &Provider,
    key: &IdempotencyKey,
    deliveries: u32,
    at: DateTime<Utc>,
) -> Handled {
    deliver_as(store, consumer, provider, key, deliveries, at, false).await
}

/// The same for an operator's redrive (a replayed dead letter).
async fn redeliver_replay(
    store: &Store,
    consumer: &Consumer,
    provider: &Provider,
    key: &IdempotencyKey,
    at: DateTime<Utc>,
) -> Handled {
    deliver_as(store, consumer, provider, key, 1, at, true).await
}

async fn deliver_as(
    store: &Store,
    consumer: &Consumer,
    provider: &Provider,
    key: &IdempotencyKey,
    deliveries: u32,
    at: DateTime<Utc>,
    redrive: bool,
) -> Handled {
    let mut tx = store.begin().await.unwrap();
    let hash = Some("payload-v1");
    let claim = if redrive {
        consumer.claim_redrive(tx.conn(), key, hash, at).await
    } else {
        consumer.claim(tx.conn(), key, hash, at).await
    }
    .unwrap();
    tx.commit().await.unwrap();
    match claim.decision {
        Decision::Proceed => {}
        Decision::AlreadyDone { status } => return Handled::Suppressed(status),
        Decision::Busy { .. } => return Handled::Busy,
        Decision::LeaseExpired => return Handled::LeaseExpired,
    }
    let (reply, provider_ref) = provider.call();
    let failure = match reply {
        Reply::Accept => {
            let mut tx = store.begin().await.unwrap();
            consumer
                .record_sent(tx.conn(), key, Some(&provider_ref), at)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            return Handled::Sent;
        }
        Reply::RateLimited { retry_after } => Failure::Retryable {
            error: "429 Too Many Requests",
            retry_after: Some(retry_after),
        },
        Reply::Unavailable => Failure::Retryable {
            error: "503 Service Unavailable",
            retry_after: None,
        },
        Reply::Reject => Failure::Permanent {
            error: "400 Bad Request: recipient address is invalid",
        },
    };
    let mut tx = store.begin().await.unwrap();
    let next = consumer
        .record_failure(tx.conn(), key, failure, deliveries, at)
        .await
        .unwrap();
    let handled = match next {
        Next::RetryIn(wait) => Handled::RetryIn(wait),
        Next::Acknowledge => Handled::Failed,
        Next::DeadLetter => {
            let give_up = GiveUp {
                key,
                queue: QUEUE,
                message_id: "m-1",
                payload: "payload-v1",
                deliveries,
                first_failure_at: at,
                error: "503 Service Unavailable",
            };
            let id = consumer.dead_letter(tx.conn(), &give_up, at).await.unwrap();
            Handled::DeadLettered(id)
        }
    };
    tx.commit().await.unwrap();
    handled
}

async fn claim(store: &Store, key: &IdempotencyKey) -> Claim {
    store
        .claim("reminders", key.as_str())
        .await
        .unwrap()
        .expect("the key is claimed")
}

const OLGA: Actor<'static> = Actor {
    name: "olga",
    role: "operator",
    client_addr: None,
};

async fn the_same_key_twice_within_five_minutes_calls_the_provider_once(store: &Store) {
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(0)).await,
        Handled::Sent
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(90)).await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 1);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.provider_ref.as_deref(), Some("msg_0001"));
    assert_eq!((claim.delivery_count, claim.duplicate_count), (2, 1));
}

async fn the_same_key_again_after_six_minutes_calls_the_provider_once(store: &Store) {
    // Past a FIFO queue's five-minute deduplication window the broker lets
    // the repeat through; the durable claim still stops it.
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(0)).await,
        Handled::Sent
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(6 * 60)).await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 1);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.duplicate_count, 1);
    assert_eq!(claim.last_delivery_at, at(6 * 60));
}

async fn two_workers_claiming_one_key_at_once_call_the_provider_once(store: &Store) {
    let provider = Arc::new(Provider::default());
    let barrier = Arc::new(Barrier::new(2));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (store, provider, barrier) = (store.clone(), provider.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                deliver(&store, &reminders(), &provider, &renewal_key(), 1, at(0)).await
            })
        })
        .collect();
    let mut handled = Vec::new();
    for worker in workers {
        handled.push(worker.await.unwrap());
    }
    assert_eq!(provider.calls(), 1, "{handled:?}");
    assert!(handled.contains(&Handled::Sent), "{handled:?}");
    // The loser either saw the winner's lease or, if the winner had already
    // recorded, its outcome: never a second call.
    assert!(
        handled.contains(&Handled::Busy)
            || handled.contains(&Handled::Suppressed(ClaimStatus::Sent)),
        "{handled:?}"
    );
    let claim = claim(store, &renewal_key()).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!((claim.delivery_count, claim.attempts), (2, 1));
}

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
        .resolve_unknown(&ResolveRequest {
            consumer: "reminders",
            key: key.as_str(),
            version: unknown.version,
            resolution: Resolution::Sent {
                provider_ref: lost_ref.clone(),
            },
            action_id: "resolve-renewal-1842",
            actor: OLGA,
            reason: Some("the provider's dashboard shows it delivered"),
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
    let dead = store.dead_letter(id).await.unwrap().unwrap();
    assert_eq!(dead.key, key.as_str());
    assert_eq!(claim(store, &key).await.status, ClaimStatus::Failed);

    // Seven days later the provider is back and an operator replays it.
    let replayed = store
        .replay_dead_letter(&ReplayRequest {
            dead_letter_id: id,
            action_id: "replay-renewal-1842",
            actor: OLGA,
            override_verdict: false,
            reason: Some("provider outage is over"),
            retention: TimeDelta::days(30),
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
    let dead = store.dead_letter(id).await.unwrap().unwrap();
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
    assert_eq!(
        store.claim("payment-webhooks", key.as_str()).await.unwrap(),
        None
    );

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
        .claim("payment-webhooks", key.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((claim.status, claim.delivery_count), (ClaimStatus::Sent, 1));
    let outbox = store
        .outbox_for_key("payment-webhooks", key.as_str())
        .await
        .unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].key, key.as_str());
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
    assert_eq!(
        store.dead_letter(id).await.unwrap().unwrap().key,
        key.as_str()
    );
    assert_eq!(claim(store, &key).await.provider_ref, Some(provider_ref));
}
