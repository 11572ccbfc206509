//! Resolutions written back into a team's own table (`adapter_write_backs`).
//!
//! A consumer read through an adapter keeps its outcomes in its own table;
//! a resolution that changed only Idem's mirror would be undone by the next
//! write there, and the team's workers would never see it. An adapter whose
//! table can hold an outcome declares a function that writes one
//! (`adapters/postgres/reminder_store.sql`); a resolution of that
//! consumer's key calls it in the resolution's own transaction, beside the
//! audit row, so both happen or neither does.

use idem_domain::ClaimStatus;

use crate::facets::Actions;
use crate::{StoreError, StoreResult, dialect::dispatch, store::Tx};

/// What became of a resolution's write-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteBack {
    /// The team's table holds the outcome now.
    Written,
    /// The team's table no longer holds the key as unresolved.
    Refused,
}

/// Reads the function declared for `consumer`.
const DECLARED: &str = "SELECT resolve_function FROM adapter_write_backs WHERE consumer = $1";

/// A function name as an adapter registers it (`format('%I.%I', …)`):
/// identifier characters, dots and double quotes only, so it cannot carry
/// anything but a name into the statement that calls it.
fn is_function_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '"' | '$'))
}

impl Actions<'_> {
    /// The function that writes `consumer`'s resolutions back into its own
    /// table, if its adapter declares one.
    pub async fn resolve_write_back(self, consumer: &str) -> StoreResult<Option<String>> {
        Ok(dispatch!(&self.pools, pool => {
            sqlx::query_scalar(DECLARED).bind(consumer).fetch_optional(pool).await?
        }))
    }
}

impl Tx {
    /// The function `consumer`'s resolutions are written back with, inside
    /// this transaction.
    pub(crate) async fn declared_write_back(
        &mut self,
        consumer: &str,
    ) -> StoreResult<Option<String>> {
        Ok(dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(DECLARED).bind(consumer).fetch_optional(&mut **tx).await?
        }))
    }

    /// Writes a resolution into the team's table through `function`
    /// (`(key, status, provider_ref, last_error) → boolean`).
    pub(crate) async fn write_back_resolution(
        &mut self,
        function: &str,
        key: &str,
        status: ClaimStatus,
        provider_ref: Option<&str>,
        error: Option<&str>,
    ) -> StoreResult<WriteBack> {
        if !is_function_name(function) {
            return Err(StoreError::Contract(format!(
                "adapter_write_backs names “{function}”, which is not a function name"
            )));
        }
        let sql = format!("SELECT {function}($1, $2, $3, $4)");
        let written: Option<bool> = dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(&sql).bind(key).bind(status.as_str()).bind(provider_ref)
                .bind(error).fetch_one(&mut **tx).await?
        });
        Ok(if written == Some(true) {
            WriteBack::Written
        } else {
            WriteBack::Refused
        })
    }
}

#[cfg(test)]
mod tests {
    use super::is_function_name;

    #[test]
    fn only_a_name_is_called() {
        assert!(is_function_name("public.idem_reminder_sends_resolve"));
        assert!(is_function_name("\"team_schema\".\"resolve\""));
        assert!(!is_function_name("f(1); DROP TABLE claims; --"));
        assert!(!is_function_name("pg_sleep(10)"));
        assert!(!is_function_name(""));
    }
}
