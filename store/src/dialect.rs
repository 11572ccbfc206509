//! Two backends, one body of code.
//!
//! [`Backend`] holds either the SQLite or the Postgres variant of a thing (a
//! pool, a transaction); [`dispatch!`] expands one body once per backend, so
//! the body is written once and compiled twice against concrete `sqlx` types.
//! Both come from `idem-consumer`, whose writes dispatch the same way: one
//! mechanism for every query Idem runs. The SQL text is shared wherever the
//! two dialects agree (they agree on `$n` parameters, `ON CONFLICT`,
//! `RETURNING` and row-value comparisons); the few statements that differ say
//! so where they are defined.

pub(crate) use idem_consumer::{Backend, dispatch};
