//! Tables of processed jobs and events, shown in Idem through their adapters.

use idem_app::links::key_href;
use idem_domain::{ClaimStatus, Metric};
use idem_store::{
    Ts,
    testing::{self, TestDatabase},
};

use super::{
    app_url, common::visible, counted, drop_team_role, install, process_job, spawn_read_only,
    team_pool, team_role_pool,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_processed_jobs_table_shows_in_idem_through_its_adapter() {
    let db = TestDatabase::postgres().await;
    let pool = team_pool(&db.url).await;
    sqlx::raw_sql(
        "CREATE TABLE processed_jobs (idempotency_key text PRIMARY KEY, message_id text, processed_at timestamptz);
         CREATE TABLE charges (job_key text PRIMARY KEY, amount_cents bigint NOT NULL);
         INSERT INTO processed_jobs VALUES ('charge:INV-0001', 'm-0', now() - interval '3 days');",
    )
    .execute(&pool)
    .await
    .unwrap();
    install(&db.url, "processed_jobs.sql").await;
    // The team's workers connect as their own role, with rights on their
    // own tables only: the mirror runs with its owner's rights.
    let pool = team_role_pool(&db.url, &pool, &["processed_jobs", "charges"]).await;

    let key = "charge:EU/2026/Ø-1842 #7 🧾";
    let failing = "charge:INV-1843";
    let mut handled = vec![process_job(&pool, key, "m-1", Some(4200)).await];
    // The queue redelivers after a lease expiry: a new message, the same key.
    handled.push(process_job(&pool, key, "m-2", Some(4200)).await);
    for delivery in 1..=3 {
        handled.push(process_job(&pool, failing, &format!("m-3.{delivery}"), None).await);
    }
    assert_eq!(handled, ["done", "duplicate", "failed", "failed", "failed"]);

    let app = spawn_read_only(db, "billing-jobs").await;
    let (status, html) = app.get(&key_href("billing-jobs", key)).await;
    assert_eq!(status, 200, "{html}");
    let page = visible(&html);
    assert!(page.contains(key), "{page}");
    assert!(
        page.contains("Deliveries 2 (1 duplicate that committed; this key's other duplicates are not known here"),
        "{page}"
    );
    // Read-only, and why.
    assert!(
        page.contains("“billing-jobs” is read through an adapter"),
        "{page}"
    );
    assert_eq!(
        app.store
            .claims()
            .claim(&testing::consumer("billing-jobs"), &testing::key(key))
            .await
            .unwrap()
            .unwrap()
            .status,
        ClaimStatus::Sent
    );
    // processed_jobs records only success: the failing job left nothing, so
    // Idem says the key is not claimed (the queue will deliver it again).
    let (status, html) = app.get(&key_href("billing-jobs", failing)).await;
    assert_eq!(status, 404);
    assert!(visible(&html).contains("has a claim"), "{}", visible(&html));
    // Jobs processed before the adapter was installed are there too.
    let (status, _) = app.get(&key_href("billing-jobs", "charge:INV-0001")).await;
    assert_eq!(status, 200);
    // The key list shows both, filtered to the consumer.
    let (status, html) = app.get("/keys?q=charge%3A&consumer=billing-jobs").await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains(key) && page.contains("charge:INV-0001"),
        "{page}"
    );
    assert!(!page.contains(failing), "{page}");
    // The view presents the same rows the mirror holds.
    let admin = team_pool(&app_url(&app)).await;
    let in_view: i64 = sqlx::query_scalar("SELECT count(*) FROM idem_processed_jobs_claims")
        .fetch_one(&admin)
        .await
        .unwrap();
    let mirrored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM claims WHERE consumer = 'billing-jobs'")
            .fetch_one(&admin)
            .await
            .unwrap();
    assert_eq!((in_view, mirrored), (2, 2));

    // Keys the contract cannot hold are not mirrored, and the job still commits.
    let long = format!("charge:{}", "x".repeat(600));
    assert_eq!(process_job(&pool, &long, "m-4", Some(1)).await, "done");
    assert_eq!(
        process_job(&pool, "charge:\u{1}bell", "m-5", Some(1)).await,
        "done"
    );
    let mirrored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM claims WHERE consumer = 'billing-jobs'")
            .fetch_one(&admin)
            .await
            .unwrap();
    assert_eq!(mirrored, 2);

    // Retention: a deleted job takes its claim along; so does a truncate.
    sqlx::query("DELETE FROM processed_jobs WHERE idempotency_key = 'charge:INV-0001'")
        .execute(&pool)
        .await
        .unwrap();
    let (status, _) = app.get(&key_href("billing-jobs", "charge:INV-0001")).await;
    assert_eq!(status, 404, "the deleted job's claim is gone");
    sqlx::query("TRUNCATE processed_jobs")
        .execute(&admin)
        .await
        .unwrap();
    let (status, _) = app.get(&key_href("billing-jobs", key)).await;
    assert_eq!(status, 404, "a truncate empties the mirror");
    assert!(
        sqlx::query("SELECT 1 FROM claims")
            .fetch_all(&pool)
            .await
            .is_err(),
        "the team's role has no rights on Idem's tables, yet its writes were mirrored"
    );
    drop_team_role(&admin, pool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_processed_events_table_shows_in_idem_through_its_adapter() {
    let db = TestDatabase::postgres().await;
    let pool = team_pool(&db.url).await;
    sqlx::raw_sql(
        "CREATE TABLE processed_events (event_id text UNIQUE);
         CREATE TABLE payments (event_id text PRIMARY KEY, amount_cents bigint NOT NULL CHECK (amount_cents > 0));
         INSERT INTO processed_events VALUES ('evt_0001');",
    )
    .execute(&pool)
    .await
    .unwrap();
    install(&db.url, "processed_events.sql").await;

    // A webhook handler: the event row and the business row in one transaction.
    let handle = |event: &'static str, amount: i64| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            let new = sqlx::query(
                "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING",
            )
            .bind(event)
            .execute(&mut *tx)
            .await
            .unwrap()
            .rows_affected()
                == 1;
            if !new {
                tx.commit().await.unwrap();
                return "duplicate";
            }
            let paid = sqlx::query("INSERT INTO payments (event_id, amount_cents) VALUES ($1, $2)")
                .bind(event)
                .bind(amount)
                .execute(&mut *tx)
                .await;
            match paid {
                Ok(_) => {
                    tx.commit().await.unwrap();
                    "done"
                }
                // A refused payment rolls the event back with it.
                Err(_) => {
                    tx.rollback().await.unwrap();
                    "failed"
                }
            }
        }
    };
    let handled = [
        handle("evt_7f3 شراء", 1999).await,
        handle("evt_7f3 شراء", 1999).await,
        handle("evt_bad", -5).await,
    ];
    assert_eq!(handled, ["done", "duplicate", "failed"]);

    let app = spawn_read_only(db, "payment-events").await;
    let (status, html) = app.get(&key_href("payment-events", "evt_7f3 شراء")).await;
    assert_eq!(status, 200, "{html}");
    let page = visible(&html);
    assert!(
        page.contains("Deliveries 2 (1 duplicate that committed; this key's other duplicates are not known here"),
        "{page}"
    );
    assert!(page.contains("Sent"), "{page}");
    let (status, _) = app.get(&key_href("payment-events", "evt_bad")).await;
    assert_eq!(status, 404, "the refused payment left no event");
    // A link that carries only the key finds it too (alerts link this way).
    let (status, html) = app.get("/keys/evt_7f3%20%D8%B4%D8%B1%D8%A7%D8%A1").await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("payment-events"));
    // The consumer's list holds the new event and the one from before the
    // adapter (backfilled), not the refused one.
    let (status, html) = app.get("/keys?consumer=payment-events").await;
    assert_eq!(status, 200);
    let list = visible(&html);
    assert!(
        list.contains("evt_7f3 شراء") && list.contains("evt_0001"),
        "{list}"
    );
    assert!(!list.contains("evt_bad"), "{list}");
}

/// The worker of the standard-queue article: claim with `RETURNING 1` and
/// `ROLLBACK` when no row comes back — which takes the mirror's per-key
/// duplicate count back with it.
async fn claim_or_roll_back(pool: &sqlx::PgPool, key: &str) -> &'static str {
    let mut tx = pool.begin().await.unwrap();
    let claimed: Option<i32> = sqlx::query_scalar(
        "INSERT INTO processed_jobs (idempotency_key, message_id, processed_at) \
         VALUES ($1, 'm', now()) ON CONFLICT DO NOTHING RETURNING 1",
    )
    .bind(key)
    .fetch_optional(&mut *tx)
    .await
    .unwrap();
    if claimed.is_none() {
        tx.rollback().await.unwrap();
        return "duplicate";
    }
    tx.commit().await.unwrap();
    "done"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicates_a_worker_rolls_back_are_still_counted() {
    let db = TestDatabase::postgres().await;
    let admin = team_pool(&db.url).await;
    sqlx::raw_sql(
        "CREATE TABLE processed_jobs (idempotency_key text PRIMARY KEY, message_id text, processed_at timestamptz)",
    )
    .execute(&admin)
    .await
    .unwrap();
    install(&db.url, "processed_jobs.sql").await;
    let pool = team_role_pool(&db.url, &admin, &["processed_jobs"]).await;

    // Three keys delivered 4, 6 and 2 times, interleaved: 12 deliveries, 9 duplicates.
    let keys = [
        ("charge:A 🧾", 4),
        ("charge:EU/Ø-2 #x", 6),
        ("charge:3 שלום", 2),
    ];
    let mut handled = Vec::new();
    for round in 0..6 {
        for (key, times) in keys {
            if round < times {
                handled.push(claim_or_roll_back(&pool, key).await);
            }
        }
    }
    assert_eq!(handled.iter().filter(|h| **h == "duplicate").count(), 9);

    let app = spawn_read_only(db, "billing-jobs").await;
    // The background work samples every minute; sampling here as well (as a
    // second replica would) must not count anything twice.
    app.store
        .metrics()
        .sample_adapter_counters(Ts::now())
        .await
        .unwrap();
    app.store
        .metrics()
        .sample_adapter_counters(Ts::now())
        .await
        .unwrap();
    assert_eq!(
        counted(&app.store, "billing-jobs", Metric::DuplicateClaims).await,
        9.0
    );
    assert_eq!(
        counted(&app.store, "billing-jobs", Metric::Deliveries).await,
        12.0
    );
    // Per key, only what committed is known: the rolled-back duplicates left
    // nothing on the key's page, which says so rather than "0 duplicates".
    let (status, html) = app.get(&key_href("billing-jobs", "charge:EU/Ø-2 #x")).await;
    assert_eq!(status, 200);
    assert!(
        visible(&html).contains(
            "Deliveries 1 (0 duplicates that committed; this key's other duplicates are not known here"
        ),
        "{}",
        visible(&html)
    );

    // A team whose worker looks the key up first says so, as the adapter's
    // header shows; the rate then reads "not observable", never 100%.
    sqlx::query(
        "UPDATE adapter_counters SET sequence_name = NULL \
         WHERE consumer = 'billing-jobs' AND metric = 'duplicate_claims'",
    )
    .execute(&admin)
    .await
    .unwrap();
    let (status, html) = app.get("/?consumer=billing-jobs&range=6h").await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("Not observable: billing-jobs's duplicates never reach a table Idem reads"),
        "{page}"
    );
    let (_, html) = app.get("/?range=7d").await;
    assert!(visible(&html).contains("Not observable for billing-jobs"));
    let (_, html) = app.get("/slo").await;
    assert!(
        visible(&html).contains("Duplicates not observable for billing-jobs"),
        "{}",
        visible(&html)
    );
    drop_team_role(&admin, pool).await;
}
