//! Operator actions: replay a dead letter, discard one, resolve an unknown
//! outcome. Each is one transaction that changes the item only if it is still
//! in the state the operator saw (compare-and-set), writes its audit row in
//! the same transaction, and is idempotent by its action id: the audit log
//! holds the id under a unique constraint, and a resubmission returns the
//! first outcome without doing anything again. An id is bound to what it was
//! first used for — the action, its target and the actor — so the same id
//! sent for another dead letter, another key, another action or by another
//! person is `FormReused` (nothing done), never the first action's answer.

use chrono::Utc;
use idem_domain::{
    AuditAction, AuditState, ConsumerName, DeadLetterId, IdempotencyKey, Within,
    action::{ActionId, ActionOutcome, Reason, Resolution},
};

use crate::facets::Actions;
use crate::{
    StoreError, StoreResult,
    dialect::dispatch,
    store::{Store, Tx},
    ts::Ts,
};

mod dead_letter;
pub(crate) mod redrive;
mod resolve;

use dead_letter::{Accept, discard, replay};
pub use redrive::{
    BulkResolveRequest, LetterRun, REDRIVE_MAX, ReconciledResolve, RedriveRequest, RedriveStart,
    RedriveStep, ViaToken,
};
use resolve::resolve;

/// Who acts, as the audit log records them.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub name: &'a str,
    pub role: &'a str,
    pub client_addr: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
pub struct ReplayRequest<'a> {
    pub dead_letter_id: DeadLetterId,
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    /// The consumers the actor may act on: a dead letter of any other is
    /// answered as one that does not exist.
    pub scope: &'a Within,
    /// The operator ticked "override" for a blocked verdict.
    pub override_verdict: bool,
    pub reason: Option<&'a Reason>,
    /// How long each consumer keeps claims.
    pub retention: &'a idem_domain::ClaimRetention,
}

#[derive(Debug, Clone, Copy)]
pub struct DiscardRequest<'a> {
    pub dead_letter_id: DeadLetterId,
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    /// As for a replay.
    pub scope: &'a Within,
    pub reason: &'a Reason,
}

#[derive(Debug, Clone)]
pub struct ResolveRequest<'a> {
    pub consumer: &'a ConsumerName,
    pub key: &'a IdempotencyKey,
    /// The claim version the operator saw.
    pub version: i64,
    pub resolution: Resolution,
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    /// The consumers the actor may act on: another's claim is answered as
    /// one that does not exist.
    pub scope: &'a Within,
    pub reason: Option<&'a Reason>,
}

fn refused(reason: impl Into<String>) -> ActionOutcome {
    ActionOutcome::Refused {
        reason: reason.into(),
    }
}

/// What a finished action says, rebuilt the same way for a resubmission.
fn summary(
    action: AuditAction,
    target: Option<&str>,
    state_after: Option<&AuditState>,
    outbox_id: Option<i64>,
) -> String {
    let outbox = outbox_id
        .map(|id| format!(" through outbox row #{id}"))
        .unwrap_or_default();
    match (action, target.and_then(|t| t.strip_prefix("dead_letter:"))) {
        (AuditAction::Replay, Some(id)) => {
            format!("Dead letter #{id} replayed{outbox} with the same key.")
        }
        (AuditAction::Discard, Some(id)) => format!("Dead letter #{id} discarded."),
        (_, _) => match state_after {
            Some(state) => format!("Outcome resolved: {state}{outbox}."),
            None => format!("Outcome resolved: done{outbox}."),
        },
    }
}

/// What an action id is bound to once it has been used: the action, its
/// target and who acted. The same id with the same binding is the same
/// action (a resubmission); with any other binding it is a form used twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Binding<'a> {
    action: AuditAction,
    target: Target<'a>,
    actor: &'a str,
    /// Whom the answer may name: the first use's key and actor are told
    /// only to someone who may act on its consumer.
    scope: &'a Within,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target<'a> {
    DeadLetter(DeadLetterId),
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
            action: AuditAction::Replay,
            target: Target::DeadLetter(self.dead_letter_id),
            actor: self.actor.name,
            scope: self.scope,
        }
    }
}

impl<'a> DiscardRequest<'a> {
    fn binding(&self) -> Binding<'a> {
        Binding {
            action: AuditAction::Discard,
            target: Target::DeadLetter(self.dead_letter_id),
            actor: self.actor.name,
            scope: self.scope,
        }
    }
}

impl<'a> ResolveRequest<'a> {
    fn binding(&self) -> Binding<'a> {
        Binding {
            action: self.resolution.action(),
            target: Target::Claim {
                consumer: self.consumer.as_str(),
                key: self.key.as_str(),
                version: self.version,
            },
            actor: self.actor.name,
            scope: self.scope,
        }
    }
}

/// A resolvable claim's state as the audit row records it before the
/// resolution (and as the binding of its action id compares it):
/// `unknown (version 3)`, or for an abandoned lease
/// `pending, lease expired 2026-12-03 02:14:09 UTC (version 3)`.
fn claim_state_before(claim: &idem_domain::Claim) -> AuditState {
    let mut state = idem_domain::ClaimState::at(claim.status, claim.version);
    if claim.status == idem_domain::ClaimStatus::Pending {
        state.lease_expired = claim.lease_until;
    }
    AuditState::Claim(state)
}

/// An action id's audit row, as far as its binding and outcome go.
#[derive(sqlx::FromRow)]
struct UsedRow {
    id: i64,
    actor: String,
    action: String,
    consumer: Option<String>,
    idempotency_key: Option<String>,
    target: Option<String>,
    state_before: Option<String>,
    state_after: Option<String>,
}

/// [`UsedRow`] read through the audit vocabulary.
struct UsedId {
    id: i64,
    actor: String,
    action: AuditAction,
    consumer: Option<String>,
    idempotency_key: Option<String>,
    target: Option<String>,
    state_before: Option<AuditState>,
    state_after: Option<AuditState>,
}

impl TryFrom<UsedRow> for UsedId {
    type Error = StoreError;
    fn try_from(row: UsedRow) -> StoreResult<Self> {
        Ok(UsedId {
            id: row.id,
            actor: row.actor,
            action: crate::rows::parse(&row.action)?,
            consumer: row.consumer,
            idempotency_key: row.idempotency_key,
            target: row.target,
            state_before: row.state_before.as_deref().map(AuditState::parse),
            state_after: row.state_after.as_deref().map(AuditState::parse),
        })
    }
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
                    && self.state_before.as_ref().and_then(AuditState::version) == Some(version)
            }
        };
        self.action == binding.action && same_target && self.actor == binding.actor
    }

    /// Whether the answer may say what the first use was: its consumer is
    /// one the asker may act on.
    fn may_be_told_to(&self, binding: &Binding<'_>) -> bool {
        self.consumer
            .as_deref()
            .is_some_and(|c| binding.scope.allows(c))
    }
}

impl Actions<'_> {
    pub async fn replay_dead_letter(self, req: &ReplayRequest<'_>) -> StoreResult<ActionOutcome> {
        self.once(Act::Replay(req, When::Now)).await
    }

    /// [`Store::replay_dead_letter`] as of `at`: when the operator acted.
    /// Only the demo's history replays in the past (its simulated on-call).
    pub async fn replay_dead_letter_at(
        self,
        req: &ReplayRequest<'_>,
        at: Ts,
    ) -> StoreResult<ActionOutcome> {
        self.once(Act::Replay(req, When::At(at))).await
    }

    pub async fn discard_dead_letter(self, req: &DiscardRequest<'_>) -> StoreResult<ActionOutcome> {
        self.once(Act::Discard(req)).await
    }

    pub async fn resolve_unknown(self, req: &ResolveRequest<'_>) -> StoreResult<ActionOutcome> {
        self.once(Act::Resolve(req, When::Now)).await
    }

    /// [`Store::resolve_unknown`] as of `at`: when the operator acted. Only
    /// the demo's history resolves in the past (its simulated on-call).
    pub async fn resolve_unknown_at(
        self,
        req: &ResolveRequest<'_>,
        at: Ts,
    ) -> StoreResult<ActionOutcome> {
        self.once(Act::Resolve(req, When::At(at))).await
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
        let row: Option<UsedRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(AUDIT).bind(action_id).fetch_optional(pool).await?
        });
        let Some(used) = row.map(UsedId::try_from).transpose()? else {
            return Ok(None);
        };
        let outbox_id: Option<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(OUTBOX).bind(used.id).fetch_optional(pool).await?
        });
        let summary = summary(
            used.action,
            used.target.as_deref(),
            used.state_after.as_ref(),
            outbox_id,
        );
        if !used.is_bound_to(binding) {
            // The answer is given only after the asker's rights on what
            // the id did are confirmed: anyone else learns nothing of it.
            if !used.may_be_told_to(binding) {
                return Ok(Some(ActionOutcome::FormReused {
                    first: "another action".into(),
                }));
            }
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

    /// Runs an action once: a resubmission of its action id returns the
    /// first outcome; otherwise it runs in a transaction of its own, which
    /// [`Store::settle`] commits (done) or rolls back (anything else).
    async fn once(&self, act: Act<'_, '_>) -> StoreResult<ActionOutcome> {
        let (action_id, binding) = (act.action_id(), act.binding());
        if let Some(first) = self.outcome_of(action_id, &binding).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let result = match act {
            Act::Replay(req, when) => replay(&mut tx, req, Accept::OperatorChoice, when).await,
            Act::Discard(req) => discard(&mut tx, req).await,
            Act::Resolve(req, when) => resolve(&mut tx, req, when.read()).await,
        };
        self.settle(tx, result, action_id, &binding).await
    }
}

/// One operator action, and when it was taken.
#[derive(Clone, Copy)]
enum Act<'r, 'a> {
    Replay(&'r ReplayRequest<'a>, When),
    Discard(&'r DiscardRequest<'a>),
    Resolve(&'r ResolveRequest<'a>, When),
}

impl<'r, 'a> Act<'r, 'a> {
    fn action_id(self) -> &'r str {
        match self {
            Act::Replay(req, _) => req.action_id.as_str(),
            Act::Discard(req) => req.action_id.as_str(),
            Act::Resolve(req, _) => req.action_id.as_str(),
        }
    }

    fn binding(self) -> Binding<'a> {
        match self {
            Act::Replay(req, _) => req.binding(),
            Act::Discard(req) => req.binding(),
            Act::Resolve(req, _) => req.binding(),
        }
    }
}

/// When an action happens.
#[derive(Debug, Clone, Copy)]
enum When {
    /// Now, read once the action holds its rows, so the times the audit log
    /// records follow the order the actions committed in.
    Now,
    /// At a moment in the past: the demo's history (its simulated on-call).
    /// A moment in the future happens now: history is only ever written
    /// backwards, never ahead of the clock.
    At(Ts),
}

impl When {
    fn read(self) -> chrono::DateTime<Utc> {
        match self {
            When::Now => Utc::now(),
            When::At(at) => at.0.min(Utc::now()),
        }
    }
}

/// Seconds from `since` to `now`; never negative, even for an action dated
/// before the thing it recovers (clock skew between replicas, or history).
fn recovery_seconds(since: chrono::DateTime<Utc>, now: chrono::DateTime<Utc>) -> f64 {
    ((now - since).num_milliseconds() as f64 / 1000.0).max(0.0)
}

impl StoreError {
    /// A unique constraint refused the write (for actions: the action id was
    /// already used by a concurrent submission).
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}
