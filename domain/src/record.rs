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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

impl Claim {
    /// A worker took the claim for an external call and its lease ran out
    /// with no outcome recorded (the `abandoned-lease` check): nobody knows
    /// whether the provider acted, as for an unknown outcome.
    pub fn is_abandoned_lease(&self, as_of: DateTime<Utc>) -> bool {
        self.status == ClaimStatus::Pending && self.lease_until.is_some_and(|until| until < as_of)
    }

    /// Whether an operator may resolve the claim's outcome at `as_of`: it is
    /// unknown, or its lease was abandoned.
    pub fn is_resolvable(&self, as_of: DateTime<Utc>) -> bool {
        self.status == ClaimStatus::Unknown || self.is_abandoned_lease(as_of)
    }

    /// Since when the outcome has been unknown: the unknown status's start,
    /// or an abandoned lease's expiry (what the resolution objective counts from).
    pub fn unknown_since(&self) -> DateTime<Utc> {
        match (self.status, self.lease_until) {
            (ClaimStatus::Pending, Some(until)) => until,
            _ => self.status_at,
        }
    }
}

/// One intent to publish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// For a message Idem moved out of a broker's dead-letter queue: what
    /// the broker said about its death.
    pub broker: Option<BrokerDeath>,
}

/// What a broker recorded about a message it dead-lettered (RabbitMQ's
/// `x-death` header): where the message was first published, why it died,
/// how often, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BrokerDeath {
    /// The broker's kind: `rabbitmq`.
    pub broker: String,
    pub exchange: Option<String>,
    pub routing_key: Option<String>,
    /// `rejected`, `expired`, `maxlen`, `delivery_limit`.
    pub reason: Option<String>,
    pub count: Option<i64>,
    pub at: Option<DateTime<Utc>>,
}

/// How Idem's publication of a broker dead letter's replay stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayPublication {
    /// When the broker confirmed it; `None` while it has not.
    pub published_at: Option<DateTime<Utc>>,
    /// Attempts to publish so far.
    pub attempts: i64,
    /// Why the last attempt was not confirmed.
    pub last_error: Option<String>,
    /// When Idem tries again.
    pub next_attempt_at: Option<DateTime<Utc>>,
}

impl BrokerDeath {
    /// A broker's reason for a death in words (`None` for one Idem does not
    /// know, which is shown as the broker wrote it).
    pub fn reason_in_words(reason: &str) -> Option<&'static str> {
        match reason {
            "rejected" => Some("rejected by a consumer, not to be delivered again"),
            "expired" => Some("its time to live ran out before a consumer took it"),
            "maxlen" => Some("its queue was full"),
            "delivery_limit" => Some("delivered more times than its queue allows"),
            _ => None,
        }
    }
}

/// One page of a list, and the opaque cursor of the next one (`None` on the
/// last page). Lists are keyset-paginated: there are no page numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: i64,
    pub action_id: Option<String>,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub actor_role: String,
    pub action: crate::AuditAction,
    pub consumer: Option<String>,
    pub key: Option<String>,
    pub target: Option<String>,
    pub state_before: Option<crate::AuditState>,
    pub state_after: Option<crate::AuditState>,
    pub reason: Option<String>,
    pub result: crate::AuditResult,
    pub client_addr: Option<String>,
    /// Seconds from the item becoming actionable to this action.
    pub recovery_seconds: Option<f64>,
}

/// What stands for the name typed into a sign-in nobody completed, for a
/// reader who may not see it.
pub const TYPED_NAME_WITHHELD: &str = "(a name typed at sign-in)";

impl AuditEntry {
    /// This entry as a person with `role` may read it, wherever it is shown.
    /// The client addresses the audit log keeps, and the names typed into
    /// sign-ins that failed (sometimes a password typed into the wrong
    /// field), are for operators and admins, the readers of `/audit`; a
    /// viewer reading a key's history gets the entry without them.
    pub fn as_seen_by(mut self, role: crate::Role) -> Self {
        if !role.includes(crate::Role::Operator) {
            self.client_addr = None;
            if self.actor_role == "anonymous" {
                self.actor = TYPED_NAME_WITHHELD.to_owned();
            }
        }
        self
    }
}

#[cfg(test)]
mod audit_rule_tests {
    use super::*;
    use crate::Role;

    fn failed_sign_in() -> AuditEntry {
        AuditEntry {
            id: 1,
            action_id: None,
            at: DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            actor: "correct horse battery staple".into(),
            actor_role: "anonymous".into(),
            action: crate::AuditAction::Login,
            consumer: None,
            key: None,
            target: None,
            state_before: None,
            state_after: None,
            reason: Some("1 failed sign-in".into()),
            result: crate::AuditResult::Failed,
            client_addr: Some("203.0.113.77".into()),
            recovery_seconds: None,
        }
    }

    #[test]
    fn a_viewer_reads_no_client_address_and_no_name_typed_at_sign_in() {
        let seen = failed_sign_in().as_seen_by(Role::Viewer);
        assert_eq!(seen.client_addr, None);
        assert_eq!(seen.actor, TYPED_NAME_WITHHELD);
        assert_eq!(
            failed_sign_in().as_seen_by(Role::Operator),
            failed_sign_in()
        );
        let mut action = failed_sign_in();
        action.actor_role = "operator".into();
        action.actor = "olga".into();
        assert_eq!(action.clone().as_seen_by(Role::Viewer).actor, "olga");
    }
}
