//! The write workload `bench` measures under: new pending claims and
//! pending → sent/failed transitions, about 400 claim writes a second.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use sqlx::{
    Executor, PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

/// The pending → sent/failed workload running beside the reads.
pub(super) struct Workload {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    started: Instant,
    running: bool,
}

impl Workload {
    pub(super) async fn start(url: &str, enabled: bool) -> Result<Workload, String> {
        let workload = Workload {
            stop: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
            running: enabled,
        };
        if enabled {
            start_workload(
                one_connection(url).await?,
                workload.stop.clone(),
                workload.done.clone(),
            );
        }
        Ok(workload)
    }

    /// Stops it, deletes its claims, and says how many writes a second it made.
    pub(super) async fn stop(self, url: &str) -> Result<Option<f64>, String> {
        self.stop.store(true, Ordering::Relaxed);
        let rate = self.running.then(|| {
            self.done.load(Ordering::Relaxed) as f64 / self.started.elapsed().as_secs_f64()
        });
        // Give the workload's last statement time to finish before cleaning up.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let cleanup = one_connection(url).await?;
        remove_workload_claims(&cleanup).await?;
        cleanup.close().await;
        Ok(rate)
    }
}

pub(super) async fn one_connection(url: &str) -> Result<PgPool, String> {
    PgPoolOptions::new()
        .max_connections(1)
        .connect_with(url.parse::<PgConnectOptions>().map_err(|e| e.to_string())?)
        .await
        .map_err(|e| e.to_string())
}

/// Claims new keys (`bench:…`, pending) and moves the ones claimed in the
/// last minute to sent or failed, two each every 10 ms, until `stop`: about
/// 400 claim writes a second, leaving the seeded claims as they were. Counts the rows it changed; [`remove_workload_claims`] deletes
/// its keys afterwards.
fn start_workload(pool: PgPool, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    const SETTLE: &str = "WITH due AS (SELECT consumer, idempotency_key FROM claims \
         WHERE status = 'pending' AND status_at > now() - interval '1 minute' \
         ORDER BY status_at LIMIT 2 FOR UPDATE SKIP LOCKED) \
         UPDATE claims c SET status = CASE WHEN random() < 0.95 THEN 'sent' ELSE 'failed' END, \
         status_at = now(), outcome_at = now(), version = c.version + 1 \
         FROM due WHERE c.consumer = due.consumer AND c.idempotency_key = due.idempotency_key";
    const CLAIM: &str = "INSERT INTO claims (consumer, idempotency_key, status, status_at, \
         first_delivery_at, last_delivery_at) \
         SELECT 'reminders', 'bench:' || md5(random()::text || clock_timestamp()::text), \
         'pending', now(), now(), now() FROM generate_series(1, 2)";
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            for sql in [SETTLE, CLAIM] {
                if let Ok(result) = pool.execute(sql).await {
                    done.fetch_add(result.rows_affected(), Ordering::Relaxed);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

/// Deletes the claims the workload wrote, so reruns measure the same data set.
async fn remove_workload_claims(pool: &PgPool) -> Result<u64, String> {
    sqlx::query("DELETE FROM claims WHERE idempotency_key LIKE 'bench:%'")
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
        .map_err(|e| e.to_string())
}
