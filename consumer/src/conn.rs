//! The caller's connection, on either backend — and the one way Idem's code
//! (this crate and `idem-store`) writes a body once for both backends.
//!
//! Every write this crate makes goes through the caller's connection — in
//! practice the caller's open transaction (`&mut *tx`) — so the claim, the
//! outcome, the outbox row and the dead letter commit or roll back together
//! with the business effect they protect.

use sqlx::{PgConnection, SqliteConnection};

/// Either backend's variant of a thing: a connection here, a pool or a
/// transaction in `idem-store`. [`dispatch!`](crate::dispatch) expands one
/// body once per variant.
#[derive(Debug, Clone)]
pub enum Backend<S, P> {
    Sqlite(S),
    Postgres(P),
}

impl<S, P> Backend<S, P> {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Backend::Postgres(_))
    }
}

/// A borrowed Postgres or SQLite connection. Made with `.into()` from
/// `&mut PgConnection` or `&mut SqliteConnection`; a `sqlx::Transaction`
/// derefs to one, so `(&mut *tx).into()` passes a transaction.
pub type Conn<'c> = Backend<&'c mut SqliteConnection, &'c mut PgConnection>;

impl<'c> From<&'c mut PgConnection> for Conn<'c> {
    fn from(conn: &'c mut PgConnection) -> Self {
        Backend::Postgres(conn)
    }
}

impl<'c> From<&'c mut SqliteConnection> for Conn<'c> {
    fn from(conn: &'c mut SqliteConnection) -> Self {
        Backend::Sqlite(conn)
    }
}

impl Conn<'_> {
    /// Reborrows, so one `Conn` can serve several statements.
    pub fn by_ref(&mut self) -> Conn<'_> {
        match self {
            Backend::Postgres(c) => Backend::Postgres(c),
            Backend::Sqlite(c) => Backend::Sqlite(c),
        }
    }
}

/// Expands `$body` once per backend with `$bind` bound to the concrete
/// value (a connection, a pool, a transaction), so each statement is written
/// once and compiled twice against concrete `sqlx` types. The SQL text is
/// shared wherever the dialects agree: both take `$n` parameters,
/// `ON CONFLICT`, `RETURNING` and row-value comparisons, and [`crate::Ts`]
/// binds as each one stores time.
#[doc(hidden)]
#[macro_export]
macro_rules! dispatch {
    ($value:expr, $bind:ident => $body:expr) => {
        match $value {
            $crate::Backend::Sqlite($bind) => $body,
            $crate::Backend::Postgres($bind) => $body,
        }
    };
}
