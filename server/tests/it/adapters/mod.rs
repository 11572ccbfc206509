//! Adapters for the consumers teams already run (`adapters/postgres/`):
//! each test creates the source table exactly as such a team has it,
//! installs the adapter's SQL file as the README says, runs a worker loop
//! that claims and processes jobs the way those consumers do — including a
//! duplicate delivery and a failure — and then reads Idem's pages over HTTP.
//!
//! The tests live in themed modules; the team's pools, roles and worker loop
//! are here.

// The harness every server test binary shares, one folder up.
use crate::common;

mod processed_tables;
mod races;
mod read_only;

use common::{TestApp, spawn_with};
use idem_domain::ReadOnlyConsumers;
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

/// What Idem counted of `metric` for `consumer` over the last hour (and the
/// minute being written).
async fn counted(store: &idem_store::Store, consumer: &str, metric: idem_domain::Metric) -> f64 {
    let now = idem_store::Ts::now();
    let rows = store
        .metric_rows(
            consumer,
            metric,
            idem_store::Ts::from(now.0 - chrono::TimeDelta::hours(1)),
            idem_store::Ts::from(now.0 + chrono::TimeDelta::minutes(2)),
        )
        .await
        .unwrap();
    rows.iter().map(|r| r.value).sum()
}
