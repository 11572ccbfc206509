//! A slow database is not an outage, and a slow client is not a free hold
//! on the server: a saturated pool leaves readiness and the pages' outage
//! banner alone; stale permissions are used only in a declared outage and
//! never for actions; a sign-out during an outage takes effect when the
//! database returns; slow senders are cut off; timeouts answer as promised;
//! the background work runs on one replica, which stops it when it cannot
//! renew its lease and hands it over when it is killed.
//!
//! The tests live in themed modules; the locks and waits they share are here.

// The harness every server test binary shares, one folder up.
use crate::common;

mod replicas;
mod slow_clients;
mod slow_database;
mod timeouts;

use std::time::{Duration, Instant};

use sqlx::{Connection, Executor};

const BANNER: &str = "Database unavailable since";

/// Runs `locking` in a transaction on `url` from another connection and
/// holds what it locked for `hold`.
async fn hold_lock(url: &str, locking: &str, hold: Duration) -> tokio::task::JoinHandle<()> {
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    connection.execute("BEGIN").await.unwrap();
    connection.execute(locking).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        connection.execute("COMMIT").await.unwrap();
    })
}

/// Holds `LOCK TABLE table` (even reads of it wait) for `hold`.
async fn lock_table(url: &str, table: &str, hold: Duration) -> tokio::task::JoinHandle<()> {
    hold_lock(
        url,
        &format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"),
        hold,
    )
    .await
}

/// Locks dead letter `id`'s row as another writer would: reads go on,
/// a change waits.
async fn lock_dead_letter(url: &str, id: i64, hold: Duration) -> tokio::task::JoinHandle<()> {
    hold_lock(
        url,
        &format!("SELECT id FROM dead_letters WHERE id = {id} FOR UPDATE"),
        hold,
    )
    .await
}

async fn wait_until<F, Fut>(within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
