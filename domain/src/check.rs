//! Fleet-wide consistency checks: the key page's flags, asked of every key at
//! once. Each check is a list of findings an operator works through after an
//! incident; this module names them and says what each means and what to do.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One consistency check across every consumer and key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Check {
    /// An open dead letter whose key is already `sent`.
    DeadLetterAlreadySent,
    /// A `sent` claim that records no provider reference.
    SentWithoutProviderRef,
    /// One provider reference recorded on two or more keys.
    SharedProviderRef,
    /// A key delivered again with a different payload.
    PayloadDrift,
    /// `pending` with an expired lease and no outcome: the worker crashed
    /// mid-call and nobody turned the claim into `unknown`.
    AbandonedLease,
    /// An unknown outcome older than the objective for resolving it.
    UnknownPastObjective,
    /// An open dead letter whose claim is older than the claim retention (or
    /// already gone): a replay would not be deduplicated.
    DeadLetterBeyondRetention,
}

impl Check {
    /// Every check, in the order the page lists them (what to act on first).
    pub const ALL: [Check; 7] = [
        Check::AbandonedLease,
        Check::UnknownPastObjective,
        Check::DeadLetterAlreadySent,
        Check::DeadLetterBeyondRetention,
        Check::SharedProviderRef,
        Check::SentWithoutProviderRef,
        Check::PayloadDrift,
    ];

    /// The check's name in addresses (`/checks/payload-drift`) and in the
    /// `check` label of `idem_check_findings`.
    pub fn slug(self) -> &'static str {
        match self {
            Check::DeadLetterAlreadySent => "dead-letter-already-sent",
            Check::SentWithoutProviderRef => "sent-without-provider-ref",
            Check::SharedProviderRef => "shared-provider-ref",
            Check::PayloadDrift => "payload-drift",
            Check::AbandonedLease => "abandoned-lease",
            Check::UnknownPastObjective => "unknown-past-objective",
            Check::DeadLetterBeyondRetention => "dead-letter-beyond-retention",
        }
    }

    /// The check named `slug`, if any.
    pub fn from_slug(slug: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.slug() == slug)
    }

    pub fn title(self) -> &'static str {
        match self {
            Check::DeadLetterAlreadySent => "Dead letters for keys already sent",
            Check::SentWithoutProviderRef => "Sent without a provider reference",
            Check::SharedProviderRef => "Provider references on two keys",
            Check::PayloadDrift => "Payload drift",
            Check::AbandonedLease => "Abandoned leases",
            Check::UnknownPastObjective => "Unknown outcomes past their objective",
            Check::DeadLetterBeyondRetention => "Dead letters beyond the claim retention",
        }
    }

    /// What a finding means and what to do about it.
    pub fn explanation(self) -> &'static str {
        match self {
            Check::DeadLetterAlreadySent => {
                "The dead letter is open, but the key's claim is sent: the effect already happened. Discard it; a replay would be suppressed at best."
            }
            Check::SentWithoutProviderRef => {
                "The claim is sent but records no provider reference, so nobody can check the effect with the provider. Find the consumer path that skips recording it."
            }
            Check::SharedProviderRef => {
                "The same provider reference is recorded on more than one key: one effect may stand for two business facts, or a consumer recorded the wrong reference. Compare the keys."
            }
            Check::PayloadDrift => {
                "The key was delivered again with different content: the publisher's key is not (only) derived from the business fact, or the fact changed under the same key."
            }
            Check::AbandonedLease => {
                "The claim is pending, its lease has expired and no outcome was recorded: a worker died during the external call. Ask the provider, then resolve the key."
            }
            Check::UnknownPastObjective => {
                "The provider may or may not have acted, and the key has been unknown for longer than the objective allows. Resolve it with the provider's answer."
            }
            Check::DeadLetterBeyondRetention => {
                "The dead letter is open and its key's claim is older than the consumers keep claims (or already deleted): a replay would not be deduplicated. Check with the provider before replaying."
            }
        }
    }

    /// Whether the check's findings are dead letters (listed by dead letter,
    /// in the order they were given up on) rather than claims.
    pub fn lists_dead_letters(self) -> bool {
        matches!(
            self,
            Check::DeadLetterAlreadySent | Check::DeadLetterBeyondRetention
        )
    }

    /// What the time column of the check's list means.
    pub fn time_heading(self) -> &'static str {
        match self {
            Check::DeadLetterAlreadySent | Check::DeadLetterBeyondRetention => "Dead-lettered",
            Check::SentWithoutProviderRef => "Sent",
            Check::SharedProviderRef => "Found",
            Check::PayloadDrift => "Last delivery",
            Check::AbandonedLease => "Lease expired",
            Check::UnknownPastObjective => "Unknown since",
        }
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.slug())
    }
}

/// One key (or one of its dead letters) a check found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub consumer: String,
    pub key: String,
    /// The time the list is ordered by ([`Check::time_heading`]).
    pub at: DateTime<Utc>,
    pub dead_letter_id: Option<i64>,
    /// For a finding about a claim: its version (what a bulk resolve of
    /// the findings shown is bound to).
    pub version: Option<i64>,
    pub provider_ref: Option<String>,
    /// For drift: the first delivery's payload hash and the differing one.
    pub payload_hashes: Option<(String, String)>,
    /// For an abandoned lease: when it expired.
    pub lease_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_is_found_again_by_its_slug() {
        for check in Check::ALL {
            assert_eq!(Check::from_slug(check.slug()), Some(check));
        }
        assert_eq!(Check::from_slug("no-such-check"), None);
        assert_eq!(Check::from_slug(""), None);
    }

    #[test]
    fn slugs_are_distinct_and_fit_a_prometheus_label_and_a_path() {
        let mut slugs: Vec<_> = Check::ALL.iter().map(|c| c.slug()).collect();
        slugs.sort_unstable();
        slugs.dedup();
        assert_eq!(slugs.len(), Check::ALL.len());
        assert!(
            slugs
                .iter()
                .all(|s| s.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
        );
    }
}
