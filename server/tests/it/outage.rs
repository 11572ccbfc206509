//! Database outages while Idem runs, and Idem starting before its database
//! exists: pages keep rendering with the outage banner, server functions
//! and actions answer 503 with `Retry-After`, `/livez` stays 200 and
//! `/readyz` turns 503 at once; when the database returns, everything works
//! again without a restart.

use crate::common;
use std::time::{Duration, Instant};

use crate::common::{Gate, TestApp, dead_letter, new_client, replay, spawn_with, visible};
use idem::{Application, Config};
use idem_domain::{DeadLetterState, Role};
use idem_store::{Store, StoreConfig, testing::TestDatabase};

const BANNER: &str = "Database unavailable since";

/// Polls `path` until it answers `status`, for at most `within`.
async fn wait_for(app: &TestApp, path: &str, status: u16, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let (got, _) = app.get(path).await;
        if got == status {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{path} still answers {got}, not {status}, after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_outage_shows_the_banner_refuses_actions_and_heals_without_a_restart() {
    let db = TestDatabase::postgres().await;
    let direct = db.store.clone();
    let (gate, through_gate) = Gate::to_postgres(&db.url).await;
    let app = spawn_with(
        |config| {
            config.database = StoreConfig::new(&through_gate);
            config.database.acquire_timeout = Duration::from_secs(1);
        },
        db,
    )
    .await;
    app.create_user("operator", Role::Operator).await;
    let operator = app.sign_in("operator").await;
    let letter = dead_letter(&direct, "refund:EU/2026/Ø-1842").await;

    let (status, html) = app.get("/").await;
    assert_eq!(status, 200);
    assert!(!visible(&html).contains(BANNER));

    gate.close().await;

    // Readiness follows the background check (two failed checks a second
    // apart), answering at once from its state; liveness never changes.
    let noticed = wait_for(&app, "/readyz", 503, Duration::from_secs(5)).await;
    assert!(
        noticed < Duration::from_secs(4),
        "readyz noticed after {noticed:?}"
    );
    let started = Instant::now();
    assert_eq!(app.get("/readyz").await.0, 503);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "readyz answers from the check's state, at once ({:?})",
        started.elapsed()
    );
    assert_eq!(app.get("/livez").await, (200, "ok\n".into()));

    // The background check calls it an outage after two failed checks.
    let noticed = Instant::now();
    while !visible(&app.get("/").await.1).contains(BANNER) {
        assert!(noticed.elapsed() < Duration::from_secs(5), "no banner yet");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A signed-in viewer still gets pages: the shell with the banner, and
    // the data that could not be read marked as such.
    for page in ["/", "/unknown", "/dead-letters", "/keys?q=refund"] {
        let response = app.client.get(app.url(page)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 503, "{page} during the outage");
        assert!(response.headers().contains_key("retry-after"), "{page}");
        let text = visible(&response.text().await.unwrap());
        assert!(text.contains(BANNER), "{page} shows the banner: {text}");
        assert!(
            text.contains("The database is unavailable right now"),
            "{page} says what failed: {text}"
        );
        assert!(!text.contains("Something went wrong"), "{page}: {text}");
    }

    // A server function answers 503 with Retry-After, and names the cause.
    let response = app
        .client
        .get(app.url(common::server_fn("get_overview")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(response.text().await.unwrap().contains("Unavailable"));

    // An action is refused and changes nothing.
    let refused = replay(&app, &operator, letter, "outage-attempt").await;
    assert_eq!(refused.status().as_u16(), 503);
    assert_eq!(direct.letter(letter).await.state, DeadLetterState::Open);

    // Nobody can sign in, and the answer is a page that says so.
    let stranger = new_client();
    let response = app
        .post_form(
            &stranger,
            "/login",
            &[("username", "operator"), ("password", "operator-password")],
        )
        .await;
    assert_eq!(response.status().as_u16(), 503);
    assert!(
        visible(&response.text().await.unwrap()).contains("Sign-in is temporarily unavailable")
    );

    gate.open();

    wait_for(&app, "/readyz", 200, Duration::from_secs(10)).await;
    let healed = Instant::now();
    loop {
        let (status, html) = app.get("/").await;
        if status == 200 && !visible(&html).contains(BANNER) {
            break;
        }
        assert!(
            healed.elapsed() < Duration::from_secs(5),
            "the overview still shows the outage ({status})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let replayed = replay(&app, &operator, letter, "after-the-outage").await;
    let status = replayed.status().as_u16();
    assert_eq!(status, 200, "{}", replayed.text().await.unwrap());
    assert_eq!(direct.letter(letter).await.state, DeadLetterState::Replayed);
    let audit = direct.latest_audit(5).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action_id.as_deref() == Some("after-the-outage")),
        "the replay is audited: {audit:?}"
    );
    assert!(
        !audit
            .iter()
            .any(|e| e.action_id.as_deref() == Some("outage-attempt")),
        "the refused attempt left nothing: {audit:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idem_starts_before_its_sqlite_folder_exists_and_migrates_when_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("not-mounted-yet");
    let url = format!("sqlite://{}", folder.join("idem.db").display());
    let app = Application::build(Config::for_tests(&url))
        .await
        .expect("Idem starts without its database");
    let base = format!("http://{}", app.local_addr());
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    let client = new_client();
    let get = |path: &'static str| {
        let (client, base) = (client.clone(), base.clone());
        async move { common::get(&client, &format!("{base}{path}")).await }
    };

    assert_eq!(get("/livez").await.0, 200);
    assert_eq!(get("/readyz").await.0, 503);
    let (status, html) = get("/login").await;
    assert_eq!(status, 503, "the sign-in page during the outage");
    assert!(visible(&html).contains(BANNER), "{}", visible(&html));

    std::fs::create_dir(&folder).unwrap();

    let started = Instant::now();
    while get("/readyz").await.0 != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still not ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Migrated by the running process: accounts can be created and used.
    let store = Store::connect(&StoreConfig::new(&url)).unwrap();
    let started = Instant::now();
    while store.people().users().await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never migrated"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Up once migrated and checked: the sign-in page loses its banner.
    let started = Instant::now();
    while get("/login").await.0 != 200 {
        assert!(started.elapsed() < Duration::from_secs(5), "still down");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    common::create_user(&store, "viewer", Role::Viewer).await;
    let response = client
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("username", "viewer"), ("password", "viewer-password")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    let (status, html) = get("/").await;
    assert_eq!(status, 200);
    assert!(!visible(&html).contains(BANNER));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_that_fails_against_a_reachable_database_stops_start_up() {
    let db = TestDatabase::sqlite().await;
    // A table in the way of the first migration's.
    idem_store::testing::execute_raw(
        &db.store,
        "DELETE FROM _sqlx_migrations",
        "DELETE FROM _sqlx_migrations",
    )
    .await
    .unwrap();
    let started = Application::build(Config::for_tests(&db.url)).await;
    assert!(
        matches!(started, Err(idem::StartError::Store(ref err)) if !err.is_unavailable()),
        "start-up must stop on a failed migration"
    );
}
