//! What actions leave behind: audit rows that cannot be changed, and how long
//! recovery took.

use chrono::TimeDelta;
use idem_domain::{DeadLetterState, action::Resolution};
use idem_store::{
    Outcome, ResolveRequest, Store,
    testing::{self, execute_raw},
};

use super::{OLGA, ago, dead_lettered, replay, unknown_claim};

idem_store::on_both_backends!(
    a_rolled_back_action_leaves_no_audit_row,
    the_audit_log_refuses_updates_and_deletes,
    actions_record_how_long_recovery_took,
    an_action_dated_ahead_happens_now_and_none_recovers_in_negative_time,
);

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
            .actions()
            .replay_dead_letter(&replay(id, &testing::action_id("doomed-form")))
            .await
            .is_err()
    );
    assert!(
        store
            .claims()
            .audit_for_key(&testing::consumer("orders"), &testing::key("refund:45"))
            .await
            .unwrap()
            .is_empty(),
        "no audit row without the effect"
    );
    assert_eq!(
        store
            .claims()
            .dead_letter(
                idem_domain::DeadLetterId::of_row(id),
                &idem_domain::Within::Every
            )
            .await
            .unwrap()
            .unwrap()
            .state,
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
    store
        .actions()
        .replay_dead_letter(&replay(id, &testing::action_id("kept-form")))
        .await
        .unwrap();
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
        store
            .claims()
            .audit_for_key(&testing::consumer("orders"), &testing::key("refund:46"))
            .await
            .unwrap()[0]
            .actor,
        "olga"
    );
}

async fn actions_record_how_long_recovery_took(store: &Store) {
    let id = dead_lettered(store, "rec:1", Outcome::Permanent { error: "x" }).await;
    store
        .actions()
        .replay_dead_letter(&replay(id, &testing::action_id("recovery")))
        .await
        .unwrap();
    let seconds = store
        .claims()
        .audit_for_key(&testing::consumer("orders"), &testing::key("rec:1"))
        .await
        .unwrap()[0]
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
        .actions()
        .replay_dead_letter_at(&replay(id, &testing::action_id("ahead-form")), ago(-60))
        .await
        .unwrap();
    let orders = testing::consumer("orders");
    let replayed = &store
        .claims()
        .audit_for_key(&orders, &testing::key("ahead:1"))
        .await
        .unwrap()[0];
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
    let behind = testing::key("behind:1");
    let done = store
        .actions()
        .resolve_unknown_at(
            &ResolveRequest {
                scope: &idem_domain::Within::Every,
                consumer: &orders,
                key: &behind,
                version,
                resolution: Resolution::FailedRetry,
                action_id: &testing::action_id("behind-form"),
                actor: OLGA,
                reason: None,
            },
            ago(40),
        )
        .await
        .unwrap();
    assert!(done.is_done(), "{done:?}");
    let resolved = &store
        .claims()
        .audit_for_key(&orders, &behind)
        .await
        .unwrap()[0];
    assert!(resolved.at < ago(39).0, "kept its date: {}", resolved.at);
    assert_eq!(resolved.recovery_seconds, Some(0.0));
}
