//! Dead letters that a broker kept (RabbitMQ's dead-letter queues), moved
//! into `dead_letters`, and their replays published back to the broker.
//!
//! A broker's dead letter becomes an ordinary row — the key page, the lists,
//! the checks, the verdict and the redrive read it as any other — plus what
//! the broker said about the death (`death_*`) and what a replay needs to
//! publish the original message again (`properties`). `broker_ref` names the
//! broker's message: one delivered again after Idem died between its commit
//! and its acknowledgement is stored once.
//!
//! A replay is an outbox row, as for any dead letter. For a broker's dead
//! letter Idem itself publishes it: it leases the row (`publishing_until`),
//! publishes with the broker's confirm, and marks it published — or records
//! why not, for the next attempt (`next_attempt_at`). The lease keeps two
//! replicas, or a person's "publish again" and the background relay, from
//! publishing one row at once.

use chrono::TimeDelta;
use idem_domain::{Metric, ReplayPublication};

use crate::facets::Brokers;
use crate::{MetricSample, StoreResult, dialect::dispatch, ts::Ts};

/// A message a broker dead-lettered, as Idem stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewBrokerDeadLetter {
    pub consumer: String,
    /// `rabbitmq`.
    pub broker: String,
    /// The broker's message, stable across redeliveries of the same death.
    pub broker_ref: String,
    /// The queue the message died in (where its consumer read it).
    pub queue: String,
    pub key: String,
    pub message_id: String,
    pub payload: String,
    pub delivery_count: i64,
    pub first_failure_at: Ts,
    pub dead_lettered_at: Ts,
    pub last_error: String,
    pub death_exchange: Option<String>,
    pub death_routing_key: Option<String>,
    pub death_reason: Option<String>,
    pub death_count: Option<i64>,
    pub death_at: Option<Ts>,
    /// What a replay publishes again besides the payload (JSON).
    pub properties: String,
}

/// One replay for Idem to publish to a broker: the outbox row and what
/// its dead letter says about the original message.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct BrokerReplay {
    pub outbox_id: i64,
    pub consumer: String,
    #[sqlx(rename = "idempotency_key")]
    pub key: String,
    pub dead_letter_id: i64,
    pub message_id: String,
    pub payload: String,
    pub exchange: String,
    pub routing_key: String,
    pub properties: String,
    pub published_at: Option<Ts>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<Ts>,
}

impl BrokerReplay {
    /// How its publication stands, as a page shows it.
    pub fn publication(&self) -> ReplayPublication {
        ReplayPublication {
            published_at: self.published_at.map(|t| t.0),
            attempts: self.attempts,
            last_error: self.last_error.clone(),
            next_attempt_at: self.next_attempt_at.map(|t| t.0),
        }
    }
}

/// How long one attempt to publish holds its row: longer than a publish
/// and its confirm may take.
pub const PUBLISH_LEASE: TimeDelta = TimeDelta::seconds(30);

const REPLAY_COLUMNS: &str = "o.id AS outbox_id, o.consumer, o.idempotency_key, \
     d.id AS dead_letter_id, d.message_id, o.payload, \
     COALESCE(d.death_exchange, '') AS exchange, COALESCE(d.death_routing_key, d.queue) AS routing_key, \
     COALESCE(d.properties, '{}') AS properties, o.published_at, o.attempts, \
     o.last_error, o.next_attempt_at";

impl Brokers<'_> {
    /// Stores a broker's dead letter and counts it in the consumer's dead
    /// letters for the minute `now`, in one transaction; its id, and whether
    /// it is new (false: the same death was stored before).
    pub async fn record_broker_dead_letter(
        self,
        dl: &NewBrokerDeadLetter,
        now: Ts,
    ) -> StoreResult<(i64, bool)> {
        const INSERT: &str = "INSERT INTO dead_letters (consumer, queue, idempotency_key, message_id, \
             payload, delivery_count, first_failure_at, dead_lettered_at, last_error, state, broker, \
             broker_ref, death_exchange, death_routing_key, death_reason, death_count, death_at, properties) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'open', $10, $11, $12, $13, $14, $15, $16, $17) \
             ON CONFLICT (consumer, broker_ref) WHERE broker_ref IS NOT NULL DO NOTHING RETURNING id";
        const EXISTING: &str =
            "SELECT id FROM dead_letters WHERE consumer = $1 AND broker_ref = $2";
        let mut tx = self.begin().await?;
        let inserted: Option<i64> = dispatch!(&mut tx.inner, t => {
            sqlx::query_scalar(INSERT)
                .bind(&dl.consumer).bind(&dl.queue).bind(&dl.key).bind(&dl.message_id)
                .bind(&dl.payload).bind(dl.delivery_count).bind(dl.first_failure_at)
                .bind(dl.dead_lettered_at).bind(&dl.last_error).bind(&dl.broker)
                .bind(&dl.broker_ref).bind(&dl.death_exchange).bind(&dl.death_routing_key)
                .bind(&dl.death_reason).bind(dl.death_count).bind(dl.death_at).bind(&dl.properties)
                .fetch_optional(&mut **t).await?
        });
        let recorded = match inserted {
            Some(id) => {
                let counted = MetricSample {
                    consumer: dl.consumer.clone(),
                    metric: Metric::DeadLetters,
                    at: now,
                    bucket: String::new(),
                    value: 1.0,
                };
                idem_consumer::write_metrics(tx.conn(), &[counted]).await?;
                (id, true)
            }
            None => {
                let id: i64 = dispatch!(&mut tx.inner, t => {
                    sqlx::query_scalar(EXISTING).bind(&dl.consumer).bind(&dl.broker_ref)
                        .fetch_one(&mut **t).await?
                });
                (id, false)
            }
        };
        tx.commit().await?;
        Ok(recorded)
    }

    /// The replay outbox row `outbox_id` when it replays a broker's dead
    /// letter (`None` for any other row).
    pub async fn broker_replay(self, outbox_id: i64) -> StoreResult<Option<BrokerReplay>> {
        let sql = format!(
            "SELECT {REPLAY_COLUMNS} FROM outbox o JOIN dead_letters d ON d.id = o.dead_letter_id \
             WHERE o.id = $1 AND d.broker IS NOT NULL"
        );
        Ok(dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(outbox_id).fetch_optional(pool).await?
        }))
    }

    /// Unpublished replays of broker dead letters whose next attempt is due
    /// at `now`, oldest first (at most `limit`): the background relay's work.
    pub async fn broker_replays_due(self, now: Ts, limit: i64) -> StoreResult<Vec<BrokerReplay>> {
        let sql = format!(
            "SELECT {REPLAY_COLUMNS} FROM outbox o JOIN dead_letters d ON d.id = o.dead_letter_id \
             WHERE o.published_at IS NULL AND o.dead_letter_id IS NOT NULL AND d.broker IS NOT NULL \
             AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= $1) \
             AND (o.publishing_until IS NULL OR o.publishing_until < $1) \
             ORDER BY o.created_at, o.id LIMIT $2"
        );
        Ok(dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(now).bind(limit).fetch_all(pool).await?
        }))
    }

    /// Takes the row for one attempt to publish: true when it is still
    /// unpublished and nobody else is publishing it.
    pub async fn lease_publication(self, outbox_id: i64, now: Ts) -> StoreResult<bool> {
        const SQL: &str = "UPDATE outbox SET publishing_until = $2, attempts = attempts + 1 \
             WHERE id = $1 AND published_at IS NULL \
             AND (publishing_until IS NULL OR publishing_until < $3)";
        let taken = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(outbox_id).bind(now + PUBLISH_LEASE).bind(now)
                .execute(pool).await?.rows_affected()
        });
        Ok(taken == 1)
    }

    /// The broker confirmed the row's message at `at`.
    pub async fn publication_confirmed(self, outbox_id: i64, at: Ts) -> StoreResult<()> {
        const SQL: &str = "UPDATE outbox SET published_at = $2, publishing_until = NULL, \
             next_attempt_at = NULL, last_error = NULL WHERE id = $1 AND published_at IS NULL";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(outbox_id).bind(at).execute(pool).await?.rows_affected()
        });
        Ok(())
    }

    /// The broker did not confirm the row's message: why, and when the
    /// background relay tries again.
    pub async fn publication_failed(
        self,
        outbox_id: i64,
        error: &str,
        next_attempt_at: Ts,
    ) -> StoreResult<()> {
        const SQL: &str = "UPDATE outbox SET last_error = $2, publishing_until = NULL, \
             next_attempt_at = $3 WHERE id = $1 AND published_at IS NULL";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(outbox_id).bind(error).bind(next_attempt_at).execute(pool).await?.rows_affected()
        });
        Ok(())
    }
}
