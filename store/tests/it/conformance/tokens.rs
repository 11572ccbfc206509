//! API tokens and the Idempotency-Key of their writes.

use std::sync::Arc;

use chrono::TimeDelta;
use idem_domain::{AccountOrigin, Rights, Role};
use idem_store::{Begun, NewToken, Store, TokenCreated, Ts};
use tokio::sync::Barrier;

use super::at;

idem_store::on_both_backends!(
    a_token_opens_by_its_secret_until_it_is_revoked,
    an_expired_token_or_one_of_a_disabled_owner_opens_nothing,
    a_token_name_is_never_reused_and_its_owner_must_exist,
    a_token_limited_to_a_team_keeps_its_rights,
    a_token_records_its_last_use_at_most_once_a_minute,
    a_key_sent_again_with_the_same_request_answers_the_first_answer,
    a_key_sent_again_with_another_request_is_a_mismatch,
    a_key_whose_first_request_is_running_is_in_progress_until_it_is_stale,
    an_abandoned_key_can_be_sent_again,
    two_requests_racing_with_one_key_begin_it_once,
    keys_are_swept_after_they_are_kept,
);

async fn an_account(store: &Store, name: &str) {
    store
        .people()
        .create_account(
            &idem_store::testing::account(name),
            Role::Operator,
            None,
            AccountOrigin::Password,
        )
        .await
        .unwrap()
        .expect("a new account");
}

fn new_token<'a>(name: &'a str, owner: &'a str, rights: &'a Rights, hash: &'a str) -> NewToken<'a> {
    NewToken {
        name: Box::leak(Box::new(idem_store::testing::token(name))),
        owner: Box::leak(Box::new(idem_store::testing::account(owner))),
        rights,
        secret_sha256: hash,
        expires_at: None,
        created_by: "admin",
        client_addr: None,
    }
}

/// A token `name` of a new account `owner`, operator everywhere; its id.
async fn a_token(store: &Store, name: &str, owner: &str, hash: &str) -> i64 {
    an_account(store, owner).await;
    let rights = Rights::everywhere(Role::Operator);
    match store
        .tokens()
        .create_token(&new_token(name, owner, &rights, hash))
        .await
        .unwrap()
    {
        TokenCreated::Created { id } => id,
        other => panic!("not created: {other:?}"),
    }
}

async fn a_token_opens_by_its_secret_until_it_is_revoked(store: &Store) {
    a_token(store, "deploy-bot", "olga", "hash-1").await;
    let token = store
        .tokens()
        .token_by_secret("hash-1", Ts::now())
        .await
        .unwrap()
        .expect("live")
        .token;
    assert_eq!(
        (token.name.as_str(), token.owner.as_str()),
        ("deploy-bot", "olga")
    );
    assert_eq!(token.role, Role::Operator);
    assert!(
        store
            .tokens()
            .token_by_secret("hash-2", Ts::now())
            .await
            .unwrap()
            .is_none()
    );

    let created = store.latest_audit(1).await.unwrap().pop().expect("audited");
    assert_eq!(created.action, idem_domain::AuditAction::TokenCreated);
    assert_eq!(created.target.as_deref(), Some("deploy-bot"));
    assert!(created.state_after.unwrap().to_string().contains("of olga"));

    let revoked_by = store
        .tokens()
        .revoke_token(&idem_store::testing::token("deploy-bot"), "admin", None)
        .await
        .unwrap()
        .expect("revoked, audited");
    assert!(
        store
            .tokens()
            .token_by_secret("hash-1", Ts::now())
            .await
            .unwrap()
            .is_none(),
        "a revoked token opens nothing, at once"
    );
    assert_eq!(
        store
            .tokens()
            .revoke_token(&idem_store::testing::token("deploy-bot"), "admin", None)
            .await
            .unwrap(),
        None,
        "revoked twice: once"
    );
    let revoked = store.latest_audit(1).await.unwrap().pop().unwrap();
    assert_eq!(revoked.id, revoked_by);
    assert_eq!(
        (revoked.action.as_str(), revoked.actor.as_str()),
        ("token revoked", "admin")
    );
    let listed = store.tokens().list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].revoked_at.is_some() && !listed[0].is_live(chrono::Utc::now()));
}

async fn an_expired_token_or_one_of_a_disabled_owner_opens_nothing(store: &Store) {
    an_account(store, "olga").await;
    let rights = Rights::everywhere(Role::Viewer);
    let mut soon = new_token("nightly", "olga", &rights, "hash-n");
    soon.expires_at = Some(Ts::now() + TimeDelta::hours(1));
    store.tokens().create_token(&soon).await.unwrap();
    assert!(
        store
            .tokens()
            .token_by_secret("hash-n", Ts::now())
            .await
            .unwrap()
            .is_some()
    );
    let later = Ts::now() + TimeDelta::hours(2);
    assert!(
        store
            .tokens()
            .token_by_secret("hash-n", later)
            .await
            .unwrap()
            .is_none(),
        "expired"
    );

    assert!(
        store
            .people()
            .set_disabled(&idem_store::testing::account("olga"), true)
            .await
            .unwrap()
    );
    assert!(
        store
            .tokens()
            .token_by_secret("hash-n", Ts::now())
            .await
            .unwrap()
            .is_none(),
        "its owner's account is disabled"
    );
}

async fn a_token_name_is_never_reused_and_its_owner_must_exist(store: &Store) {
    a_token(store, "deploy-bot", "olga", "hash-1").await;
    let rights = Rights::everywhere(Role::Viewer);
    assert_eq!(
        store
            .tokens()
            .create_token(&new_token("deploy-bot", "olga", &rights, "hash-2"))
            .await
            .unwrap(),
        TokenCreated::NameTaken
    );
    store
        .tokens()
        .revoke_token(&idem_store::testing::token("deploy-bot"), "admin", None)
        .await
        .unwrap();
    assert_eq!(
        store
            .tokens()
            .create_token(&new_token("deploy-bot", "olga", &rights, "hash-3"))
            .await
            .unwrap(),
        TokenCreated::NameTaken,
        "not even once revoked: an audit row names one token"
    );
    assert_eq!(
        store
            .tokens()
            .create_token(&new_token("ghost-bot", "nobody", &rights, "hash-4"))
            .await
            .unwrap(),
        TokenCreated::NoSuchOwner
    );
    assert_eq!(store.tokens().list().await.unwrap().len(), 1);
}

async fn a_token_limited_to_a_team_keeps_its_rights(store: &Store) {
    an_account(store, "pam").await;
    let rights: Rights = "viewer operator@payments".parse().unwrap();
    store
        .tokens()
        .create_token(&new_token("payments-bot", "pam", &rights, "hash-p"))
        .await
        .unwrap();
    let live = store
        .tokens()
        .token_by_secret("hash-p", Ts::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        live.owner_rights,
        idem_domain::Rights::everywhere(Role::Operator),
        "pam's own"
    );
    let token = live.token;
    assert_eq!(token.rights, rights);
    assert_eq!(token.role, Role::Operator, "the highest role held anywhere");
}

async fn a_token_records_its_last_use_at_most_once_a_minute(store: &Store) {
    a_token(store, "deploy-bot", "olga", "hash-1").await;
    assert!(
        store.tokens().list().await.unwrap()[0]
            .last_used_at
            .is_none()
    );
    store
        .tokens()
        .token_by_secret("hash-1", at(0))
        .await
        .unwrap();
    assert_eq!(
        store.tokens().list().await.unwrap()[0].last_used_at,
        Some(at(0).0)
    );
    store
        .tokens()
        .token_by_secret("hash-1", at(30))
        .await
        .unwrap();
    assert_eq!(
        store.tokens().list().await.unwrap()[0].last_used_at,
        Some(at(0).0),
        "within the minute: not written again"
    );
    store
        .tokens()
        .token_by_secret("hash-1", at(61))
        .await
        .unwrap();
    assert_eq!(
        store.tokens().list().await.unwrap()[0].last_used_at,
        Some(at(61).0)
    );
}

const STALE: TimeDelta = TimeDelta::seconds(60);

/// Begins `key` for `token` with the request's fingerprint at `now`.
async fn begin(
    store: &Store,
    token: i64,
    key: &str,
    fingerprint: &str,
    now: Ts,
    stale: TimeDelta,
) -> Begun {
    store
        .tokens()
        .begin_idempotent(token, key, fingerprint, now, stale)
        .await
        .unwrap()
}

async fn a_key_sent_again_with_the_same_request_answers_the_first_answer(store: &Store) {
    let token = a_token(store, "deploy-bot", "olga", "hash-1").await;
    let begun = begin(store, token, "key-1", "fp-a", at(0), STALE).await;
    assert_eq!(begun, Begun::New);
    store
        .tokens()
        .finish_idempotent(token, "key-1", 200, r#"{"done":true}"#)
        .await
        .unwrap();
    for _ in 0..2 {
        assert_eq!(
            begin(store, token, "key-1", "fp-a", at(5), STALE).await,
            Begun::Replay {
                status: 200,
                body: r#"{"done":true}"#.to_owned()
            }
        );
    }
    let other = a_token(store, "other-bot", "vera", "hash-2").await;
    assert_eq!(
        begin(store, other, "key-1", "fp-b", at(5), STALE).await,
        Begun::New,
        "keys are per token"
    );
}

async fn a_key_sent_again_with_another_request_is_a_mismatch(store: &Store) {
    let token = a_token(store, "deploy-bot", "olga", "hash-1").await;
    begin(store, token, "key-1", "fp-a", at(0), STALE).await;
    assert_eq!(
        begin(store, token, "key-1", "fp-b", at(1), STALE).await,
        Begun::Mismatch,
        "while running"
    );
    store
        .tokens()
        .finish_idempotent(token, "key-1", 409, "{}")
        .await
        .unwrap();
    assert_eq!(
        begin(store, token, "key-1", "fp-b", at(2), STALE).await,
        Begun::Mismatch,
        "once answered"
    );
}

async fn a_key_whose_first_request_is_running_is_in_progress_until_it_is_stale(store: &Store) {
    let token = a_token(store, "deploy-bot", "olga", "hash-1").await;
    begin(store, token, "key-1", "fp-a", at(0), STALE).await;
    assert_eq!(
        begin(store, token, "key-1", "fp-a", at(30), STALE).await,
        Begun::InProgress
    );
    assert_eq!(
        begin(store, token, "key-1", "fp-a", at(61), STALE).await,
        Begun::New,
        "its process died: taken over"
    );
    assert_eq!(
        begin(store, token, "key-1", "fp-a", at(62), STALE).await,
        Begun::InProgress,
        "the takeover runs now"
    );
}

async fn an_abandoned_key_can_be_sent_again(store: &Store) {
    let token = a_token(store, "deploy-bot", "olga", "hash-1").await;
    begin(store, token, "key-1", "fp-a", at(0), STALE).await;
    store
        .tokens()
        .abandon_idempotent(token, "key-1")
        .await
        .unwrap();
    assert_eq!(
        begin(store, token, "key-1", "fp-a", at(1), STALE).await,
        Begun::New
    );
    store
        .tokens()
        .finish_idempotent(token, "key-1", 200, "{}")
        .await
        .unwrap();
    store
        .tokens()
        .abandon_idempotent(token, "key-1")
        .await
        .unwrap();
    assert!(
        matches!(
            begin(store, token, "key-1", "fp-a", at(2), STALE).await,
            Begun::Replay { .. }
        ),
        "an answered key is not abandoned"
    );
}

async fn two_requests_racing_with_one_key_begin_it_once(store: &Store) {
    let token = a_token(store, "deploy-bot", "olga", "hash-1").await;
    let start = Arc::new(Barrier::new(8));
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (store, start) = (store.clone(), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                begin(&store, token, "key-1", "fp-a", Ts::now(), STALE).await
            })
        })
        .collect();
    let mut begun = Vec::new();
    for racer in racers {
        begun.push(racer.await.unwrap());
    }
    assert_eq!(
        begun.iter().filter(|b| **b == Begun::New).count(),
        1,
        "{begun:?}"
    );
    assert_eq!(begun.iter().filter(|b| **b == Begun::InProgress).count(), 7);
}

async fn keys_are_swept_after_they_are_kept(store: &Store) {
    let token = a_token(store, "deploy-bot", "olga", "hash-1").await;
    begin(store, token, "old", "fp", at(0), STALE).await;
    begin(store, token, "new", "fp", at(100), STALE).await;
    assert_eq!(store.tokens().sweep_idempotency(at(50)).await.unwrap(), 1);
    assert_eq!(
        begin(store, token, "old", "fp-other", at(101), STALE).await,
        Begun::New,
        "swept: the key is free"
    );
    assert_eq!(
        begin(store, token, "new", "fp-other", at(101), STALE).await,
        Begun::Mismatch
    );
}
