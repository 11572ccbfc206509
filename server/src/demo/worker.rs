//! What one worker of the demo fleet does with one delivery: the idempotent
//! consumer pattern as `idem_consumer` implements it, on Idem's own store —
//! so the demo exercises the library consumers use, all day long.
//!
//! External effects: claim (lease taken) and commit, call the provider, then
//! record the outcome in a second transaction. In-transaction effects: apply
//! the effect and record `sent` in the claim's own transaction.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use idem_consumer::{
    Backoff, ClaimDecision, Consumer, ConsumerError, Decision, Failure, GiveUp, Next,
};
use idem_domain::IdempotencyKey;
use idem_store::{Store, StoreResult};

use super::flows::Flow;

/// How long a worker's lease on a claim lasts; longer than the queue's
/// visibility timeout, so a redelivery during a slow call sees the lease.
pub const LEASE: TimeDelta = TimeDelta::seconds(60);

/// Deliveries before a failing message is dead-lettered.
pub const MAX_DELIVERIES: u32 = 3;

/// The library's view of a flow's consumer.
pub fn consumer(flow: Flow) -> StoreResult<Consumer> {
    Ok(Consumer::new(flow.consumer())?
        .with_lease(LEASE)
        .with_max_deliveries(MAX_DELIVERIES)
        .with_backoff(Backoff {
            base: Duration::from_secs(10),
            max: Duration::from_secs(120),
        }))
}

fn key(key: &str) -> StoreResult<IdempotencyKey> {
    Ok(IdempotencyKey::parse(key).map_err(ConsumerError::from)?)
}

/// What the claim step came to.
pub enum Step {
    /// The library's decision; for an in-transaction effect never `Proceed`
    /// (that comes back as `Applied`).
    Decided(ClaimDecision),
    /// In-transaction effect applied and committed with the claim.
    Applied(ClaimDecision),
    /// The transaction rolled back; nothing was claimed.
    RolledBack,
}

pub struct Work<'a> {
    pub flow: Flow,
    pub key: &'a str,
    pub payload: &'a str,
    pub payload_hash: &'a str,
    /// An operator's redrive (see `idem_consumer::Consumer::claim_redrive`).
    pub redrive: bool,
    pub at: DateTime<Utc>,
}

/// Claims the key and, for an in-transaction effect, applies it.
/// `fail_transaction` simulates a serialization failure inside that effect.
pub async fn claim(
    store: &Store,
    work: &Work<'_>,
    ledger_ref: &str,
    fail_transaction: bool,
) -> StoreResult<Step> {
    let consumer = consumer(work.flow)?;
    let key = key(work.key)?;
    let mut tx = store.begin().await?;
    let hash = Some(work.payload_hash);
    let claim = if work.redrive {
        consumer
            .claim_redrive(tx.conn(), &key, hash, work.at)
            .await?
    } else {
        consumer.claim(tx.conn(), &key, hash, work.at).await?
    };
    if claim.decision != Decision::Proceed || work.flow.is_external() {
        tx.commit().await?;
        return Ok(Step::Decided(claim));
    }
    if fail_transaction {
        tx.rollback().await?;
        return Ok(Step::RolledBack);
    }
    // The business effect and its event, in the claim's transaction.
    consumer
        .enqueue(tx.conn(), &key, "invoice.paid", work.payload, work.at)
        .await?;
    consumer
        .record_sent(tx.conn(), &key, Some(ledger_ref), work.at)
        .await?;
    tx.commit().await?;
    Ok(Step::Applied(claim))
}

/// The provider confirmed: `sent` (and, for orders, the event that
/// announces it, in the same transaction).
pub async fn record_sent(
    store: &Store,
    flow: Flow,
    key_text: &str,
    payload: &str,
    provider_ref: &str,
    at: DateTime<Utc>,
) -> StoreResult<()> {
    let consumer = consumer(flow)?;
    let key = key(key_text)?;
    let mut tx = store.begin().await?;
    consumer
        .record_sent(tx.conn(), &key, Some(provider_ref), at)
        .await?;
    if flow == Flow::Orders {
        consumer
            .enqueue(tx.conn(), &key, "order.forwarded", payload, at)
            .await?;
    }
    tx.commit().await
}

/// The call's fate cannot be known: `unknown`.
pub async fn record_unknown(
    store: &Store,
    flow: Flow,
    key_text: &str,
    error: &str,
    at: DateTime<Utc>,
) -> StoreResult<()> {
    let consumer = consumer(flow)?;
    let key = key(key_text)?;
    let mut tx = store.begin().await?;
    consumer.record_unknown(tx.conn(), &key, error, at).await?;
    tx.commit().await
}

/// A failed call; the library says what to do with the message.
pub async fn record_failure(
    store: &Store,
    flow: Flow,
    key_text: &str,
    failure: Failure<'_>,
    deliveries: u32,
    at: DateTime<Utc>,
) -> StoreResult<Next> {
    let consumer = consumer(flow)?;
    let key = key(key_text)?;
    let mut tx = store.begin().await?;
    let next = consumer
        .record_failure(tx.conn(), &key, failure, deliveries, at)
        .await?;
    tx.commit().await?;
    Ok(next)
}

/// Gives up on a message: the claim becomes `failed` and the message, with
/// its key, goes to the dead letters — in one transaction.
pub struct Abandon<'a> {
    pub flow: Flow,
    pub key: &'a str,
    pub message_id: &'a str,
    pub payload: &'a str,
    pub deliveries: u32,
    pub first_failure_at: DateTime<Utc>,
    pub error: &'a str,
    pub at: DateTime<Utc>,
}

pub async fn dead_letter(store: &Store, a: &Abandon<'_>) -> StoreResult<i64> {
    let consumer = consumer(a.flow)?;
    let key = key(a.key)?;
    let give_up = GiveUp {
        key: &key,
        queue: a.flow.queue(),
        message_id: a.message_id,
        payload: a.payload,
        deliveries: a.deliveries,
        first_failure_at: a.first_failure_at,
        error: a.error,
    };
    let mut tx = store.begin().await?;
    let id = consumer.dead_letter(tx.conn(), &give_up, a.at).await?;
    tx.commit().await?;
    Ok(id)
}
