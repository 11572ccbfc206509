//! The OpenAPI document: 3.1, generated from the code, every operation in
//! it; and every write it lists refused without a token.

use serde_json::Value;

use super::{bare, on_both_backends};
use crate::common::spawn_app;

on_both_backends!(every_write_the_document_lists_is_refused_without_a_token);

#[tokio::test]
async fn the_document_is_openapi_3_1_and_names_every_operation() {
    let document: Value = serde_json::from_str(idem::api::document()).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let paths = document["paths"].as_object().unwrap();
    for path in [
        "/api/v1/keys/{consumer}/{key}",
        "/api/v1/keys",
        "/api/v1/unknown",
        "/api/v1/dead-letters",
        "/api/v1/dead-letters/{id}",
        "/api/v1/outbox",
        "/api/v1/audit",
        "/api/v1/checks",
        "/api/v1/checks/{check}",
        "/api/v1/slo",
        "/api/v1/dead-letters/{id}/replay",
        "/api/v1/dead-letters/{id}/discard",
        "/api/v1/keys/{consumer}/{key}/resolve",
        "/api/v1/exports/{file}",
        "/api/v1/redrives",
        "/api/v1/redrives/{id}",
        "/api/v1/redrives/{id}/stop",
        "/api/v1/bulk/discard",
        "/api/v1/bulk/resolve",
        "/api/v1/reconciliations",
        "/api/v1/reconciliations/{id}",
        "/api/v1/reconciliations/{id}/apply",
    ] {
        assert!(paths.contains_key(path), "{path} is documented");
    }
    let replay = &paths["/api/v1/dead-letters/{id}/replay"]["post"];
    let headers: Vec<&str> = replay["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["in"] == "header")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(headers, ["Idempotency-Key"]);
    assert!(replay["responses"]["409"]["content"]["application/problem+json"].is_object());
    assert!(document["components"]["securitySchemes"]["token"].is_object());
    let resolve = &document["components"]["schemas"]["ResolveBody"]["properties"];
    assert_eq!(
        resolve["reason"]["maxLength"],
        idem_domain::action::MAX_REASON_CHARS,
        "the document bounds what the action bounds"
    );
    assert_eq!(
        resolve["provider_ref"]["maxLength"],
        idem_domain::action::MAX_PROVIDER_REF_BYTES
    );
}

async fn every_write_the_document_lists_is_refused_without_a_token(
    db: idem_store::testing::TestDatabase,
) {
    let app = spawn_app(db).await;
    let fixture = crate::common::Fixture::write(&app.store).await;
    let (status, served) = crate::common::get(&bare(), &app.url("/api/v1/openapi.json")).await;
    assert_eq!(status, 200, "the document needs no token");
    assert_eq!(served, idem::api::document());
    let document: Value = serde_json::from_str(&served).unwrap();
    let mut writes = 0;
    for (path, operations) in document["paths"].as_object().unwrap() {
        if operations.get("post").is_none() {
            continue;
        }
        writes += 1;
        let id = if path.starts_with("/api/v1/redrives") {
            fixture.redrive
        } else if path.starts_with("/api/v1/reconciliations") {
            fixture.reconciliation
        } else {
            fixture.dead_letter
        };
        let path = path
            .replace("{id}", &id.to_string())
            .replace("{consumer}", "orders")
            .replace("{key}", "key-1");
        for client in [bare(), app.client.clone()] {
            let response = client
                .post(app.url(&path))
                .header("idempotency-key", "k-anonymous")
                .header("sec-fetch-site", "same-origin")
                .json(&serde_json::json!({"version": 1, "outcome": "failed"}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 401, "{path}");
        }
    }
    assert_eq!(writes, 9);
    let letter = app.store.letter(fixture.dead_letter).await;
    assert_eq!(letter.state, idem_domain::DeadLetterState::Open);
}
