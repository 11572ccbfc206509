//! `/api/v1` over real HTTP on both backends, as a runbook calls it: a
//! token, never a cookie; a key with every character a URL trips on; every
//! write with an Idempotency-Key, sent twice, sent at once, sent with
//! another body; problems worded as the pages word them.

use idem_domain::Rights;
use idem_store::{Store, testing::TestDatabase};
use serde_json::Value;

use crate::common::{self, Fixture, TestApp, spawn_app};

mod bulk;
mod document;
mod exports;
mod idempotency;
mod page;
mod reads;
mod reconciliations;
mod redrives;
mod tokens;

/// Each listed `async fn name(db: TestDatabase)`, once on SQLite and once
/// on a fresh Postgres database.
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(idem_store::testing::TestDatabase::sqlite().await).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(idem_store::testing::TestDatabase::postgres().await).await;
                }
            )+
        }
    };
}
pub(crate) use on_both_backends;

/// A token `name` of `owner` (an account made here with `owner_rights`),
/// holding `rights`; its secret.
pub async fn token_of(
    store: &Store,
    name: &str,
    owner: &str,
    owner_rights: &str,
    rights: &str,
) -> String {
    if store
        .people()
        .user_by_name(&idem_store::testing::account(owner))
        .await
        .unwrap()
        .is_none()
    {
        let owner_rights: Rights = owner_rights.parse().unwrap();
        store
            .people()
            .create_account_with(
                &idem_store::testing::account(owner),
                &owner_rights,
                None,
                idem_domain::AccountOrigin::Password,
            )
            .await
            .unwrap();
    }
    let rights: Rights = rights.parse().unwrap();
    idem::tokens::create(
        store,
        &idem::tokens::Request {
            name,
            owner,
            rights: &rights,
            expires: None,
        },
    )
    .await
    .unwrap()
}

/// Idem with the fixture's rows (`key-1` unknown, its dead letter, a
/// discardable one) and `deploy-bot`, an operator token of `olga`.
pub async fn app_with_token(db: TestDatabase) -> (TestApp, Fixture, String) {
    let app = spawn_app(db).await;
    let fixture = Fixture::write(&app.store).await;
    let secret = token_of(&app.store, "deploy-bot", "olga", "operator", "operator").await;
    (app, fixture, secret)
}

/// A client with no cookies.
pub fn bare() -> reqwest::Client {
    common::new_client()
}

/// A GET with `token`: the status, the content type and the JSON.
pub async fn get(app: &TestApp, token: &str, path: &str) -> (u16, String, Value) {
    let response = bare()
        .get(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .expect("the server answers");
    answer(response).await
}

/// A POST of `body` with `token` and `key` as its Idempotency-Key.
pub async fn post(
    app: &TestApp,
    token: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> (u16, String, Value) {
    let response = post_raw(app, token, path, key, body).await;
    answer(response).await
}

pub async fn post_raw(
    app: &TestApp,
    token: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> reqwest::Response {
    bare()
        .post(app.url(path))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .expect("the server answers")
}

pub async fn answer(response: reqwest::Response) -> (u16, String, Value) {
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("a JSON answer ({status}, {kind}): {text}"));
    (status, kind, json)
}

/// The problem's `type`, checked to be a problem answer.
pub fn problem(kind: &str, json: &Value) -> String {
    assert_eq!(kind, "application/problem+json", "{json}");
    json["type"].as_str().unwrap().to_owned()
}
