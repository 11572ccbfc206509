//! Appending to the audit log (it refuses updates and deletes by trigger),
//! and reading it back newest first, filtered.

use idem_domain::{AuditAction, AuditEntry, AuditResult, AuditState, Page};

use crate::facets::Audit;
use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    rows::{AuditRow, audit_columns, convert},
    sql::{Sql, bind_all},
    store::Tx,
    ts::Ts,
};

/// One entry to append: the action and its result are the vocabulary's
/// (`idem_domain::AuditAction`, `AuditResult`), the states typed, each
/// written as its one spelling.
#[derive(Debug, Clone)]
pub struct NewAuditEntry<'a> {
    /// Unique: a resubmitted action carries the same id.
    pub action_id: Option<&'a str>,
    pub actor: &'a str,
    pub actor_role: &'a str,
    pub action: AuditAction,
    pub consumer: Option<&'a str>,
    pub key: Option<&'a str>,
    pub target: Option<&'a str>,
    pub state_before: Option<AuditState>,
    pub state_after: Option<AuditState>,
    pub reason: Option<&'a str>,
    pub result: AuditResult,
    pub client_addr: Option<&'a str>,
    pub recovery_seconds: Option<f64>,
}

impl<'a> NewAuditEntry<'a> {
    /// `actor` (with `actor_role`) did `action`, which ended `result`;
    /// nothing else said yet.
    pub fn new(
        actor: &'a str,
        actor_role: &'a str,
        action: AuditAction,
        result: AuditResult,
    ) -> Self {
        NewAuditEntry {
            action_id: None,
            actor,
            actor_role,
            action,
            consumer: None,
            key: None,
            target: None,
            state_before: None,
            state_after: None,
            reason: None,
            result,
            client_addr: None,
            recovery_seconds: None,
        }
    }
}

/// `action IN ('resolve:sent', …)`: the audit rows that resolved an unknown
/// outcome, spelled from the vocabulary (literals Idem chose, never input).
pub(crate) fn resolutions(column: &str) -> String {
    let actions: Vec<String> = AuditAction::ALL
        .iter()
        .filter(|a| a.resolves_unknown())
        .map(|a| format!("'{}'", a.as_str()))
        .collect();
    format!("{column} IN ({})", actions.join(", "))
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
            .bind($e.action.as_str())
            .bind($e.consumer)
            .bind($e.key)
            .bind($e.target)
            .bind($e.state_before.as_ref().map(ToString::to_string))
            .bind($e.state_after.as_ref().map(ToString::to_string))
            .bind($e.reason)
            .bind($e.result.as_str())
            .bind($e.client_addr)
            .bind($e.recovery_seconds)
    };
}

/// Which audit entries to list: each filter that is set must match exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<AuditAction>,
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

impl Audit<'_> {
    /// The audit log, newest first, keyset-paginated. Each filter has an
    /// index that leads with it and continues in time order (the unfiltered
    /// list reads `audit_log_by_time` backwards; a reader limited to some
    /// consumers reads each one's part of `audit_log_by_consumer`), so a
    /// page costs a page; with two or more filters, one index is read and
    /// the others filter its rows.
    pub async fn audit_log(
        self,
        filter: &AuditFilter,
        page: &PageRequest,
    ) -> StoreResult<Page<AuditEntry>> {
        const LIST: &str = "audit_log";
        const NEWEST: &str = "ORDER BY at DESC, id DESC";
        let after = cursor::time_and_id(LIST, page)?;
        let mut sql = Sql::default();
        let limit = sql.param(page.limit + 1);
        let action = filter.action.map(|a| a.as_str().to_owned());
        let parts = sql.each_consumer(&filter.within, "consumer", |sql, only| {
            let mut conditions = vec!["1 = 1".to_owned()];
            if let Some((at, id)) = after {
                let (at, id) = (sql.param(at), sql.param(id));
                conditions.push(format!("(at, id) < ({at}, {id})"));
            }
            let texts = [
                ("actor", &filter.actor),
                ("action", &action),
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
            if filter.recoveries {
                // Literal, so the partial index matches.
                conditions.push("recovery_seconds IS NOT NULL".to_owned());
            }
            format!(
                "SELECT {} FROM audit_log WHERE {}{only} {NEWEST} LIMIT {limit}",
                audit_columns!(),
                conditions.join(" AND ")
            )
        });
        sql.text = format!("SELECT * FROM ({parts}) AS scoped {NEWEST} LIMIT {limit}");
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
    pub async fn append_audit(self, entry: &NewAuditEntry<'_>) -> StoreResult<i64> {
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
