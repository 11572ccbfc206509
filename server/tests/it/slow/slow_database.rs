//! A slow or absent database: a busy pool is not an outage, stale permissions
//! never act, and a sign-out waits for the database to return.

use std::time::{Duration, Instant};

use idem_domain::{DeadLetterState, Role};
use idem_store::{
    StoreConfig,
    testing::{TestDatabase, count_rows, occupy_pool},
};

use super::{
    BANNER,
    common::{self, Gate, dead_letter, new_client, replay, spawn_with, visible},
    lock_table, wait_until,
};

async fn busy_pool_is_not_an_outage(db: TestDatabase) {
    let app = spawn_with(
        |c| {
            c.database.max_connections = 3;
            c.database.acquire_timeout = Duration::from_millis(1500);
        },
        db,
    )
    .await;
    let held = occupy_pool(&app.store, 3).await;
    // Longer than the background check needs to declare an outage (two
    // failed checks a second apart).
    let until = Instant::now() + Duration::from_secs(4);
    let mut busy = 0;
    while Instant::now() < until {
        let started = Instant::now();
        let (ready, _) = app.get("/readyz").await;
        assert_eq!(ready, 200, "a busy pool is not unreadiness");
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "readyz waited {:?} (for a pool connection?)",
            started.elapsed()
        );
        let (status, html) = app.get("/").await;
        let page = visible(&html);
        assert!(
            !page.contains(BANNER),
            "a busy pool is not an outage: {page:.300}"
        );
        match status {
            503 => {
                busy += 1;
                assert!(page.contains("Idem is busy"), "{page:.300}");
            }
            other => assert_eq!(other, 200, "{page:.300}"),
        }
    }
    assert!(busy > 0, "the pool was never busy: the test held nothing");
    drop(held);
    assert_eq!(app.get("/").await.0, 200, "free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saturated_pool_is_busy_not_down_on_sqlite() {
    busy_pool_is_not_an_outage(TestDatabase::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saturated_pool_is_busy_not_down_on_postgres() {
    busy_pool_is_not_an_outage(TestDatabase::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_demoted_operator_cannot_replay_while_the_database_is_slow() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| c.database.statement_timeout = Some(Duration::from_millis(700)),
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let letter = dead_letter(&app.store, "refund:42").await;
    // Idem has seen olga as an operator a moment ago.
    assert_eq!(common::get(&olga, &app.url("/dead-letters")).await.0, 200);

    assert!(
        app.store
            .people()
            .set_role(&idem_store::testing::account("olga"), Role::Viewer)
            .await
            .unwrap()
    );
    // The accounts table is slow to answer (not down: everything else is).
    let lock = lock_table(&url, "users", Duration::from_secs(2)).await;
    let answer = replay(&app, &olga, letter, "demoted-replay").await;
    let status = answer.status().as_u16();
    assert!(
        status == 503 || status == 403 || status == 401,
        "a demoted operator's replay answered {status}: {}",
        answer.text().await.unwrap_or_default()
    );
    lock.await.unwrap();
    assert_eq!(
        app.store.letter(letter).await.state,
        DeadLetterState::Open,
        "nothing was replayed"
    );
    // Once the database answers, the demotion holds.
    let answer = replay(&app, &olga, letter, "demoted-replay-2").await;
    assert_ne!(answer.status().as_u16(), 200);
    assert_eq!(app.store.letter(letter).await.state, DeadLetterState::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn signing_out_during_an_outage_ends_the_session_when_the_database_returns() {
    let db = TestDatabase::postgres().await;
    let direct = db.store.clone();
    let (gate, through_gate) = Gate::to_postgres(&db.url).await;
    let app = spawn_with(
        |c| {
            c.database = StoreConfig::new(&through_gate);
            c.database.acquire_timeout = Duration::from_secs(1);
        },
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let client = new_client();
    let signed_in = app
        .post_form(
            &client,
            "/login",
            &[("username", "olga"), ("password", "olga-password")],
        )
        .await;
    let cookie = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("idem_session="))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned();
    assert_eq!(common::get(&client, &app.url("/")).await.0, 200);
    // The viewer was seen too: during the outage their pages show the banner.
    assert_eq!(app.get("/").await.0, 200);
    let sessions_before = count_rows(&direct, "sessions").await;

    gate.close().await;
    wait_until(Duration::from_secs(5), || async {
        visible(&app.get("/").await.1).contains(BANNER)
    })
    .await;
    let out = app.post_form(&client, "/logout", &[]).await;
    assert_eq!(
        out.status().as_u16(),
        303,
        "sign-out answers during an outage"
    );
    assert_eq!(common::location(&out), "/login");
    let with_old_cookie = || async {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(app.url("/"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(
        with_old_cookie().await,
        303,
        "the session ended at once here: the old cookie leads to the sign-in page"
    );

    gate.open();
    wait_until(Duration::from_secs(10), || async {
        count_rows(&direct, "sessions").await == sessions_before - 1
    })
    .await;
    assert_eq!(
        with_old_cookie().await,
        303,
        "after the outage the old cookie leads to the sign-in page"
    );
}

/// A pool of three with the accounts table locked by someone else: the
/// sign-in page cannot read whether accounts exist in time, and says Idem
/// is busy (try again), not that the database is unavailable, while
/// readiness stays 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sign_in_page_says_busy_when_the_database_is_slow_not_unavailable() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| {
            c.database.max_connections = 3;
            c.database.statement_timeout = Some(Duration::from_millis(500));
        },
        db,
    )
    .await;
    let lock = lock_table(&url, "users", Duration::from_secs(3)).await;
    let anonymous = new_client();
    let (status, html) = common::get(&anonymous, &app.url("/login")).await;
    let page = visible(&html);
    assert_eq!(status, 503, "{page:.300}");
    assert!(page.contains("Idem is busy"), "{page:.300}");
    assert!(!page.contains("Database unavailable"), "{page:.300}");
    assert_eq!(app.get("/readyz").await.0, 200);
    lock.await.unwrap();
    let (status, _) = common::get(&anonymous, &app.url("/login")).await;
    assert_eq!(status, 200, "free again");
}
