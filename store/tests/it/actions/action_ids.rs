//! Action ids: a repeated one answers the first outcome; one used for
//! something else, or by someone else, is refused.

use idem_domain::{
    ClaimStatus, DeadLetterState,
    action::{ActionOutcome, Resolution},
};
use idem_store::{
    DiscardRequest, NewDeadLetter, Outcome, ReplayRequest, ResolveRequest, Store, testing,
};

use super::{OLGA, PETE, ago, dead_lettered, replay, unknown_claim};

idem_store::on_both_backends!(
    a_repeated_action_id_returns_the_first_outcome_and_has_one_effect,
    an_action_id_used_for_one_dead_letter_is_refused_for_another_and_does_nothing,
    an_action_id_used_to_resolve_a_key_is_refused_for_a_replay_and_another_resolution,
    an_action_id_is_bound_to_the_person_who_used_it,
);

async fn a_repeated_action_id_returns_the_first_outcome_and_has_one_effect(store: &Store) {
    let id = dead_lettered(
        store,
        "refund:43",
        Outcome::Permanent {
            error: "dead-lettered",
        },
    )
    .await;
    let same_id = testing::action_id("same-id-form");
    let first = store
        .actions()
        .replay_dead_letter(&replay(id, &same_id))
        .await
        .unwrap();
    let again = store
        .actions()
        .replay_dead_letter(&replay(id, &same_id))
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
    let double = testing::action_id("double-click");
    let twin = replay(id2, &double);
    let actions = store.actions();
    let (x, y) = tokio::join!(
        actions.replay_dead_letter(&twin),
        actions.replay_dead_letter(&twin)
    );
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(
        matches!(x, ActionOutcome::Done { .. }) || matches!(y, ActionOutcome::Done { .. }),
        "{x:?} {y:?}"
    );
    let (orders, key) = (testing::consumer("orders"), testing::key("refund:44"));
    assert_eq!(
        store
            .claims()
            .outbox_for_key(&orders, &key)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .claims()
            .audit_for_key(&orders, &key)
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
    let page_form = testing::action_id("page-form");
    let done = store
        .actions()
        .replay_dead_letter(&replay(first, &page_form))
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
    let again = store
        .actions()
        .replay_dead_letter(&replay(second, &page_form))
        .await
        .unwrap();
    let said = reused(&again);
    assert!(
        said.contains(&format!("Dead letter #{first} replayed")),
        "the refusal names what the id did: {said}"
    );
    assert!(!said.contains(&format!("#{second}")), "{said}");
    let discard = store
        .actions()
        .discard_dead_letter(&DiscardRequest {
            scope: &idem_domain::Within::Every,
            dead_letter_id: idem_domain::DeadLetterId::of_row(first),
            action_id: &page_form,
            actor: OLGA,
            reason: idem_store::testing::reason("already sent"),
        })
        .await
        .unwrap();
    reused(&discard);

    let (orders, key) = (testing::consumer("orders"), testing::key("refund:45"));
    let letters = store
        .claims()
        .dead_letters_for_key(&orders, &key)
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
            .claims()
            .outbox_for_key(&orders, &key)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .claims()
            .audit_for_key(&orders, &key)
            .await
            .unwrap()
            .len(),
        1
    );

    // Its own id replays it, and the first id still answers for the first.
    let own = store
        .actions()
        .replay_dead_letter(&replay(second, &testing::action_id("second-form")))
        .await
        .unwrap();
    assert!(own.is_done(), "{own:?}");
    assert_eq!(
        store
            .actions()
            .replay_dead_letter(&replay(first, &page_form))
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
    let orders = testing::consumer("orders");
    let resolve_form = testing::action_id("resolve-form");
    let (pay_9, pay_10) = (testing::key("pay_9"), testing::key("pay_10"));
    let resolve = |key, resolution| ResolveRequest {
        scope: &idem_domain::Within::Every,
        consumer: &orders,
        key,
        version,
        resolution,
        action_id: &resolve_form,
        actor: OLGA,
        reason: Some(idem_store::testing::reason("checked with the provider")),
    };
    let sent = Resolution::Sent {
        provider_ref: idem_store::testing::provider_ref("pi_9"),
    };
    let done = store
        .actions()
        .resolve_unknown(&resolve(&pay_9, sent.clone()))
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
    assert_eq!(
        store
            .actions()
            .resolve_unknown(&resolve(&pay_9, sent.clone()))
            .await
            .unwrap(),
        done,
        "the same form again is the same action"
    );
    reused(
        &store
            .actions()
            .resolve_unknown(&resolve(&pay_9, Resolution::FailedRetry))
            .await
            .unwrap(),
    );
    // The same form, sent about a later version of the claim (it went
    // unknown again): another target, not the first resolution again.
    reused(
        &store
            .actions()
            .resolve_unknown(&ResolveRequest {
                version: version + 2,
                ..resolve(&pay_9, sent.clone())
            })
            .await
            .unwrap(),
    );
    let other_version = unknown_claim(store, "pay_10").await;
    let other = store
        .actions()
        .resolve_unknown(&ResolveRequest {
            version: other_version,
            ..resolve(&pay_10, sent)
        })
        .await
        .unwrap();
    reused(&other);
    let claim = store
        .claims()
        .claim(&orders, &pay_10)
        .await
        .unwrap()
        .unwrap();
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
            .actions()
            .replay_dead_letter(&replay(dead_letter, &resolve_form))
            .await
            .unwrap(),
    )
    .to_owned();
    assert!(said.contains("Outcome resolved: sent"), "{said}");
    assert!(said.contains("pay_9"), "{said}");
    assert!(
        store
            .claims()
            .outbox_for_key(&orders, &testing::key("pay_11"))
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
    let olgas_form = testing::action_id("olgas-form");
    let done = store
        .actions()
        .replay_dead_letter(&replay(id, &olgas_form))
        .await
        .unwrap();
    assert!(done.is_done());
    let by_pete = store
        .actions()
        .replay_dead_letter(&ReplayRequest {
            actor: PETE,
            ..replay(id, &olgas_form)
        })
        .await
        .unwrap();
    assert!(reused(&by_pete).contains("by olga"), "{by_pete:?}");
}
