//! Appending to the audit log (it refuses updates and deletes by trigger),
//! and reading it back newest first, filtered.

use idem_domain::{AuditEntry, Page};

use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    rows::{AuditRow, audit_columns, convert},
    sql::{Sql, bind_all},
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

/// Which audit entries to list: each filter that is set must match exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    /// The idempotency key, under any consumer.
    pub key: Option<String>,
    /// Only entries at or after `from` and before `to`.
    pub from: Option<Ts>,
    pub to: Option<Ts>,
    /// Only recoveries: replays and resolutions with the time they took
    /// (a range of `audit_log_recoveries`).
    pub recoveries: bool,
    /// Only entries about these consumers (rights limited to teams: an
    /// entry about no consumer, such as a sign-in, is then left out too).
    pub within: idem_domain::Within,
}

impl Store {
    /// The audit log, newest first, keyset-paginated. Each filter has an
    /// index that leads with it and continues in time order (the unfiltered
    /// list reads `audit_log_by_time` backwards), so a page costs a page;
    /// with two or more filters, one index is read and the others filter its
    /// rows.
    pub async fn audit_log(
        &self,
        filter: &AuditFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<AuditEntry>> {
        const LIST: &str = "audit_log";
        let after = cursor::time_and_id(LIST, page)?;
        let mut sql = Sql::default();
        let mut conditions = Vec::new();
        if let Some((at, id)) = after {
            let (at, id) = (sql.param(at), sql.param(id));
            conditions.push(format!("(at, id) < ({at}, {id})"));
        }
        let texts = [
            ("actor", &filter.actor),
            ("action", &filter.action),
            ("idempotency_key", &filter.key),
        ];
        for (column, value) in texts {
            if let Some(value) = value {
                let p = sql.param(value.as_str());
                conditions.push(format!("{column} = {p}"));
            }
        }
        if let Some(from) = filter.from {
            conditions.push(format!("at >= {}", sql.param(from)));
        }
        if let Some(to) = filter.to {
            conditions.push(format!("at < {}", sql.param(to)));
        }
        if let Some(within) = sql.within(&filter.within, "consumer") {
            conditions.push(within);
        }
        if filter.recoveries {
            // Literal, so the partial index matches.
            conditions.push("recovery_seconds IS NOT NULL".to_owned());
        }
        sql.push(concat!("SELECT ", audit_columns!(), " FROM audit_log"));
        if !conditions.is_empty() {
            sql.push(" WHERE ");
            sql.push(&conditions.join(" AND "));
        }
        let limit = sql.param(page.limit + 1);
        sql.push(&format!(" ORDER BY at DESC, id DESC LIMIT {limit}"));
        let rows: Vec<AuditRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(paginate(
            convert(rows)?,
            page.limit,
            LIST,
            |e: &AuditEntry| (e.at.timestamp_micros(), e.id),
        ))
    }

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
        self.append_audit_at(entry, Ts::now()).await
    }

    /// [`Tx::append_audit`], for an action taken at `at`.
    pub(crate) async fn append_audit_at(
        &mut self,
        entry: &NewAuditEntry<'_>,
        at: Ts,
    ) -> StoreResult<i64> {
        let id: i64 = dispatch!(&mut self.inner, tx => {
            bind_entry!(sqlx::query_scalar(INSERT), entry, at).fetch_one(&mut **tx).await?
        });
        Ok(id)
    }
}
