//! What an action's words may hold: a reason or a provider's reference
//! over its bound is a 400 that names the bound, and nothing is stored.

use crate::common::server_fn;
use idem_domain::ClaimStatus;
use idem_store::{
    Outcome,
    testing::{self, TestDatabase},
};

use crate::actions::{CONSUMER, Scene};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_reason_or_reference_is_a_400_that_names_the_bound_and_stores_nothing() {
    let Scene {
        app,
        olga,
        letters: ids,
    } = Scene::new(
        TestDatabase::sqlite().await,
        "pay_7f3",
        Outcome::Unknown { error: "timeout" },
        1,
    )
    .await;
    let (consumer, key) = (testing::consumer(CONSUMER), testing::key("pay_7f3"));
    let version = app
        .store
        .claims()
        .claim(&consumer, &key)
        .await
        .unwrap()
        .unwrap()
        .version
        .to_string();
    let call = |function: &'static str, fields: Vec<(&'static str, String)>| {
        olga.post(app.url(server_fn(function)))
            .header("sec-fetch-site", "same-origin")
            .header("accept", "application/json")
            .form(&fields)
            .send()
    };
    let long_reason = "é".repeat(2001);
    let cases = [
        (
            "replay_dead_letter",
            vec![
                ("id", ids[0].to_string()),
                ("action_id", "0123456789-a".to_owned()),
                ("reason", long_reason.clone()),
            ],
            "2000",
        ),
        (
            "discard_dead_letter",
            vec![
                ("id", ids[0].to_string()),
                ("action_id", "0123456789-b".to_owned()),
                ("reason", long_reason.clone()),
            ],
            "2000",
        ),
        (
            "resolve_unknown",
            vec![
                ("consumer", CONSUMER.to_owned()),
                ("key", "pay_7f3".to_owned()),
                ("version", version.clone()),
                ("action_id", "0123456789-c".to_owned()),
                ("outcome", "sent".to_owned()),
                ("provider_ref", "r".repeat(5000)),
            ],
            "256",
        ),
        (
            "resolve_unknown",
            vec![
                ("consumer", CONSUMER.to_owned()),
                ("key", "pay_7f3".to_owned()),
                ("version", version.clone()),
                ("action_id", "0123456789-d".to_owned()),
                ("outcome", "sent".to_owned()),
                ("provider_ref", "pi_1\nInjected: yes".to_owned()),
            ],
            "control character",
        ),
    ];
    for (function, fields, says) in cases {
        let response = call(function, fields).await.unwrap();
        assert_eq!(response.status().as_u16(), 400, "{function}");
        let body = response.text().await.unwrap();
        assert!(body.contains(says), "{function}: {body}");
    }
    let claim = app
        .store
        .claims()
        .claim(&consumer, &key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (claim.status, claim.provider_ref),
        (ClaimStatus::Unknown, None)
    );
    assert!(
        app.store
            .claims()
            .audit_for_key(&consumer, &key)
            .await
            .unwrap()
            .is_empty()
    );
}
