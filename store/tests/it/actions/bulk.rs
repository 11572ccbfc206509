//! Bulk discard (and what every bulk run shares): runs on the redrive's machinery, each
//! item through the single discard or resolution with its own
//! compare-and-set and audit row; bound to what was shown, stoppable,
//! idempotent as a whole.

use idem_domain::{
    BulkKey, ClaimStatus, ConsumerName, DeadLetterState, IdempotencyKey, ItemOutcome, RedriveState,
    ResolveAs, RunKind, action::Resolution,
};
use idem_store::{
    Actor, BulkResolveRequest, DeadLetterFilter, LetterRun, Outcome, RedriveRequest, RedriveStart,
    ResolveRequest, Store, testing,
};

use super::{
    OLGA, PETE,
    redrive::{FAILED, dead_letter, dead_letter_state, operators, run_to_end},
    unknown_claim,
};

idem_store::on_both_backends!(
    a_bulk_discard_takes_only_the_letters_whose_key_is_sent_and_audits_each,
    a_bulk_discard_of_a_set_that_changed_since_the_page_starts_nothing,
    a_bulk_run_with_the_longest_reason_still_acts_on_every_item,
);

pub(super) const SENT: Outcome<'static> = Outcome::Sent {
    provider_ref: Some("msg_1"),
};

pub(super) fn discard<'a>(
    selection: &'a DeadLetterFilter,
    offer: &'a idem_domain::RedriveOffer,
    form: &'a idem_domain::action::ActionId,
    reason: &'a str,
) -> RedriveRequest<'a> {
    RedriveRequest {
        kind: LetterRun::Discard {
            reason: idem_store::testing::reason(reason),
        },
        selection,
        offer,
        action_id: form,
        actor: OLGA,
        rights: None,
        via_token: None,
    }
}

pub(super) fn key(k: &str, version: Option<i64>, reference: Option<&str>) -> BulkKey {
    BulkKey {
        consumer: ConsumerName::parse("orders").unwrap(),
        key: IdempotencyKey::parse(k).unwrap(),
        version,
        provider_ref: reference.map(str::to_owned),
    }
}

pub(super) fn resolve<'a>(
    keys: &'a [BulkKey],
    resolve_as: ResolveAs,
    form: &'a idem_domain::action::ActionId,
    actor: Actor<'a>,
) -> BulkResolveRequest<'a> {
    BulkResolveRequest {
        keys,
        resolve_as,
        reason: Some(idem_store::testing::reason("provider export of 03:00")),
        source: "keys as listed",
        action_id: form,
        actor,
        rights: None,
        via_token: None,
    }
}

pub(super) async fn started_run(store: &Store, start: RedriveStart) -> i64 {
    match start {
        RedriveStart::Started { id, .. } => {
            let (run, _) = store
                .runs()
                .redrive(id, &idem_domain::Within::Every)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(run.state, RedriveState::Running);
            id.get()
        }
        other => panic!("not started: {other:?}"),
    }
}

pub(super) async fn claim(store: &Store, k: &str) -> idem_domain::Claim {
    let (c, k) = (
        ConsumerName::parse("orders").unwrap(),
        IdempotencyKey::parse(k).unwrap(),
    );
    store.claims().claim(&c, &k).await.unwrap().unwrap()
}

/// Pete resolves `k` by hand, at `version`, as failed and retried.
pub(super) async fn pete_resolves(store: &Store, k: &str, version: i64) {
    let (c, key) = (
        ConsumerName::parse("orders").unwrap(),
        IdempotencyKey::parse(k).unwrap(),
    );
    let form = testing::action_id(&format!("pete-by-hand-{version}-{}", k.len()));
    let done = store
        .actions()
        .resolve_unknown(&ResolveRequest {
            scope: &idem_domain::Within::Every,
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
    let offer = store.runs().discard_offer(&selection).await.unwrap();
    assert_eq!(offer.count, 2, "only the letters whose key is sent");
    let form = testing::action_id("bulk-discard-0001");
    let start = store
        .runs()
        .start_redrive(&discard(&selection, &offer, &form, "INC-7: sent twice"))
        .await
        .unwrap();
    let id = started_run(store, start).await;
    assert_eq!(run_to_end(store, id).await, 2);

    let (run, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
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
    let discards: Vec<_> = audit
        .iter()
        .filter(|a| a.action == idem_domain::AuditAction::Discard)
        .collect();
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
    let offer = store.runs().discard_offer(&selection).await.unwrap();
    // Pete discards one by hand between the page and the press.
    let by_hand = store
        .actions()
        .discard_dead_letter(&idem_store::DiscardRequest {
            scope: &idem_domain::Within::Every,
            dead_letter_id: idem_domain::DeadLetterId::of_row(first),
            action_id: &testing::action_id("pete-discard-1"),
            actor: PETE,
            reason: idem_store::testing::reason("seen"),
        })
        .await
        .unwrap();
    assert!(by_hand.is_done());
    let form = testing::action_id("bulk-discard-0002");
    let start = store
        .runs()
        .start_redrive(&discard(&selection, &offer, &form, "INC-7"))
        .await
        .unwrap();
    let RedriveStart::Changed { now } = start else {
        panic!("the set changed: {start:?}")
    };
    assert_eq!(now.count, 1);
    assert_eq!(testing::count_rows(store, "redrives").await, 0);

    // A discard without a reason cannot be asked for: a blank reason is
    // no reason at all, and a discard takes one.
    assert_eq!(idem_domain::action::Reason::parse("  "), Ok(None));
}

async fn a_bulk_run_with_the_longest_reason_still_acts_on_every_item(store: &Store) {
    operators(store).await;
    let longest = "é".repeat(idem_domain::action::MAX_REASON_CHARS);
    let letter = dead_letter(store, "orders", "order:1", SENT, "503").await;
    let selection = DeadLetterFilter::default();
    let offer = store.runs().discard_offer(&selection).await.unwrap();
    let form = testing::action_id("bulk-discard-0007");
    let start = store
        .runs()
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
    request.reason = Some(idem_store::testing::reason(&longest));
    let id = started_run(
        store,
        store.runs().start_bulk_resolve(&request).await.unwrap(),
    )
    .await;
    run_to_end(store, id).await;
    assert_eq!(claim(store, "pay:1").await.status, ClaimStatus::Failed);
    let audit = store.latest_audit(3).await.unwrap();
    let item = audit
        .iter()
        .find(|a| a.action == idem_domain::AuditAction::ResolveFailed)
        .unwrap();
    let why = item.reason.as_deref().unwrap();
    assert!(
        why.starts_with(&format!("bulk resolve #{id}: ééé")),
        "{why:.40}"
    );
    assert_eq!(why.chars().count(), idem_domain::action::MAX_REASON_CHARS);
}
