//! A key's story: every row Idem holds about one (consumer, key), as one
//! timeline in the words an on-call engineer uses, with the flags that call
//! for attention and the actions that would apply.
//!
//! Pure functions over records, so every sentence and flag is unit-tested.

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    AuditEntry, Claim, ClaimStatus, DeadLetter, DeadLetterState, FIFO_DEDUPE_WINDOW_SECONDS,
    OutboxRow, ZoneInfo,
};

/// What kind of thing happened; pages give each kind its own mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    Delivery,
    Duplicate,
    Outcome,
    Outbox,
    DeadLetter,
    Audit,
}

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: DateTime<Utc>,
    pub kind: EventKind,
    /// What it means, in an operator's words.
    pub text: String,
    /// Where it matters (unknown outcomes, dead letters, flags), the tone is a warning.
    pub warning: bool,
}

/// Something about the key that deserves a second look.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Flag {
    /// The same key arrived with different payloads: the publisher's key is
    /// not (only) derived from the business fact, or the fact changed.
    PayloadDrift { first: String, latest: String },
    /// `sent` with no provider reference: nobody can check with the provider.
    SentWithoutProviderRef,
    /// The provider reference also belongs to other keys: one effect may have
    /// been recorded for two facts.
    SharedProviderRef {
        provider_ref: String,
        others: Vec<(String, String)>,
    },
    /// An open dead letter whose key is already `sent`: safe to discard.
    DeadLetterAlreadySent { dead_letter_ids: Vec<i64> },
    /// Rows mention the key but the consumer holds no claim: a replay would
    /// not be deduplicated.
    NoClaim,
}

impl Flag {
    pub fn title(&self) -> &'static str {
        match self {
            Flag::PayloadDrift { .. } => "Payload drift",
            Flag::SentWithoutProviderRef => "Sent without a provider reference",
            Flag::SharedProviderRef { .. } => "Provider reference shared with another key",
            Flag::DeadLetterAlreadySent { .. } => "Dead letter for a key already sent",
            Flag::NoClaim => "No claim",
        }
    }

    pub fn explanation(&self) -> String {
        match self {
            Flag::PayloadDrift { first, latest } => format!(
                "The key was first delivered with payload hash {first} and later with {latest}: the same key carried different content."
            ),
            Flag::SentWithoutProviderRef => {
                "The claim is sent but records no provider reference, so the effect cannot be checked with the provider.".into()
            }
            Flag::SharedProviderRef { provider_ref, others } => format!(
                "The provider reference {provider_ref} is also recorded on {}: one effect may stand for two business facts.",
                others
                    .iter()
                    .map(|(consumer, key)| format!("{key} ({consumer})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Flag::DeadLetterAlreadySent { dead_letter_ids } => format!(
                "Dead letter {} is open although the effect already happened: replaying it is unnecessary; it is safe to discard.",
                dead_letter_ids.iter().map(|id| format!("#{id}")).collect::<Vec<_>>().join(", ")
            ),
            Flag::NoClaim => {
                "Outbox rows or dead letters mention this key, but the consumer has no claim for it: a replay would not be deduplicated.".into()
            }
        }
    }
}

/// What an operator could do about the key (the actions themselves are separate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Find out from the provider and mark the outcome sent or failed.
    ResolveUnknown,
    /// Put the dead-lettered message back through the outbox with the same key.
    ReplayDeadLetter { id: i64 },
    /// Replay only after resolving the unknown outcome (or with an override).
    ResolveThenReplay { id: i64 },
    /// The effect happened: close the dead letter without replaying.
    DiscardDeadLetter { id: i64 },
}

impl Action {
    pub fn describe(&self) -> String {
        match self {
            Action::ResolveUnknown => {
                "Resolve the unknown outcome: mark it sent (with the provider reference) or failed."
                    .into()
            }
            Action::ReplayDeadLetter { id } => {
                format!("Replay dead letter #{id} with the same key.")
            }
            Action::ResolveThenReplay { id } => {
                format!(
                    "Resolve the outcome first, then replay dead letter #{id} (or override with a reason)."
                )
            }
            Action::DiscardDeadLetter { id } => {
                format!("Discard dead letter #{id}: the effect already happened.")
            }
        }
    }
}

/// The assembled story.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Story {
    pub events: Vec<Event>,
    pub flags: Vec<Flag>,
    pub actions: Vec<Action>,
}

/// `6 min`, `40 s`, `2 h 5 min`.
pub fn span(delta: TimeDelta) -> String {
    let s = delta.num_seconds().max(0);
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3_600, (s % 3_600) / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s} s"),
        (0, 0, m) => format!("{m} min"),
        (0, h, 0) => format!("{h} h"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, 0, _) => format!("{d} d"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

fn window_words(delay: TimeDelta) -> &'static str {
    if delay.num_milliseconds() as f64 / 1000.0 > FIFO_DEDUPE_WINDOW_SECONDS {
        "outside a 5-minute FIFO window: only the claim caught it"
    } else {
        "inside a 5-minute FIFO window"
    }
}

/// Everything a story is assembled from.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    pub claim: Option<&'a Claim>,
    pub outbox: &'a [OutboxRow],
    pub dead_letters: &'a [DeadLetter],
    pub audit: &'a [AuditEntry],
    /// Other (consumer, key) pairs that record this claim's provider reference.
    pub shared_ref: &'a [(String, String)],
}

/// Builds the story as of `as_of` (when the data was read), with clock times
/// in the viewer's `zone`.
pub fn assemble(sources: Sources<'_>, as_of: DateTime<Utc>, zone: &ZoneInfo) -> Story {
    let Sources {
        claim,
        outbox,
        dead_letters,
        audit,
        shared_ref,
    } = sources;
    let clock = |at: DateTime<Utc>| zone.format_clock(at);
    let mut events = Vec::new();
    let mut flags = Vec::new();
    let mut actions = Vec::new();

    if let Some(c) = claim {
        events.push(Event {
            at: c.first_delivery_at,
            kind: EventKind::Delivery,
            text: "First delivered; the consumer claimed the key.".into(),
            warning: false,
        });
        if c.duplicate_count > 0 {
            let delay = c.last_delivery_at - c.first_delivery_at;
            let text = if c.duplicate_count == 1 {
                format!(
                    "Duplicate delivery {} after the first — {}.",
                    span(delay),
                    window_words(delay)
                )
            } else {
                format!(
                    "{} duplicate deliveries; the latest {} after the first — {}.",
                    c.duplicate_count,
                    span(delay),
                    window_words(delay)
                )
            };
            events.push(Event {
                at: c.last_delivery_at,
                kind: EventKind::Duplicate,
                text,
                warning: false,
            });
        }
        let attempts = match c.attempts {
            0 => String::new(),
            1 => " after 1 attempt".into(),
            n => format!(" after {n} attempts"),
        };
        let outcome = match c.status {
            ClaimStatus::Sent => Event {
                at: c.outcome_at.unwrap_or(c.status_at),
                kind: EventKind::Outcome,
                text: match &c.provider_ref {
                    Some(r) => format!("Sent{attempts}; provider reference {r}."),
                    None => format!("Sent{attempts}; no provider reference recorded."),
                },
                warning: false,
            },
            ClaimStatus::Failed => Event {
                at: c.status_at,
                kind: EventKind::Outcome,
                text: format!(
                    "Failed{attempts}: {}.",
                    c.last_error.as_deref().unwrap_or("no error recorded")
                ),
                warning: true,
            },
            ClaimStatus::Unknown => Event {
                at: c.status_at,
                kind: EventKind::Outcome,
                text: format!(
                    "Outcome unknown since {}, {}{attempts}: {}.",
                    clock(c.status_at),
                    span(as_of - c.status_at),
                    c.last_error
                        .as_deref()
                        .unwrap_or("the provider may or may not have acted")
                ),
                warning: true,
            },
            ClaimStatus::Pending => Event {
                at: c.status_at,
                kind: EventKind::Outcome,
                text: match (c.lease_until, &c.last_error) {
                    (Some(until), _) if until > as_of => {
                        format!(
                            "Pending: a worker holds the claim until {} (attempt {}).",
                            clock(until),
                            c.attempts
                        )
                    }
                    (Some(until), _) => format!(
                        "Pending, and the worker's lease ran out at {} with no outcome recorded: the next delivery will treat the attempt as unknown.",
                        clock(until)
                    ),
                    (None, Some(error)) => {
                        format!("Pending a retry{attempts}; last error: {error}.")
                    }
                    (None, None) => "Pending: claimed, no attempt recorded yet.".into(),
                },
                warning: false,
            },
        };
        events.push(outcome);

        if let Some(latest) = c
            .last_payload_hash
            .as_ref()
            .filter(|h| c.payload_hash.as_ref() != Some(*h))
        {
            flags.push(Flag::PayloadDrift {
                first: c.payload_hash.clone().unwrap_or_else(|| "(none)".into()),
                latest: latest.clone(),
            });
        }
        if c.status == ClaimStatus::Sent && c.provider_ref.as_deref().is_none_or(str::is_empty) {
            flags.push(Flag::SentWithoutProviderRef);
        }
        if let (Some(provider_ref), false) = (&c.provider_ref, shared_ref.is_empty()) {
            flags.push(Flag::SharedProviderRef {
                provider_ref: provider_ref.clone(),
                others: shared_ref.to_vec(),
            });
        }
    } else if !outbox.is_empty() || !dead_letters.is_empty() {
        flags.push(Flag::NoClaim);
    }

    for row in outbox {
        let origin = match row.origin {
            crate::OutboxOrigin::Application => String::new(),
            other => format!(" (origin: {other})"),
        };
        events.push(Event {
            at: row.created_at,
            kind: EventKind::Outbox,
            text: format!("Outbox row #{} written for {}{origin}.", row.id, row.topic),
            warning: false,
        });
        match row.published_at {
            Some(at) => events.push(Event {
                at,
                kind: EventKind::Outbox,
                text: format!(
                    "Outbox row #{} published {} after it was written.",
                    row.id,
                    span(at - row.created_at)
                ),
                warning: false,
            }),
            None => events.push(Event {
                at: as_of,
                kind: EventKind::Outbox,
                text: match &row.last_error {
                    Some(error) => format!(
                        "Outbox row #{} not published after {} ({} attempts); last error: {error}.",
                        row.id,
                        span(as_of - row.created_at),
                        row.attempts
                    ),
                    None => format!(
                        "Outbox row #{} waiting to be published for {}.",
                        row.id,
                        span(as_of - row.created_at)
                    ),
                },
                warning: true,
            }),
        }
    }

    let sent = claim.is_some_and(|c| c.status == ClaimStatus::Sent);
    let unknown = claim.is_some_and(|c| c.status == ClaimStatus::Unknown);
    let mut already_sent = Vec::new();
    for dl in dead_letters {
        events.push(Event {
            at: dl.dead_lettered_at,
            kind: EventKind::DeadLetter,
            text: format!(
                "Dead-lettered after {} deliveries (letter #{}): {}.",
                dl.delivery_count,
                dl.id,
                dl.last_error.as_deref().unwrap_or("no error recorded")
            ),
            warning: dl.state == DeadLetterState::Open,
        });
        if let (Some(at), Some(by)) = (dl.resolved_at, &dl.resolved_by) {
            events.push(Event {
                at,
                kind: EventKind::DeadLetter,
                text: format!("Dead letter #{} {} by {by}.", dl.id, dl.state),
                warning: false,
            });
        }
        if dl.state == DeadLetterState::Open {
            if sent {
                already_sent.push(dl.id);
                actions.push(Action::DiscardDeadLetter { id: dl.id });
            } else if unknown {
                actions.push(Action::ResolveThenReplay { id: dl.id });
            } else {
                actions.push(Action::ReplayDeadLetter { id: dl.id });
            }
        }
    }
    if !already_sent.is_empty() {
        flags.push(Flag::DeadLetterAlreadySent {
            dead_letter_ids: already_sent,
        });
    }
    if unknown {
        actions.insert(0, Action::ResolveUnknown);
    }

    for entry in audit {
        let change = match (&entry.state_before, &entry.state_after) {
            (Some(before), Some(after)) => format!(": {before} → {after}"),
            _ => String::new(),
        };
        let reason = entry
            .reason
            .as_ref()
            .map(|r| format!(" Reason: {r}"))
            .unwrap_or_default();
        events.push(Event {
            at: entry.at,
            kind: EventKind::Audit,
            text: format!(
                "{} ({}) {}{change} — {}.{reason}",
                entry.actor, entry.actor_role, entry.action, entry.result
            ),
            warning: false,
        });
    }

    // Stable: events of one instant keep the order they were added in.
    events.sort_by_key(|e| e.at);
    Story {
        events,
        flags,
        actions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OutboxOrigin;

    fn t(minutes: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T14:00:00Z")
            .unwrap()
            .to_utc()
            + TimeDelta::minutes(minutes)
    }

    fn claim(status: ClaimStatus) -> Claim {
        Claim {
            consumer: "reminders".into(),
            key: "renewal:account-1842:2026-09-30".into(),
            status,
            status_at: t(2),
            first_delivery_at: t(0),
            last_delivery_at: t(0),
            delivery_count: 1,
            duplicate_count: 0,
            attempts: 1,
            provider_ref: Some("msg_1".into()),
            last_error: None,
            outcome_at: Some(t(2)),
            payload_hash: Some("aaaa".into()),
            last_payload_hash: None,
            lease_until: None,
            version: 3,
        }
    }

    fn dead_letter(id: i64, state: DeadLetterState) -> DeadLetter {
        DeadLetter {
            id,
            consumer: "reminders".into(),
            queue: "reminders.fifo".into(),
            key: "renewal:account-1842:2026-09-30".into(),
            message_id: "m-1".into(),
            payload: "{}".into(),
            delivery_count: 3,
            first_failure_at: t(1),
            dead_lettered_at: t(3),
            last_error: Some("429 Too Many Requests".into()),
            state,
            resolved_by: None,
            resolved_at: None,
            replay_outbox_id: None,
        }
    }

    fn only(claim: Option<&Claim>) -> Sources<'_> {
        Sources {
            claim,
            outbox: &[],
            dead_letters: &[],
            audit: &[],
            shared_ref: &[],
        }
    }

    fn texts(story: &Story) -> Vec<&str> {
        story.events.iter().map(|e| e.text.as_str()).collect()
    }

    #[test]
    fn a_duplicate_after_six_minutes_is_outside_the_fifo_window() {
        let mut c = claim(ClaimStatus::Sent);
        c.duplicate_count = 1;
        c.delivery_count = 2;
        c.last_delivery_at = t(6);
        let story = assemble(only(Some(&c)), t(10), &ZoneInfo::utc());
        assert_eq!(
            texts(&story),
            [
                "First delivered; the consumer claimed the key.",
                "Sent after 1 attempt; provider reference msg_1.",
                "Duplicate delivery 6 min after the first — outside a 5-minute FIFO window: only the claim caught it.",
            ]
        );
        assert!(story.flags.is_empty() && story.actions.is_empty());
    }

    #[test]
    fn duplicates_within_five_minutes_are_inside_the_window() {
        let mut c = claim(ClaimStatus::Sent);
        c.duplicate_count = 3;
        c.last_delivery_at = t(0) + TimeDelta::seconds(40);
        let story = assemble(only(Some(&c)), t(10), &ZoneInfo::utc());
        assert!(texts(&story).contains(&"3 duplicate deliveries; the latest 40 s after the first — inside a 5-minute FIFO window."));
    }

    #[test]
    fn an_unknown_outcome_says_since_when_and_for_how_long_and_asks_for_resolution() {
        let mut c = claim(ClaimStatus::Unknown);
        c.provider_ref = None;
        c.last_error = Some("no response within 30 s".into());
        let story = assemble(only(Some(&c)), t(40), &ZoneInfo::utc());
        assert!(texts(&story).contains(
            &"Outcome unknown since 14:02 UTC, 38 min after 1 attempt: no response within 30 s."
        ));
        assert!(story.events.iter().any(|e| e.warning));
        assert_eq!(story.actions, [Action::ResolveUnknown]);
    }

    #[test]
    fn a_dead_letter_says_after_how_many_deliveries_and_offers_a_replay() {
        let mut c = claim(ClaimStatus::Failed);
        c.last_error = Some("dead-lettered after 3 deliveries: 429 Too Many Requests".into());
        let story = assemble(
            Sources {
                dead_letters: &[dead_letter(7, DeadLetterState::Open)],
                ..only(Some(&c))
            },
            t(10),
            &ZoneInfo::utc(),
        );
        assert!(
            texts(&story)
                .contains(&"Dead-lettered after 3 deliveries (letter #7): 429 Too Many Requests.")
        );
        assert_eq!(story.actions, [Action::ReplayDeadLetter { id: 7 }]);
    }

    #[test]
    fn every_flag_appears_where_it_applies() {
        // Payload drift.
        let mut c = claim(ClaimStatus::Sent);
        c.last_payload_hash = Some("bbbb".into());
        let story = assemble(only(Some(&c)), t(10), &ZoneInfo::utc());
        assert_eq!(
            story.flags,
            [Flag::PayloadDrift {
                first: "aaaa".into(),
                latest: "bbbb".into()
            }]
        );

        // Sent without a provider reference.
        let mut c = claim(ClaimStatus::Sent);
        c.provider_ref = None;
        assert_eq!(
            assemble(only(Some(&c)), t(10), &ZoneInfo::utc()).flags,
            [Flag::SentWithoutProviderRef]
        );

        // One provider reference on two keys.
        let c = claim(ClaimStatus::Sent);
        let others = vec![(
            "reminders".to_owned(),
            "renewal:account-9:2026-09-30".to_owned(),
        )];
        let story = assemble(
            Sources {
                claim: Some(&c),
                outbox: &[],
                dead_letters: &[],
                audit: &[],
                shared_ref: &others,
            },
            t(10),
            &ZoneInfo::utc(),
        );
        assert_eq!(
            story.flags,
            [Flag::SharedProviderRef {
                provider_ref: "msg_1".into(),
                others
            }]
        );

        // A dead letter whose key is already sent: discard, not replay.
        let story = assemble(
            Sources {
                dead_letters: &[dead_letter(4, DeadLetterState::Open)],
                ..only(Some(&claim(ClaimStatus::Sent)))
            },
            t(10),
            &ZoneInfo::utc(),
        );
        assert_eq!(
            story.flags,
            [Flag::DeadLetterAlreadySent {
                dead_letter_ids: vec![4]
            }]
        );
        assert_eq!(story.actions, [Action::DiscardDeadLetter { id: 4 }]);

        // Rows without a claim.
        let story = assemble(
            Sources {
                dead_letters: &[dead_letter(5, DeadLetterState::Open)],
                ..only(None)
            },
            t(10),
            &ZoneInfo::utc(),
        );
        assert_eq!(story.flags, [Flag::NoClaim]);

        // A clean sent claim has no flags.
        assert!(
            assemble(
                only(Some(&claim(ClaimStatus::Sent))),
                t(10),
                &ZoneInfo::utc()
            )
            .flags
            .is_empty()
        );
    }

    #[test]
    fn an_unknown_key_with_a_dead_letter_resolves_before_it_replays() {
        let story = assemble(
            Sources {
                dead_letters: &[dead_letter(9, DeadLetterState::Open)],
                ..only(Some(&claim(ClaimStatus::Unknown)))
            },
            t(10),
            &ZoneInfo::utc(),
        );
        assert_eq!(
            story.actions,
            [Action::ResolveUnknown, Action::ResolveThenReplay { id: 9 }]
        );
    }

    #[test]
    fn the_timeline_is_ordered_in_time_across_every_table() {
        let outbox = OutboxRow {
            id: 12,
            consumer: "reminders".into(),
            topic: "reminder.sent".into(),
            key: "k".into(),
            payload: "{}".into(),
            created_at: t(1),
            published_at: Some(t(1) + TimeDelta::seconds(2)),
            attempts: 1,
            last_error: None,
            origin: OutboxOrigin::Replay,
            dead_letter_id: Some(4),
            audit_id: None,
        };
        let audit = AuditEntry {
            id: 1,
            action_id: Some("a-1".into()),
            at: t(5),
            actor: "olga".into(),
            actor_role: "operator".into(),
            action: "replay".into(),
            consumer: Some("reminders".into()),
            key: Some("k".into()),
            target: Some("dead_letter:4".into()),
            state_before: Some("open".into()),
            state_after: Some("replayed".into()),
            reason: Some("provider fixed".into()),
            result: "ok".into(),
            client_addr: None,
            recovery_seconds: None,
        };
        let story = assemble(
            Sources {
                claim: Some(&claim(ClaimStatus::Sent)),
                outbox: &[outbox],
                dead_letters: &[dead_letter(4, DeadLetterState::Replayed)],
                audit: &[audit],
                shared_ref: &[],
            },
            t(10),
            &ZoneInfo::utc(),
        );
        let times: Vec<_> = story.events.iter().map(|e| e.at).collect();
        let mut sorted = times.clone();
        sorted.sort();
        assert_eq!(times, sorted);
        assert_eq!(
            texts(&story),
            [
                "First delivered; the consumer claimed the key.",
                "Outbox row #12 written for reminder.sent (origin: replay).",
                "Outbox row #12 published 2 s after it was written.",
                "Sent after 1 attempt; provider reference msg_1.",
                "Dead-lettered after 3 deliveries (letter #4): 429 Too Many Requests.",
                "olga (operator) replay: open → replayed — ok. Reason: provider fixed",
            ]
        );
    }
}
