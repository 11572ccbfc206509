//! Reconciliations: a provider's export held against one consumer's
//! claims (`matcher`), kept with what each class holds (`keep`) and read
//! back (`read`). Nothing
//! here changes a claim: a class is applied as a bulk resolve
//! (`actions::redrive::reconciled`), bound to the rows kept here.
//!
//! A row the export cannot prove is kept *held*: shown, never taken by an
//! apply (an unknown claim with no record while some lines could not be
//! read, or some records name no key and match no claim; a failure that
//! may be of an earlier attempt).
//!
//! Cost: each batch of records is looked up by the claims' primary key and
//! the provider-reference index; the claims the export should hold and
//! does not are three ranges over indexes (`claims_unknown_since`,
//! and `claims_by_outcome` with `claims_sent_without_ref` for sent claims)
//! bounded by the export's time span — never a scan of `claims`.

mod keep;
mod matcher;
mod read;

pub use keep::{NewReconciliation, Reconciled};
pub use matcher::Reconciler;

/// How many bad lines a reconciliation keeps to show (the rest are counted).
pub const BAD_LINES_KEPT: usize = 20;

/// The most rows one reconciliation keeps: more differences than this
/// mean the wrong export or the wrong consumer (or one to reconcile in
/// parts), and nothing is kept. Keeping them takes about 0.2 ms a row on
/// Postgres, so this many fit well within the request timeout.
pub const ROWS_KEPT_MAX: usize = 20_000;

/// How many records are looked up together.
pub const LOOKUP_BATCH: usize = 500;
