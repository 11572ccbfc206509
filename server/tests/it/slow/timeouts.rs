//! Timeouts answer as promised: requests, statements and admission.

use std::time::{Duration, Instant};

use idem_domain::{DeadLetterState, Role};
use idem_store::testing::{self, TestDatabase, occupy_pool};

use super::{
    common::{self, dead_letter, replay, spawn_with, visible},
    lock_dead_letter,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_action_cut_off_by_the_request_timeout_is_rolled_back_and_says_it_may_have_happened() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(|c| c.limits.request_timeout = Duration::from_secs(1), db).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let letter = dead_letter(&app.store, "refund:7").await;
    // The dead letter's row is locked: the replay's transaction reads it,
    // then waits to change it.
    let lock = lock_dead_letter(&url, letter, Duration::from_secs(3)).await;
    let page = format!("/dead-letters/{letter}");
    let started = Instant::now();
    let response = common::post_as_browser(
        &app,
        &olga,
        &page,
        common::server_fn("replay_dead_letter"),
        &[
            ("id", &letter.to_string()),
            ("action_id", "0123456789-timeout"),
        ],
    )
    .await;
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let html = response.text().await.unwrap();
    let text = visible(&html);
    assert!(text.contains("may have happened"), "{text}");
    assert!(!text.contains("Nothing was changed"), "{text}");
    assert!(
        html.contains(&format!("href=\"{page}\"")),
        "links to the page it came from: {html}"
    );
    lock.await.unwrap();
    // It was rolled back: nothing changed, and the same form works now.
    assert_eq!(app.store.letter(letter).await.state, DeadLetterState::Open);
    assert!(
        app.store
            .claims()
            .audit_for_key(&testing::consumer("orders"), &testing::key("refund:7"))
            .await
            .unwrap()
            .is_empty()
    );
    let again = replay(&app, &olga, letter, "0123456789-timeout").await;
    assert_eq!(again.status().as_u16(), 200);
    assert_eq!(
        app.store.letter(letter).await.state,
        DeadLetterState::Replayed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_statement_over_the_postgres_statement_timeout_is_a_503_and_changes_nothing() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| c.database.statement_timeout = Some(Duration::from_millis(500)),
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let letter = dead_letter(&app.store, "refund:8").await;
    let lock = lock_dead_letter(&url, letter, Duration::from_secs(3)).await;
    let started = Instant::now();
    let response = replay(&app, &olga, letter, "0123456789-statement").await;
    let took = started.elapsed();
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    let body = response.text().await.unwrap();
    assert!(
        body.contains("Busy"),
        "a slow statement is busy, not an outage: {body}"
    );
    lock.await.unwrap();
    assert_eq!(app.store.letter(letter).await.state, DeadLetterState::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_probes_are_answered_while_admission_refuses_everything_else() {
    let app = std::sync::Arc::new(
        spawn_with(
            |c| {
                c.limits.max_in_flight = 2;
                c.database.max_connections = 1;
                c.database.acquire_timeout = Duration::from_secs(3);
                c.read_cache_ttl = Duration::ZERO;
            },
            TestDatabase::sqlite().await,
        )
        .await,
    );
    let held = occupy_pool(&app.store, 1).await;
    // Two requests wait for the pool: every admission permit is taken.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.get("/").await.0 })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.get("/dead-letters").await.0, 503, "admission is full");
    for probe in ["/livez", "/readyz"] {
        let started = Instant::now();
        assert_eq!(app.get(probe).await.0, 200, "{probe}");
        // Not the pool's three-second wait.
        assert!(started.elapsed() < Duration::from_millis(1000), "{probe}");
    }
    drop(held);
    for request in waiting {
        request.await.unwrap();
    }
}
