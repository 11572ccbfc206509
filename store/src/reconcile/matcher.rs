//! Matching an export's records with the claims, a batch at a time, and
//! keeping what differs. A record matches the claim holding its reference,
//! else the claim of its key. A claim the export shows several times (a
//! message log's events) counts as accepted if any record accepted it.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use idem_domain::{
    BadLine, ClaimStatus, ConsumerName, ProviderRecord, ProviderStatus, ReconcileClass,
};

use super::{BAD_LINES_KEPT, LOOKUP_BATCH};
use crate::{
    Actor, NewAuditEntry, StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::{Store, Tx},
    ts::Ts,
};

/// A claim as the reconciliation read it.
#[derive(Debug, Clone)]
struct SeenClaim {
    key: String,
    status: ClaimStatus,
    version: i64,
    provider_ref: Option<String>,
}

/// A claim the export holds, with its best record.
#[derive(Debug)]
struct Matched {
    claim: SeenClaim,
    record: ProviderRecord,
}

/// One row to keep.
#[derive(Debug)]
struct NewRow {
    class: ReconcileClass,
    line: Option<usize>,
    key: Option<String>,
    claim: Option<(ClaimStatus, i64)>,
    provider_ref: Option<String>,
    provider: Option<(ProviderStatus, DateTime<Utc>)>,
    note: Option<String>,
}

impl NewRow {
    fn of(
        class: ReconcileClass,
        claim: Option<&SeenClaim>,
        record: Option<&ProviderRecord>,
    ) -> Self {
        NewRow {
            class,
            line: record.map(|r| r.line),
            key: claim
                .map(|c| c.key.clone())
                .or_else(|| record.and_then(|r| r.key.as_ref().map(|k| k.as_str().to_owned()))),
            claim: claim.map(|c| (c.status, c.version)),
            provider_ref: record
                .and_then(|r| r.reference.clone())
                .or_else(|| claim.and_then(|c| c.provider_ref.clone())),
            provider: record.map(|r| (r.status, r.at)),
            note: None,
        }
    }

    fn noting(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// What the reconciliation is kept as, besides what it found.
#[derive(Debug, Clone, Copy)]
pub struct NewReconciliation<'a> {
    /// The form's action id, or one derived from the API's Idempotency-Key.
    pub action_id: &'a str,
    pub actor: Actor<'a>,
    pub file_name: &'a str,
    pub file_sha256: &'a str,
    pub file_bytes: i64,
    pub status_words: &'a str,
}

/// What keeping a reconciliation answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciled {
    /// Kept as this one (or, sent again, the one this action id kept).
    Kept { id: i64 },
    /// The action id kept a reconciliation of another file or by someone
    /// else: nothing was kept.
    FormReused { id: i64 },
}

/// A reconciliation being read: `feed` it the export's records and bad
/// lines as they arrive, then `finish` it.
#[derive(Debug)]
pub struct Reconciler<'s> {
    store: &'s Store,
    consumer: ConsumerName,
    latency_seconds: i64,
    records: i64,
    bad_lines: i64,
    bad_sample: Vec<String>,
    span: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// When the export was taken, if its taker says: it covers every call
    /// up to then, though its last record may be older.
    covers_until: Option<DateTime<Utc>>,
    matched: HashMap<String, Matched>,
    /// Accepted records no claim holds, by reference (else key).
    unclaimed: HashMap<String, ProviderRecord>,
    /// Each reference's key, to find one reference on two keys.
    reference_keys: HashMap<String, String>,
    shared: Vec<NewRow>,
    shared_refs: HashSet<String>,
}

impl Store {
    /// A reconciliation of `consumer`'s claims against a provider's export,
    /// whose records show a call at most `latency_seconds` after it.
    pub fn reconciler(&self, consumer: ConsumerName, latency_seconds: i64) -> Reconciler<'_> {
        Reconciler {
            store: self,
            consumer,
            latency_seconds: latency_seconds.max(0),
            records: 0,
            bad_lines: 0,
            bad_sample: Vec::new(),
            span: None,
            covers_until: None,
            matched: HashMap::new(),
            unclaimed: HashMap::new(),
            reference_keys: HashMap::new(),
            shared: Vec::new(),
            shared_refs: HashSet::new(),
        }
    }
}

impl Reconciler<'_> {
    /// The export covers every call up to `at` (when it was taken), past
    /// its last record.
    pub fn covering_until(mut self, at: DateTime<Utc>) -> Self {
        self.covers_until = Some(at);
        self
    }

    /// The export's span: its first record to its last, or to when it was
    /// taken if that is later.
    fn span(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        self.span
            .map(|(from, to)| (from, self.covers_until.map_or(to, |until| to.max(until))))
    }

    /// Notes a line that could not be read.
    pub fn bad_line(&mut self, bad: &BadLine) {
        self.bad_lines += 1;
        if self.bad_sample.len() < BAD_LINES_KEPT {
            self.bad_sample.push(bad.to_string());
        }
    }

    /// Matches `records` with the claims (looked up [`LOOKUP_BATCH`] at a time).
    pub async fn feed(&mut self, records: &[ProviderRecord]) -> StoreResult<()> {
        for batch in records.chunks(LOOKUP_BATCH) {
            let refs: Vec<&str> = batch
                .iter()
                .filter_map(|r| r.reference.as_deref())
                .collect();
            let keys: Vec<&str> = batch
                .iter()
                .filter_map(|r| r.key.as_ref().map(|k| k.as_str()))
                .collect();
            let by_ref = self.claims_where("provider_ref", &refs).await?;
            let by_key = self.claims_where("idempotency_key", &keys).await?;
            let by_ref: HashMap<&str, &SeenClaim> = by_ref
                .iter()
                .filter_map(|c| c.provider_ref.as_deref().map(|r| (r, c)))
                .collect();
            let by_key: HashMap<&str, &SeenClaim> =
                by_key.iter().map(|c| (c.key.as_str(), c)).collect();
            for record in batch {
                let claim = record
                    .reference
                    .as_deref()
                    .and_then(|r| by_ref.get(r))
                    .or_else(|| record.key.as_ref().and_then(|k| by_key.get(k.as_str())))
                    .copied();
                self.take(record, claim);
            }
        }
        Ok(())
    }

    fn take(&mut self, record: &ProviderRecord, claim: Option<&SeenClaim>) {
        self.records += 1;
        self.span = Some(match self.span {
            None => (record.at, record.at),
            Some((from, to)) => (from.min(record.at), to.max(record.at)),
        });
        let key = claim
            .map(|c| c.key.clone())
            .or_else(|| record.key.as_ref().map(|k| k.as_str().to_owned()));
        if let Some(reference) = &record.reference {
            // The claim's key, and the export's own if it names another.
            let mut keys: Vec<&str> = claim.map(|c| c.key.as_str()).into_iter().collect();
            if let Some(k) = record
                .key
                .as_ref()
                .map(|k| k.as_str())
                .filter(|k| !keys.contains(k))
            {
                keys.push(k);
            }
            for k in keys {
                let first = self
                    .reference_keys
                    .entry(reference.clone())
                    .or_insert_with(|| k.to_owned());
                if first != k && self.shared_refs.insert(reference.clone()) {
                    let mut row = NewRow::of(ReconcileClass::SharedReference, claim, Some(record))
                        .noting(format!("also on the key “{first}”"));
                    row.key = Some(k.to_owned());
                    self.shared.push(row);
                }
            }
        }
        match claim {
            Some(claim) => {
                let better = |seen: &Matched| {
                    seen.record.status == ProviderStatus::Failed
                        && record.status == ProviderStatus::Accepted
                };
                match self.matched.get_mut(&claim.key) {
                    Some(seen) if better(seen) => seen.record = record.clone(),
                    Some(_) => {}
                    None => {
                        self.matched.insert(
                            claim.key.clone(),
                            Matched {
                                claim: claim.clone(),
                                record: record.clone(),
                            },
                        );
                    }
                }
            }
            None if record.status == ProviderStatus::Accepted => {
                let id = record.reference.clone().or(key).unwrap_or_default();
                self.unclaimed.entry(id).or_insert_with(|| record.clone());
            }
            None => {}
        }
    }

    /// The consumer's claims whose `column` is one of `values`.
    async fn claims_where(&self, column: &str, values: &[&str]) -> StoreResult<Vec<SeenClaim>> {
        if values.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::default();
        let consumer = sql.param(self.consumer.as_str());
        let list: Vec<String> = values.iter().map(|v| sql.param(*v)).collect();
        sql.push(&format!(
            "SELECT idempotency_key, status, version, provider_ref FROM claims \
             WHERE consumer = {consumer} AND {column} IN ({})",
            list.join(", ")
        ));
        self.store.seen_claims(&sql).await
    }

    /// The claims the export should hold and does not: unknown since, or
    /// sent at, a time between the export's first record and its last,
    /// each moved the latency bound inwards.
    async fn missing(&self) -> StoreResult<Vec<NewRow>> {
        let Some((from, to)) = self.span() else {
            return Ok(Vec::new());
        };
        // Only calls the export certainly covers are judged: the provider
        // may show a call up to the latency bound before or after Idem
        // recorded its state, at either end of the export.
        let bound = chrono::TimeDelta::seconds(self.latency_seconds);
        let (from, until) = (from + bound, to - bound);
        if until < from {
            return Ok(Vec::new());
        }
        let (from, until) = (Ts::from(from), Ts::from(until));
        let ranges = [
            ("status = 'unknown'", "status_at"),
            ("provider_ref IS NOT NULL AND status = 'sent'", "outcome_at"),
            ("status = 'sent' AND provider_ref IS NULL", "status_at"),
        ];
        let mut rows = Vec::new();
        for (condition, column) in ranges {
            let mut sql = Sql::default();
            let (lo, hi) = (sql.param(from), sql.param(until));
            let consumer = sql.param(self.consumer.as_str());
            sql.push(&format!(
                "SELECT idempotency_key, status, version, provider_ref FROM claims \
                 WHERE {condition} AND {column} >= {lo} AND {column} <= {hi} \
                 AND consumer = {consumer} ORDER BY {column}, idempotency_key"
            ));
            for claim in self.store.seen_claims(&sql).await? {
                if self.matched.contains_key(&claim.key) {
                    continue;
                }
                let (class, note) = match claim.status {
                    ClaimStatus::Unknown => (ReconcileClass::UnknownAbsent, "no record there"),
                    _ => (ReconcileClass::SentAbsent, "no record there"),
                };
                rows.push(NewRow::of(class, Some(&claim), None).noting(note));
            }
        }
        Ok(rows)
    }

    /// What each matched claim and unclaimed record says, by class.
    fn classified(&self) -> Vec<NewRow> {
        let mut rows = Vec::new();
        let mut matched: Vec<&Matched> = self.matched.values().collect();
        matched.sort_by_key(|m| m.record.line);
        for m in matched {
            let (claim, record) = (Some(&m.claim), Some(&m.record));
            let accepted = m.record.status == ProviderStatus::Accepted;
            let row = match (m.claim.status, accepted) {
                (ClaimStatus::Unknown, true) => {
                    NewRow::of(ReconcileClass::UnknownAccepted, claim, record)
                }
                (ClaimStatus::Unknown, false) => {
                    NewRow::of(ReconcileClass::UnknownAbsent, claim, record).noting("failed there")
                }
                (ClaimStatus::Sent, false) => {
                    NewRow::of(ReconcileClass::SentAbsent, claim, record).noting("failed there")
                }
                (ClaimStatus::Failed, true) => {
                    NewRow::of(ReconcileClass::FailedAccepted, claim, record)
                }
                (ClaimStatus::Pending, true) => {
                    NewRow::of(ReconcileClass::AcceptedUnclaimed, claim, record)
                        .noting("pending here")
                }
                _ => continue,
            };
            rows.push(row);
        }
        let mut unclaimed: Vec<&ProviderRecord> = self.unclaimed.values().collect();
        unclaimed.sort_by_key(|r| r.line);
        for record in unclaimed {
            rows.push(
                NewRow::of(ReconcileClass::AcceptedUnclaimed, None, Some(record))
                    .noting("no claim here"),
            );
        }
        rows
    }

    /// Keeps the reconciliation and what it found, with its audit row, in
    /// one transaction.
    pub async fn finish(self, new: &NewReconciliation<'_>) -> StoreResult<Reconciled> {
        if let Some(first) = self.store.reconciliation_by_action(new).await? {
            return Ok(first);
        }
        let mut rows = self.classified();
        rows.extend(self.missing().await?);
        rows.extend(self.shared.iter().map(|r| NewRow {
            class: r.class,
            line: r.line,
            key: r.key.clone(),
            claim: r.claim,
            provider_ref: r.provider_ref.clone(),
            provider: r.provider,
            note: r.note.clone(),
        }));
        rows.sort_by_key(|r| ReconcileClass::ALL.iter().position(|c| *c == r.class));
        let mut tx = self.store.begin().await?;
        match self.keep(&mut tx, new, &rows).await {
            Ok(id) => {
                tx.commit().await?;
                Ok(Reconciled::Kept { id })
            }
            Err(err) if err.is_unique_violation() => {
                let _ = tx.rollback().await;
                Ok(self.store.reconciliation_by_action(new).await?.ok_or(err)?)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }

    async fn keep(
        &self,
        tx: &mut Tx,
        new: &NewReconciliation<'_>,
        rows: &[NewRow],
    ) -> StoreResult<i64> {
        let mut counts: Vec<String> = Vec::new();
        for class in ReconcileClass::ALL {
            let n = rows.iter().filter(|r| r.class == *class).count();
            if n > 0 {
                counts.push(format!("{n} {}", class.title().to_lowercase()));
            }
        }
        let summary = format!(
            "{} records of “{}” ({} bad lines): {}",
            self.records,
            new.file_name,
            self.bad_lines,
            if counts.is_empty() {
                "nothing differs".to_owned()
            } else {
                counts.join(", ")
            }
        );
        let now = Ts::now();
        let audit_id = tx
            .append_audit_at(
                &NewAuditEntry {
                    action_id: Some(new.action_id),
                    actor: new.actor.name,
                    actor_role: new.actor.role,
                    action: "reconcile",
                    consumer: Some(self.consumer.as_str()),
                    key: None,
                    target: None,
                    state_before: None,
                    state_after: Some(&summary),
                    reason: None,
                    result: "ok",
                    client_addr: new.actor.client_addr,
                    recovery_seconds: None,
                },
                now,
            )
            .await?;
        const RUN: &str = "INSERT INTO reconciliations (action_id, consumer, actor, created_at, file_name, \
             file_sha256, file_bytes, records, bad_lines, bad_sample, span_from, span_to, latency_seconds, \
             status_words, audit_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
             RETURNING id";
        let span_from = self.span().map(|(from, _)| Ts::from(from));
        let span_to = self.span().map(|(_, to)| Ts::from(to));
        let bad_sample = self.bad_sample.join("\n");
        let id: i64 = dispatch!(&mut tx.inner, tx => {
            sqlx::query_scalar(RUN).bind(new.action_id).bind(self.consumer.as_str()).bind(new.actor.name)
                .bind(now).bind(new.file_name).bind(new.file_sha256).bind(new.file_bytes)
                .bind(self.records).bind(self.bad_lines).bind(&bad_sample).bind(span_from).bind(span_to)
                .bind(self.latency_seconds).bind(new.status_words).bind(audit_id)
                .fetch_one(&mut **tx).await?
        });
        const ROW: &str = "INSERT INTO reconciliation_rows (reconciliation_id, class, seq, line, \
             idempotency_key, claim_status, version, provider_ref, provider_status, provider_at, note) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
        for (seq, row) in rows.iter().enumerate() {
            let line = row.line.map(|l| l as i64);
            let (claim_status, version) = row
                .claim
                .map_or((None, None), |(s, v)| (Some(s.as_str()), Some(v)));
            let (provider_status, provider_at) = row.provider.map_or((None, None), |(s, at)| {
                (Some(s.as_str()), Some(Ts::from(at)))
            });
            dispatch!(&mut tx.inner, tx => {
                sqlx::query(ROW).bind(id).bind(row.class.as_str()).bind(seq as i64).bind(line)
                    .bind(row.key.as_deref()).bind(claim_status).bind(version).bind(row.provider_ref.as_deref())
                    .bind(provider_status).bind(provider_at).bind(row.note.as_deref())
                    .execute(&mut **tx).await?;
            });
        }
        Ok(id)
    }
}

impl Store {
    async fn seen_claims(&self, sql: &Sql) -> StoreResult<Vec<SeenClaim>> {
        let rows: Vec<(String, String, i64, Option<String>)> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|(key, status, version, provider_ref)| {
                Ok(SeenClaim {
                    key,
                    status: status.parse().map_err(|e: idem_domain::UnknownValue| {
                        crate::StoreError::Contract(e.to_string())
                    })?,
                    version,
                    provider_ref,
                })
            })
            .collect()
    }

    /// The reconciliation `new`'s action id kept, if any.
    async fn reconciliation_by_action(
        &self,
        new: &NewReconciliation<'_>,
    ) -> StoreResult<Option<Reconciled>> {
        const SQL: &str = "SELECT id, actor, file_sha256 FROM reconciliations WHERE action_id = $1";
        let row: Option<(i64, String, String)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(new.action_id).fetch_optional(pool).await?
        });
        Ok(row.map(|(id, actor, sha)| {
            if actor == new.actor.name && sha == new.file_sha256 {
                Reconciled::Kept { id }
            } else {
                Reconciled::FormReused { id }
            }
        }))
    }
}
