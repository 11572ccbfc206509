//! How long a session lasts, what ends it, and where it is stored.

use std::time::Duration;

use idem_domain::Role;
use idem_store::testing::TestDatabase;

use super::{
    app,
    common::{TestApp, get, new_client, server_fn, spawn_with},
    cookie_value, location, logs, session_cookie, sign_in_with,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_ends_but_reading_pages_keeps_it_alive() {
    let app = spawn_with(
        |c| c.auth.idle_timeout = Duration::from_secs(3),
        TestDatabase::sqlite().await,
    )
    .await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(app.get("/unknown").await.0, 200, "reads count as activity");
    }
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let response = app.client.get(app.url("/unknown")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303, "idle past the timeout");
}

/// Every stored session expiry, as text (SQLite stores text, Postgres a timestamp).
async fn stored_expiries(app: &TestApp) -> Vec<String> {
    const SQL: &str = "SELECT CAST(expiry_date AS TEXT) FROM sessions ORDER BY 1";
    match (app.store.sqlite_pool(), app.store.postgres_pool()) {
        (Some(pool), _) => sqlx::query_scalar(SQL).fetch_all(pool).await,
        (_, Some(pool)) => sqlx::query_scalar(SQL).fetch_all(pool).await,
        (None, None) => unreachable!("a store has one pool or the other"),
    }
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_pages_does_not_rewrite_the_session_on_every_request() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let app = spawn_with(|_| {}, db).await;
        assert_eq!(app.get("/unknown").await.0, 200);
        let stored = stored_expiries(&app).await;
        assert_eq!(stored.len(), 1, "one signed-in session: {stored:?}");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        for _ in 0..3 {
            assert_eq!(app.get("/unknown").await.0, 200);
        }
        assert_eq!(
            stored_expiries(&app).await,
            stored,
            "with a 30-minute idle timeout, reads a second later leave the stored expiry alone"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_at_the_absolute_timeout_however_busy() {
    let app = spawn_with(
        |c| c.auth.absolute_timeout = Duration::from_secs(3),
        TestDatabase::sqlite().await,
    )
    .await;
    assert_eq!(app.get("/unknown").await.0, 200);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let _ = app.get("/unknown").await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response = app.client.get(app.url("/unknown")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_a_role_or_disabling_a_user_ends_their_sessions() {
    let app = app().await;
    assert_eq!(app.get("/").await.0, 200);
    app.store
        .people()
        .set_role(&idem_store::testing::account("viewer"), Role::Operator)
        .await
        .unwrap();
    // A change made outside this replica reaches pages within the reuse
    // bound (actions ask the database at once: see slow_database.rs).
    tokio::time::sleep(idem::auth::REUSE_FOR_READS).await;
    assert_eq!(
        app.client
            .get(app.url("/"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );

    let again = app.sign_in("viewer").await;
    assert_eq!(get(&again, &app.url("/")).await.0, 200);
    app.store
        .people()
        .set_disabled(&idem_store::testing::account("viewer"), true)
        .await
        .unwrap();
    tokio::time::sleep(idem::auth::REUSE_FOR_READS).await;
    assert_eq!(
        again
            .get(app.url("/"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    let refused = sign_in_with(&app, &new_client(), "viewer", "viewer-password", "/").await;
    assert!(
        location(&refused).starts_with("/login?failed=1"),
        "a disabled user cannot sign in"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_again_after_a_change_elsewhere_is_not_undone_by_this_replicas_older_copy() {
    let app = app().await;
    // This replica reads the account (and keeps it for a second).
    assert_eq!(app.get("/").await.0, 200);
    // Another replica, or `idem user role`, changes the role: the sessions
    // end, and the person signs in again at once.
    app.store
        .people()
        .set_role(&idem_store::testing::account("viewer"), Role::Operator)
        .await
        .unwrap();
    let again = app.sign_in("viewer").await;
    let (status, html) = get(&again, &app.url("/")).await;
    assert_eq!(status, 200, "the new session stands");
    assert!(
        super::common::visible(&html).contains("Signed in as viewer ( operator )"),
        "with the new role"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_live_in_postgres_too() {
    logs();
    let app = spawn_with(|_| {}, TestDatabase::postgres().await).await;
    assert_eq!(app.get("/unknown").await.0, 200);
    let client = new_client();
    let response = sign_in_with(&app, &client, "viewer", "viewer-password", "/").await;
    let cookie = cookie_value(&session_cookie(&response, "idem_session").unwrap());
    assert_eq!(get(&client, &app.url("/")).await.0, 200);
    app.post_form(&client, "/logout", &[]).await;
    let replay = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = replay
        .get(app.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
}

/// Signing out is final: a form post of the same session still in flight
/// when the person signs out (it waits on a row another transaction holds)
/// completes, and does not write the session back: the old cookie reads
/// nothing afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_when_the_person_signs_out_does_not_bring_the_session_back() {
    let app = spawn_with(|_| {}, TestDatabase::postgres().await).await;
    app.create_user("olga", Role::Operator).await;
    let (consumer, key) = ("reminders", "renewal:account-1842/😴");
    let mut tx = app.store.begin().await.unwrap();
    let at = idem_store::Ts::now();
    tx.claim(&idem_store::Delivery {
        consumer,
        key,
        payload_hash: None,
        at,
    })
    .await
    .unwrap();
    tx.lease(consumer, key, at, at).await.unwrap();
    let claim = tx
        .record(
            consumer,
            key,
            idem_store::Outcome::Unknown { error: "timeout" },
            at,
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let client = new_client();
    let response = sign_in_with(&app, &client, "olga", "olga-password", "/").await;
    let cookie = cookie_value(&session_cookie(&response, "idem_session").unwrap());
    let bare = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let as_olga = |request: reqwest::RequestBuilder| {
        request
            .header("cookie", &cookie)
            .header("sec-fetch-site", "same-origin")
    };

    // The claim is held: Olga's resolution waits inside its transaction.
    let pool = app.store.postgres_pool().unwrap().clone();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query(
        "SELECT version FROM claims WHERE consumer = $1 AND idempotency_key = $2 FOR UPDATE",
    )
    .bind(consumer)
    .bind(key)
    .execute(&mut *holder)
    .await
    .unwrap();
    let resolve = as_olga(bare.post(app.url(server_fn("resolve_unknown"))))
        .header("accept", "text/html")
        .header("referer", app.url("/unknown"))
        .form(&[
            ("consumer", consumer),
            ("key", key),
            ("version", &claim.version.to_string()),
            ("action_id", "inflight-0123456789"),
            ("outcome", "sent"),
            ("provider_ref", "msg_1842"),
            ("reason", "found in the provider's log"),
        ])
        .send();
    let in_flight = tokio::spawn(resolve);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !in_flight.is_finished(),
        "the resolution waits on the claim"
    );

    // Olga signs out meanwhile (another tab).
    let out = as_olga(bare.post(app.url("/logout"))).send().await.unwrap();
    assert_eq!(out.status().as_u16(), 303);
    holder.rollback().await.unwrap();
    let answered = in_flight.await.unwrap().unwrap();
    assert_eq!(answered.status().as_u16(), 303, "the action completed");
    assert_eq!(
        app.store
            .claims()
            .claim(
                &idem_store::testing::consumer(consumer),
                &idem_store::testing::key(key)
            )
            .await
            .unwrap()
            .unwrap()
            .status,
        idem_domain::ClaimStatus::Sent
    );

    let after = as_olga(bare.get(app.url("/unknown"))).send().await.unwrap();
    assert_eq!(after.status().as_u16(), 303, "the old cookie is refused");
    assert!(
        location(&after).starts_with("/login"),
        "{}",
        location(&after)
    );
}
