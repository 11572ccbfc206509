//! Throwaway databases for tests: a fresh SQLite file in a temporary folder,
//! or a fresh Postgres database created on the server named by
//! `TEST_DATABASE_URL` (else `DATABASE_URL`) and dropped afterwards.
//!
//! The Postgres half never skips: without a reachable server, a test fails
//! and says so. `make test` finds or starts a server before running the suite.
//!
//! Also here, for tests only: [`on_both_backends!`] (one body, two tests),
//! raw-SQL probes that go around Idem's API on purpose (`execute_raw`,
//! `column_names`, `count_rows`, `occupy_pool`), and reads the pages never
//! make but tests check (`latest_audit`, `metric_rows`, `lease_holder`, …).
//! The module exists only with the `testing` feature, which only
//! dev-dependencies turn on: the shipped binary has neither it nor
//! `tempfile` (`make embedded` checks).

use std::sync::atomic::{AtomicU32, Ordering};

use idem_domain::{
    AuditEntry, Claim, Metric,
    slo::{Events, Indicator},
};
use sqlx::{Connection, Executor, PgConnection};

use crate::{
    Store, StoreConfig, StoreResult, Ts,
    dialect::dispatch,
    reads::prefix_upper_bound,
    rows::{AuditRow, ClaimRow, audit_columns, claim_columns, convert},
};

/// Expands each listed `async fn name(store: &Store)` into two tests,
/// `sqlite::name` and `postgres::name`, each on a fresh database: the way
/// every storage-touching test runs on both backends from one body.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let db = $crate::testing::TestDatabase::sqlite().await;
                    super::$name(&db.store).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let db = $crate::testing::TestDatabase::postgres().await;
                    super::$name(&db.store).await;
                }
            )+
        }
    };
}

/// The environment variable naming the Postgres server tests create databases on.
pub const TEST_DATABASE_URL: &str = "TEST_DATABASE_URL";

pub struct TestDatabase {
    pub store: Store,
    /// The URL of this database (for a server process under test).
    pub url: String,
    guard: Guard,
}

enum Guard {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, name: String },
}

/// The Postgres server URL tests use, or a panic that says how to provide one.
pub fn postgres_server_url() -> String {
    std::env::var(TEST_DATABASE_URL)
        .or_else(|_| std::env::var("DATABASE_URL"))
        .ok()
        .filter(|url| url.starts_with("postgres"))
        .unwrap_or_else(|| {
            panic!(
                "{TEST_DATABASE_URL} must name a Postgres server (for example \
                 postgres://postgres@127.0.0.1:5432/postgres); the Postgres tests do not skip. \
                 `make test` finds or starts one."
            )
        })
}

impl TestDatabase {
    /// A migrated SQLite database in a fresh temporary folder.
    pub async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder for the SQLite test database");
        let url = format!("sqlite://{}", dir.path().join("idem.db").display());
        let store = Store::connect(&StoreConfig::new(&url)).expect("a valid SQLite URL");
        store
            .migrate()
            .await
            .expect("migrations apply to a fresh SQLite database");
        Self {
            store,
            url,
            guard: Guard::Sqlite(dir),
        }
    }

    /// A migrated Postgres database created for this test alone.
    pub async fn postgres() -> Self {
        static SEQUENCE: AtomicU32 = AtomicU32::new(0);
        let admin_url = postgres_server_url();
        let name = format!(
            "idem_test_{}_{}_{}",
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed),
            chrono::Utc::now().timestamp_micros()
        );
        let mut admin = PgConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("cannot reach the Postgres test server: {e}"));
        admin
            .execute(format!(r#"CREATE DATABASE "{name}""#).as_str())
            .await
            .expect("CREATE DATABASE for a test");
        let _ = admin.close().await;

        let mut url = url::Url::parse(&admin_url).expect("TEST_DATABASE_URL is a URL");
        url.set_path(&name);
        let url = url.to_string();
        let store = Store::connect(&StoreConfig::new(&url)).expect("a valid Postgres URL");
        store
            .migrate()
            .await
            .expect("migrations apply to a fresh Postgres database");
        Self {
            store,
            url,
            guard: Guard::Postgres { admin_url, name },
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Guard::Postgres { admin_url, name } = &self.guard else {
            return;
        };
        // Drop runs outside any async context we may block; a short-lived
        // thread with its own runtime drops the database even after a panic.
        let (admin_url, name) = (admin_url.clone(), name.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await.ok()?;
                admin
                    .execute(format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#).as_str())
                    .await
                    .ok()
            })
        })
        .join();
    }
}

/// Runs one statement outside Idem's API (tests that break or probe the
/// schema on purpose): `sqlite` on SQLite, `postgres` on Postgres.
pub async fn execute_raw(store: &Store, sqlite: &str, postgres: &str) -> Result<u64, sqlx::Error> {
    match &store.pools {
        crate::dialect::Backend::Sqlite(pool) => sqlx::raw_sql(sqlite)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()),
        crate::dialect::Backend::Postgres(pool) => sqlx::raw_sql(postgres)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()),
    }
}

/// The columns of `table` as the migrated schema has them, in order.
pub async fn column_names(store: &Store, table: &str) -> Result<Vec<String>, sqlx::Error> {
    match &store.pools {
        crate::dialect::Backend::Sqlite(pool) => {
            sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
                .bind(table)
                .fetch_all(pool)
                .await
        }
        crate::dialect::Backend::Postgres(pool) => {
            sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
            )
            .bind(table)
            .fetch_all(pool)
            .await
        }
    }
}

/// Connections taken from a store's pool and held until dropped: what a
/// burst of slow requests does to the pool.
pub struct Occupied {
    _held: crate::dialect::Backend<
        Vec<sqlx::pool::PoolConnection<sqlx::Sqlite>>,
        Vec<sqlx::pool::PoolConnection<sqlx::Postgres>>,
    >,
}

/// Takes every connection of `store`'s pool (it must have `size`) and
/// holds them until the returned value is dropped.
pub async fn occupy_pool(store: &Store, size: u32) -> Occupied {
    use crate::dialect::Backend;
    let held = match &store.pools {
        Backend::Sqlite(pool) => {
            let mut held = Vec::new();
            for _ in 0..size {
                held.push(pool.acquire().await.expect("a pool connection"));
            }
            Backend::Sqlite(held)
        }
        Backend::Postgres(pool) => {
            let mut held = Vec::new();
            for _ in 0..size {
                held.push(pool.acquire().await.expect("a pool connection"));
            }
            Backend::Postgres(held)
        }
    };
    Occupied { _held: held }
}

/// How many rows `from` holds: a table, optionally with a condition
/// (`"login_failures where failures > 0"`). Tests only; the text is SQL.
pub async fn count_rows(store: &Store, from: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {from}");
    match &store.pools {
        crate::dialect::Backend::Sqlite(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await,
        crate::dialect::Backend::Postgres(pool) => sqlx::query_scalar(&sql).fetch_one(pool).await,
    }
    .expect("a count")
}

/// A consumer name for a test; panics on one the domain refuses.
pub fn consumer(name: &str) -> idem_domain::ConsumerName {
    idem_domain::ConsumerName::parse(name).expect("a valid consumer name")
}

/// An idempotency key for a test; panics on one the domain refuses.
pub fn key(text: &str) -> idem_domain::IdempotencyKey {
    idem_domain::IdempotencyKey::parse(text).expect("a valid idempotency key")
}

/// An action id for a test (8 to 64 letters, digits and hyphens).
pub fn action_id(text: &str) -> idem_domain::action::ActionId {
    idem_domain::action::ActionId::parse(text).expect("a valid action id")
}

/// An account name for a test; panics on one the domain refuses.
pub fn account(name: &str) -> idem_domain::AccountName {
    idem_domain::AccountName::parse(name).expect("a valid account name")
}

/// A token name for a test; panics on one the domain refuses.
pub fn token(name: &str) -> idem_domain::TokenName {
    idem_domain::TokenName::parse(name).expect("a valid token name")
}

/// A reason as an operator would type it; panics on an empty or refused
/// one. Kept for the test's whole run (requests borrow it).
pub fn reason(text: &str) -> &'static idem_domain::action::Reason {
    let reason = idem_domain::action::Reason::parse(text)
        .expect("a valid reason")
        .expect("a reason that is not empty");
    Box::leak(Box::new(reason))
}

/// A provider reference; panics on an empty or refused one.
pub fn provider_ref(text: &str) -> idem_domain::action::ProviderRef {
    idem_domain::action::ProviderRef::parse(text)
        .expect("a valid provider reference")
        .expect("a reference that is not empty")
}

/// The resolution as sent with `reference`.
pub fn sent(reference: &str) -> idem_domain::action::Resolution {
    idem_domain::action::Resolution::Sent {
        provider_ref: provider_ref(reference),
    }
}

/// The action id a run started with `form` gives its key at `position`
/// (what a test takes first to make the database refuse that item).
pub fn run_key_action_id(
    form: &idem_domain::action::ActionId,
    position: i64,
) -> idem_domain::action::ActionId {
    crate::actions::redrive::item::derived_action_id(form.as_str(), &format!("key-{position}"))
}

/// A dead letter's id, as a test holds it from a write.
pub fn dead_letter_id(id: i64) -> idem_domain::DeadLetterId {
    idem_domain::DeadLetterId::of_row(id)
}

/// One stored row of `consumer_metrics`.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MetricRow {
    pub consumer: String,
    pub metric: String,
    pub minute: Ts,
    pub bucket: String,
    pub value: f64,
}

/// Reads only tests make: what the pages never ask, but a test checks.
impl Store {
    /// The dead letter `id`, whoever's it is; panics when there is none.
    pub async fn letter(&self, id: i64) -> idem_domain::DeadLetter {
        self.claims()
            .dead_letter(dead_letter_id(id), &idem_domain::Within::Every)
            .await
            .expect("the dead letter is read")
            .expect("the dead letter exists")
    }

    /// Claims whose key starts with `prefix` (any consumer), in key order.
    /// The prefix is matched literally — it is a range over the key index,
    /// not a `LIKE` pattern, so `%` and `_` are ordinary characters.
    pub async fn claims_with_key_prefix(
        &self,
        prefix: &str,
        limit: i64,
    ) -> StoreResult<Vec<Claim>> {
        const BOUNDED: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE idempotency_key >= $1 AND idempotency_key < $2 \
             ORDER BY idempotency_key, consumer LIMIT $3"
        );
        const UNBOUNDED: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE idempotency_key >= $1 \
             ORDER BY idempotency_key, consumer LIMIT $2"
        );
        let rows: Vec<ClaimRow> = match prefix_upper_bound(prefix) {
            Some(upper) => dispatch!(&self.pools, pool => {
                sqlx::query_as(BOUNDED).bind(prefix).bind(&upper).bind(limit).fetch_all(pool).await?
            }),
            None => dispatch!(&self.pools, pool => {
                sqlx::query_as(UNBOUNDED).bind(prefix).bind(limit).fetch_all(pool).await?
            }),
        };
        convert(rows)
    }

    /// The newest audit entries, newest first.
    pub async fn latest_audit(&self, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        const SQL: &str = concat!(
            "SELECT ",
            audit_columns!(),
            " FROM audit_log ORDER BY at DESC, id DESC LIMIT $1"
        );
        let rows: Vec<AuditRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(limit).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// Good and valid events for an SLO's indicator in `[from, to)`.
    pub async fn indicator_events(
        &self,
        indicator: &Indicator,
        from: Ts,
        to: Ts,
    ) -> StoreResult<Events> {
        let events = self
            .metrics()
            .indicator_events_since(&[indicator], &[from], to)
            .await?;
        Ok(events[0][0])
    }

    /// Who holds `name`, and until when (an expired lease is still returned).
    pub async fn lease_holder(&self, name: &str) -> StoreResult<Option<(String, Ts)>> {
        const SQL: &str = "SELECT holder, expires_at FROM idem_leases WHERE name = $1";
        let row = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(name).fetch_optional(pool).await?
        });
        Ok(row)
    }

    /// The rows of one metric for one consumer in `[from, to)`, by minute.
    pub async fn metric_rows(
        &self,
        consumer: &str,
        metric: Metric,
        from: Ts,
        to: Ts,
    ) -> StoreResult<Vec<MetricRow>> {
        const SQL: &str = "SELECT consumer, metric, minute, bucket, value FROM consumer_metrics \
             WHERE consumer = $1 AND metric = $2 AND minute >= $3 AND minute < $4 \
             ORDER BY minute, bucket";
        let rows = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(consumer).bind(metric.name()).bind(from).bind(to)
                .fetch_all(pool).await?
        });
        Ok(rows)
    }
}
