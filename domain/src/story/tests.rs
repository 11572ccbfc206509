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
        broker: None,
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
    assert!(texts(&story).contains(
        &"3 duplicate deliveries; the latest 40 s after the first — inside a 5-minute FIFO window."
    ));
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
        action: crate::AuditAction::Replay,
        consumer: Some("reminders".into()),
        key: Some("k".into()),
        target: Some("dead_letter:4".into()),
        state_before: Some(crate::AuditState::DeadLetter(DeadLetterState::Open)),
        state_after: Some(crate::AuditState::DeadLetter(DeadLetterState::Replayed)),
        reason: Some("provider fixed".into()),
        result: crate::AuditResult::Ok,
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

#[test]
fn attempts_read_as_words() {
    assert_eq!(attempts_words(0), "");
    assert_eq!(attempts_words(1), " after 1 attempt");
    assert_eq!(attempts_words(4), " after 4 attempts");
}

#[test]
fn an_open_dead_letter_gets_the_action_its_claims_status_allows() {
    let open = dead_letter(3, DeadLetterState::Open);
    assert_eq!(
        dead_letter_action(&open, Some(ClaimStatus::Sent)),
        Some(Action::DiscardDeadLetter { id: 3 })
    );
    assert_eq!(
        dead_letter_action(&open, Some(ClaimStatus::Unknown)),
        Some(Action::ResolveThenReplay { id: 3 })
    );
    for status in [None, Some(ClaimStatus::Failed), Some(ClaimStatus::Pending)] {
        assert_eq!(
            dead_letter_action(&open, status),
            Some(Action::ReplayDeadLetter { id: 3 })
        );
    }
    let replayed = dead_letter(3, DeadLetterState::Replayed);
    assert_eq!(dead_letter_action(&replayed, Some(ClaimStatus::Sent)), None);
}
