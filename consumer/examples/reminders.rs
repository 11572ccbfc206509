//! A whole reminder worker on `idem_consumer`, against an embedded SQLite
//! database: `cargo run -p idem-consumer --example reminders`.
//!
//! It uses its own sqlx pool and its own transactions, as your service
//! would; Idem's store is used only to create the contract's tables (in
//! production Idem's migrations have made them already). Three deliveries
//! come in — a new reminder, a redelivery of it ten minutes later, and a
//! reminder whose provider answers 429 — and the worker prints what it did.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use idem_consumer::{
    Backoff, Consumer, ConsumerResult, Decision, Failure, GiveUp, IdempotencyKey, Meter, Metric,
    Next, derive_key, write_metrics,
};
use idem_domain::ConsumerName;
use sqlx::{SqlitePool, sqlite::SqliteConnectOptions};

/// What the provider said to one call.
enum Sent {
    Accepted(String),
    RateLimited(Duration),
}

/// A stand-in for the SMS provider: rate-limits one account.
fn send_sms(account: &str) -> Sent {
    if account == "account-2210" {
        Sent::RateLimited(Duration::from_secs(30))
    } else {
        Sent::Accepted(format!("sms_{account}"))
    }
}

async fn handle(
    pool: &SqlitePool,
    consumer: &Consumer,
    meter: &mut Meter,
    account: &str,
    due: &str,
    deliveries: u32,
    at: chrono::DateTime<Utc>,
) -> ConsumerResult<String> {
    // The key is the business fact — this account's reminder for this due
    // date — so every redelivery and replay of it gets the same key.
    let key = derive_key("renewal", &[account, due])?;
    meter.count(consumer.name(), Metric::Deliveries, at);

    // 1. Claim in our own transaction (SQLite: take the write lock up front).
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let claim = consumer.claim(&mut *tx, &key, None, at).await?;
    tx.commit().await?;
    meter.claimed(consumer.name(), &claim, at);
    if let Some(why) = not_ours_to_send(claim.decision) {
        return Ok(format!("{key}: {why}"));
    }

    // 2. Call the provider outside any transaction (no lock is held while
    // it answers), 3. record what happened in a second one.
    let answer = send_sms(account);
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let said = match answer {
        Sent::Accepted(provider_ref) => {
            consumer
                .record_sent(&mut *tx, &key, Some(&provider_ref), at)
                .await?;
            let payload = format!("{{\"ref\":\"{provider_ref}\"}}");
            consumer
                .enqueue(&mut *tx, &key, "reminder.sent", &payload, at)
                .await?;
            meter.count(consumer.name(), Metric::Sends, at);
            format!("{key}: sent as {provider_ref}, announced through the outbox")
        }
        Sent::RateLimited(retry_after) => {
            meter.count(consumer.name(), Metric::RetryableFailures, at);
            meter.count(consumer.name(), Metric::RateLimited, at);
            rate_limited(&mut tx, consumer, &key, retry_after, deliveries, at).await?
        }
    };
    tx.commit().await?;
    Ok(said)
}

/// Why this delivery must not call the provider, or `None` when it owns
/// the attempt.
fn not_ours_to_send(decision: Decision) -> Option<String> {
    match decision {
        Decision::Proceed => None,
        Decision::AlreadyDone { status } => {
            Some(format!("already {status:?}; acknowledged without sending"))
        }
        Decision::Busy { until } => Some(format!(
            "another worker holds it until {until}; handed back"
        )),
        Decision::LeaseExpired => {
            Some("an earlier attempt's fate is unknown; left for an operator".to_owned())
        }
    }
}

/// Records a 429 and does what the consumer's policy says: retry later, or
/// dead-letter the message with its key once it is out of deliveries.
async fn rate_limited(
    tx: &mut sqlx::SqliteConnection,
    consumer: &Consumer,
    key: &IdempotencyKey,
    retry_after: Duration,
    deliveries: u32,
    at: chrono::DateTime<Utc>,
) -> ConsumerResult<String> {
    let failure = Failure::Retryable {
        error: "429 Too Many Requests",
        retry_after: Some(retry_after),
    };
    Ok(
        match consumer
            .record_failure(&mut *tx, key, failure, deliveries, at)
            .await?
        {
            Next::RetryIn(wait) => format!("{key}: rate-limited; back to the queue for {wait:?}"),
            Next::DeadLetter => {
                let give_up = GiveUp {
                    key,
                    queue: "reminders.fifo",
                    message_id: "m-1",
                    payload: "{}",
                    deliveries,
                    first_failure_at: at,
                    error: "429 Too Many Requests",
                };
                let id = consumer.dead_letter(&mut *tx, &give_up, at).await?;
                format!("{key}: out of deliveries; dead letter #{id}, same key")
            }
            Next::Acknowledge => format!("{key}: failed for good"),
        },
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("reminders.db");
    let url = format!("sqlite://{}", path.display());
    let idem = idem_store::Store::connect(&idem_store::StoreConfig::new(&url))?;
    idem.migrate().await?;

    let pool = SqlitePool::connect_with(
        SqliteConnectOptions::new()
            .filename(&path)
            .busy_timeout(Duration::from_secs(10)),
    )
    .await?;
    let consumer = Consumer::new("reminders")?
        .with_lease(TimeDelta::seconds(60))
        .with_max_deliveries(5)
        .with_backoff(Backoff {
            base: Duration::from_secs(2),
            max: Duration::from_secs(300),
        });
    let mut meter = Meter::default();
    let now = Utc::now();
    let deliveries = [
        ("account-1842", "2026-09-30", 1, now),
        (
            "account-1842",
            "2026-09-30",
            1,
            now + TimeDelta::minutes(10),
        ),
        ("account-2210", "2026-10-01", 1, now),
    ];
    for (account, due, delivery, at) in deliveries {
        println!(
            "{}",
            handle(&pool, &consumer, &mut meter, account, due, delivery, at).await?
        );
    }

    // Every few seconds in a real worker: one row per metric and minute.
    let samples = meter.drain();
    let mut conn = pool.acquire().await?;
    write_metrics((&mut *conn).into(), &samples).await?;
    println!("flushed {} metric rows", samples.len());

    let claim = idem
        .claims()
        .claim(
            &ConsumerName::parse("reminders")?,
            &IdempotencyKey::parse("renewal:account-1842:2026-09-30")?,
        )
        .await?;
    if let Some(claim) = claim {
        println!(
            "Idem's key page: {:?}, {} deliveries, provider reference {:?}",
            claim.status, claim.delivery_count, claim.provider_ref
        );
    }
    Ok(())
}
