//! Two Idem processes on one Postgres, as two replicas behind a load
//! balancer: either serves any request, and the background work (rollups,
//! the demo, the session sweeper) runs on exactly one of them at a time.
//! And a read replica: pages read it, actions write the primary.

use crate::common;
use std::time::{Duration, Instant};

use crate::common::{Process, dead_letter, new_client, visible};
use idem_domain::Role;
use idem_store::{Store, testing::TestDatabase};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_share_sessions_and_actions_and_run_background_work_once() {
    let db = TestDatabase::postgres().await;
    common::create_user(&db.store, "operator", Role::Operator).await;
    let letter = dead_letter(&db.store, "refund:EU/2026/Ø-1842").await;
    let lease = [("IDEM_BACKGROUND_LEASE_SECONDS", "3")];
    let a = Process::start(&db.url, &lease);
    let b = Process::start(&db.url, &lease);
    // A replica's lease name carries its process id.
    let runs = |holder: &str, p: &Process| holder.contains(&format!("-{}-", p.child.id()));

    // Signed in through A; B accepts the session (cookies do not depend on
    // the port, as they would not on a load balancer's one address).
    let client = new_client();
    let signed_in = client
        .post(format!("{}/login", a.base))
        .header("sec-fetch-site", "same-origin")
        .form(&[("username", "operator"), ("password", "operator-password")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status().as_u16(), 303);
    let (status, html) = common::get(&client, &format!("{}/", b.base)).await;
    assert_eq!(status, 200, "B accepts A's session");
    assert!(visible(&html).contains("Signed in as operator"));

    // An action through B is what A shows.
    let replayed = common::replay_at(&client, &b.base, letter, "replica-b-replay")
        .await
        .unwrap();
    assert_eq!(replayed.status().as_u16(), 200);
    let (status, html) = common::get(&client, &format!("{}/dead-letters/{letter}", a.base)).await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("replayed"), "A shows B's replay");

    // Exactly one runs the background work, and keeps it.
    let first = common::lease_holder(&db.store).await;
    assert!(runs(&first, &a) != runs(&first, &b), "{first} is A or B");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        common::lease_holder(&db.store).await,
        first,
        "the lease stays with its holder"
    );

    // When it is stopped (SIGTERM), the other takes over.
    let (mut running, other) = if runs(&first, &a) { (a, b) } else { (b, a) };
    running.terminate();
    let exited = tokio::task::spawn_blocking(move || running.child.wait().map(|s| s.success()))
        .await
        .unwrap()
        .unwrap();
    assert!(exited, "the stopped replica exits cleanly");
    let started = Instant::now();
    loop {
        let now = common::lease_holder(&db.store).await;
        if runs(&now, &other) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the other replica never took over from {now}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = common::get(&client, &format!("{}/", other.base)).await;
    assert_eq!(status, 200, "the remaining replica serves on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_read_the_replica_actions_write_the_primary_and_their_author_reads_the_primary() {
    let primary = TestDatabase::postgres().await;
    // A copy that stopped following the primary: a replica lagging forever.
    let replica = TestDatabase::postgres().await;
    let letter = dead_letter(&primary.store, "refund:EU/1842").await;
    assert_eq!(dead_letter(&replica.store, "refund:EU/1842").await, letter);
    // A claim only the replica has: a page that shows it read the replica.
    let mut tx = replica.store.begin().await.unwrap();
    tx.claim(&idem_store::Delivery {
        consumer: "orders",
        key: "only-on-the-replica",
        payload_hash: None,
        at: idem_store::Ts::now(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let replica_url = replica.url.clone();
    let app = common::spawn_with(
        |config| config.read_database = Some(idem_store::StoreConfig::new(&replica_url)),
        primary,
    )
    .await;
    app.create_user("operator", Role::Operator).await;
    let operator = app.sign_in("operator").await;
    const NOTE: &str = "Read from a read replica";

    let (status, html) = app.get("/keys/orders/only-on-the-replica").await;
    assert_eq!(status, 200, "the key page reads the replica");
    assert!(visible(&html).contains(NOTE));
    let (status, html) = app.get(&format!("/dead-letters/{letter}")).await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("open") && visible(&html).contains(NOTE));

    // The action goes to the primary.
    let replayed = common::replay(&app, &operator, letter, "replica-test-replay").await;
    assert_eq!(replayed.status().as_u16(), 200);
    let state = |store: &Store| {
        let store = store.clone();
        async move { store.letter(letter).await.state }
    };
    assert_eq!(
        state(&app.store).await,
        idem_domain::DeadLetterState::Replayed
    );
    assert_eq!(
        state(&replica.store).await,
        idem_domain::DeadLetterState::Open,
        "nothing was written to the replica"
    );

    // Its author sees the primary's state at once…
    let (status, html) = common::get(&operator, &app.url(&format!("/dead-letters/{letter}"))).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(page.contains("replayed"), "{page:.300}");
    assert!(!page.contains(NOTE), "the author reads the primary");
    // …while others read the (lagging) replica and are told so.
    let (_, html) = app.get(&format!("/dead-letters/{letter}")).await;
    let page = visible(&html);
    assert!(
        page.contains(NOTE) && !page.contains("replayed"),
        "{page:.300}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_who_resolved_an_unknown_outcome_does_not_see_it_open_in_a_chart_a_viewer_loaded_from_the_replica()
 {
    let primary = TestDatabase::postgres().await;
    // A replica that stopped following the primary, holding the same
    // unknown outcome.
    let replica = TestDatabase::postgres().await;
    let fixture = common::Fixture::write(&primary.store).await;
    common::Fixture::write(&replica.store).await;
    let replica_url = replica.url.clone();
    let app = common::spawn_with(
        |config| {
            config.read_database = Some(idem_store::StoreConfig::new(&replica_url));
            // Long enough that a cached chart outlives the whole test.
            config.read_cache_ttl = Duration::from_secs(60);
        },
        primary,
    )
    .await;
    app.create_user("operator", Role::Operator).await;
    let operator = app.sign_in("operator").await;
    const OPEN: &str = "1 unknown outcomes are open";

    // A viewer loads the overview first: its chart reads the replica.
    let (status, html) = app.get("/?range=1h").await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains(OPEN), "the viewer sees it open");

    let resolved = common::call(
        &app,
        &operator,
        "resolve_unknown",
        &[
            ("consumer", "orders".to_owned()),
            ("key", fixture.key.clone()),
            ("version", fixture.unknown_version.to_string()),
            ("action_id", "replica-chart-resolve".to_owned()),
            ("outcome", "sent".to_owned()),
            ("provider_ref", "pi_checked".to_owned()),
        ],
    )
    .await;
    assert_eq!(resolved.status().as_u16(), 200);

    // Its author reads the primary, and no chart cached from the replica
    // answers for it.
    let (status, html) = common::get(&operator, &app.url("/?range=1h")).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("No unknown outcomes are open.") && !page.contains(OPEN),
        "{page:.600}"
    );
}
