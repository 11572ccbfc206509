//! What keeps a redrive to what its page said: exactly the letters it
//! offered, its start and stop bound to their forms, its starter's current
//! rights before each item, and a Stop that nothing outlasts.

use std::time::Duration;

use idem_domain::{DeadLetterState, ItemOutcome, RedriveState, Role, action::ActionOutcome};
use idem_store::{DeadLetterFilter, RedriveStart, RedriveStep, Store, testing};

use super::redrive::{
    FAILED, by_error, dead_letter, dead_letter_at, dead_letter_state, operators, replays_of,
    request, retention, run_to_end, start, started, step, stop,
};
use super::{OLGA, PETE, replay};

idem_store::on_both_backends!(
    a_redrive_takes_exactly_the_letters_its_page_offered_when_more_arrive,
    a_redrive_whose_list_changed_underneath_starts_nothing_and_names_what_matches_now,
    a_redrive_form_sent_again_with_another_selection_starts_nothing,
    a_stop_sent_twice_answers_what_the_first_stop_did,
    a_redrive_stops_at_once_when_its_starter_is_disabled,
    a_redrive_stops_when_its_starter_is_demoted_or_signed_out_everywhere,
    a_redrive_whose_starter_s_rights_narrowed_after_the_page_was_drawn_starts_nothing,
    a_redrive_a_token_started_reads_its_owner_and_stops_once_the_token_is_revoked,
);

async fn a_redrive_a_token_started_reads_its_owner_and_stops_once_the_token_is_revoked(
    store: &Store,
) {
    operators(store).await;
    let rights = idem_domain::Rights::everywhere(Role::Operator);
    let idem_store::TokenCreated::Created { id: token } = store
        .create_token(&idem_store::NewToken {
            name: "nightly",
            owner: "olga",
            rights: &rights,
            secret_sha256: "hash",
            expires_at: None,
            created_by: "admin",
            client_addr: None,
        })
        .await
        .unwrap()
    else {
        panic!("the token is made");
    };
    for n in 0..3 {
        dead_letter(store, "orders", &format!("order:token-{n}"), FAILED, "429").await;
    }
    let selection = by_error("429");
    let offer = store.redrive_offer(&selection).await.unwrap();
    let form = testing::action_id("redrive-token-1");
    let by_token = idem_store::Actor {
        name: "olga (token nightly)",
        role: "operator",
        client_addr: None,
    };
    let answer = store
        .start_redrive(&idem_store::RedriveRequest {
            kind: idem_store::LetterRun::Replay,
            rights: Some(&rights),
            via_token: Some(idem_store::ViaToken {
                id: token,
                owner: "olga",
            }),
            ..request(&selection, &offer, &form, by_token)
        })
        .await
        .unwrap();
    let RedriveStart::Started { id, .. } = answer else {
        panic!("a token's redrive reads its owner's account, who may: {answer:?}");
    };
    assert!(
        matches!(step(store, id).await, RedriveStep::Item(_)),
        "one letter taken"
    );
    assert!(
        store
            .revoke_token("nightly", "admin", None)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(step(store, id).await, RedriveStep::Ended);
    let (run, items) = store.redrive(id).await.unwrap().unwrap();
    assert_eq!(run.state, RedriveState::Stopped);
    assert_eq!(
        run.end_reason.as_deref(),
        Some("its token nightly was revoked")
    );
    assert_eq!(items.iter().filter(|i| i.outcome.is_some()).count(), 1);
    assert_eq!(open_letters(store).await, 2, "the rest stay open");
}

async fn a_redrive_whose_starter_s_rights_narrowed_after_the_page_was_drawn_starts_nothing(
    store: &Store,
) {
    operators(store).await;
    dead_letter(store, "orders", "order:narrowed", FAILED, "429").await;
    let selection = by_error("429");
    let offer = store.redrive_offer(&selection).await.unwrap();
    // The page was drawn for olga the operator of every team; before her
    // start's transaction runs she becomes an operator of payments only.
    let drawn_for = idem_domain::Rights::everywhere(Role::Operator);
    let narrowed: idem_domain::Rights = "operator@payments".parse().unwrap();
    assert!(store.set_rights("olga", &narrowed).await.unwrap());
    let form = testing::action_id("redrive-narrowed-1");
    let answer = store
        .start_redrive(&idem_store::RedriveRequest {
            kind: idem_store::LetterRun::Replay,
            rights: Some(&drawn_for),
            via_token: None,
            ..request(&selection, &offer, &form, OLGA)
        })
        .await
        .unwrap();
    assert_eq!(
        answer,
        RedriveStart::NotAllowed("olga's rights changed after the page was drawn".into())
    );
    assert_eq!(open_letters(store).await, 1, "nothing was replayed");
    // Asked under the rights she holds now, the same letters start.
    let form = testing::action_id("redrive-narrowed-2");
    let answer = store
        .start_redrive(&idem_store::RedriveRequest {
            kind: idem_store::LetterRun::Replay,
            rights: Some(&narrowed),
            via_token: None,
            ..request(&selection, &offer, &form, OLGA)
        })
        .await
        .unwrap();
    assert!(matches!(answer, RedriveStart::Started { .. }), "{answer:?}");
}

async fn open_letters(store: &Store) -> i64 {
    testing::count_rows(store, "dead_letters WHERE state = 'open'").await
}

async fn a_redrive_takes_exactly_the_letters_its_page_offered_when_more_arrive(store: &Store) {
    operators(store).await;
    let mut shown = Vec::new();
    for key in ["order:1 🧾", "order:2 ‏שלום", "order:3/EU%2F"] {
        shown.push(dead_letter(store, "orders", key, FAILED, "429 Too Many Requests").await);
    }
    let selection = by_error("429");
    let offer = store.redrive_offer(&selection).await.unwrap();
    assert_eq!(offer.count, 3, "the page offers three");
    // Forty more matching letters arrive after the page was drawn.
    for i in 0..40 {
        dead_letter_at(store, "orders", &format!("later:{i}"), FAILED, "429", 1).await;
    }

    let form = testing::action_id("redrive-form-grew-0001");
    let started = store
        .start_redrive(&request(&selection, &offer, &form, OLGA))
        .await
        .unwrap();
    let RedriveStart::Started { id, items, .. } = started else {
        panic!("the three it offered are still there: {started:?}")
    };
    assert_eq!(items, 3, "exactly what the page offered");
    assert_eq!(run_to_end(store, id).await, 3);
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
    let offer = store.redrive_offer(&selection).await.unwrap();
    assert_eq!(offer.count, 3);

    // Pete replays one of them by hand before Olga presses.
    let by_hand = testing::action_id("single-form-changed-1");
    let mut single = replay(b, &by_hand);
    single.actor = PETE;
    assert!(store.replay_dead_letter(&single).await.unwrap().is_done());
    let form = testing::action_id("redrive-form-changed-1");
    let answer = store
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
    let offer = store.redrive_offer(&selection).await.unwrap();
    dead_letter_at(store, "orders", "order:late", FAILED, "429", 25).await;
    let form = testing::action_id("redrive-form-changed-2");
    let answer = store
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
    let offer = store.redrive_offer(&rate_limited).await.unwrap();
    let form = testing::action_id("redrive-form-bound-1");
    let first = store
        .start_redrive(&request(&rate_limited, &offer, &form, OLGA))
        .await
        .unwrap();
    let RedriveStart::Started { id, items: 2, .. } = first else {
        panic!("{first:?}")
    };

    let unavailable = by_error("503");
    let other = store.redrive_offer(&unavailable).await.unwrap();
    assert_eq!(
        store
            .start_redrive(&request(&unavailable, &other, &form, OLGA))
            .await
            .unwrap(),
        RedriveStart::FormReused,
        "the same id with another selection"
    );
    let everything = DeadLetterFilter::default();
    let all = store.redrive_offer(&everything).await.unwrap();
    assert_eq!(
        store
            .start_redrive(&request(&everything, &all, &form, OLGA))
            .await
            .unwrap(),
        RedriveStart::FormReused,
        "the same id with a wider selection"
    );
    assert_eq!(
        store
            .start_redrive(&request(&rate_limited, &offer, &form, OLGA))
            .await
            .unwrap(),
        RedriveStart::Started {
            id,
            items: 2,
            audit_id: store.redrive(id).await.unwrap().unwrap().0.audit_id
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

/// Starts a run of three letters as `starter`, takes one item, lets
/// `change` happen to the starter, and returns the run once the next step
/// has ended it.
async fn stopped_after(
    store: &Store,
    starter: idem_store::Actor<'_>,
    form: &str,
    change: impl Future<Output = ()>,
) -> (idem_domain::Redrive, Vec<idem_domain::RedriveItem>) {
    let mut letters = Vec::new();
    for n in 0..3 {
        letters.push(dead_letter(store, "orders", &format!("{form}:{n}"), FAILED, "503").await);
    }
    let selection = DeadLetterFilter {
        window: idem_store::Window::default(),
        error: Some("503".into()),
        except: Vec::new(),
    };
    let (id, _) = started(store, &selection, &testing::action_id(form), starter).await;
    assert!(matches!(step(store, id).await, RedriveStep::Item(_)));
    change.await;
    assert_eq!(step(store, id).await, RedriveStep::Ended);
    assert_eq!(step(store, id).await, RedriveStep::Ended);
    for dl in &letters[1..] {
        assert_eq!(dead_letter_state(store, *dl).await, DeadLetterState::Open);
    }
    store.redrive(id).await.unwrap().unwrap()
}

async fn a_redrive_stops_at_once_when_its_starter_is_disabled(store: &Store) {
    operators(store).await;
    let (run, items) = stopped_after(store, OLGA, "redrive-disabled-1", async {
        assert!(store.set_disabled("olga", true).await.unwrap());
    })
    .await;
    assert_eq!(run.state, RedriveState::Stopped);
    assert_eq!(run.ended_by, None, "nobody pressed Stop");
    assert_eq!(
        run.end_reason.as_deref(),
        Some("olga's account is disabled")
    );
    let replayed = items
        .iter()
        .filter(|i| i.outcome == Some(ItemOutcome::Replayed))
        .count();
    assert_eq!(replayed, 1, "only the item taken before");
    let end = &store.latest_audit(1).await.unwrap()[0];
    assert_eq!(
        end.reason.as_deref(),
        Some("1 replayed, 0 skipped, 2 not taken; stopped because olga's account is disabled")
    );
    assert_eq!(end.state_after.as_deref(), Some("stopped"));

    // A disabled person cannot start one either.
    dead_letter(store, "orders", "order:new", FAILED, "429").await;
    let answer = start(
        store,
        &by_error("429"),
        &testing::action_id("redrive-disabled-2"),
        OLGA,
    )
    .await;
    assert_eq!(
        answer,
        RedriveStart::NotAllowed("olga's account is disabled".into())
    );
}

async fn a_redrive_stops_when_its_starter_is_demoted_or_signed_out_everywhere(store: &Store) {
    operators(store).await;
    let (run, _) = stopped_after(store, OLGA, "redrive-demoted-1", async {
        assert!(store.set_role("olga", Role::Viewer).await.unwrap());
    })
    .await;
    assert_eq!(
        run.end_reason.as_deref(),
        Some("olga is no longer an operator (now viewer)")
    );
    let (run, _) = stopped_after(store, PETE, "redrive-signed-out-1", async {
        assert!(store.end_sessions("pete").await.unwrap());
    })
    .await;
    assert!(
        run.end_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("pete's sessions were ended")),
        "{run:?}"
    );
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
        async move { store.redrive_step(id, &retention()).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .stop_redrive(id, &testing::action_id("stop-form-held-1"), PETE)
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
    let (run, items) = store.redrive(id).await.unwrap().unwrap();
    let audit = store.latest_audit(5).await.unwrap();
    let replayed = audit.iter().find(|a| a.action == "replay").unwrap();
    let stop_row = &audit[0];
    assert_eq!(stop_row.state_after.as_deref(), Some("stopped"));
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
