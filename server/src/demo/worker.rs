//! What one worker of the demo fleet does with one delivery: the idempotent
//! consumer pattern, exactly as the design asks real consumers to do it.
//!
//! 1. In one transaction, claim the key (insert-if-absent) and decide:
//!    a key already `sent` or `unknown` is acknowledged without acting; a
//!    key leased by another worker is handed back to the queue; a lease that
//!    expired after a call means that call's fate is unknown.
//! 2. External effects: take a lease, commit, call the provider, then record
//!    the outcome in a second transaction. In-transaction effects: apply the
//!    effect and record `sent` in the claim's own transaction.

use chrono::{DateTime, TimeDelta, Utc};
use idem_domain::{ClaimStatus, OutboxOrigin};
use idem_store::{Claimed, Delivery, NewDeadLetter, NewOutboxRow, Outcome, Store, StoreResult, Ts};

use super::flows::Flow;

/// How long a worker's lease on a claim lasts; longer than the queue's
/// visibility timeout, so a redelivery during a slow call sees the lease.
pub const LEASE: TimeDelta = TimeDelta::seconds(60);

/// What the claim step decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// This worker owns the attempt (lease taken, committed): call the provider.
    Attempt,
    /// The effect already happened (or is unknown): acknowledge, do nothing.
    Suppress { status: ClaimStatus },
    /// Another worker holds the lease right now: hand the message back.
    Busy,
    /// A lease expired after a call without an outcome: recorded `unknown`.
    LeaseExpired,
    /// In-transaction effect applied and committed with the claim.
    Applied,
    /// The transaction rolled back; nothing was claimed.
    RolledBack,
}

pub struct Step {
    pub new_claim: bool,
    /// For duplicates: when the key was first delivered.
    pub first_delivery_at: Option<DateTime<Utc>>,
    pub decision: Decision,
}

pub struct Work<'a> {
    pub flow: Flow,
    pub key: &'a str,
    pub payload: &'a str,
    pub payload_hash: &'a str,
    pub at: DateTime<Utc>,
}

/// Step 1 for either kind of effect. `fail_transaction` simulates a
/// serialization failure inside an in-transaction effect.
pub async fn claim(
    store: &Store,
    work: &Work<'_>,
    ledger_ref: &str,
    fail_transaction: bool,
) -> StoreResult<Step> {
    let consumer = work.flow.consumer();
    let now = Ts::from(work.at);
    let mut tx = store.begin().await?;
    let claimed = tx
        .claim(&Delivery {
            consumer,
            key: work.key,
            payload_hash: Some(work.payload_hash),
            at: now,
        })
        .await?;
    let (new_claim, claim) = match &claimed {
        Claimed::New(c) => (true, c),
        Claimed::Duplicate(c) => (false, c),
    };
    let first_delivery_at = (!new_claim).then_some(claim.first_delivery_at);
    let decision = match claim.status {
        ClaimStatus::Sent | ClaimStatus::Unknown => Decision::Suppress {
            status: claim.status,
        },
        ClaimStatus::Pending => match claim.lease_until {
            Some(until) if until > work.at => Decision::Busy,
            Some(_) => Decision::LeaseExpired,
            None => Decision::Attempt,
        },
        // A replay, a resolution's retry, or a redelivery after a failure: try again.
        ClaimStatus::Failed => Decision::Attempt,
    };
    let decision = match decision {
        Decision::Attempt if !work.flow.is_external() => {
            if fail_transaction {
                tx.rollback().await?;
                return Ok(Step {
                    new_claim: false,
                    first_delivery_at,
                    decision: Decision::RolledBack,
                });
            }
            // The business effect and its event, in the claim's transaction.
            tx.lease(consumer, work.key, now, now).await?;
            tx.enqueue(&NewOutboxRow {
                consumer,
                topic: "invoice.paid",
                key: work.key,
                payload: work.payload,
                origin: OutboxOrigin::Application,
                dead_letter_id: None,
                audit_id: None,
                at: now,
            })
            .await?;
            tx.record(
                consumer,
                work.key,
                Outcome::Sent {
                    provider_ref: Some(ledger_ref),
                },
                now,
            )
            .await?;
            Decision::Applied
        }
        Decision::Attempt => {
            tx.lease(consumer, work.key, Ts::from(work.at + LEASE), now)
                .await?;
            Decision::Attempt
        }
        Decision::LeaseExpired => {
            let error = "a worker's lease expired after it called the provider, with no outcome recorded: \
                         the provider may have acted";
            tx.record(consumer, work.key, Outcome::Unknown { error }, now)
                .await?;
            Decision::LeaseExpired
        }
        other => other,
    };
    tx.commit().await?;
    Ok(Step {
        new_claim,
        first_delivery_at,
        decision,
    })
}

/// Step 2 for external effects: record how the call ended (and, for orders,
/// the event that announces it, in the same transaction).
pub async fn record(
    store: &Store,
    flow: Flow,
    key: &str,
    payload: &str,
    outcome: Outcome<'_>,
    at: DateTime<Utc>,
) -> StoreResult<()> {
    let now = Ts::from(at);
    let mut tx = store.begin().await?;
    tx.record(flow.consumer(), key, outcome, now).await?;
    if flow == Flow::Orders && matches!(outcome, Outcome::Sent { .. }) {
        tx.enqueue(&NewOutboxRow {
            consumer: flow.consumer(),
            topic: "order.forwarded",
            key,
            payload,
            origin: OutboxOrigin::Application,
            dead_letter_id: None,
            audit_id: None,
            at: now,
        })
        .await?;
    }
    tx.commit().await
}

/// Gives up on a message: the claim becomes `failed` and the message, with
/// its key, goes to the dead letters — in one transaction.
pub struct GiveUp<'a> {
    pub flow: Flow,
    pub key: &'a str,
    pub message_id: &'a str,
    pub payload: &'a str,
    pub deliveries: u32,
    pub first_failure_at: DateTime<Utc>,
    pub error: &'a str,
    pub at: DateTime<Utc>,
}

pub async fn dead_letter(store: &Store, g: &GiveUp<'_>) -> StoreResult<i64> {
    let now = Ts::from(g.at);
    let reason = format!(
        "dead-lettered after {} deliveries: {}",
        g.deliveries, g.error
    );
    let mut tx = store.begin().await?;
    // An in-transaction effect that kept rolling back never claimed the key.
    if tx.claim_exists(g.flow.consumer(), g.key).await? {
        tx.record(
            g.flow.consumer(),
            g.key,
            Outcome::Permanent { error: &reason },
            now,
        )
        .await?;
    }
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: g.flow.consumer(),
            queue: g.flow.queue(),
            key: g.key,
            message_id: g.message_id,
            payload: g.payload,
            delivery_count: i64::from(g.deliveries),
            first_failure_at: Ts::from(g.first_failure_at),
            last_error: Some(g.error),
            at: now,
        })
        .await?;
    tx.commit().await?;
    Ok(id)
}
