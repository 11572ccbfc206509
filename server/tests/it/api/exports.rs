//! Exports: a list as CSV or JSON, streamed over its pages, with the list's
//! filters and rights, for a token or a signed-in person.

use idem_store::{Delivery, Outcome, Ts};

use super::{app_with_token, bare, on_both_backends, token_of};

on_both_backends!(
    a_list_exports_as_csv_and_json_every_page_and_every_character,
    an_export_keeps_to_the_lists_rights_and_filters,
    a_signed_in_person_exports_from_the_pages_and_nobody_else_does,
    a_compressed_export_arrives_whole,
);

/// Keys a spreadsheet or a CSV reader trips on.
const AWKWARD: [&str; 4] = [
    "a,b \"quoted\"",
    "=HYPERLINK(\"http://x\")",
    "two\nlines",
    "💶 עברית/1%",
];

async fn unknown_claims(store: &idem_store::Store, keys: impl IntoIterator<Item = String>) {
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    for key in keys {
        let delivery = Delivery {
            consumer: "orders",
            key: &key,
            payload_hash: None,
            at: now,
        };
        tx.claim(&delivery).await.unwrap();
        tx.lease("orders", &key, now, now).await.unwrap();
        tx.record(
            "orders",
            &key,
            Outcome::Unknown {
                error: "timeout, again",
            },
            now,
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

async fn fetch(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

async fn a_list_exports_as_csv_and_json_every_page_and_every_character(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let many = (0..130).map(|n| format!("bulk-{n:03}"));
    unknown_claims(&app.store, many.chain(AWKWARD.map(str::to_owned))).await;

    let url = app.url("/api/v1/exports/unknown.json?consumer=orders");
    let (status, kind, text) = fetch(&bare(), &url, Some(&secret)).await;
    assert_eq!((status, kind.as_str()), (200, "application/json"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys.len(),
        135,
        "every page: the fixture's key-1, 130 and the awkward four"
    );
    for key in AWKWARD {
        assert!(keys.contains(&key), "{key:?} exported as it is");
    }
    assert_eq!(
        json["next"],
        serde_json::Value::Null,
        "not cut at the bound"
    );

    let url = app.url("/api/v1/exports/unknown.csv?consumer=orders");
    let (status, kind, csv) = fetch(&bare(), &url, Some(&secret)).await;
    assert_eq!((status, kind.as_str()), (200, "text/csv; charset=utf-8"));
    assert!(csv.starts_with("consumer,key,status,status_at,"), "{csv}");
    assert!(
        csv.contains("orders,\"a,b \"\"quoted\"\"\",unknown,"),
        "quoted as CSV quotes"
    );
    assert!(
        csv.contains("orders,\"'=HYPERLINK(\"\"http://x\"\")\",unknown"),
        "never a formula"
    );
    assert!(csv.contains("orders,\"two\nlines\",unknown"));
    assert!(csv.contains("\"timeout, again\""));
    assert_eq!(csv.matches("\r\n").count(), 136, "a header and 135 rows");
}

async fn an_export_keeps_to_the_lists_rights_and_filters(db: idem_store::testing::TestDatabase) {
    let (app, _, _, _dir) = crate::team_rights::app_of_two_teams(db).await;
    let secret = token_of(
        &app.store,
        "payments-bot",
        "olga",
        "operator",
        "viewer@payments",
    )
    .await;
    let (status, _, text) = fetch(
        &bare(),
        &app.url("/api/v1/exports/unknown.json"),
        Some(&secret),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let items = json["items"].as_array().unwrap();
    assert!(!items.is_empty());
    assert!(
        items.iter().all(|c| c["consumer"] == "ledger"),
        "payments' only: {text}"
    );

    // Growth's consumer exports as a consumer nobody has: a header, no rows.
    let url = app.url("/api/v1/exports/dead-letters.csv?consumer=orders");
    let (status, kind, theirs) = fetch(&bare(), &url, Some(&secret)).await;
    assert_eq!((status, kind.as_str()), (200, "text/csv; charset=utf-8"));
    let url = app.url("/api/v1/exports/dead-letters.csv?consumer=nobody-has-it");
    let (_, _, nobody) = fetch(&bare(), &url, Some(&secret)).await;
    assert_eq!(theirs, nobody, "another team's consumer is a missing one");
    assert_eq!(theirs.matches("\r\n").count(), 1, "a header only: {theirs}");
    assert!(!theirs.contains("growth"));
    let (status, _, text) = fetch(
        &bare(),
        &app.url("/api/v1/exports/audit.csv"),
        Some(&secret),
    )
    .await;
    assert_eq!(status, 403, "the audit log is for operators: {text}");
    for bad in [
        "/api/v1/exports/claims.csv",
        "/api/v1/exports/unknown.xlsx",
        "/api/v1/exports/unknown",
    ] {
        let (status, _, text) = fetch(&bare(), &app.url(bad), Some(&secret)).await;
        assert_eq!(status, 404, "{bad}: {text}");
    }
    let (status, _, _) = fetch(
        &bare(),
        &app.url("/api/v1/exports/unknown.csv?cursor=junk"),
        Some(&secret),
    )
    .await;
    assert_eq!(status, 400);
}

async fn a_signed_in_person_exports_from_the_pages_and_nobody_else_does(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, secret) = app_with_token(db).await;
    // `app.client` is the viewer's session.
    let (status, _, csv) = fetch(
        &app.client,
        &app.url("/exports/dead-letters.csv?consumer=orders"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("{},orders,", fixture.dead_letter))),
        "{csv}"
    );
    let (status, _, _) = fetch(&app.client, &app.url("/exports/audit.csv"), None).await;
    assert_eq!(status, 403, "a viewer does not read the audit log");

    let anonymous = bare()
        .get(app.url("/exports/unknown.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 303, "to sign-in");
    let token_on_page = fetch(&bare(), &app.url("/exports/unknown.csv"), Some(&secret)).await;
    assert_eq!(
        token_on_page.0, 303,
        "a token opens no page, nor its export"
    );
}

async fn a_compressed_export_arrives_whole(db: idem_store::testing::TestDatabase) {
    use std::io::Read;
    let (app, _, secret) = app_with_token(db).await;
    // One page and then nothing: the compression layer asks the body once
    // more after its end (a panic there once cut every such answer).
    for path in [
        "/api/v1/exports/unknown.json?consumer=nobody",
        "/api/v1/exports/unknown.json",
    ] {
        let response = bare()
            .get(app.url(path))
            .bearer_auth(&secret)
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.headers()["content-encoding"], "gzip");
        let bytes = response.bytes().await.expect("the whole body arrives");
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(json["items"].is_array(), "{text}");
    }
}
