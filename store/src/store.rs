//! Connecting, migrating and transactions.
//!
//! The pool is bounded (`max_connections`, an acquire timeout of seconds)
//! and opened lazily, so Idem starts while its database is down. On
//! Postgres every statement of Idem's runs under a `statement_timeout`
//! (migrations excepted, on a connection of their own), an open
//! transaction left idle is ended, and every execution is planned with its
//! real parameters. On SQLite the file is in WAL mode with a busy timeout,
//! and write transactions begin `IMMEDIATE`. The migrations of
//! `migrations/` are compiled in. The two pool accessors exist for the
//! session store only; [`HealthProbe`] is the health check's own
//! connection, never one of the pool's.

use std::{str::FromStr, time::Duration};

use sqlx::{
    PgPool, Postgres, Sqlite, SqlitePool, Transaction,
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous},
};

use crate::{
    StoreError, StoreResult,
    dialect::{Backend, dispatch},
};

/// The embedded default: a SQLite file in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://idem.db";

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// How to reach the database, and how much of it Idem may hold.
#[derive(Clone)]
pub struct StoreConfig {
    url: String,
    /// Connections in the pool.
    pub max_connections: u32,
    /// How long a request waits for a connection before it is told the
    /// database is unavailable. Seconds, not half a minute.
    pub acquire_timeout: Duration,
    /// Postgres: the longest one statement may run on Idem's connections
    /// (`statement_timeout`); `None` for no limit. Migrations run on a
    /// connection of their own without it.
    pub statement_timeout: Option<Duration>,
    /// Extra run-time settings for every Postgres connection (for example
    /// `auto_explain.*` when checking plans).
    pub postgres_settings: Vec<(String, String)>,
}

impl StoreConfig {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_connections: 10,
            acquire_timeout: Duration::from_secs(3),
            statement_timeout: Some(Duration::from_secs(10)),
            postgres_settings: Vec::new(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn is_postgres(&self) -> bool {
        self.url.starts_with("postgres://") || self.url.starts_with("postgresql://")
    }

    /// The URL with any password replaced, for logs and messages.
    pub fn redacted_url(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(mut parsed) if parsed.password().is_some() => {
                let _ = parsed.set_password(Some("***"));
                parsed.to_string()
            }
            Ok(parsed) => parsed.to_string(),
            Err(_) => "<unparseable database URL>".to_owned(),
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("url", &self.redacted_url())
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .finish()
    }
}

/// A pooled connection idle this long is pinged before it is handed out
/// (one that sat in the pool through a database restart is then replaced,
/// not handed to a request to fail on); one used a moment ago is not.
const PING_WHEN_IDLE_FOR: Duration = Duration::from_secs(1);

/// The pool: bounded, and without sqlx's ping on every acquire (a round trip
/// per use; the health check watches the database, and sqlx pings every
/// connection anyway when it goes back to the pool).
fn pool_options<DB: sqlx::Database>(config: &StoreConfig) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .max_connections(config.max_connections)
        .acquire_timeout(config.acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_WHEN_IDLE_FOR {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// Idem's storage: one handle over either SQLite or Postgres. Cheap to clone
/// (it is a pool). Its `Debug` names the backend and pool size only: the
/// connect options hold the database password.
#[derive(Clone)]
pub struct Store {
    pub(crate) pools: Backend<SqlitePool, PgPool>,
    /// Postgres: how the migrating connection connects (the pool's options
    /// without the statement timeout: building an index on a large table
    /// takes as long as it takes). Shared: a `Store` is cloned into every
    /// request, and these options are a dozen strings.
    migration_options: Option<std::sync::Arc<PgConnectOptions>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (backend, size) = match &self.pools {
            Backend::Sqlite(pool) => ("sqlite", pool.options().get_max_connections()),
            Backend::Postgres(pool) => ("postgres", pool.options().get_max_connections()),
        };
        f.debug_struct("Store")
            .field("backend", &backend)
            .field("max_connections", &size)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Builds the pool. Connections are opened on first use, so this succeeds
    /// while the database is down; [`Store::migrate`] is the first contact.
    pub fn connect(config: &StoreConfig) -> StoreResult<Store> {
        let url = config.url();
        let mut migration_options = None;
        let pools = if config.is_postgres() {
            let options = PgConnectOptions::from_str(url)
                .map_err(|e| StoreError::BadUrl(e.to_string()))?
                .application_name("idem")
                // A transaction left open by a crashed request must not hold
                // locks (or a pool slot on the server) for long.
                .options([("idle_in_transaction_session_timeout", "15s")])
                // Plan every execution with its real parameters. After five runs
                // Postgres would otherwise reuse a generic plan that does not know
                // a LIMIT's value or a prefix's range, and a capped count or a
                // keyset page can turn into a scan of the table.
                .options([("plan_cache_mode", "force_custom_plan")])
                .options(
                    config
                        .postgres_settings
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str())),
                );
            migration_options = Some(std::sync::Arc::new(options.clone()));
            let options = match config.statement_timeout {
                // A dashboard read that runs this long is answered as an
                // error instead of holding a connection while requests queue.
                Some(limit) => options.options([(
                    "statement_timeout",
                    format!("{}ms", limit.as_millis().max(1)),
                )]),
                None => options,
            };
            Backend::Postgres(pool_options(config).connect_lazy_with(options))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|e| StoreError::BadUrl(e.to_string()))?
                .create_if_missing(true)
                // Readers never block the writer and the writer never blocks readers.
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                // A writer waits this long for the lock instead of failing with SQLITE_BUSY.
                .busy_timeout(Duration::from_secs(10));
            Backend::Sqlite(pool_options(config).connect_lazy_with(options))
        } else {
            return Err(StoreError::BadUrl(format!(
                "expected a postgres:// or sqlite: URL, got {}",
                config.redacted_url()
            )));
        };
        Ok(Store {
            pools,
            migration_options,
        })
    }

    /// Applies every migration not yet applied. A failure against a reachable
    /// database is [`StoreError::Migration`]; an unreachable one is
    /// [`StoreError::Unavailable`].
    pub async fn migrate(&self) -> StoreResult<()> {
        match &self.pools {
            Backend::Sqlite(pool) => SQLITE_MIGRATIONS.run(pool).await?,
            Backend::Postgres(pool) => match &self.migration_options {
                Some(options) => {
                    // A pool of one (sqlx's migrator over a bare connection
                    // is not `Send` inside a spawned task).
                    let migrating = PgPoolOptions::new()
                        .max_connections(1)
                        .acquire_timeout(pool.options().get_acquire_timeout())
                        .connect_with(PgConnectOptions::clone(options))
                        .await?;
                    let ran = POSTGRES_MIGRATIONS.run(&migrating).await;
                    migrating.close().await;
                    ran?;
                }
                None => POSTGRES_MIGRATIONS.run(pool).await?,
            },
        }
        Ok(())
    }

    /// "sqlite" or "postgres".
    pub fn backend(&self) -> &'static str {
        match &self.pools {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// A health probe on a connection of its own, outside the pool.
    pub fn health_probe(&self) -> HealthProbe {
        HealthProbe {
            options: match &self.pools {
                Backend::Sqlite(pool) => Backend::Sqlite(pool.connect_options()),
                Backend::Postgres(pool) => Backend::Postgres(pool.connect_options()),
            },
            connection: tokio::sync::Mutex::new(None),
        }
    }

    /// Closes every connection; in-flight queries finish first.
    pub async fn close(&self) {
        dispatch!(&self.pools, pool => pool.close().await)
    }

    /// The SQLite pool, for the session store. `None` on Postgres.
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.pools {
            Backend::Sqlite(pool) => Some(pool),
            Backend::Postgres(_) => None,
        }
    }

    /// The Postgres pool, for the session store. `None` on SQLite.
    pub fn postgres_pool(&self) -> Option<&PgPool> {
        match &self.pools {
            Backend::Postgres(pool) => Some(pool),
            Backend::Sqlite(_) => None,
        }
    }

    /// Begins a write transaction. On SQLite it takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so concurrent writers queue on the busy timeout
    /// instead of failing with `SQLITE_BUSY` when a read lock tries to upgrade.
    pub async fn begin(&self) -> StoreResult<Tx> {
        let inner = match &self.pools {
            Backend::Sqlite(pool) => Backend::Sqlite(pool.begin_with("BEGIN IMMEDIATE").await?),
            Backend::Postgres(pool) => Backend::Postgres(pool.begin().await?),
        };
        Ok(Tx { inner })
    }
}

/// The health check's own connection to the database: opened on first use,
/// reopened after a failure, never taken from the pool. A pool saturated by
/// slow statements therefore never looks like an outage, and the check
/// never waits behind the requests it is judging.
pub struct HealthProbe {
    options: Backend<std::sync::Arc<SqliteConnectOptions>, std::sync::Arc<PgConnectOptions>>,
    connection: tokio::sync::Mutex<Option<Backend<sqlx::SqliteConnection, sqlx::PgConnection>>>,
}

impl HealthProbe {
    /// Opens the connection if needed and runs one `SELECT 1`, all within
    /// `timeout`. A failure closes the connection; the next ping reconnects.
    pub async fn ping(&self, timeout: Duration) -> StoreResult<()> {
        use sqlx::Connection;
        let mut held = self.connection.lock().await;
        let probe = async {
            if held.is_none() {
                *held = Some(match &self.options {
                    Backend::Sqlite(options) => {
                        Backend::Sqlite(sqlx::SqliteConnection::connect_with(options).await?)
                    }
                    Backend::Postgres(options) => {
                        Backend::Postgres(sqlx::PgConnection::connect_with(options).await?)
                    }
                });
            }
            match held.as_mut() {
                Some(connection) => dispatch!(connection, c => {
                    sqlx::query("SELECT 1").execute(&mut *c).await.map(|_| ())
                }),
                None => Ok(()),
            }
        };
        let result = match tokio::time::timeout(timeout, probe).await {
            Ok(result) => result.map_err(StoreError::from),
            Err(_) => Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut)),
        };
        if result.is_err() {
            // Half-open or mid-statement: start afresh next time.
            *held = None;
        }
        result
    }
}

impl std::fmt::Debug for HealthProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthProbe").finish_non_exhaustive()
    }
}

/// A write transaction on either backend. Dropping it without
/// [`Tx::commit`] rolls it back.
pub struct Tx {
    pub(crate) inner: Backend<Transaction<'static, Sqlite>, Transaction<'static, Postgres>>,
}

impl Tx {
    /// `select` with the rows it reads locked until this transaction ends
    /// (`FOR UPDATE` on Postgres; a SQLite write transaction already holds
    /// the database's write lock, so the statement is left as it is).
    pub(crate) fn locking(&self, select: &str) -> String {
        if self.inner.is_postgres() {
            format!("{select} FOR UPDATE")
        } else {
            select.to_owned()
        }
    }

    /// Marks where [`Tx::rollback_to_savepoint`] returns to (one level:
    /// a later savepoint replaces it).
    pub(crate) async fn savepoint(&mut self) -> StoreResult<()> {
        dispatch!(&mut self.inner, tx => { sqlx::query("SAVEPOINT step").execute(&mut **tx).await?; });
        Ok(())
    }

    /// Undoes what this transaction wrote since [`Tx::savepoint`].
    pub(crate) async fn rollback_to_savepoint(&mut self) -> StoreResult<()> {
        dispatch!(&mut self.inner, tx => { sqlx::query("ROLLBACK TO SAVEPOINT step").execute(&mut **tx).await?; });
        Ok(())
    }

    pub async fn commit(self) -> StoreResult<()> {
        dispatch!(self.inner, tx => tx.commit().await?);
        Ok(())
    }

    pub async fn rollback(self) -> StoreResult<()> {
        dispatch!(self.inner, tx => tx.rollback().await?);
        Ok(())
    }
}
