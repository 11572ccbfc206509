//! The audit log's vocabulary: what was done ([`AuditAction`]), how it
//! ended ([`AuditResult`]) and the states before and after
//! ([`AuditState`]). Each is written and read through one mapping, its text
//! in `audit_log`, so a reader (the SLO rollup, an action id's binding, a
//! filter) compares values, never spellings.

use std::{fmt, str::FromStr};

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{ClaimStatus, DeadLetterState, RedriveState, ResolveAs, RunKind};

text_enum! {
    /// What an audit entry records.
    AuditAction, "audit action" {
        /// A dead letter replayed through the outbox.
        Replay => "replay",
        /// A dead letter discarded.
        Discard => "discard",
        /// An unknown outcome resolved as sent.
        #[serde(rename = "resolve:sent")]
        ResolveSent => "resolve:sent",
        /// An unknown outcome resolved as failed, retried through the outbox.
        #[serde(rename = "resolve:failed-retry")]
        ResolveFailedRetry => "resolve:failed-retry",
        /// An unknown outcome resolved as failed for good.
        #[serde(rename = "resolve:failed")]
        ResolveFailed => "resolve:failed",
        /// A redrive started or ended.
        Redrive => "redrive",
        /// A bulk discard started or ended.
        #[serde(rename = "bulk-discard")]
        BulkDiscard => "bulk-discard",
        /// A bulk resolve started or ended.
        #[serde(rename = "bulk-resolve")]
        BulkResolve => "bulk-resolve",
        /// A provider's export reconciled with the claims.
        Reconcile => "reconcile",
        /// A sign-in (or the failed sign-ins of a window).
        Login => "login",
        Logout => "logout",
        /// Requests refused to a person, counted over a window.
        Denied => "denied",
        #[serde(rename = "token created")]
        TokenCreated => "token created",
        #[serde(rename = "token revoked")]
        TokenRevoked => "token revoked",
        #[serde(rename = "user created by identity proxy")]
        UserCreatedByProxy => "user created by identity proxy",
        #[serde(rename = "role changed by identity proxy")]
        RoleChangedByProxy => "role changed by identity proxy",
        #[serde(rename = "user created by OpenID Connect")]
        UserCreatedByOidc => "user created by OpenID Connect",
        #[serde(rename = "role changed by OpenID Connect")]
        RoleChangedByOidc => "role changed by OpenID Connect",
    }
}

text_enum! {
    /// How an audited action ended.
    AuditResult, "audit result" {
        Ok => "ok",
        /// A sign-in or request refused.
        Refused => "refused",
        /// Sign-ins that failed (a wrong password).
        Failed => "failed",
        /// Sign-ins refused while their pair or address was throttled.
        Throttled => "throttled",
        /// A token made.
        Created => "created",
        /// A token revoked.
        Revoked => "revoked",
    }
}

impl AuditAction {
    /// The action of a resolution as `how`.
    pub const fn resolved(how: ResolveAs) -> Self {
        match how {
            ResolveAs::Sent => AuditAction::ResolveSent,
            ResolveAs::FailedRetry => AuditAction::ResolveFailedRetry,
            ResolveAs::Failed => AuditAction::ResolveFailed,
        }
    }

    /// The action that starts and ends a run of `kind`.
    pub const fn run(kind: RunKind) -> Self {
        match kind {
            RunKind::Replay => AuditAction::Redrive,
            RunKind::Discard => AuditAction::BulkDiscard,
            RunKind::Resolve => AuditAction::BulkResolve,
        }
    }

    /// The run kind this action starts and ends, if it is a run's.
    pub fn run_kind(self) -> Option<RunKind> {
        RunKind::ALL
            .iter()
            .copied()
            .find(|kind| Self::run(*kind) == self)
    }

    /// An unknown outcome resolved, whichever way: what the recovery
    /// objective counts.
    pub const fn resolves_unknown(self) -> bool {
        matches!(
            self,
            AuditAction::ResolveSent | AuditAction::ResolveFailedRetry | AuditAction::ResolveFailed
        )
    }
}

/// A state an audit entry records before or after its action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AuditState {
    /// A dead letter's: `open`, `replayed`, `discarded`.
    DeadLetter(DeadLetterState),
    /// A run's: `running`, `stopped`, `finished`.
    Run(RedriveState),
    /// A claim at its version: `unknown (version 3)`; an abandoned lease,
    /// `pending, lease expired 2026-12-03 02:14:09 UTC (version 3)`; a
    /// resolution as sent, `sent (provider reference pi_1, version 4)`.
    Claim(ClaimState),
    /// What a sentence says: an account's or a token's rights, a
    /// reconciliation's counts.
    Words(String),
}

/// A claim's state as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimState {
    pub status: ClaimStatus,
    pub version: i64,
    /// An abandoned lease: when it expired.
    pub lease_expired: Option<DateTime<Utc>>,
    /// A resolution as sent: the provider's reference.
    pub provider_ref: Option<String>,
}

impl ClaimState {
    /// `status` at `version`, nothing else said.
    pub fn at(status: ClaimStatus, version: i64) -> Self {
        ClaimState {
            status,
            version,
            lease_expired: None,
            provider_ref: None,
        }
    }
}

/// How the audit log writes an abandoned lease's expiry.
const LEASE_FORMAT: &str = "%Y-%m-%d %H:%M:%S UTC";

impl fmt::Display for AuditState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditState::DeadLetter(state) => f.write_str(state.as_str()),
            AuditState::Run(state) => f.write_str(state.as_str()),
            AuditState::Words(words) => f.write_str(words),
            AuditState::Claim(claim) => match (&claim.provider_ref, claim.lease_expired) {
                (Some(reference), _) => write!(
                    f,
                    "{} (provider reference {reference}, version {})",
                    claim.status, claim.version
                ),
                (None, Some(until)) => write!(
                    f,
                    "{}, lease expired {} (version {})",
                    claim.status,
                    until.format(LEASE_FORMAT),
                    claim.version
                ),
                (None, None) => write!(f, "{} (version {})", claim.status, claim.version),
            },
        }
    }
}

impl AuditState {
    /// The state its text names (what [`Display`](fmt::Display) wrote):
    /// any text is a state, in words at the least.
    pub fn parse(text: &str) -> Self {
        if let Ok(state) = text.parse() {
            return AuditState::DeadLetter(state);
        }
        if let Ok(state) = text.parse() {
            return AuditState::Run(state);
        }
        match claim_state(text) {
            Some(claim) => AuditState::Claim(claim),
            None => AuditState::Words(text.to_owned()),
        }
    }

    /// The claim's version, for a claim's state.
    pub fn version(&self) -> Option<i64> {
        match self {
            AuditState::Claim(claim) => Some(claim.version),
            _ => None,
        }
    }
}

/// A claim's state as [`AuditState`]'s `Display` writes it.
fn claim_state(text: &str) -> Option<ClaimState> {
    let (head, rest) = text.strip_suffix(')')?.split_once(" (")?;
    let (reference, version) = match rest.rsplit_once(", version ") {
        Some((said, version)) => (Some(said.strip_prefix("provider reference ")?), version),
        None => (None, rest.strip_prefix("version ")?),
    };
    let version = version.parse().ok()?;
    let (status, lease_expired) = match head.split_once(", lease expired ") {
        Some((status, at)) => {
            let at = NaiveDateTime::parse_from_str(at, LEASE_FORMAT).ok()?;
            (status, Some(at.and_utc()))
        }
        None => (head, None),
    };
    Some(ClaimState {
        status: status.parse().ok()?,
        version,
        lease_expired,
        provider_ref: reference.map(str::to_owned),
    })
}

impl FromStr for AuditState {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(AuditState::parse(text))
    }
}

impl Serialize for AuditState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AuditState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(AuditState::parse(&text))
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for AuditState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "A state in words: a dead letter's (`open`), a run's (`running`), a claim's at \
                 its version (`unknown (version 3)`), or a sentence.",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for AuditState {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_as_it_was_written() {
        let lease = DateTime::from_timestamp(1_796_000_049, 0).unwrap();
        let states = [
            AuditState::DeadLetter(DeadLetterState::Open),
            AuditState::Run(RedriveState::Stopped),
            AuditState::Claim(ClaimState::at(ClaimStatus::Unknown, 3)),
            AuditState::Claim(ClaimState {
                lease_expired: Some(lease),
                ..ClaimState::at(ClaimStatus::Pending, 7)
            }),
            AuditState::Claim(ClaimState {
                provider_ref: Some("pi_3 (EU), version 2".into()),
                ..ClaimState::at(ClaimStatus::Sent, 4)
            }),
            AuditState::Words("operator@payments of olga, never expires".into()),
        ];
        for state in states {
            let text = state.to_string();
            assert_eq!(AuditState::parse(&text), state, "{text}");
        }
        assert_eq!(
            AuditState::Claim(ClaimState::at(ClaimStatus::Unknown, 3)).to_string(),
            "unknown (version 3)"
        );
    }

    #[test]
    fn a_sentence_that_looks_half_like_a_claim_stays_words() {
        for text in ["unknown (version three)", "maybe (version 3)", "sent (x)"] {
            assert_eq!(AuditState::parse(text), AuditState::Words(text.into()));
        }
    }

    #[test]
    fn every_action_reads_back_and_the_resolutions_are_one_family() {
        for action in AuditAction::ALL {
            assert_eq!(action.as_str().parse::<AuditAction>(), Ok(*action));
            let json = serde_json::to_string(action).unwrap();
            assert_eq!(json, format!("\"{}\"", action.as_str()));
        }
        let resolutions: Vec<_> = AuditAction::ALL
            .iter()
            .filter(|a| a.resolves_unknown())
            .collect();
        assert_eq!(resolutions.len(), 3);
        assert_eq!(
            AuditAction::Redrive.run_kind(),
            Some(RunKind::Replay),
            "a run's action names its kind"
        );
        assert_eq!(AuditAction::Replay.run_kind(), None);
    }
}
