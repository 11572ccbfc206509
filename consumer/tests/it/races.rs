//! Workers racing on one key through the library, on both backends: a claim
//! that waited on another worker's uncommitted claim is a duplicate if that
//! worker commits and the key's claim if it rolls back or dies, and the
//! duplicate-claim count the workers flush says exactly what they saw.
//!
//! The overlap is forced: on Postgres the second worker is seen waiting on a
//! lock (`pg_stat_activity`) before the first ends; on SQLite the first
//! holds the write lock (`BEGIN IMMEDIATE`), so the second cannot even begin
//! until the first ends, however the two are scheduled.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use idem_consumer::{Backend, Conn, Consumer, Decision, Meter, Metric, derive_key, write_metrics};
use idem_store::{Store, Ts};
use sqlx::{Postgres, Sqlite, pool::PoolConnection};

idem_store::on_both_backends!(
    a_claim_that_waited_on_a_committed_claim_is_one_duplicate,
    a_claim_that_waited_on_a_rolled_back_claim_is_the_claim,
    a_claim_that_waited_on_a_killed_worker_is_the_claim,
);

/// How the first worker's transaction ends while the second waits.
#[derive(Clone, Copy, Debug, PartialEq)]
enum FirstWorker {
    Commits,
    RollsBack,
    IsKilled,
}

/// One worker's own connection, inside its transaction.
struct Worker {
    conn: Backend<PoolConnection<Sqlite>, PoolConnection<Postgres>>,
    /// The Postgres backend's pid (to be seen waiting, or killed).
    pid: Option<i32>,
}

impl Worker {
    async fn begin(store: &Store) -> Worker {
        match (store.sqlite_pool(), store.postgres_pool()) {
            (Some(pool), _) => {
                let mut conn = pool.acquire().await.unwrap();
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut *conn)
                    .await
                    .unwrap();
                Worker {
                    conn: Backend::Sqlite(conn),
                    pid: None,
                }
            }
            (None, Some(pool)) => {
                let mut conn = pool.acquire().await.unwrap();
                let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
                    .fetch_one(&mut *conn)
                    .await
                    .unwrap();
                sqlx::raw_sql("BEGIN").execute(&mut *conn).await.unwrap();
                Worker {
                    conn: Backend::Postgres(conn),
                    pid: Some(pid),
                }
            }
            (None, None) => unreachable!("a store has one pool"),
        }
    }

    /// Claims the renewal key and counts what the claim said in `meter`.
    async fn claim(&mut self, meter: &mut Meter) -> bool {
        let consumer = Consumer::new("reminders").unwrap();
        let key = derive_key("renewal", &["account-1842", "2026-09-30"]).unwrap();
        let now = Utc::now();
        let claimed = match &mut self.conn {
            Backend::Sqlite(c) => consumer.claim(&mut **c, &key, None, now).await,
            Backend::Postgres(c) => consumer.claim(&mut **c, &key, None, now).await,
        }
        .unwrap();
        meter.claimed(consumer.name(), &claimed, now);
        if claimed.new {
            assert_eq!(claimed.decision, Decision::Proceed);
        }
        claimed.new
    }

    async fn end(mut self, commit: bool) {
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        match &mut self.conn {
            Backend::Sqlite(c) => sqlx::raw_sql(sql).execute(&mut **c).await.map(drop),
            Backend::Postgres(c) => sqlx::raw_sql(sql).execute(&mut **c).await.map(drop),
        }
        .unwrap();
    }

    /// Ends the worker as a crash does: Postgres loses its backend, SQLite
    /// its connection (a dead process's file lock goes with it).
    async fn die(self, store: &Store) {
        match self.conn {
            Backend::Postgres(conn) => {
                let pool = store.postgres_pool().unwrap();
                sqlx::query("SELECT pg_terminate_backend($1)")
                    .bind(self.pid)
                    .execute(pool)
                    .await
                    .unwrap();
                drop(conn.detach());
            }
            Backend::Sqlite(conn) => {
                use sqlx::Connection;
                conn.detach().close_hard().await.ok();
            }
        }
    }
}

/// Waits until the second worker waits for the first: on Postgres, until
/// another backend of this database than `first`'s waits on a lock.
async fn second_is_waiting(store: &Store, first: Option<i32>) {
    let Some(pool) = store.postgres_pool() else {
        // SQLite: the second worker is stuck in BEGIN IMMEDIATE until the
        // first ends; give it the time to get there, which changes nothing
        // about the outcome.
        tokio::time::sleep(Duration::from_millis(100)).await;
        return;
    };
    for _ in 0..250 {
        let waiting: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND pid <> pg_backend_pid() AND pid <> $1 AND wait_event_type = 'Lock'",
        )
        .bind(first)
        .fetch_optional(pool)
        .await
        .unwrap();
        if waiting.is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the second worker never waited on the first one's claim");
}

/// The race: the first worker claims and holds, the second claims and
/// waits, the first ends as `first` says, the second commits. Returns
/// whether the second got the key, and the duplicates both workers' meters
/// flushed into `consumer_metrics`.
async fn race(store: &Store, first: FirstWorker) -> (bool, f64) {
    let mut a = Worker::begin(store).await;
    let mut a_meter = Meter::default();
    assert!(
        a.claim(&mut a_meter).await,
        "the first worker claims the key"
    );

    // The second worker runs beside the first, in this task: its claim
    // waits while the first worker's transaction is still open.
    let second = async {
        let mut meter = Meter::default();
        let mut b = Worker::begin(store).await;
        let claimed = b.claim(&mut meter).await;
        b.end(true).await;
        (claimed, meter)
    };
    let first_ends = async {
        second_is_waiting(store, a.pid).await;
        match first {
            FirstWorker::Commits => a.end(true).await,
            FirstWorker::RollsBack => a.end(false).await,
            FirstWorker::IsKilled => a.die(store).await,
        }
    };
    let ((b_claimed, mut b_meter), ()) = tokio::join!(second, first_ends);

    // Each worker flushes what it counted, as a worker does every few seconds.
    let mut samples = a_meter.drain();
    samples.extend(b_meter.drain());
    flush(store, &samples).await;
    let duplicates = store
        .metric_rows(
            "reminders",
            Metric::DuplicateClaims,
            Ts::from(Utc::now() - TimeDelta::hours(1)),
            Ts::from(Utc::now() + TimeDelta::hours(1)),
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.value)
        .sum();
    (b_claimed, duplicates)
}

async fn flush(store: &Store, samples: &[idem_consumer::MetricSample]) {
    match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(pool), _) => {
            let mut conn = pool.acquire().await.unwrap();
            write_metrics(Conn::from(&mut *conn), samples)
                .await
                .unwrap();
        }
        (None, Some(pool)) => {
            let mut conn = pool.acquire().await.unwrap();
            write_metrics(Conn::from(&mut *conn), samples)
                .await
                .unwrap();
        }
        (None, None) => unreachable!("a store has one pool"),
    }
}

/// The key's claim: deliveries and duplicates counted on it.
async fn counts_on_the_claim(store: &Store) -> (i64, i64) {
    let key = derive_key("renewal", &["account-1842", "2026-09-30"]).unwrap();
    let claim = store
        .claims()
        .claim(&idem_store::testing::consumer("reminders"), &key)
        .await
        .unwrap()
        .expect("the key is claimed");
    (claim.delivery_count, claim.duplicate_count)
}

async fn a_claim_that_waited_on_a_committed_claim_is_one_duplicate(store: &Store) {
    let (second_claimed, duplicates) = race(store, FirstWorker::Commits).await;
    assert!(!second_claimed, "the second worker saw a duplicate");
    assert_eq!(duplicates, 1.0, "counted once, as the worker saw it");
    assert_eq!(counts_on_the_claim(store).await, (2, 1));
}

async fn a_claim_that_waited_on_a_rolled_back_claim_is_the_claim(store: &Store) {
    let (second_claimed, duplicates) = race(store, FirstWorker::RollsBack).await;
    assert!(
        second_claimed,
        "the first worker's claim went with its rollback"
    );
    assert_eq!(duplicates, 0.0);
    assert_eq!(counts_on_the_claim(store).await, (1, 0));
}

async fn a_claim_that_waited_on_a_killed_worker_is_the_claim(store: &Store) {
    let (second_claimed, duplicates) = race(store, FirstWorker::IsKilled).await;
    assert!(second_claimed, "the killed worker's claim went with it");
    assert_eq!(duplicates, 0.0);
    assert_eq!(counts_on_the_claim(store).await, (1, 0));
}
