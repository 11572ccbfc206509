//! Sessions in the database Idem runs on, so any replica serves any request.

use std::sync::Arc;

use async_trait::async_trait;
use idem_app::serving::DatabaseStatus;
use idem_store::Store;
use tower_sessions::{
    ExpiredDeletion, SessionStore,
    session::{Id, Record},
    session_store,
};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use super::outage::Recent;

/// tower-sessions' SQL stores, over Idem's own pool and `sessions` table,
/// with a memory of recently loaded sessions for database outages (see
/// [`super::outage`]).
///
/// The idle timeout counts reads, so every request hands its session back to
/// be saved with a later expiry. Writing that on every page view would make
/// each read a write transaction (an upsert and a WAL flush), so a save that
/// changes nothing but the expiry, by less than [`DbSessionStore::slack`],
/// is skipped: the stored expiry trails the true one by at most the slack,
/// and an idle session ends up to that much early.
///
/// A session ended while the database could not be written (a sign-out
/// during an outage) is remembered as ended: this replica refuses it at
/// once, and [`DbSessionStore::retry_deletes`] deletes its row as soon as
/// the database answers again.
///
/// Signing out is final: saving a session only updates its row, never
/// inserts one ([`SessionStore::create`] alone does, for a new id). A
/// request that loaded the session before it was deleted (by a sign-out,
/// or by the guard after an epoch bump) and saves it afterwards writes
/// nothing, so the old cookie stays dead.
#[derive(Debug, Clone)]
pub struct DbSessionStore {
    backend: Backend,
    pools: Pools,
    recent: Arc<Recent<Id, Record>>,
    /// Sessions ended here whose rows are still to be deleted.
    ended: Arc<std::sync::Mutex<std::collections::HashSet<Id>>>,
    database: DatabaseStatus,
    slack: time::Duration,
}

/// At most this many ended sessions wait for their rows to be deleted; a
/// sign-out beyond that during one outage is refused (it cannot be kept).
const MAX_ENDED: usize = 10_000;

/// The most a stored session expiry may trail the idle timeout's: a
/// thirtieth of the timeout, and never more than a minute.
fn refresh_slack(idle_timeout: time::Duration) -> time::Duration {
    let slack: time::Duration = idle_timeout / 30;
    slack.min(time::Duration::minutes(1))
}

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

/// The pools, for the one statement tower-sessions' stores lack: an update
/// that never inserts.
#[derive(Debug, Clone)]
enum Pools {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

const UPDATE_SQLITE: &str = "UPDATE sessions SET data = $2, expiry_date = $3 WHERE id = $1";
const UPDATE_POSTGRES: &str =
    "UPDATE public.sessions SET data = $2, expiry_date = $3 WHERE id = $1";

impl DbSessionStore {
    pub fn new(store: &Store, database: DatabaseStatus, idle_timeout: time::Duration) -> Self {
        let (backend, pools) = match (store.sqlite_pool(), store.postgres_pool()) {
            (Some(pool), _) => (
                Backend::Sqlite(
                    SqliteStore::new(pool.clone())
                        .with_table_name("sessions")
                        .expect("a valid table name"),
                ),
                Pools::Sqlite(pool.clone()),
            ),
            (_, Some(pool)) => (
                Backend::Postgres(
                    PostgresStore::new(pool.clone())
                        .with_schema_name("public")
                        .expect("a valid schema name")
                        .with_table_name("sessions")
                        .expect("a valid table name"),
                ),
                Pools::Postgres(pool.clone()),
            ),
            (None, None) => unreachable!("a store has one pool or the other"),
        };
        DbSessionStore {
            backend,
            pools,
            recent: Arc::default(),
            ended: Arc::default(),
            database,
            slack: refresh_slack(idle_timeout),
        }
    }

    /// Whether `record` only moves the expiry of the session as the
    /// database last returned it, and by less than the slack.
    fn only_refreshes(&self, record: &Record) -> bool {
        self.recent
            .recall(&record.id)
            .is_some_and(|stored| only_refreshes(&stored, record, self.slack))
    }

    fn is_ended(&self, id: &Id) -> bool {
        self.ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(id)
    }

    /// Deletes the rows of sessions ended while the database could not be
    /// written; returns how many are still waiting. Run on every replica
    /// while the database is up.
    pub async fn retry_deletes(&self) -> usize {
        let waiting: Vec<Id> = self
            .ended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        for id in waiting {
            if self.database.down_since().is_some() {
                break;
            }
            if self.delete_row(&id).await.is_ok() {
                self.ended
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
            }
        }
        self.ended.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Writes `record` over its row, if the row still exists: `false` when
    /// the session was deleted meanwhile (nothing is written).
    async fn update_row(&self, record: &Record) -> session_store::Result<bool> {
        let backend = |e: sqlx::Error| session_store::Error::Backend(e.to_string());
        let data =
            rmp_serde::to_vec(record).map_err(|e| session_store::Error::Encode(e.to_string()))?;
        let id = record.id.to_string();
        let updated = match &self.pools {
            Pools::Sqlite(pool) => sqlx::query(UPDATE_SQLITE)
                .bind(id)
                .bind(data)
                .bind(record.expiry_date)
                .execute(pool)
                .await
                .map_err(backend)?
                .rows_affected(),
            Pools::Postgres(pool) => sqlx::query(UPDATE_POSTGRES)
                .bind(id)
                .bind(data)
                .bind(record.expiry_date)
                .execute(pool)
                .await
                .map_err(backend)?
                .rows_affected(),
        };
        Ok(updated == 1)
    }

    async fn delete_row(&self, id: &Id) -> session_store::Result<()> {
        match &self.backend {
            Backend::Sqlite(s) => s.delete(id).await,
            Backend::Postgres(s) => s.delete(id).await,
        }
    }

    /// Deletes expired sessions (run now and then; expired ones are refused anyway).
    pub async fn delete_expired(&self) -> session_store::Result<()> {
        match &self.backend {
            Backend::Sqlite(s) => s.delete_expired().await,
            Backend::Postgres(s) => s.delete_expired().await,
        }
    }
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match &self.backend {
            Backend::Sqlite(s) => s.create(record).await,
            Backend::Postgres(s) => s.create(record).await,
        }?;
        self.recent.confirm(record.id, record.clone());
        Ok(())
    }

    /// A save that only refreshes the expiry by less than the slack is
    /// skipped (the memory keeps the stored record, so the next comparison is
    /// against what the database holds). A failed save that would only have
    /// refreshed the expiry of a session loaded a moment ago (during an
    /// outage, or a slow moment) is not an error: the session stays as it
    /// was stored. Any other failed save is. An ended session is not saved
    /// back, and a session whose row is gone (signed out while this request
    /// was in flight) is not written back.
    async fn save(&self, record: &Record) -> session_store::Result<()> {
        if self.is_ended(&record.id) {
            return Ok(());
        }
        if self.only_refreshes(record) {
            return Ok(());
        }
        let saved = if self.database.down_since().is_some() {
            Err(down())
        } else {
            self.update_row(record).await
        };
        match saved {
            Ok(true) => {
                self.recent.confirm(record.id, record.clone());
                Ok(())
            }
            Ok(false) => {
                self.recent.forget(&record.id);
                tracing::debug!("a session ended while a request of it was in flight; not saved");
                Ok(())
            }
            Err(_)
                if self
                    .recent
                    .recall(&record.id)
                    .is_some_and(|r| r.data == record.data) =>
            {
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    /// A session is read from the database, unless this replica read it
    /// within [`super::REUSE_FOR_READS`] and the request only reads. Only
    /// while the health check
    /// has declared an outage (and the database is then not asked), one it
    /// returned within the outage grace (and not expired since) is served
    /// from memory; a database that is merely slow gets its error passed on,
    /// never an old answer. A session ended here is gone at once.
    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        if self.is_ended(id) {
            return Ok(None);
        }
        if self.database.down_since().is_some() {
            return match self.recent.recall(id) {
                Some(record) if record.expiry_date > time::OffsetDateTime::now_utc() => {
                    Ok(Some(record))
                }
                _ => Err(down()),
            };
        }
        if super::reading()
            && let Some(record) = self.recent.recall_within(id, super::REUSE_FOR_READS)
            && record.expiry_date > time::OffsetDateTime::now_utc()
        {
            return Ok(Some(record));
        }
        let loaded = match &self.backend {
            Backend::Sqlite(s) => s.load(id).await,
            Backend::Postgres(s) => s.load(id).await,
        };
        match loaded {
            Ok(Some(record)) => {
                self.recent.confirm(*id, record.clone());
                Ok(Some(record))
            }
            Ok(None) => {
                self.recent.forget(id);
                Ok(None)
            }
            Err(err) => Err(err),
        }
    }

    /// Ends a session. When its row cannot be deleted now (the database is
    /// down or does not answer), the session is remembered as ended — this
    /// replica refuses it from now on — and its row is deleted once the
    /// database answers again ([`DbSessionStore::retry_deletes`]).
    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        self.recent.forget(id);
        let deleted = if self.database.down_since().is_some() {
            Err(down())
        } else {
            self.delete_row(id).await
        };
        match deleted {
            Ok(()) => Ok(()),
            Err(err) => {
                let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
                if ended.len() >= MAX_ENDED {
                    return Err(err);
                }
                ended.insert(*id);
                tracing::info!(
                    "a session ended while the database was unavailable; its row is deleted when it answers"
                );
                Ok(())
            }
        }
    }
}

/// Whether saving `record` over `stored` would change nothing but a later
/// expiry, by less than `slack`.
fn only_refreshes(stored: &Record, record: &Record, slack: time::Duration) -> bool {
    stored.data == record.data
        && record.expiry_date >= stored.expiry_date
        && record.expiry_date - stored.expiry_date < slack
}

/// The error for a session read or write not attempted during an outage.
fn down() -> session_store::Error {
    session_store::Error::Backend("the database is unavailable".to_owned())
}

#[cfg(test)]
mod tests {
    use time::{Duration, OffsetDateTime};

    use super::*;

    fn stored() -> Record {
        let mut record = Record {
            id: Id::default(),
            data: Default::default(),
            expiry_date: OffsetDateTime::UNIX_EPOCH + Duration::days(20_000),
        };
        record.data.insert("user".into(), serde_json::json!(7));
        record
    }

    #[test]
    fn the_slack_is_a_thirtieth_of_the_idle_timeout_and_at_most_a_minute() {
        assert_eq!(
            refresh_slack(Duration::seconds(3)),
            Duration::milliseconds(100)
        );
        assert_eq!(refresh_slack(Duration::minutes(30)), Duration::minutes(1));
        assert_eq!(refresh_slack(Duration::hours(8)), Duration::minutes(1));
    }

    #[test]
    fn only_a_small_move_of_the_expiry_is_left_unsaved() {
        let slack = Duration::minutes(1);
        let stored = stored();
        let later = |by| Record {
            expiry_date: stored.expiry_date + by,
            ..stored.clone()
        };
        assert!(only_refreshes(
            &stored,
            &later(Duration::seconds(59)),
            slack
        ));
        assert!(
            !only_refreshes(&stored, &later(Duration::seconds(60)), slack),
            "a move of the slack or more is saved"
        );
        assert!(
            !only_refreshes(&stored, &later(Duration::seconds(-1)), slack),
            "an earlier expiry is saved"
        );
        let mut changed = later(Duration::seconds(1));
        changed.data.insert("user".into(), serde_json::json!(8));
        assert!(
            !only_refreshes(&stored, &changed, slack),
            "a change of data is saved however small the move"
        );
    }
}
