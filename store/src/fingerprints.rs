//! Fingerprints of keys in Idem's logs: the secret they are keyed with, and
//! which key each fingerprint Idem has logged stands for — kept while it is
//! logged, deleted [`FINGERPRINT_KEEP_DAYS`] after it was last logged.

use crate::facets::{Claims, System};
use crate::{StoreResult, dialect::dispatch, ts::Ts};

/// `idem_meta` name of the secret fingerprints are keyed with, when
/// `IDEM_LOG_KEY_SECRET` does not set one.
pub const LOG_FINGERPRINT_SECRET: &str = "log_fingerprint_secret";

/// How long after it was last logged a fingerprint still finds its key.
pub const FINGERPRINT_KEEP_DAYS: i64 = 30;

impl System<'_> {
    /// This install's fingerprint secret: the one stored, or else
    /// `generated`, stored now. Every replica gets the same one, whichever
    /// stored it first.
    pub async fn log_fingerprint_secret(self, generated: &str) -> StoreResult<String> {
        const KEEP: &str =
            "INSERT INTO idem_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";
        dispatch!(&self.pools, pool => {
            sqlx::query(KEEP).bind(LOG_FINGERPRINT_SECRET).bind(generated).execute(pool).await?;
        });
        Ok(self
            .meta(LOG_FINGERPRINT_SECRET)
            .await?
            .unwrap_or_else(|| generated.to_owned()))
    }

    /// Keeps which key `fingerprint` stands for, logged at `at`: its first
    /// key stays, and the time it was last logged moves on.
    pub async fn record_key_fingerprint(
        self,
        fingerprint: &str,
        consumer: &str,
        key: &str,
        at: Ts,
    ) -> StoreResult<()> {
        const SQL: &str = "INSERT INTO key_fingerprints \
             (fingerprint, consumer, idempotency_key, first_logged_at, last_logged_at) \
             VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (fingerprint) DO UPDATE SET last_logged_at = excluded.last_logged_at \
             WHERE key_fingerprints.last_logged_at < excluded.last_logged_at";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(fingerprint).bind(consumer).bind(key).bind(at)
                .execute(pool).await?;
        });
        Ok(())
    }

    /// Deletes the fingerprints not logged for [`FINGERPRINT_KEEP_DAYS`]
    /// before `now` (a range of their index); how many.
    pub async fn prune_key_fingerprints(self, now: Ts) -> StoreResult<u64> {
        const SQL: &str = "DELETE FROM key_fingerprints WHERE last_logged_at < $1";
        let before = Ts::from(now.0 - chrono::TimeDelta::days(FINGERPRINT_KEEP_DAYS));
        let deleted = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(before).execute(pool).await?.rows_affected()
        });
        Ok(deleted)
    }
}

impl Claims<'_> {
    /// The consumer and key a logged fingerprint stands for, if Idem logged it.
    pub async fn key_by_fingerprint(
        self,
        fingerprint: &str,
    ) -> StoreResult<Option<(String, String)>> {
        const SQL: &str =
            "SELECT consumer, idempotency_key FROM key_fingerprints WHERE fingerprint = $1";
        let found = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(fingerprint).fetch_optional(pool).await?
        });
        Ok(found)
    }
}
