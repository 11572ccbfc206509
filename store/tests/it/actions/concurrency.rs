//! Actions that race: one wins, the others see a conflict or the winner's
//! outcome; a stale version is refused.

use std::sync::Arc;

use idem_domain::{
    ClaimStatus, DeadLetterState,
    action::{ActionOutcome, Resolution},
};
use idem_store::{Actor, Outcome, ResolveRequest, Store, testing};
use tokio::sync::Barrier;

use super::{OLGA, PETE, dead_lettered, replay, unknown_claim};

idem_store::on_both_backends!(
    fifty_concurrent_replays_of_one_dead_letter_make_one_outbox_row_and_one_audit_row,
    two_operators_resolving_one_key_at_once_get_one_success_and_one_conflict_naming_the_winner,
    a_stale_version_is_refused_with_the_current_state,
    a_conflict_names_who_changed_the_claim_not_who_last_touched_the_key,
);

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
                let action_id = testing::action_id(&format!("replay-{i}"));
                store
                    .actions()
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
    let (orders, key) = (testing::consumer("orders"), testing::key("refund:42"));
    let outbox = store.claims().outbox_for_key(&orders, &key).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(
        (outbox[0].dead_letter_id, outbox[0].origin.as_str()),
        (Some(id), "replay")
    );
    let audit = store.claims().audit_for_key(&orders, &key).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].action.as_str(), audit[0].result.as_str()),
        ("replay", "ok")
    );
    assert_eq!(outbox[0].audit_id, Some(audit[0].id));
    let dl = store
        .claims()
        .dead_letter(
            idem_domain::DeadLetterId::of_row(id),
            &idem_domain::Within::Every,
        )
        .await
        .unwrap()
        .unwrap();
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
                .actions()
                .resolve_unknown(&ResolveRequest {
                    scope: &idem_domain::Within::Every,
                    consumer: &testing::consumer("orders"),
                    key: &testing::key("pay_7f3"),
                    version,
                    resolution,
                    action_id: &testing::action_id(action_id),
                    actor,
                    reason: Some(idem_store::testing::reason(
                        "checked the provider's dashboard",
                    )),
                })
                .await
                .unwrap()
        })
    };
    let a = run(
        OLGA,
        Resolution::Sent {
            provider_ref: idem_store::testing::provider_ref("ch_1"),
        },
        "action-a",
    );
    let b = run(PETE, Resolution::FailedPermanently, "action-b");
    let outcomes = [a.await.unwrap(), b.await.unwrap()];
    let winners: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, ActionOutcome::Done { .. }))
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let (orders, key) = (testing::consumer("orders"), testing::key("pay_7f3"));
    let claim = store.claims().claim(&orders, &key).await.unwrap().unwrap();
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
            .claims()
            .audit_for_key(&orders, &key)
            .await
            .unwrap()
            .len(),
        1,
        "only the winner is audited"
    );
}

async fn a_stale_version_is_refused_with_the_current_state(store: &Store) {
    let version = unknown_claim(store, "pay_8").await;
    let (orders, key) = (testing::consumer("orders"), testing::key("pay_8"));
    let stale_form = testing::action_id("stale-form");
    let stale = ResolveRequest {
        scope: &idem_domain::Within::Every,
        consumer: &orders,
        key: &key,
        version: version - 1,
        resolution: Resolution::Sent {
            provider_ref: idem_store::testing::provider_ref("ch_8"),
        },
        action_id: &stale_form,
        actor: OLGA,
        reason: None,
    };
    match store.actions().resolve_unknown(&stale).await.unwrap() {
        ActionOutcome::Conflict { now, .. } => {
            assert_eq!(now, format!("unknown (version {version})"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store
            .claims()
            .claim(&orders, &key)
            .await
            .unwrap()
            .unwrap()
            .status,
        ClaimStatus::Unknown
    );
    assert!(
        store
            .claims()
            .audit_for_key(&orders, &key)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_conflict_names_who_changed_the_claim_not_who_last_touched_the_key(store: &Store) {
    const ADA: Actor<'static> = Actor {
        name: "ada",
        role: "operator",
        client_addr: None,
    };
    let version = unknown_claim(store, "pay_9").await;
    let (orders, key) = (testing::consumer("orders"), testing::key("pay_9"));
    let (olga_form, ada_form) = (
        testing::action_id("resolve-olga-9"),
        testing::action_id("resolve-ada-9"),
    );
    let resolve = |actor: Actor<'static>, action_id| ResolveRequest {
        scope: &idem_domain::Within::Every,
        consumer: &orders,
        key: &key,
        version,
        resolution: Resolution::Sent {
            provider_ref: idem_store::testing::provider_ref("ch_9"),
        },
        action_id,
        actor,
        reason: None,
    };
    let first = store
        .actions()
        .resolve_unknown(&resolve(OLGA, &olga_form))
        .await
        .unwrap();
    assert!(first.is_done(), "{first:?}");
    // Later, Pete touches the key (another entry about it in the audit
    // log) without changing its claim.
    store
        .audit()
        .append_audit(&idem_store::NewAuditEntry {
            consumer: Some("orders"),
            key: Some("pay_9"),
            ..idem_store::NewAuditEntry::new(
                "pete",
                "operator",
                idem_domain::AuditAction::Replay,
                idem_domain::AuditResult::Ok,
            )
        })
        .await
        .unwrap();
    let stale = store
        .actions()
        .resolve_unknown(&resolve(ADA, &ada_form))
        .await
        .unwrap();
    let ActionOutcome::Conflict { by, now, .. } = stale else {
        panic!("{stale:?}")
    };
    assert_eq!(by, "olga", "who changed the claim");
    assert!(now.starts_with("sent"), "{now}");
}
