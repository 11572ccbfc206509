//! Reconciliations through the API, as a nightly job runs them: the
//! provider's export as the body, the same Idempotency-Key sent twice, a
//! class applied and followed to its end; a CSV whose quoted fields hold
//! line breaks; a viewer's token and a bad export keep nothing.

use chrono::TimeDelta;
use idem_store::{Outcome, Ts};
use serde_json::{Value, json};

use super::{answer, app_with_token, bare, get, on_both_backends, post, problem, token_of};
use crate::common::TestApp;

on_both_backends!(
    a_nightly_job_reconciles_an_export_and_applies_the_class_it_proves,
    a_viewer_s_token_and_a_bad_export_keep_nothing,
    a_payment_provider_s_csv_with_descriptions_over_several_lines_reads_record_by_record,
);

async fn unknown_half_an_hour_ago(app: &TestApp, key: &str) {
    let at = Ts::now() - TimeDelta::minutes(30);
    let mut tx = app.store.begin().await.unwrap();
    tx.claim(&idem_store::Delivery {
        consumer: "orders",
        key,
        payload_hash: None,
        at,
    })
    .await
    .unwrap();
    tx.lease("orders", key, at, at).await.unwrap();
    tx.record("orders", key, Outcome::Unknown { error: "timeout" }, at)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

async fn upload(
    app: &TestApp,
    token: &str,
    query: &str,
    key: Option<&str>,
    export: &str,
) -> (u16, String, Value) {
    let mut request = bare()
        .post(app.url(&format!("/api/v1/reconciliations?{query}")))
        .bearer_auth(token)
        .header("content-type", "text/csv")
        .body(export.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    answer(request.send().await.expect("the server answers")).await
}

fn export() -> String {
    let at = |m: i64| (chrono::Utc::now() - TimeDelta::minutes(m)).to_rfc3339();
    format!(
        "{{\"id\":\"re_0\",\"idempotency_key\":\"nobody\",\"status\":\"failed\",\"created\":\"{}\"}}\n\
         {{\"id\":\"re_1\",\"idempotency_key\":\"night:1 🌙\",\"status\":\"succeeded\",\"created\":\"{}\"}}\n\
         {{\"id\":\"re_9\",\"idempotency_key\":\"elsewhere\",\"status\":\"failed\",\"created\":\"{}\"}}\n",
        at(45),
        at(30),
        at(0)
    )
}

fn class<'a>(record: &'a Value, name: &str) -> &'a Value {
    record["reconciliation"]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == name)
        .unwrap()
}

async fn a_nightly_job_reconciles_an_export_and_applies_the_class_it_proves(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    unknown_half_an_hour_ago(&app, "night:1 🌙").await;
    unknown_half_an_hour_ago(&app, "night/2%#").await;
    let query = "consumer=orders&latency_seconds=120&file_name=stripe-2026-12-05.jsonl";
    let export = export();

    let (status, _, first) =
        upload(&app, &secret, query, Some("nightly-2026-12-05"), &export).await;
    assert_eq!(status, 201, "{first}");
    let id = first["reconciliation"]["id"].as_i64().unwrap();
    assert_eq!(class(&first, "unknown-accepted")["count"], 1, "{first}");
    assert_eq!(class(&first, "unknown-absent")["count"], 1);
    assert_eq!(first["reconciliation"]["actor"], "olga (token deploy-bot)");
    assert_eq!(
        first["reconciliation"]["file_name"],
        "stripe-2026-12-05.jsonl"
    );
    // The job retried after a timeout: the same reconciliation.
    let (status, _, again) =
        upload(&app, &secret, query, Some("nightly-2026-12-05"), &export).await;
    assert_eq!(
        (status, again["reconciliation"]["id"].as_i64()),
        (201, Some(id))
    );
    // The same key with another file is not the same request.
    let (status, kind, other) = upload(
        &app,
        &secret,
        query,
        Some("nightly-2026-12-05"),
        "reference,status,time\nx,ok,2026-12-05T00:00:00Z\n",
    )
    .await;
    assert_eq!(status, 422, "{other}");
    problem(&kind, &other);

    let (status, _, read) = get(&app, &secret, &format!("/api/v1/reconciliations/{id}")).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        class(&read, "unknown-accepted")["sample"][0]["key"],
        "night:1 🌙"
    );
    assert_eq!(
        class(&read, "unknown-accepted")["sample"][0]["provider_ref"],
        "re_1"
    );

    let path = format!("/api/v1/reconciliations/{id}/apply");
    let (status, _, started) = post(
        &app,
        &secret,
        &path,
        "apply-1",
        &json!({"class": "unknown-accepted", "count": 1}),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    let run = started["redrive_id"].as_i64().unwrap();
    let (status, _, stale) = post(
        &app,
        &secret,
        &path,
        "apply-2",
        &json!({"class": "unknown-absent", "count": 5}),
    )
    .await;
    assert_eq!(
        status, 422,
        "a count that is not what the class holds starts nothing: {stale}"
    );
    assert!(
        stale["detail"]
            .as_str()
            .unwrap()
            .contains("not the 5 shown"),
        "{stale}"
    );
    for _ in 0..100 {
        let (_, _, record) = get(&app, &secret, &format!("/api/v1/redrives/{run}")).await;
        if record["run"]["state"] != "running" {
            assert_eq!(record["items"][0]["outcome"], "resolved", "{record}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (_, _, key) = get(
        &app,
        &secret,
        "/api/v1/keys/orders/night%3A1%20%F0%9F%8C%99",
    )
    .await;
    assert_eq!(key["claim"]["status"], "sent", "{key}");
    assert_eq!(key["claim"]["provider_ref"], "re_1", "{key}");

    // The token's owner is made a viewer before the job applies the other
    // class: refused, and the key stays unknown.
    app.store
        .people()
        .set_role(
            &idem_store::testing::account("olga"),
            idem_domain::Role::Viewer,
        )
        .await
        .unwrap();
    let (status, _, refused) = post(
        &app,
        &secret,
        &path,
        "apply-3",
        &json!({"class": "unknown-absent", "count": 1}),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    let (_, _, key) = get(&app, &secret, "/api/v1/keys/orders/night%2F2%25%23").await;
    assert_eq!(key["claim"]["status"], "unknown", "{key}");
}

async fn a_payment_provider_s_csv_with_descriptions_over_several_lines_reads_record_by_record(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    unknown_half_an_hour_ago(&app, "refund:7").await;
    unknown_half_an_hour_ago(&app, "refund:8").await;
    let at = (chrono::Utc::now() - TimeDelta::minutes(30)).to_rfc3339();
    // A balance-transaction export: a description over three lines (one
    // blank, one with a quoted comma), then a record with a stray quote,
    // then the record after it.
    let export = format!(
        "id,idempotency_key,status,description,created\r\n\
         re_7,refund:7,succeeded,\"Refund for order 7\r\n\r\nBerlin, \"\"Mitte\"\"\",{at}\r\n\
         re_x,\"refund:x,succeeded,stray,{at}\r\n\
         re_8,refund:8,failed,plain,{at}\r\n"
    );
    let (status, _, made) = upload(
        &app,
        &secret,
        "consumer=orders&latency_seconds=0&file_name=balance.csv",
        Some("balance-1"),
        &export,
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let reconciliation = &made["reconciliation"];
    assert_eq!(reconciliation["records"], 2, "{made}");
    assert_eq!(reconciliation["bad_lines"], 1, "{made}");
    let bad = reconciliation["bad_sample"][0].as_str().unwrap();
    assert!(
        bad.starts_with("line 5: a quoted field is not closed"),
        "{bad}"
    );
    let accepted = &class(&made, "unknown-accepted")["sample"][0];
    assert_eq!(
        (&accepted["key"], &accepted["line"]),
        (&json!("refund:7"), &json!(2))
    );
}

async fn a_viewer_s_token_and_a_bad_export_keep_nothing(db: idem_store::testing::TestDatabase) {
    let (app, _, secret) = app_with_token(db).await;
    unknown_half_an_hour_ago(&app, "night:1 🌙").await;
    let viewer = token_of(&app.store, "reader", "vic", "viewer", "viewer").await;
    // The fixture's own reconciliation is the only one, before and after.
    let kept = || async {
        app.store
            .reconcile()
            .reconciliations(&idem_domain::Within::Every, 10)
            .await
            .unwrap()
            .len()
    };
    assert_eq!(kept().await, 1);
    let query = "consumer=orders";
    let (status, kind, refused) = upload(&app, &viewer, query, Some("k-1"), &export()).await;
    assert_eq!(status, 403, "{refused}");
    problem(&kind, &refused);
    // An operator of another team: refused by the reconciliation itself.
    let payments = token_of(
        &app.store,
        "payments-bot",
        "pam",
        "operator@payments",
        "operator@payments",
    )
    .await;
    let (status, _, refused) = upload(&app, &payments, query, Some("k-6"), &export()).await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("orders"),
        "names the consumer: {refused}"
    );
    for (query, key, body, status, says) in [
        (query, None, export(), 400, "Idempotency-Key"),
        ("consumer=", Some("k-2"), export(), 400, "consumer"),
        (
            "consumer=orders&latency_seconds=-5",
            Some("k-3"),
            export(),
            400,
            "latency",
        ),
        (
            "consumer=orders",
            Some("k-4"),
            "reference,time\nre_1,1\n".to_owned(),
            400,
            "no status column",
        ),
        (
            "consumer=orders",
            Some("k-5"),
            "{\"id\":\"re_1\"}\n".to_owned(),
            400,
            "No record",
        ),
        (
            "consumer=orders&covers_until=2999-01-01T00:00:00Z",
            Some("k-7"),
            export(),
            400,
            "covers_until",
        ),
    ] {
        let (got, kind, answer) = upload(&app, &secret, query, key, &body).await;
        assert_eq!(got, status, "{says}: {answer}");
        problem(&kind, &answer);
        assert!(
            answer["detail"].as_str().unwrap_or_default().contains(says),
            "{says}: {answer}"
        );
    }
    assert_eq!(kept().await, 1);
}
