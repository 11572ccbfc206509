//! Operator actions on both backends: once, compare-and-set, audited in the
//! same transaction, idempotent by action id.

use std::sync::Arc;

use chrono::TimeDelta;
use idem_domain::{
    ClaimStatus, DeadLetterState,
    action::{ActionOutcome, Resolution},
};
use idem_store::{
    Actor, Delivery, DiscardRequest, NewDeadLetter, Outcome, ReplayRequest, ResolveRequest, Store,
    Ts, Tx, testing::execute_raw,
};
use tokio::sync::Barrier;

idem_store::on_both_backends!(
    fifty_concurrent_replays_of_one_dead_letter_make_one_outbox_row_and_one_audit_row,
    two_operators_resolving_one_key_at_once_get_one_success_and_one_conflict_naming_the_winner,
    a_repeated_action_id_returns_the_first_outcome_and_has_one_effect,
    an_action_id_used_for_one_dead_letter_is_refused_for_another_and_does_nothing,
    an_action_id_used_to_resolve_a_key_is_refused_for_a_replay_and_another_resolution,
    an_action_id_is_bound_to_the_person_who_used_it,
    a_stale_version_is_refused_with_the_current_state,
    a_rolled_back_action_leaves_no_audit_row,
    the_audit_log_refuses_updates_and_deletes,
    each_replay_verdict_is_applied,
    only_a_dead_letter_whose_key_is_sent_can_be_discarded,
    resolving_failed_with_a_retry_queues_the_same_key_through_the_outbox,
    actions_record_how_long_recovery_took,
    an_action_dated_ahead_happens_now_and_none_recovers_in_negative_time,
    a_replayed_key_s_records_read_together_equal_each_read_alone,
);

const OLGA: Actor<'static> = Actor {
    name: "olga",
    role: "operator",
    client_addr: Some("192.0.2.1"),
};
const PETE: Actor<'static> = Actor {
    name: "pete",
    role: "operator",
    client_addr: Some("192.0.2.2"),
};

fn ago(minutes: i64) -> Ts {
    Ts::from(chrono::Utc::now() - TimeDelta::minutes(minutes))
}

/// A claim for `key` that ends in `outcome`, and an open dead letter for it.
/// Delivers `key` to `orders` half an hour ago and records `outcome` for it.
async fn claimed(tx: &mut Tx, key: &str, outcome: Outcome<'_>) -> idem_domain::Claim {
    tx.claim(&Delivery {
        consumer: "orders",
        key,
        payload_hash: None,
        at: ago(30),
    })
    .await
    .unwrap();
    tx.lease("orders", key, ago(29), ago(30)).await.unwrap();
    tx.record("orders", key, outcome, ago(29)).await.unwrap()
}

async fn dead_lettered(store: &Store, key: &str, outcome: Outcome<'_>) -> i64 {
    let mut tx = store.begin().await.unwrap();
    claimed(&mut tx, key, outcome).await;
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer: "orders",
            queue: "orders.fifo",
            key,
            message_id: "m-1",
            payload: r#"{"order":"42"}"#,
            delivery_count: 3,
            first_failure_at: ago(25),
            last_error: Some("429 Too Many Requests"),
            at: ago(20),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

async fn unknown_claim(store: &Store, key: &str) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let claim = claimed(&mut tx, key, Outcome::Unknown { error: "timeout" }).await;
    tx.commit().await.unwrap();
    claim.version
}

fn replay(id: i64, action_id: &str) -> ReplayRequest<'_> {
    ReplayRequest {
        dead_letter_id: id,
        action_id,
        actor: OLGA,
        override_verdict: false,
        reason: None,
        retention: TimeDelta::days(30),
    }
}

async fn fifty_concurrent_replays_of_one_dead_letter_make_one_outbox_row_and_one_audit_row(
    store: &Store,
) {
    let id = dead_lettered(
        store,
        "refund:42",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let barrier = Arc::new(Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let action_id = format!("replay-{i}");
                store
                    .replay_dead_letter(&replay(id, &action_id))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        match task.await.unwrap() {
            ActionOutcome::Done { .. } => done += 1,
            ActionOutcome::Conflict { by, .. } => assert_eq!(by, "olga"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(done, 1);
    let outbox = store.outbox_for_key("orders", "refund:42").await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(
        (outbox[0].dead_letter_id, outbox[0].origin.as_str()),
        (Some(id), "replay")
    );
    let audit = store.audit_for_key("orders", "refund:42").await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].action.as_str(), audit[0].result.as_str()),
        ("replay", "ok")
    );
    assert_eq!(outbox[0].audit_id, Some(audit[0].id));
    let dl = store.dead_letter(id).await.unwrap().unwrap();
    assert_eq!(
        (dl.state, dl.resolved_by.as_deref(), dl.replay_outbox_id),
        (DeadLetterState::Replayed, Some("olga"), Some(outbox[0].id))
    );
}

async fn two_operators_resolving_one_key_at_once_get_one_success_and_one_conflict_naming_the_winner(
    store: &Store,
) {
    let version = unknown_claim(store, "pay_7f3").await;
    let barrier = Arc::new(Barrier::new(2));
    let run = |actor: Actor<'static>, resolution: Resolution, action_id: &'static str| {
        let (store, barrier) = (store.clone(), barrier.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            store
                .resolve_unknown(&ResolveRequest {
                    consumer: "orders",
                    key: "pay_7f3",
                    version,
                    resolution,
                    action_id,
                    actor,
                    reason: Some("checked the provider's dashboard"),
                })
                .await
                .unwrap()
        })
    };
    let a = run(
        OLGA,
        Resolution::Sent {
            provider_ref: "ch_1".into(),
        },
        "a",
    );
    let b = run(PETE, Resolution::FailedPermanently, "b");
    let outcomes = [a.await.unwrap(), b.await.unwrap()];
    let winners: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, ActionOutcome::Done { .. }))
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let claim = store.claim("orders", "pay_7f3").await.unwrap().unwrap();
    assert_eq!(claim.version, version + 1, "one change, one version");
    let (winner, loser_sees) = match claim.status {
        ClaimStatus::Sent => ("olga", &outcomes[1]),
        ClaimStatus::Failed => ("pete", &outcomes[0]),
        other => panic!("{other}"),
    };
    match loser_sees {
        ActionOutcome::Conflict { by, at, now } => {
            assert_eq!(by, winner);
            assert!(at.is_some());
            assert!(now.starts_with(claim.status.as_str()), "{now}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store
            .audit_for_key("orders", "pay_7f3")
            .await
            .unwrap()
            .len(),
        1,
        "only the winner is audited"
    );
}

async fn a_repeated_action_id_returns_the_first_outcome_and_has_one_effect(store: &Store) {
    let id = dead_lettered(
        store,
        "refund:43",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let first = store
        .replay_dead_letter(&replay(id, "same-id"))
        .await
        .unwrap();
    let again = store
        .replay_dead_letter(&replay(id, "same-id"))
        .await
        .unwrap();
    assert_eq!(first, again);
    assert!(matches!(
        first,
        ActionOutcome::Done {
            outbox_id: Some(_),
            ..
        }
    ));
    // Concurrent twins of one action id (a double click): one effect, one answer.
    let id2 = dead_lettered(
        store,
        "refund:44",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let twin = replay(id2, "double");
    let (x, y) = tokio::join!(
        store.replay_dead_letter(&twin),
        store.replay_dead_letter(&twin)
    );
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(
        matches!(x, ActionOutcome::Done { .. }) || matches!(y, ActionOutcome::Done { .. }),
        "{x:?} {y:?}"
    );
    assert_eq!(
        store
            .outbox_for_key("orders", "refund:44")
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .audit_for_key("orders", "refund:44")
            .await
            .unwrap()
            .len(),
        1
    );
}

/// Two open dead letters of one key, as a key page shows them.
async fn two_dead_letters(store: &Store, key: &str) -> (i64, i64) {
    let first = dead_lettered(
        store,
        key,
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let mut tx = store.begin().await.unwrap();
    let second = tx
        .dead_letter(&NewDeadLetter {
            consumer: "orders",
            queue: "orders.fifo",
            key,
            message_id: "m-2",
            payload: r#"{"order":"42","again":true}"#,
            delivery_count: 3,
            first_failure_at: ago(15),
            last_error: Some("429 Too Many Requests"),
            at: ago(10),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    (first, second)
}

fn reused(outcome: &ActionOutcome) -> &str {
    match outcome {
        ActionOutcome::FormReused { first } => first,
        other => panic!("expected the id to be refused as reused, got {other:?}"),
    }
}

async fn an_action_id_used_for_one_dead_letter_is_refused_for_another_and_does_nothing(
    store: &Store,
) {
    let (first, second) = two_dead_letters(store, "refund:45").await;
    let done = store
        .replay_dead_letter(&replay(first, "page-form"))
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
    let again = store
        .replay_dead_letter(&replay(second, "page-form"))
        .await
        .unwrap();
    let said = reused(&again);
    assert!(
        said.contains(&format!("Dead letter #{first} replayed")),
        "the refusal names what the id did: {said}"
    );
    assert!(!said.contains(&format!("#{second}")), "{said}");
    let discard = store
        .discard_dead_letter(&DiscardRequest {
            dead_letter_id: first,
            action_id: "page-form",
            actor: OLGA,
            reason: "already sent",
        })
        .await
        .unwrap();
    reused(&discard);

    let letters = store
        .dead_letters_for_key("orders", "refund:45")
        .await
        .unwrap();
    let state = |id| letters.iter().find(|d| d.id == id).unwrap().state;
    assert_eq!(state(first), DeadLetterState::Replayed);
    assert_eq!(
        state(second),
        DeadLetterState::Open,
        "the second dead letter is untouched"
    );
    assert_eq!(
        store
            .outbox_for_key("orders", "refund:45")
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .audit_for_key("orders", "refund:45")
            .await
            .unwrap()
            .len(),
        1
    );

    // Its own id replays it, and the first id still answers for the first.
    let own = store
        .replay_dead_letter(&replay(second, "second-form"))
        .await
        .unwrap();
    assert!(own.is_done(), "{own:?}");
    assert_eq!(
        store
            .replay_dead_letter(&replay(first, "page-form"))
            .await
            .unwrap(),
        done,
        "a resubmission of the first form still gets the first outcome"
    );
}

async fn an_action_id_used_to_resolve_a_key_is_refused_for_a_replay_and_another_resolution(
    store: &Store,
) {
    let version = unknown_claim(store, "pay_9").await;
    let resolve = |key, resolution| ResolveRequest {
        consumer: "orders",
        key,
        version,
        resolution,
        action_id: "resolve-form",
        actor: OLGA,
        reason: Some("checked with the provider"),
    };
    let sent = Resolution::Sent {
        provider_ref: "pi_9".into(),
    };
    let done = store
        .resolve_unknown(&resolve("pay_9", sent.clone()))
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
    assert_eq!(
        store
            .resolve_unknown(&resolve("pay_9", sent.clone()))
            .await
            .unwrap(),
        done,
        "the same form again is the same action"
    );
    reused(
        &store
            .resolve_unknown(&resolve("pay_9", Resolution::FailedRetry))
            .await
            .unwrap(),
    );
    // The same form, sent about a later version of the claim (it went
    // unknown again): another target, not the first resolution again.
    reused(
        &store
            .resolve_unknown(&ResolveRequest {
                version: version + 2,
                ..resolve("pay_9", sent.clone())
            })
            .await
            .unwrap(),
    );
    let other_version = unknown_claim(store, "pay_10").await;
    let other = store
        .resolve_unknown(&ResolveRequest {
            version: other_version,
            ..resolve("pay_10", sent)
        })
        .await
        .unwrap();
    reused(&other);
    let claim = store.claim("orders", "pay_10").await.unwrap().unwrap();
    assert_eq!(
        claim.status,
        ClaimStatus::Unknown,
        "the other key is untouched"
    );

    let dead_letter = dead_lettered(
        store,
        "pay_11",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let said = reused(
        &store
            .replay_dead_letter(&replay(dead_letter, "resolve-form"))
            .await
            .unwrap(),
    )
    .to_owned();
    assert!(said.contains("Outcome resolved: sent"), "{said}");
    assert!(said.contains("pay_9"), "{said}");
    assert!(
        store
            .outbox_for_key("orders", "pay_11")
            .await
            .unwrap()
            .is_empty()
    );
}

async fn an_action_id_is_bound_to_the_person_who_used_it(store: &Store) {
    let id = dead_lettered(
        store,
        "refund:46",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let done = store
        .replay_dead_letter(&replay(id, "olgas-form"))
        .await
        .unwrap();
    assert!(done.is_done());
    let by_pete = store
        .replay_dead_letter(&ReplayRequest {
            actor: PETE,
            ..replay(id, "olgas-form")
        })
        .await
        .unwrap();
    assert!(reused(&by_pete).contains("by olga"), "{by_pete:?}");
}

async fn a_stale_version_is_refused_with_the_current_state(store: &Store) {
    let version = unknown_claim(store, "pay_8").await;
    let stale = ResolveRequest {
        consumer: "orders",
        key: "pay_8",
        version: version - 1,
        resolution: Resolution::Sent {
            provider_ref: "ch_8".into(),
        },
        action_id: "stale",
        actor: OLGA,
        reason: None,
    };
    match store.resolve_unknown(&stale).await.unwrap() {
        ActionOutcome::Conflict { now, .. } => {
            assert_eq!(now, format!("unknown (version {version})"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store
            .claim("orders", "pay_8")
            .await
            .unwrap()
            .unwrap()
            .status,
        ClaimStatus::Unknown
    );
    assert!(
        store
            .audit_for_key("orders", "pay_8")
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_rolled_back_action_leaves_no_audit_row(store: &Store) {
    let id = dead_lettered(
        store,
        "refund:45",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    // Make the last write of a replay fail: the outbox refuses inserts.
    execute_raw(
        store,
        "CREATE TRIGGER refuse_outbox BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        "CREATE FUNCTION refuse_outbox() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$; \
         CREATE TRIGGER refuse_outbox BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION refuse_outbox();",
    )
    .await
    .unwrap();
    assert!(
        store
            .replay_dead_letter(&replay(id, "doomed"))
            .await
            .is_err()
    );
    assert!(
        store
            .audit_for_key("orders", "refund:45")
            .await
            .unwrap()
            .is_empty(),
        "no audit row without the effect"
    );
    assert_eq!(
        store.dead_letter(id).await.unwrap().unwrap().state,
        DeadLetterState::Open,
        "and no effect"
    );
}

async fn the_audit_log_refuses_updates_and_deletes(store: &Store) {
    let id = dead_lettered(
        store,
        "refund:46",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    store.replay_dead_letter(&replay(id, "kept")).await.unwrap();
    let update = execute_raw(
        store,
        "UPDATE audit_log SET actor = 'mallory'",
        "UPDATE audit_log SET actor = 'mallory'",
    )
    .await;
    assert!(update.unwrap_err().to_string().contains("append-only"));
    let delete = execute_raw(store, "DELETE FROM audit_log", "DELETE FROM audit_log").await;
    assert!(delete.unwrap_err().to_string().contains("append-only"));
    assert_eq!(
        store.audit_for_key("orders", "refund:46").await.unwrap()[0].actor,
        "olga"
    );
}

async fn each_replay_verdict_is_applied(store: &Store) {
    // Sent: blocked without an override, allowed with one and a reason.
    let sent = dead_lettered(
        store,
        "v:sent",
        Outcome::Sent {
            provider_ref: Some("ch"),
        },
    )
    .await;
    let blocked = store.replay_dead_letter(&replay(sent, "v1")).await.unwrap();
    assert!(
        matches!(&blocked, ActionOutcome::Refused { reason } if reason.starts_with("Blocked: the effect already happened")),
        "{blocked:?}"
    );
    let no_reason = ReplayRequest {
        override_verdict: true,
        ..replay(sent, "v2")
    };
    assert!(matches!(
        store.replay_dead_letter(&no_reason).await.unwrap(),
        ActionOutcome::Refused { .. }
    ));
    let overridden = ReplayRequest {
        override_verdict: true,
        reason: Some("the consumer lost its claims table"),
        ..replay(sent, "v3")
    };
    assert!(matches!(
        store.replay_dead_letter(&overridden).await.unwrap(),
        ActionOutcome::Done { .. }
    ));
    let audit = store.audit_for_key("orders", "v:sent").await.unwrap();
    assert!(
        audit[0]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("override (Blocked: the effect already happened)")
    );

    // Unknown: blocked likewise.
    let unknown = dead_lettered(store, "v:unknown", Outcome::Unknown { error: "timeout" }).await;
    assert!(
        matches!(store.replay_dead_letter(&replay(unknown, "v4")).await.unwrap(), ActionOutcome::Refused { reason } if reason.contains("outcome is unknown"))
    );

    // Failed: safe. Beyond retention: allowed (with the warning shown before).
    let failed = dead_lettered(store, "v:failed", Outcome::Permanent { error: "x" }).await;
    assert!(matches!(
        store
            .replay_dead_letter(&replay(failed, "v5"))
            .await
            .unwrap(),
        ActionOutcome::Done { .. }
    ));
    let old = dead_lettered(store, "v:old", Outcome::Permanent { error: "x" }).await;
    let short_retention = ReplayRequest {
        retention: TimeDelta::minutes(1),
        ..replay(old, "v6")
    };
    assert!(matches!(
        store.replay_dead_letter(&short_retention).await.unwrap(),
        ActionOutcome::Done { .. }
    ));
}

async fn only_a_dead_letter_whose_key_is_sent_can_be_discarded(store: &Store) {
    let failed = dead_lettered(store, "d:failed", Outcome::Permanent { error: "x" }).await;
    let discard = |id, action_id, reason| DiscardRequest {
        dead_letter_id: id,
        action_id,
        actor: OLGA,
        reason,
    };
    assert!(matches!(
        store
            .discard_dead_letter(&discard(failed, "d1", "dup"))
            .await
            .unwrap(),
        ActionOutcome::Refused { .. }
    ));
    let sent = dead_lettered(
        store,
        "d:sent",
        Outcome::Sent {
            provider_ref: Some("ch"),
        },
    )
    .await;
    assert!(
        matches!(
            store
                .discard_dead_letter(&discard(sent, "d2", " "))
                .await
                .unwrap(),
            ActionOutcome::Refused { .. }
        ),
        "a reason is required"
    );
    assert!(matches!(
        store
            .discard_dead_letter(&discard(sent, "d3", "effect happened"))
            .await
            .unwrap(),
        ActionOutcome::Done {
            outbox_id: None,
            ..
        }
    ));
    assert_eq!(
        store.dead_letter(sent).await.unwrap().unwrap().state,
        DeadLetterState::Discarded
    );
    let late = store.replay_dead_letter(&replay(sent, "d4")).await.unwrap();
    assert!(
        matches!(late, ActionOutcome::Conflict { ref by, ref now, .. } if by == "olga" && now == "discarded"),
        "{late:?}"
    );
}

async fn resolving_failed_with_a_retry_queues_the_same_key_through_the_outbox(store: &Store) {
    let version = unknown_claim(store, "pay_9").await;
    let retry = ResolveRequest {
        consumer: "orders",
        key: "pay_9",
        version,
        resolution: Resolution::FailedRetry,
        action_id: "r1",
        actor: OLGA,
        reason: Some("provider says it never arrived"),
    };
    let ActionOutcome::Done {
        outbox_id: Some(outbox_id),
        ..
    } = store.resolve_unknown(&retry).await.unwrap()
    else {
        panic!("a retry writes an outbox row");
    };
    let outbox = store.outbox_for_key("orders", "pay_9").await.unwrap();
    assert_eq!(
        (
            outbox[0].id,
            outbox[0].origin.as_str(),
            outbox[0].key.as_str()
        ),
        (outbox_id, "resolution", "pay_9")
    );
    assert_eq!(
        store
            .claim("orders", "pay_9")
            .await
            .unwrap()
            .unwrap()
            .status,
        ClaimStatus::Failed
    );

    // Sent needs a reference; failed for good needs a reason.
    let v2 = unknown_claim(store, "pay_10").await;
    let base = ResolveRequest {
        key: "pay_10",
        version: v2,
        action_id: "r2",
        reason: None,
        ..retry.clone()
    };
    let no_ref = ResolveRequest {
        resolution: Resolution::Sent {
            provider_ref: "  ".into(),
        },
        ..base.clone()
    };
    assert!(matches!(
        store.resolve_unknown(&no_ref).await.unwrap(),
        ActionOutcome::Refused { .. }
    ));
    let no_reason = ResolveRequest {
        resolution: Resolution::FailedPermanently,
        action_id: "r3",
        ..base
    };
    assert!(matches!(
        store.resolve_unknown(&no_reason).await.unwrap(),
        ActionOutcome::Refused { .. }
    ));
}

async fn actions_record_how_long_recovery_took(store: &Store) {
    let id = dead_lettered(store, "rec:1", Outcome::Permanent { error: "x" }).await;
    store.replay_dead_letter(&replay(id, "rec")).await.unwrap();
    let seconds = store.audit_for_key("orders", "rec:1").await.unwrap()[0]
        .recovery_seconds
        .unwrap();
    assert!(
        (19.0 * 60.0..21.0 * 60.0).contains(&seconds),
        "dead-lettered 20 minutes ago: {seconds}"
    );
}

async fn an_action_dated_ahead_happens_now_and_none_recovers_in_negative_time(store: &Store) {
    // A replay dated an hour ahead is recorded as of now.
    let id = dead_lettered(store, "ahead:1", Outcome::Permanent { error: "x" }).await;
    let before = chrono::Utc::now();
    store
        .replay_dead_letter_at(&replay(id, "ahead"), ago(-60))
        .await
        .unwrap();
    let replayed = &store.audit_for_key("orders", "ahead:1").await.unwrap()[0];
    assert!(
        replayed.at >= before - TimeDelta::seconds(1) && replayed.at <= chrono::Utc::now(),
        "recorded at {}, not an hour ahead",
        replayed.at
    );
    let seconds = replayed.recovery_seconds.unwrap();
    assert!(
        (19.0 * 60.0..21.0 * 60.0).contains(&seconds),
        "dead-lettered 20 minutes before now: {seconds}"
    );

    // A resolution dated before the outcome went unknown (29 minutes ago)
    // keeps its date but took no time, not minus eleven minutes.
    let version = unknown_claim(store, "behind:1").await;
    let done = store
        .resolve_unknown_at(
            &ResolveRequest {
                consumer: "orders",
                key: "behind:1",
                version,
                resolution: Resolution::FailedRetry,
                action_id: "behind",
                actor: OLGA,
                reason: None,
            },
            ago(40),
        )
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
    let resolved = &store.audit_for_key("orders", "behind:1").await.unwrap()[0];
    assert!(resolved.at < ago(39).0, "kept its date: {}", resolved.at);
    assert_eq!(resolved.recovery_seconds, Some(0.0));
}

async fn a_replayed_key_s_records_read_together_equal_each_read_alone(store: &Store) {
    let key = "refund:47 / ✓ 100% #מפתח";
    let id = dead_lettered(
        store,
        key,
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    store
        .replay_dead_letter(&replay(id, "replay-records"))
        .await
        .unwrap();

    let records = store.key_records("orders", key).await.unwrap();
    assert!(!records.is_empty());
    let claim = records.claim.as_ref().expect("the key's claim");
    assert_eq!(
        (claim.key.as_str(), claim.status),
        (key, ClaimStatus::Failed)
    );
    assert_eq!(
        (
            records.outbox.len(),
            records.dead_letters.len(),
            records.audit.len()
        ),
        (1, 1, 1),
        "one replay row, one dead letter, one audit entry"
    );
    assert_eq!(records.claim, store.claim("orders", key).await.unwrap());
    assert_eq!(
        records.outbox,
        store.outbox_for_key("orders", key).await.unwrap()
    );
    assert_eq!(
        records.dead_letters,
        store.dead_letters_for_key("orders", key).await.unwrap()
    );
    assert_eq!(
        records.audit,
        store.audit_for_key("orders", key).await.unwrap()
    );

    let nothing = store.key_records("orders", "refund:never").await.unwrap();
    assert!(nothing.is_empty());
    // Another consumer's records of the same key are not this key's.
    assert!(store.key_records("payments", key).await.unwrap().is_empty());
}
