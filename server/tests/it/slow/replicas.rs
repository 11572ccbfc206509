//! The background work runs on one replica: handed over when it is killed,
//! stopped when it cannot renew its lease.

use std::time::{Duration, Instant};

use idem_store::testing::TestDatabase;

use super::{
    common::{self, Process, TestApp, new_client, spawn_with},
    lock_table, wait_until,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_with_sigkill_loses_the_background_work_to_the_other_after_the_lease() {
    let db = TestDatabase::postgres().await;
    let lease = [("IDEM_BACKGROUND_LEASE_SECONDS", "2")];
    let a = Process::start(&db.url, &lease);
    let b = Process::start(&db.url, &lease);
    let runs = |holder: &str, p: &Process| holder.contains(&format!("-{}-", p.child.id()));
    let first = common::lease_holder(&db.store).await;
    let (mut killed, other) = if runs(&first, &a) { (a, b) } else { (b, a) };
    // No chance to release the lease: it must expire.
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let started = Instant::now();
    loop {
        if runs(&common::lease_holder(&db.store).await, &other) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "the other replica did not take over within the lease and a renewal"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "taken over at once: the killed replica cannot have released it"
    );
}

/// This replica's `idem_background_work_running`, from its `/metrics`.
async fn runs_background_work(app: &TestApp) -> bool {
    let text = new_client()
        .get(app.url("/metrics"))
        .bearer_auth("scrape")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("idem_background_work_running "))
        .unwrap_or_else(|| panic!("no background gauge in {text:.300}"))
        .trim()
        == "1"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_that_cannot_renew_its_lease_stops_its_background_work() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| {
            c.metrics_token = Some(idem::metrics::MetricsToken::new("scrape".into()));
            c.background_lease = Duration::from_secs(2);
        },
        db,
    )
    .await;
    wait_until(Duration::from_secs(5), || runs_background_work(&app)).await;
    // Renewals now hang (the lease table is locked) while the database
    // answers everything else.
    let lock = lock_table(&url, "idem_leases", Duration::from_secs(4)).await;
    let started = Instant::now();
    wait_until(Duration::from_secs(3), || async {
        !runs_background_work(&app).await
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "stopped within the lease's life, before anyone else could take it ({:?})",
        started.elapsed()
    );
    lock.await.unwrap();
    wait_until(Duration::from_secs(5), || runs_background_work(&app)).await;
}
