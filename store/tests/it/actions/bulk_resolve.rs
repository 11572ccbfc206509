//! Bulk resolve: the keys given, each bound to the version shown (or, for a
//! pasted list, the one it has as the run starts), each resolved through
//! the single resolution; a key changed meanwhile skipped and named.

use idem_domain::{
    BulkKey, ClaimStatus, ItemOutcome, RedriveState, ResolveAs, RunKind, action::ActionOutcome,
};
use idem_store::{Outcome, RedriveStart, Store, testing};

use super::{
    OLGA, PETE,
    bulk::{SENT, claim, key, pete_resolves, resolve, started_run},
    redrive::{operators, run_to_end, step, stop},
    unknown_claim,
};

idem_store::on_both_backends!(
    a_bulk_resolve_skips_a_key_changed_since_it_was_shown_and_resolves_the_rest,
    a_bulk_resolve_of_a_pasted_list_binds_each_key_as_the_run_starts,
    a_bulk_resolve_with_a_bad_list_starts_nothing,
    a_stopped_bulk_resolve_leaves_the_keys_it_had_not_taken_unknown,
    resubmitting_a_bulk_resolve_starts_nothing_new,
    a_bulk_resolve_stops_when_its_starter_is_demoted,
    an_item_the_database_refuses_is_skipped_and_the_run_goes_on,
);

async fn a_bulk_resolve_skips_a_key_changed_since_it_was_shown_and_resolves_the_rest(
    store: &Store,
) {
    operators(store).await;
    let keys = ["pay:1 💶", "pay/2%#", "pay:3 مرحبا", "pay:4"];
    let mut versions = Vec::new();
    for k in keys {
        versions.push(unknown_claim(store, k).await);
    }
    // Shown to Olga; Pete settles the second before she presses.
    pete_resolves(store, keys[1], versions[1]).await;
    let listed: Vec<BulkKey> = keys
        .iter()
        .zip(&versions)
        .enumerate()
        .map(|(n, (k, v))| key(k, Some(*v), Some(&format!("msg_{n}"))))
        .collect();
    let form = testing::action_id("bulk-resolve-0001");
    let start = store
        .runs()
        .start_bulk_resolve(&resolve(&listed, ResolveAs::Sent, &form, OLGA))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    // And the fourth after she pressed, before the run reaches it: failed
    // and retried, and the retry's outcome unknown again — unknown as
    // shown, but not the attempt she looked at.
    assert!(matches!(
        step(store, id).await,
        idem_store::RedriveStep::Item(_)
    ));
    pete_resolves(store, keys[3], versions[3]).await;
    let mut tx = store.begin().await.unwrap();
    let retried = super::claimed(&mut tx, keys[3], Outcome::Unknown { error: "timeout" }).await;
    tx.commit().await.unwrap();
    assert_eq!(retried.status, ClaimStatus::Unknown);
    assert!(retried.version > versions[3]);
    assert_eq!(run_to_end(store, id).await, 3);

    let (run, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run.kind, run.resolve_as),
        (RunKind::Resolve, Some(ResolveAs::Sent))
    );
    let outcomes: Vec<_> = items.iter().map(|i| i.outcome.unwrap()).collect();
    use ItemOutcome::{Resolved, Skipped};
    assert_eq!(outcomes, [Resolved, Skipped, Resolved, Skipped]);
    for skipped in [&items[1], &items[3]] {
        let why = skipped.reason.as_deref().unwrap();
        assert!(why.contains("pete"), "names who changed it: {why}");
    }
    for (n, k) in [(0, keys[0]), (2, keys[2])] {
        let c = claim(store, k).await;
        assert_eq!(c.status, ClaimStatus::Sent);
        assert_eq!(c.provider_ref.as_deref(), Some(&*format!("msg_{n}")));
    }
    let c = claim(store, keys[1]).await;
    assert_eq!(
        (c.status, c.provider_ref),
        (ClaimStatus::Failed, None),
        "Pete's stands"
    );
    let c = claim(store, keys[3]).await;
    assert_eq!(
        (c.status, c.provider_ref),
        (ClaimStatus::Unknown, None),
        "the retry's stands"
    );
    let audit = store.latest_audit(20).await.unwrap();
    let resolved: Vec<_> = audit
        .iter()
        .filter(|a| a.action == idem_domain::AuditAction::ResolveSent)
        .collect();
    assert_eq!(resolved.len(), 2, "one audit row per key resolved");
    let why = format!("bulk resolve #{id}: provider export of 03:00");
    assert!(resolved.iter().all(|a| a.reason.as_deref() == Some(&*why)));
    assert_eq!(
        audit[0].reason.as_deref(),
        Some("2 resolved, 2 skipped, 0 not taken")
    );
}

async fn a_bulk_resolve_of_a_pasted_list_binds_each_key_as_the_run_starts(store: &Store) {
    operators(store).await;
    let version = unknown_claim(store, "pay:1").await;
    let mut tx = store.begin().await.unwrap();
    super::claimed(&mut tx, "pay:2", SENT).await;
    tx.commit().await.unwrap();
    let pasted = idem_domain::parse_references(
        "consumer,key,reference\norders,pay:1,ch_1\norders,pay:2,ch_2\norders,pay:3,ch_3\n",
    )
    .unwrap();
    let form = testing::action_id("bulk-resolve-0002");
    let mut request = resolve(&pasted, ResolveAs::Sent, &form, OLGA);
    request.source = "a pasted list of references";
    let start = store.runs().start_bulk_resolve(&request).await.unwrap();
    let id = started_run(store, start).await;
    let (_, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        items[0].version,
        Some(version),
        "bound to the version it had"
    );
    run_to_end(store, id).await;
    let (_, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(items[0].outcome, Some(ItemOutcome::Resolved));
    assert_eq!(
        claim(store, "pay:1").await.provider_ref.as_deref(),
        Some("ch_1")
    );
    assert_eq!(items[1].outcome, Some(ItemOutcome::Skipped), "already sent");
    assert_eq!(
        claim(store, "pay:2").await.provider_ref.as_deref(),
        Some("msg_1")
    );
    let no_claim = items[2].reason.as_deref().unwrap();
    assert!(no_claim.contains("has a claim for"), "{no_claim}");
}

async fn a_bulk_resolve_with_a_bad_list_starts_nothing(store: &Store) {
    operators(store).await;
    let version = unknown_claim(store, "pay:1").await;
    let form = testing::action_id("bulk-resolve-0003");
    for (keys, how, says) in [
        (
            vec![key("pay:1", Some(version), None)],
            ResolveAs::Sent,
            "reference",
        ),
        (
            vec![
                key("pay:1", Some(version), Some("ch_1")),
                key("pay:1", Some(version), Some("ch_2")),
            ],
            ResolveAs::Sent,
            "listed twice",
        ),
        (
            vec![key("pay:1", Some(version), Some("ch_1"))],
            ResolveAs::FailedRetry,
            "no provider reference",
        ),
        (vec![], ResolveAs::FailedRetry, "no key"),
    ] {
        let start = store
            .runs()
            .start_bulk_resolve(&resolve(&keys, how, &form, OLGA))
            .await
            .unwrap();
        assert!(
            matches!(&start, RedriveStart::NotAllowed(why) if why.contains(says)),
            "{says}: {start:?}"
        );
    }
    let mut failed_for_good = resolve(&[], ResolveAs::Failed, &form, OLGA);
    let keys = [key("pay:1", Some(version), None)];
    failed_for_good.keys = &keys;
    failed_for_good.reason = None;
    let start = store
        .runs()
        .start_bulk_resolve(&failed_for_good)
        .await
        .unwrap();
    assert!(
        matches!(start, RedriveStart::NotAllowed(ref why) if why.contains("reason")),
        "{start:?}"
    );
    assert_eq!(testing::count_rows(store, "redrives").await, 0);
    assert_eq!(claim(store, "pay:1").await.status, ClaimStatus::Unknown);
}

async fn a_stopped_bulk_resolve_leaves_the_keys_it_had_not_taken_unknown(store: &Store) {
    operators(store).await;
    let mut keys = Vec::new();
    for n in 0..3 {
        let k = format!("pay:{n}");
        keys.push(key(&k, Some(unknown_claim(store, &k).await), None));
    }
    let form = testing::action_id("bulk-resolve-0004");
    let start = store
        .runs()
        .start_bulk_resolve(&resolve(&keys, ResolveAs::Failed, &form, OLGA))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    assert!(matches!(
        step(store, id).await,
        idem_store::RedriveStep::Item(_)
    ));
    let stopped = stop(store, id, "bulk-stop-0004", PETE).await;
    let ActionOutcome::Done { summary, .. } = &stopped else {
        panic!("stopped: {stopped:?}")
    };
    assert_eq!(
        summary,
        &format!(
            "Bulk resolve #{id} stopped (1 resolved, 0 skipped, 2 not taken): the outcomes it \
             had not taken stay as they were."
        )
    );
    assert_eq!(
        stop(store, id, "bulk-stop-0004", PETE).await,
        stopped,
        "pressed twice"
    );
    assert_eq!(step(store, id).await, idem_store::RedriveStep::Ended);
    assert_eq!(claim(store, "pay:0").await.status, ClaimStatus::Failed);
    for k in ["pay:1", "pay:2"] {
        assert_eq!(claim(store, k).await.status, ClaimStatus::Unknown);
    }
}

async fn resubmitting_a_bulk_resolve_starts_nothing_new(store: &Store) {
    operators(store).await;
    let k = key("pay:1", Some(unknown_claim(store, "pay:1").await), None);
    let other = key("pay:2", Some(unknown_claim(store, "pay:2").await), None);
    let form = testing::action_id("bulk-resolve-0005");
    let keys = [k];
    let first = store
        .runs()
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    let again = store
        .runs()
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    assert_eq!(first, again, "the same run");
    let others = [other];
    let reused = store
        .runs()
        .start_bulk_resolve(&resolve(&others, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    assert_eq!(
        reused,
        RedriveStart::FormReused,
        "another set under the same form"
    );
    let by_pete = store
        .runs()
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, PETE))
        .await
        .unwrap();
    assert_eq!(by_pete, RedriveStart::FormReused);
    assert_eq!(testing::count_rows(store, "redrives").await, 1);
}

async fn a_bulk_resolve_stops_when_its_starter_is_demoted(store: &Store) {
    operators(store).await;
    let mut keys = Vec::new();
    for n in 0..2 {
        let k = format!("pay:{n}");
        keys.push(key(&k, Some(unknown_claim(store, &k).await), None));
    }
    let form = testing::action_id("bulk-resolve-0006");
    let start = store
        .runs()
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    assert!(matches!(
        step(store, id).await,
        idem_store::RedriveStep::Item(_)
    ));
    store
        .people()
        .set_role(
            &idem_store::testing::account("olga"),
            idem_domain::Role::Viewer,
        )
        .await
        .unwrap();
    assert_eq!(step(store, id).await, idem_store::RedriveStep::Ended);
    let (run, _) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.state, RedriveState::Stopped);
    assert_eq!(
        run.end_reason.as_deref(),
        Some("olga is no longer an operator (now viewer)")
    );
    assert_eq!(claim(store, "pay:1").await.status, ClaimStatus::Unknown);
}

async fn an_item_the_database_refuses_is_skipped_and_the_run_goes_on(store: &Store) {
    operators(store).await;
    let mut keys = Vec::new();
    for n in 1..=2 {
        let k = format!("pay:{n}");
        keys.push(key(&k, Some(unknown_claim(store, &k).await), None));
    }
    let elsewhere = unknown_claim(store, "pay:9").await;
    let form = testing::action_id("bulk-resolve-0008");
    let start = store
        .runs()
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    // An action took the id the run derives for its first item (which
    // only whoever holds the run's form could know): its audit row refuses
    // the run's.
    let taken = testing::run_key_action_id(&form, 1);
    let (c, k) = (
        idem_domain::ConsumerName::parse("orders").unwrap(),
        idem_domain::IdempotencyKey::parse("pay:9").unwrap(),
    );
    let by_hand = store
        .actions()
        .resolve_unknown(&idem_store::ResolveRequest {
            scope: &idem_domain::Within::Every,
            consumer: &c,
            key: &k,
            version: elsewhere,
            resolution: idem_domain::action::Resolution::FailedRetry,
            action_id: &taken,
            actor: PETE,
            reason: None,
        })
        .await
        .unwrap();
    assert!(by_hand.is_done());
    assert_eq!(run_to_end(store, id).await, 2, "the run is not held up");
    let (run, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.state, RedriveState::Finished);
    assert_eq!(items[0].outcome, Some(ItemOutcome::Skipped));
    let why = items[0].reason.as_deref().unwrap();
    assert!(why.contains("database refused"), "{why}");
    assert_eq!(
        claim(store, "pay:1").await.status,
        ClaimStatus::Unknown,
        "nothing of it stays"
    );
    assert_eq!(
        testing::count_rows(store, "outbox WHERE idempotency_key = 'pay:1'").await,
        0
    );
    assert_eq!(items[1].outcome, Some(ItemOutcome::Resolved));
    assert_eq!(claim(store, "pay:2").await.status, ClaimStatus::Failed);
}
