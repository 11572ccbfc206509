//! Idem's vocabulary, shared by the server and the browser build.
//!
//! Everything here is plain data and validation: no I/O, no database, no
//! framework. A value of a type from this crate has already been checked, so
//! code that receives an [`IdempotencyKey`] never re-validates it.

#[macro_use]
mod status;
pub mod action;
mod audit;
mod bulk;
mod catalogue;
mod check;
mod count;
mod histogram;
mod ids;
mod key;
mod metric;
mod read_only;
mod reconcile;
mod record;
mod redrive;
mod retention;
mod rights;
pub mod sign_in;
pub mod slo;
pub mod story;
mod zone;

pub use audit::{AuditAction, AuditResult, AuditState, ClaimState};
pub use bulk::{BadLine, BulkKey, check_keys, parse_references};
pub use catalogue::{Catalogue, CatalogueEntry, ProviderContract, check_team};
pub use check::{Check, Finding};
pub use count::CappedCount;
pub use histogram::{Histogram, le_bound, le_label};
pub use ids::{BadId, DeadLetterId, ReconciliationId, RunId};
pub use key::{
    AccountName, BadTokenName, ConsumerName, IdempotencyKey, KeyError, TokenName, decode_segment,
    encode_segment, is_invisible_or_bidi,
};
pub use metric::{FIFO_DEDUPE_WINDOW_SECONDS, Metric, MetricKind};
pub use read_only::ReadOnlyConsumers;
pub use reconcile::{
    ClassSummary, EXPORT_MAX_LINE_BYTES, EXPORT_MAX_RECORD_LINES, EXPORT_MAX_RECORDS, ExportReader,
    ProviderRecord, ReconcileRow, Reconciliation, StatusWords,
};
pub use record::{
    AuditEntry, BrokerDeath, Claim, DeadLetter, OutboxRow, Page, ReplayPublication,
    TYPED_NAME_WITHHELD,
};
pub use redrive::{BadOffer, REDRIVE_MAX, Redrive, RedriveItem, RedriveOffer};
pub use retention::ClaimRetention;
pub use rights::{OtherTeam, Rights, Within};
pub use status::{
    AccountOrigin, ClaimStatus, DeadLetterState, ItemOutcome, OutboxOrigin, ProviderStatus,
    ReconcileClass, RedriveState, ResolveAs, Role, RunKind, UnknownValue,
};
pub use zone::{ZoneInfo, ZoneSpan};
