//! Server functions and the types that cross the wire.
//!
//! Reads are `GET`s under `/api/read` (and `/api/public`, `/api/audit`): a
//! read has no side effect, so a cached or repeated read is harmless. The
//! operator actions are `POST`s under `/api/act` (see `actions`). Every
//! function validates its input on the server and answers with
//! [`AppError`](crate::error::AppError).
//!
//! Each module keeps its server-only code in a `#[cfg(feature = "ssr")]`
//! `ssr` module (the charts' also in their server-only files); the server
//! functions stay at module level and call into it.

mod actions;
mod audit;
mod bulk;
pub mod charts;
mod checks;
mod consumers;
mod keys;
mod lists;
pub mod overview;
mod reconcile;
mod redrives;
mod slo;
mod tokens;

use idem_domain::CappedCount;

pub use crate::console::{ConsoleInfo, LOGIN_NOTE_COOKIE, LoginInfo, LoginNote};
pub use actions::{
    DiscardDeadLetter, ReplayDeadLetter, ResolveUnknown, discard_dead_letter, get_action_answer,
    replay_dead_letter, resolve_unknown,
};
pub use audit::{AUDIT_ACTIONS, AuditLog, AuditQuery, list_audit};
pub use bulk::{StartBulkDiscard, StartBulkResolve, start_bulk_discard, start_bulk_resolve};
pub use charts::{
    Chart, ChartLink, ChartSet, DEFAULT_RANGE, MAX_SPAN_DAYS, RANGES, get_charts, get_slo_charts,
};
#[cfg(feature = "ssr")]
pub use checks::load_check_counts;
pub use checks::{BulkForms, CheckCount, Checks, ResolveForm, get_checks};
pub use consumers::{
    ConsumerDetail, ConsumerSort, ConsumerSummary, ConsumerTable, get_consumer, get_consumers,
};
pub use keys::{
    KeyLookup, KeyQuery, KeyStory, SearchResults, get_key_story, lookup_key, search_keys,
};
pub use lists::{
    DeadLetterDetail, DeadLetterList, ListPage, RedriveForm, UnknownList, get_dead_letter,
    list_dead_letters, list_outbox, list_unknown,
};
#[cfg(feature = "ssr")]
pub use overview::load_overview;
pub use overview::{LastHour, Overview, get_console_info, get_login_info, get_overview};
pub use reconcile::{
    ApplyReconciliation, CLASS_SAMPLE, DEMO_PROVIDER_LOG_PATH, RECONCILE_UPLOAD_PATH,
    ReconcileHome, ReconciliationDetail, apply_reconciliation, get_reconcile_home,
    get_reconciliation,
};
pub use redrives::{
    RedriveDetail, StartRedrive, StopRedrive, get_redrive, start_redrive, stop_redrive,
};
#[cfg(feature = "ssr")]
pub use slo::load_slo_board;
#[cfg(feature = "ssr")]
pub use slo::ssr::evaluate as evaluate_slos;
pub use slo::{SloBoard, blind_spots as slo_blind_spots, get_slo, get_slos};
pub use tokens::{RevokeToken, TokenList, TokenRow, list_tokens, revoke_token};

/// Server-only code shared by the api modules.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use chrono::{DateTime, NaiveDateTime, Utc};

    use idem_domain::{
        ConsumerName,
        slo::{Indicator, SloSet},
    };

    use crate::error::AppError;

    /// How soon the SLOs in force want an unknown outcome resolved, in
    /// seconds: the objective of the first unknown-outcome SLO in `slos`.
    /// Only where none is configured (an SLO file without one) is the
    /// built-in defaults' objective used instead.
    pub fn unknown_objective_seconds(slos: &SloSet) -> f64 {
        let within = |set: &SloSet| {
            set.slos.iter().find_map(|slo| match slo.sli {
                Indicator::UnknownResolved { within_seconds } => Some(within_seconds),
                _ => None,
            })
        };
        within(slos)
            .or_else(|| within(&SloSet::default()))
            .expect("the built-in SLOs include an unknown-outcome one")
    }

    /// A consumer filter from the address: none when empty, else a valid
    /// consumer name (400 otherwise).
    pub fn consumer_filter(text: Option<&str>) -> Result<Option<ConsumerName>, AppError> {
        match text.filter(|c| !c.is_empty()) {
            Some(name) => Ok(Some(ConsumerName::parse(name)?)),
            None => Ok(None),
        }
    }

    /// A list's consumer filter, and the consumers the person may read:
    /// the store narrows the one to the other, so another team's consumer
    /// lists exactly what a consumer nobody has does — nothing.
    pub async fn scoped_consumer(
        text: Option<&str>,
    ) -> Result<(Option<ConsumerName>, idem_domain::Within), AppError> {
        let viewer = idem_domain::Role::Viewer;
        Ok((consumer_filter(text)?, crate::serving::within(viewer)?))
    }

    /// An instant in the address: RFC 3339, or `YYYY-MM-DDTHH:MM` in UTC
    /// (what a `datetime-local` field sends).
    pub fn instant(text: &str) -> Result<DateTime<Utc>, AppError> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.to_utc())
            .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M").map(|t| t.and_utc()))
            .or_else(|_| {
                NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%MZ").map(|t| t.and_utc())
            })
            .map_err(|_| {
                AppError::BadRequest(format!(
                    "“{text}” is not a time: write it as 2026-11-30T14:00Z."
                ))
            })
    }
}

/// How far the dashboard counts before it says "10,000+".
pub const COUNT_CAP: u64 = CappedCount::DEFAULT_CAP;

/// How many rows the overview's "needs attention" lists show.
pub const ATTENTION_ROWS: u32 = 10;

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use idem_domain::slo::{Indicator, SloSet};

    use super::ssr::{consumer_filter, unknown_objective_seconds};

    #[test]
    fn an_empty_consumer_filter_is_none_and_a_bad_one_is_refused() {
        assert_eq!(consumer_filter(None).unwrap(), None);
        assert_eq!(consumer_filter(Some("")).unwrap(), None);
        assert_eq!(
            consumer_filter(Some("orders")).unwrap().unwrap().as_str(),
            "orders"
        );
        assert!(consumer_filter(Some("bad\u{0}name")).is_err());
    }

    #[test]
    fn the_unknown_outcome_objective_comes_from_the_slos_in_force() {
        let defaults = SloSet::default();
        assert_eq!(unknown_objective_seconds(&defaults), 15.0 * 60.0);
        let mut configured = defaults.clone();
        for slo in &mut configured.slos {
            if let Indicator::UnknownResolved { within_seconds } = &mut slo.sli {
                *within_seconds = 300.0;
            }
        }
        assert_eq!(unknown_objective_seconds(&configured), 300.0);
        configured
            .slos
            .retain(|slo| !matches!(slo.sli, Indicator::UnknownResolved { .. }));
        assert_eq!(
            unknown_objective_seconds(&configured),
            15.0 * 60.0,
            "none configured: the built-in defaults' objective"
        );
    }
}
