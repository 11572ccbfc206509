//! The consumer side of the contract: what an idempotent consumer writes,
//! always inside the caller's transaction so the claim commits (or rolls
//! back) together with the business effect.
//!
//! Versioning rule: `version` increases on every change to what an operator
//! acts on (status, outcome, provider reference, lease); counting a duplicate
//! delivery does not change it, so a busy key does not turn an operator's
//! confirmation into a conflict.

use idem_domain::{Claim, ClaimStatus, OutboxOrigin};

use crate::{
    StoreError, StoreResult,
    dialect::dispatch,
    rows::{ClaimRow, claim_columns},
    store::Tx,
    ts::Ts,
};

/// One delivery of a message to a consumer.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub consumer: &'a str,
    pub key: &'a str,
    /// A hash of the payload, to notice the same key arriving with different content.
    pub payload_hash: Option<&'a str>,
    pub at: Ts,
}

/// What claiming a key found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// The key was not claimed before: this delivery owns it (status `pending`).
    New(Claim),
    /// The key was already claimed; the claim after counting this delivery.
    Duplicate(Claim),
}

impl Claimed {
    pub fn claim(&self) -> &Claim {
        match self {
            Claimed::New(c) | Claimed::Duplicate(c) => c,
        }
    }
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

fn one_claim(row: Option<ClaimRow>, consumer: &str, key: &str) -> StoreResult<Claim> {
    row.ok_or_else(|| {
        StoreError::Contract(format!(
            "claim ({consumer}, {key}) vanished inside its transaction"
        ))
    })?
    .try_into()
}

impl Tx {
    /// Claims `delivery.key` for `delivery.consumer`: insert-if-absent under
    /// the primary key. Exactly one of any number of concurrent deliveries of
    /// one key gets [`Claimed::New`]; the others count as duplicates.
    pub async fn claim(&mut self, delivery: &Delivery<'_>) -> StoreResult<Claimed> {
        const INSERT: &str = concat!(
            "INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at, \
             last_delivery_at, delivery_count, duplicate_count, attempts, payload_hash, version) \
             VALUES ($1, $2, 'pending', $3, $3, $3, 1, 0, 0, $4, 1) \
             ON CONFLICT (consumer, idempotency_key) DO NOTHING RETURNING ",
            claim_columns!()
        );
        const COUNT_DUPLICATE: &str = concat!(
            "UPDATE claims SET delivery_count = delivery_count + 1, \
             duplicate_count = duplicate_count + 1, \
             last_delivery_at = CASE WHEN $3 > last_delivery_at THEN $3 ELSE last_delivery_at END, \
             last_payload_hash = CASE WHEN $4 IS NOT NULL AND payload_hash IS NOT NULL \
                                      AND $4 <> payload_hash THEN $4 ELSE last_payload_hash END \
             WHERE consumer = $1 AND idempotency_key = $2 RETURNING ",
            claim_columns!()
        );
        let d = delivery;
        let inserted: Option<ClaimRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(INSERT)
                .bind(d.consumer).bind(d.key).bind(d.at).bind(d.payload_hash)
                .fetch_optional(&mut **tx).await?
        });
        if let Some(row) = inserted {
            return Ok(Claimed::New(row.try_into()?));
        }
        let counted: Option<ClaimRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(COUNT_DUPLICATE)
                .bind(d.consumer).bind(d.key).bind(d.at).bind(d.payload_hash)
                .fetch_optional(&mut **tx).await?
        });
        Ok(Claimed::Duplicate(one_claim(counted, d.consumer, d.key)?))
    }

    /// Whether the key is claimed, without counting a delivery.
    pub async fn claim_exists(&mut self, consumer: &str, key: &str) -> StoreResult<bool> {
        const SQL: &str =
            "SELECT EXISTS (SELECT 1 FROM claims WHERE consumer = $1 AND idempotency_key = $2)";
        let exists: bool = dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(SQL).bind(consumer).bind(key).fetch_one(&mut **tx).await?
        });
        Ok(exists)
    }

    /// Takes the claim for one attempt at an external effect: `pending`,
    /// `attempts + 1`, leased until `until`. A later delivery that finds the
    /// lease expired without an outcome knows the attempt's fate is unknown.
    pub async fn lease(
        &mut self,
        consumer: &str,
        key: &str,
        until: Ts,
        at: Ts,
    ) -> StoreResult<Claim> {
        const LEASE: &str = concat!(
            "UPDATE claims SET status = 'pending', \
             status_at = CASE WHEN status <> 'pending' THEN $4 ELSE status_at END, \
             attempts = attempts + 1, lease_until = $3, version = version + 1 \
             WHERE consumer = $1 AND idempotency_key = $2 RETURNING ",
            claim_columns!()
        );
        let row: Option<ClaimRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(LEASE).bind(consumer).bind(key).bind(until).bind(at)
                .fetch_optional(&mut **tx).await?
        });
        one_claim(row, consumer, key)
    }

    /// Records how an attempt ended and releases the lease.
    pub async fn record(
        &mut self,
        consumer: &str,
        key: &str,
        outcome: Outcome<'_>,
        at: Ts,
    ) -> StoreResult<Claim> {
        const RECORD: &str = concat!(
            "UPDATE claims SET status = $3, \
             status_at = CASE WHEN status <> $3 THEN $4 ELSE status_at END, \
             outcome_at = CASE WHEN $3 = 'pending' THEN outcome_at ELSE $4 END, \
             provider_ref = COALESCE($5, provider_ref), \
             last_error = $6, lease_until = NULL, version = version + 1 \
             WHERE consumer = $1 AND idempotency_key = $2 RETURNING ",
            claim_columns!()
        );
        let (provider_ref, error) = match outcome {
            Outcome::Sent { provider_ref } => (provider_ref, None),
            Outcome::Retryable { error }
            | Outcome::Permanent { error }
            | Outcome::Unknown { error } => (None, Some(error)),
        };
        let status = outcome.status().as_str();
        let row: Option<ClaimRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(RECORD)
                .bind(consumer).bind(key).bind(status).bind(at).bind(provider_ref).bind(error)
                .fetch_optional(&mut **tx).await?
        });
        one_claim(row, consumer, key)
    }

    /// Writes an outbox row; returns its id.
    pub async fn enqueue(&mut self, row: &NewOutboxRow<'_>) -> StoreResult<i64> {
        const INSERT: &str = "INSERT INTO outbox (consumer, topic, idempotency_key, payload, \
             created_at, origin, dead_letter_id, audit_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id";
        let id: i64 = dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(INSERT)
                .bind(row.consumer).bind(row.topic).bind(row.key).bind(row.payload)
                .bind(row.at).bind(row.origin.as_str()).bind(row.dead_letter_id).bind(row.audit_id)
                .fetch_one(&mut **tx).await?
        });
        Ok(id)
    }

    /// Moves a message to the dead letters, keeping its key; returns the id.
    pub async fn dead_letter(&mut self, dl: &NewDeadLetter<'_>) -> StoreResult<i64> {
        const INSERT: &str = "INSERT INTO dead_letters (consumer, queue, idempotency_key, \
             message_id, payload, delivery_count, first_failure_at, dead_lettered_at, last_error, state) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'open') RETURNING id";
        let id: i64 = dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(INSERT)
                .bind(dl.consumer).bind(dl.queue).bind(dl.key).bind(dl.message_id)
                .bind(dl.payload).bind(dl.delivery_count).bind(dl.first_failure_at)
                .bind(dl.at).bind(dl.last_error)
                .fetch_one(&mut **tx).await?
        });
        Ok(id)
    }

    /// The oldest unpublished outbox rows, for a relay. On Postgres the rows
    /// are locked and rows locked by another relay are skipped, so relays on
    /// several replicas never publish one row twice.
    pub async fn claim_unpublished(
        &mut self,
        limit: i64,
    ) -> StoreResult<Vec<idem_domain::OutboxRow>> {
        use crate::rows::{OutboxDbRow, convert, outbox_columns};
        const SQLITE: &str = concat!(
            "SELECT ",
            outbox_columns!(),
            " FROM outbox WHERE published_at IS NULL \
             ORDER BY created_at, id LIMIT $1"
        );
        const POSTGRES: &str = concat!(
            "SELECT ",
            outbox_columns!(),
            " FROM outbox WHERE published_at IS NULL \
             ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED"
        );
        let sql = if self.inner.is_postgres() {
            POSTGRES
        } else {
            SQLITE
        };
        let rows: Vec<OutboxDbRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(sql).bind(limit).fetch_all(&mut **tx).await?
        });
        convert(rows)
    }

    /// Marks an outbox row published (`error: None`) or records a failed attempt.
    pub async fn mark_publish_attempt(
        &mut self,
        id: i64,
        error: Option<&str>,
        at: Ts,
    ) -> StoreResult<()> {
        const PUBLISHED: &str = "UPDATE outbox SET published_at = $2, attempts = attempts + 1, last_error = NULL WHERE id = $1";
        const FAILED: &str =
            "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1";
        dispatch!(&mut self.inner, tx => {
            match error {
                None => sqlx::query(PUBLISHED).bind(id).bind(at).execute(&mut **tx).await?,
                Some(error) => sqlx::query(FAILED).bind(id).bind(error).execute(&mut **tx).await?,
            };
        });
        Ok(())
    }
}
