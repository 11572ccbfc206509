//! Replaying and discarding a dead letter.

use chrono::Utc;
use idem_domain::{
    AuditAction, AuditResult, AuditState, ClaimStatus, DeadLetter, DeadLetterId, DeadLetterState,
    OutboxOrigin, Within,
    action::{ActionOutcome, Verdict},
};

use super::{DiscardRequest, ReplayRequest, When, recovery_seconds, refused, summary};
use crate::{
    NewAuditEntry, StoreResult,
    consumer::NewOutboxRow,
    dialect::dispatch,
    rows::{DeadLetterRow, dead_letter_columns},
    store::Tx,
    ts::Ts,
};

/// One dead letter, read inside the action's transaction and locked until
/// it ends: whatever the action then decides, nobody changes the letter
/// meanwhile, and the clock read after this is later than any other
/// action's commit on it.
async fn dead_letter(
    tx: &mut Tx,
    id: DeadLetterId,
    scope: &Within,
) -> StoreResult<Option<DeadLetter>> {
    let mut sql = crate::sql::Sql::default();
    let p = sql.param(id.get());
    sql.push(&format!(
        "SELECT {} FROM dead_letters WHERE id = {p}",
        dead_letter_columns!()
    ));
    sql.and_within(scope, "consumer");
    let text = tx.locking(&sql.text);
    let row: Option<DeadLetterRow> = dispatch!(&mut tx.inner, tx => {
        crate::sql::bind_all!(sqlx::query_as(&text), &sql.binds).fetch_optional(&mut **tx).await?
    });
    row.map(DeadLetter::try_from).transpose()
}

/// The conflict answer for a dead letter someone else already handled.
fn already_handled(dl: &DeadLetter) -> ActionOutcome {
    ActionOutcome::Conflict {
        by: dl.resolved_by.clone().unwrap_or_else(|| "someone".into()),
        at: dl.resolved_at,
        now: dl.state.to_string(),
    }
}

/// The open dead letter an action is about, or the answer that ends the
/// action: there is no such dead letter (among those `scope` reaches), or
/// someone already handled it.
async fn open_dead_letter(
    tx: &mut Tx,
    id: DeadLetterId,
    scope: &Within,
) -> StoreResult<Result<DeadLetter, ActionOutcome>> {
    Ok(match dead_letter(tx, id, scope).await? {
        None => Err(refused(format!("There is no dead letter {id}."))),
        Some(dl) if dl.state != DeadLetterState::Open => Err(already_handled(&dl)),
        Some(dl) => Ok(dl),
    })
}

/// Moves an open dead letter to `state`; `false` when it was no longer open.
async fn close_dead_letter(
    tx: &mut Tx,
    id: i64,
    state: DeadLetterState,
    actor: &str,
    at: Ts,
) -> StoreResult<bool> {
    const SQL: &str = "UPDATE dead_letters SET state = $2, resolved_by = $3, resolved_at = $4 WHERE id = $1 AND state = 'open'";
    let changed = dispatch!(&mut tx.inner, tx => {
        sqlx::query(SQL).bind(id).bind(state.as_str()).bind(actor).bind(at).execute(&mut **tx).await?.rows_affected()
    });
    Ok(changed == 1)
}

/// Which verdicts a replay goes ahead on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Accept {
    /// An operator's replay: "safe" and "caution" verdicts, and a blocked
    /// one overridden with a reason.
    OperatorChoice,
    /// A redrive's item: "safe" only; any other verdict refuses with its title.
    SafeOnly,
}

/// Replays the open dead letter `req` names, inside `tx`, `when` it
/// happens, if its verdict is one `accept` goes ahead on.
pub(super) async fn replay(
    tx: &mut Tx,
    req: &ReplayRequest<'_>,
    accept: Accept,
    when: When,
) -> StoreResult<ActionOutcome> {
    let dl = match open_dead_letter(tx, req.dead_letter_id, req.scope).await? {
        Ok(dl) => dl,
        Err(answer) => return Ok(answer),
    };
    let now = when.read();
    let claim = tx.read_claim(&dl.consumer, &dl.key).await?;
    let verdict = Verdict::of(claim.as_ref(), req.retention.of(&dl.consumer), now);
    if accept == Accept::SafeOnly && verdict != Verdict::Safe {
        return Ok(refused(format!("{}.", verdict.title())));
    }
    let reason = req.reason.map(|r| r.as_str());
    if verdict.needs_override() && !(req.override_verdict && reason.is_some()) {
        return Ok(refused(format!(
            "{}. To replay anyway, tick the override and give a reason.",
            verdict.title()
        )));
    }
    let at = Ts::from(now);
    if !close_dead_letter(tx, dl.id, DeadLetterState::Replayed, req.actor.name, at).await? {
        let current = dead_letter(tx, req.dead_letter_id, req.scope)
            .await?
            .unwrap_or(dl);
        return Ok(already_handled(&current));
    }
    let target = format!("dead_letter:{}", dl.id);
    let noted = match (verdict.needs_override(), reason) {
        (true, Some(reason)) => Some(format!("override ({}): {reason}", verdict.title())),
        (_, reason) => reason.map(str::to_owned),
    };
    let audit_id = tx
        .append_audit_at(
            &NewAuditEntry {
                action_id: Some(req.action_id.as_str()),
                actor: req.actor.name,
                actor_role: req.actor.role,
                action: AuditAction::Replay,
                consumer: Some(&dl.consumer),
                key: Some(&dl.key),
                target: Some(&target),
                state_before: Some(AuditState::DeadLetter(DeadLetterState::Open)),
                state_after: Some(AuditState::DeadLetter(DeadLetterState::Replayed)),
                reason: noted.as_deref(),
                result: AuditResult::Ok,
                client_addr: req.actor.client_addr,
                recovery_seconds: Some(recovery_seconds(dl.dead_lettered_at, now)),
            },
            at,
        )
        .await?;
    let outbox_id = tx
        .enqueue(&NewOutboxRow {
            consumer: &dl.consumer,
            topic: &dl.queue,
            key: &dl.key,
            payload: &dl.payload,
            origin: OutboxOrigin::Replay,
            dead_letter_id: Some(dl.id),
            audit_id: Some(audit_id),
            at,
        })
        .await?;
    tx.link_replay(dl.id, outbox_id).await?;
    Ok(ActionOutcome::Done {
        audit_id,
        outbox_id: Some(outbox_id),
        summary: summary(AuditAction::Replay, Some(&target), None, Some(outbox_id)),
    })
}

/// Discards the open dead letter `req` names, inside `tx`.
pub(super) async fn discard(tx: &mut Tx, req: &DiscardRequest<'_>) -> StoreResult<ActionOutcome> {
    let dl = match open_dead_letter(tx, req.dead_letter_id, req.scope).await? {
        Ok(dl) => dl,
        Err(answer) => return Ok(answer),
    };
    let reason = req.reason.as_str();
    let claim = tx.read_claim(&dl.consumer, &dl.key).await?;
    if claim.as_ref().is_none_or(|c| c.status != ClaimStatus::Sent) {
        return Ok(refused(
            "Only a dead letter whose key is already sent can be discarded here: its effect happened. Replay this one instead.",
        ));
    }
    let now = Utc::now();
    if !close_dead_letter(
        tx,
        dl.id,
        DeadLetterState::Discarded,
        req.actor.name,
        Ts::from(now),
    )
    .await?
    {
        let current = dead_letter(tx, req.dead_letter_id, req.scope)
            .await?
            .unwrap_or(dl);
        return Ok(already_handled(&current));
    }
    let target = format!("dead_letter:{}", dl.id);
    let audit_id = tx
        .append_audit(&NewAuditEntry {
            action_id: Some(req.action_id.as_str()),
            actor: req.actor.name,
            actor_role: req.actor.role,
            action: AuditAction::Discard,
            consumer: Some(&dl.consumer),
            key: Some(&dl.key),
            target: Some(&target),
            state_before: Some(AuditState::DeadLetter(DeadLetterState::Open)),
            state_after: Some(AuditState::DeadLetter(DeadLetterState::Discarded)),
            reason: Some(reason),
            result: AuditResult::Ok,
            client_addr: req.actor.client_addr,
            recovery_seconds: Some(recovery_seconds(dl.dead_lettered_at, now)),
        })
        .await?;
    Ok(ActionOutcome::Done {
        audit_id,
        outbox_id: None,
        summary: summary(AuditAction::Discard, Some(&target), None, None),
    })
}

impl Tx {
    async fn link_replay(&mut self, dead_letter_id: i64, outbox_id: i64) -> StoreResult<()> {
        const SQL: &str = "UPDATE dead_letters SET replay_outbox_id = $2 WHERE id = $1";
        dispatch!(&mut self.inner, tx => { sqlx::query(SQL).bind(dead_letter_id).bind(outbox_id).execute(&mut **tx).await?; });
        Ok(())
    }
}
