//! What keeps a redrive to what its page said: exactly the letters it
//! offered, its start and stop bound to their forms, its starter's current
//! rights before each item, and a Stop that nothing outlasts.

use std::time::Duration;

use idem_domain::{DeadLetterState, ItemOutcome, action::ActionOutcome};
use idem_store::{DeadLetterFilter, RedriveStart, RedriveStep, Store, testing};

use super::redrive::{
    FAILED, by_error, dead_letter, dead_letter_at, dead_letter_state, operators, replays_of,
    request, retention, run_to_end, started, step, stop,
};
use super::{OLGA, PETE, replay};

idem_store::on_both_backends!(
    a_redrive_takes_exactly_the_letters_its_page_offered_when_more_arrive,
    a_redrive_whose_list_changed_underneath_starts_nothing_and_names_what_matches_now,
    a_redrive_form_sent_again_with_another_selection_starts_nothing,
    a_stop_sent_twice_answers_what_the_first_stop_did,
);

pub(super) async fn open_letters(store: &Store) -> i64 {
    testing::count_rows(store, "dead_letters WHERE state = 'open'").await
}

async fn a_redrive_takes_exactly_the_letters_its_page_offered_when_more_arrive(store: &Store) {
    operators(store).await;
    let mut shown = Vec::new();
    for key in ["order:1 🧾", "order:2 ‏שלום", "order:3/EU%2F"] {
        shown.push(dead_letter(store, "orders", key, FAILED, "429 Too Many Requests").await);
    }
    let selection = by_error("429");
    let offer = store.runs().redrive_offer(&selection).await.unwrap();
    assert_eq!(offer.count, 3, "the page offers three");
    // Forty more matching letters arrive after the page was drawn.
    for i in 0..40 {
        dead_letter_at(store, "orders", &format!("later:{i}"), FAILED, "429", 1).await;
    }

    let form = testing::action_id("redrive-form-grew-0001");
    let started = store
        .runs()
        .start_redrive(&request(&selection, &offer, &form, OLGA))
        .await
        .unwrap();
    let RedriveStart::Started { id, items, .. } = started else {
        panic!("the three it offered are still there: {started:?}")
    };
    assert_eq!(items, 3, "exactly what the page offered");
    assert_eq!(run_to_end(store, id.get()).await, 3);
    for dl in shown {
        assert_eq!(replays_of(store, dl).await, 1);
    }
    assert_eq!(open_letters(store).await, 40, "the newcomers wait");
    let start_row = store.latest_audit(10).await.unwrap();
    assert!(
        start_row.iter().any(|a| a
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("3 dead letters: "))),
        "{start_row:?}"
    );
}

async fn a_redrive_whose_list_changed_underneath_starts_nothing_and_names_what_matches_now(
    store: &Store,
) {
    operators(store).await;
    let a = dead_letter(store, "orders", "order:a", FAILED, "429").await;
    let b = dead_letter(store, "orders", "order:b", FAILED, "429").await;
    let _c = dead_letter(store, "orders", "order:c", FAILED, "429").await;
    let selection = DeadLetterFilter::default();
    let offer = store.runs().redrive_offer(&selection).await.unwrap();
    assert_eq!(offer.count, 3);

    // Pete replays one of them by hand before Olga presses.
    let by_hand = testing::action_id("single-form-changed-1");
    let mut single = replay(b, &by_hand);
    single.actor = PETE;
    assert!(
        store
            .actions()
            .replay_dead_letter(&single)
            .await
            .unwrap()
            .is_done()
    );
    let form = testing::action_id("redrive-form-changed-1");
    let answer = store
        .runs()
        .start_redrive(&request(&selection, &offer, &form, OLGA))
        .await
        .unwrap();
    let RedriveStart::Changed { now } = answer else {
        panic!("refused: {answer:?}")
    };
    assert_eq!(now.count, 2, "what the page offers now");
    assert_eq!(testing::count_rows(store, "redrives").await, 0);

    // An older letter appears (a late arrival dead-lettered before the last
    // one offered): the same form is refused again, naming three.
    let offer = store.runs().redrive_offer(&selection).await.unwrap();
    dead_letter_at(store, "orders", "order:late", FAILED, "429", 25).await;
    let form = testing::action_id("redrive-form-changed-2");
    let answer = store
        .runs()
        .start_redrive(&request(&selection, &offer, &form, OLGA))
        .await
        .unwrap();
    assert!(
        matches!(&answer, RedriveStart::Changed { now } if now.count == 3),
        "{answer:?}"
    );
    assert_eq!(testing::count_rows(store, "redrives").await, 0);
    assert_eq!(dead_letter_state(store, a).await, DeadLetterState::Open);

    // The page drawn again offers the three, and they go.
    let form = testing::action_id("redrive-form-changed-3");
    let (id, items) = started(store, &selection, &form, OLGA).await;
    assert_eq!(items, 3);
    assert_eq!(run_to_end(store, id).await, 3);
    assert_eq!(open_letters(store).await, 0);
}

async fn a_redrive_form_sent_again_with_another_selection_starts_nothing(store: &Store) {
    operators(store).await;
    dead_letter(store, "orders", "order:1", FAILED, "429").await;
    dead_letter(store, "orders", "order:2", FAILED, "429").await;
    dead_letter(store, "orders", "order:3", FAILED, "503").await;
    let rate_limited = by_error("429");
    let offer = store.runs().redrive_offer(&rate_limited).await.unwrap();
    let form = testing::action_id("redrive-form-bound-1");
    let first = store
        .runs()
        .start_redrive(&request(&rate_limited, &offer, &form, OLGA))
        .await
        .unwrap();
    let RedriveStart::Started { id, items: 2, .. } = first else {
        panic!("{first:?}")
    };

    let unavailable = by_error("503");
    let other = store.runs().redrive_offer(&unavailable).await.unwrap();
    assert_eq!(
        store
            .runs()
            .start_redrive(&request(&unavailable, &other, &form, OLGA))
            .await
            .unwrap(),
        RedriveStart::FormReused,
        "the same id with another selection"
    );
    let everything = DeadLetterFilter::default();
    let all = store.runs().redrive_offer(&everything).await.unwrap();
    assert_eq!(
        store
            .runs()
            .start_redrive(&request(&everything, &all, &form, OLGA))
            .await
            .unwrap(),
        RedriveStart::FormReused,
        "the same id with a wider selection"
    );
    assert_eq!(
        store
            .runs()
            .start_redrive(&request(&rate_limited, &offer, &form, OLGA))
            .await
            .unwrap(),
        RedriveStart::Started {
            id,
            items: 2,
            audit_id: store
                .runs()
                .redrive(id, &idem_domain::Within::Every)
                .await
                .unwrap()
                .unwrap()
                .0
                .audit_id
        },
        "the same form again is the same run"
    );
    assert_eq!(testing::count_rows(store, "redrives").await, 1);
}

async fn a_stop_sent_twice_answers_what_the_first_stop_did(store: &Store) {
    operators(store).await;
    for key in ["order:1", "order:2", "order:3"] {
        dead_letter(store, "orders", key, FAILED, "503").await;
    }
    let form = testing::action_id("redrive-form-stop-1");
    let (id, _) = started(store, &DeadLetterFilter::default(), &form, OLGA).await;
    assert!(matches!(step(store, id).await, RedriveStep::Item(_)));

    let first = stop(store, id, "stop-form-twice-1", PETE).await;
    let ActionOutcome::Done {
        audit_id, summary, ..
    } = &first
    else {
        panic!("{first:?}")
    };
    assert!(
        summary.contains("1 replayed, 0 skipped, 2 not taken"),
        "{summary}"
    );
    assert_eq!(
        stop(store, id, "stop-form-twice-1", PETE).await,
        first,
        "the same Stop again answers the first outcome"
    );
    assert!(
        matches!(
            stop(store, id, "stop-form-twice-1", OLGA).await,
            ActionOutcome::FormReused { .. }
        ),
        "someone else's post under Pete's id"
    );
    let ActionOutcome::Conflict { by, .. } = stop(store, id, "stop-form-twice-2", OLGA).await
    else {
        panic!("a new Stop of a stopped run is a conflict")
    };
    assert_eq!(by, "pete");
    assert_eq!(
        testing::count_rows(
            store,
            "audit_log WHERE action = 'redrive' AND state_after = 'stopped'"
        )
        .await,
        1
    );
    assert_eq!(store.latest_audit(1).await.unwrap()[0].id, *audit_id);
}

/// On Postgres, with the first item's dead letter held locked by another
/// transaction: the step waits holding the run, a Stop pressed meanwhile
/// waits for it, and once the Stop has answered nothing more is replayed.
/// The audit log and the item read in the order things committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_waits_for_the_item_in_flight_and_nothing_is_replayed_after_it_answers() {
    let db = testing::TestDatabase::postgres().await;
    let store = db.store.clone();
    operators(&store).await;
    let mut letters = Vec::new();
    for n in 0..6 {
        letters.push(dead_letter(&store, "orders", &format!("order:{n}"), FAILED, "429").await);
    }
    let form = testing::action_id("redrive-form-held-1");
    let (id, _) = started(&store, &DeadLetterFilter::default(), &form, OLGA).await;

    let pool = store.postgres_pool().expect("Postgres").clone();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM dead_letters WHERE id = $1 FOR UPDATE")
        .bind(letters[0])
        .execute(&mut *holder)
        .await
        .unwrap();
    let stepping = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .runs()
                .redrive_step(idem_domain::RunId::of_row(id), &retention())
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .runs()
                .stop_redrive(
                    idem_domain::RunId::of_row(id),
                    &idem_domain::Within::Every,
                    &testing::action_id("stop-form-held-1"),
                    PETE,
                )
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!stepping.is_finished(), "the item waits on its dead letter");
    assert!(
        !stopping.is_finished(),
        "the Stop waits for the item in flight"
    );
    holder.rollback().await.unwrap();

    let RedriveStep::Item(item) = stepping.await.unwrap().unwrap() else {
        panic!("the item in flight is taken")
    };
    assert_eq!(item.outcome, Some(ItemOutcome::Replayed));
    let stopped = stopping.await.unwrap().unwrap();
    let ActionOutcome::Done { summary, .. } = &stopped else {
        panic!("{stopped:?}")
    };
    assert!(
        summary.contains("1 replayed, 0 skipped, 5 not taken"),
        "the Stop's answer counts the item it waited for: {summary}"
    );
    assert_eq!(step(&store, id).await, RedriveStep::Ended);
    assert_eq!(replays_of(&store, letters[0]).await, 1);
    for dl in &letters[1..] {
        assert_eq!(replays_of(&store, *dl).await, 0, "nothing after the Stop");
    }
    let (run, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    let audit = store.latest_audit(5).await.unwrap();
    let replayed = audit
        .iter()
        .find(|a| a.action == idem_domain::AuditAction::Replay)
        .unwrap();
    let stop_row = &audit[0];
    assert_eq!(
        stop_row
            .state_after
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("stopped")
    );
    assert!(
        replayed.at <= stop_row.at,
        "the replay is audited before the Stop: {} then {}",
        replayed.at,
        stop_row.at
    );
    let done_at = items[0].done_at.unwrap();
    assert!(done_at <= run.ended_at.unwrap());
    assert!(replayed.at <= done_at);
}
