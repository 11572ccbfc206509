//! Workers racing on one key, through each adapter: a duplicate whose claim
//! waited on another worker's uncommitted claim is counted once, whether
//! that worker commits or rolls back, whether the duplicate's own worker
//! commits or rolls back, and a worker killed mid-transaction leaves its
//! key to the next. The overlap is forced, not hoped for: the second worker
//! is seen waiting on a lock in `pg_stat_activity` before the first commits.

use std::time::Duration;

use chrono::TimeDelta;
use idem_domain::Metric;
use idem_store::{Ts, testing::TestDatabase};
use sqlx::{Connection, PgConnection, PgPool};

use super::{common::visible, counted, install, spawn_read_only, team_pool};

/// One adapter under test: its file, its source table, how its workers
/// claim a key, and the consumer Idem shows it as.
struct Adapter {
    file: &'static str,
    table: &'static str,
    claim: &'static str,
    consumer: &'static str,
}

const ADAPTERS: [Adapter; 3] = [
    Adapter {
        file: "processed_jobs.sql",
        table: "CREATE TABLE processed_jobs (idempotency_key text PRIMARY KEY, message_id text, processed_at timestamptz)",
        claim: "INSERT INTO processed_jobs (idempotency_key, message_id, processed_at) \
                VALUES ($1, 'm', now()) ON CONFLICT DO NOTHING RETURNING 1",
        consumer: "billing-jobs",
    },
    Adapter {
        file: "processed_events.sql",
        table: "CREATE TABLE processed_events (event_id text UNIQUE, seen_at timestamptz DEFAULT now())",
        claim: "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1",
        consumer: "payment-events",
    },
    Adapter {
        file: "reminder_store.sql",
        table: "CREATE TABLE reminder_sends (reminder_id text PRIMARY KEY, status text, \
                provider_message_id text, last_error text, attempts integer, \
                created_at timestamptz, updated_at timestamptz)",
        claim: "INSERT INTO reminder_sends (reminder_id, status, attempts, created_at, updated_at) \
                VALUES ($1, 'pending', 0, now(), now()) ON CONFLICT (reminder_id) DO NOTHING RETURNING 1",
        consumer: "reminders-legacy",
    },
];

/// What a worker does once its claim comes back a duplicate.
#[derive(Clone, Copy, Debug)]
enum OnDuplicate {
    RollBack,
    Commit,
}

/// One worker: its own connection (so it can be killed), mid-transaction.
struct Worker {
    conn: PgConnection,
    pid: i32,
}

impl Worker {
    async fn begin(url: &str) -> Worker {
        let mut conn = PgConnection::connect(url).await.unwrap();
        let pid = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        sqlx::raw_sql("BEGIN").execute(&mut conn).await.unwrap();
        Worker { conn, pid }
    }

    /// Claims `key`; true when this worker got it, false for a duplicate.
    async fn claim(mut self, sql: &'static str, key: &str) -> (Worker, bool) {
        let got = sqlx::query(sql)
            .bind(key)
            .fetch_optional(&mut self.conn)
            .await
            .unwrap();
        (self, got.is_some())
    }

    async fn end(mut self, commit: bool) {
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        sqlx::raw_sql(sql).execute(&mut self.conn).await.unwrap();
    }
}

/// Waits until backend `pid` waits on a lock: the barrier.
async fn waiting_on_a_lock(admin: &PgPool, pid: i32) {
    for _ in 0..250 {
        let waiting: Option<bool> = sqlx::query_scalar(
            "SELECT COALESCE(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1",
        )
        .bind(pid)
        .fetch_optional(admin)
        .await
        .unwrap();
        if waiting == Some(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("worker {pid} never waited on the first worker's claim");
}

/// The race, as the workers see it: (deliveries, duplicates) they counted.
async fn race(
    url: &str,
    admin: &PgPool,
    adapter: &Adapter,
    on_duplicate: OnDuplicate,
) -> (u32, u32) {
    let settle = |claimed: bool| claimed || matches!(on_duplicate, OnDuplicate::Commit);
    let key = "charge:EU/2026/Ø-1842 #7 🧾";
    // A claims the key and holds it; B's claim of the same key waits.
    let (a, claimed) = Worker::begin(url).await.claim(adapter.claim, key).await;
    assert!(claimed);
    let b = Worker::begin(url).await;
    let b_pid = b.pid;
    let b = tokio::spawn(b.claim(adapter.claim, key));
    waiting_on_a_lock(admin, b_pid).await;
    a.end(true).await;
    let (b, claimed) = b.await.unwrap();
    assert!(!claimed, "B is a duplicate of A's committed claim");
    b.end(settle(claimed)).await;
    // C arrives after both: a duplicate found at once.
    let (c, claimed) = Worker::begin(url).await.claim(adapter.claim, key).await;
    assert!(!claimed);
    c.end(settle(claimed)).await;
    // D claims another key and is killed mid-transaction while E waits: E
    // gets the key, and is no duplicate.
    let other = "charge:INV-1843";
    let (d, claimed) = Worker::begin(url).await.claim(adapter.claim, other).await;
    assert!(claimed);
    let e = Worker::begin(url).await;
    let e_pid = e.pid;
    let e = tokio::spawn(e.claim(adapter.claim, other));
    waiting_on_a_lock(admin, e_pid).await;
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(d.pid)
        .execute(admin)
        .await
        .unwrap();
    let (e, claimed) = e.await.unwrap();
    assert!(claimed, "the killed worker's claim went with it");
    e.end(true).await;
    // Five deliveries (the killed one's too); B and C were duplicates.
    (5, 2)
}

async fn every_duplicate_is_counted_once(adapter: &Adapter, on_duplicate: OnDuplicate) {
    let db = TestDatabase::postgres().await;
    let admin = team_pool(&db.url).await;
    sqlx::raw_sql(adapter.table).execute(&admin).await.unwrap();
    install(&db.url, adapter.file).await;
    let (deliveries, duplicates) = race(&db.url, &admin, adapter, on_duplicate).await;

    // Idem samples the adapters' counters every minute; here into a minute
    // that has settled (so /metrics exports it), by two replicas at once,
    // before the console starts (whose own sampler then finds nothing new).
    let store = &db.store;
    let totals = idem::consumer_events::EventTotals::default();
    totals
        .advance(store, Ts::from(Ts::now().0 - TimeDelta::minutes(10)))
        .await
        .unwrap();
    let minute = Ts::from(Ts::now().0 - TimeDelta::minutes(7));
    store
        .metrics()
        .sample_adapter_counters(minute)
        .await
        .unwrap();
    store
        .metrics()
        .sample_adapter_counters(minute)
        .await
        .unwrap();

    let what = format!("{} with workers that {on_duplicate:?}", adapter.file);
    assert_eq!(
        counted(store, adapter.consumer, Metric::Deliveries).await,
        f64::from(deliveries),
        "{what}: consumer_metrics"
    );
    assert_eq!(
        counted(store, adapter.consumer, Metric::DuplicateClaims).await,
        f64::from(duplicates),
        "{what}: consumer_metrics"
    );
    let exported = totals.advance(store, Ts::now()).await.unwrap();
    let total = |metric| {
        exported
            .iter()
            .find(|(c, m, _)| c == adapter.consumer && *m == metric)
            .map_or(0.0, |(_, _, v)| *v)
    };
    assert_eq!(
        total(Metric::Deliveries),
        f64::from(deliveries),
        "{what}: /metrics"
    );
    assert_eq!(
        total(Metric::DuplicateClaims),
        f64::from(duplicates),
        "{what}: /metrics"
    );

    // The rate the overview shows.
    let app = spawn_read_only(db, adapter.consumer).await;
    let (status, html) = app
        .get(&format!("/?consumer={}&range=1h", adapter.consumer))
        .await;
    assert_eq!(status, 200);
    let rate = format!(
        "{duplicates} of {deliveries} deliveries ({}) found their key already claimed",
        idem_app::format::percent(f64::from(duplicates) / f64::from(deliveries))
    );
    assert!(visible(&html).contains(&rate), "{what}: {}", visible(&html));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_workers_that_roll_back_on_a_duplicate_are_all_counted() {
    for adapter in &ADAPTERS {
        every_duplicate_is_counted_once(adapter, OnDuplicate::RollBack).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_workers_that_commit_after_a_conflict_are_counted_once() {
    for adapter in &ADAPTERS {
        every_duplicate_is_counted_once(adapter, OnDuplicate::Commit).await;
    }
}
