//! Taking a run's items, and ending a run (finished, stopped by a person, or
//! stopped because its starter may no longer act).
//!
//! One item is one transaction: lock the run and find it running, read the
//! starter's account (locked), take the next item, act on it through the
//! single action of the run's kind — replay, discard or resolve, each of
//! which locks its row, compares and sets, and reads the clock only then —
//! and settle the item. The action runs under a savepoint: anything it
//! answers other than "done" leaves nothing of it behind. A Stop locks the same run row first, so it
//! waits for an item in flight, and every item committed before the Stop
//! answered is in its tally; none after. On SQLite each write transaction
//! holds the database's write lock from its start, which orders them the
//! same way.

use idem_domain::{
    AuditAction, AuditResult, AuditState, ClaimRetention, ItemOutcome, RedriveItem, RedriveState,
    RunId, RunKind, Within,
    action::{ActionId, ActionOutcome},
};

use super::{
    RedriveStep, cannot_act,
    item::{Next, Running, act_on, skipped_because},
};
use crate::facets::Runs;
use crate::{
    NewAuditEntry, StoreResult,
    actions::Actor,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::{Store, Tx},
    ts::Ts,
};

/// Who ends a run.
#[derive(Debug, Clone, Copy)]
enum Ender<'a> {
    /// It took its last item.
    Itself,
    /// A person pressed Stop (with the form's action id).
    Person(Actor<'a>, &'a ActionId),
    /// Its starter may no longer act; the text says why.
    StarterCannotAct(&'a str),
}

/// A stop's audit row, as far as answering a resubmission goes.
#[derive(sqlx::FromRow)]
struct StopRow {
    id: i64,
    actor: String,
    action: String,
    target: Option<String>,
    state_after: Option<String>,
    reason: Option<String>,
}

fn stop_summary(id: i64, kind: RunKind, tally: &str) -> String {
    let left = match kind {
        RunKind::Replay | RunKind::Discard => "the dead letters it had not taken stay open",
        RunKind::Resolve => "the outcomes it had not taken stay as they were",
    };
    format!("{} #{id} stopped ({tally}): {left}.", kind.title())
}

impl Tx {
    /// The run `id`, locked until this transaction ends.
    /// Whether every item of run `id` is of a consumer `scope` reaches.
    async fn run_within(&mut self, id: i64, scope: &Within) -> StoreResult<bool> {
        let mut sql = Sql::default();
        let p = sql.param(id);
        let Some(outside) = super::outside(&mut sql, scope) else {
            return Ok(true);
        };
        sql.push(&format!(
            "SELECT COUNT(*) FROM redrive_items i WHERE i.redrive_id = {p} AND {outside}"
        ));
        let others: i64 = dispatch!(&mut self.inner, tx => {
            bind_all!(sqlx::query_scalar(&sql.text), &sql.binds).fetch_one(&mut **tx).await?
        });
        Ok(others == 0)
    }

    async fn lock_run(&mut self, id: i64) -> StoreResult<Option<Running>> {
        let sql = self.locking(
            "SELECT action_id, state, kind, resolve_as, reason, actor, actor_role, starter_epoch, \
                      account, token_id FROM redrives WHERE id = $1",
        );
        let run = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(&sql).bind(id).fetch_optional(&mut **tx).await?
        });
        Ok(run)
    }

    /// Why the starter of `run` may no longer drive it, if so.
    async fn starter_cannot_act(&mut self, run: &Running) -> StoreResult<Option<String>> {
        if let Some(id) = run.token_id
            && let Some(why) = self.token_gone(id).await?
        {
            return Ok(Some(why));
        }
        let name = run.account.as_ref().unwrap_or(&run.actor);
        Ok(match self.account_standing(name).await? {
            None => Some(format!("{name}'s account no longer exists")),
            Some((role, disabled, epoch, _)) => cannot_act(name, &role, disabled).or_else(|| {
                (run.starter_epoch.is_some_and(|e| e != epoch))
                    .then(|| format!("{name}'s sessions were ended (signed out everywhere, or a password or role change)"))
            }),
        })
    }

    /// Why the token `id` no longer drives anything (revoked, expired,
    /// gone), if so.
    /// The row is locked, as the owner's account is: a revocation waits
    /// for the item in flight, and no item is taken after it answered.
    async fn token_gone(&mut self, id: i64) -> StoreResult<Option<String>> {
        let sql = self.locking("SELECT name, revoked_at, expires_at FROM api_tokens WHERE id = $1");
        let token: Option<(String, Option<Ts>, Option<Ts>)> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(&sql).bind(id).fetch_optional(&mut **tx).await?
        });
        Ok(match token {
            None => Some("its token no longer exists".to_owned()),
            Some((name, Some(_), _)) => Some(format!("its token {name} was revoked")),
            Some((name, None, Some(until))) if until.0 <= Ts::now().0 => {
                Some(format!("its token {name} expired"))
            }
            Some(_) => None,
        })
    }

    /// Moves the locked, running run `id` to `state` and audits it with its
    /// tally; the audit row. Its time is read here, under the run's lock.
    async fn end_run(
        &mut self,
        id: i64,
        state: RedriveState,
        run: &Running,
        ender: Ender<'_>,
    ) -> StoreResult<(i64, String)> {
        const END: &str = "UPDATE redrives SET state = $2, ended_at = $3, ended_by = $4, \
             end_reason = $5 WHERE id = $1 AND state = 'running'";
        const TALLY: &str = "SELECT \
             COALESCE(SUM(CASE WHEN outcome NOT IN ('skipped') THEN 1 ELSE 0 END), 0), \
             COALESCE(SUM(CASE WHEN outcome = 'skipped' THEN 1 ELSE 0 END), 0), \
             COALESCE(SUM(CASE WHEN outcome IS NULL THEN 1 ELSE 0 END), 0) \
             FROM redrive_items WHERE redrive_id = $1";
        let at = Ts::now();
        let (by, why, action_id) = match ender {
            Ender::Itself => (None, None, None),
            Ender::Person(actor, action_id) => (Some(actor), None, Some(action_id.as_str())),
            Ender::StarterCannotAct(why) => (None, Some(why), None),
        };
        dispatch!(&mut self.inner, tx => {
            sqlx::query(END).bind(id).bind(state.as_str()).bind(at).bind(by.map(|a| a.name))
                .bind(why).execute(&mut **tx).await?;
        });
        let (done, skipped, left): (i64, i64, i64) = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(TALLY).bind(id).fetch_one(&mut **tx).await?
        });
        let done_word = run.kind()?.done();
        let tally = format!("{done} {done_word}, {skipped} skipped, {left} not taken");
        let reason = match why {
            Some(why) => format!("{tally}; stopped because {why}"),
            None => tally.clone(),
        };
        let target = format!("redrive:{id}");
        let actor = by.unwrap_or(Actor {
            name: &run.actor,
            role: &run.actor_role,
            client_addr: None,
        });
        let audit_id = self
            .append_audit_at(
                &NewAuditEntry {
                    action_id,
                    target: Some(&target),
                    state_before: Some(AuditState::Run(RedriveState::Running)),
                    state_after: Some(AuditState::Run(state)),
                    reason: Some(&reason),
                    client_addr: actor.client_addr,
                    ..NewAuditEntry::new(
                        actor.name,
                        actor.role,
                        run.kind()?.audit_action(),
                        AuditResult::Ok,
                    )
                },
                at,
            )
            .await?;
        Ok((audit_id, tally))
    }

    /// The next item not yet taken.
    async fn next_item(&mut self, id: i64) -> StoreResult<Option<Next>> {
        const NEXT: &str = "SELECT position, dead_letter_id, consumer, idempotency_key, version, \
             provider_ref FROM redrive_items \
             WHERE redrive_id = $1 AND outcome IS NULL ORDER BY position LIMIT 1";
        let next = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(NEXT).bind(id).fetch_optional(&mut **tx).await?
        });
        Ok(next)
    }
}

/// What a step did inside its transaction.
enum Taken {
    Item(RedriveItem),
    /// The run ended now (written: commit).
    EndedNow,
    /// The run was not running (nothing written).
    NotRunning,
}

impl Runs<'_> {
    /// Takes the next item of a running redrive: replays its dead letter if
    /// the verdict is "safe", else skips it with the reason, and records
    /// which. With nothing left, finishes the run; with a starter who may
    /// no longer act, stops it (one audit row with the tally, either way).
    /// A stopped or finished run does nothing.
    pub async fn redrive_step(
        self,
        id: RunId,
        retention: &ClaimRetention,
    ) -> StoreResult<RedriveStep> {
        let id = id.get();
        let mut tx = self.begin().await?;
        match take_next(&mut tx, id, retention).await {
            Ok(Taken::Item(item)) => {
                tx.commit().await?;
                Ok(RedriveStep::Item(item))
            }
            Ok(Taken::EndedNow) => {
                tx.commit().await?;
                Ok(RedriveStep::Ended)
            }
            Ok(Taken::NotRunning) => {
                tx.rollback().await?;
                Ok(RedriveStep::Ended)
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        }
    }

    /// Stops a running redrive between two items (waiting for the one in
    /// flight): the items not yet taken stay open dead letters. Bound to
    /// `action_id`: the same Stop sent again answers its first outcome. A
    /// run with an item outside `scope` is, to this actor, no run at all
    /// (checked in the transaction that stops it).
    pub async fn stop_redrive(
        self,
        id: RunId,
        scope: &Within,
        action_id: &ActionId,
        actor: Actor<'_>,
    ) -> StoreResult<ActionOutcome> {
        let id = id.get();
        if let Some(first) = self.stop_by_action(id, action_id, actor).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let stopped = async {
            let Some(run) = tx.lock_run(id).await? else {
                return Ok(None);
            };
            if !tx.run_within(id, scope).await? {
                return Ok(None);
            }
            if run.state != RedriveState::Running.as_str() {
                return Ok(Some(Err(())));
            }
            let ender = Ender::Person(actor, action_id);
            let kind = run.kind()?;
            tx.end_run(id, RedriveState::Stopped, &run, ender)
                .await
                .map(|(audit_id, tally)| Some(Ok((audit_id, stop_summary(id, kind, &tally)))))
        }
        .await;
        let outcome = match stopped {
            Ok(Some(Ok((audit_id, summary)))) => match tx.commit().await {
                Ok(()) => {
                    return Ok(ActionOutcome::Done {
                        audit_id,
                        outbox_id: None,
                        summary,
                    });
                }
                Err(err) => Err(err),
            },
            Ok(Some(Err(()))) => {
                tx.rollback().await?;
                return self.ended_already(id).await;
            }
            Ok(None) => {
                tx.rollback().await?;
                return Ok(ActionOutcome::Refused {
                    reason: format!("There is no redrive {id}."),
                });
            }
            Err(err) => {
                let _ = tx.rollback().await;
                Err(err)
            }
        };
        match outcome {
            Err(err) if err.is_unique_violation() => Ok(self
                .stop_by_action(id, action_id, actor)
                .await?
                .unwrap_or(ActionOutcome::FormReused {
                    first: "another action".into(),
                })),
            other => other,
        }
    }
}

impl Store {
    /// A run already ended: who or what ended it, and how it stands.
    async fn ended_already(&self, id: i64) -> StoreResult<ActionOutcome> {
        let (run, _) = self
            .runs()
            .redrive(RunId::of_row(id), &idem_domain::Within::Every)
            .await?
            .ok_or_else(|| {
                crate::StoreError::Contract(format!("redrive {id} vanished while being stopped"))
            })?;
        Ok(ActionOutcome::Conflict {
            by: run
                .ended_by
                .or(run
                    .end_reason
                    .map(|why| format!("the redrive itself ({why})")))
                .unwrap_or_else(|| "the redrive itself".into()),
            at: run.ended_at,
            now: run.state.to_string(),
        })
    }

    /// The outcome of a Stop already sent with `action_id`: the first one
    /// when it stopped this run as this person; `FormReused` when the id
    /// was used for anything else.
    async fn stop_by_action(
        &self,
        id: i64,
        action_id: &ActionId,
        actor: Actor<'_>,
    ) -> StoreResult<Option<ActionOutcome>> {
        const SQL: &str = "SELECT id, actor, action, target, state_after, reason \
             FROM audit_log WHERE action_id = $1";
        let row: Option<StopRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(action_id.as_str()).fetch_optional(pool).await?
        });
        Ok(row.map(|row| {
            let target = format!("redrive:{id}");
            let stopped = AuditState::Run(RedriveState::Stopped);
            let same = row.actor == actor.name
                && row.target.as_deref() == Some(target.as_str())
                && row.state_after.as_deref().map(AuditState::parse) == Some(stopped);
            let kind = row
                .action
                .parse::<AuditAction>()
                .ok()
                .and_then(AuditAction::run_kind);
            if let (true, Some(kind)) = (same, kind) {
                let tally = row.reason.unwrap_or_default();
                ActionOutcome::Done {
                    audit_id: row.id,
                    outbox_id: None,
                    summary: stop_summary(id, kind, &tally),
                }
            } else {
                // What the id did is not said: a Stop's form names only
                // its own run.
                ActionOutcome::FormReused {
                    first: "another action".into(),
                }
            }
        }))
    }
}

/// One step inside `tx`: see the module's comment.
async fn take_next(tx: &mut Tx, id: i64, retention: &ClaimRetention) -> StoreResult<Taken> {
    let Some(run) = tx.lock_run(id).await? else {
        return Ok(Taken::NotRunning);
    };
    if run.state != RedriveState::Running.as_str() {
        return Ok(Taken::NotRunning);
    }
    if let Some(why) = tx.starter_cannot_act(&run).await? {
        let ender = Ender::StarterCannotAct(&why);
        tx.end_run(id, RedriveState::Stopped, &run, ender).await?;
        return Ok(Taken::EndedNow);
    }
    let Some(item) = tx.next_item(id).await? else {
        tx.end_run(id, RedriveState::Finished, &run, Ender::Itself)
            .await?;
        return Ok(Taken::EndedNow);
    };
    let kind = run.kind()?;
    tx.savepoint().await?;
    let answer = match act_on(tx, id, &run, &item, retention).await {
        Ok(answer) => answer,
        // The database refused this item's writes (a team's write-back
        // function raised, an action id taken by hand): skip it rather than
        // retry it forever and hold up the rest. Anything else (the
        // connection) ends the step, to be tried again.
        Err(crate::StoreError::Database(sqlx::Error::Database(err))) => {
            tracing::warn!(run = id, position = item.position, error = %err, "a run's item could not be acted on");
            ActionOutcome::Refused {
                reason: "The database refused this item's change (see the server's log); it was left as it was.".into(),
            }
        }
        Err(err) => return Err(err),
    };
    let (outcome, why, audit_id) = match answer {
        ActionOutcome::Done { audit_id, .. } => (kind.done(), None, Some(audit_id)),
        refusal => {
            tx.rollback_to_savepoint().await?;
            (ItemOutcome::Skipped, Some(skipped_because(refusal)), None)
        }
    };
    const SETTLE: &str = "UPDATE redrive_items SET outcome = $3, reason = $4, audit_id = $5, \
         done_at = $6 WHERE redrive_id = $1 AND position = $2 AND outcome IS NULL";
    let done_at = Ts::now();
    dispatch!(&mut tx.inner, tx => {
        sqlx::query(SETTLE).bind(id).bind(item.position).bind(outcome.as_str()).bind(why.as_deref())
            .bind(audit_id).bind(done_at).execute(&mut **tx).await?;
    });
    Ok(Taken::Item(RedriveItem {
        position: item.position,
        dead_letter_id: item.dead_letter_id,
        consumer: item.consumer,
        key: item.idempotency_key,
        version: item.version,
        provider_ref: item.provider_ref,
        outcome: Some(outcome),
        reason: why,
        audit_id,
        done_at: Some(done_at.0),
    }))
}
