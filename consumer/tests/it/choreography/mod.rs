//! The failure choreography: what goes wrong around an idempotent consumer,
//! and what a consumer built on `idem_consumer` does about it. Each test
//! drives real workers against a real database (SQLite and Postgres, a fresh
//! one per test) and a provider that counts its calls, then asserts the two
//! things that matter: how many times the provider acted, and what the claim
//! says afterwards.
//!
//! The tests live in themed modules; the consumer, the scripted provider and
//! the worker loop they drive are here.

mod duplicates;
mod failures;
mod unknown_outcomes;

use std::{
    collections::VecDeque,
    sync::{
        Mutex,
        atomic::{AtomicU32, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, TimeDelta, Utc};
use idem_consumer::{
    Backoff, ClaimStatus, Consumer, Decision, Failure, GiveUp, IdempotencyKey, Next, derive_key,
};
use idem_domain::Claim;
use idem_store::{Actor, Store, Ts};

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
        .claims()
        .claim(&idem_store::testing::consumer("reminders"), key)
        .await
        .unwrap()
        .expect("the key is claimed")
}

const OLGA: Actor<'static> = Actor {
    name: "olga",
    role: "operator",
    client_addr: None,
};
