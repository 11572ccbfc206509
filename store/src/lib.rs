//! Idem's storage layer: the data contract's migrations and every query Idem
//! runs, over SQLite (the embedded default) and Postgres (production).
//!
//! One implementation serves both backends: [`Store`] holds either pool, and
//! each query is written once and expanded per backend (see `dialect`).
//! Callers never see `sqlx` types; they get `idem_domain` records and
//! [`StoreError`].

mod actions;
mod adapter_counters;
mod audit;
mod brokers;
#[cfg(feature = "bulk")]
mod bulk;
mod checks;
mod consumer;
mod cursor;
mod dialect;
mod error;
mod facets;
mod fingerprints;
mod idempotency;
mod lease;
mod meta;
mod metrics;
mod reads;
mod reconcile;
mod refusals;
mod rollup;
mod rows;
mod search;
mod sign_in;
mod sql;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod tokens;
mod ts;
mod users;
mod write_backs;

pub use actions::{
    Actor, BulkResolveRequest, DiscardRequest, LetterRun, REDRIVE_MAX, ReconciledResolve,
    RedriveRequest, RedriveStart, RedriveStep, ReplayRequest, ResolveRequest, ViaToken,
};
pub use audit::{AuditFilter, NewAuditEntry};
pub use brokers::{BrokerReplay, NewBrokerDeadLetter, PUBLISH_LEASE};
pub use checks::{CheckLimits, SHARED_REFS_WATERMARK, SharedRefSweep};
pub use consumer::{Claimed, Delivery, NewDeadLetter, NewOutboxRow, Outcome};
pub use cursor::PageRequest;
pub use error::{StoreError, StoreResult};
pub use facets::{
    Actions, Audit, Brokers, Checks, Claims, Lists, Metrics, People, Reconcile, Runs, System,
    Tokens,
};
pub use fingerprints::{FINGERPRINT_KEEP_DAYS, LOG_FINGERPRINT_SECRET};
pub use idempotency::{Begun, IDEMPOTENCY_KEEP};
pub use lease::BACKGROUND_LEASE;
pub use meta::DEMO_DATA;
pub use metrics::MetricSample;
pub use reads::{
    DeadLetterFilter, KEY_PAGE_ROWS, KEY_PAGE_SHARED_REFS, KeyRecords, OpenByConsumer,
    OutboxFilter, OverviewRecords, Window,
};
pub use reconcile::{
    BAD_LINES_KEPT, NewReconciliation, ROWS_KEPT_MAX as RECONCILIATION_ROWS_MAX, Reconciled,
    Reconciler,
};
pub use refusals::{REFUSAL_WINDOW, Refusal};
pub use rollup::{ROLLUP_SETTLE, ROLLUP_WATERMARK, Recovery};
pub use search::{ClaimSearch, SEARCH_CANDIDATES, SearchOrder, SearchResult};
pub use sign_in::{SignInResult, SignInSubject};
pub use store::{DEFAULT_DATABASE_URL, HealthProbe, Store, StoreConfig, Tx};
#[cfg(feature = "testing")]
pub use testing::MetricRow;
pub use tokens::{LiveToken, NewToken, TOKEN_USE_RESOLUTION_SECONDS, TokenCreated, TokenRecord};
pub use ts::Ts;
pub use users::{PasswordHash, UserRecord};

/// Entry points for the fuzz targets in `fuzz/` (compiled only under
/// cargo-fuzz, which sets `--cfg fuzzing`).
#[cfg(fuzzing)]
pub mod fuzzing {
    use crate::{StoreError, cursor};

    /// Decodes `text` as a cursor of the unknown-outcomes list; anything but
    /// a position or `BadCursor` panics, and a position must re-encode to a
    /// cursor that decodes to the same position.
    pub fn check_cursor(text: &str) {
        type Position = (i64, String, String);
        match cursor::decode::<Position>("unknown", text) {
            Ok(position) => {
                let again: Position =
                    cursor::decode("unknown", &cursor::encode("unknown", &position))
                        .expect("a cursor Idem issued decodes");
                assert_eq!(again, position);
            }
            Err(StoreError::BadCursor) => {}
            Err(other) => panic!("a cursor gave {other:?}"),
        }
    }
}
