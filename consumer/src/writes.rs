//! The contract's writes, one statement each, on the caller's connection.
//!
//! [`crate::Consumer`] builds the pattern out of these; Idem's own store
//! wraps them too (its tests and demo seeding write claims exactly as a
//! consumer does). Versioning rule: `version` increases on every change an
//! operator acts on (status, outcome, provider reference, lease); counting a
//! duplicate delivery does not change it, so a busy key does not turn an
//! operator's confirmation into a conflict.

use idem_domain::{ClaimStatus, Metric, MetricKind, OutboxOrigin};

use crate::{ConsumerError, ConsumerResult, Ts, conn::Conn, dispatch};

/// One delivery of a message to a consumer.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub consumer: &'a str,
    pub key: &'a str,
    /// A hash of the payload, to notice the same key arriving with different content.
    pub payload_hash: Option<&'a str>,
    pub at: Ts,
}

/// How an attempt at the effect ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// The provider confirmed the effect.
    Sent { provider_ref: Option<&'a str> },
    /// Worth retrying (a 429, a 503): the claim stays `pending`, lease released.
    Retryable { error: &'a str },
    /// Will never succeed as sent (a 400): `failed`.
    Permanent { error: &'a str },
    /// The provider may or may not have acted (lost response, crash after
    /// acceptance): `unknown`, for an operator to resolve.
    Unknown { error: &'a str },
}

impl Outcome<'_> {
    pub fn status(&self) -> ClaimStatus {
        match self {
            Outcome::Sent { .. } => ClaimStatus::Sent,
            Outcome::Retryable { .. } => ClaimStatus::Pending,
            Outcome::Permanent { .. } => ClaimStatus::Failed,
            Outcome::Unknown { .. } => ClaimStatus::Unknown,
        }
    }
}

/// An outbox row to write.
#[derive(Debug, Clone, Copy)]
pub struct NewOutboxRow<'a> {
    pub consumer: &'a str,
    pub topic: &'a str,
    pub key: &'a str,
    pub payload: &'a str,
    pub origin: OutboxOrigin,
    pub dead_letter_id: Option<i64>,
    pub audit_id: Option<i64>,
    pub at: Ts,
}

/// A message to give up on.
#[derive(Debug, Clone, Copy)]
pub struct NewDeadLetter<'a> {
    pub consumer: &'a str,
    pub queue: &'a str,
    pub key: &'a str,
    pub message_id: &'a str,
    pub payload: &'a str,
    pub delivery_count: i64,
    pub first_failure_at: Ts,
    pub last_error: Option<&'a str>,
    pub at: Ts,
}

/// One value to fold into a minute's row of `consumer_metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSample {
    pub consumer: String,
    pub metric: Metric,
    /// Any instant in the minute; stored truncated to the minute.
    pub at: Ts,
    /// The histogram bucket (`Metric::bucket_for`), empty for counters and gauges.
    pub bucket: String,
    pub value: f64,
}

/// What a claim holds, as far as the consumer's decisions need it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimState {
    pub status: ClaimStatus,
    pub first_delivery_at: Ts,
    pub lease_until: Option<Ts>,
    pub delivery_count: i64,
    /// Calls made to the provider for this key.
    pub attempts: i64,
}

#[derive(sqlx::FromRow)]
struct StateRow {
    status: String,
    first_delivery_at: Ts,
    lease_until: Option<Ts>,
    delivery_count: i64,
    attempts: i64,
}

macro_rules! state_columns {
    () => {
        "status, first_delivery_at, lease_until, delivery_count, attempts"
    };
}

impl TryFrom<StateRow> for ClaimState {
    type Error = ConsumerError;
    fn try_from(row: StateRow) -> ConsumerResult<Self> {
        Ok(ClaimState {
            status: row
                .status
                .parse()
                .map_err(|e: idem_domain::UnknownValue| ConsumerError::Contract(e.to_string()))?,
            first_delivery_at: row.first_delivery_at,
            lease_until: row.lease_until,
            delivery_count: row.delivery_count,
            attempts: row.attempts,
        })
    }
}

fn claimed(row: Option<StateRow>, consumer: &str, key: &str) -> ConsumerResult<ClaimState> {
    row.ok_or_else(|| ConsumerError::NotClaimed {
        consumer: consumer.to_owned(),
        key: key.to_owned(),
    })?
    .try_into()
}

/// Claims `delivery.key` for `delivery.consumer`: insert-if-absent under the
/// primary key, else count the delivery as a duplicate. Exactly one of any
/// number of concurrent deliveries of one key gets `true` (new); on
/// Postgres the others wait for its transaction and then count.
pub async fn claim(conn: Conn<'_>, delivery: &Delivery<'_>) -> ConsumerResult<(bool, ClaimState)> {
    const INSERT: &str = concat!(
        "INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at, \
         last_delivery_at, delivery_count, duplicate_count, attempts, payload_hash, version) \
         VALUES ($1, $2, 'pending', $3, $3, $3, 1, 0, 0, $4, 1) \
         ON CONFLICT (consumer, idempotency_key) DO NOTHING RETURNING ",
        state_columns!()
    );
    const COUNT_DUPLICATE: &str = concat!(
        "UPDATE claims SET delivery_count = delivery_count + 1, \
         duplicate_count = duplicate_count + 1, \
         last_delivery_at = CASE WHEN $3 > last_delivery_at THEN $3 ELSE last_delivery_at END, \
         last_payload_hash = CASE WHEN $4 IS NOT NULL AND payload_hash IS NOT NULL \
                                  AND $4 <> payload_hash THEN $4 ELSE last_payload_hash END \
         WHERE consumer = $1 AND idempotency_key = $2 RETURNING ",
        state_columns!()
    );
    let d = delivery;
    dispatch!(conn, c => {
        let inserted: Option<StateRow> = sqlx::query_as(INSERT)
            .bind(d.consumer).bind(d.key).bind(d.at).bind(d.payload_hash)
            .fetch_optional(&mut *c).await?;
        if let Some(row) = inserted {
            return Ok((true, row.try_into()?));
        }
        let counted: Option<StateRow> = sqlx::query_as(COUNT_DUPLICATE)
            .bind(d.consumer).bind(d.key).bind(d.at).bind(d.payload_hash)
            .fetch_optional(&mut *c).await?;
        Ok((false, claimed(counted, d.consumer, d.key)?))
    })
}

/// Takes the claim for one attempt at the effect: `pending`, `attempts + 1`,
/// leased until `until`. A later delivery that finds the lease expired
/// without an outcome knows the attempt's fate is unknown.
pub async fn lease(
    conn: Conn<'_>,
    consumer: &str,
    key: &str,
    until: Ts,
    at: Ts,
) -> ConsumerResult<ClaimState> {
    const LEASE: &str = concat!(
        "UPDATE claims SET status = 'pending', \
         status_at = CASE WHEN status <> 'pending' THEN $4 ELSE status_at END, \
         attempts = attempts + 1, lease_until = $3, version = version + 1 \
         WHERE consumer = $1 AND idempotency_key = $2 RETURNING ",
        state_columns!()
    );
    let row: Option<StateRow> = dispatch!(conn, c => {
        sqlx::query_as(LEASE).bind(consumer).bind(key).bind(until).bind(at)
            .fetch_optional(c).await?
    });
    claimed(row, consumer, key)
}

/// Records how an attempt ended and releases the lease.
pub async fn record(
    conn: Conn<'_>,
    consumer: &str,
    key: &str,
    outcome: Outcome<'_>,
    at: Ts,
) -> ConsumerResult<ClaimState> {
    const RECORD: &str = concat!(
        "UPDATE claims SET status = $3, \
         status_at = CASE WHEN status <> $3 THEN $4 ELSE status_at END, \
         outcome_at = CASE WHEN $3 = 'pending' THEN outcome_at ELSE $4 END, \
         provider_ref = COALESCE($5, provider_ref), \
         last_error = $6, lease_until = NULL, version = version + 1 \
         WHERE consumer = $1 AND idempotency_key = $2 RETURNING ",
        state_columns!()
    );
    let (provider_ref, error) = match outcome {
        Outcome::Sent { provider_ref } => (provider_ref, None),
        Outcome::Retryable { error }
        | Outcome::Permanent { error }
        | Outcome::Unknown { error } => (None, Some(error)),
    };
    let status = outcome.status().as_str();
    let row: Option<StateRow> = dispatch!(conn, c => {
        sqlx::query_as(RECORD)
            .bind(consumer).bind(key).bind(status).bind(at).bind(provider_ref).bind(error)
            .fetch_optional(c).await?
    });
    claimed(row, consumer, key)
}

/// Gives up on a key whose message is being dead-lettered: `failed`, lease
/// released — but only when no attempt may be in flight or done. A claim
/// that is `sent` or `unknown`, or `pending` under a live lease (a worker's
/// call is still running and will record its own outcome), is left alone,
/// so a replay's verdict sees what really happened. Returns whether the
/// claim was changed.
pub async fn give_up(
    conn: Conn<'_>,
    consumer: &str,
    key: &str,
    error: &str,
    at: Ts,
) -> ConsumerResult<bool> {
    const GIVE_UP: &str = "UPDATE claims SET status = 'failed', \
         status_at = CASE WHEN status <> 'failed' THEN $3 ELSE status_at END, \
         outcome_at = $3, last_error = $4, lease_until = NULL, version = version + 1 \
         WHERE consumer = $1 AND idempotency_key = $2 \
           AND (status = 'failed' OR (status = 'pending' AND (lease_until IS NULL OR lease_until <= $3)))";
    let changed = dispatch!(conn, c => {
        sqlx::query(GIVE_UP).bind(consumer).bind(key).bind(at).bind(error)
            .execute(c).await?.rows_affected()
    });
    Ok(changed > 0)
}

/// Writes an outbox row; returns its id.
pub async fn enqueue(conn: Conn<'_>, row: &NewOutboxRow<'_>) -> ConsumerResult<i64> {
    const INSERT: &str = "INSERT INTO outbox (consumer, topic, idempotency_key, payload, \
         created_at, origin, dead_letter_id, audit_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id";
    let id: i64 = dispatch!(conn, c => {
        sqlx::query_scalar(INSERT)
            .bind(row.consumer).bind(row.topic).bind(row.key).bind(row.payload)
            .bind(row.at).bind(row.origin.as_str()).bind(row.dead_letter_id).bind(row.audit_id)
            .fetch_one(c).await?
    });
    Ok(id)
}

/// Moves a message to the dead letters, keeping its key; returns the id.
pub async fn dead_letter(conn: Conn<'_>, dl: &NewDeadLetter<'_>) -> ConsumerResult<i64> {
    const INSERT: &str = "INSERT INTO dead_letters (consumer, queue, idempotency_key, \
         message_id, payload, delivery_count, first_failure_at, dead_lettered_at, last_error, state) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'open') RETURNING id";
    let id: i64 = dispatch!(conn, c => {
        sqlx::query_scalar(INSERT)
            .bind(dl.consumer).bind(dl.queue).bind(dl.key).bind(dl.message_id)
            .bind(dl.payload).bind(dl.delivery_count).bind(dl.first_failure_at)
            .bind(dl.at).bind(dl.last_error)
            .fetch_one(c).await?
    });
    Ok(id)
}

/// Folds samples into their minutes: counters and histogram buckets add,
/// gauges keep the largest value of the minute. One row per (consumer,
/// metric, minute, bucket), so no two consumers ever write the same row.
pub async fn write_metrics(mut conn: Conn<'_>, samples: &[MetricSample]) -> ConsumerResult<()> {
    const ADD: &str = "INSERT INTO consumer_metrics (consumer, metric, minute, bucket, value) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, metric, minute, bucket) \
         DO UPDATE SET value = consumer_metrics.value + excluded.value";
    const MAX: &str = "INSERT INTO consumer_metrics (consumer, metric, minute, bucket, value) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (consumer, metric, minute, bucket) \
         DO UPDATE SET value = CASE WHEN excluded.value > consumer_metrics.value \
                               THEN excluded.value ELSE consumer_metrics.value END";
    for s in samples {
        let sql = match s.metric.kind() {
            MetricKind::Counter | MetricKind::Histogram => ADD,
            MetricKind::Gauge => MAX,
        };
        dispatch!(conn.by_ref(), c => {
            sqlx::query(sql)
                .bind(&s.consumer).bind(s.metric.name()).bind(s.at.minute())
                .bind(&s.bucket).bind(s.value)
                .execute(c).await?;
        });
    }
    Ok(())
}
