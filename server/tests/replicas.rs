//! Two Idem servers on one Postgres, as two replicas behind a load
//! balancer: either serves any request, and the background work (rollups,
//! the demo, the session sweeper) runs on exactly one of them at a time.

mod common;

use std::time::{Duration, Instant};

use common::{dead_letter, new_client, visible};
use idem::{Application, Config};
use idem_domain::Role;
use idem_store::{BACKGROUND_LEASE, Store, testing::TestDatabase};
use tokio::sync::oneshot;

struct Replica {
    base: String,
    name: String,
    stop: Option<oneshot::Sender<()>>,
    stopped: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn replica(url: &str) -> Replica {
    let app = Application::build(Config::for_tests(url))
        .await
        .expect("a replica starts");
    let base = format!("http://{}", app.local_addr());
    let name = app.replica().to_owned();
    let (stop, stopped) = oneshot::channel::<()>();
    let stopped = tokio::spawn(app.run_until_stopped(async {
        let _ = stopped.await;
    }));
    Replica {
        base,
        name,
        stop: Some(stop),
        stopped,
    }
}

/// The background lease's holder, once someone holds it.
async fn holder(store: &Store) -> String {
    let started = Instant::now();
    loop {
        if let Some((holder, _)) = store.lease_holder(BACKGROUND_LEASE).await.unwrap() {
            return holder;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nobody took the lease"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_share_sessions_and_actions_and_run_background_work_once() {
    let db = TestDatabase::postgres().await;
    let hash = idem::auth::Passwords::new(1)
        .hash("operator-password".into())
        .await
        .unwrap();
    db.store
        .create_user("operator", Role::Operator, Some(&hash))
        .await
        .unwrap();
    let letter = dead_letter(&db.store, "refund:EU/2026/Ø-1842").await;
    let mut a = replica(&db.url).await;
    let mut b = replica(&db.url).await;
    assert_ne!(a.name, b.name);

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
    let replayed = client
        .post(format!(
            "{}{}",
            b.base,
            common::server_fn("replay_dead_letter")
        ))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[
            ("id", letter.to_string()),
            ("action_id", "replica-b-replay".into()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status().as_u16(), 200);
    let (status, html) = common::get(&client, &format!("{}/dead-letters/{letter}", a.base)).await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("replayed"), "A shows B's replay");

    // Exactly one runs the background work, and keeps it.
    let first = holder(&db.store).await;
    assert!(first == a.name || first == b.name, "{first}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        holder(&db.store).await,
        first,
        "the lease stays with its holder"
    );

    // When it stops, the other takes over.
    let (running, other) = if first == a.name {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    running.stop.take().unwrap().send(()).unwrap();
    (&mut running.stopped).await.unwrap().unwrap();
    let started = Instant::now();
    loop {
        let now = holder(&db.store).await;
        if now == other.name {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} never took over from {now}",
            other.name
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
    let replayed = operator
        .post(app.url(common::server_fn("replay_dead_letter")))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[
            ("id", letter.to_string()),
            ("action_id", "replica-test-replay".into()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status().as_u16(), 200);
    let state = |store: &Store| {
        let store = store.clone();
        async move { store.dead_letter(letter).await.unwrap().unwrap().state }
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
