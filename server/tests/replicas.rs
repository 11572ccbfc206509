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
