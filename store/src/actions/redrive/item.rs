//! One item of a run: the single action of the run's kind on it — replay,
//! discard or resolve — as the run's starter, under an action id derived
//! from the run and the item, so a step taken twice is one action.

use idem_domain::{
    ClaimRetention, ConsumerName, DeadLetterId, IdempotencyKey, ResolveAs, RunKind, Within,
    action::{ActionId, ActionOutcome, MAX_REASON_CHARS, ProviderRef, Reason},
};
use sha2::{Digest, Sha256};

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
    /// The action id its start was sent with: the secret its items' ids
    /// are derived from.
    pub action_id: String,
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

/// The action id of one item's action: derived from the run's own action
/// id (its start form's, which nobody else saw) and the dead letter (or,
/// for a key, its place in the run), so a step taken twice is one action
/// and nobody can name an item's id from the run's number and a position.
pub(super) fn item_action_id(run: &Running, item: &Next) -> ActionId {
    let of = match item.dead_letter_id {
        Some(dead_letter) => format!("dl-{dead_letter}"),
        None => format!("key-{}", item.position),
    };
    derived_action_id(&run.action_id, &of)
}

/// The action id of the item `of` (`dl-{id}` or `key-{position}`) of the
/// run started with `run_action_id`.
pub(crate) fn derived_action_id(run_action_id: &str, of: &str) -> ActionId {
    let digest = Sha256::digest(format!("idem-run-item:{run_action_id}:{of}").as_bytes());
    ActionId::parse(&format!("item-{}", &hex::encode(digest)[..32]))
        .expect("hex digits and a dash, 37 characters")
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
    let action_id = item_action_id(run, item);
    let actor = Actor {
        name: &run.actor,
        role: &run.actor_role,
        client_addr: None,
    };
    let kind = run.kind()?;
    let from_run = format!("{} #{id}", kind.title().to_lowercase());
    // The starter's standing is read again before each item (`step`); the
    // items are those their start bound, within the starter's reach then.
    let scope = &Within::Every;
    match (kind, item.dead_letter_id.map(DeadLetterId::of_row)) {
        (RunKind::Replay, Some(dead_letter_id)) => {
            let reason = Reason::of_idem(from_run.as_str());
            let request = ReplayRequest {
                dead_letter_id,
                action_id: &action_id,
                actor,
                scope,
                override_verdict: false,
                reason: Some(&reason),
                retention,
            };
            replay(tx, &request, Accept::SafeOnly, When::Now).await
        }
        (RunKind::Discard, Some(dead_letter_id)) => {
            let reason = Reason::of_idem(item_reason(from_run.as_str(), run.reason.as_deref()));
            let request = DiscardRequest {
                dead_letter_id,
                action_id: &action_id,
                actor,
                scope,
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
    let reference = item
        .provider_ref
        .as_deref()
        .and_then(|r| ProviderRef::parse(r).ok().flatten());
    let Some(resolution) = how.resolution(reference.as_ref()) else {
        return Ok(ActionOutcome::Refused {
            reason: "Marking an outcome sent needs the provider's reference.".into(),
        });
    };
    let reason = Reason::of_idem(item_reason(from_run, run.reason.as_deref()));
    let request = ResolveRequest {
        consumer: &consumer,
        key: &key,
        version: item.version.unwrap_or(0),
        resolution,
        action_id,
        actor,
        scope: &Within::Every,
        reason: Some(&reason),
    };
    resolve(tx, &request, chrono::Utc::now()).await
}
