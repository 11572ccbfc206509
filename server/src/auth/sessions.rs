//! Sessions in the database Idem runs on, so any replica serves any request.

use async_trait::async_trait;
use idem_store::Store;
use tower_sessions::{
    ExpiredDeletion, SessionStore,
    session::{Id, Record},
    session_store,
};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

/// tower-sessions' SQL stores, over Idem's own pool and `sessions` table.
#[derive(Debug, Clone)]
pub enum DbSessionStore {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl DbSessionStore {
    pub fn new(store: &Store) -> Self {
        match (store.sqlite_pool(), store.postgres_pool()) {
            (Some(pool), _) => DbSessionStore::Sqlite(
                SqliteStore::new(pool.clone())
                    .with_table_name("sessions")
                    .expect("a valid table name"),
            ),
            (_, Some(pool)) => DbSessionStore::Postgres(
                PostgresStore::new(pool.clone())
                    .with_schema_name("public")
                    .expect("a valid schema name")
                    .with_table_name("sessions")
                    .expect("a valid table name"),
            ),
            (None, None) => unreachable!("a store has one pool or the other"),
        }
    }

    /// Deletes expired sessions (run now and then; expired ones are refused anyway).
    pub async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.delete_expired().await,
            DbSessionStore::Postgres(s) => s.delete_expired().await,
        }
    }
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.create(record).await,
            DbSessionStore::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.save(record).await,
            DbSessionStore::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            DbSessionStore::Sqlite(s) => s.load(id).await,
            DbSessionStore::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            DbSessionStore::Sqlite(s) => s.delete(id).await,
            DbSessionStore::Postgres(s) => s.delete(id).await,
        }
    }
}
