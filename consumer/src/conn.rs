//! The caller's connection, on either backend.
//!
//! Every write this crate makes goes through the caller's connection — in
//! practice the caller's open transaction (`&mut *tx`) — so the claim, the
//! outcome, the outbox row and the dead letter commit or roll back together
//! with the business effect they protect.

use sqlx::{PgConnection, SqliteConnection};

/// A borrowed Postgres or SQLite connection. Made with `.into()` from
/// `&mut PgConnection` or `&mut SqliteConnection`; a `sqlx::Transaction`
/// derefs to one, so `(&mut *tx).into()` passes a transaction.
pub enum Conn<'c> {
    Postgres(&'c mut PgConnection),
    Sqlite(&'c mut SqliteConnection),
}

impl<'c> From<&'c mut PgConnection> for Conn<'c> {
    fn from(conn: &'c mut PgConnection) -> Self {
        Conn::Postgres(conn)
    }
}

impl<'c> From<&'c mut SqliteConnection> for Conn<'c> {
    fn from(conn: &'c mut SqliteConnection) -> Self {
        Conn::Sqlite(conn)
    }
}

impl Conn<'_> {
    /// Reborrows, so one `Conn` can serve several statements.
    pub fn by_ref(&mut self) -> Conn<'_> {
        match self {
            Conn::Postgres(c) => Conn::Postgres(c),
            Conn::Sqlite(c) => Conn::Sqlite(c),
        }
    }
}

/// Expands `$body` once per backend with `$c` bound to the concrete
/// connection, so each statement is written once and compiled twice. The SQL
/// text is shared: both dialects take `$n` parameters, `ON CONFLICT` and
/// `RETURNING`, and [`crate::Ts`] binds as each one stores time.
macro_rules! on_conn {
    ($conn:expr, $c:ident => $body:expr) => {
        match $conn {
            $crate::conn::Conn::Postgres($c) => $body,
            $crate::conn::Conn::Sqlite($c) => $body,
        }
    };
}
pub(crate) use on_conn;
