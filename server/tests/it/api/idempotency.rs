//! Idempotency-Key on every write: required; the same key and body answer
//! the first answer; another body is a 422; two at once act once.

use std::sync::Arc;

use idem_domain::DeadLetterState;
use serde_json::json;
use tokio::sync::Barrier;

use super::{answer, app_with_token, bare, on_both_backends, post, post_raw, problem};
use crate::common::TestApp;

on_both_backends!(
    a_write_without_an_idempotency_key_is_a_400_and_does_nothing,
    a_replay_sent_twice_with_one_key_replays_once_and_answers_the_same,
    one_key_sent_with_another_body_is_a_422_and_does_nothing,
    two_requests_at_once_with_one_key_replay_once,
    a_resolve_of_a_claim_changed_since_it_was_read_is_a_409_in_the_pages_words,
    a_discard_then_a_resolve_in_a_row_each_do_their_own_thing,
);

async fn audit_of(app: &TestApp, action: &str) -> Vec<idem_domain::AuditEntry> {
    let mut all = app.store.latest_audit(100).await.unwrap();
    all.retain(|e| e.action.as_str() == action);
    all
}

async fn a_write_without_an_idempotency_key_is_a_400_and_does_nothing(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let path = format!("/api/v1/dead-letters/{}/replay", fixture.dead_letter);
    let response = bare()
        .post(app.url(&path))
        .bearer_auth(&secret)
        .json(&json!({"reason": "provider is back"}))
        .send()
        .await
        .unwrap();
    let (status, kind, json) = answer(response).await;
    assert_eq!(status, 400, "{json}");
    assert_eq!(problem(&kind, &json), "/api/v1/problems/bad-request");
    assert!(json["detail"].as_str().unwrap().contains("Idempotency-Key"));
    for bad in ["", &"x".repeat(256), "tab\there"] {
        let response = post_raw(&app, &secret, &path, bad, &json!({})).await;
        assert_eq!(response.status().as_u16(), 400, "key {bad:?}");
    }
    let letter = app.store.letter(fixture.dead_letter).await;
    assert_eq!(letter.state, DeadLetterState::Open);
    assert!(audit_of(&app, "replay").await.is_empty());
}

async fn a_replay_sent_twice_with_one_key_replays_once_and_answers_the_same(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let path = format!("/api/v1/dead-letters/{}/replay", fixture.dead_letter);
    // Its key's outcome is unknown: the verdict refuses, and that answer is kept too.
    let plain = json!({"reason": "provider is back ✓"});
    let (status, kind, refused) = post(&app, &secret, &path, "5b0d-plain", &plain).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(problem(&kind, &refused), "/api/v1/problems/refused");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("outcome is unknown"),
        "{refused}"
    );
    let (status, _, again) = post(&app, &secret, &path, "5b0d-plain", &plain).await;
    assert_eq!((status, &again), (422, &refused));

    let body = json!({"reason": "provider is back ✓", "override_verdict": true});
    let first = post_raw(&app, &secret, &path, "5b0d-replay", &body).await;
    assert!(first.headers().get("idempotent-replayed").is_none());
    let (status, _, first) = answer(first).await;
    assert_eq!(status, 200, "{first}");
    assert!(first["outbox_id"].as_i64().is_some(), "{first}");

    let again = post_raw(&app, &secret, &path, "5b0d-replay", &body).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let (status, _, again) = answer(again).await;
    assert_eq!((status, &again), (200, &first), "the first answer, again");

    let letter = app.store.letter(fixture.dead_letter).await;
    assert_eq!(letter.state, DeadLetterState::Replayed);
    let replays = audit_of(&app, "replay").await;
    assert_eq!(replays.len(), 1, "replayed once");
    assert_eq!(
        replays[0].actor, "olga (token deploy-bot)",
        "the audit names the token and its owner"
    );
    assert_eq!(
        replays[0].reason.as_deref(),
        Some("override (Blocked: the outcome is unknown): provider is back ✓"),
        "audited as an override, as from the page"
    );
    assert_eq!(
        idem_store::testing::count_rows(&app.store, "outbox").await,
        1
    );

    // A new key for the same letter: a new action, which finds it replayed.
    let (status, kind, json) = post(&app, &secret, &path, "another-key", &body).await;
    assert_eq!(status, 409, "{json}");
    assert_eq!(problem(&kind, &json), "/api/v1/problems/changed");
    assert!(
        json["detail"]
            .as_str()
            .unwrap()
            .contains("olga (token deploy-bot)"),
        "{json}"
    );
}

async fn one_key_sent_with_another_body_is_a_422_and_does_nothing(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let replay = format!("/api/v1/dead-letters/{}/replay", fixture.dead_letter);
    let discard = format!("/api/v1/dead-letters/{}/discard", fixture.discardable);
    let (status, _, json) = post(
        &app,
        &secret,
        &discard,
        "k-1",
        &json!({"reason": "sent already"}),
    )
    .await;
    assert_eq!(status, 200, "{json}");
    for (path, body) in [
        (&discard, json!({"reason": "another reason"})),
        (&replay, json!({"reason": "sent already"})),
    ] {
        let (status, kind, json) = post(&app, &secret, path, "k-1", &body).await;
        assert_eq!(status, 422, "{path}: {json}");
        assert_eq!(
            problem(&kind, &json),
            "/api/v1/problems/idempotency-key-reused"
        );
    }
    let letter = app.store.letter(fixture.dead_letter).await;
    assert_eq!(
        letter.state,
        DeadLetterState::Open,
        "the replay was not done"
    );
    assert_eq!(audit_of(&app, "discard").await.len(), 1);
}

async fn two_requests_at_once_with_one_key_replay_once(db: idem_store::testing::TestDatabase) {
    let (app, fixture, secret) = app_with_token(db).await;
    let app = Arc::new(app);
    let path = format!("/api/v1/dead-letters/{}/replay", fixture.dead_letter);
    let start = Arc::new(Barrier::new(6));
    let racers: Vec<_> = (0..6)
        .map(|_| {
            let (app, secret, path, start) =
                (app.clone(), secret.clone(), path.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                post(
                    &app,
                    &secret,
                    &path,
                    "one-key",
                    &json!({"reason": "race", "override_verdict": true}),
                )
                .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.unwrap());
    }
    let done: Vec<_> = answers.iter().filter(|a| a.0 == 200).collect();
    assert!(!done.is_empty(), "{answers:?}");
    assert!(
        done.iter().all(|a| a.2 == done[0].2),
        "every 200 is the first answer: {answers:?}"
    );
    for (status, kind, json) in answers.iter().filter(|a| a.0 != 200) {
        assert_eq!(*status, 409, "{json}");
        assert_eq!(
            problem(kind, json),
            "/api/v1/problems/idempotency-key-in-progress"
        );
    }
    assert_eq!(audit_of(&app, "replay").await.len(), 1, "replayed once");
    assert_eq!(
        idem_store::testing::count_rows(&app.store, "outbox").await,
        1
    );
}

async fn a_resolve_of_a_claim_changed_since_it_was_read_is_a_409_in_the_pages_words(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let path = "/api/v1/keys/orders/key-1/resolve";
    let stale = json!({"version": fixture.unknown_version - 1, "outcome": "failed", "reason": "provider said no"});
    let (status, kind, json) = post(&app, &secret, path, "k-stale", &stale).await;
    assert_eq!(status, 409, "{json}");
    assert_eq!(problem(&kind, &json), "/api/v1/problems/changed");
    assert!(
        json["detail"]
            .as_str()
            .unwrap()
            .starts_with("Nothing was changed:"),
        "{json}"
    );

    let hostile =
        json!({"version": fixture.unknown_version, "outcome": "sent; DROP TABLE", "reason": ""});
    let (status, _, json) = post(&app, &secret, path, "k-hostile", &hostile).await;
    assert_eq!(status, 400, "{json}");
    assert!(
        json["detail"]
            .as_str()
            .unwrap()
            .contains("is not a resolution"),
        "{json}"
    );

    let unknown_field = json!({"version": 1, "outcome": "failed", "colour": "red"});
    assert_eq!(
        post(&app, &secret, path, "k-field", &unknown_field).await.0,
        400
    );

    let claim = app
        .store
        .claims()
        .claim(
            &idem_store::testing::consumer("orders"),
            &idem_store::testing::key("key-1"),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        claim.status,
        idem_domain::ClaimStatus::Unknown,
        "nothing was resolved"
    );
}

async fn a_discard_then_a_resolve_in_a_row_each_do_their_own_thing(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let discard = format!("/api/v1/dead-letters/{}/discard", fixture.discardable);
    let (status, _, discarded) = post(
        &app,
        &secret,
        &discard,
        "k-1",
        &json!({"reason": "sent already"}),
    )
    .await;
    assert_eq!(status, 200, "{discarded}");
    let resolve = json!({"version": fixture.unknown_version, "outcome": "sent", "provider_ref": "pi_9 / ü", "reason": "provider log"});
    let (status, _, resolved) = post(
        &app,
        &secret,
        "/api/v1/keys/orders/key-1/resolve",
        "k-2",
        &resolve,
    )
    .await;
    assert_eq!(status, 200, "{resolved}");
    assert_ne!(discarded["audit_id"], resolved["audit_id"]);

    let letter = app.store.letter(fixture.discardable).await;
    assert_eq!(letter.state, DeadLetterState::Discarded);
    let claim = app
        .store
        .claims()
        .claim(
            &idem_store::testing::consumer("orders"),
            &idem_store::testing::key("key-1"),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.status, idem_domain::ClaimStatus::Sent);
    assert_eq!(claim.provider_ref.as_deref(), Some("pi_9 / ü"));
    let resolutions = audit_of(&app, "resolve:sent").await;
    assert_eq!(resolutions[0].actor, "olga (token deploy-bot)");
}
