//! Operator actions: replay a dead letter, discard one, resolve an unknown
//! outcome. Each is one transaction that changes the item only if it is still
//! in the state the operator saw (compare-and-set), writes its audit row in
//! the same transaction, and is idempotent by its action id: the audit log
//! holds the id under a unique constraint, and a resubmission returns the
//! first outcome without doing anything again. An id is bound to what it was
//! first used for — the action, its target and the actor — so the same id
//! sent for another dead letter, another key, another action or by another
//! person is `FormReused` (nothing done), never the first action's answer.

use chrono::{TimeDelta, Utc};
use idem_domain::{
    ClaimStatus, DeadLetter, DeadLetterState, OutboxOrigin,
    action::{self as text, ActionOutcome, Resolution, Verdict},
};

use crate::{
    NewAuditEntry, StoreError, StoreResult,
    consumer::NewOutboxRow,
    dialect::dispatch,
    rows::{DeadLetterRow, dead_letter_columns},
    store::{Store, Tx},
    ts::Ts,
};

/// Who acts, as the audit log records them.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub role: &'a str,
    pub client_addr: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
pub struct ReplayRequest<'a> {
    pub dead_letter_id: i64,
    pub action_id: &'a str,
    pub actor: Actor<'a>,
    /// The operator ticked "override" for a blocked verdict.
    pub override_verdict: bool,
    pub reason: Option<&'a str>,
    /// How long the consumer keeps claims.
    pub retention: TimeDelta,
}

#[derive(Debug, Clone, Copy)]
pub struct DiscardRequest<'a> {
    pub dead_letter_id: i64,
    pub action_id: &'a str,
    pub actor: Actor<'a>,
    pub reason: &'a str,
}

#[derive(Debug, Clone)]
pub struct ResolveRequest<'a> {
    pub consumer: &'a str,
    pub key: &'a str,
    /// The claim version the operator saw.
    pub version: i64,
    pub resolution: Resolution,
    pub action_id: &'a str,
    pub actor: Actor<'a>,
    pub reason: Option<&'a str>,
}

fn refused(reason: impl Into<String>) -> ActionOutcome {
    ActionOutcome::Refused {
        reason: reason.into(),
    }
}

/// What a finished action says, rebuilt the same way for a resubmission.
fn summary(
    action: &str,
    target: Option<&str>,
    state_after: Option<&str>,
    outbox_id: Option<i64>,
) -> String {
    let outbox = outbox_id
        .map(|id| format!(" through outbox row #{id}"))
        .unwrap_or_default();
    match (action, target.and_then(|t| t.strip_prefix("dead_letter:"))) {
        ("replay", Some(id)) => format!("Dead letter #{id} replayed{outbox} with the same key."),
        ("discard", Some(id)) => format!("Dead letter #{id} discarded."),
        (_, _) => format!(
            "Outcome resolved: {}{outbox}.",
            state_after.unwrap_or("done")
        ),
    }
}

/// What an action id is bound to once it has been used: the action, its
/// target and who acted. The same id with the same binding is the same
/// action (a resubmission); with any other binding it is a form used twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Binding<'a> {
    /// The audit spelling (`replay`, `discard`, `resolve:sent`, …).
    action: &'a str,
    target: Target<'a>,
    actor: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target<'a> {
    DeadLetter(i64),
    /// A claim at the version the form showed: a claim resolved, gone
    /// unknown again and shown anew is a new target, not a resubmission.
    Claim {
        consumer: &'a str,
        key: &'a str,
        version: i64,
    },
}

impl Target<'_> {
    /// The audit log's `target` column for this target.
    fn column(&self) -> Option<String> {
        match self {
            Target::DeadLetter(id) => Some(format!("dead_letter:{id}")),
            Target::Claim { .. } => None,
        }
    }
}

impl<'a> ReplayRequest<'a> {
    fn binding(&self) -> Binding<'a> {
        Binding {
            action: "replay",
            target: Target::DeadLetter(self.dead_letter_id),
            actor: self.actor.name,
        }
    }
}

impl<'a> DiscardRequest<'a> {
    fn binding(&self) -> Binding<'a> {
        Binding {
            action: "discard",
            target: Target::DeadLetter(self.dead_letter_id),
            actor: self.actor.name,
        }
    }
}

impl<'a> ResolveRequest<'a> {
    fn binding(&self) -> Binding<'a> {
        Binding {
            action: self.resolution.action(),
            target: Target::Claim {
                consumer: self.consumer,
                key: self.key,
                version: self.version,
            },
            actor: self.actor.name,
        }
    }
}

/// A resolution's state before, as its audit row records it (and as the
/// binding of its action id compares it).
fn unknown_at(version: i64) -> String {
    format!("unknown (version {version})")
}

/// An action id's audit row, as far as its binding and outcome go.
#[derive(sqlx::FromRow)]
struct UsedId {
    id: i64,
    actor: String,
    action: String,
    consumer: Option<String>,
    idempotency_key: Option<String>,
    target: Option<String>,
    state_before: Option<String>,
    state_after: Option<String>,
}

impl UsedId {
    fn is_bound_to(&self, binding: &Binding<'_>) -> bool {
        let same_target = match binding.target {
            Target::DeadLetter(_) => self.target == binding.target.column(),
            Target::Claim {
                consumer,
                key,
                version,
            } => {
                self.target.is_none()
                    && self.consumer.as_deref() == Some(consumer)
                    && self.idempotency_key.as_deref() == Some(key)
                    && self.state_before.as_deref() == Some(&unknown_at(version))
            }
        };
        self.action == binding.action && same_target && self.actor == binding.actor
    }
}

impl Store {
    /// The outcome of an action id already in the audit log: the first
    /// outcome when `binding` is what the id was used for, `FormReused`
    /// when it was used for anything else.
    async fn outcome_of(
        &self,
        action_id: &str,
        binding: &Binding<'_>,
    ) -> StoreResult<Option<ActionOutcome>> {
        const AUDIT: &str = "SELECT id, actor, action, consumer, idempotency_key, target, state_before, state_after \
             FROM audit_log WHERE action_id = $1";
        const OUTBOX: &str = "SELECT id FROM outbox WHERE audit_id = $1 ORDER BY id LIMIT 1";
        let row: Option<UsedId> = dispatch!(&self.pools, pool => {
            sqlx::query_as(AUDIT).bind(action_id).fetch_optional(pool).await?
        });
        let Some(used) = row else {
            return Ok(None);
        };
        let outbox_id: Option<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(OUTBOX).bind(used.id).fetch_optional(pool).await?
        });
        let summary = summary(
            &used.action,
            used.target.as_deref(),
            used.state_after.as_deref(),
            outbox_id,
        );
        if !used.is_bound_to(binding) {
            let by = if used.actor == binding.actor {
                String::new()
            } else {
                format!(" by {}", used.actor)
            };
            let key = match (&used.consumer, &used.idempotency_key) {
                (Some(consumer), Some(key)) => format!(" (key {key} of {consumer})"),
                _ => String::new(),
            };
            return Ok(Some(ActionOutcome::FormReused {
                first: format!("{}{key}{by}", summary.trim_end_matches('.')),
            }));
        }
        Ok(Some(ActionOutcome::Done {
            audit_id: used.id,
            outbox_id,
            summary,
        }))
    }

    /// Commits a `Done`, rolls back anything else; a resubmission that lost
    /// the race to its twin returns the twin's outcome.
    async fn settle(
        &self,
        tx: Tx,
        result: StoreResult<ActionOutcome>,
        action_id: &str,
        binding: &Binding<'_>,
    ) -> StoreResult<ActionOutcome> {
        let error = match result {
            Ok(done @ ActionOutcome::Done { .. }) => match tx.commit().await {
                Ok(()) => return Ok(done),
                Err(err) => err,
            },
            Ok(other) => {
                tx.rollback().await?;
                return Ok(other);
            }
            Err(err) => {
                let _ = tx.rollback().await;
                err
            }
        };
        if error.is_unique_violation()
            && let Some(first) = self.outcome_of(action_id, binding).await?
        {
            return Ok(first);
        }
        Err(error)
    }

    pub async fn replay_dead_letter(&self, req: &ReplayRequest<'_>) -> StoreResult<ActionOutcome> {
        self.replay_dead_letter_at(req, Ts::now()).await
    }

    /// [`Store::replay_dead_letter`] as of `at`: when the operator acted.
    /// Only the demo's history replays in the past (its simulated on-call).
    pub async fn replay_dead_letter_at(
        &self,
        req: &ReplayRequest<'_>,
        at: Ts,
    ) -> StoreResult<ActionOutcome> {
        let binding = req.binding();
        if let Some(first) = self.outcome_of(req.action_id, &binding).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let result = replay(&mut tx, req, not_after_now(at)).await;
        self.settle(tx, result, req.action_id, &binding).await
    }

    pub async fn discard_dead_letter(
        &self,
        req: &DiscardRequest<'_>,
    ) -> StoreResult<ActionOutcome> {
        let binding = req.binding();
        if let Some(first) = self.outcome_of(req.action_id, &binding).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let result = discard(&mut tx, req).await;
        self.settle(tx, result, req.action_id, &binding).await
    }

    pub async fn resolve_unknown(&self, req: &ResolveRequest<'_>) -> StoreResult<ActionOutcome> {
        self.resolve_unknown_at(req, Ts::now()).await
    }

    /// [`Store::resolve_unknown`] as of `at`: when the operator acted. Only
    /// the demo's history resolves in the past (its simulated on-call).
    pub async fn resolve_unknown_at(
        &self,
        req: &ResolveRequest<'_>,
        at: Ts,
    ) -> StoreResult<ActionOutcome> {
        let binding = req.binding();
        if let Some(first) = self.outcome_of(req.action_id, &binding).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let result = resolve(&mut tx, req, not_after_now(at)).await;
        self.settle(tx, result, req.action_id, &binding).await
    }
}

/// An action "as of" the future happens now: history is only ever
/// written backwards (the demo's on-call), never ahead of the clock.
fn not_after_now(at: Ts) -> chrono::DateTime<Utc> {
    at.0.min(Utc::now())
}

/// Seconds from `since` to `now`; never negative, even for an action dated
/// before the thing it recovers (clock skew between replicas, or history).
fn recovery_seconds(since: chrono::DateTime<Utc>, now: chrono::DateTime<Utc>) -> f64 {
    ((now - since).num_milliseconds() as f64 / 1000.0).max(0.0)
}

async fn dead_letter(tx: &mut Tx, id: i64) -> StoreResult<Option<DeadLetter>> {
    const SQL: &str = concat!(
        "SELECT ",
        dead_letter_columns!(),
        " FROM dead_letters WHERE id = $1"
    );
    let row: Option<DeadLetterRow> = dispatch!(&mut tx.inner, tx => {
        sqlx::query_as(SQL).bind(id).fetch_optional(&mut **tx).await?
    });
    row.map(DeadLetter::try_from).transpose()
}

fn already_handled(dl: &DeadLetter) -> ActionOutcome {
    ActionOutcome::Conflict {
        by: dl.resolved_by.clone().unwrap_or_else(|| "someone".into()),
        at: dl.resolved_at,
        now: dl.state.to_string(),
    }
}

/// Moves an open dead letter to `state`; `false` when it was no longer open.
/// The open dead letter an action is about, or the answer that ends the
/// action: there is no such dead letter, or someone already handled it.
async fn open_dead_letter(tx: &mut Tx, id: i64) -> StoreResult<Result<DeadLetter, ActionOutcome>> {
    Ok(match dead_letter(tx, id).await? {
        None => Err(refused(format!("There is no dead letter {id}."))),
        Some(dl) if dl.state != DeadLetterState::Open => Err(already_handled(&dl)),
        Some(dl) => Ok(dl),
    })
}

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

async fn replay(
    tx: &mut Tx,
    req: &ReplayRequest<'_>,
    now: chrono::DateTime<Utc>,
) -> StoreResult<ActionOutcome> {
    let dl = match open_dead_letter(tx, req.dead_letter_id).await? {
        Ok(dl) => dl,
        Err(answer) => return Ok(answer),
    };
    let claim = tx.read_claim(&dl.consumer, &dl.key).await?;
    let verdict = Verdict::of(claim.as_ref(), req.retention, now);
    let reason = match text::reason(req.reason.unwrap_or_default()) {
        Ok(reason) => reason,
        Err(err) => return Ok(refused(err.to_string())),
    };
    if verdict.needs_override() && !(req.override_verdict && reason.is_some()) {
        return Ok(refused(format!(
            "{}. To replay anyway, tick the override and give a reason.",
            verdict.title()
        )));
    }
    let at = Ts::from(now);
    if !close_dead_letter(tx, dl.id, DeadLetterState::Replayed, req.actor.name, at).await? {
        let current = dead_letter(tx, dl.id).await?.unwrap_or(dl);
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
                action_id: Some(req.action_id),
                actor: req.actor.name,
                actor_role: req.actor.role,
                action: "replay",
                consumer: Some(&dl.consumer),
                key: Some(&dl.key),
                target: Some(&target),
                state_before: Some("open"),
                state_after: Some("replayed"),
                reason: noted.as_deref(),
                result: "ok",
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
        summary: summary("replay", Some(&target), Some("replayed"), Some(outbox_id)),
    })
}

async fn discard(tx: &mut Tx, req: &DiscardRequest<'_>) -> StoreResult<ActionOutcome> {
    let dl = match open_dead_letter(tx, req.dead_letter_id).await? {
        Ok(dl) => dl,
        Err(answer) => return Ok(answer),
    };
    let reason = match text::reason(req.reason) {
        Ok(Some(reason)) => reason,
        Ok(None) => return Ok(refused("Discarding needs a reason.")),
        Err(err) => return Ok(refused(err.to_string())),
    };
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
        let current = dead_letter(tx, dl.id).await?.unwrap_or(dl);
        return Ok(already_handled(&current));
    }
    let target = format!("dead_letter:{}", dl.id);
    let audit_id = tx
        .append_audit(&NewAuditEntry {
            action_id: Some(req.action_id),
            actor: req.actor.name,
            actor_role: req.actor.role,
            action: "discard",
            consumer: Some(&dl.consumer),
            key: Some(&dl.key),
            target: Some(&target),
            state_before: Some("open"),
            state_after: Some("discarded"),
            reason: Some(reason),
            result: "ok",
            client_addr: req.actor.client_addr,
            recovery_seconds: Some(recovery_seconds(dl.dead_lettered_at, now)),
        })
        .await?;
    Ok(ActionOutcome::Done {
        audit_id,
        outbox_id: None,
        summary: summary("discard", Some(&target), None, None),
    })
}

async fn resolve(
    tx: &mut Tx,
    req: &ResolveRequest<'_>,
    now: chrono::DateTime<Utc>,
) -> StoreResult<ActionOutcome> {
    let reason = match text::reason(req.reason.unwrap_or_default()) {
        Ok(reason) => reason,
        Err(err) => return Ok(refused(err.to_string())),
    };
    let provider_ref = match &req.resolution {
        Resolution::Sent { provider_ref } => match text::provider_ref(provider_ref) {
            Ok(Some(r)) => Some(r.to_owned()),
            Ok(None) => {
                return Ok(refused(
                    "Marking an outcome sent needs the provider's reference.",
                ));
            }
            Err(err) => return Ok(refused(err.to_string())),
        },
        Resolution::FailedPermanently if reason.is_none() => {
            return Ok(refused(
                "Marking an outcome failed for good needs a reason.",
            ));
        }
        _ => None,
    };
    let Some(claim) = tx.read_claim(req.consumer, req.key).await? else {
        return Ok(refused(format!(
            "No consumer named “{}” has a claim for “{}”.",
            req.consumer, req.key
        )));
    };
    if claim.status != ClaimStatus::Unknown || claim.version != req.version {
        return conflict_on_claim(tx, req).await;
    }
    let status = req.resolution.status();
    let error = match &req.resolution {
        Resolution::Sent { .. } => None,
        _ => Some(format!(
            "resolved failed by {}: {}",
            req.actor.name,
            reason.unwrap_or("no reason given")
        )),
    };
    let changed = tx
        .resolve_claim(
            &claim,
            status,
            provider_ref.as_deref(),
            error.as_deref(),
            Ts::from(now),
        )
        .await?;
    if !changed {
        return conflict_on_claim(tx, req).await;
    }
    let after = match &provider_ref {
        Some(r) => format!(
            "sent (provider reference {r}, version {})",
            claim.version + 1
        ),
        None => format!("{status} (version {})", claim.version + 1),
    };
    let audit_id = tx
        .append_audit_at(
            &NewAuditEntry {
                action_id: Some(req.action_id),
                actor: req.actor.name,
                actor_role: req.actor.role,
                action: req.resolution.action(),
                consumer: Some(req.consumer),
                key: Some(req.key),
                target: None,
                state_before: Some(&unknown_at(claim.version)),
                state_after: Some(&after),
                reason,
                result: "ok",
                client_addr: req.actor.client_addr,
                recovery_seconds: Some(recovery_seconds(claim.status_at, now)),
            },
            Ts::from(now),
        )
        .await?;
    let outbox_id = match req.resolution {
        Resolution::FailedRetry => {
            let (topic, payload) = tx.last_known_message(req.consumer, req.key).await?;
            Some(
                tx.enqueue(&NewOutboxRow {
                    consumer: req.consumer,
                    topic: &topic,
                    key: req.key,
                    payload: &payload,
                    origin: OutboxOrigin::Resolution,
                    dead_letter_id: None,
                    audit_id: Some(audit_id),
                    at: Ts::from(now),
                })
                .await?,
            )
        }
        _ => None,
    };
    Ok(ActionOutcome::Done {
        audit_id,
        outbox_id,
        summary: summary(req.resolution.action(), None, Some(&after), outbox_id),
    })
}

/// Who changed the claim first, and to what: the latest audit entry about
/// the key when it is no older than the claim's change, else the consumer.
async fn conflict_on_claim(tx: &mut Tx, req: &ResolveRequest<'_>) -> StoreResult<ActionOutcome> {
    let claim = tx.read_claim(req.consumer, req.key).await?;
    let latest = tx.latest_audit_for_key(req.consumer, req.key).await?;
    Ok(match claim {
        None => refused("The claim no longer exists."),
        Some(claim) => {
            let by_operator = latest.filter(|(_, at, _)| *at >= claim.status_at);
            let now = format!("{} (version {})", claim.status, claim.version);
            match by_operator {
                Some((by, at, _)) => ActionOutcome::Conflict {
                    by,
                    at: Some(at),
                    now,
                },
                None => ActionOutcome::Conflict {
                    by: format!("the consumer {}", claim.consumer),
                    at: Some(claim.status_at),
                    now,
                },
            }
        }
    })
}

impl Tx {
    /// One claim, read inside this transaction.
    pub async fn read_claim(
        &mut self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<Option<idem_domain::Claim>> {
        use crate::rows::{ClaimRow, claim_columns};
        const SQL: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE consumer = $1 AND idempotency_key = $2"
        );
        let row: Option<ClaimRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(SQL).bind(consumer).bind(key).fetch_optional(&mut **tx).await?
        });
        row.map(idem_domain::Claim::try_from).transpose()
    }

    async fn link_replay(&mut self, dead_letter_id: i64, outbox_id: i64) -> StoreResult<()> {
        const SQL: &str = "UPDATE dead_letters SET replay_outbox_id = $2 WHERE id = $1";
        dispatch!(&mut self.inner, tx => { sqlx::query(SQL).bind(dead_letter_id).bind(outbox_id).execute(&mut **tx).await?; });
        Ok(())
    }

    /// Compare-and-set: only a claim still `unknown` at the version seen.
    async fn resolve_claim(
        &mut self,
        seen: &idem_domain::Claim,
        status: ClaimStatus,
        provider_ref: Option<&str>,
        error: Option<&str>,
        at: Ts,
    ) -> StoreResult<bool> {
        const SQL: &str = "UPDATE claims SET status = $3, status_at = $4, outcome_at = $4, \
             provider_ref = COALESCE($5, provider_ref), last_error = $6, lease_until = NULL, version = version + 1 \
             WHERE consumer = $1 AND idempotency_key = $2 AND status = 'unknown' AND version = $7";
        let changed = dispatch!(&mut self.inner, tx => {
            sqlx::query(SQL).bind(&seen.consumer).bind(&seen.key).bind(status.as_str()).bind(at)
                .bind(provider_ref).bind(error).bind(seen.version).execute(&mut **tx).await?.rows_affected()
        });
        Ok(changed == 1)
    }

    async fn latest_audit_for_key(
        &mut self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<Option<(String, chrono::DateTime<Utc>, Option<String>)>> {
        const SQL: &str = "SELECT actor, at, state_after FROM audit_log WHERE consumer = $1 AND idempotency_key = $2 \
             ORDER BY at DESC, id DESC LIMIT 1";
        let row: Option<(String, Ts, Option<String>)> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(SQL).bind(consumer).bind(key).fetch_optional(&mut **tx).await?
        });
        Ok(row.map(|(actor, at, after)| (actor, at.0, after)))
    }

    /// The topic and payload a retry of this key should carry: the latest
    /// dead letter's or outbox row's, else an envelope that names the key so
    /// the consumer can re-read the business fact.
    async fn last_known_message(
        &mut self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<(String, String)> {
        const SQL: &str = "SELECT topic, payload, at FROM ( \
             SELECT queue AS topic, payload, dead_lettered_at AS at FROM dead_letters WHERE consumer = $1 AND idempotency_key = $2 \
             UNION ALL \
             SELECT topic, payload, created_at AS at FROM outbox WHERE consumer = $1 AND idempotency_key = $2 AND origin <> 'application' \
             ) AS known ORDER BY at DESC LIMIT 1";
        let row: Option<(String, String, Ts)> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(SQL).bind(consumer).bind(key).fetch_optional(&mut **tx).await?
        });
        Ok(match row {
            Some((topic, payload, _)) => (topic, payload),
            None => (
                consumer.to_owned(),
                serde_json::json!({ "idempotency_key": key, "redrive": "resolution" }).to_string(),
            ),
        })
    }
}

impl StoreError {
    /// A unique constraint refused the write (for actions: the action id was
    /// already used by a concurrent submission).
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}
