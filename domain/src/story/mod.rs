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
    /// `pending` with an expired lease and no outcome: the worker died
    /// during the external call.
    AbandonedLease { lease_until: DateTime<Utc> },
    /// An open dead letter whose key is already `sent`: safe to discard.
    DeadLetterAlreadySent { dead_letter_ids: Vec<i64> },
    /// Rows mention the key but the consumer holds no claim: a replay would
    /// not be deduplicated.
    NoClaim,
}

impl Flag {
    pub fn title(&self) -> &'static str {
        match self {
            Flag::AbandonedLease { .. } => "Abandoned lease",
            Flag::PayloadDrift { .. } => "Payload drift",
            Flag::SentWithoutProviderRef => "Sent without a provider reference",
            Flag::SharedProviderRef { .. } => "Provider reference shared with another key",
            Flag::DeadLetterAlreadySent { .. } => "Dead letter for a key already sent",
            Flag::NoClaim => "No claim",
        }
    }

    pub fn explanation(&self) -> String {
        match self {
            Flag::AbandonedLease { .. } => {
                "The worker's lease ran out with no outcome recorded (the timeline says when): it died during the external call, and nobody knows whether the provider acted. Ask the provider with the key, then resolve it below.".into()
            }
            Flag::PayloadDrift { first, latest } => format!(
                "The key was first delivered with payload hash {first} and later with {latest}: the same key carried different content. Nothing to change here: the publisher derives its keys, so take it to the publisher's owners."
            ),
            Flag::SentWithoutProviderRef => {
                "The claim is sent but records no provider reference, so the effect cannot be checked with the provider. Nothing to change here: the outcome stands; find the consumer path that records sent without the reference.".into()
            }
            Flag::SharedProviderRef { provider_ref, others } => format!(
                "The provider reference {provider_ref} is also recorded on {}: one effect may stand for two business facts. Compare the keys (linked below) with the provider; Idem changes neither.",
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
    /// The same, for a claim whose worker's lease ran out with no outcome.
    ResolveAbandonedLease,
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
            Action::ResolveAbandonedLease => {
                "Resolve the abandoned attempt: ask the provider, then mark it sent (with the provider reference) or failed."
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
    let mut events = Vec::new();
    let mut flags = Vec::new();

    if let Some(c) = claim {
        events.extend(delivery_events(c));
        events.push(outcome_event(c, as_of, zone));
        flags.extend(claim_flags(c, shared_ref, as_of));
    } else if !outbox.is_empty() || !dead_letters.is_empty() {
        flags.push(Flag::NoClaim);
    }

    for row in outbox {
        events.extend(outbox_events(row, as_of));
    }

    let status = claim.map(|c| c.status);
    for dl in dead_letters {
        events.extend(dead_letter_events(dl));
    }
    let mut actions: Vec<Action> = dead_letters
        .iter()
        .filter_map(|dl| dead_letter_action(dl, status))
        .collect();
    let already_sent: Vec<i64> = actions
        .iter()
        .filter_map(|action| match action {
            Action::DiscardDeadLetter { id } => Some(*id),
            _ => None,
        })
        .collect();
    if !already_sent.is_empty() {
        flags.push(Flag::DeadLetterAlreadySent {
            dead_letter_ids: already_sent,
        });
    }
    if status == Some(ClaimStatus::Unknown) {
        actions.insert(0, Action::ResolveUnknown);
    } else if claim.is_some_and(|c| c.is_abandoned_lease(as_of)) {
        actions.insert(0, Action::ResolveAbandonedLease);
    }

    events.extend(audit.iter().map(audit_event));

    // Stable: events of one instant keep the order they were added in.
    events.sort_by_key(|e| e.at);
    Story {
        events,
        flags,
        actions,
    }
}

/// The claim's first delivery and, when there were any, its duplicates.
fn delivery_events(c: &Claim) -> Vec<Event> {
    let mut events = vec![Event {
        at: c.first_delivery_at,
        kind: EventKind::Delivery,
        text: "First delivered; the consumer claimed the key.".into(),
        warning: false,
    }];
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
    events
}

/// ` after 3 attempts`, ` after 1 attempt`, or nothing for none.
fn attempts_words(attempts: i64) -> String {
    match attempts {
        0 => String::new(),
        1 => " after 1 attempt".into(),
        n => format!(" after {n} attempts"),
    }
}

/// The claim's current status as one event.
fn outcome_event(c: &Claim, as_of: DateTime<Utc>, zone: &ZoneInfo) -> Event {
    let attempts = attempts_words(c.attempts);
    match c.status {
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
                zone.format_clock(c.status_at),
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
            text: pending_text(c, as_of, zone, &attempts),
            warning: false,
        },
    }
}

/// What a pending claim is waiting for: a worker's lease, a retry, or a first attempt.
fn pending_text(c: &Claim, as_of: DateTime<Utc>, zone: &ZoneInfo, attempts: &str) -> String {
    match (c.lease_until, &c.last_error) {
        (Some(until), _) if until > as_of => {
            format!(
                "Pending: a worker holds the claim until {} (attempt {}).",
                zone.format_clock(until),
                c.attempts
            )
        }
        (Some(until), _) => format!(
            "Pending, and the worker's lease ran out at {} with no outcome recorded: the next delivery will treat the attempt as unknown, and an operator can resolve it now.",
            zone.format_clock(until)
        ),
        (None, Some(error)) => {
            format!("Pending a retry{attempts}; last error: {error}.")
        }
        (None, None) => "Pending: claimed, no attempt recorded yet.".into(),
    }
}

/// The flags the claim alone raises: an abandoned lease, payload drift, no
/// or a shared provider reference.
fn claim_flags(c: &Claim, shared_ref: &[(String, String)], as_of: DateTime<Utc>) -> Vec<Flag> {
    let mut flags = Vec::new();
    if let Some(lease_until) = c.lease_until.filter(|_| c.is_abandoned_lease(as_of)) {
        flags.push(Flag::AbandonedLease { lease_until });
    }
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
    flags
}

/// An outbox row's writing, and its publication or the wait for it.
fn outbox_events(row: &OutboxRow, as_of: DateTime<Utc>) -> [Event; 2] {
    let origin = match row.origin {
        crate::OutboxOrigin::Application => String::new(),
        other => format!(" (origin: {other})"),
    };
    let written = Event {
        at: row.created_at,
        kind: EventKind::Outbox,
        text: format!("Outbox row #{} written for {}{origin}.", row.id, row.topic),
        warning: false,
    };
    let published = match row.published_at {
        Some(at) => Event {
            at,
            kind: EventKind::Outbox,
            text: format!(
                "Outbox row #{} published {} after it was written.",
                row.id,
                span(at - row.created_at)
            ),
            warning: false,
        },
        None => Event {
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
        },
    };
    [written, published]
}

/// `text` ending as a sentence does: with its own full stop, or one added.
fn sentence(text: &str) -> String {
    if text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// A dead letter's dead-lettering and, once handled, its resolution.
fn dead_letter_events(dl: &DeadLetter) -> Vec<Event> {
    let mut events = vec![Event {
        at: dl.dead_lettered_at,
        kind: EventKind::DeadLetter,
        text: format!(
            "Dead-lettered after {} deliveries (letter #{}): {}",
            dl.delivery_count,
            dl.id,
            sentence(dl.last_error.as_deref().unwrap_or("no error recorded"))
        ),
        warning: dl.state == DeadLetterState::Open,
    }];
    if let (Some(at), Some(by)) = (dl.resolved_at, &dl.resolved_by) {
        events.push(Event {
            at,
            kind: EventKind::DeadLetter,
            text: format!("Dead letter #{} {} by {by}.", dl.id, dl.state),
            warning: false,
        });
    }
    events
}

/// What applies to an open dead letter given the claim's status (none once handled).
fn dead_letter_action(dl: &DeadLetter, status: Option<ClaimStatus>) -> Option<Action> {
    if dl.state != DeadLetterState::Open {
        return None;
    }
    Some(match status {
        Some(ClaimStatus::Sent) => Action::DiscardDeadLetter { id: dl.id },
        Some(ClaimStatus::Unknown) => Action::ResolveThenReplay { id: dl.id },
        _ => Action::ReplayDeadLetter { id: dl.id },
    })
}

/// One audit entry as an event: who did what, with the change and the reason.
fn audit_event(entry: &AuditEntry) -> Event {
    let change = match (&entry.state_before, &entry.state_after) {
        (Some(before), Some(after)) => format!(": {before} → {after}"),
        _ => String::new(),
    };
    let reason = entry
        .reason
        .as_ref()
        .map(|r| format!(" Reason: {r}"))
        .unwrap_or_default();
    Event {
        at: entry.at,
        kind: EventKind::Audit,
        text: format!(
            "{} ({}) {}{change} — {}.{reason}",
            entry.actor, entry.actor_role, entry.action, entry.result
        ),
        warning: false,
    }
}

#[cfg(test)]
mod tests;
