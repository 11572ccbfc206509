//! The `Idempotency-Key` of the API's writes (IETF httpapi draft
//! "The Idempotency-Key HTTP Header Field"): per token, a key is bound to
//! the first request's fingerprint and, once answered, to its answer.
//!
//! - the same key and fingerprint again: the first answer, as stored;
//! - the same key with another fingerprint: [`Begun::Mismatch`] (a 422);
//! - the same key while the first request still runs: [`Begun::InProgress`]
//!   (a 409), unless it started more than `stale_after` ago, when its
//!   process is taken to have died and the new request takes it over
//!   (compare-and-set on `started_at`, so only one does);
//! - an answer that should not be kept (a 5xx) is [`Store::abandon_idempotent`]:
//!   the row goes, and the client may try again with the same key.
//!
//! The row is only a memory of answers. What makes a retried action happen
//! once is the action itself: its action id is derived from the key, and
//! the audit log's unique action id answers a resubmission with the first
//! outcome, even when the process died between the action and this row.

use chrono::TimeDelta;

use crate::facets::Tokens;
use crate::{StoreResult, dialect::dispatch, ts::Ts};

/// How long keys are kept: the draft asks for at least 24 hours.
pub const IDEMPOTENCY_KEEP: TimeDelta = TimeDelta::hours(48);

/// What to do with a request carrying an `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// The first request with this key (or a takeover of one that died):
    /// run it, then [`Store::finish_idempotent`] or
    /// [`Store::abandon_idempotent`].
    New,
    /// Answered before: the status and body to send again.
    Replay { status: u16, body: String },
    /// The key was used with another request.
    Mismatch,
    /// The first request with this key is still running.
    InProgress,
}

#[derive(sqlx::FromRow)]
struct KeyRow {
    fingerprint: String,
    started_at: Ts,
    status: Option<i32>,
    body: Option<String>,
}

impl Tokens<'_> {
    /// Binds `key` to `fingerprint` for `token_id`, or says what an earlier
    /// request with the key left.
    pub async fn begin_idempotent(
        self,
        token_id: i64,
        key: &str,
        fingerprint: &str,
        now: Ts,
        stale_after: TimeDelta,
    ) -> StoreResult<Begun> {
        const INSERT: &str = "INSERT INTO api_idempotency (token_id, idempotency_key, fingerprint, \
             started_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
        const READ: &str = "SELECT fingerprint, started_at, status, body FROM api_idempotency \
             WHERE token_id = $1 AND idempotency_key = $2";
        const TAKE_OVER: &str = "UPDATE api_idempotency SET started_at = $4 WHERE token_id = $1 \
             AND idempotency_key = $2 AND started_at = $3 AND status IS NULL";
        let inserted = dispatch!(&self.pools, pool => {
            sqlx::query(INSERT).bind(token_id).bind(key).bind(fingerprint).bind(now)
                .execute(pool).await?.rows_affected()
        });
        if inserted == 1 {
            return Ok(Begun::New);
        }
        let row: Option<KeyRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(READ).bind(token_id).bind(key).fetch_optional(pool).await?
        });
        let Some(row) = row else {
            // Abandoned between the two statements: the caller may try again.
            return Ok(Begun::InProgress);
        };
        if row.fingerprint != fingerprint {
            return Ok(Begun::Mismatch);
        }
        if let (Some(status), Some(body)) = (row.status, row.body) {
            return Ok(Begun::Replay {
                status: u16::try_from(status).unwrap_or(500),
                body,
            });
        }
        if row.started_at.0 + stale_after < now.0 {
            let taken = dispatch!(&self.pools, pool => {
                sqlx::query(TAKE_OVER).bind(token_id).bind(key).bind(row.started_at).bind(now)
                    .execute(pool).await?.rows_affected()
            });
            if taken == 1 {
                return Ok(Begun::New);
            }
        }
        Ok(Begun::InProgress)
    }

    /// Keeps the answer to the request that began `key`.
    pub async fn finish_idempotent(
        self,
        token_id: i64,
        key: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        const SQL: &str = "UPDATE api_idempotency SET status = $3, body = $4 \
             WHERE token_id = $1 AND idempotency_key = $2 AND status IS NULL";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(token_id).bind(key).bind(i32::from(status)).bind(body)
                .execute(pool).await?;
        });
        Ok(())
    }

    /// Forgets a key whose request was not answered for good (a 5xx): the
    /// client may send it again.
    pub async fn abandon_idempotent(self, token_id: i64, key: &str) -> StoreResult<()> {
        const SQL: &str = "DELETE FROM api_idempotency \
             WHERE token_id = $1 AND idempotency_key = $2 AND status IS NULL";
        dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(token_id).bind(key).execute(pool).await?;
        });
        Ok(())
    }

    /// Deletes keys begun before `before` (an index range); how many.
    pub async fn sweep_idempotency(self, before: Ts) -> StoreResult<u64> {
        const SQL: &str = "DELETE FROM api_idempotency WHERE started_at < $1";
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(before).execute(pool).await?.rows_affected()
        });
        Ok(done)
    }
}
