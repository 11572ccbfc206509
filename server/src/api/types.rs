//! What the API answers with: the domain's records (their schemas derive
//! from the types), in envelopes of the API's own. An envelope says when
//! it was read (`as_of`) and, for a list, the opaque cursor of the next
//! page (`next`, none on the last).

use chrono::{DateTime, Utc};
use idem_domain::{AuditEntry, CappedCount, Claim, DeadLetter, OutboxRow};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Everything Idem holds about one key of one consumer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyRecord {
    pub as_of: DateTime<Utc>,
    pub consumer: String,
    pub key: String,
    /// The claim, if one is kept (none after retention, or before the first delivery).
    pub claim: Option<Claim>,
    pub outbox: Vec<OutboxRow>,
    pub dead_letters: Vec<DeadLetter>,
    /// What people and tokens did to it, newest first.
    pub audit: Vec<AuditEntry>,
}

/// One dead letter and the claim of its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterRecord {
    pub as_of: DateTime<Utc>,
    pub dead_letter: DeadLetter,
    pub claim: Option<Claim>,
}

/// A list's envelope, one per item type (the document names each).
macro_rules! list {
    ($(#[$meta:meta])* $name:ident of $item:ty) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
        pub struct $name {
            pub as_of: DateTime<Utc>,
            pub items: Vec<$item>,
            /// The cursor of the next page: send it back as `cursor`.
            pub next: Option<String>,
            /// How many match, counted to a cap (first page of a filtered list).
            pub total: Option<CappedCount>,
        }
    };
}

list!(
    /// Claims: unknown outcomes, or a search's matches.
    ClaimList of Claim
);
/// A key search: what the `/keys` page finds for the same query — keys
/// equal to or starting with `q` (exact matches first), and on the first
/// page the claims whose provider reference is `q` and the dead letters
/// whose message id is `q`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeySearch {
    pub as_of: DateTime<Utc>,
    pub items: Vec<Claim>,
    /// The cursor of the next page: send it back as `cursor`.
    pub next: Option<String>,
    /// How many keys match, counted to a cap (first page of a filtered search).
    pub total: Option<CappedCount>,
    /// Claims whose provider reference is `q`, matched whole.
    pub by_provider_ref: Vec<Claim>,
    /// Dead letters whose message id is `q`, matched whole.
    pub by_message_id: Vec<DeadLetter>,
}

/// Dead letters, oldest first, and the redrive this list offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterList {
    pub as_of: DateTime<Utc>,
    pub items: Vec<DeadLetter>,
    /// The cursor of the next page: send it back as `cursor`.
    pub next: Option<String>,
    /// How many match, counted to a cap.
    pub total: Option<CappedCount>,
    /// For an operator, on open letters: what a redrive of this filter
    /// would take now (`POST /api/v1/redrives` with its `offer`).
    pub redrive: Option<RedriveOffer>,
}

/// What a redrive of a list's filter takes: exactly these, or nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RedriveOffer {
    /// How many letters (the oldest 500 at most that match).
    pub count: i64,
    /// Sent back to start the redrive of exactly these.
    pub offer: String,
    /// When it takes fewer consumers than the list shows (the token reads
    /// more teams than it operates): the consumers it takes.
    pub only_of: Option<Vec<String>>,
}
list!(
    /// Outbox rows not yet published, oldest first.
    OutboxList of OutboxRow
);
list!(
    /// Audit entries, newest first.
    AuditList of AuditEntry
);
/// One check's findings, and the bulk discard it offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FindingList {
    pub as_of: DateTime<Utc>,
    pub items: Vec<Finding>,
    /// The cursor of the next page: send it back as `cursor`.
    pub next: Option<String>,
    /// How many it finds, counted to a cap.
    pub total: Option<CappedCount>,
    /// For an operator, on `dead-letter-already-sent`: what a bulk discard
    /// would take now (`POST /api/v1/bulk/discard` with its `offer`).
    pub discard: Option<RedriveOffer>,
}

/// One finding of a check: a key it points at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Finding {
    pub consumer: String,
    pub key: String,
    /// The time the check orders its findings by.
    pub at: DateTime<Utc>,
    pub dead_letter_id: Option<i64>,
    /// For a finding about a claim: its version (what a bulk resolve binds
    /// the key to).
    pub version: Option<i64>,
    pub provider_ref: Option<String>,
    /// For payload drift: the first delivery's hash and the differing one.
    pub payload_hashes: Option<Vec<String>>,
    /// For an abandoned lease: when it expired.
    pub lease_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

impl From<idem_domain::Finding> for Finding {
    fn from(f: idem_domain::Finding) -> Self {
        Finding {
            consumer: f.consumer,
            key: f.key,
            at: f.at,
            dead_letter_id: f.dead_letter_id,
            version: f.version,
            provider_ref: f.provider_ref,
            payload_hashes: f.payload_hashes.map(|(a, b)| vec![a, b]),
            lease_until: f.lease_until,
            last_error: f.last_error,
        }
    }
}

/// How many findings one check has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CheckCount {
    /// Its name in addresses: `dead-letter-already-sent`, …
    pub check: String,
    pub title: String,
    pub count: CappedCount,
}

/// Every check's count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CheckCounts {
    pub as_of: DateTime<Utc>,
    pub checks: Vec<CheckCount>,
}

/// One objective as it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SloReading {
    pub name: String,
    pub description: String,
    /// What it counts: `every consumer`, a team, or consumers by name.
    pub scope: String,
    /// The consumer it is evaluated for, when each has its own.
    pub consumer: Option<String>,
    /// The objective, a fraction (`0.999`).
    pub objective: f64,
    /// The indicator over the window, a fraction; none without events.
    pub sli: Option<f64>,
    /// The error budget left, a fraction of the window's budget.
    pub budget_remaining: Option<f64>,
    /// `page`, `ticket`, `budget spent`, `ok`, `too few events` or `no data`.
    pub alert: String,
}

/// The objectives the caller may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SloReadings {
    pub as_of: DateTime<Utc>,
    pub slos: Vec<SloReading>,
}
