//! The rows of the data contract as pages see them.
//!
//! Keys and consumer names are kept as the strings the database holds, not as
//! validated newtypes: a consumer that once wrote an odd key must not make a
//! whole list fail to render. Validation applies to what people type.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{ClaimStatus, DeadLetterState, OutboxOrigin};

/// One (consumer, idempotency key) claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub consumer: String,
    pub key: String,
    pub status: ClaimStatus,
    /// When `status` last changed (for `unknown`: unknown since).
    pub status_at: DateTime<Utc>,
    pub first_delivery_at: DateTime<Utc>,
    pub last_delivery_at: DateTime<Utc>,
    pub delivery_count: i64,
    pub duplicate_count: i64,
    pub attempts: i64,
    pub provider_ref: Option<String>,
    pub last_error: Option<String>,
    pub outcome_at: Option<DateTime<Utc>>,
    pub payload_hash: Option<String>,
    /// The payload hash of the latest delivery, when it differs from the first.
    pub last_payload_hash: Option<String>,
    /// Set while a worker holds the claim for an external call.
    pub lease_until: Option<DateTime<Utc>>,
    pub version: i64,
}

/// One intent to publish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxRow {
    pub id: i64,
    pub consumer: String,
    pub topic: String,
    pub key: String,
    pub payload: String,
    pub created_at: DateTime<Utc>,
    pub published_at: Option<DateTime<Utc>>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub origin: OutboxOrigin,
    pub dead_letter_id: Option<i64>,
    pub audit_id: Option<i64>,
}

/// One message given up on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub id: i64,
    pub consumer: String,
    pub queue: String,
    pub key: String,
    pub message_id: String,
    pub payload: String,
    pub delivery_count: i64,
    pub first_failure_at: DateTime<Utc>,
    pub dead_lettered_at: DateTime<Utc>,
    pub last_error: Option<String>,
    pub state: DeadLetterState,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub replay_outbox_id: Option<i64>,
}

/// One page of a list, and the opaque cursor of the next one (`None` on the
/// last page). Lists are keyset-paginated: there are no page numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    pub action_id: Option<String>,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub actor_role: String,
    pub action: String,
    pub consumer: Option<String>,
    pub key: Option<String>,
    pub target: Option<String>,
    pub state_before: Option<String>,
    pub state_after: Option<String>,
    pub reason: Option<String>,
    pub result: String,
    pub client_addr: Option<String>,
    /// Seconds from the item becoming actionable to this action.
    pub recovery_seconds: Option<f64>,
}
