//! Adapters for the consumers teams already run (`adapters/postgres/`):
//! each test creates the source table exactly as such a team has it,
//! installs the adapter's SQL file as the README says, runs a worker loop
//! that claims and processes jobs the way those consumers do — including a
//! duplicate delivery and a failure — and then reads Idem's pages over HTTP.

mod common;

use common::{TestApp, spawn_with, visible};
use idem_app::links::key_href;
use idem_domain::{ClaimStatus, ReadOnlyConsumers, Role};
use idem_store::testing::TestDatabase;
use sqlx::{Connection, PgConnection, PgPool};

/// The team's own pool (not Idem's): its workers connect as they always have.
async fn team_pool(url: &str) -> PgPool {
    PgPool::connect(url).await.expect("the team's database")
}

/// Runs an adapter file the way the README says (`psql -f`): one script.
async fn install(url: &str, file: &str) {
    let path = format!("{}/../adapters/postgres/{file}", env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(&path).expect("the adapter file");
    let mut conn = PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(&script)
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{file} installs: {e}"));
}

async fn spawn_read_only(db: TestDatabase, consumers: &str) -> TestApp {
    let read_only = ReadOnlyConsumers::parse(consumers).unwrap();
    spawn_with(move |config| config.read_only = read_only, db).await
}

/// How a `processed_jobs` worker handles one delivery: claim the key with
/// `ON CONFLICT DO NOTHING` in the work's transaction; a key already there
/// is a duplicate, acknowledged without doing the work again; a failing
/// job rolls the whole transaction back, claim included, to be retried.
async fn process_job(
    pool: &PgPool,
    key: &str,
    message_id: &str,
    amount: Option<i64>,
) -> &'static str {
    let mut tx = pool.begin().await.unwrap();
    let claimed = sqlx::query(
        "INSERT INTO processed_jobs (idempotency_key, message_id, processed_at) \
         VALUES ($1, $2, now()) ON CONFLICT DO NOTHING",
    )
    .bind(key)
    .bind(message_id)
    .execute(&mut *tx)
    .await
    .unwrap()
    .rows_affected()
        == 1;
    if !claimed {
        tx.commit().await.unwrap();
        return "duplicate";
    }
    let Some(amount) = amount else {
        // The charge failed: nothing of this delivery survives.
        tx.rollback().await.unwrap();
        return "failed";
    };
    sqlx::query("INSERT INTO charges (job_key, amount_cents) VALUES ($1, $2)")
        .bind(key)
        .bind(amount)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    "done"
}

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
    assert!(page.contains("Deliveries 2 ( 1 duplicate)"), "{page}");
    // Read-only, and why.
    assert!(
        page.contains("“billing-jobs” is read through an adapter"),
        "{page}"
    );
    assert_eq!(
        app.store
            .claim("billing-jobs", key)
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

/// Roles outlive databases: the team's role goes when its test ends.
async fn drop_team_role(admin: &PgPool, pool: PgPool) {
    pool.close().await;
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(admin)
        .await
        .unwrap();
    let role = format!("team_{database}");
    sqlx::raw_sql(&format!(r#"DROP OWNED BY "{role}"; DROP ROLE "{role}""#))
        .execute(admin)
        .await
        .unwrap();
}

/// The database URL the app under test uses.
fn app_url(app: &TestApp) -> String {
    app._db.url.clone()
}

/// A login role with rights on `tables` only (trust auth: no password), and
/// a pool connected as it.
async fn team_role_pool(url: &str, admin: &PgPool, tables: &[&str]) -> PgPool {
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(admin)
        .await
        .unwrap();
    let role = format!("team_{database}");
    sqlx::raw_sql(&format!(r#"CREATE ROLE "{role}" LOGIN"#))
        .execute(admin)
        .await
        .unwrap();
    for table in tables {
        sqlx::raw_sql(&format!(
            r#"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO "{role}""#
        ))
        .execute(admin)
        .await
        .unwrap();
    }
    let mut as_team = url::Url::parse(url).unwrap();
    as_team.set_username(&role).unwrap();
    as_team.set_password(None).unwrap();
    PgPool::connect(as_team.as_str()).await.unwrap()
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
    assert!(page.contains("Deliveries 2 ( 1 duplicate)"), "{page}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_only_reminder_store_shows_its_unknown_outcomes_but_refuses_to_resolve_them() {
    let db = TestDatabase::postgres().await;
    let pool = team_pool(&db.url).await;
    sqlx::raw_sql(
        "CREATE TABLE reminder_sends (reminder_id text PRIMARY KEY, status text NOT NULL,
             provider_message_id text, last_error text, attempts integer NOT NULL DEFAULT 0,
             created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());",
    )
    .execute(&pool)
    .await
    .unwrap();
    install(&db.url, "reminder_store.sql").await;

    // The store's worker: claim as pending, call the provider, record what it said.
    let send = |reminder: &'static str,
                answer: Result<&'static str, (&'static str, &'static str)>| {
        let pool = pool.clone();
        async move {
            let claimed = sqlx::query(
                "INSERT INTO reminder_sends (reminder_id, status) VALUES ($1, 'pending') ON CONFLICT DO NOTHING",
            )
            .bind(reminder)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected()
                == 1;
            if !claimed {
                return;
            }
            let (status, reference, error) = match answer {
                Ok(reference) => ("sent", Some(reference), None),
                Err((status, error)) => (status, None, Some(error)),
            };
            sqlx::query(
                "UPDATE reminder_sends SET status = $2, provider_message_id = $3, last_error = $4, \
                 attempts = attempts + 1, updated_at = now() WHERE reminder_id = $1",
            )
            .bind(reminder)
            .bind(status)
            .bind(reference)
            .bind(error)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    send("renewal:account-1842:2026-09-30", Ok("sms_0001")).await;
    send("renewal:account-1842:2026-09-30", Ok("sms_0002")).await;
    send(
        "renewal:account-2210:2026-09-30",
        Err(("unknown", "no response within 30 s")),
    )
    .await;
    send(
        "renewal:account-3001:2026-09-30",
        Err(("failed", "400 Bad Request: invalid number")),
    )
    .await;

    let app = spawn_read_only(db, "reminders-legacy").await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;

    let (status, html) = common::get(&olga, &app.url("/unknown")).await;
    assert_eq!(status, 200);
    let list = visible(&html);
    assert!(list.contains("renewal:account-2210:2026-09-30"), "{list}");
    assert!(list.contains("no response within 30 s"), "{list}");

    let sent = app
        .store
        .claim("reminders-legacy", "renewal:account-1842:2026-09-30")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sent.status, ClaimStatus::Sent);
    assert_eq!(
        sent.provider_ref.as_deref(),
        Some("sms_0001"),
        "the duplicate did not send again"
    );
    assert_eq!(sent.duplicate_count, 1);
    let failed = app
        .store
        .claim("reminders-legacy", "renewal:account-3001:2026-09-30")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.status, ClaimStatus::Failed);

    // The operator sees why there is no resolve form...
    let unknown_key = "renewal:account-2210:2026-09-30";
    let (status, html) =
        common::get(&olga, &app.url(&key_href("reminders-legacy", unknown_key))).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("is read through an adapter over its own tables"),
        "{page}"
    );
    assert!(
        !html.contains("name=\"outcome\""),
        "no resolve form is offered"
    );
    // ...and the server refuses the action anyway, changing nothing.
    let unknown = app
        .store
        .claim("reminders-legacy", unknown_key)
        .await
        .unwrap()
        .unwrap();
    let refused = olga
        .post(app.url(common::server_fn("resolve_unknown")))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[
            ("consumer", "reminders-legacy"),
            ("key", unknown_key),
            ("version", &unknown.version.to_string()),
            ("action_id", "resolve-legacy-2210"),
            ("outcome", "sent"),
            ("provider_ref", "sms_0003"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 409);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("read through an adapter")
    );
    let after = app
        .store
        .claim("reminders-legacy", unknown_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, unknown, "the refused action changed nothing");
    assert!(
        app.store
            .audit_for_key("reminders-legacy", unknown_key)
            .await
            .unwrap()
            .is_empty(),
        "nothing was done, so nothing is audited"
    );

    // A dead letter of a read-only consumer (its team's relay never reads
    // Idem's outbox) cannot be replayed from Idem either.
    let now = idem_store::Ts::now();
    let mut tx = app.store.begin().await.unwrap();
    let letter = tx
        .dead_letter(&idem_store::NewDeadLetter {
            consumer: "reminders-legacy",
            queue: "reminders-dlq",
            key: unknown_key,
            message_id: "m-9",
            payload: "{}",
            delivery_count: 3,
            first_failure_at: now,
            last_error: Some("no response within 30 s"),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (status, html) = common::get(&olga, &app.url(&format!("/dead-letters/{letter}"))).await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("is read through an adapter"));
    let refused = common::replay(&app, &olga, letter, "replay-legacy-9").await;
    assert_eq!(refused.status().as_u16(), 409);
    let still = app.store.dead_letter(letter).await.unwrap().unwrap();
    assert_eq!(still.state, idem_domain::DeadLetterState::Open);

    // When the team resolves it in their own store, Idem follows.
    sqlx::query("UPDATE reminder_sends SET status = 'sent', provider_message_id = 'sms_0003' WHERE reminder_id = $1")
        .bind(unknown_key)
        .execute(&pool)
        .await
        .unwrap();
    let resolved = app
        .store
        .claim("reminders-legacy", unknown_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resolved.status, ClaimStatus::Sent);
    assert!(resolved.version > unknown.version);
    // The store did not move updated_at; the change is dated all the same.
    assert!(resolved.status_at > unknown.status_at);
    assert_eq!(resolved.provider_ref.as_deref(), Some("sms_0003"));
}
