//! Starting a run: the starter's standing, what it takes (compared with
//! what was shown), then the run, its items and its summary audit row in
//! one transaction; an action id already used answers its first run.

use idem_domain::{AuditResult, AuditState, RedriveState, RunId, RunKind, action::ActionId};

use super::{Actor, LetterRun, REDRIVE_MAX, RedriveRequest, RedriveStart, ViaToken, offer_of};
use crate::facets::Runs;
use crate::{
    NewAuditEntry, StoreResult,
    dialect::dispatch,
    store::{Store, Tx},
    ts::Ts,
};

/// A start's own part, inside its transaction: the starter's standing,
/// what it takes, then the run (over dead letters here; over keys in
/// `bulk`).
pub(super) trait StartIn: Sync {
    fn start_in<'t>(
        &'t self,
        tx: &'t mut Tx,
    ) -> impl std::future::Future<Output = StoreResult<RedriveStart>> + Send + 't;
}

impl StartIn for RedriveRequest<'_> {
    fn start_in<'t>(
        &'t self,
        tx: &'t mut Tx,
    ) -> impl std::future::Future<Output = StoreResult<RedriveStart>> + Send + 't {
        start_in(tx, self)
    }
}

impl Runs<'_> {
    /// Starts a run over exactly the open dead letters `req.offer` names
    /// (a redrive, or a bulk discard): the run, its items and its summary
    /// audit row in one transaction. Each item is taken in
    /// [`Store::redrive_step`].
    pub async fn start_redrive(self, req: &RedriveRequest<'_>) -> StoreResult<RedriveStart> {
        let binding = StartBinding {
            action_id: req.action_id,
            actor: req.actor.name,
            selection: &selection_words(req),
            offer: &req.offer.token(),
        };
        self.start_once(&binding, req).await
    }
}

impl Store {
    /// Runs a start once: the run `binding`'s action id already started
    /// (the same for a resubmission, `FormReused` for another), else
    /// `start` in a transaction of its own, committed only if it started.
    pub(super) async fn start_once(
        &self,
        binding: &StartBinding<'_>,
        start: &impl StartIn,
    ) -> StoreResult<RedriveStart> {
        if let Some(first) = self.run_by_action(binding).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let error = match start.start_in(&mut tx).await {
            Ok(started @ RedriveStart::Started { .. }) => match tx.commit().await {
                Ok(()) => return Ok(started),
                Err(err) => err,
            },
            Ok(other) => {
                tx.rollback().await?;
                // A twin that committed while this one waited for its
                // locks already took the set: its run is this one.
                return Ok(self.run_by_action(binding).await?.unwrap_or(other));
            }
            Err(err) => {
                let _ = tx.rollback().await;
                err
            }
        };
        // A twin submission committed first: its run is this one.
        if error.is_unique_violation() {
            return Ok(self
                .run_by_action(binding)
                .await?
                .unwrap_or(RedriveStart::FormReused));
        }
        Err(error)
    }

    /// The run `binding`'s action id already started, if any: the same run
    /// for the same starter, selection and offer; `FormReused` otherwise.
    async fn run_by_action(&self, binding: &StartBinding<'_>) -> StoreResult<Option<RedriveStart>> {
        const SQL: &str = "SELECT r.id, r.actor, r.selection, r.offer, r.audit_id, \
             (SELECT COUNT(*) FROM redrive_items i WHERE i.redrive_id = r.id) \
             FROM redrives r WHERE r.action_id = $1";
        type Found = (i64, String, String, String, i64, i64);
        let found: Option<Found> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(binding.action_id.as_str()).fetch_optional(pool).await?
        });
        Ok(found.map(|(id, actor, selection, offer, audit_id, items)| {
            let same =
                actor == binding.actor && selection == binding.selection && offer == binding.offer;
            if same {
                RedriveStart::Started {
                    id: RunId::of_row(id),
                    items,
                    audit_id,
                }
            } else {
                RedriveStart::FormReused
            }
        }))
    }
}

/// What a start's action id is bound to once a run has it: the starter,
/// what was selected (in words) and what was offered (a token).
pub(super) struct StartBinding<'a> {
    pub action_id: &'a ActionId,
    pub actor: &'a str,
    pub selection: &'a str,
    pub offer: &'a str,
}

/// A run over dead letters' selection, in words: the list's filter, and
/// for a bulk discard that it takes only letters whose key is sent.
fn selection_words(req: &RedriveRequest<'_>) -> String {
    match req.kind {
        LetterRun::Replay => req.selection.describe(),
        LetterRun::Discard { .. } => {
            format!("{}, whose key is already sent", req.selection.describe())
        }
    }
}

/// [`Store::start_redrive`] inside `tx`: the starter's standing, then the
/// letters, compared with the offer, then the run.
async fn start_in(tx: &mut Tx, req: &RedriveRequest<'_>) -> StoreResult<RedriveStart> {
    let name = req.via_token.map_or(req.actor.name, |t| t.owner);
    let epoch = match tx.starter_epoch(name, req.rights).await? {
        Ok(epoch) => epoch,
        Err(refused) => return Ok(refused),
    };
    let reason = match req.kind {
        LetterRun::Replay => None,
        LetterRun::Discard { reason } => Some(reason.as_str()),
    };
    let kind = req.kind.kind();
    let last = req.offer.last.map(|(at, id)| (Ts::from(at), id));
    let letters = match last {
        Some(last) => {
            tx.run_candidates(req.selection, kind, Some(last), REDRIVE_MAX + 1)
                .await?
        }
        None => Vec::new(),
    };
    if offer_of(&letters) != *req.offer {
        let now = tx
            .run_candidates(req.selection, kind, None, REDRIVE_MAX)
            .await?;
        return Ok(match now.is_empty() {
            true => RedriveStart::NothingToRedrive,
            false => RedriveStart::Changed {
                now: offer_of(&now),
            },
        });
    }
    if letters.is_empty() {
        return Ok(RedriveStart::NothingToRedrive);
    }
    let items: Vec<NewItem<'_>> = letters
        .iter()
        .map(|(_, id, consumer, key)| NewItem {
            dead_letter_id: Some(*id),
            consumer,
            key,
            version: None,
            provider_ref: None,
        })
        .collect();
    let run = NewRun {
        kind,
        resolve_as: None,
        reason,
        action_id: req.action_id,
        actor: req.actor,
        selection: &selection_words(req),
        offer: &req.offer.token(),
        consumer: req.selection.window.consumer.as_ref().map(|c| c.as_str()),
        starter_epoch: epoch,
        via_token: req.via_token,
    };
    insert_run(tx, &run, &items).await
}

/// A run about to be written.
pub(super) struct NewRun<'a> {
    pub kind: RunKind,
    pub resolve_as: Option<idem_domain::ResolveAs>,
    pub reason: Option<&'a str>,
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    pub selection: &'a str,
    pub offer: &'a str,
    /// The one consumer it is about, if it is about one (for the audit row).
    pub consumer: Option<&'a str>,
    pub starter_epoch: i64,
    pub via_token: Option<ViaToken<'a>>,
}

/// One of its items.
pub(super) struct NewItem<'a> {
    pub dead_letter_id: Option<i64>,
    pub consumer: &'a str,
    pub key: &'a str,
    pub version: Option<i64>,
    pub provider_ref: Option<&'a str>,
}

/// The run, its items and its summary audit row: started.
pub(super) async fn insert_run(
    tx: &mut Tx,
    run: &NewRun<'_>,
    items: &[NewItem<'_>],
) -> StoreResult<RedriveStart> {
    const RUN: &str = "INSERT INTO redrives (action_id, actor, actor_role, selection, offer, \
         starter_epoch, state, started_at, audit_id, account, token_id, kind, resolve_as, reason) \
         VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9, $10, $11, $12, $13) RETURNING id";
    const ITEM: &str = "INSERT INTO redrive_items (redrive_id, position, dead_letter_id, \
         consumer, idempotency_key, version, provider_ref) VALUES ($1, $2, $3, $4, $5, $6, $7)";
    let now = Ts::now();
    let what = match run.resolve_as {
        Some(how) => format!("{} {} to resolve as {how}", items.len(), run.kind.items()),
        None => format!("{} {}", items.len(), run.kind.items()),
    };
    let summary = match run.reason {
        Some(reason) => format!("{what}: {}; reason: {reason}", run.selection),
        None => format!("{what}: {}", run.selection),
    };
    let audit_id = tx
        .append_audit_at(
            &NewAuditEntry {
                consumer: run.consumer,
                state_after: Some(AuditState::Run(RedriveState::Running)),
                reason: Some(&summary),
                client_addr: run.actor.client_addr,
                ..NewAuditEntry::new(
                    run.actor.name,
                    run.actor.role,
                    run.kind.audit_action(),
                    AuditResult::Ok,
                )
            },
            now,
        )
        .await?;
    let id: i64 = dispatch!(&mut tx.inner, tx => {
        sqlx::query_scalar(RUN).bind(run.action_id.as_str()).bind(run.actor.name)
            .bind(run.actor.role).bind(run.selection).bind(run.offer)
            .bind(run.starter_epoch).bind(now).bind(audit_id)
            .bind(run.via_token.map(|t| t.owner)).bind(run.via_token.map(|t| t.id))
            .bind(run.kind.as_str()).bind(run.resolve_as.map(|r| r.as_str())).bind(run.reason)
            .fetch_one(&mut **tx).await?
    });
    for (position, item) in items.iter().enumerate() {
        let position = position as i64 + 1;
        dispatch!(&mut tx.inner, tx => {
            sqlx::query(ITEM).bind(id).bind(position).bind(item.dead_letter_id)
                .bind(item.consumer).bind(item.key).bind(item.version).bind(item.provider_ref)
                .execute(&mut **tx).await?;
        });
    }
    Ok(RedriveStart::Started {
        id: RunId::of_row(id),
        audit_id,
        items: items.len() as i64,
    })
}
