//! Redrives through the API: exactly what the list offered, read by number,
//! stopped by a Stop or by the token's revocation.

use serde_json::json;

use super::{app_with_token, get, on_both_backends, post, problem};
use crate::common::{TestApp, dead_letter_with};

on_both_backends!(
    a_token_redrives_what_the_list_offered_and_stops_when_the_token_is_revoked,
    a_redrive_of_a_list_that_changed_since_it_was_read_starts_nothing,
);

const ERROR: &str = "429 from the provider, api test";

async fn letters(app: &TestApp, from: usize, count: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for n in from..from + count {
        ids.push(dead_letter_with(&app.store, &format!("api-redrive-{n}"), ERROR).await);
    }
    ids
}

async fn offered(app: &TestApp, secret: &str) -> String {
    let path = format!(
        "/api/v1/dead-letters?error={}",
        ERROR.replace(' ', "%20").replace(',', "%2C")
    );
    let (status, _, list) = get(app, secret, &path).await;
    assert_eq!(status, 200, "{list}");
    list["redrive"]["offer"]
        .as_str()
        .expect("an operator is offered a redrive")
        .to_owned()
}

async fn a_token_redrives_what_the_list_offered_and_stops_when_the_token_is_revoked(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    letters(&app, 0, 40).await;
    let offer = offered(&app, &secret).await;
    let body = json!({"offer": offer, "error": ERROR});
    let (status, _, started) = post(&app, &secret, "/api/v1/redrives", "start-1", &body).await;
    assert_eq!(status, 201, "{started}");
    let id = started["redrive_id"].as_i64().unwrap();
    assert!(
        started["summary"]
            .as_str()
            .unwrap()
            .contains("40 dead letters"),
        "{started}"
    );

    idem::tokens::revoke(&app.store, "deploy-bot")
        .await
        .unwrap();
    let mut run = serde_json::Value::Null;
    for _ in 0..100 {
        run = serde_json::to_value(
            app.store
                .runs()
                .redrive(idem_domain::RunId::of_row(id), &idem_domain::Within::Every)
                .await
                .unwrap()
                .unwrap()
                .0,
        )
        .unwrap();
        if run["state"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(run["state"], "stopped", "{run}");
    assert!(
        run["end_reason"]
            .as_str()
            .unwrap()
            .contains("token deploy-bot was revoked"),
        "{run}"
    );
    assert_eq!(run["actor"], "olga (token deploy-bot)");

    // Another token of olga's reads the run: not every letter was taken.
    let reader = super::token_of(&app.store, "reader", "olga", "operator", "viewer").await;
    let (status, _, record) = get(&app, &reader, &format!("/api/v1/redrives/{id}")).await;
    assert_eq!(status, 200, "{record}");
    let items = record["items"].as_array().unwrap();
    assert_eq!(items.len(), 40);
    assert!(
        items.iter().any(|i| i["outcome"].is_null()),
        "stopped before the end"
    );
    let (status, _, _) = post(
        &app,
        &reader,
        &format!("/api/v1/redrives/{id}/stop"),
        "stop-1",
        &json!({}),
    )
    .await;
    assert_eq!(status, 403, "a viewer token stops nothing");
}

async fn a_redrive_of_a_list_that_changed_since_it_was_read_starts_nothing(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let ids = letters(&app, 0, 3).await;
    let offer = offered(&app, &secret).await;
    // A letter that arrives later is simply not taken; one of those offered
    // replayed meanwhile changes what the offer named.
    letters(&app, 3, 1).await;
    let replay = format!("/api/v1/dead-letters/{}/replay", ids[0]);
    let by_hand = json!({"reason": "by hand", "override_verdict": true});
    assert_eq!(
        post(&app, &secret, &replay, "by-hand", &by_hand).await.0,
        200
    );
    let body = json!({"offer": offer, "error": ERROR});
    let (status, kind, json) = post(&app, &secret, "/api/v1/redrives", "start-1", &body).await;
    assert_eq!(status, 409, "{json}");
    assert_eq!(problem(&kind, &json), "/api/v1/problems/changed");
    assert!(json["detail"].as_str().unwrap().contains("now 3"), "{json}");
    assert!(
        app.store.runs().running_redrives().await.unwrap().len() <= 1,
        "only the fixture's"
    );

    let fresh = offered(&app, &secret).await;
    let body = json!({"offer": fresh, "error": ERROR});
    let (status, _, started) = post(&app, &secret, "/api/v1/redrives", "start-2", &body).await;
    assert_eq!(status, 201, "{started}");
    let id = started["redrive_id"].as_i64().unwrap();
    let (status, _, stopped) = post(
        &app,
        &secret,
        &format!("/api/v1/redrives/{id}/stop"),
        "stop-1",
        &json!({}),
    )
    .await;
    assert!(
        status == 200 || status == 409,
        "stopped, or it had ended: {stopped}"
    );
}
