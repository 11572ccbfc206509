//! Idem under pressure: more requests than it can serve, many writers on
//! SQLite at once, and SIGTERM in the middle of a burst of actions.

use crate::common;
use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use crate::common::{Process, TestApp, dead_letter, replay, spawn_with};
use idem_domain::{ClaimStatus, DeadLetterState, Role};
use idem_store::{Delivery, Outcome, Store, StoreConfig, Ts, testing::TestDatabase};

/// The resident memory of this process, in KiB.
fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overload_is_refused_fast_and_memory_stays_bounded() {
    const IN_FLIGHT: usize = 8;
    const REQUESTS: usize = 400;
    let app = spawn_with(
        |config| {
            config.database.max_connections = 4;
            config.limits.max_in_flight = IN_FLIGHT;
            // Every request reads the database.
            config.read_cache_ttl = Duration::ZERO;
        },
        TestDatabase::postgres().await,
    )
    .await;
    for n in 0..50 {
        dead_letter(&app.store, &format!("order:{n}")).await;
    }
    let before = resident_kib();

    let start = Arc::new(tokio::sync::Barrier::new(REQUESTS));
    let requests: Vec<_> = (0..REQUESTS)
        .map(|n| {
            let (client, start) = (app.client.clone(), start.clone());
            let url = app.url(["/", "/dead-letters", "/unknown", "/keys?q=order"][n % 4]);
            tokio::spawn(async move {
                start.wait().await;
                let began = Instant::now();
                let response = client
                    .get(url)
                    .send()
                    .await
                    .expect("every request is answered");
                let status = response.status().as_u16();
                let retry_after = response.headers().contains_key("retry-after");
                let _ = response.bytes().await;
                (status, retry_after, began.elapsed())
            })
        })
        .collect();
    let mut refused = Vec::new();
    let mut served = 0;
    for request in requests {
        let (status, retry_after, took) = request.await.unwrap();
        match status {
            200 => served += 1,
            503 => {
                assert!(retry_after, "a refusal says when to retry");
                refused.push(took);
            }
            other => panic!("an overloaded Idem answered {other}"),
        }
    }
    let grown_mib = resident_kib().saturating_sub(before) / 1024;

    assert!(
        served >= IN_FLIGHT,
        "only {served} of {REQUESTS} were served"
    );
    assert!(
        !refused.is_empty(),
        "{REQUESTS} at once were all served: no overload happened"
    );
    refused.sort();
    let p99 = percentile(&refused, 0.99);
    println!(
        "{served} served, {} refused, refused p50 {:?} p99 {p99:?}, memory grew {grown_mib} MiB",
        refused.len(),
        percentile(&refused, 0.5)
    );
    assert!(p99 < Duration::from_secs(1), "refusals p99 {p99:?}");
    assert!(
        grown_mib < 200,
        "memory grew {grown_mib} MiB under overload"
    );
    // And the overload leaves nothing behind.
    assert_eq!(app.get("/").await.0, 200);
}

async fn claim_and_send(store: &Store, consumer: &str, key: &str) -> Result<(), String> {
    let now = Ts::now();
    let mut tx = store.begin().await.map_err(|e| e.to_string())?;
    tx.claim(&Delivery {
        consumer,
        key,
        payload_hash: None,
        at: now,
    })
    .await
    .map_err(|e| e.to_string())?;
    tx.lease(consumer, key, now, now)
        .await
        .map_err(|e| e.to_string())?;
    tx.record(consumer, key, Outcome::Sent { provider_ref: None }, now)
        .await
        .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_writers_on_sqlite_lose_nothing_and_never_see_busy() {
    const ACTIONS: usize = 10;
    const WRITERS: usize = 10;
    const EACH: usize = 20;
    let app = spawn_with(|_| {}, TestDatabase::sqlite().await).await;
    app.create_user("operator", Role::Operator).await;
    let operator = app.sign_in("operator").await;
    let mut letters = Vec::new();
    for n in 0..ACTIONS * EACH {
        letters.push(dead_letter(&app.store, &format!("refund:{n}")).await);
    }
    let app = Arc::new(app);

    let mut tasks = tokio::task::JoinSet::new();
    // Ten operators replaying dead letters over HTTP…
    for chunk in letters.chunks(EACH) {
        let (app, operator, chunk) = (app.clone(), operator.clone(), chunk.to_vec());
        tasks.spawn(async move {
            for id in chunk {
                let response = replay(&app, &operator, id, &format!("replay-{id}")).await;
                let status = response.status().as_u16();
                let body = response.text().await.unwrap();
                if status != 200 {
                    return Err(format!("replay of {id}: {status} {body}"));
                }
            }
            Ok(())
        });
    }
    // …and ten consumers claiming and recording, as the demo does, at once.
    for writer in 0..WRITERS {
        let store = app.store.clone();
        tasks.spawn(async move {
            for n in 0..EACH {
                claim_and_send(&store, "payments", &format!("pay:{writer}:{n}")).await?;
            }
            Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(failure) = done.unwrap() {
            panic!("a writer failed: {failure}");
        }
    }

    let sent = app
        .store
        .lists()
        .count_claims(ClaimStatus::Sent, 100_000)
        .await
        .unwrap();
    assert_eq!(
        sent.value,
        (WRITERS * EACH) as u64,
        "every claim was written"
    );
    for id in &letters {
        let letter = app.store.letter(*id).await;
        assert_eq!(letter.state, DeadLetterState::Replayed, "dead letter {id}");
    }
    let audit = app.store.latest_audit(1000).await.unwrap();
    let replays = audit
        .iter()
        .filter(|e| {
            e.action_id
                .as_deref()
                .is_some_and(|a| a.starts_with("replay-"))
        })
        .count();
    assert_eq!(replays, ACTIONS * EACH, "one audit row per replay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_during_a_burst_of_actions_leaves_each_action_whole_or_absent() {
    const GRACE_SECONDS: u64 = 5;
    const BURST: usize = 120;
    let db = TestDatabase::postgres().await;
    common::create_user(&db.store, "operator", Role::Operator).await;
    let mut letters = Vec::new();
    for n in 0..BURST {
        letters.push(dead_letter(&db.store, &format!("refund:{n}")).await);
    }
    let mut process = Process::start(
        &db.url,
        &[
            ("IDEM_SHUTDOWN_GRACE_SECONDS", &GRACE_SECONDS.to_string()),
            // The burst comes from one address (this test): let it all in.
            ("IDEM_MAX_IN_FLIGHT_PER_CLIENT", "1000"),
        ],
    );
    let app = TestApp {
        base: process.base.clone(),
        store: Store::connect(&StoreConfig::new(&db.url)).unwrap(),
        // The process's own is out of reach; nothing here counts checks.
        passwords: idem::auth::Passwords::new(1),
        client: common::new_client(),
        _db: db,
    };
    let operator = app.sign_in("operator").await;
    let app = Arc::new(app);

    let mut burst = tokio::task::JoinSet::new();
    for (n, id) in letters.iter().copied().enumerate() {
        let (app, operator) = (app.clone(), operator.clone());
        burst.spawn(async move {
            // Spread over about half a second, so SIGTERM lands in the middle.
            tokio::time::sleep(Duration::from_millis(4 * n as u64)).await;
            let response =
                common::replay_at(&operator, &app.base, id, &format!("burst-action-{id}")).await;
            match response {
                Ok(r) => Some((r.status().as_u16(), r.text().await.unwrap_or_default())),
                Err(_) => None,
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let terminated = Instant::now();
    process.terminate();
    let status = tokio::task::spawn_blocking(move || process.child.wait())
        .await
        .unwrap()
        .unwrap();
    let took = terminated.elapsed();
    assert!(status.success(), "Idem exits cleanly on SIGTERM: {status}");
    assert!(
        took < Duration::from_secs(GRACE_SECONDS + 1),
        "Idem took {took:?} to stop (grace {GRACE_SECONDS} s)"
    );

    let mut answered = 0;
    while let Some(result) = burst.join_next().await {
        if let Some((status, body)) = result.unwrap() {
            assert!(
                status == 200 || status == 503,
                "an action answered {status}: {body}"
            );
            answered += usize::from(status == 200);
        }
    }
    let audit = app.store.latest_audit(1000).await.unwrap();
    let mut committed = 0;
    for id in &letters {
        let replayed = app.store.letter(*id).await.state == DeadLetterState::Replayed;
        let audited = audit
            .iter()
            .any(|e| e.action_id.as_deref() == Some(format!("burst-action-{id}").as_str()));
        assert_eq!(
            replayed, audited,
            "dead letter {id}: replayed {replayed} but audited {audited}"
        );
        committed += usize::from(replayed);
    }
    println!("{committed} of {BURST} actions committed before the stop, {answered} answered 200");
    assert!(committed >= answered, "every 200 is a committed action");
    assert!(
        committed > 0 && committed < BURST,
        "SIGTERM landed mid-burst ({committed})"
    );
}
