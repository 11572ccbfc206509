//! Two backends, one body of code.
//!
//! [`Dialect`] holds either the SQLite or the Postgres variant of a thing (a
//! pool, a transaction). [`dispatch!`] expands one body once per backend, so
//! the body is written once and compiled twice against concrete `sqlx` types.
//! The SQL text is shared wherever the two dialects agree (they agree on `$n`
//! parameters, `ON CONFLICT`, `RETURNING` and row-value comparisons); the few
//! statements that differ say so where they are defined.

#[derive(Debug, Clone)]
pub enum Dialect<S, P> {
    Sqlite(S),
    Postgres(P),
}

impl<S, P> Dialect<S, P> {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Dialect::Postgres(_))
    }
}

macro_rules! dispatch {
    ($value:expr, $bind:ident => $body:expr) => {
        match $value {
            $crate::dialect::Dialect::Sqlite($bind) => $body,
            $crate::dialect::Dialect::Postgres($bind) => $body,
        }
    };
}
pub(crate) use dispatch;
