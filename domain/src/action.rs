//! Operator actions: what a replay would do to a key, and what an action's
//! outcome is, in words an operator reads before and after confirming.

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::{Claim, ClaimStatus};

/// The replay safety verdict for one dead letter, from its key's claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The claim shows the effect did not happen (or is pending): a replay
    /// with the same key will be deduplicated by the consumer's claim.
    Safe,
    /// The effect already happened. A replay is suppressed at best — and
    /// repeated by a consumer that lost its claim row. Blocked unless
    /// overridden with a reason.
    AlreadySent,
    /// Nobody knows whether the effect happened: resolve the outcome first,
    /// or override with a reason.
    OutcomeUnknown,
    /// The consumer holds no claim for the key (never claimed, or deleted):
    /// it may not deduplicate the replay.
    NoClaim,
    /// The claim is older than the consumer's claim retention: it may be
    /// deleted before the replay arrives, and then not deduplicate it.
    BeyondRetention { age_days: i64 },
}

impl Verdict {
    /// The verdict for a claim (or its absence) at `now`, for consumers that
    /// keep claims for `retention`.
    pub fn of(claim: Option<&Claim>, retention: TimeDelta, now: DateTime<Utc>) -> Verdict {
        match claim {
            None => Verdict::NoClaim,
            Some(c) if c.status == ClaimStatus::Sent => Verdict::AlreadySent,
            Some(c) if c.status == ClaimStatus::Unknown => Verdict::OutcomeUnknown,
            Some(c) if now - c.first_delivery_at > retention => Verdict::BeyondRetention {
                age_days: (now - c.first_delivery_at).num_days(),
            },
            Some(_) => Verdict::Safe,
        }
    }

    /// A replay needs the operator to tick "override" and give a reason.
    pub fn needs_override(&self) -> bool {
        matches!(self, Verdict::AlreadySent | Verdict::OutcomeUnknown)
    }

    pub fn title(&self) -> &'static str {
        match self {
            Verdict::Safe => "Safe to replay",
            Verdict::AlreadySent => "Blocked: the effect already happened",
            Verdict::OutcomeUnknown => "Blocked: the outcome is unknown",
            Verdict::NoClaim => "Caution: no claim for this key",
            Verdict::BeyondRetention { .. } => {
                "Caution: the claim is older than the retention horizon"
            }
        }
    }

    pub fn explanation(&self) -> String {
        match self {
            Verdict::Safe => "The claim shows the effect did not happen. A replay carries the same key, so the consumer's claim deduplicates it if it arrives twice.".into(),
            Verdict::AlreadySent => "The claim is sent: the effect already happened. A replay would be suppressed by the claim — or repeated by a consumer that lost its claim row. Replay only with an override and a reason; discarding the dead letter is usually right.".into(),
            Verdict::OutcomeUnknown => "The provider may or may not have acted on this key. Resolve the outcome first; replaying now could repeat the effect. An override needs a reason.".into(),
            Verdict::NoClaim => "The consumer holds no claim for this key, so it may not deduplicate the replay: if the effect happened, it may happen again.".into(),
            Verdict::BeyondRetention { age_days } => format!(
                "The claim is {age_days} days old, older than the consumer keeps claims: it may be gone before the replay arrives, and the consumer would not deduplicate it."
            ),
        }
    }
}

/// How an operator resolves an unknown outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resolution {
    /// The provider did act: record `sent` with its reference.
    Sent { provider_ref: String },
    /// It did not: record `failed` and retry through the outbox, same key.
    FailedRetry,
    /// It did not, and must not be retried.
    FailedPermanently,
}

impl Resolution {
    pub fn status(&self) -> ClaimStatus {
        match self {
            Resolution::Sent { .. } => ClaimStatus::Sent,
            Resolution::FailedRetry | Resolution::FailedPermanently => ClaimStatus::Failed,
        }
    }

    /// The audit spelling.
    pub fn action(&self) -> &'static str {
        match self {
            Resolution::Sent { .. } => "resolve:sent",
            Resolution::FailedRetry => "resolve:failed-retry",
            Resolution::FailedPermanently => "resolve:failed",
        }
    }
}

/// What an action did. Resubmitting the same action id returns the same outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ActionOutcome {
    /// Done (now or by an earlier submission of the same action id).
    Done {
        audit_id: i64,
        /// The outbox row it wrote (replay, resolution with retry).
        outbox_id: Option<i64>,
        summary: String,
    },
    /// Someone (or something) changed the item first; nothing was written.
    Conflict {
        by: String,
        at: Option<DateTime<Utc>>,
        now: String,
    },
    /// The action is not allowed as asked (a blocked verdict without an
    /// override, a missing reason); nothing was written.
    Refused { reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        static NOW: std::sync::LazyLock<DateTime<Utc>> = std::sync::LazyLock::new(Utc::now);
        *NOW
    }

    fn claim(status: ClaimStatus, age_days: i64) -> Claim {
        let now = now();
        Claim {
            consumer: "orders".into(),
            key: "k".into(),
            status,
            status_at: now,
            first_delivery_at: now - TimeDelta::days(age_days),
            last_delivery_at: now,
            delivery_count: 1,
            duplicate_count: 0,
            attempts: 1,
            provider_ref: None,
            last_error: None,
            outcome_at: None,
            payload_hash: None,
            last_payload_hash: None,
            lease_until: None,
            version: 1,
        }
    }

    #[test]
    fn every_verdict_is_produced_in_its_case() {
        let now = now();
        let thirty = TimeDelta::days(30);
        assert_eq!(
            Verdict::of(Some(&claim(ClaimStatus::Failed, 1)), thirty, now),
            Verdict::Safe
        );
        assert_eq!(
            Verdict::of(Some(&claim(ClaimStatus::Pending, 1)), thirty, now),
            Verdict::Safe
        );
        assert_eq!(
            Verdict::of(Some(&claim(ClaimStatus::Sent, 1)), thirty, now),
            Verdict::AlreadySent
        );
        assert_eq!(
            Verdict::of(Some(&claim(ClaimStatus::Unknown, 1)), thirty, now),
            Verdict::OutcomeUnknown
        );
        assert_eq!(Verdict::of(None, thirty, now), Verdict::NoClaim);
        assert_eq!(
            Verdict::of(Some(&claim(ClaimStatus::Failed, 45)), thirty, now),
            Verdict::BeyondRetention { age_days: 45 }
        );
        // A sent claim is blocked however old it is.
        assert_eq!(
            Verdict::of(Some(&claim(ClaimStatus::Sent, 45)), thirty, now),
            Verdict::AlreadySent
        );
    }

    #[test]
    fn only_sent_and_unknown_need_an_override() {
        assert!(Verdict::AlreadySent.needs_override() && Verdict::OutcomeUnknown.needs_override());
        assert!(!Verdict::Safe.needs_override() && !Verdict::NoClaim.needs_override());
        assert!(!Verdict::BeyondRetention { age_days: 40 }.needs_override());
    }
}
