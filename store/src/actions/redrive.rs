//! A guarded redrive: up to [`REDRIVE_MAX`] open dead letters, each replayed
//! through the single replay — its own verdict (only "safe" ones go),
//! compare-and-set and audit row — one step at a time, so a runner can pace
//! it and an operator can stop it between two items.
//!
//! Idempotent throughout: the run is bound to the form's action id (a
//! resubmission starts nothing new), each item's replay to an action id
//! derived from the run and the dead letter (a step retried after a crash,
//! or taken by two runners at once, replays nothing twice), and an item's
//! outcome is written only while it has none.

use idem_domain::{
    ClaimRetention,
    action::{ActionId, ActionOutcome},
};

use super::{Actor, ReplayRequest};
use crate::{
    DeadLetterFilter, NewAuditEntry, StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::Store,
    ts::Ts,
};

/// The most dead letters one redrive takes.
pub const REDRIVE_MAX: i64 = 500;

#[derive(Debug, Clone, Copy)]
pub struct RedriveRequest<'a> {
    pub selection: &'a DeadLetterFilter,
    /// The form's action id.
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
}

/// What starting a redrive did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedriveStart {
    /// A run with this many dead letters (or the run this action id already
    /// started, for a resubmission by the same person).
    Started { id: i64, items: i64, audit_id: i64 },
    /// Nothing matched: no run was started.
    NothingToRedrive,
    /// The action id was used by someone else: nothing was started.
    FormReused,
}

/// One item of a run as its page shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RedriveItem {
    pub position: i64,
    pub dead_letter_id: i64,
    /// The dead letter's consumer and key.
    pub consumer: String,
    pub key: String,
    /// `None` until its turn; then `replayed` or `skipped`.
    pub outcome: Option<String>,
    pub reason: Option<String>,
    pub audit_id: Option<i64>,
}

/// A run: who started it, what it took, where it stands.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Redrive {
    pub id: i64,
    pub actor: String,
    pub actor_role: String,
    pub selection: String,
    /// `running`, `stopped` or `finished`.
    pub state: String,
    pub started_at: Ts,
    pub ended_at: Option<Ts>,
    pub ended_by: Option<String>,
    pub audit_id: i64,
}

/// What one step did.
#[derive(Debug, Clone, PartialEq)]
pub enum RedriveStep {
    /// One item settled: replayed, or skipped with the reason.
    Item(RedriveItem),
    /// Nothing left to do: the run has ended (finished now, or before, or
    /// stopped).
    Ended,
}

/// The action id of one item's replay: derived from the run and the dead
/// letter, so a step taken twice is one replay.
fn item_action_id(redrive: i64, dead_letter: i64) -> ActionId {
    ActionId::parse(&format!("redrive-{redrive}-dl-{dead_letter}"))
        .expect("digits and dashes, at least 8 characters")
}

impl Store {
    /// Starts a redrive of the open dead letters `req` selects, oldest
    /// first, at most [`REDRIVE_MAX`]: the run, its items and its summary
    /// audit row in one transaction. Replays happen in [`Store::redrive_step`].
    pub async fn start_redrive(&self, req: &RedriveRequest<'_>) -> StoreResult<RedriveStart> {
        if let Some(first) = self.redrive_by_action(req).await? {
            return Ok(first);
        }
        let chosen = self.redrive_candidates(req.selection).await?;
        if chosen.is_empty() {
            return Ok(RedriveStart::NothingToRedrive);
        }
        let now = Ts::now();
        let selection = req.selection.describe();
        let mut tx = self.begin().await?;
        let reason = format!("{} dead letters: {selection}", chosen.len());
        let audit_id = tx
            .append_audit_at(
                &NewAuditEntry {
                    action_id: None,
                    actor: req.actor.name,
                    actor_role: req.actor.role,
                    action: "redrive",
                    consumer: req.selection.window.consumer.as_ref().map(|c| c.as_str()),
                    key: None,
                    target: None,
                    state_before: None,
                    state_after: Some("running"),
                    reason: Some(&reason),
                    result: "ok",
                    client_addr: req.actor.client_addr,
                    recovery_seconds: None,
                },
                now,
            )
            .await?;
        const RUN: &str = "INSERT INTO redrives \
             (action_id, actor, actor_role, selection, state, started_at, audit_id) \
             VALUES ($1, $2, $3, $4, 'running', $5, $6) RETURNING id";
        const ITEM: &str = "INSERT INTO redrive_items (redrive_id, position, dead_letter_id) \
             VALUES ($1, $2, $3)";
        let inserted: StoreResult<i64> = async {
            let id: i64 = dispatch!(&mut tx.inner, tx => {
                sqlx::query_scalar(RUN).bind(req.action_id.as_str()).bind(req.actor.name)
                    .bind(req.actor.role).bind(&selection).bind(now).bind(audit_id)
                    .fetch_one(&mut **tx).await?
            });
            for (position, dead_letter) in chosen.iter().enumerate() {
                let position = position as i64 + 1;
                dispatch!(&mut tx.inner, tx => {
                    sqlx::query(ITEM).bind(id).bind(position).bind(*dead_letter)
                        .execute(&mut **tx).await?;
                });
            }
            Ok(id)
        }
        .await;
        let committed = match inserted {
            Ok(id) => tx.commit().await.map(|()| id),
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        };
        match committed {
            Ok(id) => Ok(RedriveStart::Started {
                id,
                audit_id,
                items: chosen.len() as i64,
            }),
            // A twin submission committed first: its run is this one.
            Err(err) if err.is_unique_violation() => Ok(self
                .redrive_by_action(req)
                .await?
                .unwrap_or(RedriveStart::FormReused)),
            Err(err) => Err(err),
        }
    }

    /// The run `req`'s action id already started, if any.
    async fn redrive_by_action(
        &self,
        req: &RedriveRequest<'_>,
    ) -> StoreResult<Option<RedriveStart>> {
        const SQL: &str = "SELECT r.id, r.actor, (SELECT COUNT(*) FROM redrive_items i \
             WHERE i.redrive_id = r.id), r.audit_id FROM redrives r WHERE r.action_id = $1";
        let found: Option<(i64, String, i64, i64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(req.action_id.as_str()).fetch_optional(pool).await?
        });
        Ok(found.map(|(id, actor, items, audit_id)| {
            if actor == req.actor.name {
                RedriveStart::Started {
                    id,
                    items,
                    audit_id,
                }
            } else {
                RedriveStart::FormReused
            }
        }))
    }

    /// The ids of the open dead letters `selection` takes, oldest first.
    async fn redrive_candidates(&self, selection: &DeadLetterFilter) -> StoreResult<Vec<i64>> {
        let mut sql = Sql::default();
        sql.push("SELECT id FROM dead_letters WHERE state = 'open'");
        selection.conditions(&mut sql);
        let limit = sql.param(REDRIVE_MAX);
        sql.push(&format!(" ORDER BY dead_lettered_at, id LIMIT {limit}"));
        let ids = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(ids)
    }

    /// Takes the next item of a running redrive: replays its dead letter if
    /// the verdict is "safe", else skips it with the reason, and records
    /// which. With nothing left, finishes the run (one audit row with the
    /// tally). A stopped or finished run does nothing.
    pub async fn redrive_step(
        &self,
        id: i64,
        retention: &ClaimRetention,
        at: Ts,
    ) -> StoreResult<RedriveStep> {
        const NEXT: &str = "SELECT r.actor, r.actor_role, i.position, i.dead_letter_id, \
             d.consumer, d.idempotency_key \
             FROM redrives r JOIN redrive_items i ON i.redrive_id = r.id \
             JOIN dead_letters d ON d.id = i.dead_letter_id \
             WHERE r.id = $1 AND r.state = 'running' AND i.outcome IS NULL \
             ORDER BY i.position LIMIT 1";
        type Next = (String, String, i64, i64, String, String);
        let next: Option<Next> = dispatch!(&self.pools, pool => {
            sqlx::query_as(NEXT).bind(id).fetch_optional(pool).await?
        });
        let Some((actor, role, position, dead_letter_id, consumer, key)) = next else {
            self.finish_redrive(id, at).await?;
            return Ok(RedriveStep::Ended);
        };
        let action_id = item_action_id(id, dead_letter_id);
        let reason = format!("redrive #{id}");
        let replay = ReplayRequest {
            dead_letter_id,
            action_id: &action_id,
            actor: Actor {
                name: &actor,
                role: &role,
                client_addr: None,
            },
            override_verdict: false,
            reason: Some(&reason),
            retention,
        };
        let (outcome, why, audit_id) = match self.replay_if_safe_at(&replay, at).await? {
            ActionOutcome::Done { audit_id, .. } => ("replayed", None, Some(audit_id)),
            ActionOutcome::Refused { reason } => ("skipped", Some(reason), None),
            ActionOutcome::Conflict { by, now, .. } => {
                ("skipped", Some(format!("Already {now} by {by}.")), None)
            }
            ActionOutcome::FormReused { first } => ("skipped", Some(first), None),
        };
        const SETTLE: &str = "UPDATE redrive_items SET outcome = $3, reason = $4, audit_id = $5, \
             done_at = $6 WHERE redrive_id = $1 AND position = $2 AND outcome IS NULL";
        dispatch!(&self.pools, pool => {
            sqlx::query(SETTLE).bind(id).bind(position).bind(outcome).bind(why.as_deref())
                .bind(audit_id).bind(at).execute(pool).await?;
        });
        Ok(RedriveStep::Item(RedriveItem {
            position,
            dead_letter_id,
            consumer,
            key,
            outcome: Some(outcome.to_owned()),
            reason: why,
            audit_id,
        }))
    }

    /// Ends a running redrive with nothing left: `finished`, and an audit
    /// row with the tally (once, whoever gets there first).
    async fn finish_redrive(&self, id: i64, at: Ts) -> StoreResult<()> {
        self.end_redrive(id, "finished", None, at).await.map(|_| ())
    }

    /// Stops a running redrive between two items: the items not yet taken
    /// stay open dead letters. The stop's audit row, or `None` when it was
    /// no longer running.
    pub async fn stop_redrive(&self, id: i64, actor: Actor<'_>) -> StoreResult<Option<i64>> {
        self.end_redrive(id, "stopped", Some(actor), Ts::now())
            .await
    }

    /// Moves a running redrive to `state` and audits it with the tally, in
    /// one transaction: the audit row, or `None` when it was no longer
    /// running.
    async fn end_redrive(
        &self,
        id: i64,
        state: &str,
        by: Option<Actor<'_>>,
        at: Ts,
    ) -> StoreResult<Option<i64>> {
        const END: &str = "UPDATE redrives SET state = $2, ended_at = $3, ended_by = $4 \
             WHERE id = $1 AND state = 'running' RETURNING actor, actor_role";
        const TALLY: &str = "SELECT \
             COALESCE(SUM(CASE WHEN outcome = 'replayed' THEN 1 ELSE 0 END), 0), \
             COALESCE(SUM(CASE WHEN outcome = 'skipped' THEN 1 ELSE 0 END), 0), \
             COALESCE(SUM(CASE WHEN outcome IS NULL THEN 1 ELSE 0 END), 0) \
             FROM redrive_items WHERE redrive_id = $1";
        let mut tx = self.begin().await?;
        let ended: Option<(String, String)> = dispatch!(&mut tx.inner, tx => {
            sqlx::query_as(END).bind(id).bind(state).bind(at).bind(by.map(|a| a.name))
                .fetch_optional(&mut **tx).await?
        });
        let Some((starter, starter_role)) = ended else {
            tx.rollback().await?;
            return Ok(None);
        };
        let (replayed, skipped, left): (i64, i64, i64) = dispatch!(&mut tx.inner, tx => {
            sqlx::query_as(TALLY).bind(id).fetch_one(&mut **tx).await?
        });
        let target = format!("redrive:{id}");
        let tally = format!("{replayed} replayed, {skipped} skipped, {left} not taken");
        let actor = by.unwrap_or(Actor {
            name: &starter,
            role: &starter_role,
            client_addr: None,
        });
        let audit_id = tx
            .append_audit_at(
                &NewAuditEntry {
                    action_id: None,
                    actor: actor.name,
                    actor_role: actor.role,
                    action: "redrive",
                    consumer: None,
                    key: None,
                    target: Some(&target),
                    state_before: Some("running"),
                    state_after: Some(state),
                    reason: Some(&tally),
                    result: "ok",
                    client_addr: actor.client_addr,
                    recovery_seconds: None,
                },
                at,
            )
            .await?;
        tx.commit().await?;
        Ok(Some(audit_id))
    }

    /// A run and its items, in order.
    pub async fn redrive(&self, id: i64) -> StoreResult<Option<(Redrive, Vec<RedriveItem>)>> {
        const RUN: &str = "SELECT id, actor, actor_role, selection, state, started_at, ended_at, \
             ended_by, audit_id FROM redrives WHERE id = $1";
        const ITEMS: &str = "SELECT i.position, i.dead_letter_id, d.consumer, d.idempotency_key AS key, \
             i.outcome, i.reason, i.audit_id \
             FROM redrive_items i JOIN dead_letters d ON d.id = i.dead_letter_id \
             WHERE i.redrive_id = $1 ORDER BY i.position";
        let run: Option<Redrive> = dispatch!(&self.pools, pool => {
            sqlx::query_as(RUN).bind(id).fetch_optional(pool).await?
        });
        let Some(run) = run else {
            return Ok(None);
        };
        let items = dispatch!(&self.pools, pool => {
            sqlx::query_as(ITEMS).bind(id).fetch_all(pool).await?
        });
        Ok(Some((run, items)))
    }

    /// The runs still running, oldest first (what a runner paces).
    pub async fn running_redrives(&self) -> StoreResult<Vec<i64>> {
        const SQL: &str = "SELECT id FROM redrives WHERE state = 'running' ORDER BY id";
        let ids = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_all(pool).await?
        });
        Ok(ids)
    }
}
