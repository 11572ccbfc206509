//! A guarded redrive: each item through the single replay, only "safe"
//! ones replayed, the rest skipped with why; paced by steps, stoppable,
//! idempotent as a whole.

use chrono::TimeDelta;
use idem_domain::{
    ClaimRetention, DeadLetterState, ItemOutcome, RedriveOffer, RedriveState, Role,
    action::{ActionId, ActionOutcome},
};
use idem_store::{
    Actor, DeadLetterFilter, Delivery, NewDeadLetter, Outcome, RedriveRequest, RedriveStart,
    RedriveStep, Store, testing,
};

use super::{OLGA, PETE, ago, replay};

idem_store::on_both_backends!(
    a_redrive_replays_the_safe_dead_letters_and_skips_the_rest_with_why,
    a_redrive_and_a_single_replay_of_one_of_its_items_replay_it_once,
    a_stopped_redrive_takes_no_more_items,
    resubmitting_a_redrive_starts_nothing_new,
);

/// Olga and Pete, the operators these tests act as, as accounts: a run
/// acts with its starter's current rights, read from their account.
pub(super) async fn operators(store: &Store) {
    for name in [OLGA.name, PETE.name] {
        store
            .people()
            .create_user(&idem_store::testing::account(name), Role::Operator, None)
            .await
            .unwrap();
    }
}

/// Claims in `archive` are kept ten minutes; everyone else's thirty days.
pub(super) fn retention() -> ClaimRetention {
    ClaimRetention::days(30).with("archive", TimeDelta::minutes(10))
}

/// A claim of `consumer` for `key` half an hour old ending in `outcome`,
/// and an open dead letter for it failing with `error`, dead-lettered
/// `minutes` ago.
pub(super) async fn dead_letter_at(
    store: &Store,
    consumer: &str,
    key: &str,
    outcome: Outcome<'_>,
    error: &str,
    minutes: i64,
) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let d = Delivery {
        consumer,
        key,
        payload_hash: None,
        at: ago(30),
    };
    tx.claim(&d).await.unwrap();
    tx.lease(consumer, key, ago(29), ago(30)).await.unwrap();
    tx.record(consumer, key, outcome, ago(29)).await.unwrap();
    let id = tx
        .dead_letter(&NewDeadLetter {
            consumer,
            queue: "orders.fifo",
            key,
            message_id: "m-1",
            payload: r#"{"order":"42"}"#,
            delivery_count: 3,
            first_failure_at: ago(25),
            last_error: Some(error),
            at: ago(minutes),
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

pub(super) async fn dead_letter(
    store: &Store,
    consumer: &str,
    key: &str,
    outcome: Outcome<'_>,
    error: &str,
) -> i64 {
    dead_letter_at(store, consumer, key, outcome, error, 20).await
}

pub(super) const FAILED: Outcome<'static> = Outcome::Permanent { error: "429" };

pub(super) fn request<'a>(
    selection: &'a DeadLetterFilter,
    offer: &'a RedriveOffer,
    action_id: &'a ActionId,
    actor: Actor<'a>,
) -> RedriveRequest<'a> {
    RedriveRequest {
        kind: idem_store::LetterRun::Replay,
        selection,
        offer,
        action_id,
        actor,
        rights: None,
        via_token: None,
    }
}

pub(super) fn by_error(error: &str) -> DeadLetterFilter {
    DeadLetterFilter {
        error: Some(error.to_owned()),
        ..DeadLetterFilter::default()
    }
}

/// Starts a redrive of what the list offers now, as a page would.
pub(super) async fn start(
    store: &Store,
    selection: &DeadLetterFilter,
    form: &ActionId,
    actor: Actor<'_>,
) -> RedriveStart {
    let offer = store.runs().redrive_offer(selection).await.unwrap();
    store
        .runs()
        .start_redrive(&request(selection, &offer, form, actor))
        .await
        .unwrap()
}

pub(super) async fn started(
    store: &Store,
    selection: &DeadLetterFilter,
    form: &ActionId,
    actor: Actor<'_>,
) -> (i64, i64) {
    match start(store, selection, form, actor).await {
        RedriveStart::Started { id, items, .. } => (id.get(), items),
        other => panic!("not started: {other:?}"),
    }
}

pub(super) async fn step(store: &Store, id: i64) -> RedriveStep {
    store
        .runs()
        .redrive_step(idem_domain::RunId::of_row(id), &retention())
        .await
        .unwrap()
}

/// Steps a run until it ends; how many steps settled an item.
pub(super) async fn run_to_end(store: &Store, id: i64) -> usize {
    let mut items = 0;
    while let RedriveStep::Item(_) = step(store, id).await {
        items += 1;
        assert!(items <= 500, "a run ends");
    }
    items
}

pub(super) async fn dead_letter_state(store: &Store, id: i64) -> DeadLetterState {
    store
        .claims()
        .dead_letter(
            idem_domain::DeadLetterId::of_row(id),
            &idem_domain::Within::Every,
        )
        .await
        .unwrap()
        .unwrap()
        .state
}

pub(super) async fn replays_of(store: &Store, dead_letter: i64) -> i64 {
    testing::count_rows(
        store,
        &format!("outbox WHERE dead_letter_id = {dead_letter}"),
    )
    .await
}

pub(super) async fn stop(store: &Store, id: i64, form: &str, actor: Actor<'_>) -> ActionOutcome {
    store
        .runs()
        .stop_redrive(
            idem_domain::RunId::of_row(id),
            &idem_domain::Within::Every,
            &testing::action_id(form),
            actor,
        )
        .await
        .unwrap()
}

async fn a_redrive_replays_the_safe_dead_letters_and_skips_the_rest_with_why(store: &Store) {
    operators(store).await;
    let rate_limit = "429 Too Many Requests (Retry-After: 30 s) ✉ “EU/2026” #7";
    let safe = dead_letter(store, "orders", "order:1 🧾", FAILED, rate_limit).await;
    let sent = dead_letter(
        store,
        "orders",
        "order:2",
        Outcome::Sent {
            provider_ref: Some("ful_2"),
        },
        rate_limit,
    )
    .await;
    let unknown = dead_letter(
        store,
        "orders",
        "order:3",
        Outcome::Unknown { error: "timeout" },
        rate_limit,
    )
    .await;
    let old = dead_letter(store, "archive", "order:4", FAILED, rate_limit).await;
    let safe_too = dead_letter(store, "orders", "order:5 שלום", FAILED, rate_limit).await;
    let other_error = dead_letter(store, "orders", "order:6", FAILED, "400 Bad Request").await;

    let selection = by_error("429 Too Many");
    let action_id = testing::action_id("redrive-form-0001");
    let (id, items) = started(store, &selection, &action_id, OLGA).await;
    assert_eq!(items, 5, "the 400 is not selected");
    assert_eq!(run_to_end(store, id).await, 5);

    let (run, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(run.state, RedriveState::Finished);
    let outcome = |dl: i64| {
        let item = items.iter().find(|i| i.dead_letter_id == Some(dl)).unwrap();
        (
            item.outcome.unwrap(),
            item.reason.clone().unwrap_or_default(),
        )
    };
    assert_eq!(outcome(safe).0, ItemOutcome::Replayed);
    assert_eq!(outcome(safe_too).0, ItemOutcome::Replayed);
    assert_eq!(
        outcome(sent),
        (
            ItemOutcome::Skipped,
            "Blocked: the effect already happened.".into()
        )
    );
    assert_eq!(
        outcome(unknown),
        (
            ItemOutcome::Skipped,
            "Blocked: the outcome is unknown.".into()
        )
    );
    assert!(
        outcome(old).1.contains("older than the retention"),
        "{:?}",
        outcome(old)
    );
    // Replayed through the single replay: the dead letter closed, one outbox
    // row, its own audit row naming the run; the skipped ones left open.
    for dl in [safe, safe_too] {
        assert_eq!(
            dead_letter_state(store, dl).await,
            DeadLetterState::Replayed
        );
        assert_eq!(replays_of(store, dl).await, 1);
    }
    for dl in [sent, unknown, old, other_error] {
        assert_eq!(dead_letter_state(store, dl).await, DeadLetterState::Open);
        assert_eq!(replays_of(store, dl).await, 0);
    }
    let audit = store.latest_audit(10).await.unwrap();
    let item_rows = audit
        .iter()
        .filter(|a| a.action == idem_domain::AuditAction::Replay)
        .count();
    assert_eq!(item_rows, 2);
    assert!(
        audit
            .iter()
            .filter(|a| a.action == idem_domain::AuditAction::Replay)
            .all(|a| a.reason.as_deref() == Some(&*format!("redrive #{id}")))
    );
    let end = &audit[0];
    assert_eq!(
        (end.action.as_str(), end.reason.as_deref()),
        ("redrive", Some("2 replayed, 3 skipped, 0 not taken"))
    );
    let start = audit.iter().find(|a| a.id == run.audit_id).unwrap();
    assert!(
        start.reason.as_deref().unwrap().starts_with(
            "5 dead letters: open dead letters whose last error contains “429 Too Many”"
        )
    );
    // Finished: another step does nothing, and audits nothing again.
    assert_eq!(step(store, id).await, RedriveStep::Ended);
    assert_eq!(store.latest_audit(1).await.unwrap()[0].id, end.id);
}

async fn a_redrive_and_a_single_replay_of_one_of_its_items_replay_it_once(store: &Store) {
    operators(store).await;
    let first = dead_letter(store, "orders", "order:1", FAILED, "503").await;
    let second = dead_letter(store, "orders", "order:2", FAILED, "503").await;
    let selection = DeadLetterFilter::default();
    let form = testing::action_id("redrive-form-0002");
    let (id, _) = started(store, &selection, &form, OLGA).await;

    // Pete replays the first by hand while the run takes it.
    let pete_form = testing::action_id("single-form-0002");
    let mut single = replay(first, &pete_form);
    single.actor = PETE;
    let retention = retention();
    let (actions, runs) = (store.actions(), store.runs());
    let (by_hand, step) = tokio::join!(
        actions.replay_dead_letter(&single),
        runs.redrive_step(idem_domain::RunId::of_row(id), &retention),
    );
    let (by_hand, step) = (by_hand.unwrap(), step.unwrap());
    assert_eq!(
        replays_of(store, first).await,
        1,
        "replayed once, whoever won"
    );
    let RedriveStep::Item(item) = step else {
        panic!("the run took an item")
    };
    assert_eq!(item.dead_letter_id, Some(first));
    if by_hand.is_done() {
        assert_eq!(item.outcome, Some(ItemOutcome::Skipped));
        assert_eq!(item.reason.as_deref(), Some("Already replayed by pete."));
    } else {
        assert_eq!(item.outcome, Some(ItemOutcome::Replayed));
    }
    assert_eq!(run_to_end(store, id).await, 1);
    assert_eq!(replays_of(store, second).await, 1);
}

async fn a_stopped_redrive_takes_no_more_items(store: &Store) {
    operators(store).await;
    let ids = [
        dead_letter(store, "orders", "order:1", FAILED, "503").await,
        dead_letter(store, "orders", "order:2", FAILED, "503").await,
        dead_letter(store, "orders", "order:3", FAILED, "503").await,
    ];
    let selection = DeadLetterFilter::default();
    let form = testing::action_id("redrive-form-0003");
    let (id, _) = started(store, &selection, &form, OLGA).await;
    assert!(matches!(step(store, id).await, RedriveStep::Item(_)));

    let stopped = stop(store, id, "stop-form-pete-0003", PETE).await;
    assert!(stopped.is_done(), "Pete stops it: {stopped:?}");
    let ActionOutcome::Conflict { by, now, .. } =
        stop(store, id, "stop-form-olga-0003", OLGA).await
    else {
        panic!("stopped once")
    };
    assert_eq!((by.as_str(), now.as_str()), ("pete", "stopped"));
    assert_eq!(step(store, id).await, RedriveStep::Ended);

    assert_eq!(
        dead_letter_state(store, ids[0]).await,
        DeadLetterState::Replayed
    );
    for dl in &ids[1..] {
        assert_eq!(dead_letter_state(store, *dl).await, DeadLetterState::Open);
    }
    let (run, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (run.state, run.ended_by.as_deref()),
        (RedriveState::Stopped, Some("pete"))
    );
    assert_eq!(items.iter().filter(|i| i.outcome.is_none()).count(), 2);
    let end = &store.latest_audit(1).await.unwrap()[0];
    assert_eq!(
        (end.actor.as_str(), end.reason.as_deref()),
        ("pete", Some("1 replayed, 0 skipped, 2 not taken"))
    );
    assert!(store.runs().running_redrives().await.unwrap().is_empty());
}

async fn resubmitting_a_redrive_starts_nothing_new(store: &Store) {
    operators(store).await;
    let dl = dead_letter(store, "orders", "order:1", FAILED, "503").await;
    let dl2 = dead_letter(store, "orders", "order:2", FAILED, "503").await;
    let selection = DeadLetterFilter::default();
    let form = testing::action_id("redrive-form-0004");
    let offer = store.runs().redrive_offer(&selection).await.unwrap();
    let (id, items) = match store
        .runs()
        .start_redrive(&request(&selection, &offer, &form, OLGA))
        .await
        .unwrap()
    {
        RedriveStart::Started { id, items, .. } => (id, items),
        other => panic!("not started: {other:?}"),
    };
    // Twice more: once after, once at the same time as a step.
    let retention = retention();
    let resubmitted = request(&selection, &offer, &form, OLGA);
    let runs = store.runs();
    let (again, _) = tokio::join!(
        runs.start_redrive(&resubmitted),
        runs.redrive_step(id, &retention),
    );
    assert!(
        matches!(again.unwrap(), RedriveStart::Started { id: again, items: n, .. } if again == id && n == items)
    );
    assert_eq!(
        store
            .runs()
            .start_redrive(&request(&selection, &offer, &form, PETE))
            .await
            .unwrap(),
        RedriveStart::FormReused,
        "another person's form with the same id starts nothing"
    );
    // Two runners stepping at once take the second item and replay it once.
    let (a, b) = tokio::join!(
        runs.redrive_step(id, &retention),
        runs.redrive_step(id, &retention),
    );
    let (_, _) = (a.unwrap(), b.unwrap());
    run_to_end(store, id.get()).await;
    assert_eq!(
        (replays_of(store, dl).await, replays_of(store, dl2).await),
        (1, 1)
    );
    let (_, items) = store
        .runs()
        .redrive(id, &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    assert!(
        items
            .iter()
            .all(|i| i.outcome == Some(ItemOutcome::Replayed)),
        "{items:?}"
    );
    assert_eq!(testing::count_rows(store, "redrives").await, 1);
    // A new form over a list with nothing open starts nothing.
    let empty = testing::action_id("redrive-form-0005");
    assert_eq!(
        start(store, &selection, &empty, OLGA).await,
        RedriveStart::NothingToRedrive
    );
}
