//! The small closed sets Idem's tables store as text.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// A stored or requested value outside its closed set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownValue {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static [&'static str],
}

impl fmt::Display for UnknownValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a valid {}; expected one of: {}",
            self.value,
            self.what,
            self.expected.join(", ")
        )
    }
}

impl std::error::Error for UnknownValue {}

macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum $name { $( $(#[$vmeta])* $variant ),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored spelling, also used in URLs and CSS class names.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl FromStr for $name {
            type Err = $crate::UnknownValue;
            fn from_str(value: &str) -> Result<Self, $crate::UnknownValue> {
                match value {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::UnknownValue {
                        what: $what,
                        value: value.to_owned(),
                        expected: &[$($text),+],
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum! {
    /// Where a claim stands. `pending → sent | failed | unknown`.
    ClaimStatus, "claim status" {
        /// Claimed; the effect has not been recorded yet (in flight or awaiting a retry).
        Pending => "pending",
        /// The effect happened; the provider reference says where.
        Sent => "sent",
        /// The effect did not happen and will not without a new attempt.
        Failed => "failed",
        /// The provider may or may not have acted: an operator must resolve it.
        Unknown => "unknown",
    }
}

text_enum! {
    /// What became of a dead-lettered message.
    DeadLetterState, "dead letter state" {
        Open => "open",
        Replayed => "replayed",
        Discarded => "discarded",
    }
}

text_enum! {
    /// Why an outbox row exists.
    OutboxOrigin, "outbox origin" {
        /// Written by the consumer alongside its own work.
        Application => "application",
        /// An operator replayed a dead letter.
        Replay => "replay",
        /// An operator resolved an unknown outcome as "failed, retry".
        Resolution => "resolution",
    }
}

text_enum! {
    /// What a person signed in to Idem may do. Each role includes the ones before it.
    Role, "role" {
        /// Reads everything.
        Viewer => "viewer",
        /// Also replays dead letters and resolves unknown outcomes.
        Operator => "operator",
        /// Also manages users.
        Admin => "admin",
    }
}

text_enum! {
    /// How an account signs in. A password account, a person an identity
    /// proxy names and one an OpenID provider signs in are never the same
    /// account, whatever their names.
    AccountOrigin, "account origin" {
        /// Created with `idem user add`; signs in with a password.
        Password => "password",
        /// Created on first sight by the identity proxy; no password.
        Proxy => "proxy",
        /// Created on first sign-in through OpenID Connect; no password.
        Oidc => "oidc",
    }
}

text_enum! {
    /// Where a redrive stands.
    RedriveState, "redrive state" {
        /// Its items are being taken, one at a time.
        Running => "running",
        /// Ended before its last item: by a person's Stop, or because its
        /// starter may no longer act.
        Stopped => "stopped",
        /// Every item was taken.
        Finished => "finished",
    }
}

text_enum! {
    /// What a redrive did with one of its dead letters.
    ItemOutcome, "redrive item outcome" {
        /// Replayed through the single replay.
        Replayed => "replayed",
        /// Left as it was, with the reason (a redrive's letter whose
        /// verdict was not "safe"; anything handled or changed meanwhile).
        Skipped => "skipped",
        /// A bulk discard's dead letter, discarded through the single discard.
        Discarded => "discarded",
        /// A bulk resolve's unknown outcome, resolved through the single
        /// resolution.
        Resolved => "resolved",
    }
}

text_enum! {
    /// What a run does with each of its items: the redrive's machinery
    /// (bound to what was shown, paced, stoppable, audited per item) under
    /// each bulk action.
    RunKind, "run kind" {
        /// A redrive: replays dead letters whose verdict is "safe".
        Replay => "replay",
        /// Discards dead letters whose key is already sent.
        Discard => "discard",
        /// Resolves unknown outcomes, all the same way.
        Resolve => "resolve",
    }
}

text_enum! {
    /// What a provider's export says became of one call.
    ProviderStatus, "provider status" {
        /// The provider took it (accepted, delivered, succeeded).
        Accepted => "accepted",
        /// The provider refused it or gave up (failed, bounced, rejected).
        Failed => "failed",
    }
}

text_enum! {
    /// Where a reconciliation puts a claim or a provider's record, holding
    /// the claims against the provider's export.
    ReconcileClass, "reconciliation class" {
        /// Unknown here, accepted there: resolve as sent with its reference.
        #[serde(rename = "unknown-accepted")]
        UnknownAccepted => "unknown-accepted",
        /// Unknown here, absent (or failed) there after the latency bound:
        /// safe to retry.
        #[serde(rename = "unknown-absent")]
        UnknownAbsent => "unknown-absent",
        /// Sent here, absent there: a possible loss.
        #[serde(rename = "sent-absent")]
        SentAbsent => "sent-absent",
        /// Accepted there, with no claim or a claim not sent here: a
        /// possible duplicate effect, or a call that did not come from here.
        #[serde(rename = "accepted-unclaimed")]
        AcceptedUnclaimed => "accepted-unclaimed",
        /// One provider reference on two keys.
        #[serde(rename = "shared-reference")]
        SharedReference => "shared-reference",
        /// Failed here, accepted there.
        #[serde(rename = "failed-accepted")]
        FailedAccepted => "failed-accepted",
    }
}

text_enum! {
    /// How a bulk resolve settles its unknown outcomes.
    ResolveAs, "bulk resolution" {
        /// The provider acted: `sent`, with a reference per key.
        Sent => "sent",
        /// It did not: `failed`, retried through the outbox with the same key.
        #[serde(rename = "failed-retry")]
        FailedRetry => "failed-retry",
        /// It did not, and must not be retried: `failed`.
        Failed => "failed",
    }
}

impl RunKind {
    /// What a person calls a run of this kind: `Redrive`, `Bulk discard`.
    pub const fn title(self) -> &'static str {
        match self {
            RunKind::Replay => "Redrive",
            RunKind::Discard => "Bulk discard",
            RunKind::Resolve => "Bulk resolve",
        }
    }

    /// What its items are, plural: `dead letters`, `unknown outcomes`.
    pub const fn items(self) -> &'static str {
        match self {
            RunKind::Replay | RunKind::Discard => "dead letters",
            RunKind::Resolve => "unknown outcomes",
        }
    }

    /// The audit log's action for its start and its end.
    pub const fn audit_action(self) -> crate::AuditAction {
        crate::AuditAction::run(self)
    }

    /// The outcome of an item it settled (not skipped).
    pub const fn done(self) -> ItemOutcome {
        match self {
            RunKind::Replay => ItemOutcome::Replayed,
            RunKind::Discard => ItemOutcome::Discarded,
            RunKind::Resolve => ItemOutcome::Resolved,
        }
    }
}

impl Role {
    /// Whether this role may do what `needed` may.
    pub fn includes(self, needed: Role) -> bool {
        self >= needed
    }
}

impl ClaimStatus {
    /// The words an operator reads next to the status badge.
    pub const fn meaning(self) -> &'static str {
        match self {
            ClaimStatus::Pending => "claimed, effect not yet recorded",
            ClaimStatus::Sent => "effect happened",
            ClaimStatus::Failed => "effect did not happen",
            ClaimStatus::Unknown => "provider may or may not have acted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_parses_back_from_its_stored_spelling() {
        for status in ClaimStatus::ALL {
            assert_eq!(status.as_str().parse::<ClaimStatus>(), Ok(*status));
        }
        for state in DeadLetterState::ALL {
            assert_eq!(state.as_str().parse::<DeadLetterState>(), Ok(*state));
        }
        for origin in OutboxOrigin::ALL {
            assert_eq!(origin.as_str().parse::<OutboxOrigin>(), Ok(*origin));
        }
    }

    #[test]
    fn each_role_includes_the_ones_before_it() {
        assert!(Role::Admin.includes(Role::Operator) && Role::Admin.includes(Role::Viewer));
        assert!(Role::Operator.includes(Role::Viewer) && !Role::Operator.includes(Role::Admin));
        assert!(!Role::Viewer.includes(Role::Operator));
        assert_eq!("operator".parse::<Role>(), Ok(Role::Operator));
    }

    #[test]
    fn an_unknown_spelling_names_the_valid_ones() {
        let err = "done".parse::<ClaimStatus>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"done\" is not a valid claim status; expected one of: pending, sent, failed, unknown"
        );
    }
}
