//! Keeping what a reconciliation found: the run, its rows and its audit
//! row in one transaction; the same action id sent again answers the
//! first reconciliation (`FormReused` if it was of another file).

use idem_domain::{AuditAction, AuditResult, AuditState, ReconcileClass, ReconciliationId};

use super::{
    ROWS_KEPT_MAX,
    matcher::{NewRow, Reconciler},
};
use crate::{Actor, NewAuditEntry, StoreResult, dialect::dispatch, store::Tx, ts::Ts};

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
    Kept { id: ReconciliationId },
    /// The action id kept a reconciliation of another file, consumer or
    /// latency bound, or by someone else: nothing was kept. Which one is
    /// said only to the person who made it.
    FormReused { id: Option<ReconciliationId> },
    /// More rows differ than [`ROWS_KEPT_MAX`]: nothing was kept.
    TooManyDifferences { rows: usize },
}

impl Reconciler<'_> {
    /// Keeps the reconciliation and what it found, with its audit row, in
    /// one transaction.
    pub async fn finish(self, new: &NewReconciliation<'_>) -> StoreResult<Reconciled> {
        if let Some(first) = self.reconciliation_by_action(new).await? {
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
            held: r.held,
        }));
        if rows.len() > ROWS_KEPT_MAX {
            return Ok(Reconciled::TooManyDifferences { rows: rows.len() });
        }
        rows.sort_by_key(|r| ReconcileClass::ALL.iter().position(|c| *c == r.class));
        let mut tx = self.store.begin().await?;
        match self.keep(&mut tx, new, &rows).await {
            Ok(id) => {
                tx.commit().await?;
                Ok(Reconciled::Kept {
                    id: ReconciliationId::of_row(id),
                })
            }
            Err(err) if err.is_unique_violation() => {
                let _ = tx.rollback().await;
                Ok(self.reconciliation_by_action(new).await?.ok_or(err)?)
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
                    consumer: Some(self.consumer.as_str()),
                    state_after: Some(AuditState::Words(summary)),
                    client_addr: new.actor.client_addr,
                    ..NewAuditEntry::new(
                        new.actor.name,
                        new.actor.role,
                        AuditAction::Reconcile,
                        AuditResult::Ok,
                    )
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
             idempotency_key, claim_status, version, provider_ref, provider_status, provider_at, note, held) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
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
                    .bind(provider_status).bind(provider_at).bind(row.note.as_deref()).bind(row.held)
                    .execute(&mut **tx).await?;
            });
        }
        Ok(id)
    }
}

impl Reconciler<'_> {
    /// The reconciliation `new`'s action id kept, if any: the same one for
    /// the same person, file, consumer and latency bound.
    async fn reconciliation_by_action(
        &self,
        new: &NewReconciliation<'_>,
    ) -> StoreResult<Option<Reconciled>> {
        const SQL: &str = "SELECT id, actor, file_sha256, consumer, latency_seconds FROM reconciliations \
             WHERE action_id = $1";
        let row: Option<(i64, String, String, String, i64)> = dispatch!(&self.store.pools, pool => {
            sqlx::query_as(SQL).bind(new.action_id).fetch_optional(pool).await?
        });
        Ok(row.map(|(id, actor, sha, consumer, latency)| {
            let same = actor == new.actor.name
                && sha == new.file_sha256
                && consumer == self.consumer.as_str()
                && latency == self.latency_seconds;
            let id = ReconciliationId::of_row(id);
            if same {
                Reconciled::Kept { id }
            } else {
                Reconciled::FormReused {
                    id: (actor == new.actor.name).then_some(id),
                }
            }
        }))
    }
}
