//! `idem_meta`: a few facts about the database itself (for example that it
//! holds demo data, which every page then says).

use crate::facets::System;
use crate::{StoreResult, dialect::dispatch};

/// Set when the demo simulator has written to this database.
pub const DEMO_DATA: &str = "demo_data";

impl System<'_> {
    pub async fn meta(self, name: &str) -> StoreResult<Option<String>> {
        const SQL: &str = "SELECT value FROM idem_meta WHERE name = $1";
        let value = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(name).fetch_optional(pool).await?
        });
        Ok(value)
    }

    pub async fn set_meta(self, name: &str, value: &str) -> StoreResult<()> {
        const SQL: &str = "INSERT INTO idem_meta (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(name).bind(value).execute(pool).await?;
        });
        Ok(())
    }
}
