//! Appending to the audit log (it refuses updates and deletes by trigger).

use crate::{
    StoreResult,
    dialect::dispatch,
    store::{Store, Tx},
    ts::Ts,
};

/// One entry to append.
#[derive(Debug, Clone, Default)]
pub struct NewAuditEntry<'a> {
    /// Unique: a resubmitted action carries the same id.
    pub action_id: Option<&'a str>,
    pub actor: &'a str,
    pub actor_role: &'a str,
    pub action: &'a str,
    pub consumer: Option<&'a str>,
    pub key: Option<&'a str>,
    pub target: Option<&'a str>,
    pub state_before: Option<&'a str>,
    pub state_after: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub result: &'a str,
    pub client_addr: Option<&'a str>,
    pub recovery_seconds: Option<f64>,
}

const INSERT: &str = "INSERT INTO audit_log (action_id, at, actor, actor_role, action, consumer, \
     idempotency_key, target, state_before, state_after, reason, result, client_addr, recovery_seconds) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id";

macro_rules! bind_entry {
    ($query:expr, $e:expr, $at:expr) => {
        $query
            .bind($e.action_id)
            .bind($at)
            .bind($e.actor)
            .bind($e.actor_role)
            .bind($e.action)
            .bind($e.consumer)
            .bind($e.key)
            .bind($e.target)
            .bind($e.state_before)
            .bind($e.state_after)
            .bind($e.reason)
            .bind($e.result)
            .bind($e.client_addr)
            .bind($e.recovery_seconds)
    };
}

impl Store {
    /// Appends one entry on its own (sign-ins, denials); returns its id.
    pub async fn append_audit(&self, entry: &NewAuditEntry<'_>) -> StoreResult<i64> {
        let at = Ts::now();
        let id: i64 = dispatch!(&self.pools, pool => {
            bind_entry!(sqlx::query_scalar(INSERT), entry, at).fetch_one(pool).await?
        });
        Ok(id)
    }
}

impl Tx {
    /// Appends one entry in this transaction: it commits with the action's effect or not at all.
    pub async fn append_audit(&mut self, entry: &NewAuditEntry<'_>) -> StoreResult<i64> {
        let at = Ts::now();
        let id: i64 = dispatch!(&mut self.inner, tx => {
            bind_entry!(sqlx::query_scalar(INSERT), entry, at).fetch_one(&mut **tx).await?
        });
        Ok(id)
    }
}
