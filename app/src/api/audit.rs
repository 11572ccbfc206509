//! The audit log (`/audit`): every operator action, sign-in, sign-out and
//! refusal, newest first, filtered by actor, action and key.

use idem_domain::{AuditEntry, Page};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// The filters of `/audit`, as typed (empty: any; a filter left out of a
/// call is empty too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditQuery {
    pub actor: String,
    pub action: String,
    /// An idempotency key, exactly, under any consumer.
    pub key: String,
    /// Only entries from `from` and before `to` (`2026-11-30T14:00Z`).
    pub from: String,
    pub to: String,
    /// `1`: only recoveries (replays and resolutions, with the time they took).
    pub recoveries: String,
    pub cursor: String,
}

/// One page of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditLog {
    pub clock: Clock,
    pub page: Page<AuditEntry>,
}

/// The actions Idem records, offered by the page's action filter (the
/// filter takes any text; these are the ones that match something).
pub const AUDIT_ACTIONS: &[&str] = &[
    "replay",
    "discard",
    "resolve:sent",
    "resolve:failed-retry",
    "resolve:failed",
    "redrive",
    "bulk-discard",
    "bulk-resolve",
    "login",
    "logout",
    "denied",
    "user created by identity proxy",
    "role changed by identity proxy",
];

/// The audit log's server-only code: checking the filters as typed.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use crate::error::AppError;

    /// The longest actor or action a filter accepts (longer text was never
    /// recorded: usernames and action names are short).
    const MAX_FILTER_BYTES: usize = 256;

    /// A typed instant: empty for none.
    pub fn instant_filter(text: &str) -> Result<Option<idem_store::Ts>, AppError> {
        match text.trim() {
            "" => Ok(None),
            text => Ok(Some(crate::api::ssr::instant(text)?.into())),
        }
    }

    /// A typed actor or action: empty for any, else matched exactly.
    pub fn text_filter(text: String, what: &str) -> Result<Option<String>, AppError> {
        if text.is_empty() {
            return Ok(None);
        }
        if text.len() > MAX_FILTER_BYTES {
            return Err(AppError::BadRequest(format!(
                "The {what} is {} bytes long; no {what} is longer than {MAX_FILTER_BYTES}.",
                text.len()
            )));
        }
        if text.chars().any(char::is_control) {
            return Err(AppError::BadRequest(format!(
                "The {what} contains a control character."
            )));
        }
        Ok(Some(text))
    }
}

/// The audit log, newest first, keyset-paginated; each filter that is set
/// must match exactly. Operators and admins only (its `/api/audit` prefix,
/// and again here): it holds client addresses and the names typed into
/// failed sign-ins (sometimes a password typed into the wrong field), which
/// a viewer has no need to read.
#[server(prefix = "/api/audit", input = server_fn::codec::GetUrl)]
pub async fn list_audit(query: AuditQuery) -> Result<AuditLog, AppError> {
    use idem_domain::IdempotencyKey;
    use idem_store::{AuditFilter, PageRequest};

    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Operator)?;
        let filter = AuditFilter {
            actor: ssr::text_filter(query.actor, "actor")?,
            action: ssr::text_filter(query.action, "action")?
                .map(|action| action.parse::<idem_domain::AuditAction>())
                .transpose()
                .map_err(|e| AppError::BadRequest(e.to_string()))?,
            key: match query.key.as_str() {
                "" => None,
                key => Some(IdempotencyKey::parse(key)?.as_str().to_owned()),
            },
            from: ssr::instant_filter(&query.from)?,
            to: ssr::instant_filter(&query.to)?,
            recoveries: !query.recoveries.is_empty(),
            // Rights limited to teams read their consumers' entries only.
            within: crate::serving::within(idem_domain::Role::Operator)?,
        };
        let cursor = Some(query.cursor).filter(|c| !c.is_empty());
        // From the primary, like every write to it: a replica's lag would
        // hide the action someone just took.
        let page = crate::serving::state()?
            .store
            .audit()
            .audit_log(
                &filter,
                &PageRequest::new(PageRequest::DEFAULT_LIMIT, cursor),
            )
            .await?;
        Ok(AuditLog {
            clock: crate::serving::clock(chrono::Utc::now()),
            page,
        })
    })
    .await
}
