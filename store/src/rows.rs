//! Row types: how a row of each table maps to Rust. They stay inside the
//! storage layer; callers receive the records of `idem_domain`.

use idem_domain::{Claim, ClaimStatus, DeadLetter, DeadLetterState, OutboxOrigin, OutboxRow};

use crate::{StoreError, ts::Ts};

pub(crate) fn parse<T: std::str::FromStr<Err = idem_domain::UnknownValue>>(
    value: &str,
) -> Result<T, StoreError> {
    value
        .parse()
        .map_err(|e: idem_domain::UnknownValue| StoreError::Contract(e.to_string()))
}

/// The column list every claim query selects, in [`ClaimRow`]'s order.
macro_rules! claim_columns {
    () => {
        "consumer, idempotency_key, status, status_at, first_delivery_at, last_delivery_at, \
         delivery_count, duplicate_count, attempts, provider_ref, last_error, outcome_at, \
         payload_hash, last_payload_hash, lease_until, version"
    };
}
pub(crate) use claim_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct ClaimRow {
    consumer: String,
    idempotency_key: String,
    status: String,
    status_at: Ts,
    first_delivery_at: Ts,
    last_delivery_at: Ts,
    delivery_count: i64,
    duplicate_count: i64,
    attempts: i64,
    provider_ref: Option<String>,
    last_error: Option<String>,
    outcome_at: Option<Ts>,
    payload_hash: Option<String>,
    last_payload_hash: Option<String>,
    lease_until: Option<Ts>,
    version: i64,
}

impl TryFrom<ClaimRow> for Claim {
    type Error = StoreError;
    fn try_from(row: ClaimRow) -> Result<Self, StoreError> {
        Ok(Claim {
            status: parse::<ClaimStatus>(&row.status)?,
            consumer: row.consumer,
            key: row.idempotency_key,
            status_at: row.status_at.0,
            first_delivery_at: row.first_delivery_at.0,
            last_delivery_at: row.last_delivery_at.0,
            delivery_count: row.delivery_count,
            duplicate_count: row.duplicate_count,
            attempts: row.attempts,
            provider_ref: row.provider_ref,
            last_error: row.last_error,
            outcome_at: row.outcome_at.map(|t| t.0),
            payload_hash: row.payload_hash,
            last_payload_hash: row.last_payload_hash,
            lease_until: row.lease_until.map(|t| t.0),
            version: row.version,
        })
    }
}

macro_rules! outbox_columns {
    () => {
        "id, consumer, topic, idempotency_key, payload, created_at, published_at, attempts, \
         last_error, origin, dead_letter_id, audit_id"
    };
}
pub(crate) use outbox_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct OutboxDbRow {
    id: i64,
    consumer: String,
    topic: String,
    idempotency_key: String,
    payload: String,
    created_at: Ts,
    published_at: Option<Ts>,
    attempts: i64,
    last_error: Option<String>,
    origin: String,
    dead_letter_id: Option<i64>,
    audit_id: Option<i64>,
}

impl TryFrom<OutboxDbRow> for OutboxRow {
    type Error = StoreError;
    fn try_from(row: OutboxDbRow) -> Result<Self, StoreError> {
        Ok(OutboxRow {
            origin: parse::<OutboxOrigin>(&row.origin)?,
            id: row.id,
            consumer: row.consumer,
            topic: row.topic,
            key: row.idempotency_key,
            payload: row.payload,
            created_at: row.created_at.0,
            published_at: row.published_at.map(|t| t.0),
            attempts: row.attempts,
            last_error: row.last_error,
            dead_letter_id: row.dead_letter_id,
            audit_id: row.audit_id,
        })
    }
}

macro_rules! dead_letter_columns {
    () => {
        "id, consumer, queue, idempotency_key, message_id, payload, delivery_count, \
         first_failure_at, dead_lettered_at, last_error, state, resolved_by, resolved_at, \
         replay_outbox_id, broker, death_exchange, death_routing_key, death_reason, death_count, \
         death_at"
    };
}
pub(crate) use dead_letter_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct DeadLetterRow {
    id: i64,
    consumer: String,
    queue: String,
    idempotency_key: String,
    message_id: String,
    payload: String,
    delivery_count: i64,
    first_failure_at: Ts,
    dead_lettered_at: Ts,
    last_error: Option<String>,
    state: String,
    resolved_by: Option<String>,
    resolved_at: Option<Ts>,
    replay_outbox_id: Option<i64>,
    broker: Option<String>,
    death_exchange: Option<String>,
    death_routing_key: Option<String>,
    death_reason: Option<String>,
    death_count: Option<i64>,
    death_at: Option<Ts>,
}

impl TryFrom<DeadLetterRow> for DeadLetter {
    type Error = StoreError;
    fn try_from(row: DeadLetterRow) -> Result<Self, StoreError> {
        Ok(DeadLetter {
            state: parse::<DeadLetterState>(&row.state)?,
            id: row.id,
            consumer: row.consumer,
            queue: row.queue,
            key: row.idempotency_key,
            message_id: row.message_id,
            payload: row.payload,
            delivery_count: row.delivery_count,
            first_failure_at: row.first_failure_at.0,
            dead_lettered_at: row.dead_lettered_at.0,
            last_error: row.last_error,
            resolved_by: row.resolved_by,
            resolved_at: row.resolved_at.map(|t| t.0),
            replay_outbox_id: row.replay_outbox_id,
            broker: row.broker.map(|broker| idem_domain::BrokerDeath {
                broker,
                exchange: row.death_exchange,
                routing_key: row.death_routing_key,
                reason: row.death_reason,
                count: row.death_count,
                at: row.death_at.map(|t| t.0),
            }),
        })
    }
}

/// Converts a batch of rows, failing on the first that breaks the contract.
pub(crate) fn convert<R, T>(rows: Vec<R>) -> Result<Vec<T>, StoreError>
where
    T: TryFrom<R, Error = StoreError>,
{
    rows.into_iter().map(T::try_from).collect()
}

macro_rules! audit_columns {
    () => {
        "id, action_id, at, actor, actor_role, action, consumer, idempotency_key, target, \
         state_before, state_after, reason, result, client_addr, recovery_seconds"
    };
}
pub(crate) use audit_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct AuditRow {
    id: i64,
    action_id: Option<String>,
    at: Ts,
    actor: String,
    actor_role: String,
    action: String,
    consumer: Option<String>,
    idempotency_key: Option<String>,
    target: Option<String>,
    state_before: Option<String>,
    state_after: Option<String>,
    reason: Option<String>,
    result: String,
    client_addr: Option<String>,
    recovery_seconds: Option<f64>,
}

impl TryFrom<AuditRow> for idem_domain::AuditEntry {
    type Error = StoreError;
    fn try_from(row: AuditRow) -> Result<Self, StoreError> {
        Ok(idem_domain::AuditEntry {
            id: row.id,
            action_id: row.action_id,
            at: row.at.0,
            actor: row.actor,
            actor_role: row.actor_role,
            action: parse(&row.action)?,
            consumer: row.consumer,
            key: row.idempotency_key,
            target: row.target,
            state_before: row
                .state_before
                .as_deref()
                .map(idem_domain::AuditState::parse),
            state_after: row
                .state_after
                .as_deref()
                .map(idem_domain::AuditState::parse),
            reason: row.reason,
            result: parse(&row.result)?,
            client_addr: row.client_addr,
            recovery_seconds: row.recovery_seconds,
        })
    }
}
