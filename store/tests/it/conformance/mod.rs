//! The storage conformance suite: every body runs against SQLite and against
//! Postgres (a fresh database per test). A Postgres server that cannot be
//! reached fails the suite; it never skips.
//!
//! The bodies live in themed modules; the rows they write are built here.

mod brokers;
mod checks;
mod claims;
mod consumers;
mod fingerprints;
mod leases;
mod lists;
mod metrics;
mod outbox;
mod scope_first;
mod search;
mod tokens;
mod within;

use chrono::{TimeDelta, Utc};
use idem_domain::OutboxOrigin;
use idem_store::{
    Claimed, Delivery, NewDeadLetter, NewOutboxRow, Outcome, Store, Ts, testing::TestDatabase,
};

/// A fixed instant a day ago, plus `seconds`: every call in a test agrees.
fn at(seconds: i64) -> Ts {
    static BASE: std::sync::LazyLock<chrono::DateTime<Utc>> =
        std::sync::LazyLock::new(|| Utc::now() - TimeDelta::days(1));
    Ts::from(*BASE + TimeDelta::seconds(seconds))
}

fn delivery<'a>(consumer: &'a str, key: &'a str, seconds: i64) -> Delivery<'a> {
    Delivery {
        consumer,
        key,
        payload_hash: Some("h1"),
        at: at(seconds),
    }
}

async fn claim_once(store: &Store, d: Delivery<'_>) -> Claimed {
    let mut tx = store.begin().await.unwrap();
    let claimed = tx.claim(&d).await.unwrap();
    tx.commit().await.unwrap();
    claimed
}

async fn settle(store: &Store, consumer: &str, key: &str, outcome: Outcome<'_>, seconds: i64) {
    let mut tx = store.begin().await.unwrap();
    tx.lease(consumer, key, at(seconds + 30), at(seconds))
        .await
        .unwrap();
    tx.record(consumer, key, outcome, at(seconds + 1))
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

fn outbox_row<'a>(key: &'a str, seconds: i64) -> NewOutboxRow<'a> {
    NewOutboxRow {
        consumer: "orders",
        topic: "order.shipped",
        key,
        payload: r#"{"order":"42"}"#,
        origin: OutboxOrigin::Application,
        dead_letter_id: None,
        audit_id: None,
        at: at(seconds),
    }
}

fn dead_letter<'a>(key: &'a str, seconds: i64) -> NewDeadLetter<'a> {
    NewDeadLetter {
        consumer: "orders",
        queue: "orders.fifo",
        key,
        message_id: "m-1",
        payload: "{}",
        delivery_count: 3,
        first_failure_at: at(seconds - 60),
        last_error: Some("429 Too Many Requests"),
        at: at(seconds),
    }
}

#[tokio::test]
async fn a_postgres_test_database_is_really_postgres() {
    let db = TestDatabase::postgres().await;
    assert_eq!(db.store.backend(), "postgres");
    let db = TestDatabase::sqlite().await;
    assert_eq!(db.store.backend(), "sqlite");
}
