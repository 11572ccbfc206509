//! Starting a bulk resolve: the keys it was given, each bound to the claim
//! version its starter saw (or, for a pasted list that names none, the one
//! the claim has as the run starts), resolved one per step through the
//! single resolution, whose compare-and-set skips a key someone changed.

use idem_domain::{
    BulkKey, ResolveAs, RunKind,
    action::{ActionId, Reason},
};

use super::{
    Actor, RedriveStart, ViaToken,
    start::{NewItem, NewRun, StartBinding, StartIn, insert_run},
};
use crate::facets::Runs;
use crate::{StoreResult, dialect::dispatch, store::Tx};

#[derive(Debug, Clone, Copy)]
pub struct BulkResolveRequest<'a> {
    /// The keys, in the order they are taken; checked with
    /// [`idem_domain::check_keys`] (a start that fails it starts nothing).
    pub keys: &'a [BulkKey],
    pub resolve_as: ResolveAs,
    /// Recorded on each key's audit row (required to resolve as failed for
    /// good, as a single resolution needs it).
    pub reason: Option<&'a Reason>,
    /// Where the keys came from, in words (`the findings of “Unknown past
    /// objective” shown`, `a pasted list of references`).
    pub source: &'a str,
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    /// As [`super::RedriveRequest::rights`].
    pub rights: Option<&'a idem_domain::Rights>,
    pub via_token: Option<ViaToken<'a>>,
}

impl BulkResolveRequest<'_> {
    /// The run's selection, in words.
    fn selection(&self) -> String {
        format!("{} (as {})", self.source, self.resolve_as)
    }

    /// A digest of every key, version and reference: the same action id
    /// with other keys is another form, not a resubmission.
    fn offer(&self) -> String {
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for byte in bytes.iter().chain([&0xff]) {
                digest ^= u64::from(*byte);
                digest = digest.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for k in self.keys {
            eat(k.consumer.as_str().as_bytes());
            eat(k.key.as_str().as_bytes());
            eat(&k.version.unwrap_or(-1).to_le_bytes());
            eat(k.provider_ref.as_deref().unwrap_or_default().as_bytes());
        }
        format!("keys.{}.{digest:016x}", self.keys.len())
    }
}

impl Runs<'_> {
    /// Starts a bulk resolve of exactly `req.keys`: the run, its items and
    /// its summary audit row in one transaction. Each key is resolved in
    /// [`Store::redrive_step`], only if its claim is still at the version
    /// bound here and still unresolved.
    pub async fn start_bulk_resolve(
        self,
        req: &BulkResolveRequest<'_>,
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

impl StartIn for BulkResolveRequest<'_> {
    fn start_in<'t>(
        &'t self,
        tx: &'t mut Tx,
    ) -> impl std::future::Future<Output = StoreResult<RedriveStart>> + Send + 't {
        start_own(tx, self)
    }
}

/// A bulk resolve's start recorded as its own selection and offer.
async fn start_own(tx: &mut Tx, req: &BulkResolveRequest<'_>) -> StoreResult<RedriveStart> {
    start_keys(tx, req, &req.selection(), &req.offer()).await
}

/// [`Store::start_bulk_resolve`] inside `tx`, the run recorded as taking
/// `selection` (in words) as offered by `offer` (what a resubmission is
/// compared with).
pub(super) async fn start_keys(
    tx: &mut Tx,
    req: &BulkResolveRequest<'_>,
    selection: &str,
    offer: &str,
) -> StoreResult<RedriveStart> {
    if let Err(bad) = idem_domain::check_keys(req.resolve_as, req.keys) {
        let lines: Vec<String> = bad.iter().map(ToString::to_string).collect();
        return Ok(RedriveStart::NotAllowed(lines.join("; ")));
    }
    let reason = req.reason.map(Reason::as_str);
    if req.resolve_as == ResolveAs::Failed && reason.is_none() {
        return Ok(RedriveStart::NotAllowed(
            "marking outcomes failed for good needs a reason".into(),
        ));
    }
    let name = req.via_token.map_or(req.actor.name, |t| t.owner);
    let epoch = match tx.starter_epoch(name, req.rights).await? {
        Ok(epoch) => epoch,
        Err(refused) => return Ok(refused),
    };
    let mut versions = Vec::with_capacity(req.keys.len());
    for k in req.keys {
        versions.push(match k.version {
            Some(version) => version,
            // No claim: the step says so for this key; nothing matches 0.
            None => tx.claim_version(k).await?.unwrap_or(0),
        });
    }
    let items: Vec<NewItem<'_>> = req
        .keys
        .iter()
        .zip(versions)
        .map(|(k, version)| NewItem {
            dead_letter_id: None,
            consumer: k.consumer.as_str(),
            key: k.key.as_str(),
            version: Some(version),
            provider_ref: k.provider_ref.as_deref().map(str::trim),
        })
        .collect();
    let mut consumers: Vec<&str> = items.iter().map(|i| i.consumer).collect();
    consumers.sort_unstable();
    consumers.dedup();
    let run = NewRun {
        kind: RunKind::Resolve,
        resolve_as: Some(req.resolve_as),
        reason,
        action_id: req.action_id,
        actor: req.actor,
        selection,
        offer,
        consumer: (consumers.len() == 1).then(|| consumers[0]),
        starter_epoch: epoch,
        via_token: req.via_token,
    };
    insert_run(tx, &run, &items).await
}

impl Tx {
    /// The version of `k`'s claim now, if there is one.
    async fn claim_version(&mut self, k: &BulkKey) -> StoreResult<Option<i64>> {
        const SQL: &str = "SELECT version FROM claims WHERE consumer = $1 AND idempotency_key = $2";
        let version = dispatch!(&mut self.inner, tx => {
            sqlx::query_scalar(SQL).bind(k.consumer.as_str()).bind(k.key.as_str())
                .fetch_optional(&mut **tx).await?
        });
        Ok(version)
    }
}
