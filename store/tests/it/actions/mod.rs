//! Operator actions on both backends: once, compare-and-set, audited in the
//! same transaction, idempotent by action id.
//!
//! The bodies live in themed modules; the operators and rows they act on are
//! made here.

mod abandoned;
mod action_ids;
mod bulk;
mod bulk_resolve;
mod concurrency;
mod effects;
mod reconcile;
mod reconcile_reach;
mod records;
mod redrive;
mod redrive_guards;
mod redrive_starters;

use chrono::TimeDelta;
use idem_domain::action::ActionId;
use idem_store::{Actor, Delivery, NewDeadLetter, Outcome, ReplayRequest, Store, Ts, Tx};

/// How long the consumers of these tests keep claims.
static THIRTY_DAYS: idem_domain::ClaimRetention = idem_domain::ClaimRetention::days(30);

pub(crate) const OLGA: Actor<'static> = Actor {
    name: "olga",
    role: "operator",
    client_addr: Some("192.0.2.1"),
};

pub(crate) const PETE: Actor<'static> = Actor {
    name: "pete",
    role: "operator",
    client_addr: Some("192.0.2.2"),
};

fn ago(minutes: i64) -> Ts {
    Ts::from(chrono::Utc::now() - TimeDelta::minutes(minutes))
}

/// Delivers `key` to `orders` half an hour ago; its worker takes the lease
/// until `until` and records nothing (yet).
async fn leased(tx: &mut Tx, key: &str, until: Ts) -> idem_domain::Claim {
    tx.claim(&Delivery {
        consumer: "orders",
        key,
        payload_hash: None,
        at: ago(30),
    })
    .await
    .unwrap();
    tx.lease("orders", key, until, ago(30)).await.unwrap()
}

/// Delivers `key` to `orders` half an hour ago and records `outcome` for it.
async fn claimed(tx: &mut Tx, key: &str, outcome: Outcome<'_>) -> idem_domain::Claim {
    leased(tx, key, ago(29)).await;
    tx.record("orders", key, outcome, ago(29)).await.unwrap()
}

/// Delivers `key` to `orders` `delivered` minutes ago; its last attempt
/// became unknown `unknown` minutes ago.
async fn unknown_since(tx: &mut Tx, key: &str, delivered: i64, unknown: i64) -> idem_domain::Claim {
    tx.claim(&Delivery {
        consumer: "orders",
        key,
        payload_hash: None,
        at: ago(delivered),
    })
    .await
    .unwrap();
    tx.lease("orders", key, ago(unknown), ago(unknown + 1))
        .await
        .unwrap();
    let timeout = Outcome::Unknown { error: "timeout" };
    tx.record("orders", key, timeout, ago(unknown))
        .await
        .unwrap()
}

async fn dead_lettered(store: &Store, key: &str, outcome: Outcome<'_>) -> i64 {
    let mut tx = store.begin().await.unwrap();
    claimed(&mut tx, key, outcome).await;
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: "orders",
            queue: "orders.fifo",
            key,
            message_id: "m-1",
            payload: r#"{"order":"42"}"#,
            delivery_count: 3,
            first_failure_at: ago(25),
            last_error: Some("429 Too Many Requests"),
            at: ago(20),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

async fn unknown_claim(store: &Store, key: &str) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let claim = claimed(&mut tx, key, Outcome::Unknown { error: "timeout" }).await;
    tx.commit().await.unwrap();
    claim.version
}

pub(crate) fn replay(id: i64, action_id: &ActionId) -> ReplayRequest<'_> {
    ReplayRequest {
        scope: &idem_domain::Within::Every,
        dead_letter_id: idem_domain::DeadLetterId::of_row(id),
        action_id,
        actor: OLGA,
        override_verdict: false,
        reason: None,
        retention: &THIRTY_DAYS,
    }
}
