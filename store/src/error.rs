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

/// Failures that mean "the database is not there (or too slow) right now",
/// as opposed to "the database refused this statement".
fn is_connectivity(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            let sqlite = db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some();
            db.code()
                .is_some_and(|code| is_unavailable_code(&code, sqlite))
        }
        _ => false,
    }
}

/// Database error codes that say "not now" rather than "not this".
///
/// Postgres (SQLSTATE): class 08 (connection exception), 57P01–57P05
/// (shutting down, starting up, idle-session or admin termination), 53300
/// (too many connections), 57014 (cancelled: our `statement_timeout`).
/// SQLite (primary result code, the low byte of the extended one): 5 BUSY
/// (the lock stayed taken past the busy timeout), 10 IOERR, 14 CANTOPEN
/// (the file or its folder is not there or not readable).
fn is_unavailable_code(code: &str, sqlite: bool) -> bool {
    if sqlite {
        code.parse::<i64>()
            .is_ok_and(|extended| matches!(extended & 0xff, 5 | 10 | 14))
    } else {
        code.starts_with("08") || code.starts_with("57P") || code == "53300" || code == "57014"
    }
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

#[cfg(test)]
mod tests {
    use super::is_unavailable_code;

    #[test]
    fn outage_codes_are_unavailable_and_refusals_are_not() {
        for code in ["08006", "57P01", "57P03", "53300", "57014"] {
            assert!(
                is_unavailable_code(code, false),
                "Postgres {code} means not now"
            );
        }
        for code in ["5", "517", "10", "14", "270"] {
            assert!(
                is_unavailable_code(code, true),
                "SQLite {code} means not now"
            );
        }
        // Unique violation, syntax error; SQLite constraint, unique, corruption.
        for code in ["23505", "42601", "22005"] {
            assert!(
                !is_unavailable_code(code, false),
                "Postgres {code} means not this"
            );
        }
        for code in ["19", "2067", "11"] {
            assert!(
                !is_unavailable_code(code, true),
                "SQLite {code} means not this"
            );
        }
    }
}
