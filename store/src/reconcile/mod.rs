//! Reconciliations: a provider's export held against one consumer's
//! claims (`matcher`), kept with what each class holds (`keep`) and read
//! back (`read`). Nothing
//! here changes a claim: a class is applied as a bulk resolve
//! (`actions::redrive::reconciled`), bound to the rows kept here.
//!
//! Cost: each batch of records is looked up by the claims' primary key and
//! the provider-reference index; the claims the export should hold and
//! does not are two ranges over partial indexes (`claims_unknown_since`,
//! and `claims_by_outcome` with `claims_sent_without_ref` for sent claims)
//! bounded by the export's time span — never a scan of `claims`.

mod keep;
mod matcher;
mod read;

pub use keep::{NewReconciliation, Reconciled};
pub use matcher::Reconciler;

/// How many bad lines a reconciliation keeps to show (the rest are counted).
pub const BAD_LINES_KEPT: usize = 20;

/// How many records are looked up together.
pub const LOOKUP_BATCH: usize = 500;
