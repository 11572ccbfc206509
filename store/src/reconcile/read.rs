//! Reading kept reconciliations: one with its classes and their first
//! rows, the latest few, and those that named a key.

use idem_domain::{
    ClassSummary, ReconcileClass, ReconcileRow, Reconciliation, ReconciliationId, Within,
};

use crate::facets::Reconcile;
use crate::{
    StoreError, StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::{Store, Tx},
    ts::Ts,
};

type RunRow = (
    i64,
    String,
    String,
    Ts,
    String,
    String,
    i64,
    i64,
    i64,
    String,
    Option<Ts>,
    Option<Ts>,
    i64,
    String,
);

const RUN_COLUMNS: &str = "id, consumer, actor, created_at, file_name, file_sha256, file_bytes, records, \
     bad_lines, bad_sample, span_from, span_to, latency_seconds, status_words";

type Row = (
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<Ts>,
    Option<String>,
    Option<i64>,
    bool,
);

const ROW_COLUMNS: &str = "seq, line, idempotency_key, claim_status, version, provider_ref, \
     provider_status, provider_at, note, applied_run, held";

fn contract(e: idem_domain::UnknownValue) -> StoreError {
    StoreError::Contract(e.to_string())
}

fn run(row: RunRow) -> Reconciliation {
    let (id, consumer, actor, created_at, file_name, file_sha256, file_bytes, records, bad_lines) = (
        row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8,
    );
    Reconciliation {
        id,
        consumer,
        actor,
        created_at: created_at.0,
        file_name,
        file_sha256,
        file_bytes,
        records,
        bad_lines,
        bad_sample: row.9.lines().map(str::to_owned).collect(),
        span_from: row.10.map(|t| t.0),
        span_to: row.11.map(|t| t.0),
        latency_seconds: row.12,
        status_words: row.13,
        classes: Vec::new(),
    }
}

fn row(r: Row) -> StoreResult<ReconcileRow> {
    Ok(ReconcileRow {
        seq: r.0,
        line: r.1,
        key: r.2,
        claim_status: r.3.map(|s| s.parse()).transpose().map_err(contract)?,
        version: r.4,
        provider_ref: r.5,
        provider_status: r.6.map(|s| s.parse()).transpose().map_err(contract)?,
        provider_at: r.7.map(|t| t.0),
        note: r.8,
        applied_run: r.9,
        held: r.10,
    })
}

/// The rows of a class an apply takes: not applied yet, a claim read, and
/// to resolve as sent a reference.
const APPLICABLE: &str = "applied_run IS NULL AND NOT held AND idempotency_key IS NOT NULL \
     AND version IS NOT NULL AND (class <> 'unknown-accepted' OR provider_ref IS NOT NULL)";

impl Reconcile<'_> {
    /// Reconciliation `id` with every class, each with its first `sample`
    /// rows, if it is of a consumer `scope` reaches (another's is none).
    pub async fn reconciliation(
        self,
        id: ReconciliationId,
        sample: i64,
        scope: &Within,
    ) -> StoreResult<Option<Reconciliation>> {
        let mut sql = Sql::default();
        let p = sql.param(id.get());
        sql.push(&format!(
            "SELECT {RUN_COLUMNS} FROM reconciliations WHERE id = {p}"
        ));
        sql.and_within(scope, "consumer");
        let found: Option<RunRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_optional(pool).await?
        });
        let Some(found) = found else {
            return Ok(None);
        };
        let mut reconciliation = run(found);
        reconciliation.classes = self.classes(id.get(), sample).await?;
        Ok(Some(reconciliation))
    }

    /// The consumer reconciliation `id` is of, if there is one and `scope`
    /// reaches it (one probe of its primary key: what an apply checks
    /// rights against).
    pub async fn reconciliation_consumer(
        self,
        id: ReconciliationId,
        scope: &Within,
    ) -> StoreResult<Option<String>> {
        let mut sql = Sql::default();
        let p = sql.param(id.get());
        sql.push(&format!(
            "SELECT consumer FROM reconciliations WHERE id = {p}"
        ));
        sql.and_within(scope, "consumer");
        let consumer = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_optional(pool).await?
        });
        Ok(consumer)
    }

    /// The latest `limit` reconciliations of the consumers `within` allows,
    /// newest first, each with its counts (no rows).
    pub async fn reconciliations(
        self,
        within: &Within,
        limit: i64,
    ) -> StoreResult<Vec<Reconciliation>> {
        let mut sql = Sql::default();
        let limit = sql.param(limit);
        let parts = sql.each_consumer(within, "consumer", |_, only| {
            format!(
                "SELECT {RUN_COLUMNS} FROM reconciliations WHERE 1 = 1{only} \
                 ORDER BY id DESC LIMIT {limit}"
            )
        });
        sql.text = format!("SELECT * FROM ({parts}) AS scoped ORDER BY id DESC LIMIT {limit}");
        let rows: Vec<RunRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        let mut out = Vec::with_capacity(rows.len());
        for found in rows {
            let mut reconciliation = run(found);
            reconciliation.classes = self.classes(reconciliation.id, 0).await?;
            out.push(reconciliation);
        }
        Ok(out)
    }

    /// The reconciliations that found `consumer`'s `key`: each one's id and
    /// the class it put the key in, newest first (at most 20).
    pub async fn key_reconciliations(
        self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<Vec<(i64, ReconcileClass, Option<i64>)>> {
        const SQL: &str = "SELECT r.reconciliation_id, r.class, r.applied_run FROM reconciliation_rows r \
             JOIN reconciliations c ON c.id = r.reconciliation_id \
             WHERE r.idempotency_key = $1 AND c.consumer = $2 \
             ORDER BY r.reconciliation_id DESC LIMIT 20";
        let rows: Vec<(i64, String, Option<i64>)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(key).bind(consumer).fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|(id, class, run)| Ok((id, class.parse().map_err(contract)?, run)))
            .collect()
    }
}

impl Store {
    async fn classes(&self, id: i64, sample: i64) -> StoreResult<Vec<ClassSummary>> {
        let counts_sql = format!(
            "SELECT class, COUNT(*), SUM(CASE WHEN {APPLICABLE} THEN 1 ELSE 0 END) \
             FROM reconciliation_rows WHERE reconciliation_id = $1 GROUP BY class"
        );
        let counts: Vec<(String, i64, Option<i64>)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&counts_sql).bind(id).fetch_all(pool).await?
        });
        const RUNS: &str = "SELECT DISTINCT class, applied_run FROM reconciliation_rows \
             WHERE reconciliation_id = $1 AND applied_run IS NOT NULL ORDER BY applied_run";
        let runs: Vec<(String, i64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(RUNS).bind(id).fetch_all(pool).await?
        });
        let rows_sql = format!(
            "SELECT {ROW_COLUMNS} FROM reconciliation_rows WHERE reconciliation_id = $1 AND class = $2 \
             ORDER BY seq LIMIT $3"
        );
        let mut out = Vec::new();
        for class in ReconcileClass::ALL {
            let (count, applicable) = counts
                .iter()
                .find(|(c, _, _)| c == class.as_str())
                .map_or((0, 0), |(_, n, a)| (*n, a.unwrap_or(0)));
            let sample = if count > 0 && sample > 0 {
                let rows: Vec<Row> = dispatch!(&self.pools, pool => {
                    sqlx::query_as(&rows_sql).bind(id).bind(class.as_str()).bind(sample).fetch_all(pool).await?
                });
                rows.into_iter().map(row).collect::<StoreResult<_>>()?
            } else {
                Vec::new()
            };
            out.push(ClassSummary {
                class: *class,
                count,
                to_apply: if class.resolves_as().is_some() {
                    applicable
                } else {
                    0
                },
                applied_runs: runs
                    .iter()
                    .filter(|(c, _)| c == class.as_str())
                    .map(|(_, run)| *run)
                    .collect(),
                sample,
            });
        }
        Ok(out)
    }
}

/// A row an apply takes: its seq, key, version and reference.
pub(crate) type ApplicableRow = (i64, String, i64, Option<String>);

impl Tx {
    /// The consumer of reconciliation `id`, locking it so two applies of
    /// one class take turns.
    pub(crate) async fn lock_reconciliation(&mut self, id: i64) -> StoreResult<Option<String>> {
        let sql = self.locking("SELECT consumer FROM reconciliations WHERE id = $1");
        let consumer = dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(&sql).bind(id).fetch_optional(&mut **tx).await?
        });
        Ok(consumer)
    }

    /// The first `limit` rows of `class` an apply would take now.
    pub(crate) async fn applicable_rows(
        &mut self,
        id: i64,
        class: ReconcileClass,
        limit: i64,
    ) -> StoreResult<Vec<ApplicableRow>> {
        let sql = format!(
            "SELECT seq, idempotency_key, version, provider_ref FROM reconciliation_rows \
             WHERE reconciliation_id = $1 AND class = $2 AND {APPLICABLE} ORDER BY seq LIMIT $3"
        );
        let rows = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(&sql).bind(id).bind(class.as_str()).bind(limit).fetch_all(&mut **tx).await?
        });
        Ok(rows)
    }

    /// Marks rows `seqs` of `class` applied by run `run`.
    pub(crate) async fn mark_applied(
        &mut self,
        id: i64,
        class: ReconcileClass,
        seqs: &[i64],
        run: i64,
    ) -> StoreResult<()> {
        const SQL: &str = "UPDATE reconciliation_rows SET applied_run = $1 \
             WHERE reconciliation_id = $2 AND class = $3 AND seq = $4";
        for seq in seqs {
            dispatch!(&mut self.inner, tx => {
                sqlx::query(SQL).bind(run).bind(id).bind(class.as_str()).bind(seq).execute(&mut **tx).await?;
            });
        }
        Ok(())
    }
}

impl Reconcile<'_> {
    /// Whether `consumer` has any claim (one probe of the primary key).
    pub async fn has_claims_of(self, consumer: &str) -> StoreResult<bool> {
        const SQL: &str = "SELECT 1 FROM claims WHERE consumer = $1 LIMIT 1";
        let found: Option<i32> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(consumer).fetch_optional(pool).await?
        });
        Ok(found.is_some())
    }

    /// `consumer`'s claims last delivered in `[from, to]`, newest first, at
    /// most `limit`: what a provider's export of that span speaks for (the
    /// demo's email provider writes its message log from them). A range of
    /// `claims_by_activity`.
    pub async fn claims_delivered_between(
        self,
        consumer: &str,
        from: Ts,
        to: Ts,
        limit: i64,
    ) -> StoreResult<Vec<idem_domain::Claim>> {
        let sql = concat!(
            "SELECT ",
            crate::rows::claim_columns!(),
            " FROM claims WHERE last_delivery_at >= $1 AND last_delivery_at <= $2 AND consumer = $3 \
             ORDER BY last_delivery_at DESC LIMIT $4"
        );
        let rows: Vec<crate::rows::ClaimRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(sql).bind(from).bind(to).bind(consumer).bind(limit).fetch_all(pool).await?
        });
        crate::rows::convert(rows)
    }
}
