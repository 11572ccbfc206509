//! Leases: which replica runs the work that must run once.
//!
//! A lease is a row in `idem_leases`. Taking it is one upsert that succeeds
//! only when the row is free, expired, or already the caller's, so two
//! replicas can never both hold it (the row's write lock orders them on
//! Postgres, the database lock on SQLite). The holder renews it well before
//! it expires; a holder that stops releases it, and one that dies loses it
//! when it expires.

use crate::facets::System;
use crate::{StoreResult, Ts, dialect::dispatch};

/// The lease under which hourly rollups, the demo and the session sweeper run.
pub const BACKGROUND_LEASE: &str = "background";

impl System<'_> {
    /// Takes or renews `name` for `holder` until `until`; whether `holder`
    /// holds it now. `now` decides whether another holder's lease expired.
    pub async fn hold_lease(
        self,
        name: &str,
        holder: &str,
        now: Ts,
        until: Ts,
    ) -> StoreResult<bool> {
        const SQL: &str = "INSERT INTO idem_leases (name, holder, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE idem_leases.holder = excluded.holder OR idem_leases.expires_at < $4 \
             RETURNING holder";
        let held: Option<String> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL)
                .bind(name)
                .bind(holder)
                .bind(until)
                .bind(now)
                .fetch_optional(pool)
                .await?
        });
        Ok(held.is_some())
    }

    /// Gives `name` up, if `holder` holds it, so another replica takes over at once.
    pub async fn release_lease(self, name: &str, holder: &str) -> StoreResult<()> {
        const SQL: &str = "DELETE FROM idem_leases WHERE name = $1 AND holder = $2";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(name).bind(holder).execute(pool).await?;
        });
        Ok(())
    }
}
