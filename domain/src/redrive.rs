//! A redrive as its page shows it, and what its start form carries: which
//! dead letters the page offered, so the server replays exactly those or
//! says the list changed.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{ItemOutcome, RedriveState, ResolveAs, RunKind};

/// The most dead letters one redrive takes (the oldest that match).
pub const REDRIVE_MAX: i64 = 500;

/// One run: who started it, what it took, where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Redrive {
    pub id: i64,
    /// What it does with each item: replay (a redrive), discard, resolve.
    pub kind: RunKind,
    /// How a bulk resolve settles its outcomes.
    pub resolve_as: Option<ResolveAs>,
    /// The reason its items' audit rows carry (a bulk action's).
    pub reason: Option<String>,
    pub actor: String,
    pub actor_role: String,
    /// The list's filter it was started from, in words.
    pub selection: String,
    pub state: RedriveState,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// Who stopped it (a person's Stop), if anyone did.
    pub ended_by: Option<String>,
    /// Why it stopped when no person stopped it (its starter may no longer
    /// act).
    pub end_reason: Option<String>,
    /// The audit row of its start, which its replays name.
    pub audit_id: i64,
}

/// One item of a run (a dead letter, or a key to resolve), and what
/// became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RedriveItem {
    pub position: i64,
    /// Replay and discard: the dead letter.
    pub dead_letter_id: Option<i64>,
    pub consumer: String,
    pub key: String,
    /// Resolve: the claim version the starter saw (a key changed since is
    /// skipped).
    pub version: Option<i64>,
    /// Resolve as sent: the provider's reference recorded for this key.
    pub provider_ref: Option<String>,
    /// `None` until its turn.
    pub outcome: Option<ItemOutcome>,
    /// Why it was skipped.
    pub reason: Option<String>,
    /// The replay's audit row.
    pub audit_id: Option<i64>,
    /// When its turn was taken (the moment its replay committed).
    pub done_at: Option<DateTime<Utc>>,
}

impl Redrive {
    pub fn is_running(&self) -> bool {
        self.state == RedriveState::Running
    }
}

/// The dead letters a redrive form offered, in the list's order (oldest
/// first): how many, the last of them, and a digest of all their ids. The
/// form carries it as a token; starting compares it with the letters that
/// match now, up to that last one, so letters that arrived after the page
/// was drawn are not taken, and a list that changed underneath is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedriveOffer {
    pub count: i64,
    /// The last letter offered: its dead-letter time and id.
    pub last: Option<(DateTime<Utc>, i64)>,
    digest: u64,
}

/// A redrive form's token that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("The redrive form is damaged or out of date; reload the dead-letter list and try again.")]
pub struct BadOffer;

impl RedriveOffer {
    /// The offer of `letters` (dead-letter time and id), in list order.
    pub fn of(letters: impl IntoIterator<Item = (DateTime<Utc>, i64)>) -> Self {
        // FNV-1a over the ids: not a secret, only "the same letters?".
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        let mut count = 0;
        let mut last = None;
        for (at, id) in letters {
            for byte in id.to_le_bytes() {
                digest ^= u64::from(byte);
                digest = digest.wrapping_mul(0x0100_0000_01b3);
            }
            count += 1;
            last = Some((at, id));
        }
        RedriveOffer {
            count,
            last,
            digest,
        }
    }

    /// The form's hidden value: `count.micros.id.digest`.
    pub fn token(&self) -> String {
        let (micros, id) = self
            .last
            .map_or((0, 0), |(at, id)| (at.timestamp_micros(), id));
        format!("{}.{micros}.{id}.{:016x}", self.count, self.digest)
    }

    pub fn parse(token: &str) -> Result<Self, BadOffer> {
        let mut parts = token.split('.');
        let mut next = || parts.next().ok_or(BadOffer);
        let count: i64 = next()?.parse().map_err(|_| BadOffer)?;
        let micros: i64 = next()?.parse().map_err(|_| BadOffer)?;
        let id: i64 = next()?.parse().map_err(|_| BadOffer)?;
        let digest = next()?;
        if parts.next().is_some() || digest.len() != 16 || count < 0 {
            return Err(BadOffer);
        }
        let digest = u64::from_str_radix(digest, 16).map_err(|_| BadOffer)?;
        let last = match count {
            0 => None,
            _ => Some((DateTime::from_timestamp_micros(micros).ok_or(BadOffer)?, id)),
        };
        Ok(RedriveOffer {
            count,
            last,
            digest,
        })
    }
}

impl fmt::Display for RedriveOffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.count {
            1 => f.write_str("1 dead letter"),
            n => write!(f, "{n} dead letters"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 123_456_000).unwrap()
    }

    #[test]
    fn an_offer_survives_its_token_and_names_its_letters() {
        let offer = RedriveOffer::of([(at(1), 7), (at(2), 9), (at(2), 12)]);
        assert_eq!(offer.count, 3);
        assert_eq!(offer.last, Some((at(2), 12)));
        assert_eq!(RedriveOffer::parse(&offer.token()), Ok(offer.clone()));
        assert_ne!(
            RedriveOffer::of([(at(1), 7), (at(2), 9), (at(2), 13)]),
            offer,
            "another letter"
        );
        assert_ne!(
            RedriveOffer::of([(at(1), 7), (at(2), 12)]),
            offer,
            "one fewer"
        );
        assert_eq!(RedriveOffer::of([]).token(), RedriveOffer::of([]).token());
    }

    #[test]
    fn a_damaged_token_is_refused() {
        for token in [
            "",
            "3",
            "3.1.2",
            "x.1.2.0123456789abcdef",
            "3.1.2.0123",
            "3.1.2.0123456789abcdef.9",
            "-1.1.2.0123456789abcdef",
            "3.99999999999999999999.2.0123456789abcdef",
        ] {
            assert_eq!(RedriveOffer::parse(token), Err(BadOffer), "{token:?}");
        }
    }
}
