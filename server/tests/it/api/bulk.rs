//! Bulk discard and bulk resolve through the API: exactly what the check
//! offered or the keys listed, each item through the single action and
//! audited with the token's owner; a bad list refused whole, naming each
//! bad key.

use idem_store::{Outcome, Store, Ts};
use serde_json::{Value, json};

use super::{app_with_token, get, on_both_backends, post, problem};
use crate::common::{TestApp, dead_letter};

on_both_backends!(
    a_token_discards_the_dead_letters_already_sent_that_the_check_offered,
    a_token_resolves_keys_as_sent_each_with_its_reference_and_a_changed_key_is_skipped,
    a_bulk_resolve_with_a_bad_key_is_refused_whole_and_names_it,
);

/// A claim of `orders` for `key` ending in `outcome`; its version.
async fn claimed(store: &Store, key: &str, outcome: Outcome<'_>) -> i64 {
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    tx.claim(&idem_store::Delivery {
        consumer: "orders",
        key,
        payload_hash: None,
        at: now,
    })
    .await
    .unwrap();
    tx.lease("orders", key, now, now).await.unwrap();
    let claim = tx.record("orders", key, outcome, now).await.unwrap();
    tx.commit().await.unwrap();
    claim.version
}

/// The run `id` once it has ended (the server's runner paces it).
async fn ended(app: &TestApp, token: &str, id: i64) -> Value {
    for _ in 0..100 {
        let (status, _, record) = get(app, token, &format!("/api/v1/redrives/{id}")).await;
        assert_eq!(status, 200, "{record}");
        if record["run"]["state"] != "running" {
            return record;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("run {id} did not end");
}

fn outcomes(record: &Value) -> Vec<&str> {
    record["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["outcome"].as_str().unwrap_or("waiting"))
        .collect()
}

async fn a_token_discards_the_dead_letters_already_sent_that_the_check_offered(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let sent = ["bulk:1 🧾", "bulk/2%#", "bulk:3 שלום"];
    let mut letters = vec![fixture.discardable];
    for key in sent {
        claimed(
            &app.store,
            key,
            Outcome::Sent {
                provider_ref: Some("msg_9"),
            },
        )
        .await;
        letters.push(dead_letter(&app.store, key).await);
    }
    let check = "/api/v1/checks/dead-letter-already-sent";
    let (status, _, found) = get(&app, &secret, check).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["discard"]["count"], 4, "{found}");
    let offer = found["discard"]["offer"].as_str().unwrap().to_owned();

    // Without a reason, nothing starts.
    let (status, kind, refused) = post(
        &app,
        &secret,
        "/api/v1/bulk/discard",
        "discard-0",
        &json!({ "offer": offer }),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        problem(&kind, &refused).ends_with("/bad-request"),
        "{refused}"
    );
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("needs a reason")
    );

    let body = json!({ "offer": offer, "reason": "INC-7: the relay sent them twice" });
    let (status, _, started) =
        post(&app, &secret, "/api/v1/bulk/discard", "discard-1", &body).await;
    assert_eq!(status, 201, "{started}");
    let id = started["redrive_id"].as_i64().unwrap();
    assert!(
        started["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Bulk discard #{id} started: 4 dead letters")),
        "{started}"
    );
    // Sent again with the same key: the first answer, not a second run.
    let (status, _, again) = post(&app, &secret, "/api/v1/bulk/discard", "discard-1", &body).await;
    assert_eq!((status, &again), (201, &started));

    let record = ended(&app, &secret, id).await;
    assert_eq!(record["run"]["kind"], "discard");
    assert_eq!(outcomes(&record), ["discarded"; 4]);
    for id in &letters {
        let letter = app.store.letter(*id).await;
        assert_eq!(
            letter.state,
            idem_domain::DeadLetterState::Discarded,
            "#{id}"
        );
    }
    let audit = app.store.latest_audit(10).await.unwrap();
    let discards: Vec<_> = audit
        .iter()
        .filter(|a| a.action.as_str() == "discard")
        .collect();
    assert_eq!(discards.len(), 4);
    assert!(
        discards
            .iter()
            .all(|a| a.actor == "olga (token deploy-bot)"),
        "{discards:?}"
    );
    let (_, _, found) = get(&app, &secret, check).await;
    assert_eq!(
        found["discard"],
        Value::Null,
        "nothing left to offer: {found}"
    );

    // The offer read before the run no longer names what is there: nothing starts.
    let (status, _, changed) =
        post(&app, &secret, "/api/v1/bulk/discard", "discard-2", &body).await;
    assert_eq!(status, 422, "nothing matches any more: {changed}");
    assert!(
        changed["detail"]
            .as_str()
            .unwrap()
            .contains("nothing to discard"),
        "{changed}"
    );
}

async fn a_token_resolves_keys_as_sent_each_with_its_reference_and_a_changed_key_is_skipped(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let keys = ["pay:1 💶", "pay/2%#", "pay:3 مرحبا"];
    let mut versions = Vec::new();
    for key in keys {
        versions.push(claimed(&app.store, key, Outcome::Unknown { error: "timeout" }).await);
    }
    // Someone resolves the second by hand after the script read the list.
    let path = format!(
        "/api/v1/keys/orders/{}/resolve",
        idem_domain::IdempotencyKey::parse(keys[1])
            .unwrap()
            .to_segment()
    );
    let by_hand = json!({ "version": versions[1], "outcome": "failed-retry" });
    let (status, _, done) = post(&app, &secret, &path, "by-hand-1", &by_hand).await;
    assert_eq!(status, 200, "{done}");

    let listed: Vec<Value> = keys
        .iter()
        .zip(&versions)
        .enumerate()
        .map(|(n, (key, version))| {
            json!({ "consumer": "orders", "key": key, "version": version, "provider_ref": format!("re_{n}") })
        })
        .collect();
    let body = json!({ "resolve_as": "sent", "reason": "provider log 03:00", "keys": listed });
    let (status, _, started) =
        post(&app, &secret, "/api/v1/bulk/resolve", "resolve-1", &body).await;
    assert_eq!(status, 201, "{started}");
    let id = started["redrive_id"].as_i64().unwrap();
    let record = ended(&app, &secret, id).await;
    assert_eq!(record["run"]["kind"], "resolve");
    assert_eq!(record["run"]["resolve_as"], "sent");
    assert_eq!(outcomes(&record), ["resolved", "skipped", "resolved"]);
    let why = record["items"][1]["reason"].as_str().unwrap();
    assert!(
        why.contains("olga (token deploy-bot)"),
        "names who changed it: {why}"
    );
    for (n, key) in [(0, keys[0]), (2, keys[2])] {
        let (status, _, story) = get(
            &app,
            &secret,
            &format!(
                "/api/v1/keys/orders/{}",
                idem_domain::IdempotencyKey::parse(key)
                    .unwrap()
                    .to_segment()
            ),
        )
        .await;
        assert_eq!(status, 200, "{story}");
        assert_eq!(story["claim"]["status"], "sent", "{story}");
        assert_eq!(story["claim"]["provider_ref"], format!("re_{n}"), "{story}");
    }
}

async fn a_bulk_resolve_with_a_bad_key_is_refused_whole_and_names_it(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    let good =
        json!({ "consumer": "orders", "key": fixture.key, "version": fixture.unknown_version });
    let cases = [
        (
            json!({ "resolve_as": "sent", "keys": [good] }),
            "line 1: resolving as sent needs the provider's reference",
        ),
        (
            json!({ "resolve_as": "failed-retry", "keys": [good, good] }),
            "line 2: the key is listed twice (first on line 1)",
        ),
        (
            json!({ "resolve_as": "failed-retry", "keys": [{ "consumer": "orders", "key": "nul\u{0}key" }] }),
            "control",
        ),
        (
            json!({ "resolve_as": "maybe", "keys": [good] }),
            "not a valid bulk resolution",
        ),
        (
            json!({ "resolve_as": "failed", "keys": [good] }),
            "needs a reason",
        ),
    ];
    for (n, (body, says)) in cases.iter().enumerate() {
        let (status, kind, refused) = post(
            &app,
            &secret,
            "/api/v1/bulk/resolve",
            &format!("bad-{n}"),
            body,
        )
        .await;
        // 400: the list is not one; 422: the store refused to start it.
        assert!(matches!(status, 400 | 422), "{body}: {refused}");
        problem(&kind, &refused);
        let detail = refused["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{body}: {refused}");
    }
    let many: Vec<Value> = (0..501)
        .map(|n| json!({ "consumer": "orders", "key": format!("k{n}") }))
        .collect();
    let (status, _, refused) = post(
        &app,
        &secret,
        "/api/v1/bulk/resolve",
        "bad-many",
        &json!({ "resolve_as": "failed-retry", "keys": many }),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("at most 500"),
        "{refused}"
    );
    assert!(
        app.store
            .runs()
            .running_redrives()
            .await
            .unwrap()
            .iter()
            .all(|id| id.get() == fixture.redrive)
    );

    // A viewer's token may read but not start one.
    let viewer = super::token_of(&app.store, "reader", "vera", "viewer", "viewer").await;
    let body = json!({ "resolve_as": "failed-retry", "keys": [good] });
    let (status, kind, refused) =
        post(&app, &viewer, "/api/v1/bulk/resolve", "viewer-1", &body).await;
    assert_eq!(status, 403, "{refused}");
    problem(&kind, &refused);
    let claim = app
        .store
        .claims()
        .claim(
            &idem_store::testing::consumer("orders"),
            &idem_store::testing::key(&fixture.key),
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
