//! The storage layer's one error type.
//!
//! Callers branch on the kind (unavailable → 503 and a banner, bad cursor →
//! 400, the rest → 500 with a correlation id); the `sqlx` cause stays inside
//! as the error's source, for the log, and never becomes page text.

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or did not answer in time.
    #[error("the database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// A migration failed against a reachable database.
    #[error("database migration failed")]
    Migration(#[source] sqlx::migrate::MigrateError),
    /// `DATABASE_URL` names something Idem cannot use.
    #[error("invalid database URL: {0}")]
    BadUrl(String),
    /// A pagination cursor that Idem did not issue (or that was altered).
    #[error("invalid or expired page cursor")]
    BadCursor,
    /// A row holds a value outside the contract (for example an unknown status).
    #[error("the database holds a value outside the data contract: {0}")]
    Contract(String),
    /// Any other database failure.
    #[error("database error")]
    Database(#[source] sqlx::Error),
}

impl StoreError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Failures that mean "the database is not there right now", as opposed to
/// "the database refused this statement".
fn is_connectivity(err: &sqlx::Error) -> bool {
    matches!(
        err,
        sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed
    )
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        if is_connectivity(&err) {
            StoreError::Unavailable(err)
        } else {
            StoreError::Database(err)
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        match err {
            sqlx::migrate::MigrateError::Execute(e) if is_connectivity(&e) => {
                StoreError::Unavailable(e)
            }
            other => StoreError::Migration(other),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
