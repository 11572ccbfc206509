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
use crate::facets::Reconcile;
use crate::{
    StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::Store,
    ts::Ts,
};

/// A claim as the reconciliation read it.
#[derive(Debug, Clone)]
struct SeenClaim {
    key: String,
    status: ClaimStatus,
    version: i64,
    provider_ref: Option<String>,
    /// When its status last changed (for `unknown`: when its last attempt
    /// became unknown).
    status_at: DateTime<Utc>,
}

/// A claim the export holds, with its best record.
#[derive(Debug)]
struct Matched {
    claim: SeenClaim,
    record: ProviderRecord,
}

/// One row to keep.
#[derive(Debug)]
pub(super) struct NewRow {
    pub(super) class: ReconcileClass,
    pub(super) line: Option<usize>,
    pub(super) key: Option<String>,
    pub(super) claim: Option<(ClaimStatus, i64)>,
    pub(super) provider_ref: Option<String>,
    pub(super) provider: Option<(ProviderStatus, DateTime<Utc>)>,
    pub(super) note: Option<String>,
    /// Shown, but not taken by an apply: the export cannot prove it.
    pub(super) held: bool,
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
            held: false,
        }
    }

    /// Shown, but held back from an apply, and why.
    fn held(mut self, why: &str) -> Self {
        self.held = true;
        self.note = Some(match self.note.take() {
            Some(note) => format!("{note}; held back: {why}"),
            None => format!("held back: {why}"),
        });
        self
    }

    fn noting(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

/// A reconciliation being read: `feed` it the export's records and bad
/// lines as they arrive, then `finish` it.
#[derive(Debug)]
pub struct Reconciler<'s> {
    pub(super) store: &'s Store,
    pub(super) consumer: ConsumerName,
    pub(super) latency_seconds: i64,
    pub(super) records: i64,
    pub(super) bad_lines: i64,
    pub(super) bad_sample: Vec<String>,
    span: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// When the export was taken, if its taker says: it covers every call
    /// up to then, though its last record may be older.
    covers_until: Option<DateTime<Utc>>,
    matched: HashMap<String, Matched>,
    /// Accepted records no claim holds, by reference (else key).
    unclaimed: HashMap<String, ProviderRecord>,
    /// Each reference's key, to find one reference on two keys.
    reference_keys: HashMap<String, String>,
    pub(super) shared: Vec<NewRow>,
    shared_refs: HashSet<String>,
    /// Keys a record names beside the claim it matched by reference: the
    /// export speaks of them too.
    also_named: HashSet<String>,
    /// Records that name no key and match no claim: they may be any
    /// unknown claim's call.
    unmatched_without_key: i64,
}

impl<'s> Reconcile<'s> {
    /// A reconciliation of `consumer`'s claims against a provider's export,
    /// whose records show a call at most `latency_seconds` after it.
    pub fn reconciler(self, consumer: ConsumerName, latency_seconds: i64) -> Reconciler<'s> {
        Reconciler {
            store: self.store(),
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
            also_named: HashSet::new(),
            unmatched_without_key: 0,
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
    pub(super) fn span(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        self.span
            .map(|(from, to)| (from, self.covers_until.map_or(to, |until| to.max(until))))
    }

    /// The calls the export certainly covers: from its first record to its
    /// end, each moved the latency bound inwards (the provider may show a
    /// call up to that long before or after Idem recorded its state).
    fn window(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let (from, to) = self.span()?;
        let bound = chrono::TimeDelta::try_seconds(self.latency_seconds)?;
        let (from, until) = (
            from.checked_add_signed(bound)?,
            to.checked_sub_signed(bound)?,
        );
        (from <= until).then_some((from, until))
    }

    /// Why an unknown claim the export has no record of cannot be called
    /// absent, if it cannot: a record that could not be read, or one that
    /// names no key and matches no claim, may be its call.
    fn doubt(&self) -> Option<String> {
        match (self.bad_lines, self.unmatched_without_key) {
            (0, 0) => None,
            (0, 1) => Some("a record names no key and matches no claim".into()),
            (0, n) => Some(format!("{n} records name no key and match no claim")),
            (1, _) => Some("a line of the export could not be read".into()),
            (n, _) => Some(format!("{n} lines of the export could not be read")),
        }
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
        if let (Some(claim), Some(k)) = (claim, &record.key)
            && claim.key != k.as_str()
        {
            self.also_named.insert(k.as_str().to_owned());
        }
        if claim.is_none() && record.key.is_none() {
            self.unmatched_without_key += 1;
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
            "SELECT idempotency_key, status, version, provider_ref, status_at FROM claims \
             WHERE consumer = {consumer} AND {column} IN ({})",
            list.join(", ")
        ));
        self.store.seen_claims(&sql).await
    }

    /// The claims the export should hold and does not: unknown since, or
    /// sent at, a time within [`Self::window`] (an unknown claim also
    /// first delivered within it, so no earlier attempt falls outside).
    /// At most [`super::ROWS_KEPT_MAX`] + 1 of each kind are read.
    pub(super) async fn missing(&self) -> StoreResult<Vec<NewRow>> {
        let Some((from, until)) = self.window() else {
            return Ok(Vec::new());
        };
        let (from, until) = (Ts::from(from), Ts::from(until));
        let ranges = [
            ("status = 'unknown'", "status_at", true),
            (
                "provider_ref IS NOT NULL AND status = 'sent'",
                "outcome_at",
                false,
            ),
            (
                "status = 'sent' AND provider_ref IS NULL",
                "status_at",
                false,
            ),
        ];
        let doubt = self.doubt();
        let mut rows = Vec::new();
        for (condition, column, first_within) in ranges {
            let mut sql = Sql::default();
            let (lo, hi) = (sql.param(from), sql.param(until));
            let consumer = sql.param(self.consumer.as_str());
            let limit = sql.param(super::ROWS_KEPT_MAX as i64 + 1);
            let first = if first_within {
                format!(" AND first_delivery_at >= {lo}")
            } else {
                String::new()
            };
            sql.push(&format!(
                "SELECT idempotency_key, status, version, provider_ref, status_at FROM claims \
                 WHERE {condition} AND {column} >= {lo} AND {column} <= {hi}{first} \
                 AND consumer = {consumer} ORDER BY {column}, idempotency_key LIMIT {limit}"
            ));
            for claim in self.store.seen_claims(&sql).await? {
                if self.matched.contains_key(&claim.key) || self.also_named.contains(&claim.key) {
                    continue;
                }
                let row = match claim.status {
                    ClaimStatus::Unknown => {
                        let row = NewRow::of(ReconcileClass::UnknownAbsent, Some(&claim), None)
                            .noting("no record there");
                        match &doubt {
                            Some(why) => row.held(why),
                            None => row,
                        }
                    }
                    _ => NewRow::of(ReconcileClass::SentAbsent, Some(&claim), None)
                        .noting("no record there"),
                };
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// What each matched claim and unclaimed record says, by class.
    pub(super) fn classified(&self) -> Vec<NewRow> {
        let window = self.window();
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
                    let row = NewRow::of(ReconcileClass::UnknownAbsent, claim, record)
                        .noting("failed there");
                    // A failure of an earlier attempt says nothing of the
                    // last one unless the export covers the last one too.
                    match window {
                        Some((from, until)) if (from..=until).contains(&m.claim.status_at) => row,
                        _ => row.held("the export may not cover its last attempt"),
                    }
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
}

impl Store {
    async fn seen_claims(&self, sql: &Sql) -> StoreResult<Vec<SeenClaim>> {
        let rows: Vec<(String, String, i64, Option<String>, Ts)> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        rows.into_iter()
            .map(|(key, status, version, provider_ref, status_at)| {
                Ok(SeenClaim {
                    status_at: status_at.0,
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
}
