//! Bulk discard and bulk resolve: runs on the redrive's machinery, each
//! item through the single discard or resolution with its own
//! compare-and-set and audit row; bound to what was shown, stoppable,
//! idempotent as a whole.

use idem_domain::{
    BulkKey, ClaimStatus, ConsumerName, DeadLetterState, IdempotencyKey, ItemOutcome, RedriveState,
    ResolveAs, RunKind,
    action::{ActionOutcome, Resolution},
};
use idem_store::{
    Actor, BulkResolveRequest, DeadLetterFilter, LetterRun, Outcome, RedriveRequest, RedriveStart,
    ResolveRequest, Store, testing,
};

use super::{
    OLGA, PETE,
    redrive::{FAILED, dead_letter, dead_letter_state, operators, run_to_end, step, stop},
    unknown_claim,
};

idem_store::on_both_backends!(
    a_bulk_discard_takes_only_the_letters_whose_key_is_sent_and_audits_each,
    a_bulk_discard_of_a_set_that_changed_since_the_page_starts_nothing,
    a_bulk_resolve_skips_a_key_changed_since_it_was_shown_and_resolves_the_rest,
    a_bulk_resolve_of_a_pasted_list_binds_each_key_as_the_run_starts,
    a_bulk_resolve_with_a_bad_list_starts_nothing,
    a_stopped_bulk_resolve_leaves_the_keys_it_had_not_taken_unknown,
    resubmitting_a_bulk_resolve_starts_nothing_new,
    a_bulk_resolve_stops_when_its_starter_is_demoted,
    a_bulk_run_with_the_longest_reason_still_acts_on_every_item,
);

const SENT: Outcome<'static> = Outcome::Sent {
    provider_ref: Some("msg_1"),
};

fn discard<'a>(
    selection: &'a DeadLetterFilter,
    offer: &'a idem_domain::RedriveOffer,
    form: &'a idem_domain::action::ActionId,
    reason: &'a str,
) -> RedriveRequest<'a> {
    RedriveRequest {
        kind: LetterRun::Discard { reason },
        selection,
        offer,
        action_id: form,
        actor: OLGA,
        rights: None,
        via_token: None,
    }
}

fn key(k: &str, version: Option<i64>, reference: Option<&str>) -> BulkKey {
    BulkKey {
        consumer: ConsumerName::parse("orders").unwrap(),
        key: IdempotencyKey::parse(k).unwrap(),
        version,
        provider_ref: reference.map(str::to_owned),
    }
}

fn resolve<'a>(
    keys: &'a [BulkKey],
    resolve_as: ResolveAs,
    form: &'a idem_domain::action::ActionId,
    actor: Actor<'a>,
) -> BulkResolveRequest<'a> {
    BulkResolveRequest {
        keys,
        resolve_as,
        reason: Some("provider export of 03:00"),
        source: "keys as listed",
        action_id: form,
        actor,
        rights: None,
        via_token: None,
    }
}

async fn started_run(store: &Store, start: RedriveStart) -> i64 {
    match start {
        RedriveStart::Started { id, .. } => {
            let (run, _) = store.redrive(id).await.unwrap().unwrap();
            assert_eq!(run.state, RedriveState::Running);
            id
        }
        other => panic!("not started: {other:?}"),
    }
}

async fn claim(store: &Store, k: &str) -> idem_domain::Claim {
    let (c, k) = (
        ConsumerName::parse("orders").unwrap(),
        IdempotencyKey::parse(k).unwrap(),
    );
    store.claim(&c, &k).await.unwrap().unwrap()
}

/// Pete resolves `k` by hand, at `version`, as failed and retried.
async fn pete_resolves(store: &Store, k: &str, version: i64) {
    let (c, key) = (
        ConsumerName::parse("orders").unwrap(),
        IdempotencyKey::parse(k).unwrap(),
    );
    let form = testing::action_id(&format!("pete-by-hand-{version}-{}", k.len()));
    let done = store
        .resolve_unknown(&ResolveRequest {
            consumer: &c,
            key: &key,
            version,
            resolution: Resolution::FailedRetry,
            action_id: &form,
            actor: PETE,
            reason: None,
        })
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
}

async fn a_bulk_discard_takes_only_the_letters_whose_key_is_sent_and_audits_each(store: &Store) {
    operators(store).await;
    let sent = dead_letter(store, "orders", "order:1 🧾", SENT, "503").await;
    let sent_too = dead_letter(store, "orders", "order:2 שלום", SENT, "503").await;
    let failed = dead_letter(store, "orders", "order:3", FAILED, "503").await;
    let unknown = dead_letter(
        store,
        "orders",
        "order:4",
        Outcome::Unknown { error: "timeout" },
        "503",
    )
    .await;
    let selection = DeadLetterFilter::default();
    let offer = store.discard_offer(&selection).await.unwrap();
    assert_eq!(offer.count, 2, "only the letters whose key is sent");
    let form = testing::action_id("bulk-discard-0001");
    let start = store
        .start_redrive(&discard(&selection, &offer, &form, "INC-7: sent twice"))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    assert_eq!(run_to_end(store, id).await, 2);

    let (run, items) = store.redrive(id).await.unwrap().unwrap();
    assert_eq!(
        (run.kind, run.state),
        (RunKind::Discard, RedriveState::Finished)
    );
    assert!(
        items
            .iter()
            .all(|i| i.outcome == Some(ItemOutcome::Discarded))
    );
    for dl in [sent, sent_too] {
        assert_eq!(
            dead_letter_state(store, dl).await,
            DeadLetterState::Discarded
        );
    }
    for dl in [failed, unknown] {
        assert_eq!(dead_letter_state(store, dl).await, DeadLetterState::Open);
    }
    let audit = store.latest_audit(10).await.unwrap();
    let discards: Vec<_> = audit.iter().filter(|a| a.action == "discard").collect();
    assert_eq!(discards.len(), 2, "one audit row per letter");
    let why = format!("bulk discard #{id}: INC-7: sent twice");
    assert!(
        discards
            .iter()
            .all(|a| a.reason.as_deref() == Some(&*why) && a.actor == "olga")
    );
    assert_eq!(
        (audit[0].action.as_str(), audit[0].reason.as_deref()),
        ("bulk-discard", Some("2 discarded, 0 skipped, 0 not taken"))
    );
}

async fn a_bulk_discard_of_a_set_that_changed_since_the_page_starts_nothing(store: &Store) {
    operators(store).await;
    let first = dead_letter(store, "orders", "order:1", SENT, "503").await;
    dead_letter(store, "orders", "order:2", SENT, "503").await;
    let selection = DeadLetterFilter::default();
    let offer = store.discard_offer(&selection).await.unwrap();
    // Pete discards one by hand between the page and the press.
    let by_hand = store
        .discard_dead_letter(&idem_store::DiscardRequest {
            dead_letter_id: first,
            action_id: &testing::action_id("pete-discard-1"),
            actor: PETE,
            reason: "seen",
        })
        .await
        .unwrap();
    assert!(by_hand.is_done());
    let form = testing::action_id("bulk-discard-0002");
    let start = store
        .start_redrive(&discard(&selection, &offer, &form, "INC-7"))
        .await
        .unwrap();
    let RedriveStart::Changed { now } = start else {
        panic!("the set changed: {start:?}")
    };
    assert_eq!(now.count, 1);
    assert_eq!(testing::count_rows(store, "redrives").await, 0);

    // Without a reason, nothing starts either.
    let offer = store.discard_offer(&selection).await.unwrap();
    let start = store
        .start_redrive(&discard(&selection, &offer, &form, "  "))
        .await
        .unwrap();
    assert!(
        matches!(start, RedriveStart::NotAllowed(ref why) if why.contains("reason")),
        "{start:?}"
    );
}

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

    let (run, items) = store.redrive(id).await.unwrap().unwrap();
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
        .filter(|a| a.action == "resolve:sent")
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
    let start = store.start_bulk_resolve(&request).await.unwrap();
    let id = started_run(store, start).await;
    let (_, items) = store.redrive(id).await.unwrap().unwrap();
    assert_eq!(
        items[0].version,
        Some(version),
        "bound to the version it had"
    );
    run_to_end(store, id).await;
    let (_, items) = store.redrive(id).await.unwrap().unwrap();
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
    let start = store.start_bulk_resolve(&failed_for_good).await.unwrap();
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
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    let again = store
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    assert_eq!(first, again, "the same run");
    let others = [other];
    let reused = store
        .start_bulk_resolve(&resolve(&others, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    assert_eq!(
        reused,
        RedriveStart::FormReused,
        "another set under the same form"
    );
    let by_pete = store
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
        .start_bulk_resolve(&resolve(&keys, ResolveAs::FailedRetry, &form, OLGA))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    assert!(matches!(
        step(store, id).await,
        idem_store::RedriveStep::Item(_)
    ));
    store
        .set_role("olga", idem_domain::Role::Viewer)
        .await
        .unwrap();
    assert_eq!(step(store, id).await, idem_store::RedriveStep::Ended);
    let (run, _) = store.redrive(id).await.unwrap().unwrap();
    assert_eq!(run.state, RedriveState::Stopped);
    assert_eq!(
        run.end_reason.as_deref(),
        Some("olga is no longer an operator (now viewer)")
    );
    assert_eq!(claim(store, "pay:1").await.status, ClaimStatus::Unknown);
}

async fn a_bulk_run_with_the_longest_reason_still_acts_on_every_item(store: &Store) {
    operators(store).await;
    let longest = "é".repeat(idem_domain::action::MAX_REASON_CHARS);
    let letter = dead_letter(store, "orders", "order:1", SENT, "503").await;
    let selection = DeadLetterFilter::default();
    let offer = store.discard_offer(&selection).await.unwrap();
    let form = testing::action_id("bulk-discard-0007");
    let start = store
        .start_redrive(&discard(&selection, &offer, &form, &longest))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    run_to_end(store, id).await;
    assert_eq!(
        dead_letter_state(store, letter).await,
        DeadLetterState::Discarded
    );

    let k = key("pay:1", Some(unknown_claim(store, "pay:1").await), None);
    let keys = [k];
    let form = testing::action_id("bulk-resolve-0007");
    let mut request = resolve(&keys, ResolveAs::Failed, &form, OLGA);
    request.reason = Some(&longest);
    let id = started_run(store, store.start_bulk_resolve(&request).await.unwrap()).await;
    run_to_end(store, id).await;
    assert_eq!(claim(store, "pay:1").await.status, ClaimStatus::Failed);
    let audit = store.latest_audit(3).await.unwrap();
    let item = audit.iter().find(|a| a.action == "resolve:failed").unwrap();
    let why = item.reason.as_deref().unwrap();
    assert!(
        why.starts_with(&format!("bulk resolve #{id}: ééé")),
        "{why:.40}"
    );
    assert_eq!(why.chars().count(), idem_domain::action::MAX_REASON_CHARS);
}
