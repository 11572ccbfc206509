//! Reconciling with a provider: its own records of what it accepted, held
//! against the claims. This module says what an export looks like
//! (`export`: read a line at a time, never whole) and what each class of
//! difference means and allows.

mod export;

pub use export::{
    EXPORT_MAX_LINE_BYTES, EXPORT_MAX_RECORD_LINES, EXPORT_MAX_RECORDS, ExportReader,
    ProviderRecord, StatusWords,
};

use crate::{ReconcileClass, ResolveAs};

impl ReconcileClass {
    /// A few words for a heading.
    pub const fn title(self) -> &'static str {
        match self {
            Self::UnknownAccepted => "Unknown here, accepted there",
            Self::UnknownAbsent => "Unknown here, absent or failed there",
            Self::SentAbsent => "Sent here, absent there",
            Self::AcceptedUnclaimed => "Accepted there, not sent here",
            Self::SharedReference => "One reference on two keys",
            Self::FailedAccepted => "Failed here, accepted there",
        }
    }

    /// What the class means and what to do with it, in a sentence.
    pub const fn meaning(self) -> &'static str {
        match self {
            Self::UnknownAccepted => {
                "The provider acted: resolve these as sent, with the provider's reference."
            }
            Self::UnknownAbsent => {
                "The provider has no record of accepting these, though its export covers the call \
                 and the latency bound has passed: safe to mark failed and retry."
            }
            Self::SentAbsent => {
                "Recorded sent here, but the provider's export has no record of them: a possible \
                 loss. Ask the provider before acting."
            }
            Self::AcceptedUnclaimed => {
                "The provider accepted these, but no claim here says sent: a possible duplicate \
                 effect, or a call that did not come from this consumer."
            }
            Self::SharedReference => {
                "One provider reference stands for two different keys: two keys were one call, or \
                 a reference was reused."
            }
            Self::FailedAccepted => {
                "Marked failed here, yet the provider accepted them: the effect happened. Check \
                 before anyone retries."
            }
        }
    }

    /// How applying the class resolves its keys; `None` for a class that is
    /// only flagged for a person to look into.
    pub const fn resolves_as(self) -> Option<ResolveAs> {
        match self {
            Self::UnknownAccepted => Some(ResolveAs::Sent),
            Self::UnknownAbsent => Some(ResolveAs::FailedRetry),
            _ => None,
        }
    }
}

/// A kept reconciliation, as its page shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reconciliation {
    pub id: i64,
    pub consumer: String,
    pub actor: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub file_name: String,
    /// The export's SHA-256, in hex.
    pub file_sha256: String,
    pub file_bytes: i64,
    pub records: i64,
    pub bad_lines: i64,
    /// The first bad lines, `line N: why`.
    pub bad_sample: Vec<String>,
    /// The records' earliest and latest times.
    pub span_from: Option<chrono::DateTime<chrono::Utc>>,
    pub span_to: Option<chrono::DateTime<chrono::Utc>>,
    /// How long the provider may take to show a call in its export.
    pub latency_seconds: i64,
    /// The status words read besides the usual ones (`queued=accepted`).
    pub status_words: String,
    /// Every class, in [`ReconcileClass::ALL`]'s order (empty ones too).
    pub classes: Vec<ClassSummary>,
}

/// One class of a reconciliation: how many, what is left to apply, the
/// runs that applied it, and its first rows.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClassSummary {
    pub class: ReconcileClass,
    pub count: i64,
    /// Rows an apply would take now: not yet applied, not held, and (to
    /// resolve as sent) carrying a reference.
    pub to_apply: i64,
    /// The bulk resolves that applied rows of this class.
    pub applied_runs: Vec<i64>,
    pub sample: Vec<ReconcileRow>,
}

/// One row of a class: a claim, a provider's record, or both.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReconcileRow {
    pub seq: i64,
    /// The export's line; `None` for a claim the export has no record of.
    pub line: Option<i64>,
    /// The claim's key, else the record's.
    pub key: Option<String>,
    pub claim_status: Option<crate::ClaimStatus>,
    /// The claim's version when the export was read.
    pub version: Option<i64>,
    pub provider_ref: Option<String>,
    pub provider_status: Option<crate::ProviderStatus>,
    pub provider_at: Option<chrono::DateTime<chrono::Utc>>,
    pub note: Option<String>,
    pub applied_run: Option<i64>,
    /// Shown, but never taken by an apply: the export cannot prove it (the
    /// note says why).
    pub held: bool,
}
