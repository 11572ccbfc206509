//! What each action does: replay verdicts, discards, resolutions that retry,
//! and the records of a replayed key.

use chrono::TimeDelta;
use idem_domain::{
    ClaimStatus, DeadLetterState,
    action::{ActionOutcome, Resolution},
};
use idem_store::{DiscardRequest, Outcome, ReplayRequest, ResolveRequest, Store, testing};

use super::{OLGA, dead_lettered, replay, unknown_claim};

idem_store::on_both_backends!(
    each_replay_verdict_is_applied,
    only_a_dead_letter_whose_key_is_sent_can_be_discarded,
    resolving_failed_with_a_retry_queues_the_same_key_through_the_outbox,
    a_replayed_key_s_records_read_together_equal_each_read_alone,
);

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
    let blocked = store
        .actions()
        .replay_dead_letter(&replay(sent, &testing::action_id("verdict-1")))
        .await
        .unwrap();
    assert!(
        matches!(&blocked, ActionOutcome::Refused { reason } if reason.starts_with("Blocked: the effect already happened")),
        "{blocked:?}"
    );
    let verdict_2 = testing::action_id("verdict-2");
    let no_reason = ReplayRequest {
        override_verdict: true,
        ..replay(sent, &verdict_2)
    };
    assert!(matches!(
        store
            .actions()
            .replay_dead_letter(&no_reason)
            .await
            .unwrap(),
        ActionOutcome::Refused { .. }
    ));
    let verdict_3 = testing::action_id("verdict-3");
    let overridden = ReplayRequest {
        override_verdict: true,
        reason: Some(idem_store::testing::reason(
            "the consumer lost its claims table",
        )),
        ..replay(sent, &verdict_3)
    };
    assert!(matches!(
        store
            .actions()
            .replay_dead_letter(&overridden)
            .await
            .unwrap(),
        ActionOutcome::Done { .. }
    ));
    let audit = store
        .claims()
        .audit_for_key(&testing::consumer("orders"), &testing::key("v:sent"))
        .await
        .unwrap();
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
        matches!(store.actions().replay_dead_letter(&replay(unknown, &testing::action_id("verdict-4"))).await.unwrap(), ActionOutcome::Refused { reason } if reason.contains("outcome is unknown"))
    );

    // Failed: safe. Beyond retention: allowed (with the warning shown before).
    let failed = dead_lettered(store, "v:failed", Outcome::Permanent { error: "x" }).await;
    assert!(matches!(
        store
            .actions()
            .replay_dead_letter(&replay(failed, &testing::action_id("verdict-5")))
            .await
            .unwrap(),
        ActionOutcome::Done { .. }
    ));
    let old = dead_lettered(store, "v:old", Outcome::Permanent { error: "x" }).await;
    let verdict_6 = testing::action_id("verdict-6");
    let short_retention = ReplayRequest {
        retention: &idem_domain::ClaimRetention::new(TimeDelta::minutes(1)),
        ..replay(old, &verdict_6)
    };
    assert!(matches!(
        store
            .actions()
            .replay_dead_letter(&short_retention)
            .await
            .unwrap(),
        ActionOutcome::Done { .. }
    ));
}

async fn only_a_dead_letter_whose_key_is_sent_can_be_discarded(store: &Store) {
    let failed = dead_lettered(store, "d:failed", Outcome::Permanent { error: "x" }).await;
    let [discard_1, discard_2, discard_3] =
        ["discard-1", "discard-2", "discard-3"].map(testing::action_id);
    let discard = |id, action_id, reason| DiscardRequest {
        scope: &idem_domain::Within::Every,
        dead_letter_id: idem_domain::DeadLetterId::of_row(id),
        action_id,
        actor: OLGA,
        reason: idem_store::testing::reason(reason),
    };
    assert!(matches!(
        store
            .actions()
            .discard_dead_letter(&discard(failed, &discard_1, "dup"))
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
    // A discard without a reason cannot be asked: `Reason` is never empty.
    assert_eq!(idem_domain::action::Reason::parse(" "), Ok(None));
    let _ = &discard_2;
    assert!(matches!(
        store
            .actions()
            .discard_dead_letter(&discard(sent, &discard_3, "effect happened"))
            .await
            .unwrap(),
        ActionOutcome::Done {
            outbox_id: None,
            ..
        }
    ));
    assert_eq!(
        store
            .claims()
            .dead_letter(
                idem_domain::DeadLetterId::of_row(sent),
                &idem_domain::Within::Every
            )
            .await
            .unwrap()
            .unwrap()
            .state,
        DeadLetterState::Discarded
    );
    let late = store
        .actions()
        .replay_dead_letter(&replay(sent, &testing::action_id("discard-4")))
        .await
        .unwrap();
    assert!(
        matches!(late, ActionOutcome::Conflict { ref by, ref now, .. } if by == "olga" && now == "discarded"),
        "{late:?}"
    );
}

async fn resolving_failed_with_a_retry_queues_the_same_key_through_the_outbox(store: &Store) {
    let version = unknown_claim(store, "pay_9").await;
    let (orders, pay_9) = (testing::consumer("orders"), testing::key("pay_9"));
    let resolve_1 = testing::action_id("resolve-1");
    let retry = ResolveRequest {
        scope: &idem_domain::Within::Every,
        consumer: &orders,
        key: &pay_9,
        version,
        resolution: Resolution::FailedRetry,
        action_id: &resolve_1,
        actor: OLGA,
        reason: Some(idem_store::testing::reason(
            "provider says it never arrived",
        )),
    };
    let ActionOutcome::Done {
        outbox_id: Some(outbox_id),
        ..
    } = store.actions().resolve_unknown(&retry).await.unwrap()
    else {
        panic!("a retry writes an outbox row");
    };
    let outbox = store
        .claims()
        .outbox_for_key(&orders, &pay_9)
        .await
        .unwrap();
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
            .claims()
            .claim(&orders, &pay_9)
            .await
            .unwrap()
            .unwrap()
            .status,
        ClaimStatus::Failed
    );

    // Sent needs a reference (a blank one is none, so it cannot be asked
    // for); failed for good needs a reason.
    assert_eq!(idem_domain::action::ProviderRef::parse("  "), Ok(None));
    let v2 = unknown_claim(store, "pay_10").await;
    let (pay_10, resolve_2) = (testing::key("pay_10"), testing::action_id("resolve-2"));
    let base = ResolveRequest {
        key: &pay_10,
        version: v2,
        action_id: &resolve_2,
        reason: None,
        ..retry.clone()
    };
    let resolve_3 = testing::action_id("resolve-3");
    let no_reason = ResolveRequest {
        resolution: Resolution::FailedPermanently,
        action_id: &resolve_3,
        ..base
    };
    assert!(matches!(
        store.actions().resolve_unknown(&no_reason).await.unwrap(),
        ActionOutcome::Refused { .. }
    ));
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
        .actions()
        .replay_dead_letter(&replay(id, &testing::action_id("replay-records")))
        .await
        .unwrap();

    let (orders, typed_key) = (testing::consumer("orders"), testing::key(key));
    let records = store
        .claims()
        .key_records(&orders, &typed_key, &idem_domain::Within::Every)
        .await
        .unwrap();
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
    assert_eq!(
        records.claim,
        store.claims().claim(&orders, &typed_key).await.unwrap()
    );
    assert_eq!(
        records.outbox,
        store
            .claims()
            .outbox_for_key(&orders, &typed_key)
            .await
            .unwrap()
    );
    assert_eq!(
        records.dead_letters,
        store
            .claims()
            .dead_letters_for_key(&orders, &typed_key)
            .await
            .unwrap()
    );
    assert_eq!(
        records.audit,
        store
            .claims()
            .audit_for_key(&orders, &typed_key)
            .await
            .unwrap()
    );

    let nothing = store
        .claims()
        .key_records(
            &orders,
            &testing::key("refund:never"),
            &idem_domain::Within::Every,
        )
        .await
        .unwrap();
    assert!(nothing.is_empty());
    // Another consumer's records of the same key are not this key's.
    assert!(
        store
            .claims()
            .key_records(
                &testing::consumer("payments"),
                &typed_key,
                &idem_domain::Within::Every
            )
            .await
            .unwrap()
            .is_empty()
    );
}
