//! Claim-write throughput through the library: `workers` tasks each take
//! fresh keys and, per key, claim it and record `sent` in one transaction
//! (an in-transaction effect), for `seconds`. Each worker counts what it
//! did in a [`Meter`] and flushes it every five seconds, as a real worker
//! does, so the per-minute metric rows Idem charts are written too. Prints
//! claims per second.
//!
//! `DATABASE_URL=postgres://… cargo run --release -p idem-consumer --example ingest -- 8 20`
//! (`make bench` runs it with and without Idem's indexes and rollup, and
//! while the dashboard is under load).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use chrono::Utc;
use idem_consumer::{Consumer, Decision, Meter, Metric, derive_key, write_metrics};
use sqlx::postgres::PgPoolOptions;

/// How often a worker writes its counts (a real worker: every few seconds).
const FLUSH_EVERY: Duration = Duration::from_secs(5);

async fn flush(
    pool: &sqlx::PgPool,
    meter: &mut Meter,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let samples = meter.drain();
    let mut conn = pool.acquire().await?;
    write_metrics((&mut *conn).into(), &samples).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    let seconds: u64 = args.next().map_or(Ok(20), |a| a.parse())?;
    let url = std::env::var("DATABASE_URL")?;
    let pool = PgPoolOptions::new()
        .max_connections(workers as u32)
        .connect(&url)
        .await?;
    let run = format!("{:x}", Utc::now().timestamp_micros());
    let written = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let (pool, written, run) = (pool.clone(), written.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let consumer = Consumer::new("ingest-bench").expect("a valid name");
            let mut meter = Meter::default();
            let mut flushed = Instant::now();
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let key = derive_key("ingest", &[&run, &worker.to_string(), &n.to_string()])
                    .expect("a valid key");
                let now = Utc::now();
                let mut tx = pool.begin().await?;
                meter.count(consumer.name(), Metric::Deliveries, now);
                let claim = consumer.claim(&mut *tx, &key, None, now).await?;
                meter.claimed(consumer.name(), &claim, now);
                if claim.decision == Decision::Proceed {
                    consumer
                        .record_sent(&mut *tx, &key, Some("bench"), now)
                        .await?;
                    meter.count(consumer.name(), Metric::Sends, now);
                }
                tx.commit().await?;
                written.fetch_add(1, Ordering::Relaxed);
                if flushed.elapsed() >= FLUSH_EVERY {
                    flush(&pool, &mut meter).await?;
                    flushed = Instant::now();
                }
            }
            flush(&pool, &mut meter).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(|e| e.to_string())?;
    }
    let rate = written.load(Ordering::Relaxed) as f64 / seconds as f64;
    println!("{rate:.0}");
    Ok(())
}
