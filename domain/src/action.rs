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
            Some(c) if c.is_resolvable(now) => Verdict::OutcomeUnknown,
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

/// The longest reason an action keeps, in characters.
pub const MAX_REASON_CHARS: usize = 2000;

/// The longest provider reference, in bytes (provider ids are short ASCII).
pub const MAX_PROVIDER_REF_BYTES: usize = 256;

/// Free text an operator typed that does not fit its bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("The reason is {0} characters long; the most it can be is {MAX_REASON_CHARS}.")]
    ReasonTooLong(usize),
    #[error("The reason holds a control character; only line breaks and tabs are allowed.")]
    ReasonControl,
    #[error(
        "The reason holds an invisible or text-direction character (U+{0:04X}), which would make \
         it read otherwise in the audit log."
    )]
    ReasonInvisible(u32),
    #[error(
        "The provider reference is {0} bytes long; the most it can be is {MAX_PROVIDER_REF_BYTES}."
    )]
    ProviderRefTooLong(usize),
    #[error("The provider reference holds a control character (a line break, a tab, …).")]
    ProviderRefControl,
    #[error("The provider reference holds an invisible or text-direction character (U+{0:04X}).")]
    ProviderRefInvisible(u32),
    #[error("The form's action id is missing or malformed; reload the page.")]
    MalformedActionId,
    #[error("The reason is empty.")]
    ReasonEmpty,
    #[error("The provider reference is empty.")]
    ProviderRefEmpty,
}

/// The token a confirmation form carries, so that a resubmission of the
/// same form is recognised as the same action: 8 to 64 ASCII letters,
/// digits and hyphens. The store binds it to one action, target and actor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ActionId(String);

impl ActionId {
    pub fn parse(text: &str) -> Result<ActionId, TextError> {
        let ok = (8..=64).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        ok.then(|| ActionId(text.to_owned()))
            .ok_or(TextError::MalformedActionId)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ActionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A reason an operator gave, as the audit log keeps it: trimmed, at most
/// [`MAX_REASON_CHARS`] characters, no control character but line breaks
/// and tabs, no invisible or text-direction character.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Reason(String);

impl Reason {
    /// The reason as typed: `None` when it is empty.
    pub fn parse(text: &str) -> Result<Option<Reason>, TextError> {
        let text = text.trim();
        let chars = text.chars().count();
        if chars > MAX_REASON_CHARS {
            return Err(TextError::ReasonTooLong(chars));
        }
        if text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            return Err(TextError::ReasonControl);
        }
        if let Some(c) = text.chars().find(|c| crate::is_invisible_or_bidi(*c)) {
            return Err(TextError::ReasonInvisible(c as u32));
        }
        Ok((!text.is_empty()).then(|| Reason(text.to_owned())))
    }

    /// A reason Idem itself words (a run's tally, the demo's on-call).
    pub fn of_idem(text: impl Into<String>) -> Reason {
        Reason(text.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A provider's reference for an effect it took (what its support quotes):
/// trimmed, at most [`MAX_PROVIDER_REF_BYTES`] bytes, no control,
/// invisible or text-direction character.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProviderRef(String);

impl ProviderRef {
    /// The reference as typed: `None` when it is empty.
    pub fn parse(text: &str) -> Result<Option<ProviderRef>, TextError> {
        let text = text.trim();
        if text.len() > MAX_PROVIDER_REF_BYTES {
            return Err(TextError::ProviderRefTooLong(text.len()));
        }
        if text.chars().any(char::is_control) {
            return Err(TextError::ProviderRefControl);
        }
        if let Some(c) = text.chars().find(|c| crate::is_invisible_or_bidi(*c)) {
            return Err(TextError::ProviderRefInvisible(c as u32));
        }
        Ok((!text.is_empty()).then(|| ProviderRef(text.to_owned())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! text_newtype {
    ($ty:ident, $empty:expr) => {
        impl TryFrom<String> for $ty {
            type Error = TextError;
            fn try_from(value: String) -> Result<Self, TextError> {
                $ty::parse(&value)?.ok_or($empty)
            }
        }
        impl From<$ty> for String {
            fn from(value: $ty) -> String {
                value.0
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}
text_newtype!(Reason, TextError::ReasonEmpty);
text_newtype!(ProviderRef, TextError::ProviderRefEmpty);

/// How an operator resolves an unknown outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resolution {
    /// The provider did act: record `sent` with its reference.
    Sent { provider_ref: ProviderRef },
    /// It did not: record `failed` and retry through the outbox, same key.
    FailedRetry,
    /// It did not, and must not be retried.
    FailedPermanently,
}

impl crate::ResolveAs {
    /// The single resolution one key of a bulk resolve takes.
    /// `None`: resolving as sent without a reference, which no check lets through.
    pub fn resolution(self, provider_ref: Option<&ProviderRef>) -> Option<Resolution> {
        Some(match self {
            crate::ResolveAs::Sent => Resolution::Sent {
                provider_ref: provider_ref?.clone(),
            },
            crate::ResolveAs::FailedRetry => Resolution::FailedRetry,
            crate::ResolveAs::Failed => Resolution::FailedPermanently,
        })
    }
}

impl Resolution {
    pub fn status(&self) -> ClaimStatus {
        match self {
            Resolution::Sent { .. } => ClaimStatus::Sent,
            Resolution::FailedRetry | Resolution::FailedPermanently => ClaimStatus::Failed,
        }
    }

    /// The audit log's action for it.
    pub fn action(&self) -> crate::AuditAction {
        crate::AuditAction::resolved(self.resolve_as())
    }

    /// The bulk resolution of the same kind.
    pub fn resolve_as(&self) -> crate::ResolveAs {
        match self {
            Resolution::Sent { .. } => crate::ResolveAs::Sent,
            Resolution::FailedRetry => crate::ResolveAs::FailedRetry,
            Resolution::FailedPermanently => crate::ResolveAs::Failed,
        }
    }
}

/// What an action did. Resubmitting the same action id returns the same outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// The action id was already used for another action, another target
    /// or by another person (a form submitted twice for different things);
    /// nothing was done. `first` says what that id did.
    FormReused { first: String },
}

impl ActionOutcome {
    /// Whether the action is done (now or by an earlier submission).
    pub fn is_done(&self) -> bool {
        matches!(self, ActionOutcome::Done { .. })
    }
}

#[cfg(test)]
mod tests {
    /// A reason as typed, as the audit log would keep it.
    fn reason(text: &str) -> Result<Option<String>, TextError> {
        Reason::parse(text).map(|r| r.map(String::from))
    }

    /// A provider reference as typed, as a claim would record it.
    fn provider_ref(text: &str) -> Result<Option<String>, TextError> {
        ProviderRef::parse(text).map(|r| r.map(String::from))
    }

    #[test]
    fn a_reason_or_reference_with_a_hidden_text_direction_change_is_refused() {
        assert_eq!(
            reason("sent by \u{202E}nimda"),
            Err(TextError::ReasonInvisible(0x202E))
        );
        assert_eq!(reason("שולם אצל הספק"), Ok(Some("שולם אצל הספק".into())));
        assert_eq!(
            provider_ref("msg_\u{200B}1842"),
            Err(TextError::ProviderRefInvisible(0x200B))
        );
    }

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
    fn a_reason_is_bounded_in_characters_and_keeps_its_line_breaks() {
        assert_eq!(reason("  "), Ok(None));
        assert_eq!(
            reason(" ok\nthen\tthis "),
            Ok(Some("ok\nthen\tthis".into()))
        );
        let longest = "é".repeat(MAX_REASON_CHARS);
        assert_eq!(
            reason(&longest),
            Ok(Some(longest.clone())),
            "characters, not bytes"
        );
        assert_eq!(
            reason(&format!("{longest}x")),
            Err(TextError::ReasonTooLong(MAX_REASON_CHARS + 1))
        );
        assert_eq!(reason("a\0b"), Err(TextError::ReasonControl));
        assert_eq!(reason("a\u{1b}[31m"), Err(TextError::ReasonControl));
        assert!(
            TextError::ReasonTooLong(2001).to_string().contains("2000"),
            "the refusal names the bound"
        );
    }

    #[test]
    fn a_provider_reference_is_bounded_in_bytes_without_control_characters() {
        assert_eq!(provider_ref(" pi_3Nf "), Ok(Some("pi_3Nf".into())));
        assert_eq!(provider_ref(""), Ok(None));
        assert_eq!(
            provider_ref(&"r".repeat(5000)),
            Err(TextError::ProviderRefTooLong(5000))
        );
        assert_eq!(
            provider_ref(&"r".repeat(256)).map(|r| r.map(|r| r.len())),
            Ok(Some(256))
        );
        assert_eq!(provider_ref("a\tb"), Err(TextError::ProviderRefControl));
        assert_eq!(provider_ref("a\nb"), Err(TextError::ProviderRefControl));
    }

    #[test]
    fn only_sent_and_unknown_need_an_override() {
        assert!(Verdict::AlreadySent.needs_override() && Verdict::OutcomeUnknown.needs_override());
        assert!(!Verdict::Safe.needs_override() && !Verdict::NoClaim.needs_override());
        assert!(!Verdict::BeyondRetention { age_days: 40 }.needs_override());
    }

    #[test]
    fn an_action_id_is_a_short_token_and_nothing_else() {
        assert_eq!(
            ActionId::parse("3f2a9c1d-replay-42").unwrap().as_str(),
            "3f2a9c1d-replay-42"
        );
        for bad in [
            "",
            "short",
            "has space 123",
            "semi;colon12",
            "ünicode-1234",
            &"a".repeat(65),
        ] {
            assert_eq!(
                ActionId::parse(bad),
                Err(TextError::MalformedActionId),
                "{bad:?}"
            );
        }
    }
}
