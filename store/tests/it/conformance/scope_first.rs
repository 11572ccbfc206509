//! The reader's scope is in each statement, before its limit or cap: a
//! person limited to one team counts, finds and reads exactly what an
//! unlimited person sees of that team, however large another team's
//! backlog, however many others hold the same key, and another team's
//! object answers as a missing one — down to an action id's answer.

use idem_domain::{DeadLetterId, Within, action::ActionOutcome};
use idem_store::{Actor, Outcome, PageRequest, ReplayRequest, Store, Window, testing};

use super::{claim_once, dead_letter, delivery, settle};
use crate::actions::{OLGA, PETE};

idem_store::on_both_backends!(
    a_team_s_counts_are_exact_while_another_team_s_backlog_is_past_the_cap,
    a_key_many_teams_hold_lists_every_one_of_the_reader_s_claims,
    another_team_s_dead_letter_reads_and_replays_as_a_missing_one,
    an_action_id_another_team_used_tells_the_reader_nothing_of_its_use,
);

/// Named so that a prefix match would mix them up.
const OURS: &str = "pay";
const THEIRS: &str = "payments";

fn only(name: &str) -> Within {
    Within::Only(vec![testing::consumer(name)])
}

async fn unknown(store: &Store, consumer: &str, key: &str, seconds: i64) {
    claim_once(store, delivery(consumer, key, seconds)).await;
    let lost = Outcome::Unknown { error: "timeout" };
    settle(store, consumer, key, lost, seconds).await;
}

async fn letter(store: &Store, consumer: &str, key: &str) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let id = tx
        .dead_letter(&idem_store::NewDeadLetter {
            consumer,
            ..dead_letter(key, 100)
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// A dead letter whose key failed for good: safe to replay.
async fn replayable(store: &Store, consumer: &str, key: &str) -> i64 {
    claim_once(store, delivery(consumer, key, 10)).await;
    let failed = Outcome::Permanent { error: "422" };
    settle(store, consumer, key, failed, 10).await;
    letter(store, consumer, key).await
}

async fn a_team_s_counts_are_exact_while_another_team_s_backlog_is_past_the_cap(store: &Store) {
    const CAP: u64 = 5;
    for n in 0..12 {
        unknown(store, THEIRS, &format!("theirs:{n}"), n).await;
        letter(store, THEIRS, &format!("theirs:{n}")).await;
    }
    for n in 0..3 {
        unknown(store, OURS, &format!("ours:{n}"), 100 + n).await;
        letter(store, OURS, &format!("ours:{n}")).await;
    }

    let names = [testing::consumer(OURS)];
    let open = store.lists().open_by_consumer(&names, CAP).await.unwrap();
    assert_eq!(open.unknown(OURS).to_string(), "3");
    assert_eq!(open.dead_letters(OURS).to_string(), "3");
    assert_eq!(
        open.unknown(THEIRS).to_string(),
        "0",
        "only the names asked"
    );

    let ours = Window {
        within: only(OURS),
        ..Window::default()
    };
    let count = store.lists().count_unknown_in(&ours, CAP).await.unwrap();
    assert_eq!(count.to_string(), "3");
    let everyone = store
        .lists()
        .count_unknown_in(&Window::default(), CAP)
        .await
        .unwrap();
    assert_eq!(everyone.to_string(), "5+", "the fleet's count is capped");

    // The first page of two is the two oldest of ours, then the third.
    let first = store
        .lists()
        .unknown_claims_in(&PageRequest::first(2), &ours)
        .await
        .unwrap();
    let keys: Vec<&str> = first.items.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["ours:0", "ours:1"]);
    let rest = store
        .lists()
        .unknown_claims_in(&PageRequest::new(2, first.next.clone()), &ours)
        .await
        .unwrap();
    let keys: Vec<&str> = rest.items.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["ours:2"]);
    assert_eq!(rest.next, None);
}

async fn a_key_many_teams_hold_lists_every_one_of_the_reader_s_claims(store: &Store) {
    // Eight other consumers, all sorting before ours, hold the key.
    for n in 0..8 {
        claim_once(store, delivery(&format!("a-{n}"), "shared:1", 10)).await;
    }
    claim_once(store, delivery(OURS, "shared:1", 10)).await;
    let key = testing::key("shared:1");

    let mine = store
        .claims()
        .claims_with_key(&key, 3, &only(OURS))
        .await
        .unwrap();
    let consumers: Vec<&str> = mine.iter().map(|c| c.consumer.as_str()).collect();
    assert_eq!(consumers, [OURS], "the limit is applied after the scope");

    let every = store
        .claims()
        .claims_with_key(&key, 3, &Within::Every)
        .await
        .unwrap();
    assert_eq!(every.len(), 3);
    assert!(every.iter().all(|c| c.consumer != OURS));
}

/// An actor's replay of dead letter `id` within `scope`, as the action
/// tests build one.
fn replay<'a>(
    id: i64,
    scope: &'a Within,
    action_id: &'a idem_domain::action::ActionId,
    actor: Actor<'a>,
) -> ReplayRequest<'a> {
    ReplayRequest {
        scope,
        actor,
        ..crate::actions::replay(id, action_id)
    }
}

async fn another_team_s_dead_letter_reads_and_replays_as_a_missing_one(store: &Store) {
    let theirs = letter(store, THEIRS, "theirs:1").await;
    let missing = theirs + 1_000;
    let scope = only(OURS);
    let claims = store.claims();

    let read = |id| claims.dead_letter(DeadLetterId::of_row(id), &scope);
    assert_eq!(read(theirs).await.unwrap(), None);
    assert_eq!(read(missing).await.unwrap(), None);
    let seen_by_them = claims
        .dead_letter(DeadLetterId::of_row(theirs), &only(THEIRS))
        .await
        .unwrap();
    assert_eq!(seen_by_them.map(|d| d.key), Some("theirs:1".to_owned()));

    let answer = |id, form: &'static str| {
        let scope = scope.clone();
        async move {
            store
                .actions()
                .replay_dead_letter(&replay(id, &scope, &testing::action_id(form), OLGA))
                .await
                .unwrap()
        }
    };
    let on_theirs = answer(theirs, "replay-form-theirs").await;
    let on_missing = answer(missing, "replay-form-missing").await;
    let words = |outcome: &ActionOutcome, id: i64| match outcome {
        ActionOutcome::Refused { reason } => reason.replace(&id.to_string(), "{id}"),
        other => panic!("refused, not {other:?}"),
    };
    assert_eq!(words(&on_theirs, theirs), words(&on_missing, missing));
    assert!(!format!("{on_theirs:?}").contains(THEIRS));
    let still = claims
        .dead_letter(DeadLetterId::of_row(theirs), &Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.state, idem_domain::DeadLetterState::Open);
}

async fn an_action_id_another_team_used_tells_the_reader_nothing_of_its_use(store: &Store) {
    let theirs = replayable(store, THEIRS, "theirs:secret-key").await;
    let ours = replayable(store, OURS, "ours:1").await;
    let form = testing::action_id("replay-form-0001");
    let every = Within::Every;
    let by_pete = store
        .actions()
        .replay_dead_letter(&replay(theirs, &every, &form, PETE))
        .await
        .unwrap();
    assert!(by_pete.is_done(), "{by_pete:?}");

    // Olga, limited to her team, sends the same action id for her letter.
    let scope = only(OURS);
    let reused = store
        .actions()
        .replay_dead_letter(&replay(ours, &scope, &form, OLGA))
        .await
        .unwrap();
    let text = format!("{reused:?}");
    assert!(
        matches!(reused, ActionOutcome::FormReused { ref first } if first == "another action"),
        "{text}"
    );
    for secret in [THEIRS, "theirs:secret-key", "pete"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let mine = store
        .claims()
        .dead_letter(DeadLetterId::of_row(ours), &scope)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        mine.state,
        idem_domain::DeadLetterState::Open,
        "nothing done"
    );
}
