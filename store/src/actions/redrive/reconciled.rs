//! Applying a class of a kept reconciliation: a bulk resolve of exactly
//! the rows the reconciliation kept for it (each key at the version it was
//! read at, with the provider's reference), so a key someone changed since
//! the review is skipped by the single resolution's compare-and-set. The
//! rows taken are marked with the run, in the run's own transaction.

use idem_domain::{
    BulkKey, ConsumerName, IdempotencyKey, ReconcileClass, ReconciliationId, ResolveAs,
    action::{ActionId, Reason},
};

use super::{
    Actor, REDRIVE_MAX, RedriveStart, ViaToken,
    bulk::{BulkResolveRequest, start_keys},
    start::{StartBinding, StartIn},
};
use crate::facets::Runs;
use crate::{StoreError, StoreResult, store::Tx};

/// Apply the rows of `class` of reconciliation `reconciliation` an apply
/// would take now — `shown` of them, as the page said.
#[derive(Debug, Clone, Copy)]
pub struct ReconciledResolve<'a> {
    pub reconciliation: ReconciliationId,
    pub class: ReconcileClass,
    /// How many rows the page offered to apply (at most [`REDRIVE_MAX`]).
    pub shown: i64,
    /// Added to each key's audit row after the reconciliation's number.
    pub reason: Option<&'a Reason>,
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    pub rights: Option<&'a idem_domain::Rights>,
    pub via_token: Option<ViaToken<'a>>,
}

impl ReconciledResolve<'_> {
    fn selection(&self) -> String {
        format!(
            "reconciliation #{}: {}",
            self.reconciliation,
            self.class.title().to_lowercase()
        )
    }

    fn offer(&self) -> String {
        format!(
            "reconciliation.{}.{}.{}",
            self.reconciliation, self.class, self.shown
        )
    }
}

impl Runs<'_> {
    /// Starts a bulk resolve of the rows of a reconciliation's class that
    /// are still to apply, if they are as many as the page showed; the
    /// rows are marked with the run.
    pub async fn apply_reconciliation(
        self,
        req: &ReconciledResolve<'_>,
    ) -> StoreResult<RedriveStart> {
        let binding = StartBinding {
            action_id: req.action_id,
            actor: req.actor.name,
            selection: &req.selection(),
            offer: &req.offer(),
        };
        self.start_once(&binding, req).await
    }
}

impl StartIn for ReconciledResolve<'_> {
    fn start_in<'t>(
        &'t self,
        tx: &'t mut Tx,
    ) -> impl std::future::Future<Output = StoreResult<RedriveStart>> + Send + 't {
        start_in(tx, self)
    }
}

async fn start_in(tx: &mut Tx, req: &ReconciledResolve<'_>) -> StoreResult<RedriveStart> {
    let id = req.reconciliation.get();
    let Some(consumer) = tx.lock_reconciliation(id).await? else {
        return Ok(RedriveStart::NotAllowed(format!(
            "there is no reconciliation #{id}"
        )));
    };
    let Some(resolve_as) = req.class.resolves_as() else {
        return Ok(RedriveStart::NotAllowed(format!(
            "“{}” is for a person to look into, not to apply",
            req.class.title()
        )));
    };
    let rows = tx.applicable_rows(id, req.class, REDRIVE_MAX).await?;
    if rows.is_empty() {
        return Ok(RedriveStart::NotAllowed(format!(
            "nothing in “{}” is left to apply",
            req.class.title()
        )));
    }
    if rows.len() as i64 != req.shown {
        return Ok(RedriveStart::NotAllowed(format!(
            "“{}” now has {} rows to apply, not the {} shown; reload the page to see them",
            req.class.title(),
            rows.len(),
            req.shown
        )));
    }
    let consumer =
        ConsumerName::parse(&consumer).map_err(|e| StoreError::Contract(e.to_string()))?;
    let keys = rows
        .iter()
        .map(|(_, key, version, provider_ref)| {
            Ok(BulkKey {
                consumer: consumer.clone(),
                key: IdempotencyKey::parse(key).map_err(|e| StoreError::Contract(e.to_string()))?,
                version: Some(*version),
                // A reference is what resolving as sent records; a failure
                // carries none.
                provider_ref: provider_ref
                    .clone()
                    .filter(|_| resolve_as == ResolveAs::Sent),
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let mut reason = format!("reconciliation #{id}");
    if let Some(more) = req.reason.map(Reason::as_str) {
        // Within the longest reason a single resolution takes.
        let more: String = more.chars().take(1900).collect();
        reason = format!("{reason}: {more}");
    }
    let source = req.selection();
    let reason = Reason::of_idem(reason);
    let bulk = BulkResolveRequest {
        keys: &keys,
        resolve_as,
        reason: Some(&reason),
        source: &source,
        action_id: req.action_id,
        actor: req.actor,
        rights: req.rights,
        via_token: req.via_token,
    };
    let started = start_keys(tx, &bulk, &source, &req.offer()).await?;
    if let RedriveStart::Started { id: run, .. } = started {
        let seqs: Vec<i64> = rows.iter().map(|(seq, ..)| *seq).collect();
        tx.mark_applied(id, req.class, &seqs, run.get()).await?;
    }
    Ok(started)
}
