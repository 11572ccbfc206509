//! A redrive drives on its starter's current standing: a starter disabled,
//! demoted, signed out everywhere or whose token is revoked stops it before
//! its next item, and rights narrowed since the page was drawn start nothing.

use super::redrive::{
    FAILED, by_error, dead_letter, dead_letter_state, operators, request, start, started, step,
};
use super::redrive_guards::open_letters;
use super::{OLGA, PETE};
use idem_domain::{DeadLetterState, ItemOutcome, RedriveState, Role};
use idem_store::{DeadLetterFilter, RedriveStart, RedriveStep, Store, testing};

idem_store::on_both_backends!(
    a_redrive_a_token_started_reads_its_owner_and_stops_once_the_token_is_revoked,
    a_redrive_whose_starter_s_rights_narrowed_after_the_page_was_drawn_starts_nothing,
    a_redrive_stops_at_once_when_its_starter_is_disabled,
    a_redrive_stops_when_its_starter_is_demoted_or_signed_out_everywhere,
);

async fn a_redrive_a_token_started_reads_its_owner_and_stops_once_the_token_is_revoked(
    store: &Store,
) {
    operators(store).await;
    let rights = idem_domain::Rights::everywhere(Role::Operator);
    let idem_store::TokenCreated::Created { id: token } = store
        .tokens()
        .create_token(&idem_store::NewToken {
            name: &idem_store::testing::token("nightly"),
            owner: &idem_store::testing::account("olga"),
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
    let offer = store.runs().redrive_offer(&selection).await.unwrap();
    let form = testing::action_id("redrive-token-1");
    let by_token = idem_store::Actor {
        name: "olga (token nightly)",
        role: "operator",
        client_addr: None,
    };
    let answer = store
        .runs()
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
        matches!(step(store, id.get()).await, RedriveStep::Item(_)),
        "one letter taken"
    );
    assert!(
        store
            .tokens()
            .revoke_token(&idem_store::testing::token("nightly"), "admin", None)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(step(store, id.get()).await, RedriveStep::Ended);
    let (run, items) = store
        .runs()
        .redrive(id, &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
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
    let offer = store.runs().redrive_offer(&selection).await.unwrap();
    // The page was drawn for olga the operator of every team; before her
    // start's transaction runs she becomes an operator of payments only.
    let drawn_for = idem_domain::Rights::everywhere(Role::Operator);
    let narrowed: idem_domain::Rights = "operator@payments".parse().unwrap();
    assert!(
        store
            .people()
            .set_rights(&idem_store::testing::account("olga"), &narrowed)
            .await
            .unwrap()
    );
    let form = testing::action_id("redrive-narrowed-1");
    let answer = store
        .runs()
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
        .runs()
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
    store
        .runs()
        .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap()
}

async fn a_redrive_stops_at_once_when_its_starter_is_disabled(store: &Store) {
    operators(store).await;
    let (run, items) = stopped_after(store, OLGA, "redrive-disabled-1", async {
        assert!(
            store
                .people()
                .set_disabled(&idem_store::testing::account("olga"), true)
                .await
                .unwrap()
        );
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
    assert_eq!(
        end.state_after.as_ref().map(ToString::to_string).as_deref(),
        Some("stopped")
    );

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
        assert!(
            store
                .people()
                .set_role(&idem_store::testing::account("olga"), Role::Viewer)
                .await
                .unwrap()
        );
    })
    .await;
    assert_eq!(
        run.end_reason.as_deref(),
        Some("olga is no longer an operator (now viewer)")
    );
    let (run, _) = stopped_after(store, PETE, "redrive-signed-out-1", async {
        assert!(
            store
                .people()
                .end_sessions(&idem_store::testing::account("pete"))
                .await
                .unwrap()
        );
    })
    .await;
    assert!(
        run.end_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("pete's sessions were ended")),
        "{run:?}"
    );
}
