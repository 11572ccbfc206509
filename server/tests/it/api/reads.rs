//! The API's reads: the pages' records as JSON, a hostile key read back
//! exactly, bad input a 400 problem, paging by opaque cursor.

use idem_store::{Delivery, Outcome, Ts};

use super::{app_with_token, bare, get, on_both_backends, problem};

on_both_backends!(
    a_keys_whole_story_is_read_back_with_every_character_it_has,
    a_key_search_finds_a_provider_reference_and_a_message_id_as_the_page_does,
    bad_input_is_a_400_problem_and_an_unknown_address_a_404_problem,
    the_unknown_outcomes_are_paged_by_an_opaque_cursor,
    checks_and_objectives_are_read_as_the_pages_read_them,
);

/// A key with every character a URL can trip on.
const KEY: &str = "refund:EU/2026/Ø-PO #7 50% 💶 עברית";

async fn a_keys_whole_story_is_read_back_with_every_character_it_has(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let now = Ts::now();
    let mut tx = app.store.begin().await.unwrap();
    let delivery = Delivery {
        consumer: "orders",
        key: KEY,
        payload_hash: None,
        at: now,
    };
    tx.claim(&delivery).await.unwrap();
    tx.lease("orders", KEY, now, now).await.unwrap();
    tx.record(
        "orders",
        KEY,
        Outcome::Unknown {
            error: "<b>timeout</b>",
        },
        now,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    crate::common::dead_letter(&app.store, KEY).await;

    let segment = idem_app::links::key_href("orders", KEY);
    let path = segment.replacen("/keys/", "/api/v1/keys/", 1);
    let (status, kind, json) = get(&app, &secret, &path).await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(kind, "application/json");
    assert_eq!(json["key"], KEY);
    assert_eq!(json["claim"]["status"], "unknown");
    assert_eq!(
        json["claim"]["last_error"], "<b>timeout</b>",
        "as stored, not escaped twice"
    );
    assert_eq!(json["dead_letters"][0]["key"], KEY);

    let search = format!("/api/v1/keys?q={}", percent(KEY));
    let (status, _, json) = get(&app, &secret, &search).await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["items"][0]["key"], KEY);
}

async fn a_key_search_finds_a_provider_reference_and_a_message_id_as_the_page_does(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let now = Ts::now();
    let reference = "ch_3Pq/7 %#";
    let mut tx = app.store.begin().await.unwrap();
    let delivery = Delivery {
        consumer: "orders",
        key: "invoice:7",
        payload_hash: None,
        at: now,
    };
    tx.claim(&delivery).await.unwrap();
    tx.lease("orders", "invoice:7", now, now).await.unwrap();
    let sent = Outcome::Sent {
        provider_ref: Some(reference),
    };
    tx.record("orders", "invoice:7", sent, now).await.unwrap();
    tx.commit().await.unwrap();
    // A dead letter whose message id is its key, and no claim of it.
    crate::common::dead_letter(&app.store, "msg:only-1").await;

    let (status, _, json) = get(
        &app,
        &secret,
        &format!("/api/v1/keys?q={}", percent(reference)),
    )
    .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        json["items"],
        serde_json::json!([]),
        "no key is the reference"
    );
    assert_eq!(json["by_provider_ref"][0]["key"], "invoice:7", "{json}");
    assert_eq!(json["by_provider_ref"][0]["provider_ref"], reference);

    let (status, _, json) = get(&app, &secret, "/api/v1/keys?q=msg%3Aonly-1").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(
        json["by_message_id"][0]["message_id"], "msg:only-1",
        "{json}"
    );
    assert_eq!(json["by_provider_ref"], serde_json::json!([]));
}

fn percent(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

async fn bad_input_is_a_400_problem_and_an_unknown_address_a_404_problem(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    for path in [
        "/api/v1/unknown?cursor=not-a-cursor",
        "/api/v1/dead-letters?state=lost",
        "/api/v1/keys/orders/%FF%FE",
        "/api/v1/dead-letters/twelve",
        "/api/v1/unknown?from=yesterday",
        "/api/v1/unknown?consumer=a&consumer=b",
    ] {
        let (status, kind, json) = get(&app, &secret, path).await;
        assert_eq!(status, 400, "{path}: {json}");
        assert_eq!(
            problem(&kind, &json),
            "/api/v1/problems/bad-request",
            "{path}"
        );
        assert!(!json["detail"].as_str().unwrap().is_empty());
    }
    for path in [
        "/api/v1/",
        "/api/v1/nothing-here",
        "/api/v1/keys/orders/no-such-key",
        "/api/v1/checks/no-such-check",
    ] {
        let (status, kind, json) = get(&app, &secret, path).await;
        assert_eq!(status, 404, "{path}: {json}");
        assert_eq!(
            problem(&kind, &json),
            "/api/v1/problems/not-found",
            "{path}"
        );
    }
    // A post to no operation is the API's 404, never a page's cross-site refusal.
    let response = bare()
        .post(app.url("/api/v1/"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let (_, _, json) = get(&app, &secret, "/api/v1/keys/orders/no-such-key").await;
    assert_eq!(
        json["detail"],
        "No consumer named “orders” has a claim, outbox row or dead letter for the key “no-such-key”.",
        "the pages' words"
    );
}

async fn the_unknown_outcomes_are_paged_by_an_opaque_cursor(db: idem_store::testing::TestDatabase) {
    let (app, _, secret) = app_with_token(db).await;
    let now = Ts::now();
    let mut tx = app.store.begin().await.unwrap();
    for n in 0..60 {
        let key = format!("page-{n:02}");
        let delivery = Delivery {
            consumer: "orders",
            key: &key,
            payload_hash: None,
            at: now,
        };
        tx.claim(&delivery).await.unwrap();
        tx.lease("orders", &key, now, now).await.unwrap();
        tx.record("orders", &key, Outcome::Unknown { error: "timeout" }, now)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut path = "/api/v1/unknown?consumer=orders".to_owned();
    loop {
        let (status, _, json) = get(&app, &secret, &path).await;
        assert_eq!(status, 200, "{json}");
        for claim in json["items"].as_array().unwrap() {
            assert!(
                seen.insert(claim["key"].as_str().unwrap().to_owned()),
                "no key twice"
            );
        }
        match json["next"].as_str() {
            Some(next) => {
                path = format!("/api/v1/unknown?consumer=orders&cursor={}", percent(next))
            }
            None => break,
        }
    }
    assert_eq!(seen.len(), 61, "the fixture's key-1 and the sixty");
}

async fn checks_and_objectives_are_read_as_the_pages_read_them(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let (status, _, json) = get(&app, &secret, "/api/v1/checks").await;
    assert_eq!(status, 200, "{json}");
    let checks = json["checks"].as_array().unwrap();
    let sent_dead = checks
        .iter()
        .find(|c| c["check"] == "dead-letter-already-sent")
        .expect("the check is listed");
    assert_eq!(
        sent_dead["count"]["value"], 1,
        "the fixture's discardable letter"
    );
    let (status, _, json) = get(&app, &secret, "/api/v1/checks/dead-letter-already-sent").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["items"][0]["key"], "sent-1");

    let (status, _, json) = get(&app, &secret, "/api/v1/slo").await;
    assert_eq!(status, 200, "{json}");
    assert!(!json["slos"].as_array().unwrap().is_empty());
    assert!(json["slos"][0]["objective"].as_f64().unwrap() > 0.9);
}
