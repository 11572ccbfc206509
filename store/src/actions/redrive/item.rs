//! One item of a run: the single action of the run's kind on it — replay,
//! discard or resolve — as the run's starter, under an action id derived
//! from the run and the item, so a step taken twice is one action.

use idem_domain::{
    ClaimRetention, ConsumerName, IdempotencyKey, ResolveAs, RunKind,
    action::{ActionId, ActionOutcome, MAX_REASON_CHARS},
};

use crate::{
    StoreResult,
    actions::{
        Actor, DiscardRequest, ReplayRequest, ResolveRequest, When,
        dead_letter::{Accept, discard, replay},
        resolve::resolve,
    },
    store::Tx,
};

/// A running run, as a step needs it.
#[derive(sqlx::FromRow)]
pub(super) struct Running {
    pub state: String,
    pub kind: String,
    pub resolve_as: Option<String>,
    pub reason: Option<String>,
    pub actor: String,
    pub actor_role: String,
    pub starter_epoch: Option<i64>,
    /// The account read again (`None`: the one named `actor`).
    pub account: Option<String>,
    /// The token it was started with, which must stay live.
    pub token_id: Option<i64>,
}

impl Running {
    pub(super) fn kind(&self) -> StoreResult<RunKind> {
        crate::rows::parse(&self.kind)
    }
}

/// The action id of one item's action: derived from the run and the dead
/// letter (or, for a key, its place in the run), so a step taken twice is
/// one action.
pub(super) fn item_action_id(redrive: i64, item: &Next) -> ActionId {
    let id = match item.dead_letter_id {
        Some(dead_letter) => format!("redrive-{redrive}-dl-{dead_letter}"),
        None => format!("redrive-{redrive}-key-{}", item.position),
    };
    ActionId::parse(&id).expect("digits and dashes, at least 8 characters")
}

/// The next item of a run.
#[derive(sqlx::FromRow)]
pub(super) struct Next {
    pub position: i64,
    pub dead_letter_id: Option<i64>,
    pub consumer: String,
    pub idempotency_key: String,
    pub version: Option<i64>,
    pub provider_ref: Option<String>,
}

/// Why an item was skipped, from its action's answer.
pub(super) fn skipped_because(answer: ActionOutcome) -> String {
    match answer {
        ActionOutcome::Done { summary, .. } => summary,
        ActionOutcome::Refused { reason } => reason,
        ActionOutcome::Conflict { by, now, .. } => format!("Already {now} by {by}."),
        ActionOutcome::FormReused { first } => first,
    }
}

/// An item's audit reason: the run, then the starter's reason, cut to fit
/// the bound a single action checks (the longest reason a starter may give
/// would not fit after `bulk discard #7: `, and every item would be refused).
fn item_reason(from_run: &str, reason: Option<&str>) -> String {
    let Some(reason) = reason else {
        return from_run.to_owned();
    };
    let room = MAX_REASON_CHARS.saturating_sub(from_run.chars().count() + 2);
    let kept: String = reason.chars().take(room).collect();
    format!("{from_run}: {kept}")
}

/// The single action of `run`'s kind on `item`, as the run's starter.
pub(super) async fn act_on(
    tx: &mut Tx,
    id: i64,
    run: &Running,
    item: &Next,
    retention: &ClaimRetention,
) -> StoreResult<ActionOutcome> {
    let action_id = item_action_id(id, item);
    let actor = Actor {
        name: &run.actor,
        role: &run.actor_role,
        client_addr: None,
    };
    let kind = run.kind()?;
    let from_run = format!("{} #{id}", kind.title().to_lowercase());
    match (kind, item.dead_letter_id) {
        (RunKind::Replay, Some(dead_letter_id)) => {
            let request = ReplayRequest {
                dead_letter_id,
                action_id: &action_id,
                actor,
                override_verdict: false,
                reason: Some(&from_run),
                retention,
            };
            replay(tx, &request, Accept::SafeOnly, When::Now).await
        }
        (RunKind::Discard, Some(dead_letter_id)) => {
            let reason = item_reason(from_run.as_str(), run.reason.as_deref());
            let request = DiscardRequest {
                dead_letter_id,
                action_id: &action_id,
                actor,
                reason: &reason,
            };
            discard(tx, &request).await
        }
        (RunKind::Resolve, None) => resolve_item(tx, run, item, &action_id, actor, &from_run).await,
        _ => Err(crate::StoreError::Contract(format!(
            "{from_run}'s item {} does not fit its kind",
            item.position
        ))),
    }
}

/// A bulk resolve's key, resolved through the single resolution at the
/// version the run bound it to.
async fn resolve_item(
    tx: &mut Tx,
    run: &Running,
    item: &Next,
    action_id: &ActionId,
    actor: Actor<'_>,
    from_run: &str,
) -> StoreResult<ActionOutcome> {
    let (Ok(consumer), Ok(key)) = (
        ConsumerName::parse(item.consumer.as_str()),
        IdempotencyKey::parse(item.idempotency_key.as_str()),
    ) else {
        return Ok(ActionOutcome::Refused {
            reason: "The key or its consumer's name is not a valid one.".into(),
        });
    };
    let how: ResolveAs = crate::rows::parse(run.resolve_as.as_deref().unwrap_or_default())?;
    let reason = item_reason(from_run, run.reason.as_deref());
    let request = ResolveRequest {
        consumer: &consumer,
        key: &key,
        version: item.version.unwrap_or(0),
        resolution: how.resolution(item.provider_ref.as_deref()),
        action_id,
        actor,
        reason: Some(&reason),
    };
    resolve(tx, &request, chrono::Utc::now()).await
}
